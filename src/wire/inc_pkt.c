/* Whole INC packets: RoCEv2 UD SEND_ONLY (BTH + DETH) to OP_INC_QPN, the INC
 * header, the payload, zero pad to 4 bytes, the ICRC (docs/wire.md).
 *
 * The decoder accepts exactly what op_inc_encode writes (the PSN, the INC
 * header and the payload aside), except BTH byte 4 (FECN, BECN, reserved):
 * that byte is variant, masked by the ICRC, and left alone. */
#include <string.h>

#include "offpath/wire.h"
#include "wire_cursor.h"

#define INC_PKEY 0xffffu
#define BTH_VARIANT_BYTE 4
#define BTH_ACKREQ_BYTE 8
#define BTH_RESV7_MASK 0x7fu
#define DETH_RESERVED_BYTE 4

/* Pad after the payload so that INC header + payload + pad is a multiple of 4
 * (the BTH PadCnt). */
static uint8_t inc_pad(size_t payload_len)
{
    return (uint8_t)((0u - (OP_INC_HDR_LEN + payload_len)) & 3u);
}

bool op_inc_is_inc(const uint8_t *roce, size_t len)
{
    return roce != NULL && len >= OP_INC_PREFIX_LEN && roce[0] == OP_UD_SEND_ONLY &&
           ld_be24(roce + 5) == OP_INC_QPN && ld_be32(roce + OP_BTH_LEN) == OP_INC_QKEY;
}

/* BTH as op_inc_encode writes it: only the PSN and the pad count vary. */
static void inc_take_bth(struct wire_cur *c, struct op_bth *bth)
{
    const uint8_t *b = wc_take(c, OP_BTH_LEN);
    if (b == NULL)
        return;
    (void)op_bth_decode(b, OP_BTH_LEN, bth);
    wc_check(c, bth->opcode == OP_UD_SEND_ONLY && bth->tver == 0);
    wc_check(c, bth->dest_qp == OP_INC_QPN && bth->pkey == INC_PKEY);
    wc_check(c, !bth->se && !bth->migreq && !bth->ackreq);
    wc_check(c, (b[BTH_ACKREQ_BYTE] & BTH_RESV7_MASK) == 0);
}

static void inc_take_deth(struct wire_cur *c, struct op_deth *deth)
{
    const uint8_t *b = wc_take(c, OP_DETH_LEN);
    if (b == NULL)
        return;
    (void)op_deth_decode(b, OP_DETH_LEN, deth);
    wc_check(c, deth->qkey == OP_INC_QKEY && deth->src_qp == OP_INC_QPN);
    wc_check(c, b[DETH_RESERVED_BYTE] == 0);
}

static void inc_take_hdr(struct wire_cur *c, struct op_inc_hdr *hdr)
{
    const uint8_t *b = wc_take(c, OP_INC_HDR_LEN);
    if (b != NULL && op_inc_hdr_decode(b, OP_INC_HDR_LEN, hdr) != OP_OK)
        wc_fail(c, OP_ERR_MALFORMED);
}

/* The payload length the header announces; 0 if the header is inconsistent. */
static size_t inc_payload_len(const struct op_inc_hdr *h)
{
    if (h->kind == OP_INC_KIND_CTRL)
        return h->count == 0 ? OP_INC_CTRL_LEN : 0;
    if (!op_red_valid(h->op, h->dtype) || h->count == 0)
        return 0;
    size_t n = (size_t)h->count * op_red_type_size(h->dtype);
    return n <= OP_INC_MAX_DATA ? n : 0;
}

static void inc_take_payload(struct wire_cur *c, struct op_inc_pkt *pkt)
{
    size_t n = inc_payload_len(&pkt->hdr);
    wc_check(c, n > 0 && pkt->bth.padcnt == inc_pad(n));
    pkt->payload = wc_take(c, n);
    pkt->payload_len = n;
    wc_zeros(c, inc_pad(n));
    (void)wc_take(c, OP_ICRC_LEN);
    wc_check(c, c->left == 0); /* trailing bytes */
    if (c->err == OP_OK && pkt->hdr.kind == OP_INC_KIND_CTRL) {
        struct op_inc_ctrl ctrl;
        wc_check(c, op_inc_ctrl_decode(pkt->payload, n, &ctrl) == OP_OK);
    }
}

op_status_t op_inc_decode(const uint8_t *roce, size_t len, struct op_inc_pkt *out)
{
    struct op_inc_pkt pkt;
    struct wire_cur c;
    wc_init(&c, roce, len);
    inc_take_bth(&c, &pkt.bth);
    inc_take_deth(&c, &pkt.deth);
    inc_take_hdr(&c, &pkt.hdr);
    if (c.err == OP_OK)
        inc_take_payload(&c, &pkt);
    return wc_publish(&c, out, &pkt, sizeof pkt);
}

size_t op_inc_encode(const struct op_inc_hdr *h, uint32_t psn, const void *payload,
                     size_t payload_len, uint8_t *out, size_t cap)
{
    uint8_t pad = inc_pad(payload_len);
    if (out == NULL || payload_len > cap || (size_t)OP_INC_PREFIX_LEN + pad > cap - payload_len)
        return 0;
    const struct op_bth bth = {
        .opcode = OP_UD_SEND_ONLY, .padcnt = pad, .pkey = INC_PKEY, .dest_qp = OP_INC_QPN,
        .psn = psn,
    };
    const struct op_deth deth = {.qkey = OP_INC_QKEY, .src_qp = OP_INC_QPN};
    op_bth_encode(&bth, out);
    op_deth_encode(&deth, out + OP_BTH_LEN);
    op_inc_hdr_encode(h, out + OP_BTH_LEN + OP_DETH_LEN);
    uint8_t *p = out + OP_INC_PREFIX_LEN;
    if (payload_len > 0)
        memcpy(p, payload, payload_len);
    memset(p + payload_len, 0, pad);
    return OP_INC_PREFIX_LEN + payload_len + pad;
}
