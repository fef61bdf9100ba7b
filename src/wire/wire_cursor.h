/* Internal to src/wire: a bounds-checked read cursor with a sticky error
 * (after Knot's wire_ctx_t) and big-endian store helpers.
 *
 * Every read checks the remaining length first. The first failure (a short
 * buffer or a failed field check) is kept in err; from then on every read
 * returns 0 and moves nothing, so a parser does all its reads and checks the
 * error once at the end. Nothing here reads before p or past p + left. */
#ifndef OFFPATH_WIRE_CURSOR_H
#define OFFPATH_WIRE_CURSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "offpath/common.h"

struct wire_cur {
    const uint8_t *p;
    size_t left;
    op_status_t err;
};

static inline void wc_init(struct wire_cur *c, const uint8_t *buf, size_t len)
{
    c->p = buf;
    c->left = buf != NULL ? len : 0;
    c->err = OP_OK;
}

/* Record the first error only. */
static inline void wc_fail(struct wire_cur *c, op_status_t err)
{
    if (c->err == OP_OK)
        c->err = err;
    c->left = 0;
}

/* A field check: a false cond marks the input malformed. */
static inline void wc_check(struct wire_cur *c, bool cond)
{
    if (!cond)
        wc_fail(c, OP_ERR_MALFORMED);
}

/* Take n bytes: a pointer to them, or NULL (and the sticky error) if fewer
 * remain or an error was recorded before. */
static inline const uint8_t *wc_take(struct wire_cur *c, size_t n)
{
    if (c->err != OP_OK)
        return NULL;
    if (c->left < n) {
        wc_fail(c, OP_ERR_TRUNCATED);
        return NULL;
    }
    const uint8_t *at = c->p;
    c->p += n;
    c->left -= n;
    return at;
}

/* Require n more bytes without taking them, for a format that calls a short
 * input truncated before it looks at any field. */
static inline void wc_need(struct wire_cur *c, size_t n)
{
    if (c->err == OP_OK && c->left < n)
        wc_fail(c, OP_ERR_TRUNCATED);
}

/* Big-endian value of n (1..8) bytes; 0 on failure. */
static inline uint64_t wc_be(struct wire_cur *c, size_t n)
{
    const uint8_t *b = wc_take(c, n);
    uint64_t v = 0;
    if (b == NULL)
        return 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | b[i];
    return v;
}

static inline uint8_t wc_u8(struct wire_cur *c) { return (uint8_t)wc_be(c, 1); }
static inline uint16_t wc_u16(struct wire_cur *c) { return (uint16_t)wc_be(c, 2); }
static inline uint32_t wc_u24(struct wire_cur *c) { return (uint32_t)wc_be(c, 3); }
static inline uint32_t wc_u32(struct wire_cur *c) { return (uint32_t)wc_be(c, 4); }
static inline uint64_t wc_u64(struct wire_cur *c) { return wc_be(c, 8); }

/* Skip n bytes that must all be zero (reserved fields, pad). */
static inline void wc_zeros(struct wire_cur *c, size_t n)
{
    const uint8_t *b = wc_take(c, n);
    for (size_t i = 0; b != NULL && i < n; i++)
        wc_check(c, b[i] == 0);
}

/* Copy a decoded value to the caller only when decoding succeeded, so a
 * failed decode leaves the caller's struct as it was. */
static inline op_status_t wc_publish(const struct wire_cur *c, void *out, const void *val,
                                     size_t size)
{
    if (c->err == OP_OK)
        memcpy(out, val, size);
    return c->err;
}

/* A header that is one big-endian integer of n bytes (ImmDt, AtomicAckETH). */
static inline op_status_t wc_decode_be(const uint8_t *buf, size_t len, size_t n, uint64_t *v)
{
    struct wire_cur c;
    wc_init(&c, buf, len);
    uint64_t x = wc_be(&c, n);
    return wc_publish(&c, v, &x, sizeof x);
}

/* Big-endian stores; the caller owns the bounds. */
static inline uint8_t *wp_be(uint8_t *p, uint64_t v, size_t n)
{
    for (size_t i = n; i > 0; i--) {
        p[i - 1] = (uint8_t)v;
        v >>= 8;
    }
    return p + n;
}

static inline uint8_t *wp_u8(uint8_t *p, uint8_t v) { return wp_be(p, v, 1); }
static inline uint8_t *wp_u16(uint8_t *p, uint16_t v) { return wp_be(p, v, 2); }
static inline uint8_t *wp_u24(uint8_t *p, uint32_t v) { return wp_be(p, v & 0xffffffu, 3); }
static inline uint8_t *wp_u32(uint8_t *p, uint32_t v) { return wp_be(p, v, 4); }
static inline uint8_t *wp_u64(uint8_t *p, uint64_t v) { return wp_be(p, v, 8); }

/* A fixed layout as a table, so that one list of fields serves both the
 * encoder and the decoder (they cannot disagree). Each field is n bytes
 * big-endian on the wire, held in the host-order struct at off in an
 * unsigned integer member of exactly n bytes; WIRE_GAP marks n reserved
 * bytes, written as zeros. */
struct wire_field {
    uint16_t off;
    uint8_t n;
};
#define WIRE_GAP UINT16_MAX
#define WIRE_FIELD(type, member) {offsetof(type, member), sizeof(((type *)0)->member)}

static inline uint64_t wf_get(const void *s, const struct wire_field *f)
{
    const char *m = (const char *)s + f->off;
    switch (f->n) {
    case 1: return *(const uint8_t *)m;
    case 2: return *(const uint16_t *)m;
    case 4: return *(const uint32_t *)m;
    default: return *(const uint64_t *)m;
    }
}

static inline void wf_set(void *s, const struct wire_field *f, uint64_t v)
{
    char *m = (char *)s + f->off;
    switch (f->n) {
    case 1: *(uint8_t *)m = (uint8_t)v; break;
    case 2: *(uint16_t *)m = (uint16_t)v; break;
    case 4: *(uint32_t *)m = (uint32_t)v; break;
    default: *(uint64_t *)m = v;
    }
}

/* Read count fields into s. Returns the reserved bytes ORed together, for
 * the caller to require zero where its format does. */
static inline uint64_t wc_fields(struct wire_cur *c, void *s, const struct wire_field *f,
                                 size_t count)
{
    uint64_t reserved = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t v = wc_be(c, f[i].n);
        if (f[i].off == WIRE_GAP)
            reserved |= v;
        else
            wf_set(s, &f[i], v);
    }
    return reserved;
}

/* Write count fields of s; the caller owns the bounds. */
static inline uint8_t *wp_fields(uint8_t *p, const void *s, const struct wire_field *f,
                                 size_t count)
{
    for (size_t i = 0; i < count; i++)
        p = wp_be(p, f[i].off == WIRE_GAP ? 0 : wf_get(s, &f[i]), f[i].n);
    return p;
}

/* Host-order loads from a buffer the caller has bounds-checked. */
static inline uint32_t ld_be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* The Internet checksum (RFC 1071): n bytes at p added to sum (a
 * pseudo-header's, or 0), an odd last byte padded, folded, complemented. */
static inline uint16_t wire_inet_sum(uint32_t sum, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i + 1 < n; i += 2)
        sum += ld_be16(p + i);
    if (n & 1)
        sum += (uint32_t)p[n - 1] << 8;
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}
static inline uint32_t ld_be24(const uint8_t *p) { return (uint32_t)p[0] << 16 | ld_be16(p + 1); }
static inline uint32_t ld_be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | ld_be24(p + 1); }

#endif
