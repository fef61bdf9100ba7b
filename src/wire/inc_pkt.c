/* Whole INC packets: the UD envelope (ud_internal.h) to OP_INC_QPN, the INC
 * header, the payload, zero pad to 4 bytes, the ICRC (docs/wire.md).
 *
 * The decoder accepts exactly what op_inc_encode writes (the PSN, the INC
 * header and the payload aside), except BTH byte 4 (FECN, BECN, reserved):
 * that byte is variant, masked by the ICRC, and left alone. */
#include <string.h>

#include "ud_internal.h"

static const struct ud_qp inc_qp = {.qpn = OP_INC_QPN, .qkey = OP_INC_QKEY};

bool op_inc_is_inc(const uint8_t *roce, size_t len)
{
    return roce != NULL && len >= OP_INC_PREFIX_LEN && roce[0] == OP_UD_SEND_ONLY &&
           ld_be24(roce + 5) == OP_INC_QPN && ld_be32(roce + OP_BTH_LEN) == OP_INC_QKEY;
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

/* A control packet is valid only with a valid control payload, so it is
 * decoded here, once, for every receiver (switch, client, port). */
static void inc_take_ctrl(struct wire_cur *c, struct op_inc_pkt *pkt)
{
    pkt->ctrl = (struct op_inc_ctrl){0};
    if (c->err == OP_OK && pkt->hdr.kind == OP_INC_KIND_CTRL)
        wc_check(c, op_inc_ctrl_decode(pkt->payload, pkt->payload_len, &pkt->ctrl) == OP_OK);
}

static void inc_take_payload(struct wire_cur *c, struct op_inc_pkt *pkt)
{
    size_t n = inc_payload_len(&pkt->hdr);
    uint8_t pad = ud_pad(OP_INC_HDR_LEN, n);
    wc_check(c, n > 0 && pkt->bth.padcnt == pad);
    pkt->payload = ud_take_tail(c, n, pad);
    pkt->payload_len = n;
    inc_take_ctrl(c, pkt);
}

op_status_t op_inc_decode(const uint8_t *roce, size_t len, struct op_inc_pkt *out)
{
    struct op_inc_pkt pkt;
    struct wire_cur c;
    wc_init(&c, roce, len);
    ud_take_envelope(&c, &inc_qp, &pkt.bth, &pkt.deth);
    inc_take_hdr(&c, &pkt.hdr);
    if (c.err == OP_OK)
        inc_take_payload(&c, &pkt);
    return wc_publish(&c, out, &pkt, sizeof pkt);
}

size_t op_inc_encode(const struct op_inc_hdr *h, uint32_t psn, const void *payload,
                     size_t payload_len, uint8_t *out, size_t cap)
{
    uint8_t *p = ud_frame(out, cap, &inc_qp, psn, OP_INC_HDR_LEN, payload_len);
    if (p == NULL)
        return 0;
    op_inc_hdr_encode(h, p);
    if (payload_len > 0)
        memcpy(p + OP_INC_HDR_LEN, payload, payload_len);
    return ud_len(OP_INC_HDR_LEN, payload_len);
}
