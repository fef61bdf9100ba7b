/* RoCEv2 transport packets of the QP engine: which headers each opcode
 * carries, parsing with a drop reason for every way a packet can be wrong,
 * and building sealed packets (BTH, extension headers, payload, pad, ICRC)
 * with the wire module's codecs. */
#include <string.h>

#include "rdma_internal.h"

#define RDMA_UC_LAST_OP OP_RC_WRITE_ONLY_IMM
#define RDMA_OK_ OP_RDMA_QP_C_COUNT_

/* By opcode without its transport bits (IBTA 9.2, table 31). */
static const uint16_t op_hdrs[OP_RC_FETCH_ADD + 1] = {
    [OP_RC_SEND_FIRST] = RDMA_H_SEND | RDMA_H_FIRST,
    [OP_RC_SEND_MIDDLE] = RDMA_H_SEND,
    [OP_RC_SEND_LAST] = RDMA_H_SEND | RDMA_H_LAST,
    [OP_RC_SEND_LAST_IMM] = RDMA_H_SEND | RDMA_H_LAST | RDMA_H_IMM,
    [OP_RC_SEND_ONLY] = RDMA_H_SEND | RDMA_H_FIRST | RDMA_H_LAST,
    [OP_RC_SEND_ONLY_IMM] = RDMA_H_SEND | RDMA_H_FIRST | RDMA_H_LAST | RDMA_H_IMM,
    [OP_RC_WRITE_FIRST] = RDMA_H_WRITE | RDMA_H_FIRST | RDMA_H_RETH,
    [OP_RC_WRITE_MIDDLE] = RDMA_H_WRITE,
    [OP_RC_WRITE_LAST] = RDMA_H_WRITE | RDMA_H_LAST,
    [OP_RC_WRITE_LAST_IMM] = RDMA_H_WRITE | RDMA_H_LAST | RDMA_H_IMM,
    [OP_RC_WRITE_ONLY] = RDMA_H_WRITE | RDMA_H_FIRST | RDMA_H_LAST | RDMA_H_RETH,
    [OP_RC_WRITE_ONLY_IMM] = RDMA_H_WRITE | RDMA_H_FIRST | RDMA_H_LAST | RDMA_H_RETH | RDMA_H_IMM,
    [OP_RC_READ_REQUEST] = RDMA_H_READ_REQ | RDMA_H_FIRST | RDMA_H_LAST | RDMA_H_RETH,
    [OP_RC_READ_RESP_FIRST] = RDMA_H_READ_RESP | RDMA_H_FIRST | RDMA_H_AETH,
    [OP_RC_READ_RESP_MIDDLE] = RDMA_H_READ_RESP,
    [OP_RC_READ_RESP_LAST] = RDMA_H_READ_RESP | RDMA_H_LAST | RDMA_H_AETH,
    [OP_RC_READ_RESP_ONLY] = RDMA_H_READ_RESP | RDMA_H_FIRST | RDMA_H_LAST | RDMA_H_AETH,
    [OP_RC_ACK] = RDMA_H_ACK | RDMA_H_AETH,
    [OP_RC_ATOMIC_ACK] = RDMA_H_ACK | RDMA_H_AETH | RDMA_H_ATOMIC_ACK,
    [OP_RC_CMP_SWAP] = RDMA_H_ATOMIC | RDMA_H_FIRST | RDMA_H_LAST,
    [OP_RC_FETCH_ADD] = RDMA_H_ATOMIC | RDMA_H_FIRST | RDMA_H_LAST,
};

/* The headers of opcode on a QP of this type; 0 if the type does not carry it. */
static unsigned hdrs_of(enum op_rdma_qp_type type, uint8_t opcode)
{
    switch (type) {
    case OP_RDMA_QPT_RC:
        return opcode <= OP_RC_FETCH_ADD ? op_hdrs[opcode] : 0;
    case OP_RDMA_QPT_UC:
        return opcode >= OP_UC_BASE && opcode <= OP_UC_BASE + RDMA_UC_LAST_OP
                   ? op_hdrs[opcode - OP_UC_BASE]
                   : 0;
    case OP_RDMA_QPT_UD:
        if (opcode == OP_UD_SEND_ONLY)
            return op_hdrs[OP_RC_SEND_ONLY] | RDMA_H_DETH;
        return opcode == OP_UD_SEND_ONLY_IMM ? op_hdrs[OP_RC_SEND_ONLY_IMM] | RDMA_H_DETH : 0;
    }
    return 0;
}

static size_t hdrs_len(unsigned h)
{
    return OP_BTH_LEN + ((h & RDMA_H_DETH) ? OP_DETH_LEN : 0) +
           ((h & RDMA_H_RETH) ? OP_RETH_LEN : 0) + ((h & RDMA_H_AETH) ? OP_AETH_LEN : 0) +
           ((h & RDMA_H_IMM) ? OP_IMMDT_LEN : 0) + ((h & RDMA_H_ATOMIC) ? OP_ATOMIC_ETH_LEN : 0) +
           ((h & RDMA_H_ATOMIC_ACK) ? OP_ATOMIC_ACK_ETH_LEN : 0);
}

/* Extension headers in IBTA order: DETH, RETH, AtomicETH, AETH,
 * AtomicAckETH, ImmDt. Lengths were checked, so the decoders cannot fail. */
static void decode_ext(const uint8_t *b, struct rdma_pkt *p)
{
    b += OP_BTH_LEN;
    if (p->hdr & RDMA_H_DETH) {
        (void)op_deth_decode(b, OP_DETH_LEN, &p->deth);
        b += OP_DETH_LEN;
    }
    if (p->hdr & RDMA_H_RETH) {
        (void)op_reth_decode(b, OP_RETH_LEN, &p->reth);
        b += OP_RETH_LEN;
    }
    if (p->hdr & RDMA_H_ATOMIC) {
        (void)op_atomic_eth_decode(b, OP_ATOMIC_ETH_LEN, &p->atomic);
        b += OP_ATOMIC_ETH_LEN;
    }
    if (p->hdr & RDMA_H_AETH) {
        (void)op_aeth_decode(b, OP_AETH_LEN, &p->aeth);
        b += OP_AETH_LEN;
    }
    if (p->hdr & RDMA_H_ATOMIC_ACK) {
        (void)op_atomic_ack_decode(b, OP_ATOMIC_ACK_ETH_LEN, &p->orig);
        b += OP_ATOMIC_ACK_ETH_LEN;
    }
    if (p->hdr & RDMA_H_IMM)
        (void)op_immdt_decode(b, OP_IMMDT_LEN, &p->imm);
}

static bool from_peer(const struct op_rdma_qp *qp, const struct op_pkt *raw)
{
    return qp->init.type == OP_RDMA_QPT_UD ||
           (raw->flow.src.v4 == qp->attr.remote_ip && raw->flow.src_port == qp->attr.remote_port);
}

/* A packet of a placed receive: its payload (and pad) at ext, all its
 * headers before, only the ICRC after. */
static bool placed_layout(const struct op_pkt *raw, size_t hl)
{
    return raw->ext_at == hl && raw->len == hl + OP_ICRC_LEN;
}

static bool icrc_ok(struct op_rdma_qp *qp, const struct op_pkt *raw)
{
    if (raw->ext == NULL)
        return op_icrc_check_memo(&qp->icrc_rx, &raw->flow, raw->data, raw->len);
    return op_icrc_check_ext_memo(&qp->icrc_rx, &raw->flow, raw->data, raw->len, raw->ext_at,
                                  raw->ext, raw->ext_len);
}

/* Returns the counter of the reason to drop, RDMA_PARSE_FLATTEN, or
 * RDMA_OK_. The caller decoded the BTH (it names the QP) from a packet of
 * at least a BTH and an ICRC. */
unsigned rdma_parse(struct op_rdma_qp *qp, const struct op_pkt *raw, const struct op_bth *bth,
                    struct rdma_pkt *p)
{
    memset(p, 0, sizeof(*p));
    p->raw = raw;
    p->bth = *bth;
    if (p->bth.pkey != RDMA_PKEY)
        return OP_RDMA_QP_C_drop_pkey;
    p->hdr = hdrs_of(qp->init.type, p->bth.opcode);
    if (p->hdr == 0 || p->bth.tver != 0)
        return OP_RDMA_QP_C_drop_opcode;
    size_t hl = hdrs_len(p->hdr), wire = op_pkt_wire_len(raw);
    if (raw->ext != NULL && !placed_layout(raw, hl))
        return RDMA_PARSE_FLATTEN;
    if (wire < hl + p->bth.padcnt + OP_ICRC_LEN)
        return OP_RDMA_QP_C_drop_length;
    p->len = (uint32_t)(wire - hl - p->bth.padcnt - OP_ICRC_LEN);
    if ((p->hdr & (RDMA_H_ACK | RDMA_H_READ_REQ | RDMA_H_ATOMIC)) &&
        (p->len != 0 || p->bth.padcnt != 0))
        return OP_RDMA_QP_C_drop_length;
    if (p->len > rdma_mtu(qp))
        return OP_RDMA_QP_C_drop_length;
    if (!icrc_ok(qp, raw))
        return OP_RDMA_QP_C_drop_icrc;
    if (!from_peer(qp, raw))
        return OP_RDMA_QP_C_drop_source;
    p->op = p->bth.opcode & 0x1fu;
    p->payload = raw->ext != NULL ? raw->ext : raw->data + hl;
    decode_ext(raw->data, p);
    return RDMA_OK_;
}

static uint8_t *put_ext(const struct rdma_out *o, uint8_t *b)
{
    if (o->deth != NULL) {
        op_deth_encode(o->deth, b);
        b += OP_DETH_LEN;
    }
    if (o->reth != NULL) {
        op_reth_encode(o->reth, b);
        b += OP_RETH_LEN;
    }
    if (o->atomic != NULL) {
        op_atomic_eth_encode(o->atomic, b);
        b += OP_ATOMIC_ETH_LEN;
    }
    if (o->aeth != NULL) {
        op_aeth_encode(o->aeth, b);
        b += OP_AETH_LEN;
    }
    if (o->atomic_orig != NULL) {
        op_atomic_ack_encode(*o->atomic_orig, b);
        b += OP_ATOMIC_ACK_ETH_LEN;
    }
    if (o->imm != NULL) {
        op_immdt_encode(*o->imm, b);
        b += OP_IMMDT_LEN;
    }
    return b;
}

/* Where the payload lies, when the queue's consumer takes it from there
 * (op_txq.ext_ok) and it is worth it: below RDMA_EXT_MIN bytes one more
 * piece for the kernel to gather costs more than the copy saved. It is
 * the WR's memory (an MR, an inline slot), which stays put until the WR
 * completes, and so until the packet is sent. */
#define RDMA_EXT_MIN 512
static const uint8_t *payload_in_place(const struct rdma_out *o, const struct op_txq *out)
{
    if (!out->ext_ok || o->len < RDMA_EXT_MIN)
        return NULL;
    return o->sgl != NULL ? rdma_sgl_span(o->sgl, o->off, o->len) : o->data;
}

/* The ICRC after the packet's n bytes (crc: over them, as built) */
static void seal_with(struct op_pkt *pkt, size_t n, uint32_t crc)
{
    for (size_t i = 0; i < OP_ICRC_LEN; i++)
        pkt->data[n + i] = (uint8_t)(crc >> (8 * i));
    pkt->len = (uint32_t)(n + OP_ICRC_LEN);
}

/* The ICRC after the pad; the payload in the packet's data or at ext. */
static void seal(struct op_rdma_qp *qp, struct op_pkt *pkt, size_t n)
{
    seal_with(pkt, n,
              pkt->ext != NULL ? op_icrc_flow_ext_memo(&qp->icrc_tx, &pkt->flow, pkt->data, n,
                                                       pkt->ext_at, pkt->ext, pkt->ext_len)
                               : op_icrc_flow_memo(&qp->icrc_tx, &pkt->flow, pkt->data, n));
}

void rdma_emit(struct op_rdma_qp *qp, const struct rdma_out *o, struct op_txq *out)
{
    struct op_pkt *pkt = op_txq_next(out);
    uint8_t pad = (uint8_t)((0u - o->len) & 3u);
    const struct op_bth bth = {.opcode = o->opcode, .se = o->se, .padcnt = pad, .pkey = RDMA_PKEY,
                               .dest_qp = o->dest_qp, .ackreq = o->ackreq, .psn = o->psn};
    pkt->flow = (struct op_flow){.src.v4 = qp->dev->cfg.ip, .src_port = qp->dev->cfg.port,
                                 .dst.v4 = o->dst_ip, .dst_port = o->dst_port};
    const uint8_t *ext = payload_in_place(o, out);
    uint8_t *b = ext == NULL ? rdma_tmpl_put(qp, o, pkt) : NULL;
    bool tmpl = b != NULL;
    if (!tmpl) {
        op_bth_encode(&bth, pkt->data);
        b = put_ext(o, pkt->data + OP_BTH_LEN);
    }
    if (ext != NULL) {
        pkt->ext = ext;
        pkt->ext_len = o->len;
        pkt->ext_at = (uint32_t)(b - pkt->data);
    } else if (o->sgl != NULL) {
        rdma_sgl_get(o->sgl, o->off, b, o->len);
        b += o->len;
    } else if (o->len > 0) {
        memcpy(b, o->data, o->len);
        b += o->len;
    }
    memset(b, 0, pad);
    size_t n = (size_t)(b - pkt->data) + pad;
    if (tmpl) {
        seal_with(pkt, n, rdma_tmpl_icrc(qp, pkt, n));
    } else {
        rdma_tmpl_keep(qp, o, pkt, n);
        seal(qp, pkt, n);
    }
    op_txq_commit(out);
    qp->c[OP_RDMA_QP_C_pkts_out]++;
    qp->c[OP_RDMA_QP_C_bytes_out] += o->len;
}

static unsigned aeth_counter(uint8_t syndrome)
{
    switch (syndrome & 0xe0u) {
    case 0x00:
        return OP_RDMA_QP_C_acks_sent;
    case RDMA_AETH_RNR:
        return OP_RDMA_QP_C_nak_rnr_sent;
    default:
        break;
    }
    switch (syndrome) {
    case RDMA_AETH_NAK_SEQ:
        return OP_RDMA_QP_C_nak_seq_sent;
    case RDMA_AETH_NAK_ACCESS:
        return OP_RDMA_QP_C_nak_access_sent;
    default:
        return OP_RDMA_QP_C_nak_inv_sent;
    }
}

void rdma_send_aeth(struct op_rdma_qp *qp, uint8_t syndrome, uint32_t psn, struct op_txq *out)
{
    const struct op_aeth aeth = {.syndrome = syndrome, .msn = qp->resp.msn & RDMA_PSN_MASK};
    const struct rdma_out o = {.opcode = OP_RC_ACK, .dest_qp = qp->attr.dest_qpn, .psn = psn,
                               .aeth = &aeth, .dst_ip = qp->attr.remote_ip,
                               .dst_port = qp->attr.remote_port};
    rdma_emit(qp, &o, out);
    qp->c[aeth_counter(syndrome)]++;
}
