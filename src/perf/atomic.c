/* ib_atomic_bw / ib_atomic_lat: what each atomic does and how a run checks
 * that every one was executed once, in order. A QP's counter is the first 8
 * bytes of its target half. The k-th atomic of a run adds 1
 * (FETCH_AND_ADD) or swaps k for k + 1 (CMP_AND_SWAP), so done exactly once
 * and in order it returns k, into slot k % OP_PERF_ATOMIC_SLOTS of the
 * source half, and the counter ends at the number of atomics. A duplicate
 * executed twice would shift every later result and the counter. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "perf_int.h"

static uint64_t *slot(const struct perf_qp *q, uint64_t k)
{
    return (uint64_t *)(void *)(q->buf + (k % OP_PERF_ATOMIC_SLOTS) * OP_PERF_ATOMIC_SIZE);
}

static uint64_t counter(const struct perf_ep *ep, const struct perf_qp *q)
{
    uint64_t v;
    memcpy(&v, q->buf + ep->bufsize, sizeof v);
    return v;
}

void perf_atomic_wr(const struct perf_ep *ep, const struct perf_qp *q, uint64_t k,
                    struct op_rdma_sge *sge, struct op_rdma_send_wr *wr)
{
    bool cas = ep->cfg->cmp_swap;
    *sge = (struct op_rdma_sge){(uintptr_t)slot(q, k), OP_PERF_ATOMIC_SIZE,
                                op_rdma_mr_lkey(q->mr)};
    wr->sg_list = sge;
    wr->num_sge = 1;
    wr->opcode = cas ? OP_RDMA_WR_ATOMIC_CMP_AND_SWP : OP_RDMA_WR_ATOMIC_FETCH_AND_ADD;
    wr->atomic.remote_addr = q->peer.vaddr + ep->bufsize;
    wr->atomic.rkey = q->peer.rkey;
    wr->atomic.compare_add = cas ? k : 1;
    wr->atomic.swap = cas ? k + 1 : 0;
}

void perf_atomic_reset(struct perf_run *r)
{
    struct perf_ep *ep = &r->ep;
    for (uint32_t i = 0; i < ep->nqp; i++) {
        memset(ep->qps[i].buf, 0xff, ep->bufsize); /* no result is all ones */
        memset(ep->qps[i].buf + ep->bufsize, 0, OP_PERF_ATOMIC_SIZE);
    }
    memset(&r->atomic, 0, sizeof r->atomic);
}

void perf_atomic_check(struct perf_run *r, const struct perf_qp *q, uint64_t from, uint64_t to)
{
    for (uint64_t k = from; k < to; k++) {
        uint64_t got;
        memcpy(&got, slot(q, k), sizeof got);
        r->atomic.checked++;
        if (got != k && r->atomic.bad++ == 0) {
            r->atomic.bad_qp = (uint32_t)(q - r->ep.qps);
            r->atomic.bad_k = k;
            r->atomic.bad_val = got;
        }
    }
}

/* sent: this side's results; served: its counters, which must hold
 * expect (0: not known here, with -D). */
void perf_atomic_verdict(struct perf_run *r, bool sent, bool served, uint64_t expect)
{
    const struct perf_ep *ep = &r->ep;
    int n = 0;
    r->check[0] = '\0';
    if (sent && r->atomic.bad) {
        snprintf(r->check, sizeof r->check,
                 "failed: QP %u atomic %" PRIu64 " returned %" PRIu64 " (%" PRIu64
                 " of %" PRIu64 " results out of order)",
                 r->atomic.bad_qp, r->atomic.bad_k, r->atomic.bad_val, r->atomic.bad,
                 r->atomic.checked);
        r->check_failed = true;
        return;
    }
    for (uint32_t i = 0; served && expect != 0 && i < ep->nqp; i++)
        if (counter(ep, &ep->qps[i]) != expect) {
            snprintf(r->check, sizeof r->check,
                     "failed: QP %u counter %" PRIu64 " after %" PRIu64 " atomics", i,
                     counter(ep, &ep->qps[i]), expect);
            r->check_failed = true;
            return;
        }
    n = snprintf(r->check, sizeof r->check, "ok");
    if (sent)
        n += snprintf(r->check + n, sizeof r->check - (size_t)n,
                      " (%" PRIu64 " atomics returned the value before them)", r->atomic.checked);
    if (served && expect != 0)
        snprintf(r->check + n, sizeof r->check - (size_t)n,
                 " (each counter at %" PRIu64 ", changed once per atomic)", expect);
}
