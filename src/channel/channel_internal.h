/* Internal to src/channel: not part of the public API. */
#ifndef OFFPATH_CHANNEL_INTERNAL_H
#define OFFPATH_CHANNEL_INTERNAL_H

#include <stdatomic.h>

#include "offpath/channel.h"

/* A byte-stream transport under the channel: unix and tcp sockets, or the
 * shared-memory ring pair. Each call waits at most until deadline_ns
 * (op_now_ns time); write returns OP_OK after writing all len bytes, read
 * returns OP_OK with *got > 0, or OP_ERR_IO with *got 0 at a clean end. */
struct chan_transport;
struct chan_transport_ops {
    op_status_t (*write)(struct chan_transport *t, const uint8_t *buf, size_t len,
                         uint64_t deadline_ns);
    op_status_t (*read)(struct chan_transport *t, uint8_t *buf, size_t cap, size_t *got,
                        uint64_t deadline_ns);
    void (*close)(struct chan_transport *t);
};
struct chan_transport {
    const struct chan_transport_ops *ops;
    char rx_why[160]; /* the last read failure, for op_channel_error */
    char tx_why[160]; /* the last write failure (each written by one thread) */
};

op_status_t chan_sock_open(const struct op_channel_config *cfg, struct chan_transport **out,
                           char why[256]);
op_status_t chan_shm_open(const struct op_channel_config *cfg, struct chan_transport **out,
                          char why[256]);

#endif
