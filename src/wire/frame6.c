/* IPv6 for a kernel-bypass server that owns its interface (the DNS polling
 * models): UDP datagrams to its address, and the neighbour discovery and
 * echo a host must answer (RFC 4861 section 7.2.4, RFC 4443 section 4.2).
 * No extension headers are followed: a datagram behind one is not taken
 * (a fragment included), as a DNS server needs none. */
#include <string.h>

#include "frame_internal.h"
#include "offpath/wire.h"
#include "wire_cursor.h"

#define ETH_IPV6 0x86dd
#define IPV6_HDR 40
#define UDP_HDR 8
#define NH_UDP 17
#define NH_FRAGMENT 44
#define NH_ICMPV6 58
#define ICMP6_ECHO_REQUEST 128
#define ICMP6_ECHO_REPLY 129
#define ND_SOLICIT 135
#define ND_ADVERT 136
#define ND_HOP_LIMIT 255 /* anything else did not come from the link */
#define ND_OPT_SOURCE_LLADDR 1
#define ND_OPT_TARGET_LLADDR 2
#define ND_LEN 32 /* header, target, one link-layer address option */
#define NA_FLAG_SOLICITED 0x40000000u
#define NA_FLAG_OVERRIDE 0x20000000u
#define HOP_LIMIT_DEFAULT 64

/* The one's complement sum of the IPv6 pseudo-header (RFC 8200 section
 * 8.1) and len bytes of the upper-layer packet at p; 0xffff-complemented. */
static uint16_t sum6(const uint8_t *ip, uint8_t next, const uint8_t *p, size_t len)
{
    uint32_t sum = next + (uint32_t)(len >> 16) + (uint32_t)(len & 0xffff);
    for (size_t i = 8; i < IPV6_HDR; i += 2) /* source and destination */
        sum += ld_be16(ip + i);
    return wire_inet_sum(sum, p, len);
}

/* The IPv6 header of a frame, if it is IPv6 with its whole payload: the
 * payload's length; 0 otherwise (a verdict in *why). */
static size_t ipv6_payload(const uint8_t *frame, size_t len, unsigned *why)
{
    if (len < OP_ETH_HDR_LEN + IPV6_HDR) {
        *why = len >= OP_ETH_HDR_LEN && ld_be16(frame + 12) != ETH_IPV6 ? OP_FRAME_NOT_IP
                                                                         : OP_FRAME_SHORT;
        return 0;
    }
    const uint8_t *ip = frame + OP_ETH_HDR_LEN;
    size_t plen = ld_be16(ip + 4);
    *why = ld_be16(frame + 12) != ETH_IPV6                          ? OP_FRAME_NOT_IP
           : ip[0] >> 4 != 6 || plen > len - OP_ETH_HDR_LEN - IPV6_HDR ? OP_FRAME_BAD_IP
                                                                    : OP_FRAME_OK;
    return *why == OP_FRAME_OK ? plen : 0;
}

unsigned wire_udp6_frame_parse(const uint8_t *frame, size_t len, struct op_flow *flow,
                               uint8_t src_mac[6], size_t *payload_off, size_t *payload_len)
{
    unsigned why;
    size_t plen = ipv6_payload(frame, len, &why);
    if (why != OP_FRAME_OK)
        return why;
    const uint8_t *ip = frame + OP_ETH_HDR_LEN, *udp = ip + IPV6_HDR;
    if (ip[6] != NH_UDP)
        return ip[6] == NH_FRAGMENT ? OP_FRAME_FRAGMENT : OP_FRAME_NOT_UDP;
    /* RFC 8200 section 8.1: a zero checksum is not allowed over IPv6. Its
     * value is not checked: a sender's checksum offload leaves it partial
     * on a veth (the kernel on the way trusts the flag, and so the XDP
     * socket gets it unfinished), and a real NIC checks it itself; the IPv4
     * path does not check it either. */
    if (plen < UDP_HDR || ld_be16(udp + 4) != plen || ld_be16(udp + 6) == 0)
        return OP_FRAME_BAD_UDP;
    flow->src = op_addr_ipv6(ip + 8);
    flow->dst = op_addr_ipv6(ip + 24);
    flow->src_port = (uint16_t)ld_be16(udp);
    flow->dst_port = (uint16_t)ld_be16(udp + 2);
    memcpy(src_mac, frame + 6, 6);
    *payload_off = OP_UDP6_FRAME_HDR_LEN;
    *payload_len = plen - UDP_HDR;
    return OP_FRAME_OK;
}

/* Ethernet and IPv6 headers for payload_len bytes of protocol next. */
static uint8_t *ipv6_headers(uint8_t *frame, const uint8_t src[16], const uint8_t dst[16],
                             const struct op_frame_l2 *l2, uint8_t next, uint8_t hops,
                             size_t payload_len)
{
    memcpy(frame, l2->dst_mac, 6);
    memcpy(frame + 6, l2->src_mac, 6);
    uint8_t *ip = wp_u16(frame + 12, ETH_IPV6);
    uint8_t *p = wp_u32(ip, 6u << 28 | (uint32_t)l2->tos << 20);
    p = wp_u16(p, (uint16_t)payload_len);
    p = wp_u8(p, next);
    p = wp_u8(p, hops);
    memcpy(p, src, 16);
    memcpy(p + 16, dst, 16);
    return ip;
}

size_t wire_udp6_frame_headers(uint8_t *frame, const struct op_flow *flow,
                               const struct op_frame_l2 *l2, size_t payload_len)
{
    if (payload_len > 0xffff - UDP_HDR)
        return 0;
    size_t ulen = UDP_HDR + payload_len;
    uint8_t *ip = ipv6_headers(frame, flow->src.v6, flow->dst.v6, l2, NH_UDP, HOP_LIMIT_DEFAULT, ulen);
    uint8_t *udp = ip + IPV6_HDR;
    uint8_t *p = wp_u16(udp, flow->src_port);
    p = wp_u16(p, flow->dst_port);
    p = wp_u16(p, (uint16_t)ulen);
    wp_u16(p, 0);
    uint16_t sum = sum6(ip, NH_UDP, udp, ulen);
    wp_u16(p, sum != 0 ? sum : 0xffff); /* a computed 0 is sent as all ones */
    return OP_UDP6_FRAME_HDR_LEN + payload_len;
}

/* An ICMPv6 message of type for us (dst our address, or any address for a
 * solicitation, which goes to a multicast group), whole and checked: its
 * length, or 0. */
static size_t icmp6_for_us(const uint8_t *frame, size_t len, uint8_t type, const uint8_t ip6[16])
{
    unsigned why;
    size_t plen = ipv6_payload(frame, len, &why);
    const uint8_t *ip = frame + OP_ETH_HDR_LEN, *icmp = ip + IPV6_HDR;
    if (why != OP_FRAME_OK || ip[6] != NH_ICMPV6 || plen < 8 || icmp[0] != type ||
        icmp[1] != 0 || sum6(ip, NH_ICMPV6, icmp, plen) != 0)
        return 0;
    if (type == ND_SOLICIT)
        return plen >= 24 && ip[7] == ND_HOP_LIMIT && memcmp(icmp + 8, ip6, 16) == 0 ? plen : 0;
    return memcmp(ip + 24, ip6, 16) == 0 ? plen : 0;
}

/* A solicitation or advertisement (RFC 4861: type, flags or reserved,
 * target, one link-layer address option of ours) after the IPv6 header at
 * ip, its checksum computed: the frame's length. */
static size_t nd_message(uint8_t *ip, uint8_t type, uint32_t flags, const uint8_t target[16],
                         uint8_t option, const uint8_t mac[6])
{
    uint8_t *nd = ip + IPV6_HDR;
    uint8_t *p = wp_u8(nd, type);
    p = wp_u8(p, 0);
    p = wp_u16(p, 0);
    p = wp_u32(p, flags);
    memcpy(p, target, 16);
    p = wp_u8(p + 16, option);
    p = wp_u8(p, 1); /* in units of 8 octets */
    memcpy(p, mac, 6);
    wp_u16(nd + 2, sum6(ip, NH_ICMPV6, nd, ND_LEN));
    return OP_ETH_HDR_LEN + IPV6_HDR + ND_LEN;
}

size_t op_ndp_advert_in_place(uint8_t *frame, size_t len, size_t cap, const uint8_t ip6[16],
                              const uint8_t mac[6])
{
    static const uint8_t all_nodes[16] = {0xff, 2, [15] = 1};
    static const uint8_t unspecified[16] = {0};
    if (cap < OP_ETH_HDR_LEN + IPV6_HDR + ND_LEN || icmp6_for_us(frame, len, ND_SOLICIT, ip6) == 0)
        return 0;
    const uint8_t *asker = frame + OP_ETH_HDR_LEN + 8;
    /* duplicate address detection asks from ::, and is answered to all nodes */
    bool dad = memcmp(asker, unspecified, 16) == 0;
    uint8_t to[16];
    struct op_frame_l2 l2 = {.tos = 0};
    memcpy(to, dad ? all_nodes : asker, 16);
    memcpy(l2.src_mac, mac, 6);
    if (dad)
        memcpy(l2.dst_mac, (const uint8_t[6]){0x33, 0x33, 0, 0, 0, 1}, 6);
    else
        memcpy(l2.dst_mac, frame + 6, 6);
    uint8_t *ip = ipv6_headers(frame, ip6, to, &l2, NH_ICMPV6, ND_HOP_LIMIT, ND_LEN);
    return nd_message(ip, ND_ADVERT, (dad ? 0 : NA_FLAG_SOLICITED) | NA_FLAG_OVERRIDE, ip6,
                      ND_OPT_TARGET_LLADDR, mac);
}

size_t op_icmp6_echo_reply_in_place(uint8_t *frame, size_t len, const uint8_t ip6[16],
                                    const uint8_t mac[6])
{
    size_t plen = icmp6_for_us(frame, len, ICMP6_ECHO_REQUEST, ip6);
    if (plen == 0)
        return 0;
    uint8_t *ip = frame + OP_ETH_HDR_LEN, *icmp = ip + IPV6_HDR;
    memcpy(frame, frame + 6, 6);
    memcpy(frame + 6, mac, 6);
    memcpy(ip + 24, ip + 8, 16);
    memcpy(ip + 8, ip6, 16);
    ip[7] = HOP_LIMIT_DEFAULT;
    icmp[0] = ICMP6_ECHO_REPLY;
    wp_u16(icmp + 2, 0);
    wp_u16(icmp + 2, sum6(ip, NH_ICMPV6, icmp, plen));
    return OP_ETH_HDR_LEN + IPV6_HDR + plen;
}

size_t wire_ndp_solicit_build(uint8_t *frame, size_t cap, const uint8_t src6[16],
                              const uint8_t mac[6], const uint8_t target6[16])
{
    if (cap < OP_ETH_HDR_LEN + IPV6_HDR + ND_LEN)
        return 0;
    /* RFC 4291's solicited-node group of the target, and its MAC (RFC 2464) */
    uint8_t group[16] = {0xff, 2, [11] = 1, [12] = 0xff};
    memcpy(group + 13, target6 + 13, 3);
    struct op_frame_l2 l2 = {.dst_mac = {0x33, 0x33, 0xff, target6[13], target6[14], target6[15]}};
    memcpy(l2.src_mac, mac, 6);
    uint8_t *ip = ipv6_headers(frame, src6, group, &l2, NH_ICMPV6, ND_HOP_LIMIT, ND_LEN);
    return nd_message(ip, ND_SOLICIT, 0, target6, ND_OPT_SOURCE_LLADDR, mac);
}
