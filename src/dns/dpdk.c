/* The DPDK models (built only when pkg-config finds libdpdk, into the
 * offpath binary alone: the library, the MPI shim and the socket model
 * never link DPDK).
 *
 * rtc: every worker lcore owns one RX/TX queue pair of the port (RSS
 * spreads the flows) and runs the loop (src/loop's frame mode) over it as
 * an op_io frame backend that lends its mbufs: receive a burst, answer
 * each frame in its own mbuf, send the burst.
 * pipeline: the first worker lcore owns the port's queue (RX and TX on one
 * lcore: AF_XDP stalls otherwise, reference/dns-dpdk.md); it hands frames
 * to the other worker lcores through an rte_ring and sends what they put on
 * the return ring. The workers run the same loop as rtc's lcores, over the
 * two rings as an op_io backend (op_io_dpdk_ring_open).
 *
 * Every frame is accounted for: answered (DNS, ARP, ICMP echo) or dropped
 * under a named counter; a full TX queue is retried with a doubling pause
 * (bounded), then the rest is counted and freed. The lcores poll as
 * poll.c says (sleeping when idle, bounded sleeps under a real-time
 * policy). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "dns_internal.h"
#include "offpath/io.h"

#define MAX_BURST 512

struct dpdk_state {
    struct op_dns_dpdk_config dc;
    struct op_io_dpdk *io; /* the port and its pool (src/io/dpdk.c) */
    uint16_t port;         /* the lcores' copies of io's */
    uint8_t mac[6];
    struct rte_mempool *pool;
    struct rte_ring *to_workers, *to_tx;
    unsigned workers; /* the pipeline's, beside the port's lcore */
    bool eal_up;
    bool cpu_shared[RTE_MAX_LCORE]; /* by worker index: another worker lcore runs on its CPU */
};

/* The query at q (plen bytes) answered into scratch, for a frame with
 * room bytes after its headers: the answer's length, 0 for none. */
static size_t answer_query(struct dns_worker *w, const struct op_dns_zones *z, size_t room,
                           const uint8_t *q, size_t plen, uint8_t *scratch)
{
    w->c[OP_DNS_C_udp_rx]++;
    struct op_dns_query_info qi = dns_query_info(
        &w->s->cfg, false, (uint16_t)(room < w->s->cfg.udp_max ? room : w->s->cfg.udp_max));
    return op_dns_respond(z, &qi, q, plen, scratch, 4096, w->c);
}

/* A frame that is not a datagram for us: a control reply written in place
 * (n > 0: send it), or counted as a drop by why it is not ours. */
static bool not_a_query(struct dns_worker *w, struct op_frame *f, size_t n, unsigned verdict)
{
    if (n > 0) {
        w->c[OP_DNS_C_ctl_rx]++;
        f->len = (uint32_t)n;
        return true;
    }
    w->c[verdict == OP_FRAME_OK || verdict == OP_FRAME_NOT_IP || verdict == OP_FRAME_NOT_UDP
             ? OP_DNS_C_drop_not_ours
             : OP_DNS_C_drop_frame]++;
    return false;
}

/* The answer in scratch moved behind hdr bytes of headers in the query's
 * frame; the Ethernet addresses for them, back to the asker. */
static struct op_frame_l2 answer_in_frame(const struct dpdk_state *d, uint8_t *f,
                                          const uint8_t to_mac[6], size_t hdr,
                                          const uint8_t *scratch, size_t alen)
{
    struct op_frame_l2 l2 = {.tos = 0};
    memcpy(l2.src_mac, d->mac, 6);
    memcpy(l2.dst_mac, to_mac, 6);
    memcpy(f + hdr, scratch, alen);
    return l2;
}

static bool serves_v4(const struct op_dns_server_config *cfg) { return !cfg->ipv6 || cfg->dual_stack; }
static bool serves_v6(const struct op_dns_server_config *cfg) { return cfg->ipv6 || cfg->dual_stack; }

#define ETHERTYPE_IPV6 0x86dd

/* The server's address of the flow's family, if it serves that family. */
static bool our_addr(const struct op_dns_server_config *cfg, unsigned family,
                     struct op_addr *out)
{
    if (family == OP_AF_IPV6 && serves_v6(cfg))
        *out = op_addr_ipv6(cfg->addr6);
    else if (family == OP_AF_IPV4 && serves_v4(cfg))
        *out = op_addr_ipv4(cfg->addr);
    else
        return false;
    return true;
}

/* ARP and ICMP echo for our IPv4 address, neighbour solicitations and
 * ICMPv6 echo for our IPv6 one: the reply's length (written in place), or 0. */
static size_t control_reply(const struct op_dns_server_config *cfg, const struct dpdk_state *d,
                            struct op_frame *f)
{
    struct op_addr ours;
    bool v6 = f->len >= 14 && f->data[12] == 0x86 && f->data[13] == 0xdd;
    unsigned family = v6 ? OP_AF_IPV6 : OP_AF_IPV4;
    if (!our_addr(cfg, family, &ours))
        return 0;
    return op_frame_control_reply(f->data, f->len, f->room, &ours, d->mac);
}

/* One frame (unparsed: UDP is read first, the rest only when it is not
 * ours; len 0 for a chained mbuf, whose bytes are not contiguous): a UDP
 * query to our address and port of either family answered in place, ARP,
 * neighbour discovery and echo answered beside it (true: send f, len set),
 * or dropped and counted. */
static bool handle_frame(struct dns_worker *w, const struct dpdk_state *d,
                         const struct op_dns_zones *z, struct op_frame *f, uint8_t *scratch)
{
    const struct op_dns_server_config *cfg = &w->s->cfg;
    struct op_flow flow;
    struct op_addr ours;
    uint8_t src_mac[6];
    size_t off, plen;
    w->c[OP_DNS_C_frames_rx]++;
    unsigned v = op_udp_frame_parse(f->data, f->len, &flow, src_mac, &off, &plen);
    if (v != OP_FRAME_OK || !our_addr(cfg, flow.dst.family, &ours) ||
        !op_addr_eq(&flow.dst, &ours) || flow.dst_port != cfg->port)
        return not_a_query(w, f, v == OP_FRAME_OK ? 0 : control_reply(cfg, d, f), v);
    size_t hdr = op_udp_frame_hdr_len(flow.dst.family);
    size_t alen = answer_query(w, z, f->room - hdr, f->data + off, plen, scratch);
    if (alen == 0 || !dns_rrl_pass(w, &flow.src, scratch, &alen))
        return false;
    struct op_flow back = op_flow_reverse(&flow);
    struct op_frame_l2 l2 = answer_in_frame(d, f->data, src_mac, hdr, scratch, alen);
    f->len = (uint32_t)op_udp_frame_headers(f->data, &back, &l2, alen);
    return true;
}

/* An ARP or ICMP reply (what is sent beside the answers). */
static bool frame_is_ctl(const uint8_t *f, uint32_t len)
{
    uint16_t type = len >= 14 ? (uint16_t)(f[12] << 8 | f[13]) : 0;
    return type == 0x0806 || (type == 0x0800 && len > 23 && f[23] == 1) ||
           (type == ETHERTYPE_IPV6 && len > 20 && f[20] == 58);
}

static bool mbuf_is_ctl(const struct rte_mbuf *m)
{
    return frame_is_ctl(rte_pktmbuf_mtod(m, const uint8_t *), rte_pktmbuf_data_len(m));
}

/* ---- the answering lcores (rtc's, the pipeline's workers) run the loop
 * over an op_io backend that lends them mbufs (a queue of the port, RSS
 * spreading the flows, or the pipeline's rings): each frame is answered in
 * its own mbuf and leaves in it. */

static void answer_frames(void *eng, struct op_frame *f, int n, uint64_t now,
                          struct op_frameq *out)
{
    struct dns_worker *w = eng;
    const struct dpdk_state *d = w->s->priv;
    uint8_t scratch[4096];
    (void)now;
    const struct op_dns_zones *z = dns_zones_enter(w);
    for (int i = 0; i < n; i++)
        if (handle_frame(w, d, z, &f[i], scratch))
            op_frameq_put(out, &f[i]); /* the rest go back to the queue unsent */
    dns_zones_leave(w);
}

static const struct op_engine_ops answer_ops = {.name = "dns-frames",
                                                .input_frames = answer_frames};

/* Up to MAX_BURST answers of f sent on io (a queue of the port): a full
 * device queue retried with a doubling pause up to the configured bound;
 * each counted sent or dropped, and what is left goes back. */
static void send_burst(struct dns_worker *w, struct op_io *io, struct op_frame *f, int n)
{
    const struct dpdk_state *d = w->s->priv;
    bool ctl[MAX_BURST]; /* classified before sending: sent bytes are the device's */
    for (int i = 0; i < n; i++)
        ctl[i] = frame_is_ctl(f[i].data, f[i].len);
    int sent = 0;
    unsigned tries = 0, pause_us = 1;
    while (sent < n) {
        sent += op_io_send_frames_some(io, f + sent, n - sent);
        if (sent == n || tries++ >= d->dc.tx_retries)
            break;
        w->c[OP_DNS_C_tx_retries]++;
        rte_delay_us_block(pause_us);
        pause_us = pause_us * 2 > d->dc.tx_backoff_us ? d->dc.tx_backoff_us : pause_us * 2;
    }
    for (int i = 0; i < n; i++)
        w->c[i < sent ? (ctl[i] ? OP_DNS_C_ctl_tx : OP_DNS_C_udp_tx)
                      : (ctl[i] ? OP_DNS_C_drop_tx_ctl : OP_DNS_C_drop_tx)]++;
    op_io_release_frames(io, f + sent, n - sent);
}

static void send_counted(struct dns_worker *w, struct op_io *io, struct op_frame *f, int n)
{
    for (int at = 0; at < n; at += MAX_BURST)
        send_burst(w, io, f + at, n - at < MAX_BURST ? n - at : MAX_BURST);
}

/* rtc's flush: the loop's queue sent on the lcore's queue of the port. */
static void flush_answers(void *ctx, struct op_io *io, struct op_frameq *q)
{
    send_counted(ctx, io, q->frames, q->n);
}

/* A worker of the pipeline: what the port's lcore's ring cannot take is
 * dropped and counted (it holds the TX retries), and goes back to be freed.
 * The loop's queue holds a burst (tx_queue), at most MAX_BURST. */
static void flush_to_ring(void *ctx, struct op_io *io, struct op_frameq *q)
{
    struct dns_worker *w = ctx;
    bool ctl[MAX_BURST];
    int n = q->n;
    for (int i = 0; i < n; i++)
        ctl[i] = frame_is_ctl(q->frames[i].data, q->frames[i].len);
    int sent = op_io_send_frames_some(io, q->frames, n);
    for (int i = sent; i < n; i++) {
        w->c[ctl[i] ? OP_DNS_C_drop_tx_ctl : OP_DNS_C_drop_tx]++;
        w->c[OP_DNS_C_tx_ring_full]++;
    }
    op_io_release_frames(io, q->frames + sent, n - sent);
}

/* The loop an answering lcore runs: over its queue of the port (rtc) or the
 * pipeline's rings (a worker), the answering engine on it. */
static op_status_t answer_loop(struct dns_worker *w, struct op_io **io, struct op_loop **l)
{
    struct dpdk_state *d = w->s->priv;
    int burst = (int)w->s->cfg.burst;
    bool rtc = !d->dc.pipeline;
    op_status_t st = rtc ? op_io_dpdk_queue_open(d->io, (uint16_t)w->index, io)
                         : op_io_dpdk_ring_open(d->io, d->to_workers, d->to_tx, true, io);
    /* a burst a round: a source that never runs dry (a replayed capture,
     * a flood) must not keep a round from ending and the stop being seen */
    struct op_loop_config lc = {.io = *io, .burst = burst, .tx_queue = burst, .frames = true,
                                .bursts_per_round = 1,
                                .flush_frames = rtc ? flush_answers : flush_to_ring,
                                .flush_ctx = w};
    if (st == OP_OK) {
        op_io_frames_unparsed(*io, true); /* handle_frame reads UDP first */
        st = op_loop_create(&lc, l);
    }
    if (st == OP_OK)
        st = op_loop_add(*l, &answer_ops, w);
    return st;
}

/* rtc, and a worker of the pipeline: the loop's rounds under the polling
 * policy, the counters published after each busy one. */
static int answer_main(void *arg)
{
    struct dns_worker *w = arg;
    const struct dpdk_state *d = w->s->priv;
    struct op_io *io = NULL;
    struct op_loop *l = NULL;
    op_status_t st = answer_loop(w, &io, &l);
    if (st != OP_OK)
        OP_WARN(w->s->cfg.log, "dns: lcore %u: %s", w->index, op_status_str(st));
    struct dns_poll idle;
    dns_poll_init(&idle, &d->dc.poll, d->cpu_shared[w->index], w->c);
    while (st == OP_OK && !dns_server_stopping(w->s)) {
        if (dns_polled(&idle, op_loop_serve(l) > 0))
            dns_publish(w);
    }
    dns_publish(w);
    op_loop_destroy(l);
    if (io != NULL)
        op_io_close(io);
    return 0;
}

/* How many frames the port's lcore may take in now: no more than both
 * rings can hold once the frames already inside reach the return ring
 * (those on the workers' ring, and a burst in each worker's hands). What
 * it cannot take waits in the port's RX ring, where the device counts what
 * it drops; the pipeline itself then never drops for a full ring, and an
 * lcore sharing its CPU with a worker goes idle and lets the worker run,
 * instead of receiving frames only to drop them (1.4M -> 2.0M answers/s
 * for the pipeline on one core, bench/dns/replay). */
static unsigned pipeline_room(const struct dpdk_state *d, unsigned burst)
{
    unsigned inside = rte_ring_count(d->to_workers) + d->workers * burst;
    unsigned to_tx = rte_ring_free_count(d->to_tx);
    unsigned rx = rte_ring_free_count(d->to_workers);
    unsigned tx = to_tx > inside ? to_tx - inside : 0;
    return rx < tx ? rx : tx;
}

/* ---- the pipeline's port lcore: two loops, over the port's queue and
 * over the return ring, moving each frame on as it is (unparsed, in its
 * mbuf) */
struct port_lcore {
    struct dns_worker *w;
    struct op_io *port, *ring; /* ring: from the return ring, to the workers' */
};

/* From the port to the workers' ring; what it cannot take is counted here
 * and freed. */
static void to_workers(void *eng, struct op_frame *f, int n, uint64_t now,
                       struct op_frameq *out)
{
    struct port_lcore *p = eng;
    (void)now, (void)out;
    int sent = op_io_send_frames_some(p->ring, f, n);
    for (int i = 0; i < sent; i++)
        f[i].lent = NULL; /* the ring's now */
    for (int i = sent; i < n; i++) {
        p->w->c[OP_DNS_C_frames_rx]++;
        p->w->c[OP_DNS_C_drop_ring_rx]++;
    }
}

/* From the return ring to the port: the answers sent (counted), the
 * frames a worker dropped (emptied, counted there) freed. */
static void to_port(void *eng, struct op_frame *f, int n, uint64_t now, struct op_frameq *out)
{
    struct port_lcore *p = eng;
    int k = 0;
    (void)now, (void)out;
    for (int i = 0; i < n; i++) /* answers to the front, in order; emptied ones behind */
        if (f[i].len > 0) {
            if (i != k) {
                struct op_frame t = f[k];
                f[k] = f[i];
                f[i] = t;
            }
            k++;
        }
    send_counted(p->w, p->port, f, k);
    for (int i = 0; i < k; i++)
        f[i].lent = NULL; /* sent or released on the port; the loop frees the emptied ones */
}

static const struct op_engine_ops to_workers_ops = {.name = "dns-to-workers",
                                                    .input_frames = to_workers},
                                  to_port_ops = {.name = "dns-to-port",
                                                 .input_frames = to_port};

static int port_budget(void *ctx)
{
    const struct port_lcore *p = ctx;
    const struct dpdk_state *d = p->w->s->priv;
    unsigned burst = p->w->s->cfg.burst, room = pipeline_room(d, burst);
    return (int)(room < burst ? room : burst);
}

static op_status_t port_loops(struct port_lcore *p, struct op_loop **from_port,
                              struct op_loop **from_ring)
{
    struct dpdk_state *d = p->w->s->priv;
    int burst = (int)p->w->s->cfg.burst;
    op_status_t st = op_io_dpdk_queue_open(d->io, 0, &p->port);
    if (st == OP_OK)
        st = op_io_dpdk_ring_open(d->io, d->to_tx, d->to_workers, false, &p->ring);
    if (st != OP_OK)
        return st;
    op_io_frames_unparsed(p->port, true);
    op_io_frames_unparsed(p->ring, true);
    struct op_loop_config pc = {.io = p->port, .burst = burst, .frames = true,
                               .bursts_per_round = 1, .rx_budget = port_budget,
                               .budget_ctx = p};
    struct op_loop_config rc = {.io = p->ring, .burst = burst, .frames = true,
                               .bursts_per_round = 1};
    if ((st = op_loop_create(&pc, from_port)) == OP_OK &&
        (st = op_loop_add(*from_port, &to_workers_ops, p)) == OP_OK &&
        (st = op_loop_create(&rc, from_ring)) == OP_OK)
        st = op_loop_add(*from_ring, &to_port_ops, p);
    return st;
}

/* Pipeline, the port's lcore: the port's frames to the workers' ring, their
 * answers out, under the polling policy. */
static int io_main(void *arg)
{
    struct dns_worker *w = arg;
    const struct dpdk_state *d = w->s->priv;
    struct port_lcore p = {.w = w};
    struct op_loop *from_port = NULL, *from_ring = NULL;
    op_status_t st = port_loops(&p, &from_port, &from_ring);
    if (st != OP_OK)
        OP_WARN(w->s->cfg.log, "dns: the port's lcore: %s", op_status_str(st));
    struct dns_poll idle;
    dns_poll_init(&idle, &d->dc.poll, d->cpu_shared[w->index], w->c);
    while (st == OP_OK && !dns_server_stopping(w->s)) {
        int n = op_loop_serve(from_port);
        int got = op_loop_serve(from_ring);
        if (dns_polled(&idle, n > 0 || got > 0))
            dns_publish(w);
    }
    dns_publish(w);
    op_loop_destroy(from_port);
    op_loop_destroy(from_ring);
    if (p.port != NULL)
        op_io_close(p.port);
    if (p.ring != NULL)
        op_io_close(p.ring);
    return 0;
}

/* ---- setup ---- */
#define FAIL_IF(cond, ...) OP_FAIL_IF(cond, err, errlen, __VA_ARGS__)

/* The port (a queue per rtc worker, one for the pipeline's port lcore)
 * and the pipeline's rings. */
static op_status_t port_and_rings(struct dpdk_state *d, unsigned nq, bool shared, char *err,
                                  size_t errlen)
{
    const struct op_io_dpdk_config pc = {.queues = d->dc.pipeline ? 1 : nq,
                                         .mbufs = d->dc.mbufs, .mbuf_cache = d->dc.mbuf_cache,
                                         .rx_desc = d->dc.rx_desc, .tx_desc = d->dc.tx_desc};
    op_status_t st = op_io_dpdk_port_open(&pc, &d->io, err, errlen);
    if (st != OP_OK)
        return st;
    d->port = op_io_dpdk_port_id(d->io);
    op_io_dpdk_mac(d->io, d->mac);
    d->pool = op_io_dpdk_pool(d->io);
    if (!d->dc.pipeline)
        return OP_OK;
    /* One producer into the workers' ring and one consumer of the other.
     * The workers' side is multi-threaded: with the default (MP/MC) sync a
     * worker that loses its CPU halfway through a dequeue makes the others
     * spin until it is back, which with two workers on one CPU took the
     * pipeline from 3.2M to 16k answers/s (bench/dns/replay). Relaxed tail
     * sync (RTS) lets the others go on meanwhile; it costs a little more
     * where every lcore has its own CPU, so it is used only where one does
     * not. */
    unsigned multi_enq = shared ? RING_F_MP_RTS_ENQ : 0;
    unsigned multi_deq = shared ? RING_F_MC_RTS_DEQ : 0;
    d->to_workers = rte_ring_create("ofdns_rx", d->dc.ring_size, (int)rte_socket_id(),
                                    RING_F_SP_ENQ | multi_deq);
    d->to_tx = rte_ring_create("ofdns_tx", d->dc.ring_size, (int)rte_socket_id(),
                               multi_enq | RING_F_SC_DEQ);
    FAIL_IF(d->to_workers == NULL || d->to_tx == NULL, "rings of %u: %s", d->dc.ring_size,
            rte_strerror(rte_errno));
    return OP_OK;
}

static void port_stats(const struct op_dns_server *s, uint64_t *c)
{
    const struct dpdk_state *d = s->priv;
    struct op_io_dpdk_drops st;
    op_io_dpdk_stats(d != NULL ? d->io : NULL, &st);
    c[OP_DNS_C_port_imissed] += st.imissed;
    c[OP_DNS_C_port_rx_nombuf] += st.rx_nombuf;
    c[OP_DNS_C_port_oerrors] += st.oerrors;
}

/* The kernel TCP threads after the lcores' workers: one, and a second on
 * the other family's address for a dual stack. */
static unsigned tcp_threads(const struct op_dns_server_config *cfg)
{
    return cfg->dual_stack ? 2 : 1;
}

/* Once every lcore has stopped: answers the workers put on the return
 * ring after the port's lcore left are not sent; they are counted as TX
 * drops there, so the counters still balance. Frames still on the
 * workers' ring were never counted as received, and are only freed. */
static void drain_rings(struct op_dns_server *s, struct dpdk_state *d)
{
    struct dns_worker *io = &s->w[0];
    struct rte_mbuf *m;
    while (d->to_tx != NULL && rte_ring_dequeue(d->to_tx, (void **)&m) == 0) {
        if (rte_pktmbuf_data_len(m) > 0)
            io->c[mbuf_is_ctl(m) ? OP_DNS_C_drop_tx_ctl : OP_DNS_C_drop_tx]++;
        rte_pktmbuf_free(m);
    }
    while (d->to_workers != NULL && rte_ring_dequeue(d->to_workers, (void **)&m) == 0)
        rte_pktmbuf_free(m);
    dns_publish(io);
}

static void dpdk_halt(struct op_dns_server *s, uint64_t *final)
{
    struct dpdk_state *d = s->priv;
    if (d == NULL)
        return;
    rte_eal_mp_wait_lcore();
    drain_rings(s, d);
    for (unsigned k = 0; k < tcp_threads(&s->cfg); k++)
        dns_thread_stop(&s->w[s->nw - 1 - k]); /* TCP */
    if (final != NULL)
        port_stats(s, final);
    op_io_dpdk_close(d->io);
    rte_ring_free(d->to_workers);
    rte_ring_free(d->to_tx);
    if (d->eal_up)
        op_io_dpdk_eal_cleanup();
    free(d);
    s->priv = NULL;
}

/* 2048 RX descriptors: over AF_XDP the RX ring then holds every buffer
 * the PMD gives the fill ring (2048), so a lcore that loses its CPU for a
 * while (the pipeline's two lcores on one core) has 2048 frames of slack,
 * not 1024: at 330k qps its loss went from 24-41% to 1-3% here. */
void op_dns_dpdk_config_default(struct op_dns_dpdk_config *dc)
{
    *dc = (struct op_dns_dpdk_config){.pipeline = false, .mbufs = 65535, .mbuf_cache = 256,
                                      .ring_size = 4096, .rx_desc = 2048, .tx_desc = 1024,
                                      .tx_retries = 16, .tx_backoff_us = 100,
                                      .poll = OP_DNS_POLL_DEFAULT};
}

/* TCP through the kernel (RFC 7766: truncated answers are asked again
 * there), on each listen address the kernel has too; the AF_XDP port's XDP
 * program must pass TCP to the kernel (offpath dns gives it one). Without
 * the address, UDP alone is served on it. */
static void tcp_start(struct op_dns_server *s)
{
    for (unsigned k = 0; k < tcp_threads(&s->cfg); k++) {
        struct dns_worker *w = &s->w[s->nw - 1 - k];
        w->other_family = k == 1;
        op_status_t st = dns_tcp_start(w);
        if (st != OP_OK)
            OP_WARN(s->cfg.log, "dns: TCP over %s not served (%s): the kernel must have the "
                    "--listen address (on the port's interface) for TCP to reach it",
                    s->cfg.ipv6 != w->other_family ? "IPv6" : "IPv4", op_status_str(st));
    }
}

/* Which workers share a CPU with another; true if any does. */
static bool note_shared_cpus(struct dpdk_state *d)
{
    unsigned i = 0, lcore;
    bool any = false;
    RTE_LCORE_FOREACH_WORKER(lcore)
        any |= d->cpu_shared[i++] = op_io_dpdk_lcore_shares_cpu(lcore);
    return any;
}

static op_status_t launch(struct op_dns_server *s)
{
    const struct dpdk_state *d = s->priv;
    unsigned i = 0, lcore;
    RTE_LCORE_FOREACH_WORKER(lcore)
    {
        lcore_function_t *fn = d->dc.pipeline && i == 0 ? io_main : answer_main;
        if (rte_eal_remote_launch(fn, &s->w[i], lcore) != 0)
            return OP_ERR_STATE;
        s->w[i++].started = true;
    }
    return OP_OK;
}

#ifdef OP_DNS_XDP_PROG
#define XDP_PROG OP_DNS_XDP_PROG
#else
#define XDP_PROG NULL
#endif

op_status_t op_dns_dpdk_start(const struct op_dns_server_config *cfg,
                              const struct op_dns_dpdk_config *dc, struct op_dns_zones *zones,
                              struct op_dns_server **out, char *err, size_t errlen)
{
    snprintf(err, errlen, "ok");
    FAIL_IF(cfg->burst < 1 || cfg->burst > MAX_BURST, "--burst must be 1..%d", MAX_BURST);
    /* the AF_XDP vdev gets dns_xdp.bpf.c: TCP and ARP replies to the
     * kernel, so TCP is served by the kernel socket beside the models */
    const struct op_io_dpdk_config ec = {.name = "offpath-dns", .n_eal_args = dc->n_eal_args,
                                         .eal_args = dc->eal_args,
                                         .xdp_prog = dc->xdp_prog ? dc->xdp_prog : XDP_PROG};
    op_status_t est = op_io_dpdk_eal_init(&ec, err, errlen);
    if (est != OP_OK)
        return est;
    unsigned workers = rte_lcore_count() - 1;
    if (workers < (dc->pipeline ? 2u : 1u) || op_io_dpdk_ports() < 1) {
        snprintf(err, errlen, "%s needs %s worker lcore(s) (-l) and a port (--vdev): got %u "
                 "and %u", dc->pipeline ? "pipeline" : "rtc", dc->pipeline ? "2+" : "1+",
                 workers, op_io_dpdk_ports());
        op_io_dpdk_eal_cleanup();
        return OP_ERR_INVAL;
    }
    struct op_dns_server *s = dns_server_alloc(cfg, zones, workers + tcp_threads(cfg));
    struct dpdk_state *d = calloc(1, sizeof(*d));
    if (s == NULL || d == NULL) {
        free(d);
        if (s != NULL)
            op_dns_server_stop(s, NULL);
        op_io_dpdk_eal_cleanup();
        return OP_ERR_NOMEM;
    }
    d->dc = *dc;
    d->workers = workers - 1;
    d->eal_up = true;
    s->priv = d;
    s->halt = dpdk_halt;
    s->port_stats = port_stats;
    op_status_t st = port_and_rings(d, workers, note_shared_cpus(d), err, errlen);
    if (st == OP_OK)
        st = launch(s);
    if (st == OP_OK)
        tcp_start(s);
    if (st != OP_OK) {
        op_dns_server_stop(s, NULL);
        return st;
    }
    *out = s;
    return OP_OK;
}
