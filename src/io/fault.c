/* Fault injection around any backend (payloads or whole frames): on send
 * each packet or frame is dropped with probability drop, else sent, plus a
 * second copy with probability dup. With
 * delay_us > 0 the copies wait in a FIFO (the delay is constant, so release
 * order is send order) until poll(now) finds them due.
 *
 * Held packets live in a byte arena used as a ring: descriptors record the
 * offset of each packet; space is taken after the newest packet, wrapping to
 * offset 0 when the end is too short. A full descriptor ring or arena drops
 * the packet (counted both as a fault drop and in io.c[OP_IO_C_tx_drops]).
 *
 * send returns n minus the copies the inner backend or the queue could not
 * take (at least 0): fault drops are the emulated network's, not the caller's.
 * On error op_io_fault_wrap leaves inner with the caller. */
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

#define FAULT_QUEUE 4096          /* packets held at most */
#define FAULT_ARENA (8u << 20)    /* bytes held at most */

struct held {
    uint64_t release;
    struct op_flow flow;
    uint32_t len, off;
    bool frame; /* a whole frame (a frame backend's), not a payload */
};

struct fault_io {
    struct op_io io;
    struct op_io *inner;
    struct op_fault_cfg cfg;
    struct op_rng rng;
    uint64_t c[OP_FAULT_C_COUNT_];
    struct held *q; /* ring of FAULT_QUEUE descriptors */
    uint32_t q_first, q_n;
    uint8_t *arena;
    size_t arena_head; /* where the newest held packet ends */
    struct op_pkt out[OP_IO_BURST]; /* batch on its way to inner */
    int out_n;
    struct op_frame out_frames[OP_IO_BURST]; /* the same for frames */
    int out_frames_n;
    int lost; /* copies that inner or the queue failed to take, this call */
};

static struct fault_io *fault_of(struct op_io *io)
{
    return (struct fault_io *)io;
}

static void count_sent(struct fault_io *f, int given, int r)
{
    r = r < 0 ? 0 : r;
    f->io.c[OP_IO_C_tx_pkts] += (uint64_t)r;
    /* only this layer sends through inner */
    f->io.c[OP_IO_C_tx_datagrams] = f->inner->c[OP_IO_C_tx_datagrams];
    f->io.c[OP_IO_C_tx_drops] += (uint64_t)(given - r);
    f->lost += given - r;
}

static void flush(struct fault_io *f)
{
    if (f->out_n > 0)
        count_sent(f, f->out_n, op_io_send(f->inner, f->out, f->out_n));
    if (f->out_frames_n > 0)
        count_sent(f, f->out_frames_n,
                   op_io_send_frames(f->inner, f->out_frames, f->out_frames_n));
    f->out_n = f->out_frames_n = 0;
}

/* p as it is: a packet's ext goes on to inner with it (gathered there, or
 * flattened by op_io_send). */
static void stage(struct fault_io *f, const struct op_pkt *p, bool frame)
{
    if (frame)
        f->out_frames[f->out_frames_n++] = (struct op_frame){.data = p->data, .len = p->len};
    else
        f->out[f->out_n++] = *p;
    if (f->out_n == OP_IO_BURST || f->out_frames_n == OP_IO_BURST)
        flush(f);
}

/* Offset for len bytes in the arena ring, or -1 when it is full. */
static long arena_take(struct fault_io *f, uint32_t len)
{
    size_t need = len != 0 ? len : 1, at;
    size_t tail = f->q_n != 0 ? f->q[f->q_first].off : 0;

    if (f->q_n == 0)
        f->arena_head = 0;
    if (f->q_n == 0 || f->arena_head > tail) { /* free space: [head, end) and [0, tail) */
        if (need <= FAULT_ARENA - f->arena_head)
            at = f->arena_head;
        else if (need < tail)
            at = 0;
        else
            return -1;
    } else if (need < tail - f->arena_head) { /* wrapped: free space [head, tail) */
        at = f->arena_head;
    } else {
        return -1;
    }
    f->arena_head = at + need;
    return (long)at;
}

/* A copy of the bytes as they are now (a lent or ext buffer may change
 * before the release), flat. */
static void hold(struct fault_io *f, const struct op_pkt *p, bool frame, uint64_t release)
{
    uint32_t len = op_pkt_wire_len(p);
    long off = f->q_n < FAULT_QUEUE && len <= OP_IO_BUF_SIZE ? arena_take(f, len) : -1;

    if (off < 0) {
        f->c[OP_FAULT_C_dropped]++;
        f->io.c[OP_IO_C_tx_drops]++;
        f->lost++;
        return;
    }
    (void)op_pkt_flatten(p, f->arena + off, len);
    f->q[(f->q_first + f->q_n) % FAULT_QUEUE] =
        (struct held){.release = release, .flow = p->flow, .len = len, .off = (uint32_t)off,
                      .frame = frame};
    f->q_n++;
    f->c[OP_FAULT_C_delayed]++;
}

static bool link_down(const struct fault_io *f, const struct op_addr *dst, uint64_t now)
{
    return f->cfg.down_ip != 0 && !op_addr_is_ipv6(dst) && dst->v4 == f->cfg.down_ip &&
           now >= f->cfg.down_from_ns && now < f->cfg.down_until_ns;
}

/* One packet or frame: dropped, or on its way (held first with a delay),
 * twice when duplicated. */
static void inject(struct fault_io *f, const struct op_pkt *p, bool frame, uint64_t now,
                   uint64_t release)
{
    if (link_down(f, &p->flow.dst, now) || op_rng_unit(&f->rng) < f->cfg.drop) {
        f->c[OP_FAULT_C_dropped]++;
        return;
    }
    int copies = 1;
    if (f->cfg.dup > 0.0 && op_rng_unit(&f->rng) < f->cfg.dup) {
        copies = 2;
        f->c[OP_FAULT_C_duplicated]++;
    }
    for (int c = 0; c < copies; c++) {
        if (release != 0)
            hold(f, p, frame, release);
        else
            stage(f, p, frame);
    }
}

static uint64_t release_at(const struct fault_io *f, uint64_t now)
{
    return f->cfg.delay_us != 0 ? now + f->cfg.delay_us * OP_NS_PER_US : 0;
}

/* n packets (or frames, as packets: frame[i] set) through inject; what the
 * caller may count as sent: n less what inner or the queue could not take. */
static int inject_all(struct fault_io *f, const struct op_pkt *pkts, const struct op_frame *fr,
                      int n)
{
    uint64_t now = op_now_ns(), release = release_at(f, now);
    f->lost = 0;
    for (int i = 0; i < n; i++) {
        if (fr == NULL) {
            inject(f, &pkts[i], false, now, release);
            continue;
        }
        /* a frame's flow is its IP header's: a link down to an address
         * drops what goes to it */
        struct op_frame_info in;
        (void)op_frame_parse(fr[i].data, fr[i].len, &in);
        struct op_pkt p = {.flow = in.flow, .len = fr[i].len, .data = fr[i].data};
        inject(f, &p, true, now, release);
    }
    flush(f);
    return f->lost < n ? n - f->lost : 0;
}

static int fault_send(struct op_io *io, const struct op_pkt *pkts, int n)
{
    return inject_all(fault_of(io), pkts, NULL, n);
}

static int fault_send_frames(struct op_io *io, const struct op_frame *fr, int n)
{
    return inject_all(fault_of(io), NULL, fr, n);
}

static int fault_recv_frames(struct op_io *io, struct op_frame *fr, int max)
{
    struct fault_io *f = fault_of(io);
    int r = op_io_recv_frames(f->inner, fr, max);
    if (r > 0)
        io->c[OP_IO_C_rx_pkts] += (uint64_t)r;
    return r;
}

static void fault_poll(struct op_io *io, uint64_t now_ns)
{
    struct fault_io *f = fault_of(io);

    /* Popped packets stay intact in the arena until the next hold(). */
    while (f->q_n != 0 && f->q[f->q_first].release <= now_ns) {
        struct held *h = &f->q[f->q_first];
        f->q_first = (f->q_first + 1) % FAULT_QUEUE;
        f->q_n--;
        stage(f, &(struct op_pkt){.flow = h->flow, .len = h->len, .data = f->arena + h->off},
              h->frame);
    }
    flush(f);
    op_io_poll(f->inner, now_ns);
}

static uint64_t fault_deadline(const struct op_io *io)
{
    const struct fault_io *f = (const struct fault_io *)io;
    uint64_t inner = op_io_deadline(f->inner);
    uint64_t mine = f->q_n != 0 ? f->q[f->q_first].release : UINT64_MAX;

    return mine < inner ? mine : inner;
}

static int fault_recv(struct op_io *io, struct op_pkt *pkts, int max)
{
    struct fault_io *f = fault_of(io);
    int r = op_io_recv(f->inner, pkts, max);

    if (r > 0)
        io->c[OP_IO_C_rx_pkts] += (uint64_t)r;
    return r;
}

/* Faults are injected on send: what inner lends (or places) passes
 * through as it is. */
static int fault_recv_placed(struct op_io *io, struct op_pkt *pkts, int max,
                             const struct op_io_place *place)
{
    struct fault_io *f = fault_of(io);
    int r = op_io_recv_placed(f->inner, pkts, max, place);

    if (r > 0)
        io->c[OP_IO_C_rx_pkts] += (uint64_t)r;
    return r;
}

static int fault_recv_lent(struct op_io *io, struct op_pkt *pkts, int max)
{
    return fault_recv_placed(io, pkts, max, NULL);
}

static int fault_fd(const struct op_io *io)
{
    return op_io_fd(((const struct fault_io *)io)->inner);
}

static void fault_close(struct op_io *io)
{
    struct fault_io *f = fault_of(io);

    op_io_close(f->inner);
    free(f->q);
    free(f->arena);
    free(f);
}

static const struct op_io_ops fault_ops = {
    .name = "fault",
    .recv = fault_recv,
    .recv_lent = fault_recv_lent,
    .recv_placed = fault_recv_placed,
    .takes_ext = true,
    .send = fault_send,
    .fd = fault_fd,
    .deadline = fault_deadline,
    .poll = fault_poll,
    .close = fault_close,
};

/* Around a frame backend: its frames suffer the same faults. */
static const struct op_io_ops fault_frame_ops = {
    .name = "fault_frames",
    .recv = fault_recv,
    .recv_lent = fault_recv_lent,
    .recv_placed = fault_recv_placed,
    .takes_ext = true,
    .send = fault_send,
    .fd = fault_fd,
    .deadline = fault_deadline,
    .poll = fault_poll,
    .close = fault_close,
    .recv_frames = fault_recv_frames,
    .send_frames = fault_send_frames,
};

static bool is_fault(const struct op_io *io)
{
    return io != NULL && (io->ops == &fault_ops || io->ops == &fault_frame_ops);
}

static int probability_ok(double p)
{
    return p >= 0.0 && p <= 1.0; /* false for NaN */
}

op_status_t op_io_fault_wrap(struct op_io *inner, const struct op_fault_cfg *cfg,
                             struct op_io **out)
{
    if (inner == NULL || cfg == NULL || out == NULL || !probability_ok(cfg->drop) ||
        !probability_ok(cfg->dup))
        return OP_ERR_INVAL;
    struct fault_io *f = calloc(1, sizeof *f);
    if (f == NULL)
        return OP_ERR_NOMEM;
    if (cfg->delay_us != 0) {
        f->q = malloc(FAULT_QUEUE * sizeof *f->q);
        f->arena = malloc(FAULT_ARENA);
        if (f->q == NULL || f->arena == NULL) {
            free(f->q);
            free(f->arena);
            free(f);
            return OP_ERR_NOMEM;
        }
    }
    f->io = (struct op_io){.ops = op_io_has_frames(inner) ? &fault_frame_ops : &fault_ops,
                           .local = inner->local,
                           .local_port = inner->local_port,
                           .has_mac = inner->has_mac};
    memcpy(f->io.mac, inner->mac, 6);
    f->inner = inner;
    f->cfg = *cfg;
    op_rng_seed(&f->rng, cfg->seed);
    *out = &f->io;
    return OP_OK;
}

void op_io_fault_counters(const struct op_io *io, uint64_t out[OP_FAULT_C_COUNT_])
{
    if (is_fault(io))
        memcpy(out, ((const struct fault_io *)io)->c, OP_FAULT_C_COUNT_ * sizeof(*out));
    else
        memset(out, 0, OP_FAULT_C_COUNT_ * sizeof(*out));
}

static const char *const fault_counter_names[] = {OP_FAULT_COUNTERS(OP_COUNTER_NAME)};

const char *op_fault_counter_name(unsigned c)
{
    return op_counter_name(fault_counter_names, OP_FAULT_C_COUNT_, c);
}
