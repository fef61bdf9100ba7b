/* raw_ethernet_bw / raw_ethernet_lat: perftest's raw Ethernet tools on
 * offpath's AF_XDP backend (io/xdp: frames for our UDP address and port
 * come straight to this process; ours leave through the TX ring to the MAC
 * -E names). Every payload carries a magic and its sequence number, and
 * bytes that depend on both, so the receiver checks each one.
 *
 * -q N (BW): N QPs, each -n frames, as perftest's raw QPs all send the
 * same headers; QP i's frames leave through queue i of the interface (a
 * NIC, or a veth pair, hands them to the peer's queue i) and carry i in
 * the top of their sequence number, so the server counts and checks each
 * QP's frames apart and both sides report each queue's frames. */
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/io.h"
#include "offpath/perf.h"
#include "perf_int.h"

#define MAGIC 0x4f505245u /* "OPRE" */
#define QUIET_NS (OP_NS_PER_S)               /* BW server: the client is done */
#define ECHO_LINGER_NS (300 * OP_NS_PER_MS)  /* lat server: answers late resends */
#define RESEND_NS (20 * OP_NS_PER_MS)        /* lat client: an echo this late was lost */
#define MAX_RESENDS 200
#define SIGINT_LOOK_NS (20 * OP_NS_PER_MS)    /* --run_infinitely: how often it looks */
#define RAWETH_FRAME_MASK ((1ull << OP_PERF_RAWETH_QP_SHIFT) - 1)

void op_perf_raweth_fill(uint8_t *p, size_t len, uint64_t seq)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(MAGIC >> (24 - 8 * i));
    for (int i = 0; i < 8; i++)
        p[4 + i] = (uint8_t)(seq >> (56 - 8 * i));
    for (size_t k = 12; k < len; k++)
        p[k] = (uint8_t)(seq * 131 + k * 7);
}

bool op_perf_raweth_check(const uint8_t *p, size_t len, uint64_t *seq)
{
    if (len < 12)
        return false;
    uint32_t m = 0;
    uint64_t s = 0;
    for (int i = 0; i < 4; i++)
        m = m << 8 | p[i];
    for (int i = 0; i < 8; i++)
        s = s << 8 | p[4 + i];
    for (size_t k = 12; k < len; k++)
        if (p[k] != (uint8_t)(s * 131 + k * 7))
            return false;
    *seq = s;
    return m == MAGIC;
}

struct raweth {
    const struct op_perf_raweth_config *cfg;
    FILE *out;
    struct op_io *io;
    struct op_pktbuf tx, rx;
    struct op_log log;
    uint32_t payload;
    uint32_t qps;
    uint64_t received, bad, dups, resends;
    uint64_t beyond_qps; /* good payloads of a QP past -q: the peer runs more */
    uint64_t per_qp[OP_PERF_RAWETH_MAX_QPS]; /* good frames of each QP */
    uint8_t *seen; /* BW server: a bit per QP and sequence number below -n */
    struct op_perf_bw_result bw;   /* the run's figures (--out_json) */
    struct op_perf_lat_result lat;
    bool have_result;
    /* --run_infinitely: the current row's start and frames, the last look at SIGINT */
    uint64_t row_start, row_count, sig_look;
    char why[200];
};

static int refuse(struct raweth *e, const char *fmt, const char *arg)
{
    snprintf(e->why, sizeof e->why, fmt, arg);
    return 1;
}

static void mac_text(const uint8_t m[6], char out[18])
{
    snprintf(out, 18, "%02X:%02X:%02X:%02X:%02X:%02X", m[0], m[1], m[2], m[3], m[4], m[5]);
}

static int open_io(struct raweth *e)
{
    const struct op_perf_raweth_config *c = e->cfg;
    uint8_t mine[6];
    char a[18], b[18];
    const struct op_io_xdp_config xc = {.ifname = c->ifname, .addr = op_addr_ipv4(c->src_ip),
                                        .port = c->src_port, .queues = e->qps, .log = &e->log};
    if (op_io_xdp_open_cfg(&xc, &e->io) != OP_OK) {
        snprintf(e->why, sizeof e->why, "-d %s: cannot drive %u queue%s of it through AF_XDP "
                 "(root, an IPv4 interface with -j's address%s)", c->ifname, e->qps,
                 e->qps > 1 ? "s" : "", e->qps > 1 ? ", as many queues as -q" : "");
        return 1;
    }
    (void)op_io_xdp_local_mac(e->io, mine);
    if (c->have_src_mac && memcmp(mine, c->src_mac, 6) != 0) {
        mac_text(c->src_mac, a);
        mac_text(mine, b);
        snprintf(e->why, sizeof e->why, "-B %s is not the MAC of %s (%s)", a, c->ifname, b);
        return 1;
    }
    if (c->have_dst_mac)
        (void)op_io_xdp_set_neighbour(e->io, c->dst_ip, c->dst_mac);
    uint32_t mtu = op_io_link_mtu(e->io);
    if (mtu != 0 && c->size > mtu + 14) {
        snprintf(e->why, sizeof e->why, "-s %u: the link carries frames of %u bytes at most",
                 c->size, mtu + 14);
        return 1;
    }
    if (op_pktbuf_init(&e->tx, OP_IO_BURST) != OP_OK || op_pktbuf_init(&e->rx, OP_IO_BURST) != OP_OK)
        return refuse(e, "%s", "out of memory");
    return 0;
}

static void print_banner(const struct raweth *e)
{
    const struct op_perf_raweth_config *c = e->cfg;
    char sm[18] = "-", dm[18] = "-", sip[16], dip[16];
    uint8_t mine[6];
    if (op_io_xdp_local_mac(e->io, mine) == OP_OK)
        mac_text(mine, sm);
    if (c->have_dst_mac)
        mac_text(c->dst_mac, dm);
    op_format_ipv4(c->src_ip, sip);
    op_format_ipv4(c->dst_ip, dip);
    fprintf(e->out, OP_PERF_LINE);
    fprintf(e->out, "                    Send %s Test\n", c->test == OP_PERF_BW ? "BW" : "Latency");
    fprintf(e->out, " Dual-port       : OFF\t\tDevice         : %s\n", c->ifname);
    fprintf(e->out, " Number of qps   : %u\t\tTransport type : IB\n", e->qps);
    fprintf(e->out, " Connection type : RawEth\t\tUsing SRQ      : OFF\n");
    fprintf(e->out, " Mtu             : %u[B]\n", c->size);
    fprintf(e->out, " Link type       : Ethernet\n");
    fprintf(e->out, " Data ex. method : Ethernet (AF_XDP)\n");
    fprintf(e->out, OP_PERF_LINE);
    fprintf(e->out, "**raw ethernet header****************************************\n\n");
    fprintf(e->out, "--------------------------------------------------------------\n");
    fprintf(e->out, "| Dest MAC         | Src MAC          | Packet Type          |\n");
    fprintf(e->out, "|------------------------------------------------------------|\n");
    fprintf(e->out, "| %-17s| %-17s|IP                    |\n", dm, sm);
    fprintf(e->out, "|------------------------------------------------------------|\n");
    fprintf(e->out, "| Source IP        | Dest IP          |\n| %-17s| %-17s|\n", sip, dip);
    fprintf(e->out, "|------------------------------------------------------------|\n");
    fprintf(e->out, "| Source Port      | Dest Port        |\n| %-17u| %-17u|\n", c->src_port,
            c->dst_port);
    fprintf(e->out, "|------------------------------------------------------------|\n\n");
    fprintf(e->out, "--------------------------------------------------------------\n");
    fflush(e->out); /* the XDP program is attached: a peer may start */
}

/* Frames [seq, seq + n) into the TX buffers; sent whole (a full ring is
 * waited out, not a loss). */
static void send_frames(struct raweth *e, uint64_t seq, int n)
{
    const struct op_perf_raweth_config *c = e->cfg;
    for (int i = 0; i < n; i++) {
        struct op_pkt *p = &e->tx.pkts[i];
        p->flow = (struct op_flow){.src.v4 = c->src_ip, .src_port = c->src_port,
                                   .dst.v4 = c->dst_ip, .dst_port = c->dst_port};
        p->len = e->payload;
        op_perf_raweth_fill(p->data, e->payload, seq + (uint64_t)i);
    }
    for (int sent = 0; sent < n;) {
        int k = op_io_send(e->io, e->tx.pkts + sent, n - sent);
        sent += k > 0 ? k : 0;
        if (sent < n)
            op_io_poll(e->io, op_now_ns()); /* reclaims TX frames */
    }
}

/* Received frames checked; the count of good ones, seq of the last. */
static int take(struct raweth *e, int n, uint64_t *last_seq)
{
    int good = 0;
    for (int i = 0; i < n; i++) {
        uint64_t seq;
        const struct op_pkt *p = &e->rx.pkts[i];
        if (p->len != e->payload || !op_perf_raweth_check(p->data, p->len, &seq)) {
            e->bad++;
            continue;
        }
        uint64_t qp = seq >> OP_PERF_RAWETH_QP_SHIFT, k = seq & RAWETH_FRAME_MASK;
        if (qp >= e->qps) {
            e->beyond_qps++;
            e->bad++;
            continue;
        }
        uint64_t bit = qp * e->cfg->iters + k;
        if (e->seen != NULL && k < e->cfg->iters) {
            bool dup = (e->seen[bit / 8] >> (bit % 8)) & 1;
            e->dups += dup;
            e->seen[bit / 8] |= (uint8_t)(1u << (bit % 8));
            if (dup)
                continue;
        }
        *last_seq = seq;
        e->per_qp[qp]++;
        good++;
    }
    e->received += (uint64_t)good;
    return good;
}

/* The run's row (after the header, which --run_infinitely printed first). */
static void print_bw(struct raweth *e, uint64_t count, uint64_t ns)
{
    const struct op_perf_config fmt = {.test = OP_PERF_BW, .output = e->cfg->output};
    op_perf_bw_rate(e->cfg->size, count, ns, e->cfg->report_gbits, &e->bw);
    e->bw.iters = count / e->qps; /* perftest's column: each QP's */
    e->have_result = true;
    if (!e->cfg->run_infinitely)
        op_perf_print_header(e->out, &fmt);
    op_perf_print_bw(e->out, &fmt, &e->bw);
}

static void infinite_start(struct raweth *e)
{
    const struct op_perf_config fmt = {.test = OP_PERF_BW, .output = e->cfg->output};
    op_perf_print_header(e->out, &fmt);
    fflush(e->out);
    e->row_start = e->sig_look = op_now_ns();
    perf_block_sigint(true);
}

/* --run_infinitely: the row of each -D interval as it ends; true once
 * SIGINT came (looked at every SIGINT_LOOK_NS). */
static bool infinite_done(struct raweth *e, uint64_t now)
{
    const struct op_perf_raweth_config *c = e->cfg;
    if (now >= e->row_start + (uint64_t)c->duration_s * OP_NS_PER_S) {
        const struct op_perf_config fmt = {.test = OP_PERF_BW, .output = c->output};
        struct op_perf_bw_result row;
        op_perf_bw_rate(c->size, e->row_count, now - e->row_start, c->report_gbits, &row);
        op_perf_print_bw(e->out, &fmt, &row);
        fflush(e->out);
        e->row_start = now;
        e->row_count = 0;
    }
    if (now - e->sig_look < SIGINT_LOOK_NS)
        return false;
    e->sig_look = now;
    return perf_sigint_taken();
}

static bool client_sends(struct raweth *e, uint64_t seq, uint64_t end)
{
    const struct op_perf_raweth_config *c = e->cfg;
    if (c->run_infinitely)
        return !infinite_done(e, op_now_ns());
    return c->duration_s ? op_now_ns() < end : seq < c->iters;
}

static void bw_client(struct raweth *e)
{
    const struct op_perf_raweth_config *c = e->cfg;
    uint64_t t0 = op_now_ns(), end = t0 + (uint64_t)c->duration_s * OP_NS_PER_S, seq = 0;
    if (c->run_infinitely)
        infinite_start(e);
    while (client_sends(e, seq, end)) {
        int n = c->duration_s || c->iters - seq > OP_IO_BURST ? OP_IO_BURST : (int)(c->iters - seq);
        for (uint32_t qp = 0; qp < e->qps; qp++) { /* a burst of each QP on its queue */
            (void)op_io_xdp_tx_queue(e->io, qp);
            send_frames(e, (uint64_t)qp << OP_PERF_RAWETH_QP_SHIFT | seq, n);
        }
        seq += (uint64_t)n;
        e->row_count += (uint64_t)n * e->qps;
    }
    print_bw(e, seq * e->qps, op_now_ns() - t0);
    if (c->run_infinitely)
        perf_block_sigint(false);
}

static void bw_server(struct raweth *e)
{
    const struct op_perf_raweth_config *c = e->cfg;
    uint64_t first = 0, last = 0, seq;
    e->seen = calloc(c->iters * e->qps / 8 + 1, 1);
    if (c->run_infinitely)
        infinite_start(e);
    while (e->received < c->iters * e->qps || c->duration_s) {
        int n = op_io_recv(e->io, e->rx.pkts, OP_IO_BURST), got = 0;
        uint64_t now = op_now_ns();
        if (n > 0 && (got = take(e, n, &seq)) > 0) {
            first = first ? first : now;
            last = now;
            e->row_count += (uint64_t)got;
        } else if (first && now - last > QUIET_NS && !c->run_infinitely) {
            break; /* the client is done; the rest was lost */
        } else if (n <= 0) {
            (void)op_io_wait(e->io, now + (c->run_infinitely ? SIGINT_LOOK_NS : 10 * OP_NS_PER_MS));
        }
        if (c->run_infinitely && infinite_done(e, now))
            break; /* a client still sending is not waited for */
    }
    print_bw(e, e->received, last - first);
    if (c->run_infinitely)
        perf_block_sigint(false);
    free(e->seen);
    e->seen = NULL;
}

static int lat_client(struct raweth *e)
{
    const struct op_perf_raweth_config *c = e->cfg;
    uint64_t *stamps = malloc((c->iters + 1) * sizeof(*stamps)), seq;
    if (stamps == NULL)
        return refuse(e, "%s", "out of memory");
    for (uint64_t i = 0; i < c->iters; i++) {
        stamps[i] = op_now_ns();
        send_frames(e, i, 1);
        uint64_t sent_at = stamps[i];
        for (bool back = false; !back;) {
            int n = op_io_recv(e->io, e->rx.pkts, OP_IO_BURST);
            back = n > 0 && take(e, n, &seq) > 0 && seq == i;
            if (!back && op_now_ns() - sent_at > RESEND_NS) {
                if (++e->resends > MAX_RESENDS) {
                    free(stamps);
                    return refuse(e, "%s", "no echo: is the server running (--server) and -E its "
                                           "MAC?");
                }
                send_frames(e, i, 1);
                sent_at = op_now_ns();
            }
        }
    }
    stamps[c->iters] = op_now_ns();
    struct op_perf_lat_result r;
    const struct op_perf_config fmt = {.test = OP_PERF_LAT, .output = c->output};
    op_status_t st = op_perf_lat_compute(stamps, c->iters + 1, 2, c->size, &r);
    free(stamps);
    if (st != OP_OK)
        return refuse(e, "%s", "too few samples (-n)");
    r.iters = c->iters;
    op_perf_print_header(e->out, &fmt);
    op_perf_print_lat(e->out, &fmt, &r);
    e->lat = r;
    e->have_result = true;
    return 0;
}

/* Echo every good frame to whoever sent it until frame n - 1 went back
 * and the client has been quiet a while (it may resend a lost echo). */
static void lat_server(struct raweth *e)
{
    uint64_t seq, last = 0, done_at = 0;
    for (;;) {
        int n = op_io_recv(e->io, e->rx.pkts, OP_IO_BURST);
        uint64_t now = op_now_ns();
        for (int i = 0; i < n; i++) {
            struct op_pkt *p = &e->rx.pkts[i];
            if (p->len != e->payload || !op_perf_raweth_check(p->data, p->len, &seq)) {
                e->bad++;
                continue;
            }
            e->received++;
            struct op_flow f = p->flow;
            p->flow = (struct op_flow){.src.v4 = f.dst.v4, .src_port = f.dst_port,
                                       .dst.v4 = f.src.v4, .dst_port = f.src_port};
            while (op_io_send(e->io, p, 1) != 1)
                op_io_poll(e->io, now);
            last = now;
            if (seq + 1 >= e->cfg->iters && done_at == 0)
                done_at = now;
        }
        if (done_at && now - last > ECHO_LINGER_NS)
            return;
        if (n <= 0)
            (void)op_io_wait(e->io, now + 10 * OP_NS_PER_MS);
    }
}

/* -q: what each QP's frames and each queue's rings came to */
static void print_queues(const struct raweth *e)
{
    if (e->qps < 2)
        return;
    if (e->cfg->server) {
        fprintf(e->out, " offpath: frames per QP:");
        for (uint32_t i = 0; i < e->qps; i++)
            fprintf(e->out, " %" PRIu64, e->per_qp[i]);
        fprintf(e->out, "\n");
    }
    fprintf(e->out, " offpath: frames per queue (%s):", e->cfg->server ? "rx" : "tx");
    for (uint32_t i = 0; i < e->qps; i++) {
        uint32_t rx = 0, tx = 0;
        (void)op_io_xdp_queue_frames(e->io, i, &rx, &tx);
        fprintf(e->out, " %u", e->cfg->server ? rx : tx);
    }
    fprintf(e->out, "\n");
}

static bool receiver(const struct op_perf_raweth_config *c)
{
    return c->server || c->test == OP_PERF_LAT;
}

/* -q on the BW server: a QP of ours that got nothing, or one of the
 * client's past ours, means the two sides' -q differ. */
static bool qps_match(const struct raweth *e)
{
    bool counted = e->cfg->server && e->cfg->test == OP_PERF_BW;
    for (uint32_t i = 0; counted && i < e->qps; i++)
        if (e->per_qp[i] == 0)
            return false;
    return e->beyond_qps == 0;
}

static bool check_ok(const struct raweth *e)
{
    return e->bad == 0 && e->received > 0 && qps_match(e);
}

static void verdict(const struct raweth *e)
{
    const struct op_perf_raweth_config *c = e->cfg;
    if (c->output != OP_PERF_OUT_FULL)
        return;
    fprintf(e->out, OP_PERF_LINE);
    uint64_t xc[OP_IO_XDP_C_COUNT_];
    op_io_xdp_counters(e->io, xc);
    fprintf(e->out, " offpath: frames_good %" PRIu64 ", frames_bad %" PRIu64 ", duplicates %" PRIu64
                    ", resends %" PRIu64 ", xdp_rx_ring_full %" PRIu64 ", xdp_tx_no_room %" PRIu64
                    "\n",
            e->received, e->bad, e->dups, e->resends, xc[OP_IO_XDP_C_rx_ring_full],
            xc[OP_IO_XDP_C_tx_no_room]);
    print_queues(e);
    if (!receiver(c))
        fprintf(e->out, " offpath: data check not applicable (the server checks)\n");
    else if (check_ok(e))
        fprintf(e->out, " offpath: data check ok (%" PRIu64 " frames, each payload as sent%s)\n",
                e->received, c->server && c->test == OP_PERF_BW && e->received < c->iters * e->qps
                                 ? "; the rest lost on the way"
                                 : "");
    else
        fprintf(e->out, " offpath: data check failed: %" PRIu64 " bad frames, %" PRIu64 " good\n",
                e->bad, e->received);
    if (!qps_match(e))
        fprintf(e->out, " offpath: %s: give both sides the same -q (--qp)\n",
                e->beyond_qps ? "frames of QPs past this side's -q came"
                              : "a QP of this side got no frame");
}

/* --out_json's test_info: the fields of this tool's banner */
static void json_test_info(FILE *f, const void *ctx)
{
    const struct op_perf_raweth_config *c = ctx;
    uint32_t qps = c->qps ? c->qps : 1;
    fprintf(f, " \"test_info\": {\n  \"test\": \"Send %s Test\",\n",
            c->test == OP_PERF_BW ? "BW" : "Latency");
    fprintf(f, "  \"Dual-port\": \"OFF\",\n  \"Device\": \"%s\",\n", c->ifname);
    fprintf(f, "  \"Number of qps\": %u,\n  \"Transport type\": \"IB\",\n", qps);
    fprintf(f, "  \"Connection type\": \"RawEth\",\n  \"Using SRQ\": \"OFF\",\n");
    fprintf(f, "  \"Mtu\": %u,\n  \"Link type\": \"Ethernet\",\n", c->size);
    fprintf(f, "  \"Data ex. method\": \"Ethernet (AF_XDP)\",\n");
    fprintf(f, "  \"BW unit\": \"%s\"\n },\n", c->report_gbits ? "Gb/sec" : "MiB/sec");
}

static int write_json(struct raweth *e)
{
    const struct op_perf_raweth_config *c = e->cfg;
    static const char *const names[] = {"frames_good", "frames_bad", "duplicates", "resends",
                                        "xdp_rx_ring_full", "xdp_tx_no_room"};
    uint64_t xc[OP_IO_XDP_C_COUNT_];
    op_io_xdp_counters(e->io, xc);
    const uint64_t vals[] = {e->received, e->bad, e->dups, e->resends,
                             xc[OP_IO_XDP_C_rx_ring_full], xc[OP_IO_XDP_C_tx_no_room]};
    char check[64];
    snprintf(check, sizeof check, "failed: %" PRIu64 " bad frames", e->bad);
    const struct op_perf_config fmt = {.test = c->test};
    const struct op_perf_json j = {
        .bw = c->test == OP_PERF_BW ? &e->bw : NULL, .lat = &e->lat, .n = e->have_result,
        .counter_names = names, .counter_vals = vals, .n_counters = 6,
        .data_check = !receiver(c) ? NULL : check_ok(e) ? "ok" : check,
        .test_info = json_test_info, .test_info_ctx = c};
    const char *path = c->json_file != NULL ? c->json_file : "perftest_out.json";
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return refuse(e, "cannot write --out_json_file %s", path);
    op_perf_write_json(f, &fmt, &j);
    return fclose(f) == 0 ? 0 : refuse(e, "cannot write --out_json_file %s", path);
}

int op_perf_raweth_run(const struct op_perf_raweth_config *cfg)
{
    struct raweth e = {.cfg = cfg, .out = cfg->out ? cfg->out : stdout,
                       .payload = cfg->size - OP_PERF_RAWETH_HDR, .qps = cfg->qps ? cfg->qps : 1};
    op_log_init(&e.log, "raweth", cfg->log_level);
    int rc = open_io(&e);
    if (rc == 0 && cfg->output == OP_PERF_OUT_FULL)
        print_banner(&e);
    if (rc == 0 && cfg->test == OP_PERF_BW)
        cfg->server ? bw_server(&e) : bw_client(&e);
    else if (rc == 0)
        rc = cfg->server ? (lat_server(&e), 0) : lat_client(&e);
    if (rc == 0)
        verdict(&e);
    if (rc == 0 && cfg->json)
        rc = write_json(&e);
    if (rc == 0 && !qps_match(&e))
        rc = refuse(&e, "%s", "the client and the server disagree on -q (--qp): give both the same");
    fflush(e.out);
    if (rc != 0)
        fprintf(stderr, " %s\n", e.why);
    bool lost_all = cfg->server && e.received == 0;
    if (e.io != NULL)
        op_io_close(e.io);
    op_pktbuf_free(&e.tx);
    op_pktbuf_free(&e.rx);
    return rc != 0 || e.bad != 0 || lost_all ? 1 : 0;
}
