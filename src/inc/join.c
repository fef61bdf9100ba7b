/* Leader engine: joining and leaving a group (the control plane's host side). */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

static bool key_matches(const struct op_inc_eng *e, const struct op_inc_ctrl *c)
{
    return c->job_id == e->cfg.job_id && c->true_comm_id == e->cfg.comm_id &&
           c->c_id == e->cfg.c_id;
}

static void base_ctrl(const struct op_inc_eng *e, unsigned type, struct op_inc_ctrl *c)
{
    const struct op_inc_config *cfg = &e->cfg;
    *c = (struct op_inc_ctrl){
        .sup_mpi_type = 1,
        .master_num = cfg->master_num,
        .query_notify_hop = (uint8_t)type,
        .sup_comm_type = 1,
        .sup_allreduce_op = 0xffff,
        .sup_data_type = 0xffff,
        .sup_max_data_size = cfg->want_data ? cfg->want_data : 0xffff,
        .global_group_size = cfg->n_leaders,
        .true_comm_id = cfg->comm_id,
        .dst_rank = cfg->master_rank,
        .job_id = cfg->job_id,
        .c_id = cfg->c_id,
        .world_rank = cfg->world_rank,
        .dst_ip = cfg->master_ip,
        .src_ip = cfg->ip,
        .window = cfg->want_window ? cfg->want_window : 0xffff,
        .max_children = 0xffff,
        .lease_ms = 0,
    };
}

static void send_query(struct op_inc_eng *e, struct op_txq *out)
{
    struct op_inc_ctrl c;
    base_ctrl(e, OP_INC_CTRL_QUERY, &c);
    eng_send_ctrl(e, out, 0, 0, &c);
    e->c[OP_INC_C_queries_sent]++;
}

static void send_notify(struct op_inc_eng *e, struct op_txq *out)
{
    eng_send_ctrl(e, out, 0, 0, &e->notify);
    e->c[OP_INC_C_notifies_sent]++;
}

static void send_kill(struct op_inc_eng *e, struct op_txq *out)
{
    struct op_inc_ctrl c;
    base_ctrl(e, OP_INC_CTRL_KILL, &c);
    eng_send_ctrl(e, out, e->caps.group_id, e->token, &c);
}

static void clear_spines(struct op_inc_eng *e)
{
    for (int i = 0; i < e->n_spines; i++)
        free(e->spines[i].ranks);
    e->n_spines = 0;
}

op_status_t op_inc_eng_join(struct op_inc_eng *e, uint64_t now, struct op_txq *out)
{
    if (e->state != ST_IDLE)
        return OP_ERR_STATE;
    clear_spines(e);
    /* A new group: the old one's kill must not touch it, its slots start
     * empty (seq 0 first) and its window may differ from the old ring's. */
    e->caps = (struct op_inc_caps){0};
    e->token = 0;
    e->next_seq = 0;
    free(e->ring);
    e->ring = NULL;
    base_ctrl(e, OP_INC_CTRL_QUERY, &e->caps_seen);
    e->choose_at_ns = UINT64_MAX;
    e->reason = 0;
    eng_begin(e, ST_JOIN, now);
    send_query(e, out);
    return OP_OK;
}

/* Leaving is collective: a one-element allreduce first, so the master kills
 * the group only after every leader has all its results; then the master
 * frees the group on every switch and the others are done. */
op_status_t op_inc_eng_leave(struct op_inc_eng *e, uint64_t now, struct op_txq *out)
{
    if (e->state != ST_READY && e->state != ST_BROKEN)
        return OP_ERR_STATE;
    bool master = e->cfg.rank == e->cfg.master_rank;
    if (e->state == ST_READY && e->caps.group_id != 0) {
        e->barrier[0] = 1;
        op_status_t st = op_inc_eng_allreduce(e, &e->barrier[0], &e->barrier[1], 1, OP_RED_INT32,
                                              OP_RED_SUM, now, out);
        e->leaving = st == OP_OK;
        if (st == OP_OK)
            return OP_OK;
    }
    if (!master || e->caps.group_id == 0) {
        eng_finish(e, ST_IDLE, OP_OK);
        return OP_OK;
    }
    eng_begin(e, ST_LEAVE, now);
    send_kill(e, out);
    return OP_OK;
}

void eng_reduce_done(struct op_inc_eng *e, uint64_t now, struct op_txq *out)
{
    if (!e->leaving) {
        eng_finish(e, ST_READY, OP_OK);
        return;
    }
    e->leaving = false;
    if (e->cfg.rank != e->cfg.master_rank) {
        eng_finish(e, ST_IDLE, OP_OK);
        return;
    }
    eng_begin(e, ST_LEAVE, now);
    send_kill(e, out);
}

static void and_caps(struct op_inc_ctrl *acc, const struct op_inc_ctrl *c)
{
    acc->sup_allreduce_op &= c->sup_allreduce_op;
    acc->sup_data_type &= c->sup_data_type;
    if (c->sup_max_data_size < acc->sup_max_data_size)
        acc->sup_max_data_size = c->sup_max_data_size;
    if (c->window < acc->window)
        acc->window = c->window;
    if (c->max_children < acc->max_children)
        acc->max_children = c->max_children;
    if (acc->lease_ms == 0 || (c->lease_ms && c->lease_ms < acc->lease_ms))
        acc->lease_ms = c->lease_ms;
}

static struct spine_seen *spine_entry(struct op_inc_eng *e, uint32_t ip)
{
    for (int i = 0; i < e->n_spines; i++)
        if (e->spines[i].ip == ip)
            return &e->spines[i];
    if (e->n_spines == ENG_MAX_SPINES)
        return NULL;
    struct spine_seen *s = &e->spines[e->n_spines];
    s->ranks = calloc((e->cfg.n_leaders + 63) / 64, 8);
    if (s->ranks == NULL)
        return NULL;
    s->ip = ip;
    s->n = 0;
    e->n_spines++;
    return s;
}

/* The SPINE with the most free groups among those every query crossed. */
static const struct spine_seen *best_spine(const struct op_inc_eng *e, bool *all_complete)
{
    const struct spine_seen *best = NULL;
    *all_complete = true;
    for (int i = 0; i < e->n_spines; i++) {
        const struct spine_seen *s = &e->spines[i];
        if (s->n != e->cfg.n_leaders) {
            *all_complete = false;
            continue;
        }
        if (best == NULL || s->ava > best->ava)
            best = s;
    }
    return best;
}

static void choose_and_notify(struct op_inc_eng *e, uint64_t now, struct op_txq *out)
{
    bool all;
    const struct spine_seen *s = best_spine(e, &all);
    if (s == NULL)
        return;
    if (!all && now < e->choose_at_ns) {
        /* another SPINE may still complete with more free groups: give it a moment */
        if (e->choose_at_ns == UINT64_MAX)
            e->choose_at_ns = now + e->cfg.rto_ns / 2;
        return;
    }
    e->notify = e->caps_seen;
    e->notify.query_notify_hop = OP_INC_CTRL_NOTIFY;
    e->notify.spine_ip = s->ip;
    e->notify.ava_grp_num = s->ava;
    e->notify.dst_ip = e->cfg.ip;
    e->notify.dst_rank = e->cfg.rank;
    e->notify.src_ip = e->cfg.ip;
    e->state = ST_JOIN_NOTIFY;
    e->choose_at_ns = UINT64_MAX;
    send_notify(e, out);
}

static void master_query(struct op_inc_eng *e, const struct op_inc_hdr *h,
                         const struct op_inc_ctrl *c, uint64_t now, struct op_txq *out)
{
    if (e->cfg.rank != e->cfg.master_rank || e->state != ST_JOIN || h->src_rank >= e->cfg.n_leaders) {
        e->c[OP_INC_C_dropped]++;
        return;
    }
    struct spine_seen *s = spine_entry(e, c->spine_ip);
    if (s == NULL)
        return;
    uint64_t bit = 1ull << (h->src_rank % 64);
    if (!(s->ranks[h->src_rank / 64] & bit)) {
        s->ranks[h->src_rank / 64] |= bit;
        s->n++;
    }
    s->ava = c->ava_grp_num;
    and_caps(&e->caps_seen, c);
    choose_and_notify(e, now, out);
}

static void joined(struct op_inc_eng *e, const struct op_inc_hdr *h, const struct op_inc_ctrl *c)
{
    e->caps = (struct op_inc_caps){.group_id = h->group_id,
                                   .token = h->token,
                                   .ops = c->sup_allreduce_op,
                                   .types = c->sup_data_type,
                                   .window = c->window,
                                   .max_data = c->sup_max_data_size,
                                   .max_children = c->max_children,
                                   .lease_ms = c->lease_ms,
                                   .spine_ip = c->spine_ip};
    e->token = h->token;
    eng_window_reset(e);
    eng_finish(e, ST_READY, OP_OK);
    if (e->caps.window == 0 || e->caps.max_data < 8)
        eng_finish(e, ST_BROKEN, OP_ERR_UNSUPPORTED);
}

void eng_ctrl_input(struct op_inc_eng *e, const struct op_inc_hdr *h, const struct op_inc_ctrl *c,
                    uint64_t now, struct op_txq *out)
{
    unsigned type = c->query_notify_hop & 0x0f;
    bool joining = e->state == ST_JOIN || e->state == ST_JOIN_NOTIFY;
    bool ours = key_matches(e, c);
    if (type == OP_INC_CTRL_QUERY && ours) {
        master_query(e, h, c, now, out);
    } else if (type == OP_INC_CTRL_NOTIFY && ours && joining && c->dst_rank == e->cfg.rank &&
               h->group_id != 0) {
        joined(e, h, c);
    } else if (type == OP_INC_CTRL_REFUSE && ours && joining) {
        e->reason = c->fail_cause;
        eng_finish(e, ST_IDLE, OP_ERR_REFUSED);
    } else if (type == OP_INC_CTRL_KILL && h->group_id == e->caps.group_id &&
               h->token == e->token && e->caps.group_id != 0) {
        e->caps.group_id = 0;
        if (e->state == ST_LEAVE || (e->state == ST_REDUCE && e->leaving))
            eng_finish(e, ST_IDLE, OP_OK);
        else if (e->state == ST_REDUCE)
            eng_finish(e, ST_BROKEN, OP_ERR_STATE);
        else if (e->state != ST_IDLE) /* idle: we left, and the master freed the group */
            e->state = ST_BROKEN;
    } else {
        e->c[OP_INC_C_dropped]++;
    }
}

/* Retransmit whatever the current control step waits for. */
void eng_ctrl_timer(struct op_inc_eng *e, uint64_t now, struct op_txq *out)
{
    if (e->state == ST_JOIN && now >= e->choose_at_ns)
        choose_and_notify(e, now, out);
    if (now < e->retx_at_ns)
        return;
    if (e->state == ST_JOIN)
        send_query(e, out);
    else if (e->state == ST_JOIN_NOTIFY)
        send_notify(e, out);
    else if (e->state == ST_LEAVE)
        send_kill(e, out);
    else
        return;
    e->c[OP_INC_C_timeouts]++;
    eng_backoff(e, now);
}

void eng_join_free(struct op_inc_eng *e) { clear_spines(e); }
