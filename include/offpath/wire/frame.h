/* offpath wire: whole Ethernet frames: IPv4 and IPv6 UDP, ARP, NDP and ICMP echo for
 * kernel-bypass backends (offpath/wire.h includes every part; docs/wire.md). */
#ifndef OFFPATH_WIRE_FRAME_H
#define OFFPATH_WIRE_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/wire/addr.h"

/* Ethernet + IPv4 + UDP around a RoCEv2 payload, for backends that move
 * whole frames (AF_XDP). Built as Linux sends from an unconnected DF socket
 * (ID 0, DF, TTL 64; no UDP checksum, as RoCEv2 allows): the ICRC stays
 * valid. No VLAN tags, no IPv4 options on the way out. */
#define OP_ETH_HDR_LEN 14
#define OP_UDP_FRAME_HDR_LEN 42 /* Ethernet + IPv4 + UDP */
struct op_frame_l2 {
    uint8_t src_mac[6], dst_mac[6];
    uint8_t tos;
};
/* Writes the headers for payload_len bytes that the caller puts (or has put)
 * at frame + OP_UDP_FRAME_HDR_LEN; returns the frame's length, 0 if cap or
 * IPv4's 64 KiB is too small. */
OP_API size_t op_udp_frame_build(uint8_t *frame, size_t cap, const struct op_flow *flow,
                                 const struct op_frame_l2 *l2, size_t payload_len);
/* The same headers alone, into OP_UDP_FRAME_HDR_LEN bytes, for a writer that
 * keeps the payload where it is (a capture); 0 if IPv4's 64 KiB is too small. */
OP_API size_t op_udp_frame_headers(uint8_t *frame, const struct op_flow *flow,
                                   const struct op_frame_l2 *l2, size_t payload_len);
/* Why a frame is not a UDP/IPv4 datagram we take: the verdicts' names are
 * the backends' drop counters. */
enum op_frame_verdict {
    OP_FRAME_OK,
    OP_FRAME_SHORT,     /* ends inside a header */
    OP_FRAME_NOT_IPV4,  /* another EtherType (ARP, IPv6, a VLAN tag) */
    OP_FRAME_BAD_IPV4,  /* version, header length, checksum, total length */
    OP_FRAME_FRAGMENT,
    OP_FRAME_NOT_UDP,
    OP_FRAME_BAD_UDP,   /* UDP length disagrees with IPv4's */
    OP_FRAME_VERDICTS_
};
/* On OP_FRAME_OK: the flow (host order), the sender's MAC and where the UDP
 * payload lies; Ethernet padding after the IPv4 packet is ignored. Nothing
 * is written otherwise. */
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

/* IPv6 (RFC 8200) for the same servers: UDP datagrams to their address,
 * and the neighbour advertisements (RFC 4861) and echo replies (RFC 4443)
 * a host owes. No extension header is followed (a fragment, or any other,
 * is not a datagram we take). Addresses in network order. The verdicts
 * are op_udp_frame_parse's (NOT_IPV4: another EtherType; BAD_IPV4: a bad
 * IPv6 header; BAD_UDP also for a zero UDP checksum, which IPv6 does not
 * allow; its value is not checked, as offloads leave it partial). */
#define OP_UDP6_FRAME_HDR_LEN 62 /* Ethernet + IPv6 + UDP */
struct op_flow6 {
    uint8_t src[16], dst[16];
    uint16_t src_port, dst_port; /* host order */
};
OP_API unsigned op_udp6_frame_parse(const uint8_t *frame, size_t len, struct op_flow6 *flow,
                                    uint8_t src_mac[6], size_t *payload_off, size_t *payload_len);
/* The headers (hop limit 64, the UDP checksum computed) for payload_len
 * bytes already at frame + OP_UDP6_FRAME_HDR_LEN; the frame's length. */
OP_API size_t op_udp6_frame_headers(uint8_t *frame, const struct op_flow6 *flow,
                                    const struct op_frame_l2 *l2, size_t payload_len);
/* A neighbour solicitation for ip6 (hop limit 255, checksum right) turned
 * into the solicited advertisement with our MAC (to all nodes for
 * duplicate address detection); the reply may be longer than the request,
 * so cap is the frame buffer's size. 0 and the frame untouched otherwise. */
OP_API size_t op_ndp_advert_in_place(uint8_t *frame, size_t len, size_t cap,
                                     const uint8_t ip6[16], const uint8_t mac[6]);
OP_API size_t op_icmp6_echo_reply_in_place(uint8_t *frame, size_t len, const uint8_t ip6[16],
                                           const uint8_t mac[6]);

#endif
