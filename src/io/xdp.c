/* The af_xdp backends: frames straight between an interface's queues and
 * this process's memory (xsk.c, xdp_port.c). The kernel copies each frame
 * into a shared buffer area (UMEM) and posts it on a ring; reading is a
 * load from that ring, with no system call and no UDP/IP stack. Sending
 * puts frames on the TX ring and kicks the kernel once per burst.
 *
 * Payloads (op_io_xdp_open*): the program steers UDP to our address and
 * port, of either family, to us; the kernel keeps the rest (ARP, NDP). A
 * UDP socket on the same address and port is the slow path: packets to a
 * peer whose MAC is not known yet leave through it (the kernel resolves
 * the address on the way), and what the program did not steer (frames
 * before the socket was in the map, a queue not ours) reaches it and is
 * read every KERNEL_POLL_EVERY empty polls. The peer's MAC comes from the
 * frames it sends us and, for IPv4, the kernel's table (/proc/net/arp).
 * Peers must be on-link.
 *
 * Frames (op_io_xdp_open_frames): every frame of our queues, untouched. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neigh_cache.h"
#include "xdp_port.h"

#define NEIGH_ASK_NS (1000 * 1000) /* between looks at /proc/net/arp for one address */
#define KERNEL_POLL_EVERY 32       /* empty ring polls between reads of the UDP socket */

struct xdp_io {
    struct op_io io;
    struct xdp_port port;
    struct op_io *kernel; /* payloads: the slow path, a UDP socket on our address and port */
    uint32_t empty_polls;
    struct op_frame_l2 l2;
    struct io_neigh_cache neigh;
    /* the receive in progress: where take_* put what it keeps */
    struct op_pkt *rx_pkts;
    struct op_frame *rx_frames;
    uint16_t rx_queue;
    uint32_t tx_queue; /* payloads leave through it (op_io_xdp_tx_queue) */
    int rx_k;
    uint64_t xc[OP_IO_XDP_C_COUNT_]; /* enum op_io_xdp_counter; the kernel's read on demand */
};

static struct xdp_io *xdp_of(struct op_io *io) { return (struct xdp_io *)io; }

/* ---- neighbours */

static bool arp_table_lookup(const struct xdp_io *x, uint32_t ip, uint8_t mac[6])
{
    FILE *f = fopen("/proc/net/arp", "r");
    if (f == NULL)
        return false;
    char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return op_arp_table_lookup(text, ip, x->port.ifname, mac);
}

static const uint8_t *neigh_mac(struct xdp_io *x, const struct op_addr *ip)
{
    const uint8_t *mac = io_neigh_mac(&x->neigh, ip);
    if (mac != NULL || op_addr_is_ipv6(ip) ||
        !io_neigh_ask_due(&x->neigh, ip, op_now_ns(), NEIGH_ASK_NS))
        return mac;
    uint8_t found[6];
    if (!arp_table_lookup(x, ip->v4, found))
        return NULL;
    io_neigh_learn(&x->neigh, ip, found);
    return io_neigh_mac(&x->neigh, ip);
}

/* ---- receive */

static void take_payload(void *ctx, const uint8_t *frame, uint32_t len)
{
    struct xdp_io *x = ctx;
    struct op_flow flow;
    uint8_t mac[6];
    size_t off, plen;
    unsigned v = op_udp_frame_parse(frame, len, &flow, mac, &off, &plen);
    if (v == OP_FRAME_OK &&
        (flow.dst_port != x->io.local_port || !op_addr_eq(&flow.dst, &x->io.local)))
        v = OP_FRAME_VERDICTS_; /* not ours: the program lets only ours through */
    if (v == OP_FRAME_OK && plen > OP_IO_BUF_SIZE)
        v = OP_FRAME_BAD_UDP;
    if (v != OP_FRAME_OK) {
        x->xc[OP_IO_XDP_C_rx_refused]++;
        return;
    }
    const uint8_t *known = io_neigh_mac(&x->neigh, &flow.src);
    if (known == NULL || memcmp(known, mac, 6) != 0)
        io_neigh_learn(&x->neigh, &flow.src, mac);
    struct op_pkt *pkt = &x->rx_pkts[x->rx_k++];
    memcpy(pkt->data, frame + off, plen);
    pkt->len = (uint32_t)plen;
    pkt->flow = flow;
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
    x->rx_pkts = pkts;
    x->rx_k = 0;
    uint32_t n = xdp_port_rx(&x->port, max > 0 ? (uint32_t)max : 0, take_payload, x);
    if (n == 0)
        return ++x->empty_polls % KERNEL_POLL_EVERY == 0 ? recv_via_kernel(x, pkts, max) : 0;
    x->empty_polls = 0;
    io->c[OP_IO_C_rx_pkts] += (uint64_t)x->rx_k;
    return x->rx_k;
}

/* ---- send */

static bool put_payload(struct xdp_io *x, const struct op_pkt *p)
{
    if (p->flow.dst.family != x->io.local.family)
        return false; /* this socket's family is the other one: counted as a drop */
    const uint8_t *mac = neigh_mac(x, &p->flow.dst);
    if (mac == NULL) {
        bool sent = op_io_send(x->kernel, p, 1) == 1;
        x->xc[OP_IO_XDP_C_tx_via_kernel] += sent;
        return sent;
    }
    size_t hdr = op_udp_frame_hdr_len(x->io.local.family);
    uint64_t addr;
    struct xsk *s = xdp_port_queue(&x->port, x->tx_queue);
    uint8_t *frame = p->len <= XSK_FRAME_ROOM - hdr ? xsk_tx_frame(s, &addr) : NULL;
    if (frame == NULL) {
        x->xc[OP_IO_XDP_C_tx_no_room]++;
        return false;
    }
    struct op_flow f = p->flow;
    f.src = x->io.local;
    f.src_port = x->io.local_port;
    memcpy(x->l2.dst_mac, mac, 6);
    memcpy(frame + hdr, p->data, p->len);
    xsk_tx_put(s, addr, (uint32_t)op_udp_frame_build(frame, XSK_FRAME_ROOM, &f, &x->l2, p->len));
    return true;
}

static int xdp_send(struct op_io *io, const struct op_pkt *pkts, int n)
{
    struct xdp_io *x = xdp_of(io);
    int sent = 0;
    for (int i = 0; i < n; i++)
        sent += put_payload(x, &pkts[i]);
    if (sent > 0) {
        xsk_tx_flush(xdp_port_queue(&x->port, x->tx_queue));
        io->c[OP_IO_C_tx_datagrams]++;
    }
    io->c[OP_IO_C_tx_pkts] += (uint64_t)sent;
    io->c[OP_IO_C_tx_drops] += (uint64_t)(n - sent);
    return sent;
}

/* ---- whole frames */

static void take_frame(void *ctx, const uint8_t *frame, uint32_t len)
{
    struct xdp_io *x = ctx;
    if (len > OP_IO_BUF_SIZE) {
        x->xc[OP_IO_XDP_C_rx_refused]++;
        return;
    }
    struct op_frame *f = &x->rx_frames[x->rx_k++];
    memcpy(f->data, frame, len);
    f->len = len;
    f->queue = x->rx_queue;
    (void)op_frame_parse(f->data, len, &f->info);
}

static int xdp_recv_frames(struct op_io *io, struct op_frame *f, int max)
{
    struct xdp_io *x = xdp_of(io);
    x->rx_frames = f;
    x->rx_k = 0;
    for (uint32_t k = 0; k < x->port.n_xsk && x->rx_k < max; k++) {
        uint32_t q = (x->port.next_rx + k) % x->port.n_xsk;
        x->rx_queue = (uint16_t)q;
        (void)xsk_rx(&x->port.xsk[q], (uint32_t)(max - x->rx_k), take_frame, x);
    }
    x->port.next_rx = (x->port.next_rx + 1) % x->port.n_xsk;
    io->c[OP_IO_C_rx_pkts] += (uint64_t)x->rx_k;
    return x->rx_k;
}

static int xdp_send_frames(struct op_io *io, const struct op_frame *f, int n)
{
    struct xdp_io *x = xdp_of(io);
    uint64_t touched = 0; /* queues to flush, a bit each */
    int sent = 0;
    for (int i = 0; i < n; i++) {
        uint32_t q = f[i].queue % x->port.n_xsk;
        if (!xsk_tx_copy(&x->port.xsk[q], f[i].data, f[i].len)) {
            x->xc[OP_IO_XDP_C_tx_no_room]++;
            continue;
        }
        touched |= 1ull << q;
        sent++;
    }
    for (uint32_t q = 0; q < x->port.n_xsk; q++)
        if (touched & (1ull << q))
            xsk_tx_flush(&x->port.xsk[q]);
    io->c[OP_IO_C_tx_datagrams] += sent > 0;
    io->c[OP_IO_C_tx_pkts] += (uint64_t)sent;
    io->c[OP_IO_C_tx_drops] += (uint64_t)(n - sent);
    return sent;
}

/* ---- the rest of the tables */

static int xdp_fd(const struct op_io *io) { return xdp_port_fd(&((const struct xdp_io *)io)->port); }

static uint64_t xdp_deadline(const struct op_io *io)
{
    /* frames left to kick */
    return xdp_port_tx_pending(&((const struct xdp_io *)io)->port) ? 0 : UINT64_MAX;
}

static void xdp_poll(struct op_io *io, uint64_t now)
{
    (void)now;
    xdp_port_kick(&xdp_of(io)->port);
}

static void xdp_close(struct op_io *io)
{
    struct xdp_io *x = xdp_of(io);
    xdp_port_close(&x->port);
    op_io_close(x->kernel);
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

static const struct op_io_ops xdp_frame_ops = {
    .name = "af_xdp_frames",
    .recv = io_payload_unsupported_recv,
    .send = io_payload_unsupported_send,
    .fd = xdp_fd,
    .deadline = xdp_deadline,
    .poll = xdp_poll,
    .close = xdp_close,
    .recv_frames = xdp_recv_frames,
    .send_frames = xdp_send_frames,
};

static bool is_xdp(const struct op_io *io) { return io->ops == &xdp_ops || io->ops == &xdp_frame_ops; }

/* ---- setup */

static op_status_t open_kernel_path(struct xdp_io *x)
{
    op_status_t st = op_io_udp_open_addr(&x->io.local, x->io.local_port, &x->kernel);
    if (st == OP_OK)
        return OP_OK;
    int e = op_status_errno(st); /* none: its allocation failed */
    OP_ERROR(x->port.log, "AF_XDP on %s: binding the UDP port (is another process on it?): %s",
             x->port.ifname, strerror(e != 0 ? e : ENOMEM));
    return st;
}

static op_status_t check_config(const struct op_io_xdp_config *c, bool payloads)
{
    uint32_t rx = c->rx_frames != 0 ? c->rx_frames : XSK_DEFAULT_RX_FRAMES;
    uint32_t nq = c->queues != 0 ? c->queues : 1;
    if (c->ifname == NULL || strlen(c->ifname) >= IF_NAMESIZE ||
        (payloads && (op_addr_is_any(&c->addr) || c->port == 0))) {
        OP_ERROR(c->log, "AF_XDP: an interface name%s are needed",
                 payloads ? ", an address and a port" : "");
        return OP_ERR_INVAL;
    }
    if (rx < 64 || rx > (1u << 20) || (rx & (rx - 1)) != 0) {
        OP_ERROR(c->log, "AF_XDP: %u RX frames: a power of 2 from 64 to 2^20 is needed", rx);
        return OP_ERR_INVAL;
    }
    if (c->first_queue >= XDP_MAX_QUEUES || nq > XDP_MAX_QUEUES - c->first_queue) {
        OP_ERROR(c->log, "AF_XDP: queues %u..%u: at most queue %u", c->first_queue,
                 c->first_queue + nq - 1, XDP_MAX_QUEUES - 1);
        return OP_ERR_INVAL;
    }
    return OP_OK;
}

static op_status_t xdp_open(const struct op_io_xdp_config *c, bool payloads, struct op_io **out)
{
    op_status_t st = check_config(c, payloads);
    if (st != OP_OK)
        return st;
    struct xdp_io *x = calloc(1, sizeof *x);
    if (x == NULL)
        return OP_ERR_NOMEM;
    x->port.epfd = -1;
    x->io.ops = payloads ? &xdp_ops : &xdp_frame_ops;
    x->io.local = c->addr;
    x->io.local_port = c->port;
    x->port.log = c->log;
    snprintf(x->port.ifname, sizeof x->port.ifname, "%s", c->ifname);
    if ((!payloads || (st = open_kernel_path(x)) == OP_OK) &&
        (st = xdp_port_open(&x->port, c, payloads ? &c->addr : NULL, c->port)) == OP_OK) {
        /* a payload goes in one frame; whole frames may span several */
        uint32_t one = XSK_FRAME_ROOM - OP_ETH_HDR_LEN;
        x->io.link_mtu = payloads && x->port.mtu > one ? one : x->port.mtu;
        x->io.has_mac = true;
        memcpy(x->io.mac, x->port.mac, 6);
        memcpy(x->l2.src_mac, x->port.mac, 6);
        *out = &x->io;
        return OP_OK;
    }
    xdp_close(&x->io);
    return st;
}

op_status_t op_io_xdp_open_cfg(const struct op_io_xdp_config *c, struct op_io **out)
{
    return xdp_open(c, true, out);
}

op_status_t op_io_xdp_open_frames(const struct op_io_xdp_config *c, struct op_io **out)
{
    return xdp_open(c, false, out);
}

op_status_t op_io_xdp_open(const char *ifname, uint32_t ip, uint16_t port,
                           const struct op_log *log, struct op_io **out)
{
    return op_io_xdp_open_sized(ifname, ip, port, XSK_DEFAULT_RX_FRAMES, log, out);
}

op_status_t op_io_xdp_open_sized(const char *ifname, uint32_t ip, uint16_t port,
                                 uint32_t rx_frames, const struct op_log *log, struct op_io **out)
{
    struct op_io_xdp_config c = {.ifname = ifname, .addr = op_addr_ipv4(ip), .port = port,
                                 .rx_frames = rx_frames, .log = log};
    if (out == NULL || rx_frames == 0) { /* 0 is the default only in the general form */
        OP_ERROR(log, "AF_XDP: 0 RX frames: a power of 2 from 64 to 2^20 is needed");
        return OP_ERR_INVAL;
    }
    return op_io_xdp_open_cfg(&c, out);
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
    return is_xdp(io) ? op_io_local_mac(io, mac) : OP_ERR_INVAL;
}

op_status_t op_io_xdp_set_neighbour(struct op_io *io, uint32_t ip, const uint8_t mac[6])
{
    if (io->ops != &xdp_ops)
        return OP_ERR_INVAL;
    struct op_addr a = op_addr_ipv4(ip);
    io_neigh_learn(&xdp_of(io)->neigh, &a, mac);
    return OP_OK;
}

op_status_t op_io_xdp_tx_queue(struct op_io *io, uint32_t q)
{
    if (io->ops != &xdp_ops || q >= xdp_of(io)->port.n_xsk)
        return OP_ERR_INVAL;
    xdp_of(io)->tx_queue = q;
    return OP_OK;
}

op_status_t op_io_xdp_queue_frames(const struct op_io *io, uint32_t q, uint32_t *rx, uint32_t *tx)
{
    if (!is_xdp(io) || q >= ((const struct xdp_io *)io)->port.n_xsk)
        return OP_ERR_INVAL;
    const struct xsk *s = &((const struct xdp_io *)io)->port.xsk[q];
    *rx = s->rx.head;
    *tx = s->tx.head;
    return OP_OK;
}

void op_io_xdp_counters(const struct op_io *io, uint64_t out[OP_IO_XDP_C_COUNT_])
{
    memset(out, 0, OP_IO_XDP_C_COUNT_ * sizeof *out);
    if (!is_xdp(io))
        return;
    const struct xdp_io *x = (const struct xdp_io *)io;
    memcpy(out, x->xc, sizeof x->xc);
    out[OP_IO_XDP_C_native] = x->port.bpf.native;
    xdp_port_stats(&x->port, &out[OP_IO_XDP_C_rx_ring_full], &out[OP_IO_XDP_C_rx_kernel_dropped]);
    for (uint32_t q = 0; q < x->port.n_xsk; q++)
        out[OP_IO_XDP_C_rx_refused] += x->port.xsk[q].sg_refused;
}

bool op_io_xdp_info(const struct op_io *io, struct op_io_xdp_info *out)
{
    if (!is_xdp(io))
        return false;
    const struct xdp_io *x = (const struct xdp_io *)io;
    *out = (struct op_io_xdp_info){.queues = x->port.n_xsk,
                                   .zero_copy = xdp_port_zero_copy(&x->port),
                                   .native = x->port.bpf.native};
    return true;
}
