#include "rdmasim.h"

#include <stdlib.h>
#include <string.h>

#define RSIM_HOP_NS (5 * OP_NS_PER_US)

/* Events sit in an array sorted by (at, order), pending from index first
 * on. New packets are nearly always the latest, so an insertion moves
 * little; popping only moves first. */
static bool before(const struct rsim_event *a, uint64_t at, uint64_t order)
{
    return a->at != at ? a->at < at : a->order < order;
}

static void make_room(struct rsim *s)
{
    if (s->first > 0 && s->first >= s->n / 2) {
        memmove(s->ev, s->ev + s->first, (s->n - s->first) * sizeof(*s->ev));
        s->n -= s->first;
        s->first = 0;
    }
    if (s->n < s->cap)
        return;
    s->cap = s->cap ? s->cap * 2 : 4096;
    s->ev = realloc(s->ev, s->cap * sizeof(*s->ev));
    if (s->ev == NULL)
        abort();
}

static void schedule(struct rsim *s, const struct op_pkt *p, uint64_t at)
{
    make_room(s);
    uint64_t order = s->order++;
    size_t i = s->n;
    while (i > s->first && !before(&s->ev[i - 1], at, order))
        i--;
    memmove(&s->ev[i + 1], &s->ev[i], (s->n - i) * sizeof(*s->ev));
    struct rsim_event *ev = &s->ev[i];
    uint32_t len = op_pkt_wire_len(p); /* a payload spliced in (ext) arrives flat */
    *ev = (struct rsim_event){.at = at, .order = order, .pkt = *p};
    ev->pkt.data = malloc(len ? len : 1);
    if (ev->pkt.data == NULL)
        abort();
    ev->pkt.len = op_pkt_flatten(p, ev->pkt.data, len);
    ev->pkt.ext = NULL;
    s->n++;
}

int rsim_side(uint32_t ip) { return ip == RSIM_IP_A ? 0 : ip == RSIM_IP_B ? 1 : -1; }

static void transmit(struct rsim *s, const struct op_pkt *p)
{
    int from = rsim_side(p->flow.src.v4);
    if (from < 0)
        abort();
    const struct rsim_link *l = &s->link[from];
    s->sent[from]++;
    if (l->dead || (s->hook != NULL && s->hook(s, from, p)) || op_rng_unit(&s->rng) < l->drop) {
        s->dropped[from]++;
        return;
    }
    int copies = op_rng_unit(&s->rng) < l->dup ? 2 : 1;
    for (int i = 0; i < copies; i++) {
        bool late = l->jitter_ns != 0 && op_rng_unit(&s->rng) < l->reorder;
        uint64_t jitter = late ? op_rng_next(&s->rng) % l->jitter_ns : 0;
        schedule(s, p, s->now + RSIM_HOP_NS + jitter);
    }
}

static void flush(void *ctx, struct op_txq *q)
{
    struct rsim *s = ctx;
    for (int i = 0; i < q->n; i++)
        transmit(s, &q->pkts[i]);
    q->n = 0;
}

void rsim_init(struct rsim *s, uint64_t seed)
{
    memset(s, 0, sizeof(*s));
    op_rng_seed(&s->rng, seed);
    for (int i = 0; i < 2; i++) {
        struct op_rdma_dev_config cfg = {.ip = i == 0 ? RSIM_IP_A : RSIM_IP_B,
                                         .port = OP_ROCE_UDP_PORT, .seed = seed * 31 + (uint64_t)i};
        if (op_rdma_dev_create(&cfg, &s->dev[i]) != OP_OK)
            abort();
    }
    if (op_pktbuf_init(&s->txbuf, 32) != OP_OK)
        abort();
    s->q = (struct op_txq){.pkts = s->txbuf.pkts, .cap = s->txbuf.n, .flush = flush, .ctx = s};
}

void rsim_free(struct rsim *s)
{
    for (size_t i = s->first; i < s->n; i++)
        free(s->ev[i].pkt.data);
    free(s->ev);
    op_pktbuf_free(&s->txbuf);
    for (int i = 0; i < 2; i++)
        op_rdma_dev_destroy(s->dev[i]);
}

static void make_ep(struct rsim *s, int side, const struct rsim_qp_opts *o, struct rsim_ep *e)
{
    uint32_t depth = o->depth ? o->depth : 64;
    if (op_rdma_cq_create(s->dev[side], 2 * depth + 8, &e->scq) != OP_OK ||
        op_rdma_cq_create(s->dev[side], 2 * depth + 8, &e->rcq) != OP_OK)
        abort();
    const struct op_rdma_qp_init_attr ia = {.type = o->type, .send_cq = e->scq, .recv_cq = e->rcq,
                                            .max_send_wr = depth, .max_recv_wr = depth,
                                            .max_inline_data = o->max_inline,
                                            .srq = side == 1 ? o->srq_b : NULL};
    if (op_rdma_qp_create(s->dev[side], &ia, &e->qp) != OP_OK)
        abort();
}

static void bring_up(const struct rsim_qp_opts *o, struct rsim_ep *e, const struct rsim_ep *peer,
                     uint32_t peer_ip, uint32_t rq_psn, uint32_t sq_psn)
{
    struct op_rdma_qp_attr a = {
        .access = o->access ? o->access
                            : OP_RDMA_ACCESS_REMOTE_WRITE | OP_RDMA_ACCESS_REMOTE_READ,
        .qkey = 0x11111111u,
        .path_mtu = o->mtu ? o->mtu : 1024,
        .dest_qpn = op_rdma_qp_num(peer->qp),
        .rq_psn = rq_psn,
        .remote_ip = peer_ip,
        .remote_port = OP_ROCE_UDP_PORT,
        .min_rnr_timer = o->min_rnr_timer ? o->min_rnr_timer : 1,
        .sq_psn = sq_psn,
        .timeout = o->timeout ? o->timeout : 14,
        .retry_cnt = o->retry_cnt,
        .rnr_retry = o->rnr_retry,
        .max_outstanding = o->window,
        .max_rd_atomic = o->max_rd_atomic,
        .ack_every = o->ack_every,
    };
    if (op_rdma_qp_modify(e->qp, OP_RDMA_QPS_INIT, &a) != OP_OK ||
        op_rdma_qp_modify(e->qp, OP_RDMA_QPS_RTR, &a) != OP_OK ||
        op_rdma_qp_modify(e->qp, OP_RDMA_QPS_RTS, &a) != OP_OK)
        abort();
}

void rsim_connect(struct rsim *s, const struct rsim_qp_opts *o, struct rsim_ep *a,
                  struct rsim_ep *b)
{
    make_ep(s, 0, o, a);
    make_ep(s, 1, o, b);
    bring_up(o, a, b, RSIM_IP_B, o->psn_b, o->psn_a);
    bring_up(o, b, a, RSIM_IP_A, o->psn_a, o->psn_b);
}

/* Packet i of a placed read, if it falls as foreseen: its payload put at
 * slot k of pl (the read scatters what it can there either way), it
 * comes as *q with its headers and trailer in ht. */
static bool place_one(const struct op_io_place *pl, int k, const struct op_pkt *p, uint8_t *ht,
                      struct op_pkt *q)
{
    size_t done = (size_t)k * pl->payload;
    if (done >= pl->room)
        return false;
    uint32_t room = pl->room - done < pl->payload ? (uint32_t)(pl->room - done) : pl->payload;
    uint32_t past_hdr = p->len > pl->hdr ? p->len - pl->hdr : 0;
    memcpy(pl->at + done, p->data + pl->hdr, past_hdr < room ? past_hdr : room);
    if (p->len != pl->hdr + room + pl->trl)
        return false;
    memcpy(ht, p->data, pl->hdr);
    memcpy(ht + pl->hdr, p->data + pl->hdr + room, pl->trl);
    *q = (struct op_pkt){.flow = p->flow, .data = ht, .len = pl->hdr + pl->trl,
                         .ext = pl->at + done, .ext_len = room, .ext_at = pl->hdr};
    return true;
}

void rsim_deliver_placed(struct rsim *s, const struct op_pkt *p, int n)
{
    uint8_t ht[RSIM_DATAGRAM][64];
    struct op_pkt q[RSIM_DATAGRAM];
    struct op_io_place pl;
    int to = n > 0 && n <= RSIM_DATAGRAM ? rsim_side(p[0].flow.dst.v4) : -1;
    if (to < 0)
        abort();
    bool placing = op_rdma_dev_rx_place(s->dev[to], &pl) && pl.room > 0 &&
                   pl.hdr + pl.trl <= sizeof ht[0];
    for (int i = 0; i < n; i++) { /* the read, all at once */
        q[i] = p[i];
        placing = placing && place_one(&pl, i, &p[i], ht[i], &q[i]);
    }
    for (int i = 0; i < n; i++) {
        s->delivered++;
        op_rdma_dev_input(s->dev[to], &q[i], s->now, &s->q);
    }
    flush(s, &s->q);
}

void rsim_deliver(struct rsim *s, const struct op_pkt *p)
{
    int to = rsim_side(p->flow.dst.v4);
    if (to >= 0 && s->placed) {
        rsim_deliver_placed(s, p, 1);
        return;
    }
    if (to >= 0) {
        s->delivered++;
        op_rdma_dev_input(s->dev[to], p, s->now, &s->q);
    }
    flush(s, &s->q);
}

static uint64_t next_timer(const struct rsim *s)
{
    uint64_t a = op_rdma_dev_next_timer(s->dev[0]), b = op_rdma_dev_next_timer(s->dev[1]);
    return a < b ? a : b;
}

/* One step: the earliest of the next packet and the next timer. */
static bool step(struct rsim *s)
{
    uint64_t t = next_timer(s);
    bool pkt = s->first < s->n && s->ev[s->first].at <= t;
    if (!pkt && t == UINT64_MAX)
        return false;
    if (!pkt) {
        s->now = t > s->now ? t : s->now;
        for (int i = 0; i < 2; i++)
            op_rdma_dev_timer(s->dev[i], s->now, &s->q);
        flush(s, &s->q);
        return true;
    }
    struct rsim_event ev = s->ev[s->first++];
    s->now = ev.at > s->now ? ev.at : s->now;
    rsim_deliver(s, &ev.pkt);
    free(ev.pkt.data);
    return true;
}

bool rsim_run(struct rsim *s, rsim_done_fn done, void *arg, uint64_t limit_ns)
{
    uint64_t end = s->now + limit_ns;
    flush(s, &s->q);
    while (!done(arg)) {
        if (s->now > end || !step(s))
            return done(arg);
    }
    return true;
}
