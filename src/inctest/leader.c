/* inc_test leaders: each a process that joins, runs the allreduces, checks
 * every element against the reference and reports into shared memory. */
#include <stdlib.h>
#include <string.h>

#include "inctest_internal.h"
#include "offpath/inc.h"
#include "offpath/reduce.h"

/* Inputs depend on (rank, iteration % DATA_VARIANTS) so the reference, which
 * needs every rank's input, is computed once per variant. */
#define DATA_VARIANTS 4

static bool logical(unsigned op) { return op == OP_RED_LAND || op == OP_RED_LOR || op == OP_RED_LXOR; }

void it_fill(const struct op_inctest_config *cfg, int rank, uint64_t variant, uint8_t *buf)
{
    struct op_rng r;
    op_rng_seed(&r, cfg->seed * 1000003 + (uint64_t)rank * 7919 + variant);
    size_t es = op_red_type_size(cfg->type);
    for (uint64_t i = 0; i < cfg->count; i++) {
        uint64_t x = op_rng_next(&r);
        bool zero = logical(cfg->op) && x % 4 == 0;
        if (cfg->type == OP_RED_FLOAT32) {
            float f = zero ? 0.0f : (float)((double)(int64_t)x / 9.2e15);
            memcpy(buf + i * es, &f, 4);
        } else if (cfg->type == OP_RED_FLOAT64) {
            double d = zero ? 0.0 : (double)(int64_t)x / 9.2e13;
            memcpy(buf + i * es, &d, 8);
        } else {
            if (zero)
                x = 0;
            memcpy(buf + i * es, &x, es);
        }
    }
}

/* The switches' order: each TOR folds its leaders by rank, the SPINE folds
 * the TORs in order. */
static void reference(const struct op_inctest_config *cfg, uint64_t variant, uint8_t *out,
                      uint8_t *in, uint8_t *part)
{
    size_t bytes = cfg->count * op_red_type_size(cfg->type);
    for (int t = 0; t < cfg->tors; t++) {
        int lo = it_first_leader(cfg, t), hi = it_first_leader(cfg, t + 1);
        for (int l = lo; l < hi; l++) {
            it_fill(cfg, l, variant, l == lo ? part : in);
            if (l > lo)
                op_reduce(cfg->op, cfg->type, part, in, cfg->count);
        }
        if (t == 0)
            memcpy(out, part, bytes);
        else
            op_reduce(cfg->op, cfg->type, out, part, cfg->count);
    }
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t mismatches(const uint8_t *a, const uint8_t *b, uint64_t count, size_t es,
                           uint64_t *first)
{
    uint64_t bad = 0;
    for (uint64_t i = 0; i < count; i++)
        if (memcmp(a + i * es, b + i * es, es) != 0 && bad++ == 0)
            *first = i;
    return bad;
}

uint64_t it_check(const struct op_inctest_config *cfg, const uint8_t *recv, const uint8_t *ref,
                  uint64_t *hash, uint64_t *first)
{
    size_t es = op_red_type_size(cfg->type);
    *hash = fnv(*hash, recv, cfg->count * es);
    return mismatches(recv, ref, cfg->count, es, first);
}

struct leader_bufs {
    uint8_t *send, *recv, *in, *part;
    uint8_t *ref[DATA_VARIANTS];
};

static bool alloc_bufs(struct leader_bufs *b, size_t bytes)
{
    b->send = malloc(bytes);
    b->recv = malloc(bytes);
    b->in = malloc(bytes);
    b->part = malloc(bytes);
    return b->send && b->recv && b->in && b->part;
}

static void free_bufs(struct leader_bufs *b)
{
    free(b->send);
    free(b->recv);
    free(b->in);
    free(b->part);
    for (int v = 0; v < DATA_VARIANTS; v++)
        free(b->ref[v]);
}

static const uint8_t *ref_for(const struct op_inctest_config *cfg, struct leader_bufs *b,
                              uint64_t variant, size_t bytes)
{
    if (b->ref[variant] == NULL) {
        b->ref[variant] = malloc(bytes);
        if (b->ref[variant] == NULL)
            return NULL;
        reference(cfg, variant, b->ref[variant], b->in, b->part);
    }
    return b->ref[variant];
}

static void run_iterations(const struct op_inctest_config *cfg, int rank,
                           struct op_inc_client *c, struct it_leader *res, struct leader_bufs *b)
{
    size_t es = op_red_type_size(cfg->type), bytes = cfg->count * es;
    uint64_t total = cfg->warmup + cfg->iters, t_start = 0;
    res->hash = 0xcbf29ce484222325ull;
    for (uint64_t it = 0; it < total; it++) {
        uint64_t variant = it % DATA_VARIANTS;
        it_fill(cfg, rank, variant, b->send);
        if (it == cfg->warmup)
            t_start = op_now_ns();
        uint64_t t0 = op_now_ns();
        op_status_t st = op_inc_allreduce(c, b->send, b->recv, cfg->count, cfg->type, cfg->op);
        uint64_t t1 = op_now_ns();
        if (st != OP_OK) {
            res->status = st;
            res->failed_iter = it;
            return;
        }
        if (it >= cfg->warmup && it - cfg->warmup < IT_MAX_SAMPLES)
            res->lat_us[it - cfg->warmup] = (double)(t1 - t0) / 1e3;
        const uint8_t *ref = ref_for(cfg, b, variant, bytes);
        if (ref == NULL) {
            res->status = OP_ERR_NOMEM;
            return;
        }
        uint64_t first = 0, bad = it_check(cfg, b->recv, ref, &res->hash, &first);
        if (bad && res->mismatches == 0) {
            res->first_bad_iter = it;
            res->first_bad_elem = first;
        }
        res->mismatches += bad;
        res->done_iters = it + 1;
    }
    res->elapsed_ns = op_now_ns() - t_start;
}

void it_leader_main(const struct op_inctest_config *cfg, const struct it_layout *lay, int rank,
                    struct it_leader *res)
{
    struct op_inc_config ic;
    op_inc_config_default(&ic);
    ic.ip = lay->leader_ip[rank];
    ic.port = lay->port;
    ic.tor_ip = lay->tor_ip[it_tor_of(cfg, rank)];
    ic.tor_port = lay->port;
    ic.udp_batching = cfg->udp_batching;
    ic.rank = (uint32_t)rank;
    ic.n_leaders = (uint16_t)cfg->leaders;
    ic.master_rank = 0;
    ic.master_ip = lay->leader_ip[0];
    ic.job_id = lay->job_id;
    ic.comm_id = lay->comm_id;
    ic.world_rank = (uint32_t)rank;
    ic.want_window = cfg->window;
    ic.want_data = cfg->max_data;
    ic.rto_ns = cfg->rto_us * OP_NS_PER_US;
    ic.deadline_ns = cfg->deadline_ms * OP_NS_PER_MS;
    if (ic.rto_max_ns < ic.rto_ns)
        ic.rto_max_ns = ic.rto_ns;
    if (ic.rto_min_ns > ic.rto_ns)
        ic.rto_min_ns = ic.rto_ns;
    struct op_inc_client *c = NULL;
    res->status = op_inc_join(&ic, &c, &res->reason);
    res->joined = res->status == OP_OK;
    if (res->status != OP_OK)
        return;
    struct leader_bufs b = {0};
    size_t bytes = cfg->count * op_red_type_size(cfg->type);
    if (!alloc_bufs(&b, bytes ? bytes : 1))
        res->status = OP_ERR_NOMEM;
    else
        run_iterations(cfg, rank, c, res, &b);
    free_bufs(&b);
    const uint64_t *cnt = op_inc_eng_counters(op_inc_client_engine(c));
    res->retransmissions = cnt[OP_INC_C_retransmissions];
    res->timeouts = cnt[OP_INC_C_timeouts];
    res->dup_results = cnt[OP_INC_C_duplicate_results];
    res->congested_results = cnt[OP_INC_C_congested_results];
    res->window_cuts = cnt[OP_INC_C_window_cuts];
    if (res->status == OP_OK)
        res->status = op_inc_leave(c);
    op_inc_client_free(c);
}
