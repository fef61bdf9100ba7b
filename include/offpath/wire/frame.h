/* offpath wire: whole Ethernet frames: IPv4 and IPv6 UDP, ARP, NDP and ICMP echo for
 * kernel-bypass backends (offpath/wire.h includes every part; docs/wire.md). */
#ifndef OFFPATH_WIRE_FRAME_H
#define OFFPATH_WIRE_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/wire/addr.h"

/* Ethernet + IP + UDP around a payload (RoCEv2, DNS), for backends that
 * move whole frames (AF_XDP, DPDK), of the flow's family. IPv4 is built as
 * Linux sends from an unconnected DF socket (ID 0, DF, TTL 64; no UDP
 * checksum, as RoCEv2 allows): the ICRC stays valid. IPv6 (RFC 8200) with
 * hop limit 64 and the UDP checksum computed (IPv6 requires one). No VLAN
 * tags, no IPv4 options or IPv6 extension headers on the way out. */
#define OP_ETH_HDR_LEN 14
#define OP_UDP_FRAME_HDR_LEN 42  /* Ethernet + IPv4 + UDP */
#define OP_UDP6_FRAME_HDR_LEN 62 /* Ethernet + IPv6 + UDP */
struct op_frame_l2 {
    uint8_t src_mac[6], dst_mac[6];
    uint8_t tos; /* IPv4 TOS, IPv6 traffic class */
};
/* The headers' length for a family: where the payload starts. */
OP_API size_t op_udp_frame_hdr_len(unsigned family);
/* Writes the headers for payload_len bytes that the caller puts (or has put)
 * at frame + op_udp_frame_hdr_len(family); returns the frame's length, 0 if
 * cap or the IP packet's 64 KiB is too small. */
OP_API size_t op_udp_frame_build(uint8_t *frame, size_t cap, const struct op_flow *flow,
                                 const struct op_frame_l2 *l2, size_t payload_len);
/* The same headers alone, into op_udp_frame_hdr_len bytes, for a writer
 * that keeps the payload where it is (a capture) or has put it there; 0 if
 * the IP packet's 64 KiB is too small. */
OP_API size_t op_udp_frame_headers(uint8_t *frame, const struct op_flow *flow,
                                   const struct op_frame_l2 *l2, size_t payload_len);
/* Why a frame is not a UDP datagram we take: the verdicts' names are the
 * backends' drop counters. */
enum op_frame_verdict {
    OP_FRAME_OK,
    OP_FRAME_SHORT,    /* ends inside a header */
    OP_FRAME_NOT_IP,   /* another EtherType (ARP, a VLAN tag) */
    OP_FRAME_BAD_IP,   /* version, header length, checksum, total or payload length */
    OP_FRAME_FRAGMENT, /* IPv4 fragment, or an IPv6 fragment header */
    OP_FRAME_NOT_UDP,  /* another protocol, or an IPv6 extension header first */
    OP_FRAME_BAD_UDP,  /* UDP length disagrees with IP's; IPv6: zero UDP checksum */
    OP_FRAME_VERDICTS_
};
/* A frame of either family. On OP_FRAME_OK: the flow (its family the
 * frame's), the sender's MAC and where the UDP payload lies; Ethernet
 * padding after the IP packet is ignored. Nothing is written otherwise.
 * No IPv6 extension header is followed, and an IPv6 UDP checksum's value is
 * not checked (only that it is not zero): a sender's checksum offload
 * leaves it partial on a veth. */
OP_API unsigned op_udp_frame_parse(const uint8_t *frame, size_t len, struct op_flow *flow,
                                   uint8_t src_mac[6], size_t *payload_off, size_t *payload_len);
OP_API const char *op_frame_verdict_str(unsigned v);

/* ARP (RFC 826) and ICMP echo (RFC 792) for a kernel-bypass server that
 * answers for its own IPv4 address (host order) and MAC: each rewrites a
 * request frame into its reply in place and returns the reply's length, or
 * returns 0 and leaves the frame alone when it is no such request for ip. */
OP_API size_t op_arp_reply_in_place(uint8_t *frame, size_t len, uint32_t ip, const uint8_t mac[6]);
OP_API size_t op_icmp_echo_reply_in_place(uint8_t *frame, size_t len, uint32_t ip,
                                          const uint8_t mac[6]);

/* The neighbour advertisements (RFC 4861) and echo replies (RFC 4443) an
 * IPv6 host owes, for the same servers; addresses in network order. */
/* A neighbour solicitation for ip6 (hop limit 255, checksum right) turned
 * into the solicited advertisement with our MAC (to all nodes for
 * duplicate address detection); the reply may be longer than the request,
 * so cap is the frame buffer's size. 0 and the frame untouched otherwise. */
OP_API size_t op_ndp_advert_in_place(uint8_t *frame, size_t len, size_t cap,
                                     const uint8_t ip6[16], const uint8_t mac[6]);
OP_API size_t op_icmp6_echo_reply_in_place(uint8_t *frame, size_t len, const uint8_t ip6[16],
                                           const uint8_t mac[6]);

/* ---- Any frame, for an engine that sees whole frames (a switch port
 * forwarding, a server answering ARP/NDP for its address, a UDP engine
 * taking payloads): what op_frame_parse found in it. */
enum op_frame_kind {
    OP_FRAME_KIND_OTHER, /* too short, a VLAN tag, an EtherType we do not read */
    OP_FRAME_KIND_ARP,   /* Ethernet/IPv4 ARP of 28 bytes or more */
    OP_FRAME_KIND_IPV4,  /* a whole base header (options may follow) */
    OP_FRAME_KIND_IPV6,  /* a whole fixed header */
};
struct op_frame_info {
    uint8_t dst_mac[6], src_mac[6];
    uint16_t ethertype; /* 0 when the frame is shorter than an Ethernet header */
    uint8_t kind;       /* enum op_frame_kind */
    uint8_t ip_proto;   /* IP kinds: IPv4 protocol, IPv6 next header */
    uint8_t ttl;        /* IP kinds: TTL, hop limit */
    uint8_t ecn;        /* IP kinds: the ECN field (enum op_ecn) */
    uint8_t udp;        /* enum op_frame_verdict: OP_FRAME_OK when it is UDP we take */
    uint16_t arp_op;    /* ARP: 1 request, 2 reply */
    uint16_t l3_off, l4_off; /* l4_off: after IPv4 options or the IPv6 header */
    /* IP kinds: the addresses (ports 0 unless udp is OP_FRAME_OK); ARP:
     * sender (src) and target (dst) protocol addresses */
    struct op_flow flow;
    uint32_t payload_off, payload_len; /* the UDP payload when udp is OP_FRAME_OK */
};
/* Fills info with what the frame's bytes say (no field read past len) and
 * returns info->udp, as op_udp_frame_parse would for the same bytes. */
OP_API unsigned op_frame_parse(const uint8_t *frame, size_t len, struct op_frame_info *info);
/* A router's hop over the frame in place (RFC 1812 5.3.1, RFC 8200): the
 * next hop's MAC as destination, ours as source, the TTL or hop limit one
 * less and the IPv4 header checksum updated for it (RFC 1624). false, and
 * the frame untouched, when it is not IPv4 or IPv6 with a whole header
 * (info from op_frame_parse) or its TTL would reach 0: a router drops it
 * (and may say so in ICMP). Nothing else changes, so a RoCEv2 ICRC, which
 * masks the TTL, stays valid. */
OP_API bool op_frame_route(uint8_t *frame, size_t len, const struct op_frame_info *info,
                           const uint8_t src_mac[6], const uint8_t next_mac[6]);
/* The IP header's ECN field (RFC 3168). */
enum op_ecn {
    OP_ECN_NOT_ECT = 0,
    OP_ECN_ECT1 = 1,
    OP_ECN_ECT0 = 2,
    OP_ECN_CE = 3,
};
/* A queue's congestion mark (RFC 3168 5): an IPv4 or IPv6 frame whose
 * sender said it reacts (ECT(0) or ECT(1)) leaves with CE, the IPv4 header
 * checksum updated for it (RFC 1624). True when the frame carries CE now;
 * false, the frame untouched, when it is not ECN-capable IP (such a frame is
 * dropped instead, when it is dropped at all). The ICRC masks the field. */
OP_API bool op_frame_mark_ce(uint8_t *frame, size_t len);

/* A request for ours (ARP or ICMP echo for IPv4, a neighbour solicitation
 * or ICMPv6 echo for IPv6) rewritten in place into its reply, sent from
 * mac: the reply's length, or 0 and the frame untouched. cap: the buffer's
 * size (an advertisement may be longer than the solicitation). */
OP_API size_t op_frame_control_reply(uint8_t *frame, size_t len, size_t cap,
                                     const struct op_addr *ours, const uint8_t mac[6]);
/* The question a frame backend asks for a neighbour's MAC: an ARP request
 * (broadcast) or a neighbour solicitation (to target's solicited-node
 * group, hop limit 255, with our link-layer address option), from our
 * address and mac. Families must agree. The frame's length; 0 if cap is
 * too small. */
#define OP_NEIGH_SOLICIT_MAX 86
OP_API size_t op_neigh_solicit_build(uint8_t *frame, size_t cap, const struct op_addr *ours,
                                     const uint8_t mac[6], const struct op_addr *target);

#endif
