/* The af_xdp backend: RoCEv2 frames straight between an interface's queue
 * and this process's memory. The kernel copies each frame into a shared
 * buffer area (UMEM) and posts it on a ring; reading is a load from that
 * ring, with no system call and no UDP/IP stack. Sending puts frames on
 * the TX ring and kicks the kernel once per burst. Copy mode, so any driver
 * works (veth, lo, NICs without zero-copy); queue 0 only.
 *
 * A UDP socket (the udp backend) on the same address and port is the slow
 * path: packets to a peer whose MAC is not known yet leave through it (the
 * kernel resolves the address on the way), and what the program did not
 * steer (frames that came in on another queue of a multi-queue NIC, or
 * before the socket was in the map) reaches it and is read every
 * KERNEL_POLL_EVERY empty polls. The peer's MAC comes from the frames it
 * sends us and from the kernel's neighbour table (/proc/net/arp). Peers
 * must be on-link. */
#include <errno.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xdp_internal.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif

#define XDP_FRAME 4096u
#define XDP_RX_FRAMES 2048u /* the default; op_io_xdp_open_sized takes more */
#define XDP_TX_FRAMES 2048u
#define XDP_TX_RING_LEN 2048u
#define XDP_FRAME_ROOM (XDP_FRAME - 256u) /* copy mode leaves XDP_PACKET_HEADROOM */
#define XDP_KICKS 64 /* bound on TX kicks per burst */
#define NEIGH_SLOTS 32
#define NEIGH_ASK_NS (1000 * 1000) /* between looks at /proc/net/arp for one address */
#define KERNEL_POLL_EVERY 32       /* empty ring polls between reads of the UDP socket */

struct xring {
    uint32_t *prod, *cons, *flags;
    void *desc;
    uint32_t mask;
    uint32_t head; /* ours: the producer index of fill/tx, the consumer of rx/comp */
    void *map;
    size_t map_len;
};

struct neigh {
    uint32_t ip;
    bool known;
    uint8_t mac[6];
    uint64_t asked_at;
};

struct xdp_io {
    struct op_io io;
    int fd, ifindex;
    struct op_io *kernel; /* the slow path: a UDP socket on our address and port */
    uint32_t empty_polls;
    char ifname[IF_NAMESIZE];
    const struct op_log *log; /* where setup failures go (not owned) */
    struct op_frame_l2 l2;
    struct xdp_bpf bpf;
    uint8_t *umem;
    uint32_t rx_frames; /* UMEM frames for RX: the fill and RX rings' size too */
    struct xring fill, comp, rx, tx;
    uint64_t free_tx[XDP_TX_FRAMES];
    uint32_t n_free;
    struct neigh neigh[NEIGH_SLOTS];
    uint32_t neigh_next;
    uint64_t xc[OP_IO_XDP_C_COUNT_]; /* enum op_io_xdp_counter; the kernel's read on demand */
};

static struct xdp_io *xdp_of(struct op_io *io) { return (struct xdp_io *)io; }

static uint32_t load_acquire(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store_release(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static uint64_t *addr_slot(struct xring *r, uint32_t i) { return (uint64_t *)r->desc + (i & r->mask); }
static struct xdp_desc *desc_slot(struct xring *r, uint32_t i)
{
    return (struct xdp_desc *)r->desc + (i & r->mask);
}

/* ---- neighbours */

static struct neigh *neigh_find(struct xdp_io *x, uint32_t ip)
{
    for (uint32_t i = 0; i < NEIGH_SLOTS; i++)
        if (x->neigh[i].ip == ip && (x->neigh[i].known || x->neigh[i].asked_at))
            return &x->neigh[i];
    return NULL;
}

static struct neigh *neigh_slot(struct xdp_io *x, uint32_t ip)
{
    struct neigh *n = neigh_find(x, ip);
    if (n == NULL) {
        n = &x->neigh[x->neigh_next++ % NEIGH_SLOTS];
        *n = (struct neigh){.ip = ip};
    }
    return n;
}

static void neigh_learn(struct xdp_io *x, uint32_t ip, const uint8_t mac[6])
{
    struct neigh *n = neigh_find(x, ip);
    if (n != NULL && n->known && memcmp(n->mac, mac, 6) == 0)
        return;
    n = neigh_slot(x, ip);
    memcpy(n->mac, mac, 6);
    n->known = true;
}

static bool arp_table_lookup(const struct xdp_io *x, uint32_t ip, uint8_t mac[6])
{
    FILE *f = fopen("/proc/net/arp", "r");
    if (f == NULL)
        return false;
    char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return op_arp_table_lookup(text, ip, x->ifname, mac);
}

static const uint8_t *neigh_mac(struct xdp_io *x, uint32_t ip)
{
    struct neigh *n = neigh_find(x, ip);
    if (n != NULL && n->known)
        return n->mac;
    uint64_t now = op_now_ns();
    if (n != NULL && now - n->asked_at < NEIGH_ASK_NS)
        return NULL;
    n = neigh_slot(x, ip);
    if (arp_table_lookup(x, ip, n->mac)) {
        n->known = true;
        return n->mac;
    }
    n->asked_at = now ? now : 1;
    return NULL;
}

/* ---- receive */

static bool take_frame(struct xdp_io *x, const uint8_t *frame, uint32_t len, struct op_pkt *pkt)
{
    struct op_flow flow;
    uint8_t mac[6];
    size_t off, plen;
    unsigned v = op_udp_frame_parse(frame, len, &flow, mac, &off, &plen);
    struct op_addr ours = x->io.local;
    if (v == OP_FRAME_OK && (flow.dst_port != x->io.local_port || !op_addr_eq(&flow.dst, &ours)))
        v = OP_FRAME_VERDICTS_; /* not ours: the program lets only ours through */
    if (v == OP_FRAME_OK && plen > OP_IO_BUF_SIZE)
        v = OP_FRAME_BAD_UDP;
    if (v != OP_FRAME_OK) {
        x->xc[OP_IO_XDP_C_rx_refused]++;
        return false;
    }
    neigh_learn(x, flow.src.v4, mac);
    memcpy(pkt->data, frame + off, plen);
    pkt->len = (uint32_t)plen;
    pkt->flow = flow;
    return true;
}

/* Descriptors come from the kernel; still, nothing outside the UMEM is
 * ever read or handed back. */
static size_t umem_len(const struct xdp_io *x)
{
    return (size_t)(x->rx_frames + XDP_TX_FRAMES) * XDP_FRAME;
}

static bool frame_in_umem(const struct xdp_io *x, uint64_t addr, uint32_t len)
{
    uint64_t size = umem_len(x);
    return addr < size && len <= XDP_FRAME && (addr & (XDP_FRAME - 1)) + len <= XDP_FRAME;
}

static int recv_via_kernel(struct xdp_io *x, struct op_pkt *pkts, int max)
{
    int k = op_io_recv(x->kernel, pkts, max);
    if (k <= 0)
        return 0;
    x->xc[OP_IO_XDP_C_rx_via_kernel] += (uint64_t)k;
    x->io.c[OP_IO_C_rx_pkts] += (uint64_t)k;
    return k;
}

static int xdp_recv(struct op_io *io, struct op_pkt *pkts, int max)
{
    struct xdp_io *x = xdp_of(io);
    uint32_t ready = load_acquire(x->rx.prod) - x->rx.head;
    uint32_t n = ready < (uint32_t)(max > 0 ? max : 0) ? ready : (uint32_t)max;
    int k = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct xdp_desc *d = desc_slot(&x->rx, x->rx.head + i);
        if (frame_in_umem(x, d->addr, d->len) &&
            take_frame(x, x->umem + d->addr, d->len, &pkts[k]))
            k++;
        *addr_slot(&x->fill, x->fill.head++) = d->addr & ~(uint64_t)(XDP_FRAME - 1);
    }
    if (n == 0)
        return ++x->empty_polls % KERNEL_POLL_EVERY == 0 ? recv_via_kernel(x, pkts, max) : 0;
    x->empty_polls = 0;
    x->rx.head += n;
    store_release(x->rx.cons, x->rx.head);
    store_release(x->fill.prod, x->fill.head);
    io->c[OP_IO_C_rx_pkts] += (uint64_t)k;
    return k;
}

/* ---- send */

static void reclaim_tx(struct xdp_io *x)
{
    uint32_t done = load_acquire(x->comp.prod) - x->comp.head;
    for (uint32_t i = 0; i < done && x->n_free < XDP_TX_FRAMES; i++) {
        uint64_t addr = *addr_slot(&x->comp, x->comp.head + i);
        if (addr >= (uint64_t)x->rx_frames * XDP_FRAME && frame_in_umem(x, addr, 0))
            x->free_tx[x->n_free++] = addr & ~(uint64_t)(XDP_FRAME - 1);
    }
    x->comp.head += done;
    store_release(x->comp.cons, x->comp.head);
}

/* Copy mode moves what is on the TX ring during sendto(), a bounded batch
 * per call: kick until the kernel has taken everything or stops taking. */
static void kick_tx(struct xdp_io *x)
{
    for (int k = 0; k < XDP_KICKS && load_acquire(x->tx.cons) != x->tx.head; k++) {
        if (sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0)
            continue;
        if (errno != EAGAIN && errno != EBUSY && errno != ENOBUFS && errno != EINTR)
            break;
        reclaim_tx(x);
    }
}

/* Returns whether the packet went (on the ring, or through the kernel). */
static bool put_frame(struct xdp_io *x, const struct op_pkt *p)
{
    if (op_addr_is_ipv6(&p->flow.dst))
        return false; /* this socket's address is IPv4: counted as a drop */
    const uint8_t *mac = neigh_mac(x, p->flow.dst.v4);
    if (mac == NULL) {
        bool sent = op_io_send(x->kernel, p, 1) == 1;
        x->xc[OP_IO_XDP_C_tx_via_kernel] += sent;
        return sent;
    }
    if (x->n_free == 0 || p->len > XDP_FRAME_ROOM - OP_UDP_FRAME_HDR_LEN) {
        x->xc[OP_IO_XDP_C_tx_no_room]++;
        return false;
    }
    uint64_t addr = x->free_tx[--x->n_free];
    uint8_t *frame = x->umem + addr;
    struct op_flow f = p->flow;
    f.src = x->io.local;
    f.src_port = x->io.local_port;
    memcpy(x->l2.dst_mac, mac, 6);
    size_t len = op_udp_frame_build(frame, XDP_FRAME_ROOM, &f, &x->l2, p->len);
    memcpy(frame + OP_UDP_FRAME_HDR_LEN, p->data, p->len);
    *desc_slot(&x->tx, x->tx.head++) = (struct xdp_desc){.addr = addr, .len = (uint32_t)len};
    return true;
}

static int xdp_send(struct op_io *io, const struct op_pkt *pkts, int n)
{
    struct xdp_io *x = xdp_of(io);
    int sent = 0;
    reclaim_tx(x);
    for (int i = 0; i < n; i++) {
        if (x->tx.head - load_acquire(x->tx.cons) > x->tx.mask) {
            x->xc[OP_IO_XDP_C_tx_no_room]++; /* the ring is full: the kernel is behind */
            continue;
        }
        sent += put_frame(x, &pkts[i]);
    }
    if (sent > 0) {
        store_release(x->tx.prod, x->tx.head);
        kick_tx(x);
        io->c[OP_IO_C_tx_datagrams]++;
    }
    io->c[OP_IO_C_tx_pkts] += (uint64_t)sent;
    io->c[OP_IO_C_tx_drops] += (uint64_t)(n - sent);
    return sent;
}

/* ---- the rest of the table */

static int xdp_fd(const struct op_io *io) { return ((const struct xdp_io *)io)->fd; }

static uint64_t xdp_deadline(const struct op_io *io)
{
    const struct xdp_io *x = (const struct xdp_io *)io;
    return load_acquire(x->tx.cons) != x->tx.head ? 0 : UINT64_MAX; /* frames left to kick */
}

static void xdp_poll(struct op_io *io, uint64_t now)
{
    (void)now;
    reclaim_tx(xdp_of(io));
    kick_tx(xdp_of(io));
}

static void unmap_ring(struct xring *r)
{
    if (r->map != NULL && r->map != MAP_FAILED)
        munmap(r->map, r->map_len);
    r->map = NULL;
}

static void xdp_close(struct op_io *io)
{
    struct xdp_io *x = xdp_of(io);
    xdp_bpf_teardown(&x->bpf);
    unmap_ring(&x->fill);
    unmap_ring(&x->comp);
    unmap_ring(&x->rx);
    unmap_ring(&x->tx);
    if (x->fd >= 0)
        close(x->fd);
    if (x->kernel != NULL)
        op_io_close(x->kernel);
    if (x->umem != NULL)
        munmap(x->umem, umem_len(x));
    free(x);
}

static const struct op_io_ops xdp_ops = {
    .name = "af_xdp",
    .recv = xdp_recv,
    .send = xdp_send,
    .fd = xdp_fd,
    .deadline = xdp_deadline,
    .poll = xdp_poll,
    .close = xdp_close,
};

/* ---- setup */

/* The step and the kernel's reason to the log, the errno in the status. */
static op_status_t fail_with(const struct xdp_io *x, const char *what, int e)
{
    OP_ERROR(x->log, "AF_XDP on %s: %s: %s", x->ifname, what, strerror(e));
    return op_status_from_errno(e);
}

static op_status_t fail(const struct xdp_io *x, const char *what)
{
    return fail_with(x, what, errno);
}

static op_status_t map_ring(int fd, struct xring *r, const struct xdp_ring_offset *o, size_t elem,
                            off_t pgoff, uint32_t size)
{
    r->map_len = o->desc + size * elem;
    r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, pgoff);
    if (r->map == MAP_FAILED)
        return op_status_from_errno(errno);
    uint8_t *base = r->map;
    r->prod = (uint32_t *)(void *)(base + o->producer);
    r->cons = (uint32_t *)(void *)(base + o->consumer);
    r->flags = (uint32_t *)(void *)(base + o->flags);
    r->desc = base + o->desc;
    r->mask = size - 1;
    return OP_OK;
}

static op_status_t make_rings(struct xdp_io *x)
{
    size_t len = umem_len(x);
    x->umem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (x->umem == MAP_FAILED) {
        x->umem = NULL;
        return fail(x, "UMEM");
    }
    struct xdp_umem_reg reg = {.addr = (uint64_t)(uintptr_t)x->umem, .len = len,
                               .chunk_size = XDP_FRAME};
    unsigned rxr = x->rx_frames, txr = XDP_TX_RING_LEN;
    if (setsockopt(x->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg) != 0)
        return fail(x, "registering the UMEM");
    if (setsockopt(x->fd, SOL_XDP, XDP_UMEM_FILL_RING, &rxr, sizeof rxr) != 0 ||
        setsockopt(x->fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &txr, sizeof txr) != 0 ||
        setsockopt(x->fd, SOL_XDP, XDP_RX_RING, &rxr, sizeof rxr) != 0 ||
        setsockopt(x->fd, SOL_XDP, XDP_TX_RING, &txr, sizeof txr) != 0)
        return fail(x, "sizing the rings");
    struct xdp_mmap_offsets off;
    socklen_t olen = sizeof off;
    if (getsockopt(x->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &olen) != 0 ||
        map_ring(x->fd, &x->fill, &off.fr, sizeof(uint64_t), XDP_UMEM_PGOFF_FILL_RING, rxr) !=
            OP_OK ||
        map_ring(x->fd, &x->comp, &off.cr, sizeof(uint64_t), XDP_UMEM_PGOFF_COMPLETION_RING,
                 txr) != OP_OK ||
        map_ring(x->fd, &x->rx, &off.rx, sizeof(struct xdp_desc), XDP_PGOFF_RX_RING, rxr) !=
            OP_OK ||
        map_ring(x->fd, &x->tx, &off.tx, sizeof(struct xdp_desc), XDP_PGOFF_TX_RING, txr) != OP_OK)
        return fail(x, "mapping the rings");
    for (uint32_t i = 0; i < x->rx_frames; i++)
        *addr_slot(&x->fill, x->fill.head++) = (uint64_t)i * XDP_FRAME;
    store_release(x->fill.prod, x->fill.head);
    for (uint32_t i = 0; i < XDP_TX_FRAMES; i++)
        x->free_tx[x->n_free++] = (uint64_t)(x->rx_frames + i) * XDP_FRAME;
    return OP_OK;
}

static op_status_t read_link(struct xdp_io *x)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", x->ifname);
    if (ioctl(op_io_fd(x->kernel), SIOCGIFHWADDR, &ifr) != 0)
        return fail(x, "reading the interface's MAC");
    memcpy(x->l2.src_mac, ifr.ifr_hwaddr.sa_data, 6);
    if ((x->io.link_mtu = io_link_mtu(op_io_fd(x->kernel), x->ifname)) == 0)
        return fail(x, "reading the interface's MTU");
    if (x->io.link_mtu > XDP_FRAME_ROOM - OP_ETH_HDR_LEN)
        x->io.link_mtu = XDP_FRAME_ROOM - OP_ETH_HDR_LEN; /* what one frame holds */
    return OP_OK;
}

static op_status_t open_kernel_path(struct xdp_io *x)
{
    op_status_t st = op_io_udp_open(x->io.local.v4, x->io.local_port, &x->kernel);
    if (st == OP_OK)
        return OP_OK;
    int e = op_status_errno(st); /* none: its allocation failed */
    return fail_with(x, "binding the UDP port (is another process on it?)",
                     e != 0 ? e : ENOMEM);
}

static op_status_t bind_xsk(struct xdp_io *x, uint32_t queue)
{
    struct sockaddr_xdp sx = {.sxdp_family = AF_XDP, .sxdp_ifindex = (uint32_t)x->ifindex,
                              .sxdp_queue_id = queue, .sxdp_flags = XDP_COPY};
    if (bind(x->fd, (struct sockaddr *)&sx, sizeof sx) != 0)
        return fail(x, "binding the AF_XDP socket to queue 0");
    return xdp_bpf_bind_socket(&x->bpf, queue, x->fd, x->log);
}

static op_status_t xdp_setup(struct xdp_io *x)
{
    op_status_t st;
    if ((x->ifindex = (int)if_nametoindex(x->ifname)) == 0)
        return fail(x, "no such interface");
    if ((st = open_kernel_path(x)) != OP_OK || (st = read_link(x)) != OP_OK)
        return st;
    x->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (x->fd < 0)
        return fail(x, "AF_XDP socket");
    if ((st = make_rings(x)) != OP_OK ||
        (st = xdp_bpf_setup(&x->bpf, x->ifindex, x->io.local.v4, x->io.local_port, x->log)) !=
            OP_OK)
        return st;
    return bind_xsk(x, 0);
}

op_status_t op_io_xdp_open(const char *ifname, uint32_t ip, uint16_t port,
                           const struct op_log *log, struct op_io **out)
{
    return op_io_xdp_open_sized(ifname, ip, port, XDP_RX_FRAMES, log, out);
}

op_status_t op_io_xdp_open_sized(const char *ifname, uint32_t ip, uint16_t port,
                                 uint32_t rx_frames, const struct op_log *log, struct op_io **out)
{
    if (ifname == NULL || strlen(ifname) >= IF_NAMESIZE || ip == 0 || port == 0 || out == NULL) {
        OP_ERROR(log, "AF_XDP: an interface name, an address and a port are needed");
        return OP_ERR_INVAL;
    }
    if (rx_frames < 64 || rx_frames > (1u << 20) || (rx_frames & (rx_frames - 1)) != 0) {
        OP_ERROR(log, "AF_XDP: %u RX frames: a power of 2 from 64 to 2^20 is needed", rx_frames);
        return OP_ERR_INVAL;
    }
    struct xdp_io *x = calloc(1, sizeof *x);
    if (x == NULL)
        return OP_ERR_NOMEM;
    x->fd = -1;
    x->rx_frames = rx_frames;
    x->bpf.map_fd = x->bpf.prog_fd = x->bpf.link_fd = -1;
    snprintf(x->ifname, sizeof x->ifname, "%s", ifname);
    x->io.ops = &xdp_ops;
    x->io.local = op_addr_ipv4(ip);
    x->io.local_port = port;
    x->log = log;
    op_status_t st = xdp_setup(x);
    if (st != OP_OK) {
        xdp_close(&x->io);
        return st;
    }
    *out = &x->io;
    return OP_OK;
}

static const char *const xdp_counter_names[] = {
#define OP_IO_XDP_NAME_(n) "xdp_" #n,
    OP_IO_XDP_COUNTERS(OP_IO_XDP_NAME_)
#undef OP_IO_XDP_NAME_
};

const char *op_io_xdp_counter_name(unsigned c)
{
    return op_counter_name(xdp_counter_names, OP_IO_XDP_C_COUNT_, c);
}

op_status_t op_io_xdp_local_mac(const struct op_io *io, uint8_t mac[6])
{
    if (io->ops != &xdp_ops)
        return OP_ERR_INVAL;
    memcpy(mac, ((const struct xdp_io *)io)->l2.src_mac, 6);
    return OP_OK;
}

op_status_t op_io_xdp_set_neighbour(struct op_io *io, uint32_t ip, const uint8_t mac[6])
{
    if (io->ops != &xdp_ops)
        return OP_ERR_INVAL;
    neigh_learn(xdp_of(io), ip, mac);
    return OP_OK;
}

void op_io_xdp_counters(const struct op_io *io, uint64_t out[OP_IO_XDP_C_COUNT_])
{
    memset(out, 0, OP_IO_XDP_C_COUNT_ * sizeof *out);
    if (io->ops != &xdp_ops)
        return;
    const struct xdp_io *x = (const struct xdp_io *)io;
    memcpy(out, x->xc, sizeof x->xc);
    out[OP_IO_XDP_C_native] = x->bpf.native;
    struct xdp_statistics ks;
    socklen_t len = sizeof ks;
    if (getsockopt(x->fd, SOL_XDP, XDP_STATISTICS, &ks, &len) == 0) {
        out[OP_IO_XDP_C_rx_ring_full] = ks.rx_ring_full;
        out[OP_IO_XDP_C_rx_kernel_dropped] = ks.rx_dropped;
    }
}
