/* hostar packets (docs/wire.md section 11): the UD envelope INC packets use
 * (ud_internal.h), to OP_HAR_QPN with OP_HAR_QKEY, the 48-byte hostar
 * header, the payload (data elements; none on an ACK), zero pad to 4 bytes,
 * the ICRC. The decoder accepts exactly what op_har_frame writes, BTH byte 4
 * (FECN, BECN: variant) aside. */
#include "ud_internal.h"

#define HAR_FLAGS_OFF (UD_ENV_LEN + 32)
#define HAR_ACKNO_OFF (UD_ENV_LEN + 36) /* after flags and the reserved bytes */
#define PSN_MASK 0xffffffu

static const struct ud_qp har_qp = {.qpn = OP_HAR_QPN, .qkey = OP_HAR_QKEY};

#define HAR_FIELD(member) WIRE_FIELD(struct op_har_hdr, member)

/* The header, in wire order (docs/wire.md section 11). */
static const struct wire_field har_layout[] = {
    HAR_FIELD(version), HAR_FIELD(kind), HAR_FIELD(op), HAR_FIELD(dtype),
    HAR_FIELD(session), HAR_FIELD(src), HAR_FIELD(dst), HAR_FIELD(tsn),
    HAR_FIELD(call), HAR_FIELD(step), HAR_FIELD(count), HAR_FIELD(offset),
    HAR_FIELD(total), HAR_FIELD(flags), {WIRE_GAP, 3}, HAR_FIELD(ack),
    HAR_FIELD(sack),
};
#define HAR_FIELDS (sizeof har_layout / sizeof har_layout[0])

size_t op_har_frame(const struct op_har_hdr *h, size_t payload_len, uint8_t *out, size_t cap)
{
    uint8_t *p = ud_frame(out, cap, &har_qp, h->tsn & PSN_MASK, OP_HAR_HDR_LEN, payload_len);
    if (p == NULL)
        return 0;
    wp_fields(p, h, har_layout, HAR_FIELDS);
    return ud_len(OP_HAR_HDR_LEN, payload_len);
}

void op_har_stamp_ack(uint8_t *roce, uint32_t ack, uint64_t sack)
{
    roce[HAR_FLAGS_OFF] |= OP_HAR_F_ACK;
    wp_u64(wp_u32(roce + HAR_ACKNO_OFF, ack), sack);
}

/* Envelope and header: what both the decoder and the classifier check. A
 * packet too short to hold them (and the ICRC) is TRUNCATED whatever its
 * fields say. */
static uint64_t take_prefix(struct wire_cur *c, struct op_har_pkt *pkt)
{
    struct op_deth deth;
    wc_need(c, OP_HAR_PREFIX_LEN + OP_ICRC_LEN);
    ud_take_envelope(c, &har_qp, &pkt->bth, &deth);
    /* the reserved bytes: only op_har_decode checks them (the classifier
     * op_har_session_of does not) */
    uint64_t reserved = wc_fields(c, &pkt->hdr, har_layout, HAR_FIELDS);
    wc_check(c, pkt->bth.psn == (pkt->hdr.tsn & PSN_MASK));
    return reserved;
}

static bool ack_fields_ok(const struct op_har_hdr *h, uint64_t reserved)
{
    if (reserved != 0 || (h->flags & ~OP_HAR_F_ACK) != 0)
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

static void take_payload(struct wire_cur *c, struct op_har_pkt *pkt, uint64_t reserved)
{
    long n = payload_len(&pkt->hdr);
    wc_check(c, n >= 0 && ack_fields_ok(&pkt->hdr, reserved));
    if (c->err != OP_OK)
        return;
    uint8_t pad = ud_pad(OP_HAR_HDR_LEN, (size_t)n);
    wc_check(c, pkt->bth.padcnt == pad);
    /* shorter than the header announces is TRUNCATED, whatever the pad holds */
    wc_need(c, (size_t)n + pad + OP_ICRC_LEN);
    pkt->payload = ud_take_tail(c, (size_t)n, pad);
    pkt->payload_len = (size_t)n;
}

op_status_t op_har_decode(const uint8_t *roce, size_t len, struct op_har_pkt *out)
{
    struct op_har_pkt pkt = {0};
    struct wire_cur c;
    wc_init(&c, roce, len);
    uint64_t reserved = take_prefix(&c, &pkt);
    take_payload(&c, &pkt, reserved);
    return wc_publish(&c, out, &pkt, sizeof pkt);
}

bool op_har_session_of(const uint8_t *roce, size_t len, uint32_t *session)
{
    struct op_har_pkt pkt = {0};
    struct wire_cur c;
    wc_init(&c, roce, len);
    (void)take_prefix(&c, &pkt);
    return wc_publish(&c, session, &pkt.hdr.session, sizeof *session) == OP_OK;
}
