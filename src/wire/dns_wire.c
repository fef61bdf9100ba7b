/* DNS message bytes (RFC 1035 section 4.1) through the bounds-checked
 * cursor: header, names with compression pointers, questions, records. */
#include "offpath/wire.h"
#include "wire_cursor.h"

static const char *const werr_names[] = {
    "ok", "truncated", "bad label type", "forward compression pointer",
    "compression pointer loop", "name longer than 255 octets", "RDLENGTH past the end",
};

const char *op_dns_werr_str(int e)
{
    return e >= 0 && e < OP_DNS_W_ERRS_ ? werr_names[e] : "unknown";
}

/* RFC 1035 4.1.1: one table for the decoder and the encoder */
static const struct wire_field dns_hdr_layout[] = {
    WIRE_FIELD(struct op_dns_hdr, id),      WIRE_FIELD(struct op_dns_hdr, flags),
    WIRE_FIELD(struct op_dns_hdr, qdcount), WIRE_FIELD(struct op_dns_hdr, ancount),
    WIRE_FIELD(struct op_dns_hdr, nscount), WIRE_FIELD(struct op_dns_hdr, arcount),
};
#define DNS_HDR_FIELDS (sizeof dns_hdr_layout / sizeof dns_hdr_layout[0])

op_status_t op_dns_hdr_decode(const uint8_t *msg, size_t len, struct op_dns_hdr *h)
{
    struct wire_cur c;
    struct op_dns_hdr v;
    wc_init(&c, msg, len);
    wc_fields(&c, &v, dns_hdr_layout, DNS_HDR_FIELDS);
    return wc_publish(&c, h, &v, sizeof(v));
}

void op_dns_hdr_encode(const struct op_dns_hdr *h, uint8_t out[OP_DNS_HDR_LEN])
{
    wp_fields(out, h, dns_hdr_layout, DNS_HDR_FIELDS);
}

/* Where a pointer may go: before the pointer itself (else forward) and
 * before the start of the run being read (else it could come back here). */
static int pointer_check(size_t target, size_t ptr_at, size_t run_start)
{
    if (target >= ptr_at)
        return OP_DNS_W_PTR_FORWARD;
    if (target >= run_start)
        return OP_DNS_W_PTR_LOOP;
    return OP_DNS_W_OK;
}

int op_dns_name_decode(const uint8_t *msg, size_t len, size_t *off,
                       uint8_t name[OP_DNS_NAME_MAX], size_t *name_len)
{
    struct wire_cur c;
    size_t pos = *off, run_start = *off, end = 0, n = 0;
    bool jumped = false;
    if (pos > len)
        return OP_DNS_W_TRUNCATED;
    wc_init(&c, msg + pos, len - pos);
    for (;;) {
        uint8_t b = wc_u8(&c);
        if (c.err != OP_OK)
            return OP_DNS_W_TRUNCATED;
        if ((b & 0xc0) == 0xc0) {
            size_t target = (size_t)(b & 0x3f) << 8 | wc_u8(&c);
            if (c.err != OP_OK)
                return OP_DNS_W_TRUNCATED;
            int e = pointer_check(target, pos, run_start);
            if (e != OP_DNS_W_OK)
                return e;
            if (!jumped)
                end = pos + 2;
            jumped = true;
            pos = run_start = target;
            wc_init(&c, msg + pos, len - pos);
            continue;
        }
        if (b > OP_DNS_LABEL_MAX)
            return OP_DNS_W_LABEL_TYPE;
        if (n + 1 + b > OP_DNS_NAME_MAX)
            return OP_DNS_W_NAME_LONG;
        const uint8_t *label = wc_take(&c, b);
        if (label == NULL)
            return OP_DNS_W_TRUNCATED;
        name[n++] = b;
        memcpy(name + n, label, b);
        n += b;
        pos += 1 + (size_t)b;
        if (b == 0)
            break;
    }
    *off = jumped ? end : pos;
    *name_len = n;
    return OP_DNS_W_OK;
}

int op_dns_question_decode(const uint8_t *msg, size_t len, size_t *off, struct op_dns_rr *q)
{
    int e = op_dns_name_decode(msg, len, off, q->name, &q->name_len);
    if (e != OP_DNS_W_OK)
        return e;
    struct wire_cur c;
    wc_init(&c, msg + *off, len - *off);
    q->type = wc_u16(&c);
    q->cls = wc_u16(&c);
    q->ttl = 0;
    q->rdlen = 0;
    if (c.err != OP_OK)
        return OP_DNS_W_TRUNCATED;
    *off += 4;
    q->rdata_off = *off;
    return OP_DNS_W_OK;
}

int op_dns_rr_decode(const uint8_t *msg, size_t len, size_t *off, struct op_dns_rr *rr)
{
    int e = op_dns_question_decode(msg, len, off, rr);
    if (e != OP_DNS_W_OK)
        return e;
    struct wire_cur c;
    wc_init(&c, msg + *off, len - *off);
    rr->ttl = wc_u32(&c);
    rr->rdlen = wc_u16(&c);
    if (c.err != OP_OK)
        return OP_DNS_W_TRUNCATED;
    if (wc_take(&c, rr->rdlen) == NULL)
        return OP_DNS_W_RDATA_LEN;
    rr->rdata_off = *off + 6;
    *off += 6 + (size_t)rr->rdlen;
    return OP_DNS_W_OK;
}
