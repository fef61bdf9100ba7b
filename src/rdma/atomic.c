/* RC atomics (IBTA 9.4.5): 8-byte CMP_SWAP and FETCH_ADD. The requester
 * sends one AtomicETH request per WR and takes the ATOMIC_ACK's original
 * value into the WR's local 8 bytes. The responder checks alignment (an
 * invalid request NAK) and the rkey (a remote access NAK), applies the
 * operation, and keeps the result by PSN in a ring of OP_RDMA_ATOMIC_DEPTH:
 * a duplicate request (a lost ACK, a go-back) is answered from it, never
 * executed again. The requester keeps at most that many atomics in flight,
 * so every atomic it may resend is still in the ring. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "rdma_internal.h"

#define ATOMIC_LEN 8u

void rdma_atomic_request(const struct rdma_swqe *w, struct op_atomic_eth *eth, struct rdma_out *o)
{
    *eth = (struct op_atomic_eth){.va = w->raddr, .rkey = w->rkey, .swap_add = w->swap_add,
                                  .compare = w->compare};
    o->opcode = w->opcode == OP_RDMA_WR_ATOMIC_CMP_AND_SWP ? OP_RC_CMP_SWAP : OP_RC_FETCH_ADD;
    o->atomic = eth;
    o->sgl = NULL;
    o->len = 0;
    o->ackreq = true; /* its ATOMIC_ACK is the answer */
}

void rdma_atomic_response(struct op_rdma_qp *qp, struct rdma_swqe *w, const struct rdma_pkt *p)
{
    (void)qp;
    uint8_t v[ATOMIC_LEN];
    memcpy(v, &p->orig, sizeof v); /* host order in memory, as rxe */
    rdma_sgl_put(&w->sgl, 0, v, ATOMIC_LEN);
}

static void send_atomic_ack(struct op_rdma_qp *qp, uint32_t psn, uint64_t orig,
                            struct op_txq *out)
{
    const struct op_aeth aeth = {.syndrome = RDMA_AETH_ACK, .msn = qp->resp.msn & RDMA_PSN_MASK};
    const struct rdma_out o = {.opcode = OP_RC_ATOMIC_ACK, .dest_qp = qp->attr.dest_qpn,
                               .psn = psn, .aeth = &aeth, .atomic_orig = &orig,
                               .dst_ip = qp->attr.remote_ip, .dst_port = qp->attr.remote_port};
    rdma_emit(qp, &o, out);
    qp->c[OP_RDMA_QP_C_acks_sent]++;
}

static uint64_t apply(uint8_t *mem, const struct rdma_pkt *p)
{
    uint64_t orig, now;
    memcpy(&orig, mem, sizeof orig);
    if (p->bth.opcode == OP_RC_FETCH_ADD)
        now = orig + p->atomic.swap_add;
    else
        now = orig == p->atomic.compare ? p->atomic.swap_add : orig;
    memcpy(mem, &now, sizeof now);
    return orig;
}

bool rdma_atomic_execute(struct op_rdma_qp *qp, const struct rdma_pkt *p, char *cause,
                         bool *access_error, struct op_txq *out)
{
    struct rdma_resp *s = &qp->resp;
    *access_error = false;
    if (p->atomic.va % ATOMIC_LEN != 0) {
        snprintf(cause, RDMA_CAUSE_LEN, "atomic at 0x%" PRIx64 " is not 8-byte aligned",
                 p->atomic.va);
        return false;
    }
    const struct op_rdma_mr *mr = rdma_rkey_check(qp, p->atomic.rkey, p->atomic.va, ATOMIC_LEN,
                                                  OP_RDMA_ACCESS_REMOTE_ATOMIC, cause,
                                                  RDMA_CAUSE_LEN);
    if (mr == NULL) {
        *access_error = true;
        return false;
    }
    uint64_t orig = apply(mr->addr + (p->atomic.va - mr->va), p);
    s->atomics[s->atomic_next++ % OP_RDMA_ATOMIC_DEPTH] =
        (struct rdma_atomic_result){.psn = p->bth.psn, .valid = true, .orig = orig};
    qp->c[OP_RDMA_QP_C_atomics_executed]++;
    s->msn++;
    send_atomic_ack(qp, p->bth.psn, orig, out);
    return true;
}

void rdma_atomic_replay(struct op_rdma_qp *qp, const struct rdma_pkt *p, struct op_txq *out)
{
    const struct rdma_resp *s = &qp->resp;
    for (unsigned i = 0; i < OP_RDMA_ATOMIC_DEPTH; i++) {
        const struct rdma_atomic_result *a = &s->atomics[i];
        if (a->valid && a->psn == p->bth.psn) {
            qp->c[OP_RDMA_QP_C_atomic_replays]++;
            send_atomic_ack(qp, a->psn, a->orig, out);
            return;
        }
    }
    qp->c[OP_RDMA_QP_C_atomic_uncached]++;
}
