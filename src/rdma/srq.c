/* Receive queues: a QP's own and shared ones (SRQ). A SEND (or the LAST
 * of a WRITE_WITH_IMM, or a UD send) takes the oldest receive at its
 * first packet and holds it in the QP until it completes: an SRQ is shared,
 * so another QP's message must not take the same receive meanwhile. A
 * message that is abandoned (UC gap) or refused (too long for UD) leaves
 * the receive held for the QP's next message, as the head of its own
 * queue would have stayed. */
#include <stdlib.h>

#include "rdma_internal.h"

static struct rdma_rq *rq_of(struct op_rdma_qp *qp)
{
    return qp->init.srq != NULL ? &qp->init.srq->q : &qp->resp.rq;
}

static const struct rdma_rq *rq_of_const(const struct op_rdma_qp *qp)
{
    return qp->init.srq != NULL ? &qp->init.srq->q : &qp->resp.rq;
}

void rdma_rq_push(struct rdma_rq *q, const struct rdma_rwqe *w)
{
    q->wqe[q->tail++ % q->cap] = *w;
}

bool rdma_recv_ready(const struct op_rdma_qp *qp)
{
    const struct rdma_rq *q = rq_of_const(qp);
    return qp->resp.has_open || q->head != q->tail;
}

struct rdma_rwqe *rdma_recv_take(struct op_rdma_qp *qp)
{
    struct rdma_resp *s = &qp->resp;
    struct rdma_rq *q = rq_of(qp);
    if (s->has_open)
        return &s->open;
    if (q->head == q->tail)
        return NULL;
    s->open = q->wqe[q->head++ % q->cap];
    s->has_open = true;
    return &s->open;
}

op_status_t op_rdma_srq_create(struct op_rdma_dev *dev, uint32_t max_wr, struct op_rdma_srq **out)
{
    if (max_wr == 0 || max_wr > (1u << 20))
        return OP_ERR_INVAL;
    struct op_rdma_srq *srq = calloc(1, sizeof(*srq));
    struct op_rdma_srq **list = realloc(dev->srqs, (dev->n_srqs + 1) * sizeof(*list));
    if (list != NULL)
        dev->srqs = list;
    if (srq == NULL || list == NULL || (srq->q.wqe = calloc(max_wr, sizeof(*srq->q.wqe))) == NULL) {
        free(srq);
        return OP_ERR_NOMEM;
    }
    srq->dev = dev;
    srq->q.cap = max_wr;
    dev->srqs[dev->n_srqs++] = srq;
    *out = srq;
    return OP_OK;
}

void op_rdma_srq_destroy(struct op_rdma_srq *srq)
{
    if (srq == NULL)
        return;
    struct op_rdma_dev *dev = srq->dev;
    for (uint32_t i = 0; i < dev->n_srqs; i++)
        if (dev->srqs[i] == srq) {
            dev->srqs[i] = dev->srqs[--dev->n_srqs];
            break;
        }
    free(srq->q.wqe);
    free(srq);
}

void rdma_srq_free_all(struct op_rdma_dev *dev)
{
    while (dev->n_srqs > 0) /* each destroy takes its SRQ off the list */
        op_rdma_srq_destroy(dev->srqs[dev->n_srqs - 1]);
    free(dev->srqs);
}

op_status_t op_rdma_post_srq_recv(struct op_rdma_srq *srq, const struct op_rdma_recv_wr *wr)
{
    struct rdma_rwqe w = {.wr_id = wr->wr_id};
    if (srq->q.tail - srq->q.head >= srq->q.cap)
        return OP_ERR_NOSPACE;
    if (!rdma_sgl_load(srq->dev, wr->sg_list, wr->num_sge, true, &w.sgl, &w.len))
        return OP_ERR_INVAL;
    rdma_rq_push(&srq->q, &w);
    return OP_OK;
}

uint32_t op_rdma_srq_posted(const struct op_rdma_srq *srq)
{
    return srq->q.tail - srq->q.head;
}
