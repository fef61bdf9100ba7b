/* The IPv6 half of the UDP framing (frame6.c), behind op_udp_frame_parse
 * and op_udp_frame_headers, which pick it by EtherType or flow family. */
#ifndef OFFPATH_WIRE_FRAME_INTERNAL_H
#define OFFPATH_WIRE_FRAME_INTERNAL_H

#include "offpath/wire.h"

unsigned wire_udp6_frame_parse(const uint8_t *frame, size_t len, struct op_flow *flow,
                               uint8_t src_mac[6], size_t *payload_off, size_t *payload_len);
size_t wire_udp6_frame_headers(uint8_t *frame, const struct op_flow *flow,
                               const struct op_frame_l2 *l2, size_t payload_len);
/* The neighbour solicitation and ARP request behind op_neigh_solicit_build. */
size_t wire_ndp_solicit_build(uint8_t *frame, size_t cap, const uint8_t src6[16],
                              const uint8_t mac[6], const uint8_t target6[16]);
size_t wire_arp_request_build(uint8_t *frame, size_t cap, uint32_t src, const uint8_t mac[6],
                              uint32_t target);

#endif
