/* The endpoint: the rdma engine driven over one UDP socket. Data never
 * leaves as anything but RoCEv2; the socket binds UDP 4791 when it is free
 * (a capture then decodes as RoCEv2 with no hints) and any port otherwise,
 * which the side channel tells the peer. */
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "perf_int.h"

#define PATTERN_SEED 0x0ff9a7ull
#define LOOPBACK_TRIES 16
/* the timer scan covers every QP (-q up to 16384); timers are tens of us
 * or more, so a look every few polls is on time */
#define TIMER_EVERY 8 /* polls */
#define PERF_EVENT_WAIT_NS (10 * OP_NS_PER_MS)
/* A latency test spins as bench/udp_pingpong, its floor, does: a yield
 * every 64 empty polls. The loop's 16 yielded about once per round trip,
 * and on a shared machine each yield handed the core to someone else
 * (ib_write_lat's typical 4.78 against 2.03 us at load 6). A bandwidth
 * test's own loop yields by itself (bw.c's spin_turn, which watches what
 * its yields cost); the loop's rare yield is left for the other spins on
 * the same loop (-R's control messages), which do not sleep. */
#define PERF_YIELD_EVERY 64
#define RC_REMOTE_ACCESS (OP_RDMA_ACCESS_REMOTE_READ | OP_RDMA_ACCESS_REMOTE_ATOMIC)

op_status_t perf_refuse(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return OP_ERR_INVAL;
}

/* The device on the loop (offpath/loop.h); a short send is loss, which RC
 * resends. */
static op_status_t open_loop(struct perf_ep *ep)
{
    struct op_loop_config lc = {
        .io = ep->io, .timer_every = TIMER_EVERY,
        .yield_every = PERF_YIELD_EVERY};
    op_status_t st = op_loop_create(&lc, &ep->loop);
    return st == OP_OK ? op_loop_add(ep->loop, &op_rdma_dev_ops, ep->dev) : st;
}

/* Two ends on one loopback address cannot both have 4791: the second moves
 * to the next loopback address that has it free (each emulated host has its
 * own 127.x address anyway), so every packet is RoCEv2 by its port. */
static op_status_t open_roce_port(uint32_t ip, bool may_move, struct op_io **io)
{
    bool loopback = (ip >> 24) == 127;
    for (uint32_t k = 0; k < (may_move && loopback ? LOOPBACK_TRIES : 1); k++) {
        uint32_t a = (ip & 0xffffff00u) | (((ip & 0xffu) + k - 1) % 254 + 1); /* not .0, .255 */
        if (op_io_udp_open(k == 0 ? ip : a, OP_ROCE_UDP_PORT, io) == OP_OK)
            return OP_OK;
    }
    return op_io_udp_open(ip, 0, io);
}

static op_status_t open_io(struct perf_ep *ep, uint32_t ip, const char *xdp_ifname,
                          struct op_io **io, char *why, size_t len)
{
    if (xdp_ifname != NULL) {
        op_status_t st = op_io_xdp_open(xdp_ifname, ip, OP_ROCE_UDP_PORT, &ep->log, io);
        return st == OP_OK ? st
                           : perf_refuse(why, len, "--xdp: cannot drive %s through AF_XDP: %s",
                                         xdp_ifname, op_status_str(st));
    }
    if (open_roce_port(ip, ep->cfg->device == NULL, io) == OP_OK) {
        op_io_udp_batching(*io, ep->cfg->udp_batching);
        return OP_OK;
    }
    char a[16];
    op_format_ipv4(ip, a);
    return perf_refuse(why, len, "cannot open a UDP socket on %s (-d)", a);
}

static op_status_t open_socket(struct perf_ep *ep, uint32_t ip, const char *xdp_ifname,
                               char *why, size_t len)
{
    struct op_io *io = NULL;
    op_status_t st = open_io(ep, ip, xdp_ifname, &io, why, len);
    if (st != OP_OK)
        return st;
    if (ep->cfg->tclass >= 0) {
        int tos = ep->cfg->tclass;
        (void)setsockopt(op_io_fd(io), IPPROTO_IP, IP_TOS, &tos, sizeof tos);
    }
    ep->port = op_io_local_port(io);
    ep->ip = op_io_local_ip(io);
    ep->link_mtu = op_io_link_mtu(io);
    ep->base_io = io;
    ep->io = io; /* each layer below wraps it: perf_ep_close closes them all */
    /* under --loss's layer: the capture holds what crossed the wire */
    if (ep->cfg->pcap != NULL && op_io_pcap_wrap(ep->io, ep->cfg->pcap, &ep->io) != OP_OK)
        return perf_refuse(why, len, "cannot set up --pcap");
    if (ep->cfg->loss > 0) {
        struct op_fault_cfg f = {.drop = ep->cfg->loss, .seed = ep->cfg->loss_seed};
        if (op_io_fault_wrap(ep->io, &f, &ep->io) != OP_OK)
            return perf_refuse(why, len, "cannot set up --loss");
    }
    return OP_OK;
}

/* The largest IB MTU whose packets, with every header a packet can carry
 * (IPv4, UDP, BTH, RETH, ImmDt, ICRC), fit the link: 1024 on a 1500-byte
 * Ethernet, as a RoCE NIC's active MTU. */
#define PERF_ROCE_OVERHEAD (20 + 8 + OP_BTH_LEN + OP_RETH_LEN + OP_IMMDT_LEN + OP_ICRC_LEN)
static uint32_t link_ib_mtu(uint32_t link_mtu)
{
    uint32_t m = 4096;
    while (link_mtu != 0 && m > 256 && m + PERF_ROCE_OVERHEAD > link_mtu)
        m /= 2;
    return m;
}

static op_status_t choose_mtu(struct perf_ep *ep, char *why, size_t len)
{
    uint32_t fits = link_ib_mtu(ep->link_mtu);
    if (ep->link_mtu != 0 && fits + PERF_ROCE_OVERHEAD > ep->link_mtu)
        return perf_refuse(why, len, "the link's MTU %u is too small for RoCEv2 (at least %u)",
                           ep->link_mtu, 256 + PERF_ROCE_OVERHEAD);
    ep->mtu = ep->cfg->mtu ? ep->cfg->mtu : fits;
    if (ep->mtu > fits)
        return perf_refuse(why, len, "-m (--mtu) %u: the link's MTU is %u, which carries at most %u",
                           ep->mtu, ep->link_mtu, fits);
    return OP_OK;
}

static void fill_pattern(uint8_t *p, size_t n)
{
    struct op_rng rng;
    op_rng_seed(&rng, PATTERN_SEED);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = op_rng_next(&rng);
        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

/* --use_opencl / --use_vulkan: every QP buffer in memory the device shares
 * with the host (fine-grained SVM, host-coherent memory), which the engine
 * registers and reads and writes like host memory. */
static op_status_t open_gpu(struct perf_ep *ep, char *why, size_t len)
{
    char cause[256];
    const struct op_perf_config *c = ep->cfg;
    if (op_gpu_open(c->gpu.api, c->gpu.platform, c->gpu.device, c->gpu.mem, &ep->gdev,
                    cause, sizeof cause) == OP_OK)
        return OP_OK;
    if (c->gpu.api == OP_GPU_API_VULKAN)
        return perf_refuse(why, len, "--use_vulkan=%u: %s", c->gpu.device, cause);
    return perf_refuse(why, len, "--use_opencl=%u,%u: %s", c->gpu.platform, c->gpu.device, cause);
}

static void stop_touch(struct perf_ep *ep);

/* --gpu_touch: the device reads every QP buffer; once before the test, or
 * a pass after a pass while it runs (perf_ep_progress). */
static op_status_t start_touch(struct perf_ep *ep, char *why, size_t len)
{
    ep->touch = calloc(ep->nqp, sizeof(*ep->touch));
    if (ep->touch == NULL)
        return perf_refuse(why, len, "out of memory for --gpu_touch");
    for (uint32_t i = 0; i < ep->nqp; i++)
        if (op_gpu_toucher_create(ep->gdev, ep->qps[i].buf, 2 * ep->bufsize, &ep->touch[i]) != OP_OK)
            return perf_refuse(why, len, "--gpu_touch: cannot set up the touch kernel");
    perf_ep_touch(ep);
    if (ep->cfg->gpu.touch == OP_PERF_TOUCH_ONCE) {
        stop_touch(ep); /* waits for each buffer's pass */
        ep->touch_passes = ep->nqp;
    }
    return OP_OK;
}

static void stop_touch(struct perf_ep *ep)
{
    for (uint32_t i = 0; ep->touch != NULL && i < ep->nqp; i++)
        op_gpu_toucher_destroy(ep->touch[i]); /* waits for its pass */
    free(ep->touch);
    ep->touch = NULL;
}

void perf_ep_touch(struct perf_ep *ep)
{
    if (ep->touch == NULL)
        return;
    uint64_t passes = 0;
    for (uint32_t i = 0; i < ep->nqp; i++)
        passes += op_gpu_toucher_step(ep->touch[i]);
    ep->touch_passes = passes;
}

/* --gpu_touch=infinite at the end of a test: the pass still running read
 * the buffers while the test ran; it is waited for and counted, so a test
 * shorter than one pass (a loaded machine, a slow device) still reports it. */
void perf_ep_touch_finish(struct perf_ep *ep)
{
    if (ep->touch == NULL)
        return;
    uint64_t passes = 0;
    for (uint32_t i = 0; i < ep->nqp; i++)
        passes += op_gpu_toucher_finish(ep->touch[i]);
    ep->touch_passes = passes;
}

static op_status_t open_qp(struct perf_ep *ep, struct perf_qp *q, uint64_t seed)
{
    const struct op_perf_config *c = ep->cfg;
    /* a latency test keeps its unsignaled messages until an ACK covers them;
     * with room for 2 x PERF_LAT_SIGNAL_EVERY only, the message after a
     * signaled one found the queue half full (its ACK comes after the
     * answer) and asked for an ACK too: 3 ACKs per 16 messages, not 2 */
    uint32_t unacked = c->test == OP_PERF_LAT ? 4 * PERF_LAT_SIGNAL_EVERY : 0;
    const struct op_rdma_qp_init_attr ia = {
        .type = c->type, .send_cq = ep->scq, .recv_cq = ep->rcq,
        .max_send_wr = c->tx_depth + 1 + unacked, .max_recv_wr = c->rx_depth + 1,
        .max_inline_data = c->inline_size, .srq = ep->srq};
    size_t len = (2 * ep->bufsize + 4095) / 4096 * 4096;
    q->buf = ep->gdev ? op_gpu_alloc(ep->gdev, len) : aligned_alloc(4096, len);
    if (q->buf == NULL)
        return OP_ERR_NOMEM;
    memcpy(q->buf, ep->pattern, ep->bufsize);
    memset(q->buf + ep->bufsize, 0, ep->bufsize);
    struct op_rng rng;
    op_rng_seed(&rng, seed);
    q->psn = (uint32_t)(op_rng_next(&rng) & 0xffffffu);
    unsigned access = OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE |
                      (c->type == OP_RDMA_QPT_RC ? RC_REMOTE_ACCESS : 0);
    if (op_rdma_reg_mr(ep->dev, q->buf, 2 * ep->bufsize, access, &q->mr) != OP_OK)
        return OP_ERR_NOMEM;
    return op_rdma_qp_create(ep->dev, &ia, &q->qp);
}

op_status_t perf_ep_open(struct perf_ep *ep, const struct op_perf_config *cfg, uint32_t ip,
                         const char *xdp_ifname, size_t max_size, char *why, size_t len)
{
    memset(ep, 0, sizeof(*ep));
    ep->cfg = cfg;
    ep->ip = ip;
    ep->nqp = cfg->qps;
    ep->bufsize = max_size + (cfg->type == OP_RDMA_QPT_UD ? OP_RDMA_UD_GRH_LEN : 0);
    op_log_init(&ep->log, "rdma", cfg->log_level);
    op_status_t st = open_socket(ep, ip, xdp_ifname, why, len);
    if (st == OP_OK)
        st = choose_mtu(ep, why, len);
    if (st != OP_OK)
        return st;
    uint64_t seed = op_now_ns() ^ ((uint64_t)ep->ip << 20) ^ ep->port;
    struct op_rdma_dev_config dc = {.ip = ep->ip, .port = ep->port, .seed = seed, .log = &ep->log};
    uint32_t depth = ep->nqp * (cfg->tx_depth > cfg->rx_depth ? cfg->tx_depth : cfg->rx_depth);
    ep->pattern = malloc(ep->bufsize);
    ep->qps = calloc(ep->nqp, sizeof(*ep->qps));
    if (ep->pattern == NULL || ep->qps == NULL || op_rdma_dev_create(&dc, &ep->dev) != OP_OK ||
        op_rdma_cq_create(ep->dev, depth + 16, &ep->scq) != OP_OK ||
        op_rdma_cq_create(ep->dev, depth + 16, &ep->rcq) != OP_OK || open_loop(ep) != OP_OK ||
        (cfg->use_srq && op_rdma_srq_create(ep->dev, cfg->rx_depth + 16, &ep->srq) != OP_OK))
        return perf_refuse(why, len, "out of memory setting up the device");
    fill_pattern(ep->pattern, ep->bufsize);
    if (cfg->gpu.use_gpu && (st = open_gpu(ep, why, len)) != OP_OK)
        return st;
    for (uint32_t i = 0; i < ep->nqp; i++)
        if (open_qp(ep, &ep->qps[i], seed + i * 7919) != OP_OK)
            return perf_refuse(why, len,
                               "cannot create QP %u of %u with 2 x %zu bytes of buffer (-q, -s)",
                               i + 1, ep->nqp, ep->bufsize);
    return cfg->gpu.touch != OP_PERF_TOUCH_NONE ? start_touch(ep, why, len) : OP_OK;
}

void perf_ep_close(struct perf_ep *ep)
{
    stop_touch(ep);
    if (ep->dev != NULL)
        op_rdma_dev_destroy(ep->dev); /* its QPs, CQs and MRs too */
    for (uint32_t i = 0; ep->qps != NULL && i < ep->nqp; i++) {
        if (ep->gdev != NULL)
            op_gpu_free(ep->gdev, ep->qps[i].buf);
        else
            free(ep->qps[i].buf);
    }
    op_gpu_close(ep->gdev);
    free(ep->qps);
    free(ep->pattern);
    op_loop_destroy(ep->loop);
    if (ep->io != NULL)
        op_io_close(ep->io);
    memset(ep, 0, sizeof(*ep));
}

/* A bandwidth test's send window: up to 2 MiB in flight over all its QPs,
 * OP_RDMA_DEFAULT_WINDOW..512 PSNs each. One QP's 128 PSNs of 4 KiB (rxe's
 * window) ran dry before the peer's ACKs came back: the sender spun and
 * slept, and woke again, per half megabyte (ib_write_bw -s 1M: 512 PSNs
 * gave 14-17% more MiB/s and less CPU per byte, loaded or not, 1024 and
 * 2048 less than 512: the bytes in flight leave the caches). */
#define PERF_BW_IN_FLIGHT (2u << 20)
#define PERF_BW_WINDOW_MAX 512u

static uint32_t send_window(const struct perf_ep *ep)
{
    if (ep->cfg->test != OP_PERF_BW || ep->nqp == 0 || ep->mtu == 0)
        return 0; /* the default */
    uint64_t w = PERF_BW_IN_FLIGHT / ((uint64_t)ep->mtu * ep->nqp);
    return w < OP_RDMA_DEFAULT_WINDOW ? OP_RDMA_DEFAULT_WINDOW
           : w > PERF_BW_WINDOW_MAX   ? PERF_BW_WINDOW_MAX
                                      : (uint32_t)w;
}

op_status_t perf_ep_connect(struct perf_ep *ep, char *why, size_t len)
{
    const struct op_perf_config *c = ep->cfg;
    for (uint32_t i = 0; i < ep->nqp; i++) {
        struct perf_qp *q = &ep->qps[i];
        struct op_rdma_qp_attr a = {
            .access = OP_RDMA_ACCESS_REMOTE_WRITE | (c->type == OP_RDMA_QPT_RC ? RC_REMOTE_ACCESS : 0),
            .qkey = PERF_QKEY,
            .path_mtu = ep->mtu,
            .dest_qpn = q->peer.qpn,
            .rq_psn = q->peer.psn,
            .remote_ip = q->peer.ip,
            .remote_port = q->peer.port,
            .min_rnr_timer = 12, /* 0.64 ms, perftest's */
            .sq_psn = q->psn,
            .timeout = c->qp_timeout,
            .retry_cnt = c->retry_cnt,
            .rnr_retry = 7,
            .max_rd_atomic = perf_client_only(c) ? (uint8_t)c->out_reads : 0,
            .max_outstanding = send_window(ep),
        };
        if (op_rdma_qp_modify(q->qp, OP_RDMA_QPS_INIT, &a) != OP_OK ||
            op_rdma_qp_modify(q->qp, OP_RDMA_QPS_RTR, &a) != OP_OK ||
            op_rdma_qp_modify(q->qp, OP_RDMA_QPS_RTS, &a) != OP_OK)
            return perf_refuse(why, len, "QP %u: cannot move to RTS: %s", i,
                               op_rdma_qp_error(q->qp));
    }
    return OP_OK;
}

void perf_ep_flush(struct perf_ep *ep) { op_loop_flush(ep->loop); }

struct op_txq *perf_ep_txq(struct perf_ep *ep) { return op_loop_txq(ep->loop); }

uint64_t perf_ep_flushes(const struct perf_ep *ep)
{
    struct op_loop_stats st;
    op_loop_stats(ep->loop, &st);
    return st.flushes;
}

void perf_ep_answer_first(struct perf_ep *ep, int acks)
{
    struct op_txq *q = perf_ep_txq(ep);
    struct op_pkt held[OP_IO_BURST];
    if (acks <= 0 || acks >= q->n || acks > OP_IO_BURST)
        return;
    memcpy(held, q->pkts, (size_t)acks * sizeof(*held));
    memmove(q->pkts, q->pkts + acks, (size_t)(q->n - acks) * sizeof(*held));
    memcpy(q->pkts + (q->n - acks), held, (size_t)acks * sizeof(*held));
}

/* A latency test's one connected QP is the only peer that sends to this
 * socket: its datagrams are read without their sender's address (the
 * kernel's copy out and our conversion, on every answer's path), and the
 * ICRC, which covers the sender's address and port, refuses anything that
 * came from elsewhere. Not for UD (anyone may send), nor with -R (the CM
 * talks on the same port). */
static void lat_sender(struct perf_ep *ep)
{
    const struct op_perf_config *c = ep->cfg;
    bool one_peer = ep->nqp == 1 && c->type != OP_RDMA_QPT_UD && !c->rdma_cm;
    struct op_endpoint peer = {.addr = op_addr_ipv4(ep->qps[0].peer.ip),
                               .port = ep->qps[0].peer.port};
    op_io_udp_assume_sender(ep->base_io, one_peer ? &peer : NULL);
}

/* A ping-pong of one-packet messages reads each datagram alone: GRO has
 * nothing to join there and its path (the socket option, the cut) made each
 * read 0.1-0.2 us slower on loopback. Messages of several packets come in
 * GSO datagrams that GRO takes whole. Without GRO the kernel cuts whatever
 * batch a peer still sends; -a only grows the size, so no batch read whole
 * is queued when GRO goes off. */
void perf_ep_lat_batching(struct perf_ep *ep, uint64_t size)
{
    if (ep->cfg->udp_batching)
        op_io_udp_batching(ep->base_io, size > ep->mtu);
    lat_sender(ep);
}

void perf_ep_wait(struct perf_ep *ep, uint64_t now)
{
    (void)op_loop_wait(ep->loop, now + PERF_EVENT_WAIT_NS);
}

int perf_ep_progress(struct perf_ep *ep)
{
    perf_ep_touch(ep);
    int n = perf_ep_poll(ep);
    perf_ep_flush(ep);
    return n;
}

int perf_ep_poll(struct perf_ep *ep) { return op_loop_poll(ep->loop, OP_IO_BURST); }

int perf_ep_poll_some(struct perf_ep *ep, int max) { return op_loop_poll(ep->loop, max); }

/* Reads per perf_ep_spin: the loop's timer scan (every TIMER_EVERY calls)
 * then comes every 32 reads, ~10-20 us on loopback, inside the engine's
 * delayed ACK and far inside its retransmission timers. */
#define PERF_SPIN_READS 4

int perf_ep_spin(struct perf_ep *ep, int max)
{
    return op_loop_spin(ep->loop, max, ep->cfg->use_event ? 1 : PERF_SPIN_READS);
}

uint64_t perf_ep_poll_time(const struct perf_ep *ep) { return op_loop_poll_time(ep->loop); }

void perf_ep_counters(const struct perf_ep *ep, uint64_t sums[OP_RDMA_QP_C_COUNT_],
                      uint64_t *loss_drops)
{
    memset(sums, 0, OP_RDMA_QP_C_COUNT_ * sizeof(*sums));
    for (uint32_t i = 0; i < ep->nqp; i++) {
        const uint64_t *c = op_rdma_qp_counters(ep->qps[i].qp);
        for (unsigned k = 0; k < OP_RDMA_QP_C_COUNT_; k++)
            sums[k] += c[k];
    }
    uint64_t fs[OP_FAULT_C_COUNT_];
    op_io_fault_counters(ep->io, fs);
    *loss_drops = fs[OP_FAULT_C_dropped];
}

/* every sender's messages are the same pattern: one target half holds them */
static op_status_t post_srq_receives(struct perf_ep *ep, uint32_t depth)
{
    struct perf_qp *q = &ep->qps[0];
    struct op_rdma_sge sge = {perf_dst(ep, q), (uint32_t)ep->bufsize, op_rdma_mr_lkey(q->mr)};
    struct op_rdma_recv_wr wr = {.sg_list = &sge, .num_sge = 1};
    while (op_rdma_srq_posted(ep->srq) < depth)
        if (op_rdma_post_srq_recv(ep->srq, &wr) != OP_OK)
            return OP_ERR_STATE;
    return OP_OK;
}

uint32_t perf_ep_recv_qp(const struct perf_ep *ep, const struct op_rdma_wc *wc)
{
    if (ep->srq == NULL)
        return (uint32_t)(wc->wr_id >> PERF_QP_SHIFT);
    uint32_t i = wc->qp_num - op_rdma_qp_num(ep->qps[0].qp); /* created in a row */
    return i < ep->nqp ? i : 0;
}

op_status_t perf_ep_post_receives(struct perf_ep *ep, uint32_t qi, uint32_t depth)
{
    if (ep->srq != NULL)
        return post_srq_receives(ep, depth);
    struct perf_qp *q = &ep->qps[qi];
    struct op_rdma_sge sge = {perf_dst(ep, q), (uint32_t)ep->bufsize, op_rdma_mr_lkey(q->mr)};
    struct op_rdma_recv_wr wr = {.wr_id = (uint64_t)qi << PERF_QP_SHIFT, .sg_list = &sge,
                                 .num_sge = 1};
    for (; q->recvs_out < depth; q->recvs_out++)
        if (op_rdma_post_recv(q->qp, &wr) != OP_OK)
            return OP_ERR_STATE;
    return OP_OK;
}

void perf_ep_send_wr(const struct perf_ep *ep, const struct perf_qp *q, uint64_t size,
                     struct op_rdma_sge *sge, struct op_rdma_send_wr *wr)
{
    const struct op_perf_config *c = ep->cfg;
    bool read = c->verb == OP_PERF_READ;
    *sge = (struct op_rdma_sge){read ? perf_dst(ep, q) : perf_src(q), (uint32_t)size,
                                op_rdma_mr_lkey(q->mr)};
    memset(wr, 0, sizeof(*wr));
    wr->sg_list = sge;
    wr->num_sge = 1;
    wr->opcode = c->verb == OP_PERF_SEND    ? OP_RDMA_WR_SEND
                 : c->verb == OP_PERF_WRITE ? OP_RDMA_WR_RDMA_WRITE
                                            : OP_RDMA_WR_RDMA_READ;
    if (size <= c->inline_size)
        wr->send_flags = OP_RDMA_SEND_INLINE; /* callers add SIGNALED */
    wr->rdma.remote_addr = q->peer.vaddr + (read ? 0 : ep->bufsize);
    wr->rdma.rkey = q->peer.rkey;
    wr->ud.remote_ip = q->peer.ip;
    wr->ud.remote_port = q->peer.port;
    wr->ud.remote_qpn = q->peer.qpn;
    wr->ud.remote_qkey = PERF_QKEY;
}
