/* offpath io: placed receives, payloads read straight to where the
 * receiver foresees they belong (part of offpath/io.h, which includes it). */
#ifndef OFFPATH_IO_PLACED_H
#define OFFPATH_IO_PLACED_H

#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

struct op_io;
struct op_pkt;

/* Where a receive may put the payloads of the packets it reads next: the
 * k-th packet read (k = 0, 1, ... in the order read), if it is hdr bytes of
 * headers, then its payload, then trl bytes of trailer, gets its payload
 * at at + k * payload (payload bytes each), none of it past at + room. A
 * receiver that knows what comes next (an RDMA responder in the middle of
 * a WRITE: the next packets of the message, in order) so has the kernel
 * copy the payloads straight to where they belong. room 0: no place yet,
 * but likely one after the next packet (the next message of a stream of
 * them opens with it): the backend reads no more than the next datagram. */
struct op_io_place {
    uint8_t *at;
    size_t room;
    uint32_t hdr, payload, trl;
};
/* op_io_recv_lent where the backend can place payloads (udp with batching;
 * the fault layer passes it on; elsewhere op_io_recv_lent). The read may
 * write anything anywhere in [at, at + room) (the caller allows that: the
 * bytes there are not yet received ones), and nothing outside it. A packet
 * whose bytes fell as place foresaw is handed out as data[0..ext_at)
 * ext[0..ext_len) data[ext_at..len) (its headers and trailer in data, lent,
 * ext_at = hdr, its payload at ext inside [at, at + room)), whatever packet
 * it turns out to be: the caller checks that it is the one foreseen, and
 * moves its payload where it belongs if not. Every other packet comes
 * whole in data. place NULL: op_io_recv_lent. */
OP_API int op_io_recv_placed(struct op_io *io, struct op_pkt *pkts, int max,
                             const struct op_io_place *place);

#endif
