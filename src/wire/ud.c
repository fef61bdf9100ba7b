/* The UD SEND_ONLY envelope and tail of INC and hostar packets
 * (ud_internal.h). */
#include <string.h>

#include "ud_internal.h"

#define UD_PKEY 0xffffu /* the default partition */
#define BTH_ACKREQ_BYTE 8
#define BTH_RESV7_MASK 0x7fu
#define DETH_RESERVED_BYTE 4

uint8_t ud_pad(size_t hdr_len, size_t payload_len)
{
    return (uint8_t)((0u - (hdr_len + payload_len)) & 3u);
}

size_t ud_len(size_t hdr_len, size_t payload_len)
{
    return UD_ENV_LEN + hdr_len + payload_len + ud_pad(hdr_len, payload_len);
}

uint8_t *ud_frame(uint8_t *out, size_t cap, const struct ud_qp *qp, uint32_t psn,
                  size_t hdr_len, size_t payload_len)
{
    uint8_t pad = ud_pad(hdr_len, payload_len);
    /* written so that nothing overflows whatever payload_len is */
    if (out == NULL || payload_len > cap || UD_ENV_LEN + hdr_len + pad > cap - payload_len)
        return NULL;
    const struct op_bth bth = {.opcode = OP_UD_SEND_ONLY, .padcnt = pad, .pkey = UD_PKEY,
                               .dest_qp = qp->qpn, .psn = psn};
    const struct op_deth deth = {.qkey = qp->qkey, .src_qp = qp->qpn};
    op_bth_encode(&bth, out);
    op_deth_encode(&deth, out + OP_BTH_LEN);
    memset(out + UD_ENV_LEN + hdr_len + payload_len, 0, pad);
    return out + UD_ENV_LEN;
}

static void take_bth(struct wire_cur *c, uint32_t qpn, struct op_bth *bth)
{
    const uint8_t *b = wc_take(c, OP_BTH_LEN);
    if (b == NULL)
        return;
    (void)op_bth_decode(b, OP_BTH_LEN, bth);
    wc_check(c, bth->opcode == OP_UD_SEND_ONLY && bth->tver == 0);
    wc_check(c, bth->dest_qp == qpn && bth->pkey == UD_PKEY);
    wc_check(c, !bth->se && !bth->migreq && !bth->ackreq);
    wc_check(c, (b[BTH_ACKREQ_BYTE] & BTH_RESV7_MASK) == 0);
}

static void take_deth(struct wire_cur *c, const struct ud_qp *qp, struct op_deth *deth)
{
    const uint8_t *b = wc_take(c, OP_DETH_LEN);
    if (b == NULL)
        return;
    (void)op_deth_decode(b, OP_DETH_LEN, deth);
    wc_check(c, deth->qkey == qp->qkey && deth->src_qp == qp->qpn);
    wc_check(c, b[DETH_RESERVED_BYTE] == 0);
}

void ud_take_envelope(struct wire_cur *c, const struct ud_qp *qp, struct op_bth *bth,
                      struct op_deth *deth)
{
    take_bth(c, qp->qpn, bth);
    take_deth(c, qp, deth);
}

const uint8_t *ud_take_tail(struct wire_cur *c, size_t payload_len, uint8_t pad)
{
    const uint8_t *payload = wc_take(c, payload_len);
    wc_zeros(c, pad);
    (void)wc_take(c, OP_ICRC_LEN);
    wc_check(c, c->left == 0); /* trailing bytes */
    return payload;
}
