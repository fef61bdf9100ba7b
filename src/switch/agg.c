/* Switch engine: the aggregation data plane.
 *
 * Chunk seq of a group lives in slot seq % window. A slot gathers one
 * contribution per child (bitmap: each counted exactly once), then a TOR sends
 * the partial up and a root sends the result down. A child may send seq only
 * after it received the result of seq - window, so a slot holds at most the
 * current round and the previous round's result, which is kept for children
 * that retransmit. Integers are reduced on arrival (exact in any order); floats
 * are buffered per child and reduced in child order, so results are bitwise
 * reproducible. */
#include <string.h>

#include "offpath/reduce.h"
#include "switch_internal.h"

static bool is_float(unsigned dtype) { return dtype == OP_RED_FLOAT32 || dtype == OP_RED_FLOAT64; }

static void data_hdr(const struct sw_group *g, const struct sw_slot *s, uint32_t seq,
                     uint32_t rank, uint8_t flags, struct op_inc_hdr *h)
{
    *h = (struct op_inc_hdr){.version = OP_INC_VERSION, .kind = OP_INC_KIND_DATA,
                             .flags = flags, .group_id = g->id, .op = s->op, .dtype = s->dtype,
                             .src_rank = rank, .token = g->token, .seq = seq,
                             .slot = (uint16_t)(seq % g->window), .count = s->count,
                             .req_id = (uint8_t)seq};
}

static size_t result_len(const struct sw_slot *s) { return s->count * op_red_type_size(s->dtype); }

/* What a round's packets say of it: a retransmission took part, a queue
 * marked it. */
static uint8_t round_flags(const struct sw_slot *s)
{
    return (uint8_t)((s->retx_seen ? OP_INC_F_RETX : 0) | (s->congested ? OP_INC_F_CONGESTED : 0));
}

static void send_result(struct op_sw *sw, const struct sw_group *g, const struct sw_slot *s,
                        int child, struct op_txq *out)
{
    struct op_inc_hdr h;
    const struct sw_member *m = &g->children[child];
    data_hdr(g, s, s->seq, m->rank, OP_INC_F_RESULT | round_flags(s), &h);
    sw_emit(sw, out, m->ip, m->port, &h, s->result, result_len(s));
}

static void send_prev_result(struct op_sw *sw, const struct sw_group *g, const struct sw_slot *s,
                             int child, struct op_txq *out)
{
    struct sw_slot prev = {.op = s->prev_op, .dtype = s->prev_dtype, .count = s->prev_count};
    struct op_inc_hdr h;
    const struct sw_member *m = &g->children[child];
    data_hdr(g, &prev, s->prev_seq, m->rank,
             OP_INC_F_RESULT | OP_INC_F_RETX | (s->prev_congested ? OP_INC_F_CONGESTED : 0), &h);
    sw_emit(sw, out, m->ip, m->port, &h, s->prev_result, result_len(&prev));
}

static void send_partial_up(struct op_sw *sw, const struct sw_group *g, struct sw_slot *s,
                            uint8_t flags, uint64_t now, struct op_txq *out)
{
    struct op_inc_hdr h;
    data_hdr(g, s, s->seq, g->index_at_parent, flags | round_flags(s), &h);
    sw_emit(sw, out, g->parent_ip, g->parent_port, &h, s->result, result_len(s));
    s->up_sent_ns = now;
}

static void multicast_result(struct op_sw *sw, const struct sw_group *g, const struct sw_slot *s,
                             struct op_txq *out)
{
    for (int i = 0; i < g->n_children; i++)
        send_result(sw, g, s, i, out);
    sw->c[OP_SW_C_results_sent] += g->n_children;
}

static void start_round(const struct sw_group *g, struct sw_slot *s, const struct op_inc_hdr *h)
{
    if (s->state == SLOT_DONE) {
        uint8_t *t = s->prev_result;
        s->prev_result = s->result;
        s->result = t;
        s->prev_valid = true;
        s->prev_seq = s->seq;
        s->prev_op = s->op;
        s->prev_dtype = s->dtype;
        s->prev_count = s->count;
        s->prev_congested = s->congested;
    }
    s->seq = h->seq;
    s->state = SLOT_AGG;
    s->op = h->op;
    s->dtype = h->dtype;
    s->count = h->count;
    s->n_contrib = 0;
    s->retx_seen = false;
    s->congested = false;
    memset(s->bitmap, 0, (size_t)g->words * 8);
}

static void accumulate(const struct sw_group *g, struct sw_slot *s, int child,
                       const uint8_t *payload, size_t len)
{
    if (is_float(s->dtype))
        memcpy(s->contrib + (size_t)child * g->max_data, payload, len);
    else if (s->n_contrib == 0)
        op_red_from_be(s->dtype, s->acc, payload, s->count);
    else
        op_reduce_be(s->op, s->dtype, s->acc, payload, s->count);
}

static void finish(const struct sw_group *g, struct sw_slot *s)
{
    if (is_float(s->dtype)) {
        op_red_from_be(s->dtype, s->acc, s->contrib, s->count);
        for (int i = 1; i < g->n_children; i++)
            op_reduce_be(s->op, s->dtype, s->acc, s->contrib + (size_t)i * g->max_data, s->count);
    }
    op_red_to_be(s->dtype, s->result, s->acc, s->count);
}

static void complete(struct op_sw *sw, struct sw_group *g, struct sw_slot *s, uint64_t now,
                     struct op_txq *out)
{
    finish(g, s);
    sw->c[OP_SW_C_chunks_aggregated]++;
    if (g->root) {
        s->state = SLOT_DONE;
        multicast_result(sw, g, s, out);
    } else {
        s->state = SLOT_UP;
        sw->c[OP_SW_C_partials_up]++;
        send_partial_up(sw, g, s, 0, now, out);
    }
}

/* A contribution this child already made: answer what it is missing. */
static void duplicate(struct op_sw *sw, struct sw_group *g, struct sw_slot *s, int child,
                      uint64_t now, struct op_txq *out)
{
    sw->c[OP_SW_C_duplicates]++;
    if (s->state == SLOT_DONE) {
        sw->c[OP_SW_C_results_resent]++;
        send_result(sw, g, s, child, out);
    } else if (s->state == SLOT_UP && now - s->up_sent_ns >= SW_UP_RESEND_GAP_NS) {
        sw->c[OP_SW_C_partials_resent]++;
        send_partial_up(sw, g, s, OP_INC_F_RETX, now, out);
    }
}

/* Place seq in its slot. Returns false if the packet must be dropped (after
 * answering it when it retransmits the previous round). */
static bool enter_round(struct op_sw *sw, struct sw_group *g, struct sw_slot *s,
                        const struct op_inc_hdr *h, int child, struct op_txq *out)
{
    int32_t d = (int32_t)(h->seq - s->seq);
    if (s->state == SLOT_EMPTY ? h->seq == h->slot : d == (int32_t)g->window) {
        if (s->state != SLOT_EMPTY && s->state != SLOT_DONE) {
            sw->c[OP_SW_C_drop_stale]++; /* only a broken child runs ahead */
            return false;
        }
        start_round(g, s, h);
        return true;
    }
    if (s->state != SLOT_EMPTY && d == 0)
        return true;
    if (s->prev_valid && h->seq == s->prev_seq) {
        sw->c[OP_SW_C_duplicates]++;
        sw->c[OP_SW_C_results_resent]++;
        send_prev_result(sw, g, s, child, out);
        return false;
    }
    sw->c[OP_SW_C_drop_stale]++;
    return false;
}

/* A marked contribution or result: the round's result tells the leaders. */
static void note_congestion(struct sw_slot *s, const struct op_inc_pkt *ip)
{
    s->congested |= sw_marked(ip);
}

static void contribution(struct op_sw *sw, struct sw_group *g, const struct op_inc_pkt *ip,
                         int child, uint64_t now, struct op_txq *out)
{
    const struct op_inc_hdr *h = &ip->hdr;
    struct sw_slot *s = &g->slots[h->slot];
    if (h->flags & OP_INC_F_RETX)
        sw->c[OP_SW_C_retransmissions]++;
    if (!enter_round(sw, g, s, h, child, out))
        return;
    if (h->op != s->op || h->dtype != s->dtype || h->count != s->count) {
        sw->c[OP_SW_C_drop_mismatch]++;
        return;
    }
    if (h->flags & OP_INC_F_RETX)
        s->retx_seen = true;
    note_congestion(s, ip);
    uint64_t bit = 1ull << (child % 64);
    if (s->bitmap[child / 64] & bit) {
        duplicate(sw, g, s, child, now, out);
        return;
    }
    s->bitmap[child / 64] |= bit;
    accumulate(g, s, child, ip->payload, ip->payload_len);
    s->n_contrib++;
    sw->c[OP_SW_C_contributions]++;
    if (s->n_contrib == g->n_children)
        complete(sw, g, s, now, out);
}

static void result_from_parent(struct op_sw *sw, struct sw_group *g, const struct op_inc_pkt *ip,
                               struct op_txq *out)
{
    const struct op_inc_hdr *h = &ip->hdr;
    struct sw_slot *s = &g->slots[h->slot];
    if (s->seq != h->seq || s->state == SLOT_EMPTY || s->state == SLOT_AGG) {
        sw->c[OP_SW_C_drop_stale]++;
        return;
    }
    if (s->state == SLOT_DONE) {
        sw->c[OP_SW_C_duplicates]++;
        return;
    }
    if (h->op != s->op || h->dtype != s->dtype || h->count != s->count) {
        sw->c[OP_SW_C_drop_mismatch]++;
        return;
    }
    memcpy(s->result, ip->payload, ip->payload_len);
    s->retx_seen |= (h->flags & OP_INC_F_RETX) != 0;
    note_congestion(s, ip);
    s->state = SLOT_DONE;
    multicast_result(sw, g, s, out);
}

static int child_of(const struct op_sw *sw, const struct sw_group *g, const struct op_pkt *pkt,
                    uint32_t rank)
{
    if (!sw->me->spine)
        return sw_group_child(g, pkt->flow.src.v4, pkt->flow.src_port, rank);
    if (rank >= g->n_children)
        return -1;
    const struct sw_member *m = &g->children[rank];
    return m->ip == pkt->flow.src.v4 && m->port == pkt->flow.src_port ? (int)rank : -1;
}

void sw_data_input(struct op_sw *sw, const struct op_pkt *pkt, const struct op_inc_pkt *ip,
                   uint64_t now, struct op_txq *out)
{
    const struct op_inc_hdr *h = &ip->hdr;
    struct sw_group *g = sw->by_id[h->group_id];
    if (g == NULL) {
        const struct sw_tomb *t = h->flags & OP_INC_F_RESULT
                                      ? NULL
                                      : sw_tomb_find(sw, h->group_id, h->token);
        if (t != NULL)
            sw_kill_again(sw, t, pkt, h, out);
        else
            sw->c[OP_SW_C_drop_unknown_group]++;
        return;
    }
    if (g->token != h->token) {
        sw->c[OP_SW_C_drop_bad_token]++;
        return;
    }
    if (ip->payload_len > g->max_data || h->slot != h->seq % g->window) {
        sw->c[OP_SW_C_drop_malformed]++;
        return;
    }
    if (h->flags & OP_INC_F_RESULT) {
        if (g->root || pkt->flow.src.v4 != g->parent_ip || pkt->flow.src_port != g->parent_port) {
            sw->c[OP_SW_C_drop_not_member]++;
            return;
        }
        g->last_ns = now;
        result_from_parent(sw, g, ip, out);
        return;
    }
    int child = child_of(sw, g, pkt, h->src_rank);
    if (child < 0) {
        sw->c[OP_SW_C_drop_not_member]++;
        return;
    }
    g->last_ns = now;
    contribution(sw, g, ip, child, now, out);
}
