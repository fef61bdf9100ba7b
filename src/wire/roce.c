/* RoCEv2 transport headers: BTH, RETH, AETH, DETH, ImmDt (IBTA annex A17, as rxe and scapy).
 * All big-endian; 24-bit fields are masked on encode. Decoders ignore the
 * reserved bits, as receivers must. */
#include "offpath/wire.h"
#include "wire_cursor.h"

#define BTH_SE 0x80u
#define BTH_MIGREQ 0x40u
#define BTH_PAD_SHIFT 4
#define BTH_FECN OP_BTH_FECN_BIT
#define BTH_BECN OP_BTH_BECN_BIT
#define BTH_ACKREQ 0x80u

static uint8_t bit(bool on, unsigned mask)
{
    return on ? (uint8_t)mask : 0;
}

void op_bth_encode(const struct op_bth *h, uint8_t out[OP_BTH_LEN])
{
    uint8_t *p = wp_u8(out, h->opcode);
    p = wp_u8(p, (uint8_t)(bit(h->se, BTH_SE) | bit(h->migreq, BTH_MIGREQ) |
                           (h->padcnt & 3u) << BTH_PAD_SHIFT | (h->tver & 0xfu)));
    p = wp_u16(p, h->pkey);
    p = wp_u8(p, (uint8_t)(bit(h->fecn, BTH_FECN) | bit(h->becn, BTH_BECN)));
    p = wp_u24(p, h->dest_qp);
    p = wp_u8(p, bit(h->ackreq, BTH_ACKREQ));
    wp_u24(p, h->psn);
}

/* Every packet has one, so out is written field by field once the bytes
 * are known good: a struct built in single bytes and then copied whole
 * stalls the copy's wide load on those stores (17 ns a decode before). */
op_status_t op_bth_decode(const uint8_t *buf, size_t len, struct op_bth *out)
{
    struct wire_cur c;
    wc_init(&c, buf, len);
    uint8_t opcode = wc_u8(&c), b1 = wc_u8(&c);
    uint16_t pkey = wc_u16(&c);
    uint8_t b4 = wc_u8(&c);
    uint32_t dest_qp = wc_u24(&c);
    uint8_t b8 = wc_u8(&c);
    uint32_t psn = wc_u24(&c);
    if (c.err != OP_OK)
        return c.err; /* out as it was */
    out->opcode = opcode;
    out->se = (b1 & BTH_SE) != 0;
    out->migreq = (b1 & BTH_MIGREQ) != 0;
    out->padcnt = (b1 >> BTH_PAD_SHIFT) & 3u;
    out->tver = b1 & 0xfu;
    out->pkey = pkey;
    out->fecn = (b4 & BTH_FECN) != 0;
    out->becn = (b4 & BTH_BECN) != 0;
    out->dest_qp = dest_qp;
    out->ackreq = (b8 & BTH_ACKREQ) != 0;
    out->psn = psn;
    return OP_OK;
}

void op_reth_encode(const struct op_reth *h, uint8_t out[OP_RETH_LEN])
{
    uint8_t *p = wp_u64(out, h->va);
    p = wp_u32(p, h->rkey);
    wp_u32(p, h->dma_len);
}

/* field by field, as op_bth_decode (a WRITE's first packet has one) */
op_status_t op_reth_decode(const uint8_t *buf, size_t len, struct op_reth *out)
{
    struct wire_cur c;
    wc_init(&c, buf, len);
    uint64_t va = wc_u64(&c);
    uint32_t rkey = wc_u32(&c), dma_len = wc_u32(&c);
    if (c.err != OP_OK)
        return c.err;
    out->va = va;
    out->rkey = rkey;
    out->dma_len = dma_len;
    return OP_OK;
}

void op_aeth_encode(const struct op_aeth *h, uint8_t out[OP_AETH_LEN])
{
    wp_u24(wp_u8(out, h->syndrome), h->msn);
}

op_status_t op_aeth_decode(const uint8_t *buf, size_t len, struct op_aeth *out)
{
    struct op_aeth h;
    struct wire_cur c;
    wc_init(&c, buf, len);
    h.syndrome = wc_u8(&c);
    h.msn = wc_u24(&c);
    return wc_publish(&c, out, &h, sizeof h);
}

void op_deth_encode(const struct op_deth *h, uint8_t out[OP_DETH_LEN])
{
    uint8_t *p = wp_u32(out, h->qkey);
    p = wp_u8(p, 0);
    wp_u24(p, h->src_qp);
}

op_status_t op_deth_decode(const uint8_t *buf, size_t len, struct op_deth *out)
{
    struct op_deth h;
    struct wire_cur c;
    wc_init(&c, buf, len);
    h.qkey = wc_u32(&c);
    (void)wc_u8(&c); /* reserved */
    h.src_qp = wc_u24(&c);
    return wc_publish(&c, out, &h, sizeof h);
}

void op_immdt_encode(uint32_t imm, uint8_t out[OP_IMMDT_LEN])
{
    wp_u32(out, imm);
}

op_status_t op_immdt_decode(const uint8_t *buf, size_t len, uint32_t *imm)
{
    uint64_t v;
    op_status_t st = wc_decode_be(buf, len, 4, &v);
    if (st == OP_OK)
        *imm = (uint32_t)v;
    return st;
}
