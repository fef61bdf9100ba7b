/* hostar engine: one allreduce at a time over the schedule of sched.c, its
 * packets through the streams of xport.c. Data is applied chunk by chunk as
 * it arrives, and each applied chunk releases the chunk the next step sends,
 * so a large vector streams through the ring instead of moving step by step.
 * A chunk that cannot be applied yet (its partner is a round ahead, or it
 * belongs to the next call) is kept, acknowledged, and applied when it can. */
#include <stdlib.h>
#include <string.h>

#include "hostar_internal.h"
#include "offpath/reduce.h"

static const char *const counter_names[] = {OP_HAR_COUNTERS(OP_COUNTER_NAME)};

const char *op_har_counter_name(unsigned c)
{
    return op_counter_name(counter_names, OP_HAR_C_COUNT_, c);
}

void op_har_config_default(struct op_har_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->max_data = OP_HAR_MAX_DATA;
    cfg->window = 32;
    /* 8 leaders on 2 cores: even from 8 to 32 KiB, the ring ahead from 64 KiB */
    cfg->ring_bytes = 32768;
    cfg->hold_max = 1024;
    cfg->rto_ns = 2 * OP_NS_PER_MS;
    cfg->rto_min_ns = 1 * OP_NS_PER_MS;
    cfg->rto_max_ns = 200 * OP_NS_PER_MS;
    cfg->ack_delay_ns = 500 * OP_NS_PER_US;
    cfg->deadline_ns = 10 * OP_NS_PER_S;
}

static bool config_ok(const struct op_har_config *c)
{
    return c->n >= 2 && c->n <= UINT16_MAX && c->rank < c->n && c->peers != NULL &&
           c->max_data >= 8 && c->max_data <= OP_HAR_MAX_DATA && c->max_data % 8 == 0 &&
           c->window >= 1 && c->window <= OP_HAR_MAX_WINDOW && c->hold_max >= 1 &&
           c->rto_ns > 0 && c->rto_min_ns <= c->rto_max_ns && c->rto_ns <= c->rto_max_ns &&
           c->ack_delay_ns < c->rto_min_ns && c->deadline_ns > 0;
}

op_status_t op_har_eng_create(const struct op_har_config *cfg, struct op_har_eng **out)
{
    if (cfg == NULL || out == NULL || !config_ok(cfg))
        return OP_ERR_INVAL;
    struct op_har_eng *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return OP_ERR_NOMEM;
    e->cfg = *cfg;
    e->addr = malloc(cfg->n * sizeof(*e->addr));
    e->peer = calloc(cfg->n, sizeof(*e->peer));
    e->active = malloc(cfg->n * sizeof(*e->active));
    e->acks = malloc(cfg->n * sizeof(*e->acks));
    e->held = malloc(cfg->hold_max * sizeof(*e->held));
    if (e->addr == NULL || e->peer == NULL || e->active == NULL || e->acks == NULL ||
        e->held == NULL) {
        op_har_eng_destroy(e);
        return OP_ERR_NOMEM;
    }
    memcpy(e->addr, cfg->peers, cfg->n * sizeof(*e->addr));
    e->cfg.peers = e->addr;
    e->result = OP_OK;
    e->deadline_ns = e->ack_at = UINT64_MAX;
    e->rto_ns = cfg->rto_ns;
    *out = e;
    return OP_OK;
}

static void drop_held(struct op_har_eng *e)
{
    for (uint32_t i = 0; i < e->n_held; i++)
        har_buf_put(e, e->held[i]);
    e->n_held = 0;
}

void op_har_eng_destroy(struct op_har_eng *e)
{
    if (e == NULL)
        return;
    if (e->peer != NULL && e->held != NULL) {
        drop_held(e);
        har_xp_free(e);
    }
    har_sched_free(&e->call);
    free(e->addr);
    free(e->peer);
    free(e->active);
    free(e->acks);
    free(e->held);
    free(e);
}

/* A call that ends on an error leaves the session unusable: peers are at
 * unknown points of it. What is still unacknowledged after a good call may
 * go on being resent for one deadline (a slower peer may still need it). */
static void finish(struct op_har_eng *e, op_status_t result, uint64_t now)
{
    e->result = result;
    e->deadline_ns = UINT64_MAX;
    e->call.buf = NULL;
    e->linger_until = now + e->cfg.deadline_ns;
    e->state = result == OP_OK ? HAR_IDLE : HAR_BROKEN;
    if (result != OP_OK) {
        e->c[OP_HAR_C_abandoned] += har_xp_abandon(e);
        drop_held(e);
    }
}

static void send_chunk(struct op_har_eng *e, const struct har_step *st, uint32_t c, uint64_t now,
                       struct op_txq *out)
{
    const struct har_call *k = &e->call;
    uint32_t off = st->send_off + c * k->per_chunk;
    struct op_har_hdr h = {.kind = OP_HAR_KIND_DATA, .op = (uint8_t)k->op,
                           .dtype = (uint8_t)k->type, .call = k->id, .step = st->g,
                           .count = (uint16_t)har_chunk_len(k, st->send_len, c), .offset = off,
                           .total = k->count};
    if (!har_xp_send(e, (uint32_t)st->to, &h, k->buf + (size_t)off * k->esize, now, out))
        e->nomem = true;
}

static bool chunk_done(const struct har_call *k, int32_t step, uint32_t c)
{
    return step < 0 || k->done[k->steps[step].done_base + c];
}

/* Which step and chunk of the current call a data packet fills; false when
 * it fits none (another call's parameters, or no such piece). */
static bool locate(const struct op_har_eng *e, const struct op_har_hdr *h, uint32_t *li,
                   uint32_t *c)
{
    const struct har_call *k = &e->call;
    if (h->op != k->op || h->dtype != k->type || h->total != k->count || h->step >= k->n_g ||
        k->by_g[h->step] < 0)
        return false;
    const struct har_step *st = &k->steps[k->by_g[h->step]];
    uint32_t rel = h->offset - st->recv_off;
    if (st->from != h->src || h->offset < st->recv_off || rel >= st->recv_len ||
        rel % k->per_chunk != 0 || h->count != har_chunk_len(k, st->recv_len, rel / k->per_chunk))
        return false;
    *li = (uint32_t)k->by_g[h->step];
    *c = rel / k->per_chunk;
    return true;
}

static void combine(struct op_har_eng *e, uint8_t action, uint8_t *dst, const uint8_t *in_be,
                    uint32_t n)
{
    const struct har_call *k = &e->call;
    if (action == HAR_COPY) {
        op_red_from_be(k->type, dst, in_be, n);
    } else if (action == HAR_REDUCE_MINE_FIRST) {
        op_reduce_be(k->op, k->type, dst, in_be, n);
    } else { /* the partner's value is the left operand */
        op_red_from_be(k->type, e->scratch, in_be, n);
        op_reduce(k->op, k->type, e->scratch, dst, n);
        memcpy(dst, e->scratch, n * k->esize);
    }
}

static void apply(struct op_har_eng *e, uint32_t li, uint32_t c, const struct op_har_pkt *k_pkt,
                  uint64_t now, struct op_txq *out)
{
    struct har_call *k = &e->call;
    const struct har_step *st = &k->steps[li];
    uint32_t off = st->recv_off + c * k->per_chunk;
    combine(e, st->action, k->buf + (size_t)off * k->esize, k_pkt->payload, k_pkt->hdr.count);
    k->done[st->done_base + c] = 1;
    k->left--;
    if (li + 1 < k->n_steps && k->steps[li + 1].send_after == (int32_t)li)
        send_chunk(e, &k->steps[li + 1], c, now, out);
}

enum use { USE_NOW, USE_LATER, USE_NEVER };

static enum use usable(const struct op_har_eng *e, const struct op_har_pkt *k, uint32_t *li,
                       uint32_t *c)
{
    if (!locate(e, &k->hdr, li, c))
        return USE_NEVER;
    if (chunk_done(&e->call, (int32_t)*li, *c))
        return USE_NEVER;
    return chunk_done(&e->call, e->call.steps[*li].recv_after, *c) ? USE_NOW : USE_LATER;
}

static void check_done(struct op_har_eng *e, uint64_t now)
{
    if (e->state != HAR_RUN)
        return;
    if (e->nomem)
        finish(e, OP_ERR_NOMEM, now);
    else if (e->call.left == 0)
        finish(e, OP_OK, now);
}

/* Apply kept packets of the current call until none more can be. */
static void drain_held(struct op_har_eng *e, uint64_t now, struct op_txq *out)
{
    bool progress = true;
    while (progress && e->state == HAR_RUN) {
        progress = false;
        for (uint32_t i = 0; i < e->n_held; i++) {
            struct op_har_pkt k;
            uint32_t li, c;
            struct har_buf *b = e->held[i];
            (void)op_har_decode(b->data, b->len, &k); /* decoded once already */
            if ((int32_t)(k.hdr.call - e->call.id) > 0)
                continue; /* the next call's */
            enum use u = k.hdr.call == e->call.id ? usable(e, &k, &li, &c) : USE_NEVER;
            if (u == USE_LATER)
                continue;
            if (u == USE_NOW) {
                apply(e, li, c, &k, now, out);
                progress = true;
            } else {
                e->c[OP_HAR_C_drop_mismatch]++;
            }
            e->held[i--] = e->held[--e->n_held];
            har_buf_put(e, b);
        }
    }
    check_done(e, now);
}

static bool hold(struct op_har_eng *e, const struct op_pkt *pkt)
{
    struct har_buf *b = e->n_held < e->cfg.hold_max ? har_buf_get(e) : NULL;
    if (b == NULL) {
        e->c[OP_HAR_C_hold_full]++;
        return false;
    }
    memcpy(b->data, pkt->data, pkt->len);
    b->len = pkt->len;
    e->held[e->n_held++] = b;
    e->c[OP_HAR_C_held]++;
    return true;
}

static void start_sends(struct op_har_eng *e, uint64_t now, struct op_txq *out)
{
    const struct har_call *k = &e->call;
    for (uint32_t i = 0; i < k->n_steps; i++) {
        const struct har_step *st = &k->steps[i];
        if (st->to >= 0 && st->send_after < 0)
            for (uint32_t c = 0; c < har_chunks(k, st->send_len); c++)
                send_chunk(e, st, c, now, out);
    }
}

static op_status_t check_call(const struct op_har_eng *e, size_t count, unsigned type,
                              unsigned op)
{
    if (e->state != HAR_IDLE)
        return e->state == HAR_RUN ? OP_ERR_BUSY : OP_ERR_STATE;
    if (type >= OP_RED_TYPE_COUNT_ || op >= OP_RED_OP_COUNT_ || !op_red_valid(op, type))
        return OP_ERR_INVAL;
    return count <= UINT32_MAX ? OP_OK : OP_ERR_UNSUPPORTED;
}

op_status_t op_har_eng_allreduce(struct op_har_eng *e, const void *sendbuf, void *recvbuf,
                                 size_t count, unsigned type, unsigned op, uint64_t now,
                                 struct op_txq *out)
{
    op_status_t st = check_call(e, count, type, op);
    if (st != OP_OK)
        return st;
    struct har_call *k = &e->call;
    size_t es = op_red_type_size(type);
    if (sendbuf != recvbuf && count > 0)
        memcpy(recvbuf, sendbuf, count * es);
    e->result = OP_OK;
    if (count == 0) /* every leader agrees: no call number spent */
        return OP_OK;
    bool ring = har_use_ring(&e->cfg, count, es);
    *k = (struct har_call){.id = e->last_call + 1, .op = op, .type = type, .esize = es,
                           .count = (uint32_t)count, .per_chunk = (uint32_t)(e->cfg.max_data / es),
                           .buf = recvbuf, .steps = k->steps, .steps_cap = k->steps_cap,
                           .by_g = k->by_g, .by_g_cap = k->by_g_cap, .done = k->done,
                           .done_cap = k->done_cap};
    if ((st = har_sched_build(k, e->cfg.rank, e->cfg.n, ring)) != OP_OK)
        return st;
    e->last_call = k->id;
    e->state = HAR_RUN;
    e->result = OP_INPROGRESS;
    e->deadline_ns = now + e->cfg.deadline_ns;
    e->c[OP_HAR_C_allreduces]++;
    e->c[ring ? OP_HAR_C_ring_calls : OP_HAR_C_rd_calls]++;
    start_sends(e, now, out);
    drain_held(e, now, out); /* what came early */
    return OP_OK;
}

/* A data packet of the current call. Its number is recorded (and acked)
 * only once it is applied or kept, so one refused for want of room comes
 * again. */
static void current_data(struct op_har_eng *e, struct har_peer *p, const struct op_har_pkt *k,
                         const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    uint32_t li, c;
    enum use u = usable(e, k, &li, &c);
    if (u == USE_NEVER) {
        bool dup = locate(e, &k->hdr, &li, &c);
        e->c[dup ? OP_HAR_C_duplicates : OP_HAR_C_drop_mismatch]++;
        if (dup)
            har_xp_accept(e, p, k->hdr.tsn, now);
        return;
    }
    if (u == USE_LATER && !hold(e, pkt))
        return;
    har_xp_accept(e, p, k->hdr.tsn, now);
    if (u == USE_NOW) {
        apply(e, li, c, k, now, out);
        if (e->n_held > 0)
            drain_held(e, now, out);
        check_done(e, now);
    }
}

static void data_input(struct op_har_eng *e, struct har_peer *p, const struct op_har_pkt *k,
                       const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    e->c[OP_HAR_C_rx_data]++;
    int32_t ahead = (int32_t)(k->hdr.call - e->last_call);
    enum har_rx rx = har_xp_check(p, k->hdr.tsn);
    if (ahead > 1) { /* a peer cannot be two calls ahead of a live leader */
        e->c[OP_HAR_C_future]++;
    } else if (rx == HAR_RX_BEYOND) {
        e->c[OP_HAR_C_drop_window]++;
    } else if (rx == HAR_RX_DUP) { /* its ack was lost: ack again */
        e->c[OP_HAR_C_duplicates]++;
        har_xp_accept(e, p, k->hdr.tsn, now);
    } else if (ahead == 1) {
        if (hold(e, pkt))
            har_xp_accept(e, p, k->hdr.tsn, now);
    } else if (ahead == 0 && e->state == HAR_RUN) {
        current_data(e, p, k, pkt, now, out);
    } else { /* a finished call: nothing to do with it but say it came */
        e->c[OP_HAR_C_stale]++;
        har_xp_accept(e, p, k->hdr.tsn, now);
    }
}

/* From a leader of this session, at the address it has, to this leader. */
static bool from_peer(const struct op_har_eng *e, const struct op_har_hdr *h,
                      const struct op_flow *f)
{
    if (h->session != e->cfg.session || h->dst != e->cfg.rank || h->src >= e->cfg.n ||
        h->src == e->cfg.rank)
        return false;
    const struct op_har_peer *src = &e->addr[h->src], *me = &e->addr[e->cfg.rank];
    return f->src.v4 == src->ip && f->src_port == src->port && f->dst.v4 == me->ip &&
           f->dst_port == me->port;
}

void op_har_eng_input(struct op_har_eng *e, const struct op_pkt *pkt, uint64_t now,
                      struct op_txq *out)
{
    struct op_har_pkt k;
    op_status_t st = op_har_decode(pkt->data, pkt->len, &k);
    if (st != OP_OK) {
        e->c[st == OP_ERR_TRUNCATED ? OP_HAR_C_drop_truncated : OP_HAR_C_drop_malformed]++;
        return;
    }
    if (!from_peer(e, &k.hdr, &pkt->flow) || e->state == HAR_BROKEN) {
        e->c[OP_HAR_C_drop_foreign]++;
        return;
    }
    if (!op_icrc_check(&pkt->flow, pkt->data, pkt->len)) {
        e->c[OP_HAR_C_drop_icrc]++;
        return;
    }
    struct har_peer *p = har_peer_get(e, k.hdr.src);
    if (p == NULL)
        return;
    if ((k.hdr.flags & OP_HAR_F_ACK) && !har_xp_on_ack(e, p, k.hdr.ack, k.hdr.sack, now, out)) {
        e->c[OP_HAR_C_drop_mismatch]++;
        return;
    }
    e->c[OP_HAR_C_rx_acks] += (k.hdr.flags & OP_HAR_F_ACK) != 0;
    if (k.hdr.kind == OP_HAR_KIND_DATA)
        data_input(e, p, &k, pkt, now, out);
    check_done(e, now);
}

void op_har_eng_timer(struct op_har_eng *e, uint64_t now, struct op_txq *out)
{
    if (e->state == HAR_RUN && now >= e->deadline_ns) {
        e->c[OP_HAR_C_deadlines]++;
        finish(e, OP_ERR_TIMEOUT, now);
    }
    if (e->ack_at <= now)
        har_xp_flush_acks(e, out);
    if (e->state != HAR_RUN && e->n_active > 0 && now >= e->linger_until)
        e->c[OP_HAR_C_abandoned] += har_xp_abandon(e);
    har_xp_retransmit(e, now, out);
}

uint64_t op_har_eng_next_timer(const struct op_har_eng *e)
{
    uint64_t t = har_xp_next_retx(e);
    uint64_t end = e->state == HAR_RUN ? e->deadline_ns
                   : e->n_active       ? e->linger_until
                                       : UINT64_MAX;
    t = end < t ? end : t;
    return e->ack_at < t ? e->ack_at : t;
}

op_status_t op_har_eng_status(const struct op_har_eng *e) { return e->result; }
bool op_har_eng_quiet(const struct op_har_eng *e) { return har_xp_quiet(e); }
const uint64_t *op_har_eng_counters(const struct op_har_eng *e) { return e->c; }
