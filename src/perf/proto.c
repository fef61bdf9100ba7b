/* The side channel's lines, parsed. They come from another process that
 * may be anything listening on the port, so each field is checked for its
 * range and the whole line must be consumed. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "perf_int.h"

#define PARAMS_FMT "%d %d %" PRIu64 " %d %" PRIu64 " %u %u %d %u %d %u %u %u %u %d"
#define PARAMS_SCAN "%d %d %" SCNu64 " %d %" SCNu64 " %u %u %d %u %d %u %u %u %u %d%n"
#define MAX_FIGURE 1e15 /* no rate, time or count of a real run is near this */

void perf_params_of(const struct op_perf_config *c, struct perf_params *p)
{
    /* CMP_AND_SWAP counts as a verb of its own: both sides run the same -A */
    int verb = (int)c->verb + (c->verb == OP_PERF_ATOMIC && c->cmp_swap);
    *p = (struct perf_params){.verb = verb, .test = (int)c->test, .size = c->size,
                              .all = c->all, .iters = c->iters, .duration_s = c->duration_s,
                              .qps = c->qps, .type = (int)c->type,
                              .mtu = c->mtu ? c->mtu : 4096, .bidir = c->bidirectional,
                              .gpu_threads = c->gpu.threads, .gpu_mode = (unsigned)c->gpu.mode,
                              .gpu_fault = (unsigned)c->gpu.fault, .gpu_slots = c->gpu.slots,
                              .rdma_cm = c->rdma_cm};
}

int perf_format_params(const struct perf_params *p, char *buf, size_t cap)
{
    return snprintf(buf, cap, PARAMS_FMT, p->verb, p->test, p->size, p->all, p->iters,
                    p->duration_s, p->qps, p->type, p->mtu, p->bidir, p->gpu_threads,
                    p->gpu_mode, p->gpu_fault, p->gpu_slots, p->rdma_cm);
}

op_status_t perf_parse_params(const char *text, struct perf_params *p)
{
    int used = -1;
    if (sscanf(text, PARAMS_SCAN, &p->verb, &p->test, &p->size, &p->all, &p->iters,
               &p->duration_s, &p->qps, &p->type, &p->mtu, &p->bidir, &p->gpu_threads,
               &p->gpu_mode, &p->gpu_fault, &p->gpu_slots, &p->rdma_cm, &used) != 15 ||
        text[used] != '\0')
        return OP_ERR_MALFORMED;
    return OP_OK;
}

/* The first flag the two sides disagree on (its name), or NULL. */
const char *perf_params_mismatch(const struct perf_params *a, const struct perf_params *b)
{
    bool timed = a->duration_s != 0;
    bool atomics = a->verb >= OP_PERF_ATOMIC && b->verb >= OP_PERF_ATOMIC;
    return atomics && a->verb != b->verb            ? "-A (--atomic_type)"
           : a->verb != b->verb || a->test != b->test ? "the test (tool name)"
           : a->all != b->all                       ? "-a (--all)"
           : a->size != b->size && !a->all          ? "-s (--size)"
           : a->duration_s != b->duration_s         ? "-D (--duration)"
           : a->iters != b->iters && !timed         ? "-n (--iters)"
           : a->qps != b->qps                       ? "-q (--qp)"
           : a->type != b->type                     ? "-c (connection type)"
           : a->mtu != b->mtu                       ? "-m (--mtu)"
           : a->bidir != b->bidir                   ? "-b (--bidirectional)"
           : a->gpu_threads != b->gpu_threads       ? "--threads"
           : a->gpu_mode != b->gpu_mode             ? "--mode"
           : a->gpu_fault != b->gpu_fault           ? "--inject_fault"
           : a->gpu_slots != b->gpu_slots           ? "--slots"
           : a->rdma_cm != b->rdma_cm               ? "-R (--rdma_cm)"
                                                    : NULL;
}

op_status_t perf_parse_qp(const char *text, uint32_t *idx, struct perf_peer *p)
{
    unsigned port = 0;
    int used = -1;
    if (sscanf(text, "%u %x %x %x %" SCNx64 " %x %u%n", idx, &p->qpn, &p->psn, &p->rkey,
               &p->vaddr, &p->ip, &port, &used) != 7 ||
        text[used] != '\0' || p->qpn > 0xffffffu || p->psn > 0xffffffu || port == 0 ||
        port > 65535)
        return OP_ERR_MALFORMED;
    p->port = (uint16_t)port;
    return OP_OK;
}

static bool figure_ok(double v) { return isfinite(v) && v >= 0 && v < MAX_FIGURE; }

op_status_t perf_parse_bw_done(const char *text, void *bw_result)
{
    struct op_perf_bw_result *r = bw_result;
    int used = -1;
    if (sscanf(text, "%" SCNu64 " %" SCNu64 " %lg %lg %lg%n", &r->size, &r->iters, &r->bw_peak,
               &r->bw_avg, &r->msg_rate, &used) != 5 ||
        text[used] != '\0' || !figure_ok(r->bw_peak) || !figure_ok(r->bw_avg) ||
        !figure_ok(r->msg_rate))
        return OP_ERR_MALFORMED;
    return OP_OK;
}

int perf_format_bw_done(const struct op_perf_bw_result *r, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%" PRIu64 " %" PRIu64 " %.17g %.17g %.17g", r->size, r->iters,
                    r->bw_peak, r->bw_avg, r->msg_rate);
}

op_status_t perf_parse_lat_done(const char *text, void *lat_result)
{
    struct op_perf_lat_result *r = lat_result;
    int used = -1;
    if (sscanf(text, "%" SCNu64 " %" SCNu64 " %lg %lg %lg %lg %lg %lg %lg%n", &r->size,
               &r->iters, &r->t_min, &r->t_max, &r->t_typical, &r->t_avg, &r->t_stdev, &r->p99,
               &r->p999, &used) != 9 ||
        text[used] != '\0')
        return OP_ERR_MALFORMED;
    const double v[] = {r->t_min, r->t_max, r->t_typical, r->t_avg, r->t_stdev, r->p99, r->p999};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!figure_ok(v[i]))
            return OP_ERR_MALFORMED;
    return OP_OK;
}

int perf_format_lat_done(const struct op_perf_lat_result *r, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%" PRIu64 " %" PRIu64 " %.17g %.17g %.17g %.17g %.17g %.17g %.17g",
                    r->size, r->iters, r->t_min, r->t_max, r->t_typical, r->t_avg, r->t_stdev,
                    r->p99, r->p999);
}
