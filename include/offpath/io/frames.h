/* offpath io: whole frames (af_xdp on a whole port, a DPDK queue): the
 * frame type, receiving and sending frames, buffers lent by a backend, and
 * the serving layer that makes a frame backend a host. offpath/io.h
 * includes this. */
#ifndef OFFPATH_IO_FRAMES_H
#define OFFPATH_IO_FRAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/wire.h"

struct op_io;
struct op_pktbuf;

/* ---- Whole frames, for backends that see them (af_xdp on a whole port,
 * a DPDK queue): an engine that forwards, answers ARP/NDP or serves its
 * own protocols gets every frame with its headers parsed. data: a buffer of
 * OP_IO_BUF_SIZE bytes of the caller's (op_pktbuf_frames points frames at
 * a pktbuf's); the frame is copied in on receive and out on send. */
struct op_frame {
    uint8_t *data;
    uint32_t len;
    uint16_t queue; /* received on; sent on queue % the backend's queues */
    /* bytes writable at data (an answer built in place): OP_IO_BUF_SIZE
     * for the caller's buffers, the buffer's own room for a lent one */
    uint32_t room;
    /* Non-NULL: the backend's own buffer, lent by op_io_recv_frames_lent;
     * it goes back by op_io_send_frames on the same backend (sent as it is:
     * no copy) or op_io_release_frames. */
    void *lent;
    struct op_frame_info info; /* receive: op_frame_parse's view */
};
/* Non-blocking: frames read (0 none) or -errno (-EOPNOTSUPP: a backend of
 * payloads, udp or af_xdp steering one address). */
OP_API int op_io_recv_frames(struct op_io *io, struct op_frame *f, int max);
/* Frames sent; the rest are counted drops (tx_drops). */
OP_API int op_io_send_frames(struct op_io *io, const struct op_frame *f, int n);
OP_API bool op_io_has_frames(const struct op_io *io);
/* Receive without a copy where the backend can lend its buffers (a DPDK
 * queue's mbufs: op_io_lends_frames): data, room and lent are the
 * backend's, whatever f held (a frame whose bytes are not contiguous, a
 * chained jumbo mbuf, is lent with len 0). Elsewhere the same as
 * op_io_recv_frames into the caller's buffers (lent NULL). Every lent
 * frame goes back exactly once, sent or released. */
OP_API int op_io_recv_frames_lent(struct op_io *io, struct op_frame *f, int max);
OP_API void op_io_release_frames(struct op_io *io, struct op_frame *f, int n);
/* As much of f as the device takes now, in order: how many (the first of
 * f); the others stay the caller's, lent ones still lent, to send again or
 * release (a full queue retried, as DPDK applications do). Where the
 * backend cannot leave a frame unsent, op_io_send_frames. */
OP_API int op_io_send_frames_some(struct op_io *io, const struct op_frame *f, int n);
OP_API bool op_io_lends_frames(const struct op_io *io);
/* Frames without op_frame_parse's view (info not written), for an engine
 * that only moves them on (a pipeline's port side) or reads the bytes its
 * own way (a DNS answerer, UDP first): a DPDK queue or ring. */
OP_API void op_io_frames_unparsed(struct op_io *io, bool unparsed);
/* Lent frames of a DPDK queue or ring may be sent on another DPDK queue or
 * ring of the same port (both mbufs): the holder then forgets them (lent
 * NULL for those sent) and releases the others where they came from. */
/* The MAC of a frame backend's port; OP_ERR_INVAL for the others. */
OP_API op_status_t op_io_local_mac(const struct op_io *io, uint8_t mac[6]);
/* Points frames[i].data at b's buffers (n = b->n of them). */
OP_API void op_pktbuf_frames(const struct op_pktbuf *b, struct op_frame *frames);
/* A payload endpoint on a frame backend (taking ownership of frames), as a
 * host's stack would make it: UDP to addr:port becomes packets; ARP
 * requests, neighbour solicitations and echo requests for addr are
 * answered; neighbours are learnt from the frames they send, and one not
 * known is asked for (ARP, NDP) while its packets wait, up to
 * OP_IO_SERVE_PENDING of them, for 3 s at most. */
#define OP_IO_SERVE_PENDING 256
OP_API op_status_t op_io_frames_serve(struct op_io *frames, const struct op_addr *addr,
                                      uint16_t port, struct op_io **out);
/* What the serving layer did besides packets: replies to ARP/NDP/echo,
 * questions asked, frames not for it, packets held for a neighbour and
 * those dropped when none answered or no room was left. */
#define OP_IO_SERVE_COUNTERS(X)                                                                    \
    X(control_replies)                                                                             \
    X(neigh_asked)                                                                                 \
    X(rx_not_ours)                                                                                 \
    X(tx_held)                                                                                     \
    X(tx_unresolved)

enum op_io_serve_counter {
#define OP_IO_SERVE_ENUM_(n) OP_IO_SERVE_C_##n,
    OP_IO_SERVE_COUNTERS(OP_IO_SERVE_ENUM_)
#undef OP_IO_SERVE_ENUM_
        OP_IO_SERVE_C_COUNT_
};
OP_API const char *op_io_serve_counter_name(unsigned c); /* NULL past the list */
/* Zeros for an io that is not a serving layer. */
OP_API void op_io_serve_counters(const struct op_io *io, uint64_t out[OP_IO_SERVE_C_COUNT_]);

#endif
