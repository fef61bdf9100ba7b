/* Backend-independent io helpers: close, packet buffers, waiting. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io_internal.h"

static const char *const counter_names[] = {OP_IO_COUNTERS(OP_COUNTER_NAME)};

const char *op_io_counter_name(unsigned c)
{
    return op_counter_name(counter_names, OP_IO_C_COUNT_, c);
}

void op_io_counters(const struct op_io *io, uint64_t out[OP_IO_C_COUNT_])
{
    memcpy(out, io->c, sizeof io->c);
}

uint32_t op_io_local_ip(const struct op_io *io)
{
    return op_addr_is_ipv6(&io->local) ? 0 : io->local.v4;
}

struct op_addr op_io_local_addr(const struct op_io *io) { return io->local; }
uint16_t op_io_local_port(const struct op_io *io) { return io->local_port; }
uint32_t op_io_link_mtu(const struct op_io *io) { return io->link_mtu; }

/* The backend's table behind one call each: no caller outside src/io sees it. */
int op_io_recv(struct op_io *io, struct op_pkt *pkts, int max)
{
    return io->ops->recv(io, pkts, max);
}
int op_io_recv_lent(struct op_io *io, struct op_pkt *pkts, int max)
{
    return io->ops->recv_lent != NULL ? io->ops->recv_lent(io, pkts, max)
                                      : io->ops->recv(io, pkts, max);
}

int op_io_recv_placed(struct op_io *io, struct op_pkt *pkts, int max,
                      const struct op_io_place *place)
{
    if (place != NULL && io->ops->recv_placed != NULL)
        return io->ops->recv_placed(io, pkts, max, place);
    return op_io_recv_lent(io, pkts, max);
}

bool op_io_takes_ext(const struct op_io *io) { return io->ops->takes_ext; }

uint32_t op_pkt_flatten(const struct op_pkt *p, uint8_t *out, size_t cap)
{
    uint32_t total = op_pkt_wire_len(p);
    if (total > cap)
        return 0;
    if (p->ext == NULL) {
        memcpy(out, p->data, p->len);
        return total;
    }
    uint32_t at = p->ext_at < p->len ? p->ext_at : p->len;
    memcpy(out, p->data, at);
    memcpy(out + at, p->ext, p->ext_len);
    memcpy(out + at + p->ext_len, p->data + at, p->len - at);
    return total;
}

static bool any_ext(const struct op_pkt *pkts, int n)
{
    for (int i = 0; i < n; i++)
        if (pkts[i].ext != NULL)
            return true;
    return false;
}

/* For a backend that copies packets' data as they are (af_xdp, a serving
 * layer): bursts of flat copies. A packet too big for a buffer is a drop. */
static int send_flattened(struct op_io *io, const struct op_pkt *pkts, int n)
{
    if (io->flat.n == 0 && op_pktbuf_init(&io->flat, OP_IO_BURST) != OP_OK) {
        io->c[OP_IO_C_tx_drops] += (uint64_t)n;
        return 0;
    }
    int sent = 0;
    for (int i = 0; i < n; i += OP_IO_BURST) {
        int b = n - i < OP_IO_BURST ? n - i : OP_IO_BURST, k = 0;
        for (int j = 0; j < b; j++) {
            struct op_pkt *f = &io->flat.pkts[k];
            f->flow = pkts[i + j].flow;
            f->ext = NULL;
            f->len = op_pkt_flatten(&pkts[i + j], f->data, OP_IO_BUF_SIZE);
            if (f->len > 0 || op_pkt_wire_len(&pkts[i + j]) == 0)
                k++;
            else
                io->c[OP_IO_C_tx_drops]++;
        }
        sent += io->ops->send(io, io->flat.pkts, k);
    }
    return sent;
}

int op_io_send(struct op_io *io, const struct op_pkt *pkts, int n)
{
    if (io->ops->takes_ext || !any_ext(pkts, n))
        return io->ops->send(io, pkts, n);
    return send_flattened(io, pkts, n);
}
int op_io_fd(const struct op_io *io) { return io->ops->fd(io); }
uint64_t op_io_deadline(const struct op_io *io) { return io->ops->deadline(io); }
void op_io_poll(struct op_io *io, uint64_t now) { io->ops->poll(io, now); }

int op_io_recv_frames(struct op_io *io, struct op_frame *f, int max)
{
    return io->ops->recv_frames != NULL ? io->ops->recv_frames(io, f, max) : -EOPNOTSUPP;
}

int op_io_send_frames(struct op_io *io, const struct op_frame *f, int n)
{
    if (io->ops->send_frames != NULL)
        return io->ops->send_frames(io, f, n);
    io->c[OP_IO_C_tx_drops] += n > 0 ? (uint64_t)n : 0;
    return 0;
}

bool op_io_has_frames(const struct op_io *io) { return io->ops->recv_frames != NULL; }

bool op_io_lends_frames(const struct op_io *io) { return io->ops->recv_frames_lent != NULL; }

void op_io_frames_unparsed(struct op_io *io, bool unparsed) { io->unparsed = unparsed; }

int op_io_recv_frames_lent(struct op_io *io, struct op_frame *f, int max)
{
    if (io->ops->recv_frames_lent != NULL)
        return io->ops->recv_frames_lent(io, f, max);
    int n = op_io_recv_frames(io, f, max);
    for (int i = 0; i < n; i++) {
        f[i].lent = NULL;
        f[i].room = OP_IO_BUF_SIZE;
    }
    return n;
}

int op_io_send_frames_some(struct op_io *io, const struct op_frame *f, int n)
{
    if (io->ops->send_frames_some == NULL)
        return op_io_send_frames(io, f, n) >= 0 ? n : 0;
    return io->ops->send_frames_some(io, f, n);
}

void op_io_release_frames(struct op_io *io, struct op_frame *f, int n)
{
    if (io->ops->release_frames != NULL)
        io->ops->release_frames(io, f, n);
}

op_status_t op_io_local_mac(const struct op_io *io, uint8_t mac[6])
{
    if (!io->has_mac)
        return OP_ERR_INVAL;
    memcpy(mac, io->mac, 6);
    return OP_OK;
}

int io_payload_unsupported_recv(struct op_io *io, struct op_pkt *pkts, int max)
{
    (void)io, (void)pkts, (void)max;
    return -EOPNOTSUPP;
}

int io_payload_unsupported_send(struct op_io *io, const struct op_pkt *pkts, int n)
{
    (void)pkts;
    io->c[OP_IO_C_tx_drops] += n > 0 ? (uint64_t)n : 0;
    return 0;
}

void op_io_close(struct op_io *io)
{
    if (io == NULL)
        return;
    op_pktbuf_free(&io->flat);
    io->ops->close(io);
}

/* Buffers first (9216 is a multiple of 64, so each one stays aligned as the
 * allocation is), then the packet array, all in one zeroed allocation. */
op_status_t op_pktbuf_init(struct op_pktbuf *b, int n)
{
    b->pkts = NULL;
    b->mem = NULL;
    b->n = 0;
    if (n <= 0 || (size_t)n > SIZE_MAX / (OP_IO_BUF_SIZE + sizeof(struct op_pkt)))
        return OP_ERR_INVAL;
    size_t data = (size_t)n * OP_IO_BUF_SIZE;
    uint8_t *mem = calloc(1, data + (size_t)n * sizeof(struct op_pkt));
    if (mem == NULL)
        return OP_ERR_NOMEM;
    b->mem = mem;
    b->pkts = (struct op_pkt *)(void *)(mem + data);
    b->n = n;
    for (int i = 0; i < n; i++)
        b->pkts[i].data = mem + (size_t)i * OP_IO_BUF_SIZE;
    return OP_OK;
}

void op_pktbuf_frames(const struct op_pktbuf *b, struct op_frame *frames)
{
    for (int i = 0; i < b->n; i++)
        frames[i] = (struct op_frame){.data = b->pkts[i].data, .room = OP_IO_BUF_SIZE};
}

void op_pktbuf_free(struct op_pktbuf *b)
{
    if (b == NULL)
        return;
    free(b->mem);
    b->mem = NULL;
    b->pkts = NULL;
    b->n = 0;
}

/* A backend without a descriptor (a DPDK queue) is polled: always worth
 * a look. */
int op_io_wait(const struct op_io *io, uint64_t deadline_ns)
{
    if (op_io_fd(io) < 0)
        return 1;
    int r = op_io_wait_fd(op_io_fd(io), OP_IO_IN, deadline_ns);
    return r > 0 ? 1 : r;
}
