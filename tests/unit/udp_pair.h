/* What the io tests share: two UDP endpoints on loopback with a transmit
 * and a receive buffer, and an io's counters read one at a time. */
#ifndef OFFPATH_TEST_UDP_PAIR_H
#define OFFPATH_TEST_UDP_PAIR_H

#include <stdbool.h>

#include "offpath/io.h"

static inline uint64_t io_counter(const struct op_io *io, enum op_io_counter c)
{
    uint64_t v[OP_IO_C_COUNT_];
    op_io_counters(io, v);
    return v[c];
}

/* Endpoints on a and b (ports the kernel picks), ntx packets to send from,
 * a burst to receive into; false if any failed (udp_pair_close undoes
 * what was done). */
static inline bool udp_pair_open(const struct op_addr *a, const struct op_addr *b, int ntx,
                                 struct op_io **ia, struct op_io **ib, struct op_pktbuf *tx,
                                 struct op_pktbuf *rx)
{
    return op_io_udp_open_addr(a, 0, ia) == OP_OK && op_io_udp_open_addr(b, 0, ib) == OP_OK &&
           op_pktbuf_init(tx, ntx) == OP_OK && op_pktbuf_init(rx, OP_IO_BURST) == OP_OK;
}

static inline void udp_pair_close(struct op_io *a, struct op_io *b, struct op_pktbuf *tx,
                                  struct op_pktbuf *rx)
{
    op_io_close(a);
    op_io_close(b);
    op_pktbuf_free(tx);
    op_pktbuf_free(rx);
}

#endif
