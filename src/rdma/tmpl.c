/* A latency ping-pong's packets, built and taken without the general
 * path's work: consecutive WRITEs (or SENDs) of one QP share every header
 * byte but AckReq and the PSN, so the sender copies the last one's headers,
 * patches those 4 bytes and goes on with the ICRC from where the shared
 * bytes end; the responder, after a one-packet WRITE, expects the same
 * WRITE at the next PSN, and a packet that is exactly that (headers, length,
 * sender, ICRC) is executed as the general path would, with the region
 * check and the parse already done for its twin. Anything else goes the
 * general way, which also keeps the counters of what is wrong. */
#include <string.h>

#include "rdma_internal.h"

#define BTH_ACKREQ_BYTE 8
#define BTH_ACKREQ 0x80u
#define BTH_PSN_AT 9
/* Past this, the payload's CRC is most of the work and the general path
 * folds it faster (op_icrc_flow_memo's block engine). */
#define TMPL_MAX_PAYLOAD 256u

static bool plain(const struct rdma_out *o)
{
    return o->deth == NULL && o->aeth == NULL && o->atomic == NULL && o->atomic_orig == NULL &&
           o->imm == NULL && o->len <= TMPL_MAX_PAYLOAD;
}

static size_t hdr_len(const struct rdma_out *o)
{
    return OP_BTH_LEN + (o->reth != NULL ? OP_RETH_LEN : 0);
}

static bool same_reth(const struct op_reth *a, const struct op_reth *b)
{
    return a->va == b->va && a->rkey == b->rkey && a->dma_len == b->dma_len;
}

static void put_psn(uint8_t *b, bool ackreq, uint32_t psn)
{
    b[BTH_ACKREQ_BYTE] = ackreq ? BTH_ACKREQ : 0;
    b[BTH_PSN_AT] = (uint8_t)(psn >> 16);
    b[BTH_PSN_AT + 1] = (uint8_t)(psn >> 8);
    b[BTH_PSN_AT + 2] = (uint8_t)psn;
}

static uint32_t get_psn(const uint8_t *b)
{
    return (uint32_t)b[BTH_PSN_AT] << 16 | (uint32_t)b[BTH_PSN_AT + 1] << 8 | b[BTH_PSN_AT + 2];
}

static bool alike(const struct rdma_tx_tmpl *t, const struct rdma_out *o)
{
    return t->valid && plain(o) && o->opcode == t->opcode && o->se == t->se &&
           o->dest_qp == t->dest_qp && o->len == t->len && o->dst_ip == t->dst_ip &&
           o->dst_port == t->dst_port &&
           (o->reth == NULL ? t->reth.dma_len == UINT32_MAX : same_reth(o->reth, &t->reth));
}

uint8_t *rdma_tmpl_put(struct op_rdma_qp *qp, const struct rdma_out *o, struct op_pkt *pkt)
{
    if (!alike(&qp->tx_tmpl, o))
        return NULL;
    memcpy(pkt->data, qp->tx_tmpl.hdr, hdr_len(o));
    put_psn(pkt->data, o->ackreq, o->psn);
    qp->c[OP_RDMA_QP_C_tmpl_out]++;
    return pkt->data + hdr_len(o);
}

uint32_t rdma_tmpl_icrc(const struct op_rdma_qp *qp, const struct op_pkt *pkt, size_t n)
{
    return op_crc32(qp->tx_tmpl.head, pkt->data + RDMA_TMPL_FIXED, n - RDMA_TMPL_FIXED);
}

void rdma_tmpl_keep(struct op_rdma_qp *qp, const struct rdma_out *o, const struct op_pkt *pkt,
                    size_t n)
{
    struct rdma_tx_tmpl *t = &qp->tx_tmpl;
    if (!plain(o) || pkt->ext != NULL)
        return;
    *t = (struct rdma_tx_tmpl){.valid = true, .opcode = o->opcode, .se = o->se,
                               .dest_qp = o->dest_qp, .dst_ip = o->dst_ip, .len = o->len,
                               .dst_port = o->dst_port, .reth.dma_len = UINT32_MAX};
    if (o->reth != NULL)
        t->reth = *o->reth;
    memcpy(t->hdr, pkt->data, hdr_len(o));
    t->head = op_icrc_flow_memo_head(&qp->icrc_tx, &pkt->flow, pkt->data, n, RDMA_TMPL_FIXED);
}

/* ---- the responder's guess */
#define RX_WRITE_HDR (OP_BTH_LEN + OP_RETH_LEN)

void rdma_rx_tmpl_keep(struct op_rdma_qp *qp, const struct rdma_pkt *p, uint8_t *to)
{
    struct rdma_rx_tmpl *t = &qp->rx_tmpl;
    const struct op_pkt *raw = p->raw;
    t->valid = raw->ext == NULL && p->op == OP_RC_WRITE_ONLY && p->len <= TMPL_MAX_PAYLOAD;
    if (!t->valid)
        return;
    t->len = raw->len;
    t->mr_gen = qp->dev->mr_gen;
    t->to = to;
    memcpy(t->hdr, raw->data, RX_WRITE_HDR);
    put_psn(t->hdr, false, 0);
}

static bool guessed(const struct op_rdma_qp *qp, const struct op_pkt *pkt)
{
    const struct rdma_rx_tmpl *t = &qp->rx_tmpl;
    const uint8_t *b = pkt->data;
    return t->valid && pkt->ext == NULL && pkt->len == t->len && t->mr_gen == qp->dev->mr_gen &&
           qp->resp.in_msg == 0 && memcmp(b, t->hdr, BTH_ACKREQ_BYTE) == 0 &&
           (b[BTH_ACKREQ_BYTE] & ~BTH_ACKREQ) == 0 && get_psn(b) == qp->resp.epsn &&
           memcmp(b + OP_BTH_LEN, t->hdr + OP_BTH_LEN, OP_RETH_LEN) == 0 &&
           pkt->flow.src.v4 == qp->attr.remote_ip && pkt->flow.src_port == qp->attr.remote_port;
}

bool rdma_rx_fast(struct op_rdma_qp *qp, const struct op_pkt *pkt, uint64_t now,
                  struct op_txq *out)
{
    if (qp->init.type == OP_RDMA_QPT_UD || !guessed(qp, pkt) ||
        !op_icrc_check_memo(&qp->icrc_rx, &pkt->flow, pkt->data, pkt->len))
        return false;
    const uint8_t *b = pkt->data;
    uint32_t pad = (b[1] >> 4) & 3u, psn = get_psn(b);
    memcpy(qp->rx_tmpl.to, b + RX_WRITE_HDR, pkt->len - RX_WRITE_HDR - pad - OP_ICRC_LEN);
    qp->c[OP_RDMA_QP_C_tmpl_in]++;
    if (qp->init.type == OP_RDMA_QPT_UC) {
        qp->resp.epsn = psn_add(psn, 1);
        return true;
    }
    qp->resp.nak_sent = false;
    qp->resp.msn++;
    rdma_resp_advance(qp, psn, (b[BTH_ACKREQ_BYTE] & BTH_ACKREQ) != 0, now, out);
    return true;
}

void rdma_tmpl_reset(struct op_rdma_qp *qp)
{
    qp->tx_tmpl.valid = false;
    qp->rx_tmpl.valid = false;
}
