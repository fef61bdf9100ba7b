/* The io backend contract, between two processes: `echo BACKEND` sends
 * every packet back where it came from until told to stop; `probe BACKEND
 * PEER` checks, against any echo, what every backend promises:
 *  - bursts of 1, 7, 64 and 200 packets of 16..1400 bytes come back whole,
 *    each once, in the order sent (one flow keeps its order);
 *  - a flood of 4096 packets at once is sent or counted as dropped, never
 *    lost silently (tx_pkts + tx_drops = what was given), and what comes
 *    back is intact (back-pressure, partial sends);
 *  - the flows carry the peer's address and port (either family).
 * BACKEND: udp:EP, xdp:IF[@N]:EP (af_xdp steering EP's datagrams, N
 * queues), xdpall:IF[@N]:EP (af_xdp on the whole port, served by
 * op_io_frames_serve: ARP/NDP answered here), dpdk:VDEV:EP (a DPDK queue,
 * served the same); EP is ADDR:PORT or [ADDR6]:PORT. `reflect FRAMES ADDR`
 * (frames:IF or dpdkframes:VDEV:EP) is a frame engine on the loop that
 * answers ARP/NDP for ADDR and sends UDP to it back, as an echo.
 * Exit 0 and a line "contract ok ..." when every check held; otherwise
 * the first broken promise and exit 1. Every wait is bounded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "offpath/io.h"
#include "offpath/loop.h"

#define MAGIC 0x0c0a7ac7u
#define STOP 0xffffffffu
#define FLOOD 4096
#define WAIT_NS (2 * OP_NS_PER_S)

struct hdr {
    uint32_t magic, round, idx, len;
};

static int fail(const char *what)
{
    fprintf(stderr, "contract broken: %s\n", what);
    return 1;
}

#ifdef OP_HAVE_DPDK
static struct op_io_dpdk *dpdk_port;

/* "VDEV:EP": the vdev's arguments and the endpoint. */
static bool split_place(const char *spec, char *place, size_t cap, struct op_endpoint *e)
{
    const char *colon = strchr(spec, ':');
    size_t n = colon != NULL ? (size_t)(colon - spec) : 0;
    if (n == 0 || n >= cap || !op_endpoint_parse(colon + 1, e))
        return false;
    memcpy(place, spec, n);
    place[n] = '\0';
    return true;
}


/* One lcore, no hugepages, no PCI: the vdev is the port; its queue served
 * (payloads) or not (frames). */
static op_status_t open_dpdk(const char *spec, bool serve, struct op_io **io)
{
    char vdev[256], arg[300], prefix[64], err[256];
    struct op_endpoint e;
    if (!split_place(spec, vdev, sizeof vdev, &e))
        return OP_ERR_INVAL;
    snprintf(arg, sizeof arg, "--vdev=%s", vdev);
    snprintf(prefix, sizeof prefix, "--file-prefix=ioc%ld", (long)getpid());
    char *eal[] = {"--no-huge", "-m", "256", "--no-pci", "-l", "0", arg, prefix,
                   "--log-level=warning"};
    struct op_io_dpdk_config c = {.name = "io_contract", .n_eal_args = 9, .eal_args = eal,
                                  .queues = 1, .mbufs = 8191, .mbuf_cache = 256,
                                  .rx_desc = 1024, .tx_desc = 1024};
    struct op_io *frames;
    op_status_t st = op_io_dpdk_eal_init(&c, err, sizeof err);
    if (st == OP_OK)
        st = op_io_dpdk_port_open(&c, &dpdk_port, err, sizeof err);
    if (st != OP_OK) {
        fprintf(stderr, "io_contract: %s\n", err);
        return st;
    }
    if ((st = op_io_dpdk_queue_open(dpdk_port, 0, &frames)) != OP_OK || !serve) {
        *io = frames;
        return st;
    }
    if ((st = op_io_frames_serve(frames, &e.addr, e.port, io)) != OP_OK)
        op_io_close(frames);
    return st;
}
#endif

/* BACKEND: a name op_io_spec_parse knows, or dpdk:VDEV:EP. */
static op_status_t open_backend(const char *spec, struct op_io **io)
{
#ifdef OP_HAVE_DPDK
    if (strncmp(spec, "dpdk:", 5) == 0)
        return open_dpdk(spec + 5, true, io);
    if (strncmp(spec, "dpdkframes:", 11) == 0)
        return open_dpdk(spec + 11, false, io);
#endif
    struct op_io_spec s;
    char why[160];
    if (!op_io_spec_parse(spec, &s, why, sizeof why)) {
        fprintf(stderr, "io_contract: %s\n", why);
        return OP_ERR_INVAL;
    }
    return op_io_open_spec(&s, NULL, io);
}

/* What the layers under the packets did, for the test to check. */
static void report(const struct op_io *io)
{
    uint64_t sc[OP_IO_SERVE_C_COUNT_], c[OP_IO_C_COUNT_];
    struct op_io_xdp_info xi;
    op_io_counters(io, c);
    for (unsigned i = 0; i < OP_IO_C_COUNT_; i++)
        printf("%s=%llu ", op_io_counter_name(i), (unsigned long long)c[i]);
    op_io_serve_counters(io, sc);
    for (unsigned i = 0; i < OP_IO_SERVE_C_COUNT_; i++)
        printf("%s=%llu ", op_io_serve_counter_name(i), (unsigned long long)sc[i]);
    if (op_io_xdp_info(io, &xi)) {
        uint64_t xc[OP_IO_XDP_C_COUNT_];
        op_io_xdp_counters(io, xc);
        for (unsigned i = 0; i < OP_IO_XDP_C_COUNT_; i++)
            printf("%s=%llu ", op_io_xdp_counter_name(i), (unsigned long long)xc[i]);
        printf("queues=%u zero_copy=%d", xi.queues, xi.zero_copy);
    }
    printf("\n");
}

static void fill(struct op_pkt *p, const struct op_endpoint *to, uint32_t round, uint32_t idx)
{
    uint32_t len = 16 + (idx * 131 + round * 17) % 1385;
    struct hdr h = {MAGIC, round, idx, len};
    memcpy(p->data, &h, sizeof h);
    for (uint32_t j = sizeof h; j < len; j++)
        p->data[j] = (uint8_t)(j * 7 + idx + round);
    p->len = len;
    p->flow = (struct op_flow){.dst = to->addr, .dst_port = to->port};
}

/* The packet's index if it is intact and of this round, else -1. */
static long check(const struct op_pkt *p, uint32_t round)
{
    struct hdr h;
    if (p->len < sizeof h)
        return -1;
    memcpy(&h, p->data, sizeof h);
    if (h.magic != MAGIC || h.round != round || h.len != p->len)
        return -1;
    for (uint32_t j = sizeof h; j < h.len; j++)
        if (p->data[j] != (uint8_t)(j * 7 + h.idx + round))
            return -1;
    return h.idx;
}

static int echo(struct op_io *io)
{
    struct op_pktbuf b;
    if (op_pktbuf_init(&b, OP_IO_BURST) != OP_OK)
        return fail("no memory");
    uint64_t echoed = 0, end = op_now_ns() + 60 * OP_NS_PER_S;
    for (bool stop = false; !stop && op_now_ns() < end;) {
        if (op_io_wait(io, op_now_ns() + 100 * OP_NS_PER_MS) < 0)
            break;
        int n = op_io_recv(io, b.pkts, b.n);
        for (int i = 0; i < n; i++) {
            uint32_t magic;
            memcpy(&magic, b.pkts[i].data, sizeof magic);
            stop |= b.pkts[i].len >= 4 && magic == STOP;
            b.pkts[i].flow = op_flow_reverse(&b.pkts[i].flow);
        }
        echoed += n > 0 ? (uint64_t)op_io_send(io, b.pkts, n) : 0;
    }
    printf("echo done, %llu echoed\n", (unsigned long long)echoed);
    report(io);
    op_pktbuf_free(&b);
    return 0;
}

/* ---- reflect: a frame engine on the loop (frames set) over a frame
 * backend, answering ARP/NDP/echo for addr itself and sending every UDP
 * frame to addr back where it came from in the same buffer (op_frameq_put),
 * until the stop datagram: what a switch port's engine does, on a link. */
struct reflector {
    struct op_addr addr;
    uint8_t mac[6];
    uint64_t reflected, answered, not_ours;
    uint64_t in_place; /* reflected in the backend's own buffer (lent: a DPDK mbuf) */
    bool stop;
};

static bool reflect_one(struct reflector *r, struct op_frame *f, struct op_frameq *out)
{
    const struct op_frame_info *in = &f->info;
    size_t hdr = op_udp_frame_hdr_len(r->addr.family);
    if (in->udp != OP_FRAME_OK || !op_addr_eq(&in->flow.dst, &r->addr) ||
        in->payload_off != hdr)
        return false; /* IPv4 options too: not ours to rewrite */
    uint32_t magic = 0;
    if (in->payload_len >= 4)
        memcpy(&magic, f->data + in->payload_off, 4);
    r->stop |= magic == STOP;
    struct op_flow back = op_flow_reverse(&in->flow);
    struct op_frame_l2 l2 = {.tos = 0};
    memcpy(l2.src_mac, r->mac, 6);
    memcpy(l2.dst_mac, in->src_mac, 6);
    /* new headers over the old ones: the payload does not move */
    f->len = (uint32_t)op_udp_frame_headers(f->data, &back, &l2, in->payload_len);
    r->in_place += f->lent != NULL;
    op_frameq_put(out, f);
    r->reflected++;
    return true;
}

static void reflect_frames(void *eng, struct op_frame *f, int n, uint64_t now,
                           struct op_frameq *out)
{
    struct reflector *r = eng;
    (void)now;
    for (int i = 0; i < n; i++) {
        if (reflect_one(r, &f[i], out))
            continue;
        struct op_frame *a = op_frameq_next(out);
        memcpy(a->data, f[i].data, f[i].len);
        a->len = (uint32_t)op_frame_control_reply(a->data, f[i].len, OP_IO_BUF_SIZE, &r->addr,
                                                  r->mac);
        if (a->len > 0) {
            op_frameq_commit(out);
            r->answered++;
        } else {
            r->not_ours++;
        }
    }
}

static const struct op_engine_ops reflector_ops = {.name = "reflect",
                                                   .input_frames = reflect_frames};

static int reflect(struct op_io *io, const struct op_addr *addr)
{
    struct reflector r = {.addr = *addr};
    struct op_loop *l = NULL;
    struct op_loop_config c = {.io = io, .frames = true};
    if (op_io_local_mac(io, r.mac) != OP_OK || op_loop_create(&c, &l) != OP_OK ||
        op_loop_add(l, &reflector_ops, &r) != OP_OK) {
        op_loop_destroy(l);
        return fail("a frame backend is needed to reflect");
    }
    uint64_t end = op_now_ns() + 60 * OP_NS_PER_S;
    while (!r.stop && op_now_ns() < end)
        (void)op_loop_run_once(l, op_now_ns() + 100 * OP_NS_PER_MS);
    op_loop_destroy(l);
    printf("reflect done, reflected=%llu answered=%llu not_ours=%llu in_place=%llu\n",
           (unsigned long long)r.reflected, (unsigned long long)r.answered,
           (unsigned long long)r.not_ours, (unsigned long long)r.in_place);
    report(io);
    return 0;
}

/* Waits for up to want packets of round; counts each index; false when one
 * is not intact, not from peer, repeated, or out of order. */
static bool collect(struct op_io *io, const struct op_endpoint *peer, uint32_t round, int want,
                    unsigned char *seen, int *got)
{
    struct op_pktbuf b;
    long last = -1;
    bool ok = op_pktbuf_init(&b, OP_IO_BURST) == OP_OK;
    uint64_t deadline = op_now_ns() + WAIT_NS;
    *got = 0;
    while (ok && *got < want && op_now_ns() < deadline) {
        int n = op_io_recv(io, b.pkts, b.n);
        if (n == 0) {
            (void)op_io_wait(io, deadline);
            continue;
        }
        for (int i = 0; i < n && ok; i++) {
            long idx = check(&b.pkts[i], round);
            ok = idx >= 0 && idx < want && !seen[idx] && idx > last &&
                 op_addr_eq(&b.pkts[i].flow.src, &peer->addr) &&
                 b.pkts[i].flow.src_port == peer->port;
            if (ok)
                seen[idx] = 1, last = idx, (*got)++;
        }
    }
    op_pktbuf_free(&b);
    return ok;
}

static uint64_t counter(const struct op_io *io, enum op_io_counter c)
{
    uint64_t v[OP_IO_C_COUNT_];
    op_io_counters(io, v);
    return v[c];
}

static int probe(struct op_io *io, const struct op_endpoint *peer)
{
    static const int bursts[] = {1, 7, 64, 200};
    static unsigned char seen[FLOOD];
    struct op_pktbuf b;
    if (op_pktbuf_init(&b, FLOOD) != OP_OK)
        return fail("no memory");
    uint32_t round = 0;
    int got = 0;
    for (size_t k = 0; k < sizeof bursts / sizeof bursts[0]; k++, round++) {
        for (int i = 0; i < bursts[k]; i++)
            fill(&b.pkts[i], peer, round, (uint32_t)i);
        memset(seen, 0, sizeof seen);
        if (op_io_send(io, b.pkts, bursts[k]) != bursts[k])
            return fail("a burst the backend has room for was not sent whole");
        if (!collect(io, peer, round, bursts[k], seen, &got) || got != bursts[k]) {
            fprintf(stderr, "burst of %d: %d back\n", bursts[k], got);
            return fail("a burst did not come back whole, once each, in order");
        }
    }
    uint64_t tx0 = counter(io, OP_IO_C_tx_pkts), drop0 = counter(io, OP_IO_C_tx_drops);
    for (int i = 0; i < FLOOD; i++)
        fill(&b.pkts[i], peer, round, (uint32_t)i);
    memset(seen, 0, sizeof seen);
    int sent = op_io_send(io, b.pkts, FLOOD);
    uint64_t tx = counter(io, OP_IO_C_tx_pkts) - tx0, drops = counter(io, OP_IO_C_tx_drops) - drop0;
    if (sent < 0 || (uint64_t)sent != tx || tx + drops != FLOOD)
        return fail("a flood's packets are neither sent nor counted as dropped");
    if (!collect(io, peer, round, FLOOD, seen, &got) || got > sent)
        return fail("what came back of a flood is not intact, or more than went");
    struct hdr stop = {STOP, 0, 0, sizeof stop};
    memcpy(b.pkts[0].data, &stop, sizeof stop);
    b.pkts[0].len = sizeof stop;
    b.pkts[0].flow = (struct op_flow){.dst = peer->addr, .dst_port = peer->port};
    for (int i = 0; i < 3; i++) /* a datagram may be lost: the echo stops at the first */
        (void)op_io_send(io, b.pkts, 1);
    printf("contract ok: bursts 1 7 64 200 whole and in order; flood %d: %d sent, %llu "
           "dropped (counted), %d back\n", FLOOD, sent, (unsigned long long)drops, got);
    report(io);
    op_pktbuf_free(&b);
    return 0;
}

int main(int argc, char **argv)
{
    struct op_io *io = NULL;
    struct op_endpoint peer;
    struct op_addr addr;
    bool is_probe = argc == 4 && strcmp(argv[1], "probe") == 0;
    bool is_reflect = argc == 4 && strcmp(argv[1], "reflect") == 0;
    if (!(argc == 3 && strcmp(argv[1], "echo") == 0) && !is_probe && !is_reflect) {
        fprintf(stderr, "usage: io_contract echo BACKEND | probe BACKEND PEER | "
                        "reflect FRAME_BACKEND ADDR\n");
        return 2;
    }
    if ((is_probe && !op_endpoint_parse(argv[3], &peer)) ||
        (is_reflect && !op_addr_parse(argv[3], &addr))) {
        fprintf(stderr, "io_contract: bad PEER or ADDR '%s'\n", argv[3]);
        return 2;
    }
    op_status_t st = open_backend(argv[2], &io);
    if (st != OP_OK) {
        fprintf(stderr, "io_contract: %s: %s\n", argv[2], op_status_str(st));
        return 2;
    }
    op_io_udp_batching(io, false); /* the contract is per packet; batching is the udp tests' */
    if (!is_probe) {
        printf("echo ready\n"); /* the test starts the probe on this line */
        fflush(stdout);
    }
    int rc = is_probe ? probe(io, &peer) : is_reflect ? reflect(io, &addr) : echo(io);
    op_io_close(io);
#ifdef OP_HAVE_DPDK
    if (dpdk_port != NULL) {
        op_io_dpdk_close(dpdk_port);
        op_io_dpdk_eal_cleanup();
    }
#endif
    return rc;
}
