/* Reliable streams between two leaders over unreliable datagrams, as an RC
 * queue pair over UD: every packet to a peer takes the next sequence number
 * and stays in a queue until acknowledged; at most `window` are in flight
 * (the receiver tracks 64 numbers past its cumulative point). Acks (the
 * cumulative point and a bitmap past it) ride on data going the other way
 * when there is some, else go alone (ack_due). Lost packets go again when the oldest is a timeout
 * overdue (others at twice that, so a slow round trip costs one extra packet,
 * not a window), or at once when three later ones were acknowledged. */
#include <stdlib.h>
#include <string.h>

#include "hostar_internal.h"
#include "offpath/reduce.h"

#define POOL_KEEP 256   /* free buffers kept for the next call */
#define QUEUE_FIRST 64  /* first queue size: a window, rounded up */
#define FAST_AFTER 3    /* later packets acknowledged before a hole goes again */

struct har_buf *har_buf_get(struct op_har_eng *e)
{
    struct har_buf *b = e->pool;
    if (b != NULL) {
        e->pool = b->next;
        e->n_pool--;
        return b;
    }
    b = malloc(sizeof(*b));
    if (b == NULL)
        e->nomem = true;
    return b;
}

void har_buf_put(struct op_har_eng *e, struct har_buf *b)
{
    if (b == NULL)
        return;
    if (e->n_pool >= POOL_KEEP) {
        free(b);
        return;
    }
    b->next = e->pool;
    e->pool = b;
    e->n_pool++;
}

struct har_peer *har_peer_get(struct op_har_eng *e, uint32_t rank)
{
    if (e->peer[rank] == NULL) {
        e->peer[rank] = calloc(1, sizeof(struct har_peer));
        if (e->peer[rank] == NULL) {
            e->nomem = true;
            return NULL;
        }
        e->peer[rank]->rank = rank;
    }
    return e->peer[rank];
}

static struct har_slot *slot(const struct har_peer *p, uint32_t tsn)
{
    return &p->q[tsn & (p->qcap - 1)];
}

static bool queue_room(struct op_har_eng *e, struct har_peer *p)
{
    if (p->next - p->base < p->qcap)
        return true;
    uint32_t cap = p->qcap ? p->qcap * 2 : QUEUE_FIRST;
    struct har_slot *q = calloc(cap, sizeof(*q));
    if (q == NULL) {
        e->nomem = true;
        return false;
    }
    for (uint32_t t = p->base; t != p->next; t++)
        q[t & (cap - 1)] = *slot(p, t);
    free(p->q);
    p->q = q;
    p->qcap = cap;
    return true;
}

static struct op_flow flow_to(const struct op_har_eng *e, uint32_t rank)
{
    const struct op_har_peer *me = &e->addr[e->cfg.rank], *to = &e->addr[rank];
    return (struct op_flow){.src.v4 = me->ip, .src_port = me->port, .dst.v4 = to->ip,
                            .dst_port = to->port};
}

static void transmit(struct op_har_eng *e, struct har_peer *p, struct har_slot *s, uint64_t now,
                     struct op_txq *out)
{
    struct op_pkt *pkt = op_txq_next(out);
    pkt->flow = flow_to(e, p->rank);
    memcpy(pkt->data, s->b->data, s->b->len);
    pkt->len = s->b->len;
    if (p->ack_due) { /* the ack rides along: one packet, one wake-up */
        op_har_stamp_ack(pkt->data, p->cum, p->seen);
        pkt->len = (uint32_t)op_icrc_seal(&pkt->flow, pkt->data, pkt->len - OP_ICRC_LEN,
                                          OP_IO_BUF_SIZE);
        p->ack_due = false;
    }
    op_txq_commit(out);
    s->sent_ns = now;
    s->sends++;
    e->c[s->sends > 1 ? OP_HAR_C_retransmissions : OP_HAR_C_tx_data]++;
}

static void pump(struct op_har_eng *e, struct har_peer *p, uint64_t now, struct op_txq *out)
{
    while (p->sent != p->next && p->sent - p->base < e->cfg.window)
        transmit(e, p, slot(p, p->sent++), now, out);
}

static void hdr_address(const struct op_har_eng *e, uint32_t to, struct op_har_hdr *h)
{
    h->version = OP_HAR_VERSION;
    h->session = e->cfg.session;
    h->src = (uint16_t)e->cfg.rank;
    h->dst = (uint16_t)to;
}

/* Queue h (a data header) with h->count elements from host memory, and send
 * what the window allows. */
bool har_xp_send(struct op_har_eng *e, uint32_t to, struct op_har_hdr *h, const void *elems,
                 uint64_t now, struct op_txq *out)
{
    struct har_peer *p = har_peer_get(e, to);
    struct har_buf *b = p != NULL && queue_room(e, p) ? har_buf_get(e) : NULL;
    if (b == NULL)
        return false;
    hdr_address(e, to, h);
    h->tsn = p->next;
    size_t bytes = (size_t)h->count * op_red_type_size(h->dtype);
    size_t n = op_har_frame(h, bytes, b->data, sizeof(b->data));
    op_red_to_be(h->dtype, b->data + OP_HAR_PREFIX_LEN, elems, h->count);
    struct op_flow flow = flow_to(e, to);
    b->len = (uint32_t)op_icrc_seal(&flow, b->data, n, sizeof(b->data));
    *slot(p, p->next++) = (struct har_slot){.b = b};
    if (!p->active) {
        p->active = true;
        e->active[e->n_active++] = to;
    }
    pump(e, p, now, out);
    return true;
}

enum har_rx har_xp_check(const struct har_peer *p, uint32_t tsn)
{
    uint32_t d = tsn - p->cum;
    if ((int32_t)d < 0)
        return HAR_RX_DUP;
    if (d >= 64)
        return HAR_RX_BEYOND;
    return p->seen >> d & 1 ? HAR_RX_DUP : HAR_RX_NEW;
}

/* Acks wait (as TCP's delayed acks): an ack packet wakes a peer that is
 * waiting for data, and on two shared cores each wake-up costs tens of
 * microseconds of somebody's latency. The sender does not wait for them (a
 * call ends when its data is in), so they go with this leader's next packets
 * (the next call starts by sending them), or after ack_delay, or at once
 * when a quarter window has arrived unacknowledged (a stream in full flow)
 * or a packet came twice (the sender already timed out). */
static void ack_due(struct op_har_eng *e, struct har_peer *p, uint64_t now, bool urgent)
{
    if (!p->ack_due) {
        p->ack_due = true;
        p->unacked = 0;
        if (!p->ack_listed) /* still listed when the ack went with data */
            e->acks[e->n_acks++] = p->rank;
        p->ack_listed = true;
    }
    urgent |= ++p->unacked >= (e->cfg.window + 3u) / 4;
    uint64_t at = urgent ? now : now + e->cfg.ack_delay_ns;
    if (e->ack_at > at)
        e->ack_at = at;
}

/* Record tsn as arrived (HAR_RX_DUP ones too: their ack may have been lost)
 * and owe the peer an ack. */
void har_xp_accept(struct op_har_eng *e, struct har_peer *p, uint32_t tsn, uint64_t now)
{
    bool fresh = har_xp_check(p, tsn) == HAR_RX_NEW;
    if (fresh) {
        p->seen |= 1ull << (tsn - p->cum);
        while (p->seen & 1) {
            p->seen >>= 1;
            p->cum++;
        }
    }
    ack_due(e, p, now, !fresh);
}

static void send_ack(struct op_har_eng *e, struct har_peer *p, struct op_txq *out)
{
    struct op_har_hdr h = {.kind = OP_HAR_KIND_ACK, .flags = OP_HAR_F_ACK, .ack = p->cum,
                           .sack = p->seen};
    hdr_address(e, p->rank, &h);
    struct op_pkt *pkt = op_txq_next(out);
    pkt->flow = flow_to(e, p->rank);
    size_t n = op_har_frame(&h, 0, pkt->data, OP_IO_BUF_SIZE);
    pkt->len = (uint32_t)op_icrc_seal(&pkt->flow, pkt->data, n, OP_IO_BUF_SIZE);
    op_txq_commit(out);
    e->c[OP_HAR_C_tx_acks]++;
}

/* Acks still owed (none went with data in time) go alone. */
void har_xp_flush_acks(struct op_har_eng *e, struct op_txq *out)
{
    for (uint32_t i = 0; i < e->n_acks; i++) {
        struct har_peer *p = e->peer[e->acks[i]];
        if (p->ack_due)
            send_ack(e, p, out);
        p->ack_due = p->ack_listed = false;
    }
    e->n_acks = 0;
    e->ack_at = UINT64_MAX;
}

/* The timeout follows the smallest of the latest round trips (what the path
 * takes now; delays only add), three times it, within [rto_min, rto_max]. */
static uint64_t min_rtt(const struct op_har_eng *e)
{
    uint64_t low = UINT64_MAX;
    unsigned n = e->n_rtt < HAR_RTT_SAMPLES ? e->n_rtt : HAR_RTT_SAMPLES;
    for (unsigned i = 0; i < n; i++)
        low = e->rtt_ns[i] < low ? e->rtt_ns[i] : low;
    return low;
}

uint64_t har_base_rto(const struct op_har_eng *e)
{
    uint64_t low = min_rtt(e);
    uint64_t rto = low == UINT64_MAX ? e->cfg.rto_ns : 3 * low;
    rto = rto < e->cfg.rto_min_ns ? e->cfg.rto_min_ns : rto;
    return rto > e->cfg.rto_max_ns ? e->cfg.rto_max_ns : rto;
}

static bool ack_one(struct op_har_eng *e, struct har_peer *p, uint32_t tsn, uint64_t now)
{
    struct har_slot *s = slot(p, tsn);
    if (s->b == NULL)
        return false;
    if (s->sends == 1) /* Karn: a resent packet's ack says nothing of the path */
        e->rtt_ns[e->n_rtt++ % HAR_RTT_SAMPLES] = now - s->sent_ns;
    har_buf_put(e, s->b);
    s->b = NULL;
    return true;
}

/* A hole with FAST_AFTER acknowledged packets above it, out for longer than
 * the quickest round trip, was lost rather than overtaken. */
static void fast_retransmit(struct op_har_eng *e, struct har_peer *p, uint32_t highest,
                            uint64_t now, struct op_txq *out)
{
    uint64_t rtt = min_rtt(e);
    /* bounded by what was sent: a forged ack far behind base makes
     * `highest` look 2^31 ahead */
    for (uint32_t t = p->base; t != p->sent && (int32_t)(highest - t) >= FAST_AFTER; t++) {
        struct har_slot *s = slot(p, t);
        if (s->b != NULL && !s->fast && rtt != UINT64_MAX && now - s->sent_ns > rtt) {
            s->fast = true;
            e->c[OP_HAR_C_fast_retransmits]++;
            transmit(e, p, s, now, out);
        }
    }
}

/* False when the ack is impossible (acknowledges what was never sent). */
bool har_xp_on_ack(struct op_har_eng *e, struct har_peer *p, uint32_t cum, uint64_t sack,
                   uint64_t now, struct op_txq *out)
{
    uint32_t in_flight = p->sent - p->base;
    if ((int32_t)(cum - p->base) > (int32_t)in_flight)
        return false;
    bool progress = false;
    for (uint32_t t = p->base; (int32_t)(cum - t) > 0; t++)
        progress |= ack_one(e, p, t, now);
    uint32_t highest = cum - 1;
    for (unsigned i = 0; i < 64; i++) {
        uint32_t t = cum + i;
        if ((sack >> i & 1) && t - p->base < in_flight) {
            progress |= ack_one(e, p, t, now);
            highest = t;
        }
    }
    while (p->base != p->sent && slot(p, p->base)->b == NULL)
        p->base++;
    if (progress)
        e->rto_ns = har_base_rto(e); /* the path works: no more backoff */
    fast_retransmit(e, p, highest, now, out);
    pump(e, p, now, out);
    return true;
}

/* Each in-flight packet's time to go again: the oldest after one timeout. */
static uint64_t due(const struct op_har_eng *e, const struct har_peer *p, uint32_t t)
{
    return slot(p, t)->sent_ns + (t == p->base ? e->rto_ns : 2 * e->rto_ns);
}

void har_xp_retransmit(struct op_har_eng *e, uint64_t now, struct op_txq *out)
{
    bool resent = false;
    uint32_t keep = 0;
    for (uint32_t i = 0; i < e->n_active; i++) {
        struct har_peer *p = e->peer[e->active[i]];
        for (uint32_t t = p->base; t != p->sent; t++)
            if (slot(p, t)->b != NULL && due(e, p, t) <= now) {
                transmit(e, p, slot(p, t), now, out);
                resent = true;
            }
        p->active = p->base != p->next;
        if (p->active)
            e->active[keep++] = p->rank;
    }
    e->n_active = keep;
    if (resent) { /* exponential backoff, as SwitchML's hosts */
        e->c[OP_HAR_C_timeouts]++;
        e->rto_ns = 2 * e->rto_ns < e->cfg.rto_max_ns ? 2 * e->rto_ns : e->cfg.rto_max_ns;
    }
}

uint64_t har_xp_next_retx(const struct op_har_eng *e)
{
    uint64_t next = UINT64_MAX;
    for (uint32_t i = 0; i < e->n_active; i++) {
        const struct har_peer *p = e->peer[e->active[i]];
        for (uint32_t t = p->base; t != p->sent; t++)
            if (slot(p, t)->b != NULL && due(e, p, t) < next)
                next = due(e, p, t);
    }
    return next;
}

bool har_xp_quiet(const struct op_har_eng *e)
{
    for (uint32_t i = 0; i < e->n_active; i++) {
        const struct har_peer *p = e->peer[e->active[i]];
        if (p->base != p->next)
            return false;
    }
    return true;
}

/* Give up what was never acknowledged (the peer is gone); returns how many. */
uint32_t har_xp_abandon(struct op_har_eng *e)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < e->n_active; i++) {
        struct har_peer *p = e->peer[e->active[i]];
        for (; p->base != p->next; p->base++) {
            n += slot(p, p->base)->b != NULL;
            har_buf_put(e, slot(p, p->base)->b);
            slot(p, p->base)->b = NULL;
        }
        p->sent = p->next;
        p->active = false;
    }
    e->n_active = 0;
    return n;
}

void har_xp_free(struct op_har_eng *e)
{
    har_xp_abandon(e);
    for (uint32_t r = 0; r < e->cfg.n; r++)
        if (e->peer[r] != NULL) {
            free(e->peer[r]->q);
            free(e->peer[r]);
        }
    while (e->pool != NULL) {
        struct har_buf *b = e->pool;
        e->pool = b->next;
        free(b);
    }
}
