/* A payload endpoint over a frame backend (op_io_frames_serve): the few
 * things a host's stack does for a UDP socket when nothing else owns the
 * port. Frames to our address and port become packets; ARP, neighbour
 * solicitations and echo requests for our address are answered; the MACs
 * of neighbours come from their frames, and a packet to one not known
 * waits while we ask (every second, three seconds at most, as Linux's
 * defaults do). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "neigh_cache.h"

#define ASK_EVERY_NS (1000 * OP_NS_PER_MS)
#define HOLD_NS (3 * OP_NS_PER_S)
#define HELD_CHECK_NS (100 * OP_NS_PER_MS)

struct held {
    struct op_addr to;
    uint64_t since;
    struct op_frame f;
};

struct serve_io {
    struct op_io io;
    struct op_io *frames; /* owned */
    struct io_neigh_cache neigh;
    struct op_frame_l2 l2;
    size_t hdr_len; /* the UDP frame headers of our family */
    struct op_pktbuf rx_mem, tx_mem, ctl_mem, held_mem;
    struct op_frame rx[OP_IO_BURST], tx[OP_IO_BURST], ctl[OP_IO_BURST];
    int n_tx, n_ctl;
    struct held held[OP_IO_SERVE_PENDING];
    int n_held;
    bool learnt; /* a neighbour became known this burst */
    uint64_t sc[OP_IO_SERVE_C_COUNT_];
};

static struct serve_io *serve_of(struct op_io *io) { return (struct serve_io *)io; }

/* ---- frames out: control replies and questions, and data */

static void flush_ctl(struct serve_io *s)
{
    if (s->n_ctl > 0)
        (void)op_io_send_frames(s->frames, s->ctl, s->n_ctl);
    s->n_ctl = 0;
}

static struct op_frame *next_ctl(struct serve_io *s)
{
    if (s->n_ctl == OP_IO_BURST)
        flush_ctl(s);
    return &s->ctl[s->n_ctl++];
}

/* How many the backend refused (counted as our drops). */
static int flush_tx(struct serve_io *s)
{
    int sent = s->n_tx > 0 ? op_io_send_frames(s->frames, s->tx, s->n_tx) : 0;
    int refused = s->n_tx - (sent > 0 ? sent : 0);
    s->n_tx = 0;
    return refused;
}

static void ask_if_due(struct serve_io *s, const struct op_addr *to, uint64_t now)
{
    if (!io_neigh_ask_due(&s->neigh, to, now, ASK_EVERY_NS))
        return;
    struct op_frame *q = next_ctl(s);
    q->len = (uint32_t)op_neigh_solicit_build(q->data, OP_IO_BUF_SIZE, &s->io.local, s->io.mac,
                                               to);
    s->sc[OP_IO_SERVE_C_neigh_asked]++;
}

/* ---- receive */

static void learn(struct serve_io *s, const struct op_frame_info *in)
{
    if (in->kind == OP_FRAME_KIND_OTHER || in->flow.src.family != s->io.local.family ||
        op_addr_is_any(&in->flow.src) || (in->src_mac[0] & 1))
        return;
    const uint8_t *mac = io_neigh_mac(&s->neigh, &in->flow.src);
    if (mac != NULL && memcmp(mac, in->src_mac, 6) == 0)
        return;
    s->learnt |= mac == NULL;
    io_neigh_learn(&s->neigh, &in->flow.src, in->src_mac);
}

static bool ours(const struct serve_io *s, const struct op_frame_info *in)
{
    return in->udp == OP_FRAME_OK && in->flow.dst_port == s->io.local_port &&
           op_addr_eq(&in->flow.dst, &s->io.local) && in->payload_len <= OP_IO_BUF_SIZE;
}

static bool take(struct serve_io *s, struct op_frame *f, struct op_pkt *pkt)
{
    learn(s, &f->info);
    if (ours(s, &f->info)) {
        memcpy(pkt->data, f->data + f->info.payload_off, f->info.payload_len);
        pkt->len = f->info.payload_len;
        pkt->flow = f->info.flow;
        return true;
    }
    size_t r = op_frame_control_reply(f->data, f->len, OP_IO_BUF_SIZE, &s->io.local, s->io.mac);
    if (r == 0) {
        s->sc[OP_IO_SERVE_C_rx_not_ours]++;
        return false;
    }
    struct op_frame *reply = next_ctl(s);
    memcpy(reply->data, f->data, r);
    reply->len = (uint32_t)r;
    s->sc[OP_IO_SERVE_C_control_replies]++;
    return false;
}

/* Held packets whose neighbour became known leave, in the order held. */
static void release_held(struct serve_io *s)
{
    int keep = 0;
    for (int i = 0; i < s->n_held; i++) {
        struct held *h = &s->held[i];
        const uint8_t *mac = io_neigh_mac(&s->neigh, &h->to);
        if (mac == NULL) {
            struct op_frame kept = s->held[keep].f; /* swap buffers: none is lost */
            s->held[keep] = *h;
            h->f = kept;
            keep++;
            continue;
        }
        if (s->n_tx == OP_IO_BURST)
            (void)flush_tx(s);
        struct op_frame *t = &s->tx[s->n_tx++];
        memcpy(h->f.data, mac, 6);
        memcpy(t->data, h->f.data, h->f.len);
        t->len = h->f.len;
    }
    s->n_held = keep;
    (void)flush_tx(s);
}

static int serve_recv(struct op_io *io, struct op_pkt *pkts, int max)
{
    struct serve_io *s = serve_of(io);
    int n = op_io_recv_frames(s->frames, s->rx, max < OP_IO_BURST ? max : OP_IO_BURST);
    if (n <= 0)
        return n;
    int k = 0;
    s->learnt = false;
    for (int i = 0; i < n; i++)
        k += take(s, &s->rx[i], &pkts[k]);
    flush_ctl(s);
    if (s->learnt && s->n_held > 0)
        release_held(s);
    io->c[OP_IO_C_rx_pkts] += (uint64_t)k;
    return k;
}

/* ---- send */

static void build(struct serve_io *s, struct op_frame *t, const struct op_flow *f,
                  const uint8_t mac[6], const struct op_pkt *p)
{
    memcpy(s->l2.dst_mac, mac, 6);
    memcpy(t->data + s->hdr_len, p->data, p->len);
    t->len = (uint32_t)op_udp_frame_build(t->data, OP_IO_BUF_SIZE, f, &s->l2, p->len);
}

static bool hold(struct serve_io *s, const struct op_flow *f, const struct op_pkt *p, uint64_t now)
{
    ask_if_due(s, &f->dst, now);
    if (s->n_held == OP_IO_SERVE_PENDING) {
        s->sc[OP_IO_SERVE_C_tx_unresolved]++;
        return false;
    }
    struct held *h = &s->held[s->n_held++];
    static const uint8_t unknown[6] = {0};
    build(s, &h->f, f, unknown, p);
    h->to = f->dst;
    h->since = now;
    s->sc[OP_IO_SERVE_C_tx_held]++;
    return true;
}

static int serve_send(struct op_io *io, const struct op_pkt *pkts, int n)
{
    struct serve_io *s = serve_of(io);
    uint64_t now = op_now_ns();
    int taken = 0, refused = 0;
    for (int i = 0; i < n; i++) {
        const struct op_pkt *p = &pkts[i];
        if (p->flow.dst.family != s->io.local.family || p->len > OP_IO_BUF_SIZE - s->hdr_len)
            continue;
        struct op_flow f = p->flow;
        f.src = s->io.local;
        f.src_port = s->io.local_port;
        const uint8_t *mac = io_neigh_mac(&s->neigh, &f.dst);
        if (mac == NULL) {
            taken += hold(s, &f, p, now);
            continue;
        }
        if (s->n_tx == OP_IO_BURST)
            refused += flush_tx(s);
        build(s, &s->tx[s->n_tx++], &f, mac, p);
        taken++;
    }
    refused += flush_tx(s);
    flush_ctl(s);
    taken -= refused;
    if (taken > 0)
        io->c[OP_IO_C_tx_datagrams]++;
    io->c[OP_IO_C_tx_pkts] += (uint64_t)taken;
    io->c[OP_IO_C_tx_drops] += (uint64_t)(n - taken);
    return taken;
}

/* ---- timers: questions again, and packets nobody answered for */

static void expire_held(struct serve_io *s, uint64_t now)
{
    int keep = 0;
    for (int i = 0; i < s->n_held; i++) {
        struct held *h = &s->held[i];
        if (now - h->since >= HOLD_NS) {
            s->sc[OP_IO_SERVE_C_tx_unresolved]++;
            continue;
        }
        ask_if_due(s, &h->to, now);
        struct op_frame kept = s->held[keep].f;
        s->held[keep] = *h;
        h->f = kept;
        keep++;
    }
    s->n_held = keep;
    flush_ctl(s);
}

static int serve_fd(const struct op_io *io)
{
    return op_io_fd(((const struct serve_io *)io)->frames);
}

static uint64_t serve_deadline(const struct op_io *io)
{
    const struct serve_io *s = (const struct serve_io *)io;
    uint64_t inner = op_io_deadline(s->frames);
    if (s->n_held == 0)
        return inner;
    uint64_t mine = op_now_ns() + HELD_CHECK_NS;
    return mine < inner ? mine : inner;
}

static void serve_poll(struct op_io *io, uint64_t now)
{
    struct serve_io *s = serve_of(io);
    op_io_poll(s->frames, now);
    if (s->n_held > 0)
        expire_held(s, now);
}

static void serve_close(struct op_io *io)
{
    struct serve_io *s = serve_of(io);
    op_io_close(s->frames);
    op_pktbuf_free(&s->rx_mem);
    op_pktbuf_free(&s->tx_mem);
    op_pktbuf_free(&s->ctl_mem);
    op_pktbuf_free(&s->held_mem);
    free(s);
}

static const struct op_io_ops serve_ops = {
    .name = "serve",
    .recv = serve_recv,
    .send = serve_send,
    .fd = serve_fd,
    .deadline = serve_deadline,
    .poll = serve_poll,
    .close = serve_close,
};

static op_status_t buffers(struct serve_io *s)
{
    op_status_t st;
    if ((st = op_pktbuf_init(&s->rx_mem, OP_IO_BURST)) != OP_OK ||
        (st = op_pktbuf_init(&s->tx_mem, OP_IO_BURST)) != OP_OK ||
        (st = op_pktbuf_init(&s->ctl_mem, OP_IO_BURST)) != OP_OK ||
        (st = op_pktbuf_init(&s->held_mem, OP_IO_SERVE_PENDING)) != OP_OK)
        return st;
    op_pktbuf_frames(&s->rx_mem, s->rx);
    op_pktbuf_frames(&s->tx_mem, s->tx);
    op_pktbuf_frames(&s->ctl_mem, s->ctl);
    for (int i = 0; i < OP_IO_SERVE_PENDING; i++)
        s->held[i].f = (struct op_frame){.data = s->held_mem.pkts[i].data};
    return OP_OK;
}

op_status_t op_io_frames_serve(struct op_io *frames, const struct op_addr *addr, uint16_t port,
                               struct op_io **out)
{
    if (frames == NULL || addr == NULL || port == 0 || op_addr_is_any(addr) ||
        !op_io_has_frames(frames) || !frames->has_mac)
        return OP_ERR_INVAL;
    struct serve_io *s = calloc(1, sizeof *s);
    if (s == NULL)
        return OP_ERR_NOMEM;
    op_status_t st = buffers(s);
    if (st != OP_OK) {
        s->frames = NULL;
        serve_close(&s->io);
        return st;
    }
    s->frames = frames;
    s->io.ops = &serve_ops;
    s->io.local = *addr;
    s->io.local_port = port;
    s->io.link_mtu = frames->link_mtu;
    s->io.has_mac = true;
    memcpy(s->io.mac, frames->mac, 6);
    memcpy(s->l2.src_mac, frames->mac, 6);
    s->hdr_len = op_udp_frame_hdr_len(addr->family);
    *out = &s->io;
    return OP_OK;
}

static const char *const serve_counter_names[] = {OP_IO_SERVE_COUNTERS(OP_COUNTER_NAME)};

const char *op_io_serve_counter_name(unsigned c)
{
    return op_counter_name(serve_counter_names, OP_IO_SERVE_C_COUNT_, c);
}

void op_io_serve_counters(const struct op_io *io, uint64_t out[OP_IO_SERVE_C_COUNT_])
{
    memset(out, 0, OP_IO_SERVE_C_COUNT_ * sizeof *out);
    if (io->ops == &serve_ops)
        memcpy(out, ((const struct serve_io *)io)->sc, sizeof((const struct serve_io *)io)->sc);
}
