/* Queue pairs: creation, the RESET -> INIT -> RTR -> RTS state machine, the
 * post calls' checks, completions, and the error state (first error kept
 * as the cause, every outstanding WR flushed). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma_internal.h"

static const char flushed_cause[] = "flushed: the QP is in the error state";

static op_status_t qp_slot(struct op_rdma_dev *dev, uint32_t *slot)
{
    for (uint32_t i = 0; i < dev->n_qps; i++)
        if (dev->qps[i] == NULL) {
            *slot = i;
            return OP_OK;
        }
    if (dev->n_qps >= RDMA_MAX_QPS)
        return OP_ERR_NOSPACE;
    struct op_rdma_qp **q = realloc(dev->qps, (dev->n_qps + 1) * sizeof(*q));
    if (q == NULL)
        return OP_ERR_NOMEM;
    dev->qps = q;
    dev->qps[dev->n_qps] = NULL;
    *slot = dev->n_qps++;
    return OP_OK;
}

static bool init_attr_ok(const struct op_rdma_qp_init_attr *a)
{
    return a->type <= OP_RDMA_QPT_UD && a->send_cq != NULL && a->recv_cq != NULL &&
           a->max_send_wr > 0 && (a->max_recv_wr > 0 || a->srq != NULL) &&
           a->max_send_wr <= (1u << 20) &&
           a->max_recv_wr <= (1u << 20) && a->max_inline_data <= OP_RDMA_MAX_INLINE;
}

op_status_t op_rdma_qp_create(struct op_rdma_dev *dev, const struct op_rdma_qp_init_attr *attr,
                              struct op_rdma_qp **out)
{
    uint32_t slot;
    if (!init_attr_ok(attr) || (attr->srq != NULL && attr->srq->dev != dev))
        return OP_ERR_INVAL;
    op_status_t st = qp_slot(dev, &slot);
    if (st != OP_OK)
        return st;
    struct op_rdma_qp *qp = calloc(1, sizeof(*qp));
    if (qp == NULL)
        return OP_ERR_NOMEM;
    uint32_t ring = rdma_ring_size(attr->max_send_wr);
    qp->req.sq = calloc(ring, sizeof(*qp->req.sq));
    /* with an SRQ the QP's own queue stays empty (one slot keeps it valid) */
    qp->resp.rq.cap = attr->srq != NULL ? 1 : attr->max_recv_wr;
    qp->resp.rq.wqe = calloc(qp->resp.rq.cap, sizeof(*qp->resp.rq.wqe));
    if (attr->max_inline_data > 0)
        qp->req.inline_mem = malloc((size_t)ring * attr->max_inline_data);
    if (qp->req.sq == NULL || qp->resp.rq.wqe == NULL ||
        (attr->max_inline_data > 0 && qp->req.inline_mem == NULL)) {
        free(qp->req.sq);
        free(qp->req.inline_mem);
        free(qp->resp.rq.wqe);
        free(qp);
        return OP_ERR_NOMEM;
    }
    qp->dev = dev;
    qp->init = *attr;
    qp->req.cap = attr->max_send_wr;
    qp->req.mask = ring - 1;
    qp->qpn = RDMA_QPN_BASE + slot;
    qp->state = OP_RDMA_QPS_RESET;
    rdma_req_init(qp);
    dev->qps[slot] = qp;
    *out = qp;
    return OP_OK;
}

void op_rdma_qp_destroy(struct op_rdma_qp *qp)
{
    if (qp == NULL)
        return;
    qp->dev->qps[qp->qpn - RDMA_QPN_BASE] = NULL;
    free(qp->req.sq);
    free(qp->req.inline_mem);
    free(qp->resp.rq.wqe);
    free(qp);
}

uint32_t op_rdma_qp_num(const struct op_rdma_qp *qp) { return qp->qpn; }
enum op_rdma_qp_state op_rdma_qp_state(const struct op_rdma_qp *qp) { return qp->state; }
const char *op_rdma_qp_error(const struct op_rdma_qp *qp) { return qp->cause; }
const uint64_t *op_rdma_qp_counters(const struct op_rdma_qp *qp) { return qp->c; }
uint32_t rdma_mtu(const struct op_rdma_qp *qp) { return qp->attr.path_mtu; }

static bool mtu_ok(uint32_t mtu)
{
    return mtu >= 256 && mtu <= 4096 && (mtu & (mtu - 1)) == 0;
}

static op_status_t to_init(struct op_rdma_qp *qp, const struct op_rdma_qp_attr *a)
{
    if (qp->state != OP_RDMA_QPS_RESET)
        return OP_ERR_STATE;
    if (a->access & ~(unsigned)(OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE |
                                OP_RDMA_ACCESS_REMOTE_READ | OP_RDMA_ACCESS_REMOTE_ATOMIC))
        return OP_ERR_INVAL;
    qp->attr.access = a->access;
    qp->attr.qkey = a->qkey;
    return OP_OK;
}

static op_status_t to_rtr(struct op_rdma_qp *qp, const struct op_rdma_qp_attr *a)
{
    if (qp->state != OP_RDMA_QPS_INIT)
        return OP_ERR_STATE;
    if (!mtu_ok(a->path_mtu) || a->min_rnr_timer > 31 || a->dest_qpn > RDMA_PSN_MASK ||
        a->rq_psn > RDMA_PSN_MASK)
        return OP_ERR_INVAL;
    qp->attr.path_mtu = a->path_mtu;
    qp->attr.dest_qpn = a->dest_qpn;
    qp->attr.rq_psn = a->rq_psn;
    qp->attr.remote_ip = a->remote_ip;
    qp->attr.remote_port = a->remote_port;
    qp->attr.min_rnr_timer = a->min_rnr_timer;
    qp->attr.ack_every = a->ack_every;
    qp->resp.epsn = a->rq_psn;
    return OP_OK;
}

static op_status_t to_rts(struct op_rdma_qp *qp, const struct op_rdma_qp_attr *a)
{
    if (qp->state != OP_RDMA_QPS_RTR)
        return OP_ERR_STATE;
    if (a->sq_psn > RDMA_PSN_MASK || a->retry_cnt > 7 || a->rnr_retry > 7 || a->timeout > 31 ||
        a->max_outstanding > RDMA_MAX_MSG_PKTS)
        return OP_ERR_INVAL;
    qp->attr.sq_psn = a->sq_psn;
    qp->attr.timeout = a->timeout;
    qp->attr.retry_cnt = a->retry_cnt;
    qp->attr.rnr_retry = a->rnr_retry;
    qp->attr.max_outstanding = a->max_outstanding ? a->max_outstanding : OP_RDMA_DEFAULT_WINDOW;
    qp->attr.max_rd_atomic = a->max_rd_atomic;
    rdma_req_init(qp);
    return OP_OK;
}

static void to_reset(struct op_rdma_qp *qp)
{
    qp->req.head = qp->req.cur = qp->req.tail = 0;
    struct rdma_rq rq = {.wqe = qp->resp.rq.wqe, .cap = qp->resp.rq.cap};
    memset(&qp->resp, 0, sizeof(qp->resp)); /* a held receive is dropped too */
    qp->resp.rq = rq;
    memset(&qp->attr, 0, sizeof(qp->attr));
    qp->cause[0] = '\0';
    rdma_req_init(qp);
}

op_status_t op_rdma_qp_modify(struct op_rdma_qp *qp, enum op_rdma_qp_state to,
                              const struct op_rdma_qp_attr *attr)
{
    op_status_t st = OP_OK;
    rdma_tmpl_reset(qp); /* built for the attributes it had */
    switch (to) {
    case OP_RDMA_QPS_RESET:
        to_reset(qp);
        break;
    case OP_RDMA_QPS_INIT:
        st = to_init(qp, attr);
        break;
    case OP_RDMA_QPS_RTR:
        st = to_rtr(qp, attr);
        break;
    case OP_RDMA_QPS_RTS:
        st = to_rts(qp, attr);
        break;
    case OP_RDMA_QPS_ERR:
        rdma_qp_fail(qp, "moved to ERR by the application");
        return OP_OK;
    default:
        return OP_ERR_INVAL;
    }
    if (st == OP_OK)
        qp->state = to;
    return st;
}

/* ---- completions */
void rdma_complete_send(struct op_rdma_qp *qp, const struct rdma_swqe *w, unsigned status,
                        const char *cause)
{
    static const unsigned wc_op[] = {
        [OP_RDMA_WR_SEND] = OP_RDMA_WC_SEND,
        [OP_RDMA_WR_SEND_WITH_IMM] = OP_RDMA_WC_SEND,
        [OP_RDMA_WR_RDMA_WRITE] = OP_RDMA_WC_RDMA_WRITE,
        [OP_RDMA_WR_RDMA_WRITE_WITH_IMM] = OP_RDMA_WC_RDMA_WRITE,
        [OP_RDMA_WR_RDMA_READ] = OP_RDMA_WC_RDMA_READ,
        [OP_RDMA_WR_ATOMIC_CMP_AND_SWP] = OP_RDMA_WC_COMP_SWAP,
        [OP_RDMA_WR_ATOMIC_FETCH_AND_ADD] = OP_RDMA_WC_FETCH_ADD,
    };
    /* errors always complete visibly, as verbs */
    if (status == OP_RDMA_WC_SUCCESS && !w->signaled && !qp->init.sq_sig_all)
        return;
    const struct op_rdma_wc wc = {.wr_id = w->wr_id, .status = status, .opcode = wc_op[w->opcode],
                                  .byte_len = w->len, .qp_num = qp->qpn, .cause = cause};
    rdma_cq_push(qp->init.send_cq, &wc);
}

void rdma_complete_recv(struct op_rdma_qp *qp, const struct op_rdma_wc *wc)
{
    struct op_rdma_wc c = *wc;
    c.qp_num = qp->qpn;
    rdma_cq_push(qp->init.recv_cq, &c);
}

/* The QP goes to ERR: the cause is kept (the first one wins), the
 * requester's head WR completes with it (the caller has done that when the
 * status is more specific) and everything else is flushed. */
void rdma_qp_fail(struct op_rdma_qp *qp, const char *fmt, ...)
{
    if (qp->state == OP_RDMA_QPS_ERR)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(qp->cause, sizeof qp->cause, fmt, ap);
    va_end(ap);
    OP_WARN(qp->dev->cfg.log, "rdma QP 0x%06" PRIx32 " to ERR: %s", qp->qpn, qp->cause);
    qp->state = OP_RDMA_QPS_ERR;
    rdma_req_flush(qp, OP_RDMA_WC_WR_FLUSH_ERR, flushed_cause);
    rdma_resp_flush(qp);
}

/* ---- posting */
static bool opcode_ok(enum op_rdma_qp_type type, enum op_rdma_wr_opcode op)
{
    switch (type) {
    case OP_RDMA_QPT_RC:
        return op <= OP_RDMA_WR_ATOMIC_FETCH_AND_ADD;
    case OP_RDMA_QPT_UC:
        return op <= OP_RDMA_WR_RDMA_WRITE_WITH_IMM;
    case OP_RDMA_QPT_UD:
        return op == OP_RDMA_WR_SEND || op == OP_RDMA_WR_SEND_WITH_IMM;
    }
    return false;
}

/* An INLINE WR's bytes, copied into the slot of the WQE it becomes (the
 * tail's: reused only once that WQE has completed, resends included). */
static bool inline_load(const struct op_rdma_qp *qp, const struct op_rdma_send_wr *wr,
                        struct rdma_swqe *w)
{
    const struct rdma_req *r = &qp->req;
    uint64_t total = 0;
    if (rdma_wr_needs_response(wr->opcode) || wr->num_sge < 0 || wr->num_sge > OP_RDMA_MAX_SGE ||
        (wr->num_sge > 0 && wr->sg_list == NULL))
        return false;
    for (int i = 0; i < wr->num_sge; i++)
        total += wr->sg_list[i].length;
    if (total > qp->init.max_inline_data)
        return false;
    if (total == 0)
        return true; /* nothing to copy (and no slot when max_inline_data is 0) */
    uint8_t *slot = r->inline_mem + (size_t)(r->tail & r->mask) * qp->init.max_inline_data;
    for (int i = 0, off = 0; i < wr->num_sge; off += (int)wr->sg_list[i++].length)
        memcpy(slot + off, (const void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
    w->len = (uint32_t)total;
    w->sgl.n = 1;
    w->sgl.sg[0] = (struct op_rdma_sge){.addr = (uint64_t)(uintptr_t)slot, .length = w->len};
    return true;
}

/* An atomic's 8 bytes and its operands (verbs: compare_add is CMP_AND_SWP's
 * compare and FETCH_AND_ADD's addend; the AtomicETH has swap-or-add, then
 * compare). */
static bool atomic_fill(const struct op_rdma_send_wr *wr, struct rdma_swqe *w)
{
    bool cas = wr->opcode == OP_RDMA_WR_ATOMIC_CMP_AND_SWP;
    if (w->len != 8)
        return false;
    w->swap_add = cas ? wr->atomic.swap : wr->atomic.compare_add;
    w->compare = cas ? wr->atomic.compare_add : 0;
    return true;
}

static bool swqe_fill(struct op_rdma_qp *qp, const struct op_rdma_send_wr *wr,
                      struct rdma_swqe *w)
{
    bool read = rdma_wr_needs_response(wr->opcode); /* the answer lands in the sg list */
    memset(w, 0, sizeof(*w));
    if (!opcode_ok(qp->init.type, wr->opcode))
        return false;
    if ((wr->send_flags & OP_RDMA_SEND_INLINE) ? !inline_load(qp, wr, w)
                                               : !rdma_sgl_load(qp->dev, wr->sg_list, wr->num_sge,
                                                                read, &w->sgl, &w->len))
        return false;
    if (qp->init.type == OP_RDMA_QPT_UD && w->len > rdma_mtu(qp))
        return false;
    if (rdma_wr_is_atomic(wr->opcode) && !atomic_fill(wr, w))
        return false;
    /* 24-bit PSNs compare by signed difference: a message must span far
     * less than 2^23 of them (1 GiB at MTU 256) */
    if (rdma_npkts(w->len, rdma_mtu(qp)) > RDMA_MAX_MSG_PKTS)
        return false;
    w->wr_id = wr->wr_id;
    w->opcode = wr->opcode;
    w->signaled = (wr->send_flags & OP_RDMA_SEND_SIGNALED) != 0;
    w->imm = wr->imm_data;
    w->raddr = rdma_wr_is_atomic(wr->opcode) ? wr->atomic.remote_addr : wr->rdma.remote_addr;
    w->rkey = rdma_wr_is_atomic(wr->opcode) ? wr->atomic.rkey : wr->rdma.rkey;
    w->ud_ip = wr->ud.remote_ip;
    w->ud_port = wr->ud.remote_port;
    w->ud_qpn = wr->ud.remote_qpn & RDMA_PSN_MASK;
    w->ud_qkey = wr->ud.remote_qkey;
    return true;
}

op_status_t op_rdma_post_send(struct op_rdma_qp *qp, const struct op_rdma_send_wr *wr,
                              uint64_t now, struct op_txq *out)
{
    struct rdma_req *r = &qp->req;
    if (qp->state != OP_RDMA_QPS_RTS && qp->state != OP_RDMA_QPS_ERR)
        return OP_ERR_STATE;
    if (r->tail - r->head >= r->cap)
        return OP_ERR_NOSPACE;
    /* filled where it is queued, not copied there (152 bytes): the
     * tail's slot is free, and stays so until tail moves */
    struct rdma_swqe *w = rdma_swqe_at(r, r->tail);
    if (!swqe_fill(qp, wr, w))
        return OP_ERR_INVAL;
    if (qp->state == OP_RDMA_QPS_ERR) {
        rdma_complete_send(qp, w, OP_RDMA_WC_WR_FLUSH_ERR, flushed_cause);
        return OP_OK;
    }
    r->tail++;
    rdma_req_progress(qp, now, out);
    return OP_OK;
}

op_status_t op_rdma_post_recv(struct op_rdma_qp *qp, const struct op_rdma_recv_wr *wr)
{
    struct rdma_resp *s = &qp->resp;
    struct rdma_rwqe w = {.wr_id = wr->wr_id};
    if (qp->init.srq != NULL)
        return OP_ERR_INVAL; /* its receives go to the SRQ */
    if (qp->state == OP_RDMA_QPS_RESET)
        return OP_ERR_STATE;
    if (s->rq.tail - s->rq.head >= s->rq.cap)
        return OP_ERR_NOSPACE;
    if (!rdma_sgl_load(qp->dev, wr->sg_list, wr->num_sge, true, &w.sgl, &w.len))
        return OP_ERR_INVAL;
    if (qp->state == OP_RDMA_QPS_ERR) {
        const struct op_rdma_wc wc = {.wr_id = w.wr_id, .status = OP_RDMA_WC_WR_FLUSH_ERR,
                                      .opcode = OP_RDMA_WC_RECV, .cause = flushed_cause};
        rdma_complete_recv(qp, &wc);
        return OP_OK;
    }
    rdma_rq_push(&s->rq, &w);
    return OP_OK;
}

static void flush_recv(struct op_rdma_qp *qp, uint64_t wr_id)
{
    const struct op_rdma_wc wc = {.wr_id = wr_id, .status = OP_RDMA_WC_WR_FLUSH_ERR,
                                  .opcode = OP_RDMA_WC_RECV, .cause = flushed_cause};
    rdma_complete_recv(qp, &wc);
}

/* The receive a message held, and the QP's own queue; an SRQ's receives
 * stay for its other QPs (verbs). */
void rdma_resp_flush(struct op_rdma_qp *qp)
{
    struct rdma_resp *s = &qp->resp;
    if (s->has_open)
        flush_recv(qp, s->open.wr_id);
    s->has_open = false;
    for (; s->rq.head != s->rq.tail; s->rq.head++)
        flush_recv(qp, s->rq.wqe[s->rq.head % s->rq.cap].wr_id);
}
