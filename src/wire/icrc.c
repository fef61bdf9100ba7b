/* RoCEv2 invariant CRC (IBTA annex A17; docs/wire.md section 7): CRC-32 over 8 bytes of
 * 0xFF, the IP header with the fields routers change set to ones (IPv4: TOS,
 * TTL and checksum; IPv6: traffic class, flow label and hop limit), the UDP
 * header with checksum 0xffff, the BTH with byte 4 set to 0xff, then
 * everything after the BTH up to the ICRC. The result goes on the wire
 * little-endian. */
#include <string.h>

#include "crc32_internal.h"
#include "offpath/wire.h"
#include "wire_cursor.h"

#define LRH_LEN 8
#define IPV4_MIN_HDR 20
#define IPV4_MAX_HDR 60
#define IPV6_HDR 40
#define UDP_HDR_LEN 8
#define IPPROTO_UDP_NUM 17
#define IPV4_DF 0x4000u
#define IPV4_MF_OFFSET 0x3fffu /* more-fragments bit and fragment offset */
#define BTH_VARIANT_BYTE 4

/* Bytes after the BTH that go into the prefix buffer too, so that a small
 * packet (an ACK, a short WRITE) is one pass of the CRC engine. */
#define ICRC_INLINE_TAIL 64

/* The 8 ones standing in for the LRH, the masked IPv4 header (at most 60
 * bytes), the masked UDP header and the masked BTH, gathered in one buffer
 * (with the rest of a short packet). */
struct icrc_prefix {
    uint8_t b[LRH_LEN + IPV4_MAX_HDR + UDP_HDR_LEN + OP_BTH_LEN + ICRC_INLINE_TAIL];
    size_t len;
};

static void prefix_ip(struct icrc_prefix *x, const uint8_t *ip, size_t ihl)
{
    memset(x->b, 0xff, LRH_LEN);
    memcpy(x->b + LRH_LEN, ip, ihl);
    if (ip[0] >> 4 == 6) {
        x->b[LRH_LEN] |= 0x0f;                /* traffic class, high half */
        memset(x->b + LRH_LEN + 1, 0xff, 3); /* the rest of it, flow label */
        x->b[LRH_LEN + 7] = 0xff;             /* hop limit */
    } else {
        x->b[LRH_LEN + 1] = 0xff;             /* TOS */
        x->b[LRH_LEN + 8] = 0xff;             /* TTL */
        memset(x->b + LRH_LEN + 10, 0xff, 2); /* header checksum */
    }
    x->len = LRH_LEN + ihl;
}

static void prefix_udp(struct icrc_prefix *x, const uint8_t *udp)
{
    uint8_t *u = x->b + x->len;
    memcpy(u, udp, UDP_HDR_LEN);
    memset(u + 6, 0xff, 2); /* UDP checksum */
    x->len += UDP_HDR_LEN;
}

static void prefix_bth(struct icrc_prefix *x, const uint8_t *roce, size_t roce_len)
{
    size_t bth = roce_len < OP_BTH_LEN ? roce_len : OP_BTH_LEN;
    uint8_t *b = x->b + x->len;
    if (bth > 0)
        memcpy(b, roce, bth);
    if (bth > BTH_VARIANT_BYTE)
        b[BTH_VARIANT_BYTE] = 0xff;
    x->len += bth;
}

/* zlib's CRC register after the first k bytes every ICRC message of a
 * 20-byte IPv4 header starts with: 8 ones (LRH), 0x45, the masked TOS.
 * Generated with ~zlib.crc32(); test_wire checks every length against a
 * bitwise reference. */
#define ICRC_LEAD_IPV4 10
static const uint32_t icrc_lead_reg[ICRC_LEAD_IPV4 + 1] = {
    0xffffffff, 0x00ffffff, 0x0000ffff, 0x000000ff, 0x00000000, 0x2d02ef8d,
    0xbe2612ff, 0x00be2612, 0xdebb20e3, 0x3f6bbdfd, 0xee310a91,
};

/* The CRC of the whole masked prefix. The bytes that do not fill a 16-byte
 * block are taken at the front, from the table above where they are the
 * constant lead, so the folding engine does the rest with no table look-up
 * (which, on a path just out of the kernel, would miss the cache). */
static uint32_t icrc_crc(const uint8_t *b, size_t len)
{
    size_t r = len % 16;
    if (len < 32 || !wire_crc32_has_clmul())
        return op_crc32(0, b, len);
    size_t lead = b[LRH_LEN] == 0x45 ? ICRC_LEAD_IPV4 : LRH_LEN;
    lead = r < lead ? r : lead;
    uint32_t reg = wire_crc32_slice8(icrc_lead_reg[lead], b + lead, r - lead);
    return ~wire_crc32_clmul(reg, b + r, len - r);
}

/* Whether the bytes after the BTH fit the prefix buffer (one CRC pass);
 * they are copied there if so. */
static bool inline_tail(struct icrc_prefix *x, const uint8_t *roce, size_t roce_len)
{
    size_t tail = roce_len > OP_BTH_LEN ? roce_len - OP_BTH_LEN : 0;
    if (tail > ICRC_INLINE_TAIL)
        return false;
    if (tail > 0)
        memcpy(x->b + x->len, roce + OP_BTH_LEN, tail);
    x->len += tail;
    return true;
}

static uint32_t icrc_finish(struct icrc_prefix *x, const uint8_t *roce, size_t roce_len)
{
    if (inline_tail(x, roce, roce_len))
        return icrc_crc(x->b, x->len);
    return op_crc32(icrc_crc(x->b, x->len), roce + OP_BTH_LEN, roce_len - OP_BTH_LEN);
}

/* The IPv6 header of the flow (no extension headers), already masked. */
static size_t masked_ipv6(const struct op_flow *flow, size_t udp_len, uint8_t ip[IPV6_HDR])
{
    uint8_t *p = wp_u32(ip, 0x6fffffffu); /* version 6, class and label masked */
    p = wp_u16(p, (uint16_t)udp_len);
    p = wp_u8(p, IPPROTO_UDP_NUM);
    p = wp_u8(p, 0xff); /* hop limit, masked */
    memcpy(p, flow->src.v6, 16);
    memcpy(p + 16, flow->dst.v6, 16);
    return IPV6_HDR;
}

/* The frame Linux sends for the flow: a 20-byte IPv4 header with
 * Identification 0 (unconnected socket, DF), or a 40-byte IPv6 one, and UDP;
 * masked as the ICRC wants, straight into the prefix, for a packet of
 * `total` RoCEv2 bytes (ICRC not counted). */
static void pseudo_headers(struct icrc_prefix *x, const struct op_flow *flow, size_t total)
{
    size_t udp_len = UDP_HDR_LEN + total + OP_ICRC_LEN;
    uint8_t udp[UDP_HDR_LEN];
    memset(x->b, 0xff, LRH_LEN);
    if (flow->dst.family == OP_AF_IPV6) {
        x->len = LRH_LEN + masked_ipv6(flow, udp_len, x->b + LRH_LEN);
    } else {
        uint8_t ip[IPV4_MIN_HDR] = {0x45, 0xff};
        uint8_t *p = wp_u16(ip + 2, (uint16_t)(IPV4_MIN_HDR + udp_len));
        p = wp_u16(p, 0);
        p = wp_u16(p, IPV4_DF);
        p = wp_u8(p, 0xff); /* TTL, masked */
        p = wp_u8(p, IPPROTO_UDP_NUM);
        p = wp_u16(p, 0xffff); /* checksum, masked */
        p = wp_u32(p, flow->src.v4);
        wp_u32(p, flow->dst.v4);
        memcpy(x->b + LRH_LEN, ip, sizeof ip);
        x->len = LRH_LEN + sizeof ip;
    }
    uint8_t *p = wp_u16(udp, flow->src_port);
    p = wp_u16(p, flow->dst_port);
    wp_u16(wp_u16(p, (uint16_t)udp_len), 0);
    prefix_udp(x, udp);
}

/* The masked pseudo-headers of a packet of `total` RoCEv2 bytes whose
 * first bytes are roce, up to and with the BTH, into x. */
static void icrc_prefix_flow(struct icrc_prefix *x, const struct op_flow *flow,
                             const uint8_t *roce, size_t total)
{
    pseudo_headers(x, flow, total);
    prefix_bth(x, roce, total);
}

uint32_t op_icrc_flow(const struct op_flow *flow, const uint8_t *roce, size_t len)
{
    struct icrc_prefix x;
    icrc_prefix_flow(&x, flow, roce, len);
    return icrc_finish(&x, roce, len);
}

uint32_t op_icrc_flow_ext(const struct op_flow *flow, const uint8_t *roce, size_t len, size_t at,
                          const uint8_t *ext, size_t ext_len)
{
    if (ext == NULL || ext_len == 0 || at < OP_BTH_LEN || at > len)
        return op_icrc_flow(flow, roce, len);
    struct icrc_prefix x;
    icrc_prefix_flow(&x, flow, roce, len + ext_len);
    uint32_t crc = op_crc32(icrc_crc(x.b, x.len), roce + OP_BTH_LEN, at - OP_BTH_LEN);
    crc = op_crc32(crc, ext, ext_len);
    return op_crc32(crc, roce + at, len - at);
}

/* The same for IPv6: a 40-byte header straight before UDP (no extension
 * header), the payload length the UDP length. */
static op_status_t frame_check6(const uint8_t *ip, size_t len, size_t *ihl, size_t *end)
{
    struct wire_cur c;
    wc_init(&c, ip, len);
    (void)wc_u32(&c); /* version, class, label: the caller saw the 6 */
    size_t plen = wc_u16(&c);
    uint8_t next = wc_u8(&c);
    wc_check(&c, next == IPPROTO_UDP_NUM && plen >= UDP_HDR_LEN + OP_BTH_LEN + OP_ICRC_LEN);
    if (c.err != OP_OK)
        return c.err;
    if (len < IPV6_HDR || plen > len - IPV6_HDR)
        return OP_ERR_TRUNCATED;
    wc_init(&c, ip + IPV6_HDR, plen);
    (void)wc_u32(&c); /* ports */
    wc_check(&c, wc_u16(&c) == plen);
    *ihl = IPV6_HDR;
    *end = IPV6_HDR + plen;
    return c.err;
}

/* Check the IP and UDP headers of a captured frame; on success *ihl is the
 * IP header length and *end the frame length by the IP header's length
 * (bytes after it, such as Ethernet padding, are not part of the packet). */
static op_status_t frame_check(const uint8_t *ip, size_t len, size_t *ihl, size_t *end)
{
    if (len > 0 && ip[0] >> 4 == 6)
        return frame_check6(ip, len, ihl, end);
    struct wire_cur c;
    wc_init(&c, ip, len);
    uint8_t vihl = wc_u8(&c);
    (void)wc_u8(&c); /* TOS */
    size_t total = wc_u16(&c);
    (void)wc_u16(&c); /* Identification */
    uint16_t frag = wc_u16(&c);
    (void)wc_u8(&c); /* TTL */
    uint8_t proto = wc_u8(&c);
    *ihl = (size_t)(vihl & 0xfu) * 4;
    wc_check(&c, (vihl >> 4) == 4 && *ihl >= IPV4_MIN_HDR);
    wc_check(&c, proto == IPPROTO_UDP_NUM && (frag & IPV4_MF_OFFSET) == 0);
    wc_check(&c, total >= *ihl + UDP_HDR_LEN + OP_BTH_LEN + OP_ICRC_LEN);
    if (c.err != OP_OK)
        return c.err;
    if (total > len)
        return OP_ERR_TRUNCATED;
    wc_init(&c, ip + *ihl, total - *ihl);
    (void)wc_u32(&c); /* ports */
    wc_check(&c, wc_u16(&c) == total - *ihl);
    *end = total;
    return c.err;
}

op_status_t op_icrc_ip_frame(const uint8_t *ip, size_t len, uint32_t *icrc)
{
    size_t ihl = 0, end = 0;
    op_status_t st = frame_check(ip, len, &ihl, &end);
    if (st != OP_OK)
        return st;
    const uint8_t *roce = ip + ihl + UDP_HDR_LEN;
    size_t roce_len = end - ihl - UDP_HDR_LEN - OP_ICRC_LEN;
    struct icrc_prefix x;
    prefix_ip(&x, ip, ihl);
    prefix_udp(&x, ip + ihl);
    prefix_bth(&x, roce, roce_len);
    *icrc = icrc_finish(&x, roce, roce_len);
    return OP_OK;
}

size_t op_icrc_seal(const struct op_flow *flow, uint8_t *roce, size_t len, size_t cap)
{
    if (cap < OP_ICRC_LEN || len > cap - OP_ICRC_LEN)
        return 0;
    uint32_t crc = op_icrc_flow(flow, roce, len);
    for (size_t i = 0; i < OP_ICRC_LEN; i++)
        roce[len + i] = (uint8_t)(crc >> (8 * i));
    return len + OP_ICRC_LEN;
}

static uint32_t icrc_field(const uint8_t *roce, size_t n)
{
    return (uint32_t)roce[n] | (uint32_t)roce[n + 1] << 8 | (uint32_t)roce[n + 2] << 16 |
           (uint32_t)roce[n + 3] << 24;
}

bool op_icrc_check(const struct op_flow *flow, const uint8_t *roce, size_t len)
{
    if (roce == NULL || len < OP_BTH_LEN + OP_ICRC_LEN)
        return false;
    return icrc_field(roce, len - OP_ICRC_LEN) == op_icrc_flow(flow, roce, len - OP_ICRC_LEN);
}

/* The CRC register after b[0..len) from reg: the bytes that do not fill a
 * 16-byte block first, the rest folded (see icrc_crc). */
static uint32_t reg_after(uint32_t reg, const uint8_t *b, size_t len)
{
    size_t r = len % 16;
    reg = wire_crc32_slice8(reg, b, r);
    if (len - r < WIRE_CRC32_CLMUL_MIN || !wire_crc32_has_clmul())
        return wire_crc32_slice8(reg, b + r, len - r);
    return wire_crc32_clmul(reg, b + r, len - r);
}

/* The register after a masked BTH (12 bytes) and then body[0..n), from
 * reg: a payload of whole 16-byte blocks (4 KiB ones are) takes the BTH
 * in its fold (wire_crc32_clmul_lead12). */
static uint32_t reg_after_bth(uint32_t reg, const uint8_t *bth, const uint8_t *body, size_t n)
{
    if (n >= 16 && n % 16 == 0 && wire_crc32_has_clmul())
        return wire_crc32_clmul_lead12(reg, bth, body, n);
    return ~op_crc32(~reg_after(reg, bth, OP_BTH_LEN), body, n);
}

/* The memo's register for a packet of len bytes on flow, filled if new. */
static uint32_t memo_reg(struct op_icrc_memo *m, const struct op_flow *flow, size_t len)
{
    if (!op_flow_eq(&m->flow, flow)) {
        *m = (struct op_icrc_memo){.flow = *flow};
    } else {
        for (unsigned i = 0; i < OP_ICRC_MEMO_LENS; i++)
            if (m->len[i] == len && len != 0)
                return m->reg[i];
    }
    struct icrc_prefix x;
    pseudo_headers(&x, flow, len);
    unsigned i = m->next;
    m->next = (i + 1) % OP_ICRC_MEMO_LENS;
    m->len[i] = len;
    m->reg[i] = ~op_crc32(0, x.b, x.len);
    return m->reg[i];
}

/* CRC is linear in its input: the pseudo-headers, the same for every
 * packet of one flow and length, go into the register once (the memo) and
 * each packet adds its BTH and what follows. */
uint32_t op_icrc_flow_memo(struct op_icrc_memo *m, const struct op_flow *flow,
                           const uint8_t *roce, size_t len)
{
    uint32_t reg = memo_reg(m, flow, len);
    struct icrc_prefix x;
    x.len = 0;
    prefix_bth(&x, roce, len);
    if (inline_tail(&x, roce, len))
        return ~reg_after(reg, x.b, x.len);
    return ~reg_after_bth(reg, x.b, roce + OP_BTH_LEN, len - OP_BTH_LEN);
}

uint32_t op_icrc_flow_memo_head(struct op_icrc_memo *m, const struct op_flow *flow,
                                const uint8_t *roce, size_t len, size_t k)
{
    uint32_t reg = memo_reg(m, flow, len);
    struct icrc_prefix x;
    x.len = 0;
    prefix_bth(&x, roce, k < len ? k : len);
    return ~reg_after(reg, x.b, x.len);
}

uint32_t op_icrc_flow_ext_memo(struct op_icrc_memo *m, const struct op_flow *flow,
                               const uint8_t *roce, size_t len, size_t at, const uint8_t *ext,
                               size_t ext_len)
{
    if (ext == NULL || ext_len == 0 || at < OP_BTH_LEN || at > len)
        return op_icrc_flow_memo(m, flow, roce, len);
    uint32_t reg = memo_reg(m, flow, len + ext_len);
    struct icrc_prefix x;
    x.len = 0;
    prefix_bth(&x, roce, len);
    uint32_t crc = at == OP_BTH_LEN ? ~reg_after_bth(reg, x.b, ext, ext_len)
                   : op_crc32(op_crc32(~reg_after(reg, x.b, x.len), roce + OP_BTH_LEN,
                                       at - OP_BTH_LEN),
                              ext, ext_len);
    return op_crc32(crc, roce + at, len - at);
}

bool op_icrc_check_ext_memo(struct op_icrc_memo *m, const struct op_flow *flow,
                            const uint8_t *roce, size_t len, size_t at, const uint8_t *ext,
                            size_t ext_len)
{
    if (roce == NULL || len < OP_ICRC_LEN || at > len - OP_ICRC_LEN || at < OP_BTH_LEN ||
        ext == NULL)
        return op_icrc_check_memo(m, flow, roce, len);
    size_t n = len - OP_ICRC_LEN;
    return icrc_field(roce, n) == op_icrc_flow_ext_memo(m, flow, roce, n, at, ext, ext_len);
}

bool op_icrc_check_memo(struct op_icrc_memo *m, const struct op_flow *flow, const uint8_t *roce,
                        size_t len)
{
    if (roce == NULL || len < OP_BTH_LEN + OP_ICRC_LEN)
        return false;
    size_t n = len - OP_ICRC_LEN;
    return icrc_field(roce, n) == op_icrc_flow_memo(m, flow, roce, n);
}
