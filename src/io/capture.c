/* The capture layer: a backend around any backend that writes each packet it
 * passes, both ways, to a capture file. Packets are written one by one as
 * the engines see them, which is what a capture of lo cannot give when the
 * udp backend moves several in one GSO/GRO datagram. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io_internal.h"

struct capture_io {
    struct op_io io;
    struct op_io *inner;
    struct op_pcap *w;
};

static struct capture_io *capture_of(struct op_io *io)
{
    return (struct capture_io *)io;
}

/* Captures carry wall-clock time, as dumpcap's; engines use op_now_ns. */
static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * OP_NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Callers read the counters of the io they hold: this one shows inner's. */
static void mirror_counters(struct capture_io *c)
{
    memcpy(c->io.c, c->inner->c, sizeof c->io.c);
    c->io.link_mtu = c->inner->link_mtu;
}

static void write_received(struct capture_io *c, const struct op_pkt *pkts, int r)
{
    uint64_t ts = r > 0 ? realtime_ns() : 0;
    for (int i = 0; i < r; i++)
        op_pcap_write(c->w, ts, &pkts[i].flow, pkts[i].data, pkts[i].len);
    mirror_counters(c);
}

static int capture_recv(struct op_io *io, struct op_pkt *pkts, int max)
{
    struct capture_io *c = capture_of(io);
    int r = op_io_recv(c->inner, pkts, max);
    write_received(c, pkts, r);
    return r;
}

static int capture_recv_lent(struct op_io *io, struct op_pkt *pkts, int max)
{
    struct capture_io *c = capture_of(io);
    int r = op_io_recv_lent(c->inner, pkts, max);
    write_received(c, pkts, r);
    return r;
}

/* A short count from inner means the packets past it were dropped, unseen. */
static int capture_send(struct op_io *io, const struct op_pkt *pkts, int n)
{
    struct capture_io *c = capture_of(io);
    int r = op_io_send(c->inner, pkts, n);
    uint64_t ts = r > 0 ? realtime_ns() : 0;
    for (int i = 0; i < r; i++) {
        struct op_flow f = pkts[i].flow;
        if (!op_addr_is_any(&io->local)) { /* else the engine's own idea of its address */
            f.src = io->local;
            f.src_port = io->local_port;
        }
        io_pcap_write_pkt(c->w, ts, &f, &pkts[i]);
    }
    mirror_counters(c);
    return r;
}

static void write_frames(struct capture_io *c, const struct op_frame *f, int n)
{
    uint64_t ts = n > 0 ? realtime_ns() : 0;
    for (int i = 0; i < n; i++)
        op_pcap_write_frame(c->w, ts, f[i].data, f[i].len);
    mirror_counters(c);
}

static int capture_recv_frames(struct op_io *io, struct op_frame *f, int max)
{
    struct capture_io *c = capture_of(io);
    int r = op_io_recv_frames(c->inner, f, max);
    write_frames(c, f, r);
    return r;
}

/* The frames inner took: the first r (a short count drops the rest). */
static int capture_send_frames(struct op_io *io, const struct op_frame *f, int n)
{
    struct capture_io *c = capture_of(io);
    int r = op_io_send_frames(c->inner, f, n);
    write_frames(c, f, r);
    return r;
}

static int capture_fd(const struct op_io *io)
{
    return op_io_fd(((const struct capture_io *)io)->inner);
}

static uint64_t capture_deadline(const struct op_io *io)
{
    return op_io_deadline(((const struct capture_io *)io)->inner);
}

static void capture_poll(struct op_io *io, uint64_t now_ns)
{
    struct capture_io *c = capture_of(io);
    op_io_poll(c->inner, now_ns);
    mirror_counters(c);
}

static void capture_close(struct op_io *io)
{
    struct capture_io *c = capture_of(io);
    op_io_close(c->inner);
    free(c);
}

static const struct op_io_ops capture_ops = {
    .name = "pcap",
    .recv = capture_recv,
    .recv_lent = capture_recv_lent,
    .takes_ext = true,
    .send = capture_send,
    .fd = capture_fd,
    .deadline = capture_deadline,
    .poll = capture_poll,
    .close = capture_close,
};

/* Around a frame backend: its frames both ways, and its payload calls
 * (which it refuses) passed on. */
static const struct op_io_ops capture_frame_ops = {
    .name = "pcap_frames",
    .recv = capture_recv,
    .recv_lent = capture_recv_lent,
    .takes_ext = true,
    .send = capture_send,
    .fd = capture_fd,
    .deadline = capture_deadline,
    .poll = capture_poll,
    .close = capture_close,
    .recv_frames = capture_recv_frames,
    .send_frames = capture_send_frames,
};

op_status_t op_io_pcap_wrap(struct op_io *inner, struct op_pcap *w, struct op_io **out)
{
    if (inner == NULL || w == NULL || out == NULL)
        return OP_ERR_INVAL;
    struct capture_io *c = calloc(1, sizeof *c);
    if (c == NULL)
        return OP_ERR_NOMEM;
    c->io = (struct op_io){.ops = op_io_has_frames(inner) ? &capture_frame_ops : &capture_ops,
                           .local = inner->local,
                           .local_port = inner->local_port,
                           .has_mac = inner->has_mac};
    memcpy(c->io.mac, inner->mac, 6);
    c->inner = inner;
    c->w = w;
    mirror_counters(c);
    *out = &c->io;
    return OP_OK;
}
