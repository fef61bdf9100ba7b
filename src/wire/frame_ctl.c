/* ARP and ICMP echo replies, written over the request (docs/dns.md: a DPDK
 * server owns its interface, so it answers for its address itself), and
 * the ARP request a frame backend asks a neighbour's MAC with. */
#include <string.h>

#include "frame_internal.h"
#include "offpath/wire.h"
#include "wire_cursor.h"

#define ETH_ARP 0x0806
#define ETH_IPV4 0x0800
#define ARP_LEN 28

static uint16_t inet_sum(const uint8_t *p, size_t n) { return wire_inet_sum(0, p, n); }

size_t op_arp_reply_in_place(uint8_t *frame, size_t len, uint32_t ip, const uint8_t mac[6])
{
    struct wire_cur c;
    wc_init(&c, frame, len);
    wc_take(&c, 12);
    uint16_t type = wc_u16(&c);
    uint16_t htype = wc_u16(&c), ptype = wc_u16(&c);
    uint8_t hlen = wc_u8(&c), plen = wc_u8(&c);
    uint16_t oper = wc_u16(&c);
    wc_take(&c, 10); /* sender MAC and IP */
    wc_take(&c, 6);
    uint32_t target = wc_u32(&c);
    if (c.err != OP_OK || type != ETH_ARP || htype != 1 || ptype != ETH_IPV4 || hlen != 6 ||
        plen != 4 || oper != 1 || target != ip)
        return 0;
    uint8_t *arp = frame + OP_ETH_HDR_LEN;
    memcpy(frame, arp + 8, 6);      /* to the asker */
    memcpy(frame + 6, mac, 6);
    wp_u16(arp + 6, 2);             /* reply */
    memcpy(arp + 18, arp + 8, 10);  /* target = the asker's MAC and IP */
    memcpy(arp + 8, mac, 6);
    wp_u32(arp + 14, ip);
    return OP_ETH_HDR_LEN + ARP_LEN;
}

size_t op_icmp_echo_reply_in_place(uint8_t *frame, size_t len, uint32_t ip, const uint8_t mac[6])
{
    struct wire_cur c;
    wc_init(&c, frame, len);
    wc_take(&c, 12);
    uint16_t type = wc_u16(&c);
    uint8_t vihl = wc_u8(&c);
    wc_u8(&c);
    uint16_t total = wc_u16(&c);
    wc_u16(&c);
    uint16_t frag = wc_u16(&c);
    wc_u8(&c);
    uint8_t proto = wc_u8(&c);
    size_t ihl = (size_t)(vihl & 0xf) * 4;
    if (c.err != OP_OK || type != ETH_IPV4 || vihl >> 4 != 4 || ihl < 20 || proto != 1 ||
        (frag & 0x3fff) != 0 || total < ihl + 8 || total > len - OP_ETH_HDR_LEN)
        return 0;
    uint8_t *iph = frame + OP_ETH_HDR_LEN, *icmp = iph + ihl;
    if (ld_be32(iph + 16) != ip || icmp[0] != 8 || icmp[1] != 0 || inet_sum(iph, ihl) != 0 ||
        inet_sum(icmp, total - ihl) != 0)
        return 0;
    memcpy(frame, frame + 6, 6);
    memcpy(frame + 6, mac, 6);
    memcpy(iph + 16, iph + 12, 4);
    wp_u32(iph + 12, ip);
    iph[8] = 64; /* TTL */
    wp_u16(iph + 10, 0);
    wp_u16(iph + 10, inet_sum(iph, ihl));
    icmp[0] = 0; /* echo reply */
    wp_u16(icmp + 2, 0);
    wp_u16(icmp + 2, inet_sum(icmp, total - ihl));
    return OP_ETH_HDR_LEN + total;
}

size_t wire_arp_request_build(uint8_t *frame, size_t cap, uint32_t src, const uint8_t mac[6],
                              uint32_t target)
{
    if (cap < OP_ETH_HDR_LEN + ARP_LEN)
        return 0;
    memset(frame, 0xff, 6); /* broadcast */
    memcpy(frame + 6, mac, 6);
    uint8_t *p = wp_u16(frame + 12, ETH_ARP);
    p = wp_u16(p, 1); /* Ethernet */
    p = wp_u16(p, ETH_IPV4);
    p = wp_u8(p, 6);
    p = wp_u8(p, 4);
    p = wp_u16(p, 1); /* request */
    memcpy(p, mac, 6);
    p = wp_u32(p + 6, src);
    memset(p, 0, 6); /* the MAC asked for */
    wp_u32(p + 6, target);
    return OP_ETH_HDR_LEN + ARP_LEN;
}
