/* The IPv6 half of the UDP framing (frame6.c), behind op_udp_frame_parse
 * and op_udp_frame_headers, which pick it by EtherType or flow family. */
#ifndef OFFPATH_WIRE_FRAME_INTERNAL_H
#define OFFPATH_WIRE_FRAME_INTERNAL_H

#include "offpath/wire.h"

unsigned wire_udp6_frame_parse(const uint8_t *frame, size_t len, struct op_flow *flow,
                               uint8_t src_mac[6], size_t *payload_off, size_t *payload_len);
size_t wire_udp6_frame_headers(uint8_t *frame, const struct op_flow *flow,
                               const struct op_frame_l2 *l2, size_t payload_len);

#endif
