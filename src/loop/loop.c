/* The one driver loop (offpath/loop.h): burst receive, demultiplex, engine
 * input, timers, flush; the wait is poll(2) on the backend with the earliest
 * deadline, so an idle engine costs no CPU and dozens of them share cores. */
#include <stdlib.h>

#include "offpath/loop.h"

struct slot {
    const struct op_engine_ops *ops;
    void *eng;
};

struct op_loop {
    struct op_loop_config cfg;
    struct op_pktbuf rx, tx;
    struct op_txq q;
    struct slot engines[OP_LOOP_MAX_ENGINES];
    int n;
    struct op_loop_stats stats;
};

static void lock(const struct op_loop *l)
{
    if (l->cfg.lock != NULL)
        pthread_mutex_lock(l->cfg.lock);
}

static void unlock(const struct op_loop *l)
{
    if (l->cfg.lock != NULL)
        pthread_mutex_unlock(l->cfg.lock);
}

static void send_queue(void *ctx, struct op_txq *q)
{
    struct op_loop *l = ctx;
    if (q->n == 0)
        return;
    if (l->cfg.flush != NULL)
        l->cfg.flush(l->cfg.flush_ctx, l->cfg.io, q);
    else
        op_io_send(l->cfg.io, q->pkts, q->n);
    q->n = 0;
}

op_status_t op_loop_create(const struct op_loop_config *cfg, struct op_loop **out)
{
    if (cfg->io == NULL || cfg->burst < 0)
        return OP_ERR_INVAL;
    struct op_loop *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return OP_ERR_NOMEM;
    l->cfg = *cfg;
    if (l->cfg.burst == 0)
        l->cfg.burst = OP_IO_BURST;
    op_status_t st = op_pktbuf_init(&l->rx, l->cfg.burst);
    if (st == OP_OK)
        st = op_pktbuf_init(&l->tx, l->cfg.burst);
    if (st != OP_OK) {
        op_loop_destroy(l);
        return st;
    }
    l->q = (struct op_txq){.pkts = l->tx.pkts, .cap = l->tx.n, .flush = send_queue, .ctx = l};
    *out = l;
    return OP_OK;
}

void op_loop_destroy(struct op_loop *l)
{
    if (l == NULL)
        return;
    op_pktbuf_free(&l->rx);
    op_pktbuf_free(&l->tx);
    free(l);
}

op_status_t op_loop_add(struct op_loop *l, const struct op_engine_ops *ops, void *eng)
{
    if (l->n == OP_LOOP_MAX_ENGINES)
        return OP_ERR_NOSPACE;
    l->engines[l->n++] = (struct slot){.ops = ops, .eng = eng};
    return OP_OK;
}

void op_loop_remove(struct op_loop *l, const void *eng)
{
    for (int i = 0; i < l->n; i++)
        if (l->engines[i].eng == eng)
            l->engines[i] = l->engines[--l->n];
}

struct op_txq *op_loop_txq(struct op_loop *l) { return &l->q; }

void op_loop_flush(struct op_loop *l) { send_queue(l, &l->q); }

static const struct slot *owner(const struct op_loop *l, const struct op_pkt *pkt)
{
    if (l->cfg.demux == NULL)
        return l->n > 0 ? &l->engines[0] : NULL;
    void *eng = l->cfg.demux(l->cfg.demux_ctx, pkt);
    for (int i = 0; eng != NULL && i < l->n; i++)
        if (l->engines[i].eng == eng)
            return &l->engines[i];
    return NULL;
}

/* Bursts until the backend has no more; what the engines answer leaves
 * after each burst, so a peer waiting on it is not held up by the next. */
static int receive(struct op_loop *l)
{
    int n, total = 0;
    while ((n = op_io_recv(l->cfg.io, l->rx.pkts, l->rx.n)) > 0) {
        uint64_t now = op_now_ns();
        for (int i = 0; i < n; i++) {
            const struct slot *s = owner(l, &l->rx.pkts[i]);
            if (s == NULL) {
                l->stats.unclaimed++;
                continue;
            }
            s->ops->input(s->eng, &l->rx.pkts[i], now, &l->q);
            l->stats.rx++;
        }
        send_queue(l, &l->q);
        total += n;
        if (n < l->rx.n)
            break;
    }
    return n < 0 ? n : total;
}

static void fire_timers(struct op_loop *l, uint64_t now)
{
    op_io_poll(l->cfg.io, now);
    for (int i = 0; i < l->n; i++)
        if (l->engines[i].ops->next_deadline(l->engines[i].eng) <= now)
            l->engines[i].ops->timer(l->engines[i].eng, now, &l->q);
    send_queue(l, &l->q);
}

static uint64_t next_deadline(const struct op_loop *l, uint64_t until)
{
    uint64_t t = op_io_deadline(l->cfg.io);
    until = t < until ? t : until;
    for (int i = 0; i < l->n; i++) {
        t = l->engines[i].ops->next_deadline(l->engines[i].eng);
        until = t < until ? t : until;
    }
    return until;
}

int op_loop_run_once(struct op_loop *l, uint64_t until)
{
    lock(l);
    send_queue(l, &l->q);
    uint64_t deadline = next_deadline(l, until);
    unlock(l);
    op_io_wait(l->cfg.io, deadline);
    lock(l);
    l->stats.rounds++;
    int n = receive(l);
    fire_timers(l, op_now_ns());
    unlock(l);
    return n;
}

void op_loop_stats(const struct op_loop *l, struct op_loop_stats *out) { *out = l->stats; }

uint64_t op_loop_next_deadline(const struct op_loop *l) { return next_deadline(l, UINT64_MAX); }
