/* Blocking INC client: the engine driven over a UDP socket. Each call waits in
 * poll with the engine's next deadline, so dozens of leaders share two cores. */
#include <stdlib.h>

#include "offpath/inc.h"

struct op_inc_client {
    struct op_io *io;
    struct op_inc_eng *eng;
    struct op_pktbuf rx, tx;
    struct op_txq q;
};

static void flush(void *ctx, struct op_txq *q)
{
    struct op_inc_client *c = ctx;
    if (q->n > 0)
        op_io_send(c->io, q->pkts, q->n);
    q->n = 0;
}

static void receive(struct op_inc_client *c)
{
    int n;
    while ((n = op_io_recv(c->io, c->rx.pkts, c->rx.n)) > 0) {
        uint64_t now = op_now_ns();
        for (int i = 0; i < n; i++)
            op_inc_eng_input(c->eng, &c->rx.pkts[i], now, &c->q);
        flush(c, &c->q);
        if (n < c->rx.n)
            break;
    }
}

/* Drive the engine until its current operation ends (it always does: every
 * operation has a deadline). */
static op_status_t run(struct op_inc_client *c)
{
    flush(c, &c->q);
    while (op_inc_eng_status(c->eng) == OP_INPROGRESS) {
        op_io_wait(c->io, op_inc_eng_next_timer(c->eng));
        receive(c);
        op_inc_eng_timer(c->eng, op_now_ns(), &c->q);
        flush(c, &c->q);
    }
    return op_inc_eng_status(c->eng);
}

void op_inc_client_free(struct op_inc_client *c)
{
    if (c == NULL)
        return;
    op_inc_eng_destroy(c->eng);
    op_io_close(c->io);
    op_pktbuf_free(&c->rx);
    op_pktbuf_free(&c->tx);
    free(c);
}

static op_status_t client_open(const struct op_inc_config *cfg, struct op_inc_client **out)
{
    struct op_inc_client *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return OP_ERR_NOMEM;
    op_status_t st = op_pktbuf_init(&c->rx, OP_IO_BURST);
    if (st == OP_OK)
        st = op_pktbuf_init(&c->tx, OP_IO_BURST);
    if (st == OP_OK)
        st = op_inc_eng_create(cfg, &c->eng);
    if (st == OP_OK)
        st = op_io_udp_open(cfg->ip, cfg->port, &c->io);
    if (st != OP_OK) {
        op_inc_client_free(c);
        return st;
    }
    c->q = (struct op_txq){.pkts = c->tx.pkts, .cap = c->tx.n, .flush = flush, .ctx = c};
    *out = c;
    return OP_OK;
}

op_status_t op_inc_join(const struct op_inc_config *cfg, struct op_inc_client **out,
                        uint8_t *reason)
{
    struct op_inc_client *c;
    op_status_t st = client_open(cfg, &c);
    if (st != OP_OK)
        return st;
    st = op_inc_eng_join(c->eng, op_now_ns(), &c->q);
    if (st == OP_OK)
        st = run(c);
    if (reason != NULL)
        *reason = op_inc_eng_reason(c->eng);
    if (st != OP_OK) {
        op_inc_client_free(c);
        return st;
    }
    *out = c;
    return OP_OK;
}

op_status_t op_inc_allreduce(struct op_inc_client *c, const void *sendbuf, void *recvbuf,
                             size_t count, unsigned type, unsigned op)
{
    op_status_t st = op_inc_eng_allreduce(c->eng, sendbuf, recvbuf, count, type, op, op_now_ns(),
                                          &c->q);
    return st == OP_OK ? run(c) : st;
}

op_status_t op_inc_leave(struct op_inc_client *c)
{
    op_status_t st = op_inc_eng_leave(c->eng, op_now_ns(), &c->q);
    return st == OP_OK ? run(c) : st;
}

struct op_inc_eng *op_inc_client_engine(struct op_inc_client *c) { return c->eng; }
