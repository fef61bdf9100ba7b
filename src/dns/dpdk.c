/* The DPDK models (built only when pkg-config finds libdpdk, into the
 * offpath binary alone: the library, the MPI shim and the socket model
 * never link DPDK).
 *
 * rtc: every worker lcore owns one RX/TX queue pair of the port (RSS
 * spreads the flows) and runs to completion: receive a burst, answer each
 * frame in its own mbuf, send the burst.
 * pipeline: the first worker lcore owns the port's queue (RX and TX on one
 * lcore: AF_XDP stalls otherwise, reference/dns-dpdk.md); it hands frames
 * to the other worker lcores through a multi-producer/multi-consumer
 * rte_ring and sends what they put on the return ring.
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

#define MAX_BURST 512

struct dpdk_state {
    struct op_dns_dpdk_config dc;
    uint16_t port;
    uint8_t mac[6];
    struct rte_mempool *pool;
    struct rte_ring *to_workers, *to_tx;
    unsigned workers; /* the pipeline's, beside the port's lcore */
    bool port_started, eal_up;
    bool cpu_shared[RTE_MAX_LCORE]; /* by worker index: another worker lcore runs on its CPU */
};

/* The query at q (plen bytes) answered into scratch for a frame whose
 * headers take hdr bytes of m: the answer's length, 0 for none. */
static size_t answer_query(struct dns_worker *w, const struct op_dns_zones *z,
                           const struct rte_mbuf *m, size_t hdr, const uint8_t *q, size_t plen,
                           uint8_t *scratch)
{
    w->c[OP_DNS_C_udp_rx]++;
    size_t room = m->buf_len - rte_pktmbuf_headroom(m) - hdr;
    struct op_dns_query_info qi = dns_query_info(
        &w->s->cfg, false, (uint16_t)(room < w->s->cfg.udp_max ? room : w->s->cfg.udp_max));
    return op_dns_respond(z, &qi, q, plen, scratch, 4096, w->c);
}

/* A frame that is not a datagram for us: a control reply written in place
 * (n > 0: send it), or counted as a drop by why it is not ours. */
static bool not_a_query(struct dns_worker *w, struct rte_mbuf *m, size_t n, unsigned verdict)
{
    if (n > 0) {
        w->c[OP_DNS_C_ctl_rx]++;
        m->data_len = m->pkt_len = (uint32_t)n;
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

static bool answer_ready(struct rte_mbuf *m, size_t n, bool *is_dns)
{
    m->data_len = m->pkt_len = (uint32_t)n;
    *is_dns = true;
    return true;
}

static bool serves_v4(const struct op_dns_server_config *cfg) { return !cfg->ipv6 || cfg->dual_stack; }
static bool serves_v6(const struct op_dns_server_config *cfg) { return cfg->ipv6 || cfg->dual_stack; }

#define ETHERTYPE_IPV6 0x86dd

static uint16_t ethertype(const struct rte_mbuf *m)
{
    const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
    return rte_pktmbuf_data_len(m) >= 14 ? (uint16_t)(f[12] << 8 | f[13]) : 0;
}

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
                            struct rte_mbuf *m)
{
    uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
    size_t len = rte_pktmbuf_data_len(m), n = 0;
    size_t room = m->buf_len - rte_pktmbuf_headroom(m);
    if (ethertype(m) == ETHERTYPE_IPV6) {
        if (serves_v6(cfg) && (n = op_ndp_advert_in_place(f, len, room, cfg->addr6, d->mac)) == 0)
            n = op_icmp6_echo_reply_in_place(f, len, cfg->addr6, d->mac);
    } else if (serves_v4(cfg) && (n = op_arp_reply_in_place(f, len, cfg->addr, d->mac)) == 0) {
        n = op_icmp_echo_reply_in_place(f, len, cfg->addr, d->mac);
    }
    return n;
}

/* A UDP query to our address and port of either family, answered in the
 * query's frame; ARP, neighbour discovery and echo answered beside it. */
static bool handle_ip_frame(struct dns_worker *w, const struct dpdk_state *d,
                            const struct op_dns_zones *z, struct rte_mbuf *m, uint8_t *scratch,
                            bool *is_dns)
{
    uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
    const struct op_dns_server_config *cfg = &w->s->cfg;
    struct op_flow flow;
    struct op_addr ours;
    uint8_t src_mac[6];
    size_t off, plen;
    /* UDP first (nearly every frame); ARP, NDP and echo are not UDP */
    unsigned v = op_udp_frame_parse(f, rte_pktmbuf_data_len(m), &flow, src_mac, &off, &plen);
    if (v != OP_FRAME_OK || !our_addr(cfg, flow.dst.family, &ours) ||
        !op_addr_eq(&flow.dst, &ours) || flow.dst_port != cfg->port)
        return not_a_query(w, m, v == OP_FRAME_OK ? 0 : control_reply(cfg, d, m), v);
    size_t hdr = op_udp_frame_hdr_len(flow.dst.family);
    size_t alen = answer_query(w, z, m, hdr, f + off, plen, scratch);
    if (alen == 0 || !dns_rrl_pass(w, &flow.src, scratch, &alen))
        return false;
    struct op_flow back = op_flow_reverse(&flow);
    struct op_frame_l2 l2 = answer_in_frame(d, f, src_mac, hdr, scratch, alen);
    return answer_ready(m, op_udp_frame_headers(f, &back, &l2, alen), is_dns);
}

/* One frame: answered in place (true: send it) or dropped and counted. */
static bool handle_frame(struct dns_worker *w, const struct dpdk_state *d,
                         const struct op_dns_zones *z, struct rte_mbuf *m, uint8_t *scratch,
                         bool *is_dns)
{
    *is_dns = false;
    w->c[OP_DNS_C_frames_rx]++;
    if (m->nb_segs != 1) {
        w->c[OP_DNS_C_drop_frame]++;
        return false;
    }
    return handle_ip_frame(w, d, z, m, scratch, is_dns);
}

/* An ARP or ICMP reply (the workers of the pipeline send both kinds). */
static bool frame_is_ctl(const struct rte_mbuf *m)
{
    const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
    uint16_t type = ethertype(m), len = rte_pktmbuf_data_len(m);
    return type == 0x0806 || (type == 0x0800 && len > 23 && f[23] == 1) ||
           (type == ETHERTYPE_IPV6 && len > 20 && f[20] == 58);
}

/* Send n frames on queue q: retry a full queue with a doubling pause up
 * to the configured bound, then free and count what is left. */
static void send_burst(struct dns_worker *w, const struct dpdk_state *d, uint16_t q,
                       struct rte_mbuf **m, const bool *is_dns, unsigned n)
{
    unsigned sent = 0, tries = 0, pause_us = 1;
    while (sent < n) {
        sent += rte_eth_tx_burst(d->port, q, m + sent, (uint16_t)(n - sent));
        if (sent == n || tries++ >= d->dc.tx_retries)
            break;
        w->c[OP_DNS_C_tx_retries]++;
        rte_delay_us_block(pause_us);
        pause_us = pause_us * 2 > d->dc.tx_backoff_us ? d->dc.tx_backoff_us : pause_us * 2;
    }
    for (unsigned i = 0; i < n; i++) {
        bool ok = i < sent;
        if (!ok)
            rte_pktmbuf_free(m[i]);
        w->c[is_dns[i] ? (ok ? OP_DNS_C_udp_tx : OP_DNS_C_drop_tx)
                       : (ok ? OP_DNS_C_ctl_tx : OP_DNS_C_drop_tx_ctl)]++;
    }
}

/* Answer a burst in place; the frames to send are moved to the front.
 * With keep_dropped (pipeline workers) a dropped frame is not freed here but
 * emptied (data_len 0) and kept after them, for the port's lcore to free:
 * that lcore allocates every RX refill, so its mempool cache gets them back
 * without a trip through the pool's shared ring. */
static unsigned answer_burst(struct dns_worker *w, const struct dpdk_state *d,
                             struct rte_mbuf **m, unsigned n, bool *is_dns, uint8_t *scratch,
                             bool keep_dropped, unsigned *dropped)
{
    struct rte_mbuf *gone[MAX_BURST];
    unsigned keep = 0, ngone = 0;
    const struct op_dns_zones *z = dns_zones_enter(w);
    for (unsigned i = 0; i < n && i < 2; i++)
        rte_prefetch0(rte_pktmbuf_mtod(m[i], void *));
    for (unsigned i = 0; i < n; i++) {
        bool dns;
        if (i + 2 < n) /* the frames were written by another CPU: fetch ahead */
            rte_prefetch0(rte_pktmbuf_mtod(m[i + 2], void *));
        if (handle_frame(w, d, z, m[i], scratch, &dns)) {
            is_dns[keep] = dns;
            m[keep++] = m[i];
        } else if (keep_dropped) {
            m[i]->data_len = m[i]->pkt_len = 0;
            gone[ngone++] = m[i];
        } else {
            rte_pktmbuf_free(m[i]);
        }
    }
    dns_zones_leave(w);
    for (unsigned i = 0; i < ngone; i++)
        m[keep + i] = gone[i];
    *dropped = ngone;
    return keep;
}

static int rtc_main(void *arg)
{
    struct dns_worker *w = arg;
    const struct dpdk_state *d = w->s->priv;
    struct rte_mbuf *m[MAX_BURST];
    bool is_dns[MAX_BURST];
    uint8_t scratch[4096];
    struct dns_poll idle;
    dns_poll_init(&idle, &d->dc.poll, d->cpu_shared[w->index], w->c);
    uint16_t q = (uint16_t)w->index;
    while (!dns_server_stopping(w->s)) {
        unsigned n = rte_eth_rx_burst(d->port, q, m, (uint16_t)w->s->cfg.burst);
        if (!dns_polled(&idle, n > 0))
            continue;
        unsigned none;
        unsigned k = answer_burst(w, d, m, n, is_dns, scratch, false, &none);
        send_burst(w, d, q, m, is_dns, k);
        dns_publish(w);
    }
    dns_publish(w);
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

/* Pipeline, the port's lcore: RX to the workers' ring, their answers out. */
static int io_main(void *arg)
{
    struct dns_worker *w = arg;
    const struct dpdk_state *d = w->s->priv;
    struct rte_mbuf *m[MAX_BURST];
    bool is_dns[MAX_BURST];
    struct dns_poll idle;
    dns_poll_init(&idle, &d->dc.poll, d->cpu_shared[w->index], w->c);
    unsigned burst = w->s->cfg.burst;
    while (!dns_server_stopping(w->s)) {
        unsigned room = pipeline_room(d, burst);
        unsigned n = rte_eth_rx_burst(d->port, 0, m, (uint16_t)(room < burst ? room : burst));
        unsigned q = n ? rte_ring_enqueue_burst(d->to_workers, (void **)m, n, NULL) : 0;
        for (unsigned i = q; i < n; i++) {
            w->c[OP_DNS_C_frames_rx]++;
            w->c[OP_DNS_C_drop_ring_rx]++;
            rte_pktmbuf_free(m[i]);
        }
        unsigned got = rte_ring_dequeue_burst(d->to_tx, (void **)m, burst, NULL), k = 0;
        for (unsigned i = 0; i < got; i++) {
            if (rte_pktmbuf_data_len(m[i]) == 0) { /* dropped by a worker (counted there) */
                rte_pktmbuf_free(m[i]);
                continue;
            }
            is_dns[k] = !frame_is_ctl(m[i]);
            m[k++] = m[i];
        }
        if (k > 0)
            send_burst(w, d, 0, m, is_dns, k);
        if (!dns_polled(&idle, n > 0 || got > 0))
            continue;
        dns_publish(w);
    }
    dns_publish(w);
    return 0;
}

/* Pipeline, a worker: frames from the ring, answers to the other ring. */
static int worker_main(void *arg)
{
    struct dns_worker *w = arg;
    const struct dpdk_state *d = w->s->priv;
    struct rte_mbuf *m[MAX_BURST];
    bool is_dns[MAX_BURST];
    uint8_t scratch[4096];
    struct dns_poll idle;
    dns_poll_init(&idle, &d->dc.poll, d->cpu_shared[w->index], w->c);
    while (!dns_server_stopping(w->s)) {
        unsigned n = rte_ring_dequeue_burst(d->to_workers, (void **)m, w->s->cfg.burst, NULL);
        if (!dns_polled(&idle, n > 0))
            continue;
        unsigned dropped;
        unsigned k = answer_burst(w, d, m, n, is_dns, scratch, true, &dropped);
        unsigned q = rte_ring_enqueue_burst(d->to_tx, (void **)m, k + dropped, NULL);
        for (unsigned i = q; i < k + dropped; i++) { /* a full ring: only now freed here */
            if (i < k) {
                w->c[is_dns[i] ? OP_DNS_C_drop_tx : OP_DNS_C_drop_tx_ctl]++;
                w->c[OP_DNS_C_tx_ring_full]++;
            }
            rte_pktmbuf_free(m[i]);
        }
        dns_publish(w);
    }
    dns_publish(w);
    return 0;
}

/* ---- setup ---- */
#define FAIL_IF(cond, ...)                                                                         \
    do {                                                                                           \
        if (cond) {                                                                                \
            snprintf(err, errlen, __VA_ARGS__);                                                    \
            return OP_ERR_INVAL;                                                                   \
        }                                                                                          \
    } while (0)

static op_status_t port_setup(struct dpdk_state *d, unsigned nq, char *err, size_t errlen)
{
    struct rte_eth_dev_info info;
    FAIL_IF(rte_eth_dev_info_get(d->port, &info) != 0, "port %u: no device info", d->port);
    FAIL_IF(nq > info.max_rx_queues || nq > info.max_tx_queues,
            "port %u has %u RX/%u TX queues, %u needed (af_xdp: queue_count=N, af_packet: "
            "qpairs=N)", d->port, info.max_rx_queues, info.max_tx_queues, nq);
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof(conf));
    if (nq > 1) { /* RSS: a flow stays on one queue, so one lcore */
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf =
            (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
    }
    FAIL_IF(rte_eth_dev_configure(d->port, (uint16_t)nq, (uint16_t)nq, &conf) != 0,
            "port %u: configure with %u queues failed", d->port, nq);
    uint16_t rxd = (uint16_t)d->dc.rx_desc, txd = (uint16_t)d->dc.tx_desc;
    FAIL_IF(rte_eth_dev_adjust_nb_rx_tx_desc(d->port, &rxd, &txd) != 0, "descriptor counts");
    int sock = rte_eth_dev_socket_id(d->port);
    for (unsigned q = 0; q < nq; q++) {
        FAIL_IF(rte_eth_rx_queue_setup(d->port, (uint16_t)q, rxd, (unsigned)sock, NULL,
                                       d->pool) != 0, "RX queue %u setup failed", q);
        FAIL_IF(rte_eth_tx_queue_setup(d->port, (uint16_t)q, txd, (unsigned)sock, NULL) != 0,
                "TX queue %u setup failed", q);
    }
    FAIL_IF(rte_eth_dev_start(d->port) != 0, "port %u: start failed", d->port);
    d->port_started = true;
    struct rte_ether_addr mac;
    FAIL_IF(rte_eth_macaddr_get(d->port, &mac) != 0, "port %u: no MAC address", d->port);
    memcpy(d->mac, mac.addr_bytes, 6);
    return OP_OK;
}

/* The AF_XDP PMD (DPDK 22.11) registers the pool as its UMEM assuming the
 * objects are packed from the first one: populated_size x object size. A
 * default pool without hugepages puts each object on its own 4 KiB page
 * (objects may not straddle pages), so the last ~40% of the mbufs lie
 * past the UMEM: the kernel takes their fill-ring entries as invalid and
 * drops them silently (no XDP_STATISTICS counter shows it). Light load
 * recycles a few hundred cached mbufs and never meets them; an overload
 * cycles the whole pool, every fill entry is lost within a second, and RX
 * stops for good (the PMD refills only for frames it receives). So for
 * that PMD the pool is packed: no page constraint (it does no DMA by IOVA). */
static struct rte_mempool *pool_packed(const struct op_dns_dpdk_config *dc)
{
    struct rte_pktmbuf_pool_private priv = {.mbuf_data_room_size = RTE_MBUF_DEFAULT_BUF_SIZE};
    struct rte_mempool *mp = rte_mempool_create_empty(
        "ofdns_mbufs", dc->mbufs, sizeof(struct rte_mbuf) + RTE_MBUF_DEFAULT_BUF_SIZE,
        dc->mbuf_cache, sizeof(priv), (int)rte_socket_id(), RTE_MEMPOOL_F_NO_IOVA_CONTIG);
    if (mp == NULL)
        return NULL;
    if (rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL) != 0) {
        rte_mempool_free(mp);
        return NULL;
    }
    rte_pktmbuf_pool_init(mp, &priv);
    if (rte_mempool_populate_default(mp) < 0) {
        rte_mempool_free(mp);
        return NULL;
    }
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
    return mp;
}

struct packed_check {
    uintptr_t base;
    size_t size;
    bool packed;
};

static void packed_obj(struct rte_mempool *mp, void *arg, void *obj, unsigned idx)
{
    struct packed_check *c = arg;
    (void)mp;
    if ((uintptr_t)obj != c->base + (size_t)idx * c->size)
        c->packed = false;
}

/* Is object i exactly at the first object + i x its size? */
static bool pool_is_packed(struct rte_mempool *mp)
{
    const struct rte_mempool_memhdr *h = STAILQ_FIRST(&mp->mem_list);
    struct packed_check c = {
        .base = (uintptr_t)h->addr + mp->header_size,
        .size = rte_mempool_calc_obj_size(mp->elt_size, mp->flags, NULL),
        .packed = mp->nb_mem_chunks == 1};
    rte_mempool_obj_iter(mp, packed_obj, &c);
    return c.packed;
}

static bool port_is_af_xdp(uint16_t port)
{
    struct rte_eth_dev_info info;
    return rte_eth_dev_info_get(port, &info) == 0 && info.driver_name != NULL &&
           strcmp(info.driver_name, "net_af_xdp") == 0;
}

static op_status_t pools_setup(struct dpdk_state *d, unsigned nq, bool shared, char *err,
                               size_t errlen)
{
    bool af_xdp = port_is_af_xdp(d->port);
    d->pool = af_xdp ? pool_packed(&d->dc)
                     : rte_pktmbuf_pool_create("ofdns_mbufs", d->dc.mbufs, d->dc.mbuf_cache, 0,
                                               RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
    FAIL_IF(d->pool == NULL, "mbuf pool of %u: %s", d->dc.mbufs, rte_strerror(rte_errno));
    FAIL_IF(af_xdp && !pool_is_packed(d->pool),
            "mbuf pool of %u is not one packed run (the AF_XDP PMD would lose the mbufs "
            "past it): give EAL more memory (-m)", d->dc.mbufs);
    if (!d->dc.pipeline)
        return port_setup(d, nq, err, errlen);
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
    return port_setup(d, 1, err, errlen);
}

static void port_stats(const struct op_dns_server *s, uint64_t *c)
{
    const struct dpdk_state *d = s->priv;
    struct rte_eth_stats st;
    if (d == NULL || !d->port_started || rte_eth_stats_get(d->port, &st) != 0)
        return;
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
            io->c[frame_is_ctl(m) ? OP_DNS_C_drop_tx_ctl : OP_DNS_C_drop_tx]++;
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
    if (d->port_started) {
        rte_eth_dev_stop(d->port);
        rte_eth_dev_close(d->port); /* af_xdp detaches its XDP program here */
    }
    rte_ring_free(d->to_workers);
    rte_ring_free(d->to_tx);
    rte_mempool_free(d->pool);
    if (d->eal_up)
        rte_eal_cleanup();
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

/* Does another worker lcore run on one of this lcore's CPUs? (The main
 * lcore only waits for signals.) */
static bool lcore_shares_cpu(unsigned lcore)
{
    rte_cpuset_t mine = rte_lcore_cpuset(lcore);
    unsigned other;
    RTE_LCORE_FOREACH_WORKER(other)
    {
        rte_cpuset_t theirs = rte_lcore_cpuset(other), both;
        CPU_AND(&both, &mine, &theirs);
        if (other != lcore && CPU_COUNT(&both) > 0)
            return true;
    }
    return false;
}

/* Which workers share a CPU with another; true if any does. */
static bool note_shared_cpus(struct dpdk_state *d)
{
    unsigned i = 0, lcore;
    bool any = false;
    RTE_LCORE_FOREACH_WORKER(lcore)
        any |= d->cpu_shared[i++] = lcore_shares_cpu(lcore);
    return any;
}

static op_status_t launch(struct op_dns_server *s)
{
    const struct dpdk_state *d = s->priv;
    unsigned i = 0, lcore;
    RTE_LCORE_FOREACH_WORKER(lcore)
    {
        lcore_function_t *fn = !d->dc.pipeline ? rtc_main : i == 0 ? io_main : worker_main;
        if (rte_eal_remote_launch(fn, &s->w[i], lcore) != 0)
            return OP_ERR_STATE;
        s->w[i++].started = true;
    }
    return OP_OK;
}

#define MAX_EAL_ARGS 128
#define MAX_XDP_VDEVS 8

/* An AF_XDP vdev without xdp_prog= gets offpath's program (dns_xdp.bpf.c:
 * TCP and ARP replies to the kernel, the rest to DPDK), so TCP is served by
 * the kernel socket beside the DPDK models. */
static char *with_xdp_prog(char *arg, char *buf, size_t n)
{
#ifdef OP_DNS_XDP_PROG
    const char *dev = strncmp(arg, "--vdev=", 7) == 0 ? arg + 7 : arg;
    if (strncmp(dev, "net_af_xdp", 10) != 0 || strstr(dev, "xdp_prog=") != NULL ||
        access(OP_DNS_XDP_PROG, R_OK) != 0 ||
        snprintf(buf, n, "%s,xdp_prog=%s", arg, OP_DNS_XDP_PROG) >= (int)n)
        return arg;
    return buf;
#else
    (void)buf;
    (void)n;
    return arg;
#endif
}

/* The EAL with a program name first and the vdevs amended. */
static int eal_init(const struct op_dns_dpdk_config *dc)
{
    char name[] = "offpath-dns";
    char *argv[MAX_EAL_ARGS + 2];
    char vdev[MAX_XDP_VDEVS][512];
    argv[0] = name;
    for (int i = 0, k = 0; i < dc->n_eal_args; i++) {
        char *arg = dc->eal_args[i];
        argv[1 + i] = k < MAX_XDP_VDEVS ? with_xdp_prog(arg, vdev[k], sizeof(vdev[k])) : arg;
        k += argv[1 + i] != arg;
    }
    argv[1 + dc->n_eal_args] = NULL;
    return rte_eal_init(1 + dc->n_eal_args, argv);
}

op_status_t op_dns_dpdk_start(const struct op_dns_server_config *cfg,
                              const struct op_dns_dpdk_config *dc, struct op_dns_zones *zones,
                              struct op_dns_server **out, char *err, size_t errlen)
{
    snprintf(err, errlen, "ok");
    FAIL_IF(cfg->burst < 1 || cfg->burst > MAX_BURST, "--burst must be 1..%d", MAX_BURST);
    FAIL_IF(dc->n_eal_args < 0 || dc->n_eal_args > MAX_EAL_ARGS, "too many EAL arguments");
    int r = eal_init(dc);
    FAIL_IF(r < 0, "EAL: %s", rte_strerror(rte_errno));
    unsigned workers = rte_lcore_count() - 1;
    if (workers < (dc->pipeline ? 2u : 1u) || rte_eth_dev_count_avail() < 1) {
        snprintf(err, errlen, "%s needs %s worker lcore(s) (-l) and a port (--vdev): got %u "
                 "and %u", dc->pipeline ? "pipeline" : "rtc", dc->pipeline ? "2+" : "1+",
                 workers, rte_eth_dev_count_avail());
        rte_eal_cleanup();
        return OP_ERR_INVAL;
    }
    struct op_dns_server *s = dns_server_alloc(cfg, zones, workers + tcp_threads(cfg));
    struct dpdk_state *d = calloc(1, sizeof(*d));
    if (s == NULL || d == NULL) {
        free(d);
        if (s != NULL)
            op_dns_server_stop(s, NULL);
        rte_eal_cleanup();
        return OP_ERR_NOMEM;
    }
    d->dc = *dc;
    d->workers = workers - 1;
    d->eal_up = true;
    s->priv = d;
    s->halt = dpdk_halt;
    s->port_stats = port_stats;
    uint16_t pid;
    RTE_ETH_FOREACH_DEV(pid)
    {
        d->port = pid;
        break;
    }
    op_status_t st = pools_setup(d, workers, note_shared_cpus(d), err, errlen);
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
