/* One AF_XDP socket: the UMEM and rings of one queue (see xsk.h). Frames
 * are copied in and out by the callers, so a frame returns to the fill
 * ring as soon as it is read and the ring never runs dry under a slow
 * engine. */
#include <errno.h>
#include <linux/if_xdp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xsk.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif

#ifndef XDP_USE_SG /* Linux 6.6's; older headers lack them */
#define XDP_USE_SG (1u << 4)
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1u << 0)
#endif

#define XSK_TX_RING_LEN 2048u
#define XSK_KICKS 64 /* bound on TX kicks per flush */

static uint32_t load_acquire(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store_release(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static uint64_t *addr_slot(struct xsk_ring *r, uint32_t i)
{
    return (uint64_t *)r->desc + (i & r->mask);
}
static struct xdp_desc *desc_slot(struct xsk_ring *r, uint32_t i)
{
    return (struct xdp_desc *)r->desc + (i & r->mask);
}

static size_t umem_len(const struct xsk *s)
{
    return (size_t)(s->rx_frames + XSK_TX_FRAMES) * XSK_FRAME;
}

/* Descriptors come from the kernel; still, nothing outside the UMEM is
 * ever read or handed back. */
static bool frame_in_umem(const struct xsk *s, uint64_t addr, uint32_t len)
{
    return addr < umem_len(s) && len <= XSK_FRAME && (addr & (XSK_FRAME - 1)) + len <= XSK_FRAME;
}

/* The descriptors of the frame that starts from descriptors past the ring's
 * head: 1 unless the socket is sg and the frame continues (XDP_PKT_CONTD);
 * 0 while its last one has not come. */
static uint32_t frame_descs(struct xsk *s, uint32_t from, uint32_t ready)
{
    for (uint32_t k = 0; from + k < ready;) {
        const struct xdp_desc *d = desc_slot(&s->rx, s->rx.head + from + k++);
        if (s->gather == NULL || !(d->options & XDP_PKT_CONTD))
            return k;
    }
    return 0;
}

/* A frame of k descriptors to take: in place when it is one, else gathered
 * whole (a jumbo frame) or refused if a piece is not where it may be. */
static void deliver(struct xsk *s, uint32_t at, uint32_t k, xsk_take_fn take, void *ctx)
{
    const struct xdp_desc *d = desc_slot(&s->rx, at);
    if (k == 1) {
        if (frame_in_umem(s, d->addr, d->len))
            take(ctx, s->umem + d->addr, d->len);
        return;
    }
    uint32_t len = 0;
    for (uint32_t i = 0; i < k; i++, d = desc_slot(&s->rx, at + i)) {
        if (!frame_in_umem(s, d->addr, d->len) || d->len > XSK_SG_MAX - len) {
            s->sg_refused++;
            return;
        }
        memcpy(s->gather + len, s->umem + d->addr, d->len);
        len += d->len;
    }
    take(ctx, s->gather, len);
}

uint32_t xsk_rx(struct xsk *s, uint32_t max, xsk_take_fn take, void *ctx)
{
    uint32_t ready = load_acquire(s->rx.prod) - s->rx.head;
    uint32_t used = 0, frames = 0;
    for (uint32_t k; frames < max && (k = frame_descs(s, used, ready)) > 0; used += k, frames++)
        deliver(s, s->rx.head + used, k, take, ctx);
    if (used == 0)
        return 0;
    for (uint32_t i = 0; i < used; i++)
        *addr_slot(&s->fill, s->fill.head++) =
            desc_slot(&s->rx, s->rx.head + i)->addr & ~(uint64_t)(XSK_FRAME - 1);
    s->rx.head += used;
    store_release(s->rx.cons, s->rx.head);
    store_release(s->fill.prod, s->fill.head);
    return frames;
}

static void reclaim_tx(struct xsk *s)
{
    uint32_t done = load_acquire(s->comp.prod) - s->comp.head;
    for (uint32_t i = 0; i < done && s->n_free < XSK_TX_FRAMES; i++) {
        uint64_t addr = *addr_slot(&s->comp, s->comp.head + i);
        if (addr >= (uint64_t)s->rx_frames * XSK_FRAME && frame_in_umem(s, addr, 0))
            s->free_tx[s->n_free++] = addr & ~(uint64_t)(XSK_FRAME - 1);
    }
    s->comp.head += done;
    store_release(s->comp.cons, s->comp.head);
}

uint8_t *xsk_tx_frame(struct xsk *s, uint64_t *addr)
{
    if (s->n_free == 0)
        reclaim_tx(s);
    if (s->n_free == 0 || s->tx.head - load_acquire(s->tx.cons) > s->tx.mask)
        return NULL; /* the kernel is behind */
    *addr = s->free_tx[--s->n_free];
    return s->umem + *addr;
}

void xsk_tx_put(struct xsk *s, uint64_t addr, uint32_t len)
{
    *desc_slot(&s->tx, s->tx.head++) = (struct xdp_desc){.addr = addr, .len = len};
}

bool xsk_tx_copy(struct xsk *s, const uint8_t *frame, uint32_t len)
{
    uint32_t pieces = len <= XSK_FRAME_ROOM ? 1
                      : s->gather != NULL && len <= XSK_SG_MAX
                          ? (len + XSK_FRAME_ROOM - 1) / XSK_FRAME_ROOM
                          : 0;
    if (s->n_free < pieces)
        reclaim_tx(s);
    if (pieces == 0 || s->n_free < pieces || s->tx.head - load_acquire(s->tx.cons) + pieces > s->tx.mask + 1)
        return false; /* too long, or the kernel is behind */
    for (uint32_t i = 0, off = 0; i < pieces; i++, off += XSK_FRAME_ROOM) {
        uint64_t addr = s->free_tx[--s->n_free];
        uint32_t n = len - off < XSK_FRAME_ROOM ? len - off : XSK_FRAME_ROOM;
        memcpy(s->umem + addr, frame + off, n);
        *desc_slot(&s->tx, s->tx.head++) = (struct xdp_desc){
            .addr = addr, .len = n, .options = i + 1 < pieces ? XDP_PKT_CONTD : 0};
    }
    return true;
}

bool xsk_tx_pending(const struct xsk *s) { return load_acquire(s->tx.cons) != s->tx.head; }

/* Copy mode moves what is on the TX ring during sendto(), a bounded batch
 * per call: kick until the kernel has taken everything or stops taking. */
void xsk_tx_kick(struct xsk *s)
{
    reclaim_tx(s);
    for (int k = 0; k < XSK_KICKS && xsk_tx_pending(s); k++) {
        if (sendto(s->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0)
            continue;
        if (errno != EAGAIN && errno != EBUSY && errno != ENOBUFS && errno != EINTR)
            break;
        reclaim_tx(s);
    }
}

void xsk_tx_flush(struct xsk *s)
{
    store_release(s->tx.prod, s->tx.head);
    xsk_tx_kick(s);
}

void xsk_stats(const struct xsk *s, uint64_t *rx_ring_full, uint64_t *rx_dropped)
{
    struct xdp_statistics ks;
    socklen_t len = sizeof ks;
    *rx_ring_full = *rx_dropped = 0;
    if (s->fd >= 0 && getsockopt(s->fd, SOL_XDP, XDP_STATISTICS, &ks, &len) == 0) {
        *rx_ring_full = ks.rx_ring_full;
        *rx_dropped = ks.rx_dropped;
    }
}

/* ---- setup */

static op_status_t map_ring(int fd, struct xsk_ring *r, const struct xdp_ring_offset *o,
                            size_t elem, off_t pgoff, uint32_t size)
{
    r->map_len = o->desc + size * elem;
    r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, pgoff);
    if (r->map == MAP_FAILED) {
        r->map = NULL;
        return op_status_from_errno(errno);
    }
    uint8_t *base = r->map;
    r->prod = (uint32_t *)(void *)(base + o->producer);
    r->cons = (uint32_t *)(void *)(base + o->consumer);
    r->flags = (uint32_t *)(void *)(base + o->flags);
    r->desc = base + o->desc;
    r->mask = size - 1;
    return OP_OK;
}

static op_status_t fail(const char **what, const char *step)
{
    *what = step;
    return op_status_from_errno(errno);
}

static op_status_t map_rings(struct xsk *s, const char **what)
{
    struct xdp_mmap_offsets off;
    socklen_t olen = sizeof off;
    uint32_t rxr = s->rx_frames, txr = XSK_TX_RING_LEN;
    if (getsockopt(s->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &olen) != 0 ||
        map_ring(s->fd, &s->fill, &off.fr, sizeof(uint64_t), XDP_UMEM_PGOFF_FILL_RING, rxr) !=
            OP_OK ||
        map_ring(s->fd, &s->comp, &off.cr, sizeof(uint64_t), XDP_UMEM_PGOFF_COMPLETION_RING,
                 txr) != OP_OK ||
        map_ring(s->fd, &s->rx, &off.rx, sizeof(struct xdp_desc), XDP_PGOFF_RX_RING, rxr) !=
            OP_OK ||
        map_ring(s->fd, &s->tx, &off.tx, sizeof(struct xdp_desc), XDP_PGOFF_TX_RING, txr) != OP_OK)
        return fail(what, "mapping the rings");
    return OP_OK;
}

static op_status_t make_rings(struct xsk *s, const char **what)
{
    size_t len = umem_len(s);
    s->umem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s->umem == MAP_FAILED) {
        s->umem = NULL;
        return fail(what, "UMEM");
    }
    struct xdp_umem_reg reg = {.addr = (uint64_t)(uintptr_t)s->umem, .len = len,
                               .chunk_size = XSK_FRAME};
    unsigned rxr = s->rx_frames, txr = XSK_TX_RING_LEN;
    if (setsockopt(s->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg) != 0)
        return fail(what, "registering the UMEM");
    if (setsockopt(s->fd, SOL_XDP, XDP_UMEM_FILL_RING, &rxr, sizeof rxr) != 0 ||
        setsockopt(s->fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &txr, sizeof txr) != 0 ||
        setsockopt(s->fd, SOL_XDP, XDP_RX_RING, &rxr, sizeof rxr) != 0 ||
        setsockopt(s->fd, SOL_XDP, XDP_TX_RING, &txr, sizeof txr) != 0)
        return fail(what, "sizing the rings");
    op_status_t st = map_rings(s, what);
    if (st != OP_OK)
        return st;
    for (uint32_t i = 0; i < s->rx_frames; i++)
        *addr_slot(&s->fill, s->fill.head++) = (uint64_t)i * XSK_FRAME;
    store_release(s->fill.prod, s->fill.head);
    for (uint32_t i = 0; i < XSK_TX_FRAMES; i++)
        s->free_tx[s->n_free++] = (uint64_t)(s->rx_frames + i) * XSK_FRAME;
    return OP_OK;
}

/* Zero-copy where the driver has it (EOPNOTSUPP, EINVAL or EPROTONOSUPPORT
 * otherwise: copy mode then). */
static op_status_t bind_queue(struct xsk *s, int ifindex, bool zero_copy, const char **what)
{
    uint16_t sg = s->gather != NULL ? XDP_USE_SG : 0;
    struct sockaddr_xdp sx = {.sxdp_family = AF_XDP, .sxdp_ifindex = (uint32_t)ifindex,
                              .sxdp_queue_id = s->queue, .sxdp_flags = XDP_ZEROCOPY | sg};
    if (zero_copy && bind(s->fd, (struct sockaddr *)&sx, sizeof sx) == 0) {
        s->zero_copy = true;
        return OP_OK;
    }
    sx.sxdp_flags = XDP_COPY | sg;
    if (bind(s->fd, (struct sockaddr *)&sx, sizeof sx) != 0)
        return fail(what, sg ? "binding the AF_XDP socket to its queue with XDP_USE_SG (an MTU "
                               "over one frame needs Linux 6.6 or later)"
                             : "binding the AF_XDP socket to its queue");
    return OP_OK;
}

op_status_t xsk_open(struct xsk *s, int ifindex, uint32_t queue, uint32_t rx_frames,
                     bool zero_copy, bool sg, const char **what)
{
    memset(s, 0, sizeof *s);
    s->queue = queue;
    s->rx_frames = rx_frames;
    s->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (s->fd < 0)
        return fail(what, "AF_XDP socket");
    if (sg && (s->gather = malloc(XSK_SG_MAX)) == NULL)
        return fail(what, "a buffer for frames of several descriptors");
    op_status_t st = make_rings(s, what);
    return st == OP_OK ? bind_queue(s, ifindex, zero_copy, what) : st;
}

static void unmap_ring(struct xsk_ring *r)
{
    if (r->map != NULL)
        munmap(r->map, r->map_len);
    r->map = NULL;
}

void xsk_close(struct xsk *s)
{
    unmap_ring(&s->fill);
    unmap_ring(&s->comp);
    unmap_ring(&s->rx);
    unmap_ring(&s->tx);
    if (s->fd >= 0)
        close(s->fd);
    if (s->umem != NULL)
        munmap(s->umem, umem_len(s));
    free(s->gather);
    s->fd = -1;
    s->umem = NULL;
    s->gather = NULL;
}
