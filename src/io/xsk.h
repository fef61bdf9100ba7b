/* Internal to src/io: one AF_XDP socket on one queue of an interface, with
 * a UMEM of its own (RX frames first, then TX frames) and its four rings.
 * The af_xdp backends (payloads: xdp.c, whole frames: xdp_frames.c) own
 * one per queue. */
#ifndef OFFPATH_IO_XSK_H
#define OFFPATH_IO_XSK_H

#include <stdbool.h>
#include <stdint.h>

#include "offpath/common.h"

#define XSK_FRAME 4096u
#define XSK_FRAME_ROOM (XSK_FRAME - 256u) /* copy mode leaves XDP_PACKET_HEADROOM */
#define XSK_TX_FRAMES 2048u
#define XSK_DEFAULT_RX_FRAMES 2048u
/* A frame over one UMEM frame (a jumbo MTU) spans several descriptors
 * (XDP_USE_SG, Linux 6.6): gathered on receive, split on send; up to this
 * many bytes. */
#define XSK_SG_MAX 9216u

struct xsk_ring {
    uint32_t *prod, *cons, *flags;
    void *desc;
    uint32_t mask;
    uint32_t head; /* ours: the producer index of fill/tx, the consumer of rx/comp */
    void *map;
    size_t map_len;
};

struct xsk {
    int fd;
    uint32_t queue;
    bool zero_copy; /* the driver took XDP_ZEROCOPY */
    uint8_t *umem;
    uint32_t rx_frames;
    struct xsk_ring fill, comp, rx, tx;
    uint64_t free_tx[XSK_TX_FRAMES];
    uint32_t n_free;
    uint8_t *gather; /* bound with XDP_USE_SG: a multi-descriptor frame made whole */
    uint64_t sg_refused; /* multi-descriptor frames over XSK_SG_MAX or cut short */
};

/* Socket, UMEM and rings bound to queue of ifindex: zero-copy first when
 * asked (copy mode where the driver has none); sg: frames of several
 * descriptors (an MTU over what one frame holds). On failure *what names
 * the step, the errno is in the status, and xsk_close undoes what was
 * done. */
op_status_t xsk_open(struct xsk *s, int ifindex, uint32_t queue, uint32_t rx_frames,
                     bool zero_copy, bool sg, const char **what);
void xsk_close(struct xsk *s);

/* Up to max received frames, each handed to take (which copies what it
 * keeps: the frame goes back to the fill ring after); how many were seen. */
typedef void (*xsk_take_fn)(void *ctx, const uint8_t *frame, uint32_t len);
uint32_t xsk_rx(struct xsk *s, uint32_t max, xsk_take_fn take, void *ctx);

/* A free TX frame to write up to XSK_FRAME_ROOM bytes into (NULL: no free
 * frame or ring slot), then xsk_tx_put with its length; xsk_tx_flush
 * publishes what was put and kicks the kernel. */
uint8_t *xsk_tx_frame(struct xsk *s, uint64_t *addr);
void xsk_tx_put(struct xsk *s, uint64_t addr, uint32_t len);
/* A whole frame copied onto the ring, over several descriptors where it is
 * longer than one frame and the socket is sg; false: no room (nothing put). */
bool xsk_tx_copy(struct xsk *s, const uint8_t *frame, uint32_t len);
void xsk_tx_flush(struct xsk *s);
bool xsk_tx_pending(const struct xsk *s); /* frames on the ring the kernel has not taken */
void xsk_tx_kick(struct xsk *s);          /* completions reclaimed, the kernel kicked */

/* The kernel's counts: frames lost because our RX ring was full, others
 * dropped on the way. */
void xsk_stats(const struct xsk *s, uint64_t *rx_ring_full, uint64_t *rx_dropped);

#endif
