/* Any frame's headers for an engine that sees whole frames, and the
 * neighbour protocol of both families behind one call each. The UDP
 * verdict is op_udp_frame_parse's own, so both parsers agree by
 * construction; the rest reads only base headers, enough to forward. */
#include <string.h>

#include "frame_internal.h"
#include "offpath/wire.h"
#include "wire_cursor.h"

#define ETH_ARP 0x0806
#define ETH_IPV4 0x0800
#define ETH_IPV6 0x86dd
#define ARP_LEN 28
#define IPV4_HDR 20
#define IPV6_HDR 40

static void parse_arp(const uint8_t *arp, struct op_frame_info *info)
{
    info->kind = OP_FRAME_KIND_ARP;
    info->arp_op = (uint16_t)ld_be16(arp + 6);
    info->flow.src = op_addr_ipv4(ld_be32(arp + 14));
    info->flow.dst = op_addr_ipv4(ld_be32(arp + 24));
}

static void parse_ipv4(const uint8_t *ip, size_t room, struct op_frame_info *info)
{
    size_t ihl = (size_t)(ip[0] & 0xfu) * 4;
    if (ip[0] >> 4 != 4 || ihl < IPV4_HDR || ihl > room)
        return;
    info->kind = OP_FRAME_KIND_IPV4;
    info->ttl = ip[8];
    info->ecn = ip[1] & 3u;
    info->ip_proto = ip[9];
    info->flow.src = op_addr_ipv4(ld_be32(ip + 12));
    info->flow.dst = op_addr_ipv4(ld_be32(ip + 16));
    info->l4_off = (uint16_t)(OP_ETH_HDR_LEN + ihl);
}

static void parse_ipv6(const uint8_t *ip, struct op_frame_info *info)
{
    if (ip[0] >> 4 != 6)
        return;
    info->kind = OP_FRAME_KIND_IPV6;
    info->ecn = (ip[1] >> 4) & 3u;
    info->ip_proto = ip[6];
    info->ttl = ip[7];
    info->flow.src = op_addr_ipv6(ip + 8);
    info->flow.dst = op_addr_ipv6(ip + 24);
    info->l4_off = OP_ETH_HDR_LEN + IPV6_HDR;
}

unsigned op_frame_parse(const uint8_t *frame, size_t len, struct op_frame_info *info)
{
    memset(info, 0, sizeof *info);
    info->udp = OP_FRAME_SHORT;
    if (len < OP_ETH_HDR_LEN)
        return info->udp;
    memcpy(info->dst_mac, frame, 6);
    memcpy(info->src_mac, frame + 6, 6);
    info->ethertype = (uint16_t)ld_be16(frame + 12);
    info->l3_off = OP_ETH_HDR_LEN;
    size_t room = len - OP_ETH_HDR_LEN;
    const uint8_t *l3 = frame + OP_ETH_HDR_LEN;
    if (info->ethertype == ETH_ARP && room >= ARP_LEN)
        parse_arp(l3, info);
    else if (info->ethertype == ETH_IPV4 && room >= IPV4_HDR)
        parse_ipv4(l3, room, info);
    else if (info->ethertype == ETH_IPV6 && room >= IPV6_HDR)
        parse_ipv6(l3, info);
    struct op_flow flow;
    uint8_t mac[6];
    size_t off, plen;
    info->udp = (uint8_t)op_udp_frame_parse(frame, len, &flow, mac, &off, &plen);
    if (info->udp == OP_FRAME_OK) {
        info->flow = flow;
        info->payload_off = (uint32_t)off;
        info->payload_len = (uint32_t)plen;
    }
    return info->udp;
}

/* RFC 1624 eqn. 3 for one 16-bit word of an IPv4 header that changed. */
static void ipv4_csum_update(uint8_t *ip, uint16_t old, uint16_t now)
{
    uint32_t sum = (~ld_be16(ip + 10) & 0xffffu) + (~(uint32_t)old & 0xffffu) + now;
    sum = (sum & 0xffffu) + (sum >> 16);
    sum = (sum & 0xffffu) + (sum >> 16);
    wp_u16(ip + 10, (uint16_t)~sum);
}

bool op_frame_mark_ce(uint8_t *frame, size_t len)
{
    if (len < OP_ETH_HDR_LEN + IPV4_HDR)
        return false;
    uint16_t type = (uint16_t)ld_be16(frame + 12);
    uint8_t *ip = frame + OP_ETH_HDR_LEN;
    if (type == ETH_IPV4 && ip[0] >> 4 == 4) {
        if ((ip[1] & 3u) == OP_ECN_NOT_ECT)
            return false;
        uint16_t old = (uint16_t)ld_be16(ip);
        ip[1] |= OP_ECN_CE;
        ipv4_csum_update(ip, old, (uint16_t)ld_be16(ip));
        return true;
    }
    if (type == ETH_IPV6 && len >= OP_ETH_HDR_LEN + IPV6_HDR && ip[0] >> 4 == 6) {
        if (((ip[1] >> 4) & 3u) == OP_ECN_NOT_ECT)
            return false;
        ip[1] |= OP_ECN_CE << 4;
        return true;
    }
    return false;
}

size_t op_frame_control_reply(uint8_t *frame, size_t len, size_t cap, const struct op_addr *ours,
                              const uint8_t mac[6])
{
    size_t n;
    if (op_addr_is_ipv6(ours)) {
        if ((n = op_ndp_advert_in_place(frame, len, cap, ours->v6, mac)) == 0)
            n = op_icmp6_echo_reply_in_place(frame, len, ours->v6, mac);
    } else if ((n = op_arp_reply_in_place(frame, len, ours->v4, mac)) == 0) {
        n = op_icmp_echo_reply_in_place(frame, len, ours->v4, mac);
    }
    return n;
}

size_t op_neigh_solicit_build(uint8_t *frame, size_t cap, const struct op_addr *ours,
                              const uint8_t mac[6], const struct op_addr *target)
{
    if (ours->family != target->family)
        return 0;
    if (op_addr_is_ipv6(ours))
        return wire_ndp_solicit_build(frame, cap, ours->v6, mac, target->v6);
    return wire_arp_request_build(frame, cap, ours->v4, mac, target->v4);
}

bool op_frame_route(uint8_t *frame, size_t len, const struct op_frame_info *info,
                    const uint8_t src_mac[6], const uint8_t next_mac[6])
{
    bool v4 = info->kind == OP_FRAME_KIND_IPV4, v6 = info->kind == OP_FRAME_KIND_IPV6;
    size_t need = OP_ETH_HDR_LEN + (v4 ? IPV4_HDR : IPV6_HDR);
    if ((!v4 && !v6) || len < need || info->ttl <= 1)
        return false;
    uint8_t *ip = frame + OP_ETH_HDR_LEN;
    if (v4) {
        uint16_t old = (uint16_t)ld_be16(ip + 8); /* the TTL/protocol word */
        ip[8]--;
        ipv4_csum_update(ip, old, (uint16_t)ld_be16(ip + 8));
    } else {
        ip[7]--;
    }
    memcpy(frame, next_mac, 6);
    memcpy(frame + 6, src_mac, 6);
    return true;
}
