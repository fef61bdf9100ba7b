/* RoCEv2 atomic extension headers (IBTA 9.3.3.4 and 9.3.5.3): the
 * AtomicETH of a CMP_SWAP / FETCH_ADD request and the AtomicAckETH of its
 * ATOMIC_ACKNOWLEDGE. Kept apart from wire.h so each protocol has its own
 * header. All big-endian on the wire, host order here. */
#ifndef OFFPATH_WIRE_ATOMIC_H
#define OFFPATH_WIRE_ATOMIC_H

#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

#define OP_ATOMIC_ETH_LEN 28
#define OP_ATOMIC_ACK_ETH_LEN 8

struct op_atomic_eth {
    uint64_t va;       /* 8-byte aligned, or the responder NAKs (invalid request) */
    uint32_t rkey;
    uint64_t swap_add; /* CMP_SWAP: the value to swap in; FETCH_ADD: the addend */
    uint64_t compare;  /* CMP_SWAP only */
};

OP_API void op_atomic_eth_encode(const struct op_atomic_eth *h, uint8_t out[OP_ATOMIC_ETH_LEN]);
OP_API op_status_t op_atomic_eth_decode(const uint8_t *buf, size_t len, struct op_atomic_eth *h);
/* The AtomicAckETH: the 8 bytes the target held before the operation. */
OP_API void op_atomic_ack_encode(uint64_t orig, uint8_t out[OP_ATOMIC_ACK_ETH_LEN]);
OP_API op_status_t op_atomic_ack_decode(const uint8_t *buf, size_t len, uint64_t *orig);

#endif
