/* Rescue messages (docs/wire.md section 12): fixed 48-byte header, then the
 * data a DATA message carries. Decoded through the cursor like every packet. */
#include "offpath/wire.h"
#include "wire_cursor.h"

#define RSC_MAGIC 0x4f505253u /* "OPRS" */
#define RSC_VERSION 1

static bool type_valid(uint8_t t) { return t >= OP_RSC_STATUS_REQ && t <= OP_RSC_DATA; }

size_t op_rsc_encode(const struct op_rsc_msg *m, uint8_t *out, size_t cap)
{
    bool has_data = m->type == OP_RSC_DATA;
    size_t len = has_data ? m->len : 0;
    if (!type_valid(m->type) || m->state >= OP_RSC_STATES_ || len > OP_RSC_MAX_DATA ||
        cap < OP_RSC_HDR_LEN + len || (len > 0 && m->data == NULL))
        return 0;
    uint8_t *p = wp_u32(out, RSC_MAGIC);
    p = wp_u8(p, RSC_VERSION);
    p = wp_u8(p, m->type);
    p = wp_u8(p, m->state);
    p = wp_u8(p, 0);
    p = wp_u32(p, m->job);
    p = wp_u32(p, m->comm);
    p = wp_u32(p, m->nonce);
    p = wp_u64(p, m->seq);
    p = wp_u64(p, m->completed);
    p = wp_u32(p, m->offset);
    p = wp_u32(p, m->total);
    p = wp_u32(p, (uint32_t)len);
    if (len > 0)
        memcpy(p, m->data, len);
    return OP_RSC_HDR_LEN + len;
}

op_status_t op_rsc_decode(const uint8_t *buf, size_t len, struct op_rsc_msg *out)
{
    struct wire_cur c;
    struct op_rsc_msg m = {0};
    wc_init(&c, buf, len);
    wc_check(&c, wc_u32(&c) == RSC_MAGIC);
    wc_check(&c, wc_u8(&c) == RSC_VERSION);
    m.type = wc_u8(&c);
    wc_check(&c, type_valid(m.type));
    m.state = wc_u8(&c);
    wc_check(&c, m.state < OP_RSC_STATES_);
    wc_zeros(&c, 1);
    m.job = wc_u32(&c);
    m.comm = wc_u32(&c);
    m.nonce = wc_u32(&c);
    m.seq = wc_u64(&c);
    m.completed = wc_u64(&c);
    m.offset = wc_u32(&c);
    m.total = wc_u32(&c);
    m.len = wc_u32(&c);
    /* only DATA carries bytes, never past the total it announces */
    wc_check(&c, m.type == OP_RSC_DATA || m.len == 0);
    wc_check(&c, m.len <= OP_RSC_MAX_DATA);
    wc_check(&c, m.type != OP_RSC_DATA || (uint64_t)m.offset + m.len <= m.total);
    m.data = wc_take(&c, m.len);
    wc_check(&c, c.left == 0); /* nothing trailing */
    return wc_publish(&c, out, &m, sizeof(m));
}
