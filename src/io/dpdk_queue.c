/* A queue of a DPDK port as an op_io frame backend: whatever the PMD
 * (a NIC, net_af_xdp, net_pcap, net_af_packet), the engine above never
 * sees an mbuf and runs the same over every backend. op_io_recv_frames
 * copies out of mbufs, op_io_recv_frames_lent lends them (the frame's bytes
 * are the mbuf's: an answer built in place leaves in the same mbuf, as
 * DPDK's own forwarding does); what was not lent is copied into a fresh
 * mbuf on send. op_io_frames_serve makes it a payload endpoint. Polled: no
 * descriptor to wait on.
 *
 * A pair of rte_rings is the same backend one lcore further on (a
 * pipeline's worker: frames from the port's lcore on one ring, back on the
 * other); with give_back, a frame it releases goes back emptied (length 0)
 * for that lcore to free, as it allocated it: its mempool cache gets it
 * back without a trip through the pool's shared ring. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "io_internal.h"

struct dpdk_queue_io {
    struct op_io io;
    const struct op_io_dpdk *port; /* the caller's; outlives this */
    uint16_t port_id, queue;
    struct rte_mempool *pool;
    struct rte_ring *in, *out; /* a ring pair instead of the port's queue */
    bool give_back; /* released frames go back on out, emptied */
};

static struct dpdk_queue_io *dq_of(struct op_io *io) { return (struct dpdk_queue_io *)io; }

static uint16_t dq_rx(struct dpdk_queue_io *d, struct rte_mbuf **m, int max)
{
    int n = max < OP_IO_BURST ? (max > 0 ? max : 0) : OP_IO_BURST;
    if (d->in != NULL)
        return (uint16_t)rte_ring_dequeue_burst(d->in, (void **)m, (unsigned)n, NULL);
    return rte_eth_rx_burst(d->port_id, d->queue, m, (uint16_t)n);
}

static uint16_t dq_tx(struct dpdk_queue_io *d, struct rte_mbuf **m, int n)
{
    if (d->out != NULL)
        return (uint16_t)rte_ring_enqueue_burst(d->out, (void **)m, (unsigned)n, NULL);
    return rte_eth_tx_burst(d->port_id, d->queue, m, (uint16_t)n);
}

static int dq_recv_frames(struct op_io *io, struct op_frame *f, int max)
{
    struct dpdk_queue_io *d = dq_of(io);
    struct rte_mbuf *m[OP_IO_BURST];
    uint16_t n = dq_rx(d, m, max);
    int k = 0;
    for (uint16_t i = 0; i < n; i++) {
        uint32_t len = rte_pktmbuf_pkt_len(m[i]);
        const void *bytes = len <= OP_IO_BUF_SIZE ? rte_pktmbuf_read(m[i], 0, len, f[k].data) : NULL;
        if (bytes != NULL) {
            if (bytes != f[k].data) /* one segment: read gave the mbuf's own bytes */
                memcpy(f[k].data, bytes, len);
            f[k].len = len;
            f[k].queue = d->queue;
            (void)op_frame_parse(f[k].data, len, &f[k].info);
            k++;
        }
        rte_pktmbuf_free(m[i]);
    }
    io->c[OP_IO_C_rx_pkts] += (uint64_t)k;
    return k;
}

static int dq_recv_lent(struct op_io *io, struct op_frame *f, int max)
{
    struct dpdk_queue_io *d = dq_of(io);
    struct rte_mbuf *m[OP_IO_BURST];
    uint16_t n = dq_rx(d, m, max);
    int k = 0;
    for (uint16_t i = 0; i < n; i++, k++) {
        if (i + 2 < n) /* a ring's frames were written by another CPU: fetch ahead */
            rte_prefetch0(rte_pktmbuf_mtod(m[i + 2], void *));
        uint8_t *bytes = rte_pktmbuf_mtod(m[i], uint8_t *);
        f[k].data = bytes;
        /* a chained jumbo's bytes are not contiguous: lent with length 0 */
        f[k].len = m[i]->nb_segs == 1 ? rte_pktmbuf_data_len(m[i]) : 0;
        f[k].queue = d->queue;
        f[k].lent = m[i];
        f[k].room = (uint32_t)(m[i]->buf_len - m[i]->data_off);
        if (!io->unparsed)
            (void)op_frame_parse(bytes, f[k].len, &f[k].info);
    }
    io->c[OP_IO_C_rx_pkts] += (uint64_t)k;
    return k;
}

static void dq_release(struct op_io *io, struct op_frame *f, int n)
{
    struct dpdk_queue_io *d = dq_of(io);
    struct rte_mbuf *back[OP_IO_BURST];
    int nb = 0;
    for (int i = 0; i < n; i++) {
        struct rte_mbuf *m = f[i].lent;
        if (m == NULL)
            continue;
        f[i].lent = NULL;
        if (!d->give_back || nb == OP_IO_BURST) {
            rte_pktmbuf_free(m);
            continue;
        }
        m->data_len = 0;
        m->pkt_len = 0;
        back[nb++] = m;
    }
    unsigned put = nb ? rte_ring_enqueue_burst(d->out, (void **)back, (unsigned)nb, NULL) : 0;
    for (int i = (int)put; i < nb; i++)
        rte_pktmbuf_free(back[i]);
}

/* A lent frame's own mbuf, its bytes where the holder left them; NULL if
 * they are no longer inside it. */
static struct rte_mbuf *lent_mbuf(const struct op_frame *f)
{
    struct rte_mbuf *m = f->lent;
    uint8_t *start = m->buf_addr;
    if (f->data < start || f->len > UINT16_MAX || f->data + f->len > start + m->buf_len)
        return NULL;
    m->data_off = (uint16_t)(f->data - start);
    m->data_len = (uint16_t)f->len;
    m->pkt_len = f->len;
    return m;
}

/* A fresh mbuf holding a copy of f; NULL if none or too large. */
static struct rte_mbuf *copy_mbuf(struct dpdk_queue_io *d, const struct op_frame *f)
{
    struct rte_mbuf *m = rte_pktmbuf_alloc(d->pool);
    char *room = m != NULL && f->len <= UINT16_MAX ? rte_pktmbuf_append(m, (uint16_t)f->len) : NULL;
    if (room == NULL) {
        rte_pktmbuf_free(m);
        return NULL;
    }
    memcpy(room, f->data, f->len);
    return m;
}

/* The first frames of f (up to a burst) as mbufs, up to one that cannot
 * be (moved out of its buffer, no mbuf free, too large): how many. */
static int dq_build(struct dpdk_queue_io *d, const struct op_frame *f, int n,
                    struct rte_mbuf **m)
{
    int built = 0;
    for (; built < n && built < OP_IO_BURST; built++) {
        m[built] = f[built].lent != NULL ? lent_mbuf(&f[built]) : copy_mbuf(d, &f[built]);
        if (m[built] == NULL)
            break;
    }
    return built;
}

/* One tx burst of the first frames: how many went; the copies of those
 * that did not are freed, lent ones stay the caller's. */
static int dq_send_prefix(struct dpdk_queue_io *d, const struct op_frame *f, int n)
{
    struct rte_mbuf *m[OP_IO_BURST];
    int built = dq_build(d, f, n, m);
    uint16_t sent = dq_tx(d, m, built);
    for (int i = sent; i < built; i++)
        if (f[i].lent == NULL)
            rte_pktmbuf_free(m[i]);
    return sent;
}

static int dq_send_some(struct op_io *io, const struct op_frame *f, int n)
{
    struct dpdk_queue_io *d = dq_of(io);
    int sent = 0, k;
    while (sent < n && (k = dq_send_prefix(d, f + sent, n - sent)) > 0)
        sent += k;
    io->c[OP_IO_C_tx_datagrams] += sent > 0;
    io->c[OP_IO_C_tx_pkts] += (uint64_t)sent;
    return sent;
}

/* Everything taken: sent, or dropped and counted (lent ones freed). */
static int dq_send_frames(struct op_io *io, const struct op_frame *f, int n)
{
    int sent = dq_send_some(io, f, n);
    for (int i = sent; i < n; i++)
        if (f[i].lent != NULL)
            rte_pktmbuf_free(f[i].lent);
    io->c[OP_IO_C_tx_drops] += (uint64_t)(n - sent);
    return sent;
}

static int dq_fd(const struct op_io *io)
{
    (void)io;
    return -1;
}

static uint64_t dq_deadline(const struct op_io *io)
{
    (void)io;
    return UINT64_MAX;
}

static void dq_poll(struct op_io *io, uint64_t now) { (void)io, (void)now; }

static void dq_close(struct op_io *io) { free(io); }

static const struct op_io_ops dq_ops = {
    .name = "dpdk",
    .recv = io_payload_unsupported_recv,
    .send = io_payload_unsupported_send,
    .fd = dq_fd,
    .deadline = dq_deadline,
    .poll = dq_poll,
    .close = dq_close,
    .recv_frames = dq_recv_frames,
    .send_frames = dq_send_frames,
    .recv_frames_lent = dq_recv_lent,
    .release_frames = dq_release,
    .send_frames_some = dq_send_some,
};

/* A backend of port p's (its pool and MAC), bursts from where the caller
 * says. */
static struct dpdk_queue_io *dq_new(const struct op_io_dpdk *p)
{
    struct dpdk_queue_io *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->io.ops = &dq_ops;
    d->port = p;
    d->port_id = op_io_dpdk_port_id(p);
    d->pool = op_io_dpdk_pool(p);
    d->io.has_mac = true;
    op_io_dpdk_mac(p, d->io.mac);
    uint16_t mtu = 0;
    d->io.link_mtu = rte_eth_dev_get_mtu(d->port_id, &mtu) == 0 ? mtu : 1500;
    return d;
}

op_status_t op_io_dpdk_ring_open(const struct op_io_dpdk *p, struct rte_ring *in,
                                 struct rte_ring *out, bool give_back, struct op_io **io)
{
    if (in == NULL || out == NULL)
        return OP_ERR_INVAL;
    struct dpdk_queue_io *d = dq_new(p);
    if (d == NULL)
        return OP_ERR_NOMEM;
    d->in = in;
    d->out = out;
    d->give_back = give_back;
    *io = &d->io;
    return OP_OK;
}

op_status_t op_io_dpdk_queue_open(const struct op_io_dpdk *p, uint16_t queue, struct op_io **out)
{
    struct rte_eth_dev_info info;
    uint16_t id = op_io_dpdk_port_id(p);
    if (rte_eth_dev_info_get(id, &info) != 0 || queue >= info.nb_rx_queues ||
        queue >= info.nb_tx_queues)
        return OP_ERR_INVAL;
    struct dpdk_queue_io *d = dq_new(p);
    if (d == NULL)
        return OP_ERR_NOMEM;
    d->queue = queue;
    *out = &d->io;
    return OP_OK;
}
