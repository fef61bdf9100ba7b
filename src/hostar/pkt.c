/* hostar packets: RoCEv2 UD SEND_ONLY to OP_HAR_QPN, the 48-byte hostar
 * header, the payload (data elements; none on an ACK), zero pad to 4 bytes,
 * the ICRC (docs/wire.md section 11). The decoder accepts exactly
 * what op_har_frame writes, BTH byte 4 (FECN, BECN: variant) aside. */
#include <string.h>

#include "hostar_internal.h"

#define HAR_PKEY 0xffffu
#define BTH_ACKREQ_BYTE 8
#define BTH_RESV7_MASK 0x7fu
#define DETH_RESERVED_BYTE 4
#define HAR_HDR_OFF (OP_BTH_LEN + OP_DETH_LEN)
#define HAR_ACK_OFF (HAR_HDR_OFF + 32) /* flags, 3 reserved bytes, ack, sack */

static uint8_t har_pad(size_t payload_len)
{
    return (uint8_t)((0u - (OP_HAR_HDR_LEN + payload_len)) & 3u);
}

uint16_t har_ld16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

uint32_t har_ld32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

uint8_t *har_st16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

uint8_t *har_st32(uint8_t *p, uint32_t v)
{
    p = har_st16(p, (uint16_t)(v >> 16));
    return har_st16(p, (uint16_t)v);
}

uint64_t har_ld64(const uint8_t *p)
{
    return (uint64_t)har_ld32(p) << 32 | har_ld32(p + 4);
}

uint8_t *har_st64(uint8_t *p, uint64_t v)
{
    return har_st32(har_st32(p, (uint32_t)(v >> 32)), (uint32_t)v);
}

static void hdr_encode(const struct op_har_hdr *h, uint8_t *out)
{
    uint8_t *p = out;
    *p++ = h->version;
    *p++ = h->kind;
    *p++ = h->op;
    *p++ = h->dtype;
    p = har_st32(p, h->session);
    p = har_st16(p, h->src);
    p = har_st16(p, h->dst);
    p = har_st32(p, h->tsn);
    p = har_st32(p, h->call);
    p = har_st16(p, h->step);
    p = har_st16(p, h->count);
    p = har_st32(p, h->offset);
    p = har_st32(p, h->total);
    *p++ = h->flags;
    memset(p, 0, 3);
    p = har_st32(p + 3, h->ack);
    har_st64(p, h->sack);
}

static void hdr_decode(const uint8_t *b, struct op_har_hdr *h)
{
    *h = (struct op_har_hdr){.version = b[0], .kind = b[1], .op = b[2], .dtype = b[3],
                             .session = har_ld32(b + 4), .src = har_ld16(b + 8),
                             .dst = har_ld16(b + 10), .tsn = har_ld32(b + 12),
                             .call = har_ld32(b + 16), .step = har_ld16(b + 20),
                             .count = har_ld16(b + 22), .offset = har_ld32(b + 24),
                             .total = har_ld32(b + 28), .flags = b[32],
                             .ack = har_ld32(b + 36), .sack = har_ld64(b + 40)};
}

size_t op_har_frame(const struct op_har_hdr *h, size_t payload_len, uint8_t *out, size_t cap)
{
    uint8_t pad = har_pad(payload_len);
    if (out == NULL || payload_len > cap || (size_t)OP_HAR_PREFIX_LEN + pad > cap - payload_len)
        return 0;
    const struct op_bth bth = {.opcode = OP_UD_SEND_ONLY, .padcnt = pad, .pkey = HAR_PKEY,
                               .dest_qp = OP_HAR_QPN, .psn = h->tsn & 0xffffffu};
    const struct op_deth deth = {.qkey = OP_HAR_QKEY, .src_qp = OP_HAR_QPN};
    op_bth_encode(&bth, out);
    op_deth_encode(&deth, out + OP_BTH_LEN);
    hdr_encode(h, out + HAR_HDR_OFF);
    memset(out + OP_HAR_PREFIX_LEN + payload_len, 0, pad);
    return OP_HAR_PREFIX_LEN + payload_len + pad;
}

/* BTH and DETH as op_har_frame writes them: only the PSN and PadCnt vary. */
static bool envelope_ok(const uint8_t *roce, struct op_bth *bth)
{
    struct op_deth deth;
    (void)op_bth_decode(roce, OP_BTH_LEN, bth);
    (void)op_deth_decode(roce + OP_BTH_LEN, OP_DETH_LEN, &deth);
    return bth->opcode == OP_UD_SEND_ONLY && bth->tver == 0 && bth->dest_qp == OP_HAR_QPN &&
           bth->pkey == HAR_PKEY && !bth->se && !bth->migreq && !bth->ackreq &&
           (roce[BTH_ACKREQ_BYTE] & BTH_RESV7_MASK) == 0 && deth.qkey == OP_HAR_QKEY &&
           deth.src_qp == OP_HAR_QPN && roce[OP_BTH_LEN + DETH_RESERVED_BYTE] == 0 &&
           bth->psn == (har_ld32(roce + HAR_HDR_OFF + 12) & 0xffffffu);
}

static bool ack_fields_ok(const struct op_har_hdr *h, const uint8_t *b)
{
    bool reserved_zero = b[33] == 0 && b[34] == 0 && b[35] == 0;
    if (!reserved_zero || (h->flags & ~OP_HAR_F_ACK) != 0)
        return false;
    return (h->flags & OP_HAR_F_ACK) != 0 || (h->ack == 0 && h->sack == 0);
}

/* The payload length the header announces, or -1 when the header is
 * inconsistent. */
static long payload_len(const struct op_har_hdr *h)
{
    if (h->version != OP_HAR_VERSION)
        return -1;
    if (h->kind == OP_HAR_KIND_ACK)
        return h->op == 0 && h->dtype == 0 && h->tsn == 0 && h->call == 0 && h->step == 0 &&
                       h->count == 0 && h->offset == 0 && h->total == 0 &&
                       (h->flags & OP_HAR_F_ACK)
                   ? 0
                   : -1;
    if (h->kind != OP_HAR_KIND_DATA || h->call == 0 || h->count == 0 ||
        h->op >= OP_RED_OP_COUNT_ || h->dtype >= OP_RED_TYPE_COUNT_ ||
        !op_red_valid(h->op, h->dtype) || (uint64_t)h->offset + h->count > h->total)
        return -1;
    size_t n = (size_t)h->count * op_red_type_size(h->dtype);
    return n <= OP_HAR_MAX_DATA ? (long)n : -1;
}

op_status_t op_har_decode(const uint8_t *roce, size_t len, struct op_har_pkt *out)
{
    struct op_har_pkt pkt = {0};
    if (roce == NULL || len < OP_HAR_PREFIX_LEN + OP_ICRC_LEN)
        return OP_ERR_TRUNCATED;
    if (!envelope_ok(roce, &pkt.bth))
        return OP_ERR_MALFORMED;
    hdr_decode(roce + HAR_HDR_OFF, &pkt.hdr);
    long n = payload_len(&pkt.hdr);
    if (n < 0 || !ack_fields_ok(&pkt.hdr, roce + HAR_HDR_OFF) ||
        pkt.bth.padcnt != har_pad((size_t)n))
        return OP_ERR_MALFORMED;
    uint8_t pad = har_pad((size_t)n);
    size_t want = OP_HAR_PREFIX_LEN + (size_t)n + pad + OP_ICRC_LEN;
    if (len != want)
        return len < want ? OP_ERR_TRUNCATED : OP_ERR_MALFORMED;
    const uint8_t *p = roce + OP_HAR_PREFIX_LEN;
    for (uint8_t i = 0; i < pad; i++)
        if (p[n + i] != 0)
            return OP_ERR_MALFORMED;
    pkt.payload = p;
    pkt.payload_len = (size_t)n;
    *out = pkt;
    return OP_OK;
}

/* Put an ack on a framed packet of len bytes (ICRC not yet added). */
void har_stamp_ack(uint8_t *roce, uint32_t ack, uint64_t sack)
{
    roce[HAR_ACK_OFF] |= OP_HAR_F_ACK;
    har_st64(har_st32(roce + HAR_ACK_OFF + 4, ack), sack);
}

bool op_har_session_of(const uint8_t *roce, size_t len, uint32_t *session)
{
    struct op_bth bth;
    if (roce == NULL || len < OP_HAR_PREFIX_LEN + OP_ICRC_LEN || !envelope_ok(roce, &bth))
        return false;
    *session = har_ld32(roce + HAR_HDR_OFF + 4);
    return true;
}
