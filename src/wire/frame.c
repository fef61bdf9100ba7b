/* Ethernet + IP + UDP framing for backends that move whole frames (AF_XDP):
 * what the kernel's UDP socket adds and strips for the udp backend. The IPv4
 * header is the one Linux sends from an unconnected DF socket (ID 0, DF,
 * TTL 64), so the ICRC the engine computed validates on the wire; IPv6 is
 * frame6.c's, chosen here by the flow's family or the EtherType. */
#include <string.h>

#include "frame_internal.h"
#include "offpath/wire.h"
#include "wire_cursor.h"

#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_IPV6 0x86dd
#define IPV4_HDR 20
#define UDP_HDR 8
#define IPV4_DF_FLAG 0x4000
#define IPV4_FRAG_BITS 0x3fff /* MF and the offset */
#define IP_TTL_DEFAULT 64
#define IPPROTO_UDP_ 17

static uint16_t ipv4_checksum(const uint8_t *h, size_t len) { return wire_inet_sum(0, h, len); }

size_t op_udp_frame_hdr_len(unsigned family)
{
    return family == OP_AF_IPV6 ? OP_UDP6_FRAME_HDR_LEN : OP_UDP_FRAME_HDR_LEN;
}

size_t op_udp_frame_build(uint8_t *frame, size_t cap, const struct op_flow *flow,
                          const struct op_frame_l2 *l2, size_t payload_len)
{
    size_t hdr = op_udp_frame_hdr_len(flow->dst.family);
    if (cap < hdr || payload_len > cap - hdr)
        return 0;
    return op_udp_frame_headers(frame, flow, l2, payload_len);
}

size_t op_udp_frame_headers(uint8_t *frame, const struct op_flow *flow,
                            const struct op_frame_l2 *l2, size_t payload_len)
{
    if (flow->dst.family == OP_AF_IPV6)
        return wire_udp6_frame_headers(frame, flow, l2, payload_len);
    if (payload_len > 0xffff - IPV4_HDR - UDP_HDR)
        return 0;
    memcpy(frame, l2->dst_mac, 6);
    memcpy(frame + 6, l2->src_mac, 6);
    uint8_t *ip = wp_u16(frame + 12, ETHERTYPE_IPV4);
    uint8_t *p = wp_u8(ip, 0x45);
    p = wp_u8(p, l2->tos);
    p = wp_u16(p, (uint16_t)(IPV4_HDR + UDP_HDR + payload_len));
    p = wp_u16(p, 0); /* Identification */
    p = wp_u16(p, IPV4_DF_FLAG);
    p = wp_u8(p, IP_TTL_DEFAULT);
    p = wp_u8(p, IPPROTO_UDP_);
    uint8_t *csum = p;
    p = wp_u16(p, 0);
    p = wp_u32(p, flow->src.v4);
    p = wp_u32(p, flow->dst.v4);
    wp_u16(csum, ipv4_checksum(ip, IPV4_HDR));
    p = wp_u16(p, flow->src_port);
    p = wp_u16(p, flow->dst_port);
    p = wp_u16(p, (uint16_t)(UDP_HDR + payload_len));
    wp_u16(p, 0); /* no UDP checksum: RoCEv2's ICRC covers the packet */
    return OP_UDP_FRAME_HDR_LEN + payload_len;
}

static unsigned parse_ipv4(struct wire_cur *c, struct op_flow *flow, size_t *ip_total)
{
    const uint8_t *ip = c->p;
    uint8_t vihl = wc_u8(c);
    size_t ihl = (size_t)(vihl & 0xfu) * 4;
    if (c->err != OP_OK)
        return OP_FRAME_SHORT;
    if (vihl >> 4 != 4 || ihl < IPV4_HDR)
        return OP_FRAME_BAD_IP;
    if (c->left + 1 < ihl)
        return OP_FRAME_SHORT;
    if (ipv4_checksum(ip, ihl) != 0)
        return OP_FRAME_BAD_IP;
    (void)wc_u8(c); /* TOS */
    *ip_total = wc_u16(c);
    (void)wc_u16(c); /* Identification */
    uint16_t frag = wc_u16(c);
    (void)wc_u8(c); /* TTL */
    uint8_t proto = wc_u8(c);
    (void)wc_u16(c); /* checksum, checked above */
    flow->src = op_addr_ipv4(wc_u32(c));
    flow->dst = op_addr_ipv4(wc_u32(c));
    (void)wc_take(c, ihl - IPV4_HDR); /* options */
    if (*ip_total < ihl + UDP_HDR || *ip_total - ihl > c->left)
        return OP_FRAME_BAD_IP; /* shorter than its headers or than the frame says */
    if (frag & IPV4_FRAG_BITS)
        return OP_FRAME_FRAGMENT;
    if (proto != IPPROTO_UDP_)
        return OP_FRAME_NOT_UDP;
    *ip_total -= ihl;
    return OP_FRAME_OK;
}

unsigned op_udp_frame_parse(const uint8_t *frame, size_t len, struct op_flow *flow,
                            uint8_t src_mac[6], size_t *payload_off, size_t *payload_len)
{
    struct wire_cur c;
    struct op_flow f;
    size_t ip_rest = 0;
    wc_init(&c, frame, len);
    (void)wc_take(&c, 6);
    const uint8_t *mac = wc_take(&c, 6);
    uint16_t type = wc_u16(&c);
    if (c.err != OP_OK)
        return OP_FRAME_SHORT;
    if (type == ETHERTYPE_IPV6)
        return wire_udp6_frame_parse(frame, len, flow, src_mac, payload_off, payload_len);
    if (type != ETHERTYPE_IPV4)
        return OP_FRAME_NOT_IP;
    unsigned v = parse_ipv4(&c, &f, &ip_rest);
    if (v != OP_FRAME_OK)
        return v;
    f.src_port = wc_u16(&c);
    f.dst_port = wc_u16(&c);
    size_t udp_len = wc_u16(&c);
    if (udp_len != ip_rest)
        return OP_FRAME_BAD_UDP; /* bytes past UDP inside IP, or a UDP past IP */
    *flow = f;
    memcpy(src_mac, mac, 6);
    *payload_off = (size_t)(c.p + 2 - frame); /* after the checksum */
    *payload_len = udp_len - UDP_HDR;
    return OP_FRAME_OK;
}

const char *op_frame_verdict_str(unsigned v)
{
    static const char *const names[] = {
        [OP_FRAME_OK] = "ok",
        [OP_FRAME_SHORT] = "short",
        [OP_FRAME_NOT_IP] = "not_ip",
        [OP_FRAME_BAD_IP] = "bad_ip",
        [OP_FRAME_FRAGMENT] = "fragment",
        [OP_FRAME_NOT_UDP] = "not_udp",
        [OP_FRAME_BAD_UDP] = "bad_udp",
    };
    return v < OP_FRAME_VERDICTS_ ? names[v] : "unknown";
}
