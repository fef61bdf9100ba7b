/* One side of a perftest-style test: meet the peer on the side channel,
 * agree on the parameters, bring the QPs up, run each size, report. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "perf_int.h"

#define IDLE_SPINS 4096       /* empty polls before sleeping on the sockets */
#define PROGRESS_EVERY_NS (2 * OP_NS_PER_S)

/* ---- waiting on the peer while the engine keeps running */

static void idle_sleep(struct perf_run *r, uint64_t now)
{
    const int fds[2] = {op_io_fd(r->ep.io), r->oob.fd};
    uint64_t next = op_rdma_dev_next_timer(r->ep.dev);
    /* whole milliseconds (at least one for a timer due within one), at most 10 */
    int ms = next <= now ? 0 : next - now < OP_NS_PER_MS ? 1 : (int)((next - now) / OP_NS_PER_MS);
    (void)op_io_wait_fds(fds, 2, OP_IO_IN, now + (uint64_t)(ms > 10 ? 10 : ms) * OP_NS_PER_MS);
}

static op_status_t peer_gone(struct perf_run *r, int err)
{
    if (r->why[0] == '\0')
        snprintf(r->why, sizeof r->why,
                 "the peer closed the side channel (%s): it failed or was stopped",
                 err == -ECONNRESET ? "connection closed" : strerror(-err));
    return OP_ERR_IO;
}

/* A line from the peer: its own failure, the expected tag, or nonsense. */
static op_status_t take_tagged(struct perf_run *r, const char *line, const char *tag, char *rest,
                               size_t cap)
{
    size_t tl = strlen(tag);
    if (strncmp(line, "FAIL ", 5) == 0) {
        snprintf(r->why, sizeof r->why, "the peer failed: %.200s", line + 5);
        return OP_ERR_IO;
    }
    if (strncmp(line, tag, tl) != 0 || (line[tl] != ' ' && line[tl] != '\0')) {
        snprintf(r->why, sizeof r->why, "side channel: expected '%s', got '%.60s'", tag, line);
        return OP_ERR_MALFORMED;
    }
    snprintf(rest, cap, "%s", line[tl] ? line + tl + 1 : "");
    return OP_OK;
}

op_status_t perf_poll_tag(struct perf_run *r, const char *tag, bool *got, char *rest, size_t cap)
{
    char line[PERF_LINE_MAX];
    int n = perf_oob_poll_line(&r->oob, line, sizeof line);
    *got = n > 0;
    if (n < 0)
        return peer_gone(r, n);
    return n > 0 ? take_tagged(r, line, tag, rest, cap) : OP_OK;
}

op_status_t perf_poll_done(struct perf_run *r, bool *got, perf_done_parse_fn parse, void *out)
{
    char rest[PERF_LINE_MAX];
    op_status_t st = perf_poll_tag(r, "DONE", got, rest, sizeof rest);
    if (st != OP_OK || !*got)
        return st;
    if (parse(rest, out) != OP_OK)
        return perf_refuse(r->why, sizeof r->why, "side channel: bad DONE '%.60s'", rest);
    return OP_OK;
}

op_status_t perf_wait_line(struct perf_run *r, const char *tag, char *rest, size_t cap)
{
    for (unsigned idle = 0;;) {
        uint64_t now = op_now_ns();
        bool got;
        if (r->ep.io == NULL) /* before the QPs exist: only the side channel */
            (void)perf_oob_wait_readable(&r->oob, 100);
        else
            idle = perf_ep_progress(&r->ep) > 0 ? 0 : idle + 1;
        op_status_t st = perf_poll_tag(r, tag, &got, rest, cap);
        if (st != OP_OK || got)
            return st;
        if (idle > IDLE_SPINS)
            idle_sleep(r, now);
    }
}

op_status_t perf_barrier(struct perf_run *r, const char *tag)
{
    char rest[PERF_LINE_MAX];
    if (perf_oob_send(&r->oob, "%s", tag) != OP_OK)
        return peer_gone(r, -ECONNRESET);
    return perf_wait_line(r, tag, rest, sizeof rest);
}

void perf_progress_note(struct perf_run *r, uint64_t size, uint64_t done, uint64_t total)
{
    uint64_t now = op_now_ns();
    if (!r->cfg->progress || now - r->started_ns < PROGRESS_EVERY_NS ||
        now - r->last_progress_ns < PROGRESS_EVERY_NS)
        return;
    r->last_progress_ns = now;
    if (total == UINT64_MAX)
        fprintf(stderr, "offpath: %" PRIu64 " B messages: %" PRIu64 " completed, %.0f s\n", size,
                done, (double)(now - r->started_ns) / 1e9);
    else
        fprintf(stderr, "offpath: %" PRIu64 " B messages: %" PRIu64 "/%" PRIu64 " (%.0f%%)\n",
                size, done, total, 100.0 * (double)done / (double)total);
}

op_status_t perf_wc_error(struct perf_run *r, const struct op_rdma_wc *wc)
{
    snprintf(r->why, sizeof r->why,
             "Completion with error at %s:\n Failed status %u (%s) on QP 0x%06x: %s",
             r->is_server ? "server" : "client", wc->status, op_rdma_wc_status_str(wc->status),
             wc->qp_num, wc->cause ? wc->cause : "no cause given");
    return OP_ERR_IO;
}

/* ---- data check: what the receiving side holds must be the sender's bytes */

/* --inject_fault: every write was refused, so the target half must hold
 * the zeros it started with. */
static void check_untouched(struct perf_run *r)
{
    const struct perf_ep *ep = &r->ep;
    uint64_t changed = 0;
    for (uint32_t i = 0; i < ep->nqp; i++)
        for (size_t k = 0; k < ep->bufsize; k++)
            changed += ep->qps[i].buf[ep->bufsize + k] != 0;
    if (changed == 0)
        snprintf(r->check, sizeof r->check, "ok (nothing written)");
    else {
        snprintf(r->check, sizeof r->check,
                 "failed: %" PRIu64 " bytes of the target written despite the injected fault",
                 changed);
        r->check_failed = true;
    }
}

void perf_check_data(struct perf_run *r, uint64_t size, uint64_t messages)
{
    const struct perf_ep *ep = &r->ep;
    const struct op_perf_config *c = r->cfg;
    size_t off = c->type == OP_RDMA_QPT_UD && c->verb == OP_PERF_SEND ? OP_RDMA_UD_GRH_LEN : 0;
    /* latency writes carry a counter in their last byte */
    uint64_t n = c->test == OP_PERF_LAT && c->verb == OP_PERF_WRITE ? size - 1 : size;
    if (c->gpu.threads) /* every work-item's slot, each with its own bytes */
        n = size * perf_gpu_slots(c, ep->bufsize, size);
    if (c->gpu.fault != OP_PERF_FAULT_NONE) {
        check_untouched(r);
        return;
    }
    /* --use_srq: every QP's receives land in QP 0's target half */
    for (uint32_t i = 0; i < (ep->srq ? 1 : ep->nqp) && messages > 0; i++) {
        const uint8_t *got = ep->qps[i].buf + ep->bufsize + off;
        if (memcmp(got, ep->pattern, n) != 0) {
            uint64_t k = 0;
            while (got[k] == ep->pattern[k])
                k++;
            snprintf(r->check, sizeof r->check,
                     "failed: QP %u byte %" PRIu64 " of %" PRIu64 " differs", i, k, size);
            r->check_failed = true;
            return;
        }
    }
    if (!r->check_failed)
        snprintf(r->check, sizeof r->check, "ok");
}

/* ---- parameters both sides must agree on */

static op_status_t agree(struct perf_run *r)
{
    struct perf_params mine, peer;
    char rest[PERF_LINE_MAX], text[PERF_LINE_MAX];
    perf_params_of(r->cfg, &mine);
    perf_format_params(&mine, text, sizeof text);
    if (perf_oob_send(&r->oob, "PARAMS %s", text) != OP_OK)
        return peer_gone(r, -ECONNRESET);
    op_status_t st = perf_wait_line(r, "PARAMS", rest, sizeof rest);
    if (st != OP_OK)
        return st;
    if (perf_parse_params(rest, &peer) != OP_OK) {
        snprintf(r->why, sizeof r->why, "side channel: the peer is not an offpath perf tool");
        return OP_ERR_MALFORMED;
    }
    const char *flag = perf_params_mismatch(&mine, &peer);
    if (flag != NULL) {
        snprintf(r->why, sizeof r->why, "server and client disagree on %s: give both the same",
                 flag);
        return OP_ERR_INVAL;
    }
    return OP_OK;
}

/* ---- QP addresses */

static op_status_t exchange_qps(struct perf_run *r)
{
    struct perf_ep *ep = &r->ep;
    for (uint32_t i = 0; i < ep->nqp; i++) {
        struct perf_qp *q = &ep->qps[i];
        if (perf_oob_send(&r->oob, "QP %u %x %x %x %" PRIx64 " %x %u", i, op_rdma_qp_num(q->qp),
                          q->psn, op_rdma_mr_rkey(q->mr), (uint64_t)(uintptr_t)q->buf, ep->ip,
                          ep->port) != OP_OK)
            return peer_gone(r, -ECONNRESET);
    }
    for (uint32_t i = 0; i < ep->nqp; i++) {
        char rest[PERF_LINE_MAX];
        struct perf_peer *p = &ep->qps[i].peer;
        uint32_t idx;
        op_status_t st = perf_wait_line(r, "QP", rest, sizeof rest);
        if (st != OP_OK)
            return st;
        if (perf_parse_qp(rest, &idx, p) != OP_OK || idx != i) {
            snprintf(r->why, sizeof r->why, "side channel: bad QP line '%.80s'", rest);
            return OP_ERR_MALFORMED;
        }
    }
    return OP_OK;
}

static void print_addresses(struct perf_run *r)
{
    const struct perf_ep *ep = &r->ep;
    /* atomics aim at the counter at the start of the target half */
    bool write = r->cfg->verb == OP_PERF_WRITE || r->cfg->verb == OP_PERF_ATOMIC;
    for (uint32_t i = 0; i < ep->nqp; i++) {
        const struct perf_qp *q = &ep->qps[i];
        /* the address a peer aims at: our target half for WRITE, source for READ */
        struct op_perf_addr me = {op_rdma_qp_num(q->qp), q->psn, op_rdma_mr_rkey(q->mr),
                                  write ? perf_dst(ep, q) : perf_src(q), ep->ip};
        struct op_perf_addr peer = {q->peer.qpn, q->peer.psn, q->peer.rkey,
                                    q->peer.vaddr + (write ? ep->bufsize : 0), q->peer.ip};
        op_perf_print_addr(r->out, r->cfg, "local", &me);
        op_perf_print_addr(r->out, r->cfg, "remote", &peer);
    }
    fprintf(r->out, OP_PERF_LINE);
}

/* ---- the local address: -d (an address or an interface), else the side channel's */

op_status_t perf_ip_of_device(const char *dev, uint32_t *ip)
{
    uint16_t port;
    if (op_parse_ipv4(dev, ip, &port) == OP_OK)
        return OP_OK;
    struct ifaddrs *ifs;
    op_status_t st = OP_ERR_INVAL;
    if (getifaddrs(&ifs) != 0)
        return op_status_from_errno(errno);
    for (struct ifaddrs *i = ifs; i != NULL && st != OP_OK; i = i->ifa_next)
        if (i->ifa_addr != NULL && i->ifa_addr->sa_family == AF_INET &&
            strcmp(i->ifa_name, dev) == 0) {
            *ip = ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
            st = OP_OK;
        }
    freeifaddrs(ifs);
    return st;
}

/* ---- sizes */

static uint64_t run_sizes(const struct op_perf_config *c, uint32_t mtu, uint64_t *sizes)
{
    if (!c->all) {
        sizes[0] = c->type == OP_RDMA_QPT_UD && c->size > mtu ? mtu : c->size;
        return 1;
    }
    uint64_t n = 0;
    for (unsigned k = 1; k <= OP_PERF_ALL_MAX_LOG2; k++)
        if (c->type != OP_RDMA_QPT_UD || (1ull << k) <= mtu)
            sizes[n++] = 1ull << k;
    return n;
}

/* ---- the report's tail: offpath's counters */

static const unsigned shown_counters[] = {
    OP_RDMA_QP_C_pkts_out,     OP_RDMA_QP_C_pkts_in,      OP_RDMA_QP_C_retransmissions,
    OP_RDMA_QP_C_timeouts,     OP_RDMA_QP_C_probes,       OP_RDMA_QP_C_probes_undone,
    OP_RDMA_QP_C_nak_seq_sent,
    OP_RDMA_QP_C_nak_seq_recv, OP_RDMA_QP_C_nak_rnr_sent, OP_RDMA_QP_C_nak_rnr_recv,
    OP_RDMA_QP_C_duplicates,   OP_RDMA_QP_C_out_of_seq,   OP_RDMA_QP_C_drop_icrc,
    OP_RDMA_QP_C_uc_lost_msgs, OP_RDMA_QP_C_placed,        OP_RDMA_QP_C_placed_moved,
};
#define N_SHOWN (sizeof(shown_counters) / sizeof(shown_counters[0]))

/* What the AF_XDP path did besides the ring (--xdp); rx_kernel_dropped
 * is left out as it always was. */
static const unsigned shown_xdp[] = {
    OP_IO_XDP_C_native,        OP_IO_XDP_C_rx_ring_full,  OP_IO_XDP_C_rx_refused,
    OP_IO_XDP_C_rx_via_kernel, OP_IO_XDP_C_tx_via_kernel, OP_IO_XDP_C_tx_no_room,
};
#define N_XDP (sizeof(shown_xdp) / sizeof(shown_xdp[0]))

/* The report's tail, names and values side by side for op_counters_print. */
struct perf_counters {
    /* + loss_injected, captured, gpu_touch_passes, two atomic and two CM ones */
    const char *names[N_SHOWN + 7 + N_XDP];
    uint64_t vals[N_SHOWN + 7 + N_XDP];
    int n;
};

static void add_counter(struct perf_counters *c, const char *name, uint64_t v)
{
    c->names[c->n] = name;
    c->vals[c->n++] = v;
}

static void collect_counters(const struct perf_run *r, struct perf_counters *out)
{
    uint64_t sums[OP_RDMA_QP_C_COUNT_], lossed, xdp[OP_IO_XDP_C_COUNT_];
    perf_ep_counters(&r->ep, sums, &lossed);
    out->n = 0;
    for (size_t i = 0; i < N_SHOWN; i++)
        add_counter(out, op_rdma_qp_counter_name(shown_counters[i]), sums[shown_counters[i]]);
    add_counter(out, "loss_injected", lossed);
    const struct op_rdma_cm *cm = op_rdma_dev_cm(r->ep.dev);
    for (unsigned k = OP_RDMA_CM_C_cm_resent; cm != NULL && k <= OP_RDMA_CM_C_cm_duplicates; k++)
        add_counter(out, op_rdma_cm_counter_name(k), op_rdma_cm_counters(cm)[k]);
    for (unsigned k = OP_RDMA_QP_C_atomics_executed;
         r->cfg->verb == OP_PERF_ATOMIC && k <= OP_RDMA_QP_C_atomic_replays; k++)
        add_counter(out, op_rdma_qp_counter_name(k), sums[k]);
    if (r->cfg->gpu.touch != OP_PERF_TOUCH_NONE)
        add_counter(out, "gpu_touch_passes", r->ep.touch_passes);
    if (r->cfg->pcap != NULL)
        add_counter(out, "captured", op_pcap_count(r->cfg->pcap));
    if (!r->cfg->xdp)
        return;
    op_io_xdp_counters(r->ep.base_io, xdp);
    for (size_t i = 0; i < N_XDP; i++)
        add_counter(out, op_io_xdp_counter_name(shown_xdp[i]), xdp[shown_xdp[i]]);
}

static void print_counters(const struct perf_run *r, const struct perf_counters *c)
{
    if (r->cfg->output != OP_PERF_OUT_FULL)
        return;
    fprintf(r->out, " offpath:");
    op_counters_print(r->out, c->names, c->vals, c->n, OP_COUNTERS_LINE);
    fprintf(r->out, "\n offpath: data check %s\n", r->check[0] ? r->check : "not applicable");
}

/* ---- a whole run */

struct results {
    struct op_perf_bw_result bw[OP_PERF_ALL_MAX_LOG2];
    struct op_perf_lat_result lat[OP_PERF_ALL_MAX_LOG2];
    size_t n;
};

static op_status_t exchange_check(struct perf_run *r)
{
    char rest[PERF_LINE_MAX];
    if (perf_oob_send(&r->oob, "CHECK %s", r->check[0] ? r->check : "-") != OP_OK)
        return peer_gone(r, -ECONNRESET);
    op_status_t st = perf_wait_line(r, "CHECK", rest, sizeof rest);
    if (st != OP_OK)
        return st;
    if (strncmp(rest, "failed", 6) == 0) {
        snprintf(r->check, sizeof r->check, "%.100s (at the peer)", rest);
        r->check_failed = true;
    } else if (strncmp(rest, "ok", 2) == 0 && r->check[0] == '\0') {
        snprintf(r->check, sizeof r->check, "%.100s", rest); /* "ok" and what it checked */
    }
    return OP_OK;
}

static op_status_t run_one_size(struct perf_run *r, uint64_t size, struct results *res)
{
    op_status_t st;
    bool device_posts = r->cfg->gpu.threads && !r->is_server;
    if (device_posts)
        st = perf_run_gpunetio(r, size, &res->bw[res->n]);
    else if (r->cfg->test == OP_PERF_BW)
        st = perf_run_bw(r, size, &res->bw[res->n]);
    else
        st = perf_run_lat(r, size, &res->lat[res->n]);
    if (st == OP_OK)
        st = exchange_check(r);
    if (st != OP_OK)
        return st;
    /* both sides print: a side that only served shows its peer's figures */
    if (r->cfg->test == OP_PERF_BW)
        op_perf_print_bw(r->out, r->cfg, &res->bw[res->n]);
    else
        op_perf_print_lat(r->out, r->cfg, &res->lat[res->n]);
    if (device_posts && r->cfg->output == OP_PERF_OUT_FULL)
        fprintf(r->out, " post latency per batch of %u writes: %.2f us (%" PRIu64 " launches)\n",
                r->cfg->gpu.threads, r->gpu_post_us, r->gpu_launches);
    if (device_posts && r->gpu_note[0])
        fprintf(r->out, " offpath: %s\n", r->gpu_note);
    fflush(r->out);
    res->n++;
    return OP_OK;
}

static op_status_t write_json(struct perf_run *r, const struct op_perf_banner *b,
                              const struct results *res)
{
    struct perf_counters pc;
    collect_counters(r, &pc);
    FILE *f = r->json_out != NULL ? r->json_out : fopen(r->cfg->json_file, "w");
    if (f == NULL) {
        int e = errno;
        snprintf(r->why, sizeof r->why, "cannot write --out_json_file %s: %s", r->cfg->json_file,
                 strerror(e));
        return op_status_from_errno(e);
    }
    struct op_perf_json j = {.banner = b, .n = res->n, .counter_names = pc.names,
                             .counter_vals = pc.vals, .n_counters = pc.n,
                             .data_check = r->check[0] ? r->check : NULL};
    if (r->cfg->test == OP_PERF_BW)
        j.bw = res->bw;
    else
        j.lat = res->lat;
    op_perf_write_json(f, r->cfg, &j);
    if (f == r->json_out)
        return OP_OK;
    return fclose(f) == 0 ? OP_OK : op_status_from_errno(errno);
}

void perf_print_waiting(FILE *out)
{
    fprintf(out, "\n************************************\n"
                 "* Waiting for client to connect... *\n"
                 "************************************\n");
    fflush(out);
}

static op_status_t meet_peer(struct perf_run *r)
{
    const struct op_perf_config *c = r->cfg;
    if (r->is_server && c->output == OP_PERF_OUT_FULL && r->req == NULL)
        perf_print_waiting(r->out); /* (a server of several clients said it once) */
    if (c->rdma_cm) /* no TCP: the peers meet through the CM (setup) */
        return OP_OK;
    return r->is_server ? perf_oob_accept(c->tcp_port, &r->oob, r->why, sizeof r->why)
                        : perf_oob_connect(c->server, c->tcp_port, &r->oob, r->why,
                                           sizeof r->why);
}

/* Where the side channel met the peer, or -d's address. */
static op_status_t local_address(struct perf_run *r, uint32_t *ip)
{
    const struct op_perf_config *c = r->cfg;
    *ip = perf_oob_local_ip(&r->oob);
    if (c->device != NULL && perf_ip_of_device(c->device, ip) != OP_OK)
        return perf_refuse(r->why, sizeof r->why,
                           "-d (--ib-dev) %s: not an IPv4 address or an interface with one",
                           c->device);
    return OP_OK;
}

static op_status_t setup(struct perf_run *r, uint64_t max_size, struct op_perf_banner *b,
                         char *devname, size_t devcap)
{
    const struct op_perf_config *c = r->cfg;
    if (c->gpu.threads) /* a slot per work-item, up to OP_PERF_GPU_TARGET_MAX bytes */
        max_size *= perf_gpu_slots(c, OP_PERF_GPU_TARGET_MAX, max_size);
    if (c->verb == OP_PERF_ATOMIC) /* a result slot per atomic in flight */
        max_size = OP_PERF_ATOMIC_SIZE * OP_PERF_ATOMIC_SLOTS;
    uint32_t ip;
    /* -R: the endpoint opens first, its control QP carries every line */
    op_status_t st = c->rdma_cm ? perf_cm_meet(r, max_size) : local_address(r, &ip);
    if (st != OP_OK)
        return st;
    if (c->rdma_cm)
        ip = r->ep.ip;
    bool named = op_io_ifname_of(ip, devname, devcap);
    if (!named)
        snprintf(devname, devcap, "offpath0");
    if (c->xdp && !named)
        return perf_refuse(r->why, sizeof r->why, "--xdp: no interface has -d's address");
    st = agree(r);
    if (st == OP_OK && !c->rdma_cm)
        st = perf_ep_open(&r->ep, c, ip, c->xdp ? devname : NULL, max_size, r->why,
                          sizeof r->why);
    if (st == OP_OK && c->gpu.threads && !r->is_server)
        st = perf_gpu_open(r);
    if (st == OP_OK && r->ep.gdev != NULL && c->output == OP_PERF_OUT_FULL)
        fprintf(r->out, " %s buffers: %s (%s)\n",
                op_gpu_dev_api(r->ep.gdev) == OP_GPU_API_VULKAN ? "Vulkan host-coherent"
                                                                : "OpenCL SVM",
                op_gpu_device_name(r->ep.gdev), op_gpu_driver_name(r->ep.gdev));
    if (st != OP_OK)
        return st;
    *b = (struct op_perf_banner){.device = devname, .mtu = r->ep.mtu, .out_reads = c->out_reads,
                                 .gid_index = c->gid_index >= 0 ? c->gid_index : 3,
                                 .is_server = r->is_server};
    if (c->output == OP_PERF_OUT_FULL)
        op_perf_print_banner(r->out, c, b);
    st = c->rdma_cm ? perf_cm_connect_qps(r) : exchange_qps(r);
    if (st == OP_OK)
        st = perf_ep_connect(&r->ep, r->why, sizeof r->why);
    if (st == OP_OK && c->output == OP_PERF_OUT_FULL)
        print_addresses(r);
    return st;
}

static op_status_t run_all(struct perf_run *r)
{
    const struct op_perf_config *c = r->cfg;
    uint64_t sizes[OP_PERF_ALL_MAX_LOG2];
    uint64_t n = run_sizes(c, c->mtu ? c->mtu : 4096, sizes);
    struct op_perf_banner b;
    char devname[IF_NAMESIZE + 1];
    struct results *res = calloc(1, sizeof(*res));
    if (res == NULL)
        return OP_ERR_NOMEM;
    /* a server of several clients accepted this one already (multi.c) */
    op_status_t st = perf_oob_up(&r->oob) ? OP_OK : meet_peer(r);
    if (st == OP_OK)
        st = setup(r, sizes[n - 1], &b, devname, sizeof devname);
    if (st == OP_OK && c->type == OP_RDMA_QPT_UD) {
        n = run_sizes(c, r->ep.mtu, sizes); /* the link may carry less than -m's default */
        if (!c->all && c->size > sizes[0])
            fprintf(stderr, " Max msg size in UD is MTU %" PRIu64 "\n Changing to this MTU\n",
                    sizes[0]);
    }
    if (st == OP_OK) {
        op_perf_print_header(r->out, c);
        fflush(r->out); /* the run starts now: one watching through a pipe sees it */
    }
    for (uint64_t i = 0; st == OP_OK && i < n; i++)
        st = run_one_size(r, sizes[i], res);
    if (st == OP_OK && res->n > 0) {
        r->last_bw = res->bw[res->n - 1];
        r->have_result = true;
    }
    if (st == OP_OK) {
        struct perf_counters pc;
        perf_ep_touch_finish(&r->ep);
        collect_counters(r, &pc);
        if (c->output == OP_PERF_OUT_FULL)
            fprintf(r->out, OP_PERF_LINE);
        print_counters(r, &pc);
        st = perf_barrier(r, "BYE"); /* the peer's last ACKs are in before we go */
    }
    if (st == OP_OK && c->json)
        st = write_json(r, &b, res);
    free(res);
    return st;
}

int perf_run_side(struct perf_run *r)
{
    r->started_ns = op_now_ns();
    op_status_t st = run_all(r);
    if (st != OP_OK && perf_oob_up(&r->oob)) {
        char one_line[sizeof r->why];
        snprintf(one_line, sizeof one_line, "%s", r->why);
        for (char *p = one_line; (p = strchr(p, '\n')) != NULL;)
            *p = ' ';
        (void)perf_oob_send(&r->oob, "FAIL %.200s", one_line);
    }
    fflush(r->out);
    if (st != OP_OK)
        fprintf(stderr, " %s\n", r->why[0] ? r->why : op_status_str(st));
    perf_oob_close(&r->oob);
    perf_gpu_close(r);
    perf_ep_close(&r->ep);
    free(r->posted);
    free(r->completed);
    if (st != OP_OK)
        return 1;
    return r->check_failed ? 1 : 0;
}

int op_perf_run(const struct op_perf_config *cfg)
{
    if (cfg->server == NULL && cfg->clients > 1)
        return perf_run_clients(cfg);
    struct perf_run r = {.cfg = cfg, .is_server = cfg->server == NULL,
                         .out = cfg->out ? cfg->out : stdout, .oob = {.fd = -1}};
    return perf_run_side(&r);
}
