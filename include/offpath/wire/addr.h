/* offpath wire: addresses and flows: the envelope every packet of ours travels in
 * (offpath/wire.h includes every part; docs/wire.md). */
#ifndef OFFPATH_WIRE_ADDR_H
#define OFFPATH_WIRE_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

/* The IPv4/UDP envelope of a RoCEv2 packet sent from an ordinary unconnected
 * UDP socket with DF set (Identification 0). Addresses and ports host order. */
struct op_flow {
    uint32_t src_ip, dst_ip;
    uint16_t src_port, dst_port;
};

#endif
