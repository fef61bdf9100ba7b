/* Leader engine: lifecycle, packet intake, deadlines and retransmission timing. */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

static const char *const counter_names[] = {OP_INC_COUNTERS(OP_COUNTER_NAME)};

const char *op_inc_counter_name(unsigned c)
{
    return op_counter_name(counter_names, OP_INC_C_COUNT_, c);
}

void op_inc_config_default(struct op_inc_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->port = OP_ROCE_UDP_PORT;
    cfg->tor_port = OP_ROCE_UDP_PORT;
    cfg->n_leaders = 1;
    cfg->master_num = 1;
    cfg->rto_ns = 5 * OP_NS_PER_MS;
    cfg->rto_min_ns = 1000 * OP_NS_PER_US;
    cfg->rto_max_ns = 200 * OP_NS_PER_MS;
    cfg->deadline_ns = 10 * OP_NS_PER_S;
    cfg->udp_batching = true;
    cfg->ecn_react = true;
    cfg->spin_ns = OP_INC_SPIN_NS_DEFAULT;
}

op_status_t op_inc_eng_create(const struct op_inc_config *cfg, struct op_inc_eng **out)
{
    if (cfg->n_leaders == 0 || cfg->rank >= cfg->n_leaders || cfg->master_rank >= cfg->n_leaders ||
        cfg->rto_ns == 0 || cfg->rto_max_ns < cfg->rto_ns || cfg->rto_min_ns > cfg->rto_max_ns || cfg->deadline_ns == 0 ||
        (cfg->master_num != 1 && cfg->master_num != 2))
        return OP_ERR_INVAL;
    struct op_inc_eng *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return OP_ERR_NOMEM;
    e->cfg = *cfg;
    e->state = ST_IDLE;
    e->result = OP_OK;
    e->retx_at_ns = UINT64_MAX;
    e->deadline_ns = UINT64_MAX;
    e->choose_at_ns = UINT64_MAX;
    *out = e;
    return OP_OK;
}

void op_inc_eng_destroy(struct op_inc_eng *e)
{
    if (e == NULL)
        return;
    eng_join_free(e);
    free(e->ring);
    free(e);
}

void eng_begin(struct op_inc_eng *e, enum eng_state st, uint64_t now)
{
    e->state = st;
    e->interrupted = false;
    e->last_tick_ns = now;
    e->result = OP_INPROGRESS;
    e->deadline_ns = now + e->cfg.deadline_ns;
    e->rto_ns = eng_base_rto(e);
    e->retx_at_ns = now + e->rto_ns;
}

void eng_finish(struct op_inc_eng *e, enum eng_state st, op_status_t result)
{
    e->state = st;
    e->result = result;
    e->leaving = false;
    e->deadline_ns = UINT64_MAX;
    e->retx_at_ns = UINT64_MAX;
    e->choose_at_ns = UINT64_MAX;
}

/* A chunk's round trip includes waiting for the slowest member, and a member
 * that is itself waiting for a retransmission stalls everyone's rounds for a
 * timeout: delays only ever add. So the timeout follows the smallest of the
 * latest round trips (what the path takes now, queueing included), times
 * three, within [rto_min, rto_max]; the configured rto until one is measured.
 * Samples come only from chunks sent once whose round nobody retransmitted in
 * (Karn's rule, the switch flags such results). */
uint64_t eng_min_rtt(const struct op_inc_eng *e)
{
    if (e->n_rtt == 0)
        return 0;
    uint64_t low = UINT64_MAX;
    unsigned n = e->n_rtt < ENG_RTT_SAMPLES ? e->n_rtt : ENG_RTT_SAMPLES;
    for (unsigned i = 0; i < n; i++)
        low = e->rtt_ns[i] < low ? e->rtt_ns[i] : low;
    return low;
}

uint64_t eng_base_rto(const struct op_inc_eng *e)
{
    if (e->n_rtt == 0)
        return e->cfg.rto_ns;
    uint64_t rto = 3 * eng_min_rtt(e);
    if (rto < e->cfg.rto_min_ns)
        rto = e->cfg.rto_min_ns;
    return rto > e->cfg.rto_max_ns ? e->cfg.rto_max_ns : rto;
}

void eng_rtt_sample(struct op_inc_eng *e, uint64_t rtt)
{
    e->rtt_ns[e->n_rtt++ % ENG_RTT_SAMPLES] = rtt;
}

/* Exponential backoff (as SwitchML's hosts): each expiry doubles the timeout. */
void eng_backoff(struct op_inc_eng *e, uint64_t now)
{
    e->rto_ns *= 2;
    if (e->rto_ns > e->cfg.rto_max_ns)
        e->rto_ns = e->cfg.rto_max_ns;
    e->retx_at_ns = now + e->rto_ns;
}

void eng_send_ctrl(struct op_inc_eng *e, struct op_txq *out, uint16_t group_id, uint64_t token,
                   const struct op_inc_ctrl *c)
{
    uint8_t payload[OP_INC_CTRL_LEN];
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_CTRL,
                           .group_id = group_id, .src_rank = e->cfg.rank, .token = token};
    op_inc_ctrl_encode(c, payload);
    eng_send(e, out, &h, payload, sizeof(payload));
}

void eng_send(struct op_inc_eng *e, struct op_txq *out, const struct op_inc_hdr *h,
              const void *payload, size_t len)
{
    struct op_pkt *p = op_txq_next(out);
    p->flow = (struct op_flow){.src.v4 = e->cfg.ip, .src_port = e->cfg.port,
                               .dst.v4 = e->cfg.tor_ip, .dst_port = e->cfg.tor_port};
    size_t n = op_inc_encode(h, 0, payload, len, p->data, OP_IO_BUF_SIZE);
    n = n ? op_icrc_seal(&p->flow, p->data, n, OP_IO_BUF_SIZE) : 0;
    if (n == 0)
        return;
    p->len = (uint32_t)n;
    op_txq_commit(out);
}

void op_inc_eng_input(struct op_inc_eng *e, const struct op_pkt *pkt, uint64_t now,
                      struct op_txq *out)
{
    struct op_inc_pkt ip;
    /* Only our TOR speaks to us; anything else is dropped before parsing. */
    if (pkt->flow.src.v4 != e->cfg.tor_ip || pkt->flow.src_port != e->cfg.tor_port ||
        op_inc_decode(pkt->data, pkt->len, &ip) != OP_OK ||
        !op_icrc_check(&pkt->flow, pkt->data, pkt->len)) {
        e->c[OP_INC_C_dropped]++;
        return;
    }
    if (ip.hdr.kind == OP_INC_KIND_DATA)
        eng_data_input(e, &ip, now, out);
    else
        eng_ctrl_input(e, &ip.hdr, &ip.ctrl, now, out);
}

/* The driver calls the timer at least every rto_max while an operation runs;
 * a longer gap means this process was not running (stopped, descheduled on
 * an oversubscribed machine), which says nothing about the switch: the
 * deadline moves by the gap and what is outstanding goes again at once. */
static void absorb_stall(struct op_inc_eng *e, uint64_t now)
{
    uint64_t gap = now - e->last_tick_ns;
    e->last_tick_ns = now;
    if (gap < OP_INC_STALL_NS || e->deadline_ns == UINT64_MAX)
        return;
    e->deadline_ns += gap;
    e->retx_at_ns = now;
    e->c[OP_INC_C_stalls]++;
}

void op_inc_eng_timer(struct op_inc_eng *e, uint64_t now, struct op_txq *out)
{
    if (e->result != OP_INPROGRESS)
        return;
    absorb_stall(e, now);
    if (now >= e->deadline_ns) {
        /* A group whose operation timed out has switch slots in an unknown
         * state: it is not used again. */
        bool in_group = e->state == ST_REDUCE || e->state == ST_LEAVE;
        bool reducing = e->state == ST_REDUCE && !e->leaving;
        eng_finish(e, in_group ? ST_BROKEN : ST_IDLE, OP_ERR_TIMEOUT);
        e->interrupted = reducing;
        return;
    }
    if (e->state == ST_REDUCE)
        eng_data_timer(e, now, out);
    else
        eng_ctrl_timer(e, now, out);
}

uint64_t op_inc_eng_next_timer(const struct op_inc_eng *e)
{
    uint64_t t = e->deadline_ns;
    if (e->retx_at_ns < t)
        t = e->retx_at_ns;
    if (e->choose_at_ns < t)
        t = e->choose_at_ns;
    return t;
}

bool op_inc_eng_cancel(struct op_inc_eng *e)
{
    if (e->result != OP_INPROGRESS || e->state != ST_REDUCE || e->leaving)
        return false;
    eng_finish(e, ST_BROKEN, OP_ERR_TIMEOUT);
    e->interrupted = true;
    return true;
}

op_status_t op_inc_eng_resume(struct op_inc_eng *e, uint64_t now, struct op_txq *out)
{
    if (!e->interrupted)
        return OP_ERR_STATE;
    eng_begin(e, ST_REDUCE, now);
    e->retx_at_ns = now; /* the oldest outstanding chunk goes again now */
    eng_data_timer(e, now, out);
    return OP_OK;
}

void op_inc_eng_settled(struct op_inc_eng *e)
{
    if (!e->interrupted)
        return;
    e->interrupted = false;
    eng_finish(e, ST_READY, OP_OK);
}

op_status_t op_inc_eng_status(const struct op_inc_eng *e) { return e->result; }
uint8_t op_inc_eng_reason(const struct op_inc_eng *e) { return e->reason; }
const struct op_inc_caps *op_inc_eng_caps(const struct op_inc_eng *e) { return &e->caps; }
const uint64_t *op_inc_eng_counters(const struct op_inc_eng *e) { return e->c; }
