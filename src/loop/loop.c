/* The one driver loop (offpath/loop.h): burst receive, demultiplex, engine
 * input, timers, flush; the wait is ppoll(2) on the backend, the watched fds
 * and the earliest deadline, so an idle engine costs no CPU and dozens of
 * them share cores. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>

#include "offpath/loop.h"

struct slot {
    const struct op_engine_ops *ops;
    void *eng;
};

struct watch {
    int fd;
    op_loop_fd_fn fn;
    void *ctx;
};

struct op_loop {
    struct op_loop_config cfg;
    struct op_pktbuf rx, tx;
    struct op_txq q;
    struct slot engines[OP_LOOP_MAX_ENGINES];
    int n;
    struct watch watches[OP_LOOP_MAX_WATCHES];
    int n_watches;
    uint64_t empty_rounds, timer_rounds;
    /* the last round stopped at bursts_per_round with a full burst: the
     * backend may hold more (a GRO datagram's remaining segments do not
     * make its fd readable), so the next wait does not sleep */
    bool backlog;
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
    l->stats.flushes++;
    if (l->cfg.flush != NULL)
        l->cfg.flush(l->cfg.flush_ctx, l->cfg.io, q);
    else
        op_io_send(l->cfg.io, q->pkts, q->n);
    q->n = 0;
}

static bool config_ok(const struct op_loop_config *c)
{
    return c->io != NULL && c->burst >= 0 && c->tx_queue >= 0 && c->bursts_per_round >= 0 &&
           c->timer_every >= 0;
}

op_status_t op_loop_create(const struct op_loop_config *cfg, struct op_loop **out)
{
    if (!config_ok(cfg))
        return OP_ERR_INVAL;
    struct op_loop *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return OP_ERR_NOMEM;
    l->cfg = *cfg;
    if (l->cfg.burst == 0)
        l->cfg.burst = OP_IO_BURST;
    if (l->cfg.tx_queue == 0)
        l->cfg.tx_queue = l->cfg.burst;
    if (l->cfg.timer_every == 0)
        l->cfg.timer_every = 1;
    op_status_t st = op_pktbuf_init(&l->rx, l->cfg.burst);
    if (st == OP_OK)
        st = op_pktbuf_init(&l->tx, l->cfg.tx_queue);
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

int op_loop_engines(const struct op_loop *l) { return l->n; }

void *op_loop_engine(const struct op_loop *l, int i) { return i < l->n ? l->engines[i].eng : NULL; }

op_status_t op_loop_watch(struct op_loop *l, int fd, op_loop_fd_fn fn, void *ctx)
{
    if (fd < 0 || fn == NULL)
        return OP_ERR_INVAL;
    if (l->n_watches == OP_LOOP_MAX_WATCHES)
        return OP_ERR_NOSPACE;
    l->watches[l->n_watches++] = (struct watch){.fd = fd, .fn = fn, .ctx = ctx};
    return OP_OK;
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

static void hand_over(struct op_loop *l, int n, uint64_t now)
{
    if (l->cfg.demux == NULL && l->n > 0 && l->engines[0].ops->input_burst != NULL) {
        l->engines[0].ops->input_burst(l->engines[0].eng, l->rx.pkts, n, now, &l->q);
        l->stats.rx += (uint64_t)n;
        return;
    }
    for (int i = 0; i < n; i++) {
        const struct slot *s = owner(l, &l->rx.pkts[i]);
        if (s == NULL) {
            l->stats.unclaimed++;
            continue;
        }
        s->ops->input(s->eng, &l->rx.pkts[i], now, &l->q);
        l->stats.rx++;
    }
}

/* Bursts until the backend has no more or the round's cap. */
static int receive(struct op_loop *l)
{
    int n = 0, total = 0;
    for (int b = 0; l->cfg.bursts_per_round == 0 || b < l->cfg.bursts_per_round; b++) {
        if ((n = op_io_recv(l->cfg.io, l->rx.pkts, l->rx.n)) <= 0)
            break;
        hand_over(l, n, op_now_ns());
        if (!l->cfg.flush_per_round)
            send_queue(l, &l->q);
        total += n;
        if (n < l->rx.n)
            break;
    }
    l->backlog = n == l->rx.n;
    return n < 0 ? n : total;
}

static uint64_t engine_deadline(const struct slot *s)
{
    return s->ops->next_deadline != NULL ? s->ops->next_deadline(s->eng) : UINT64_MAX;
}

static void fire_timers(struct op_loop *l, uint64_t now)
{
    if (op_io_deadline(l->cfg.io) <= now)
        op_io_poll(l->cfg.io, now);
    if (++l->timer_rounds % (uint64_t)l->cfg.timer_every != 0)
        return;
    for (int i = 0; i < l->n; i++)
        if (engine_deadline(&l->engines[i]) <= now)
            l->engines[i].ops->timer(l->engines[i].eng, now, &l->q);
}

static uint64_t next_deadline(const struct op_loop *l, uint64_t until)
{
    uint64_t t = op_io_deadline(l->cfg.io);
    until = t < until ? t : until;
    for (int i = 0; i < l->n; i++) {
        t = engine_deadline(&l->engines[i]);
        until = t < until ? t : until;
    }
    return until;
}

/* An empty round that did not sleep counts towards a yield (see busy_poll). */
static void after_round(struct op_loop *l, int got, bool spinning)
{
    if (got != 0) {
        l->empty_rounds = 0;
        return;
    }
    if (spinning && ++l->empty_rounds % OP_LOOP_YIELD_EVERY == 0) {
        l->stats.yields++;
        sched_yield();
    }
}

static void serve_watches(struct op_loop *l, const struct pollfd *pfd)
{
    for (int i = 0; i < l->n_watches; i++)
        if (pfd[i].revents & POLLIN)
            l->watches[i].fn(l->watches[i].ctx, l->watches[i].fd);
}

/* watches: the poll results of the watched fds (NULL: none looked at);
 * ready: whether to read the backend. */
static int round_of(struct op_loop *l, const struct pollfd *watches, bool ready)
{
    lock(l);
    l->stats.rounds++;
    if (watches != NULL)
        serve_watches(l, watches);
    int n = ready ? receive(l) : 0;
    fire_timers(l, op_now_ns());
    send_queue(l, &l->q);
    unlock(l);
    after_round(l, n, l->cfg.busy_poll);
    return n;
}

int op_loop_serve(struct op_loop *l)
{
    struct pollfd pfd[OP_LOOP_MAX_WATCHES];
    for (int i = 0; i < l->n_watches; i++)
        pfd[i] = (struct pollfd){.fd = l->watches[i].fd, .events = POLLIN};
    if (l->n_watches > 0 && poll(pfd, (nfds_t)l->n_watches, 0) < 0)
        return -errno;
    return round_of(l, l->n_watches > 0 ? pfd : NULL, true);
}

static int add_fds(const struct op_loop *l, struct pollfd *pfd)
{
    pfd[0] = (struct pollfd){.fd = op_io_fd(l->cfg.io), .events = POLLIN};
    for (int i = 0; i < l->n_watches; i++)
        pfd[1 + i] = (struct pollfd){.fd = l->watches[i].fd, .events = POLLIN};
    return 1 + l->n_watches;
}

/* The wait before a round: queued output leaves first (an engine started
 * an operation outside a round), then ppoll until the earliest deadline. */
static uint64_t prepare(struct op_loop *l, uint64_t until)
{
    lock(l);
    send_queue(l, &l->q);
    uint64_t deadline = l->cfg.busy_poll || l->backlog ? 0 : next_deadline(l, until);
    unlock(l);
    return deadline;
}

static int wait_fds(struct pollfd *pfd, int n, uint64_t deadline)
{
    struct timespec ts = {0, 0};
    uint64_t now = op_now_ns();
    if (deadline > now && deadline != UINT64_MAX) {
        ts.tv_sec = (time_t)((deadline - now) / OP_NS_PER_S);
        ts.tv_nsec = (long)((deadline - now) % OP_NS_PER_S);
    }
    if (ppoll(pfd, (nfds_t)n, deadline == UINT64_MAX ? NULL : &ts, NULL) >= 0 || errno == EINTR)
        return 0;
    return -errno;
}

int op_loop_wait(struct op_loop *l, uint64_t until)
{
    struct pollfd pfd[1 + OP_LOOP_MAX_WATCHES];
    int n = add_fds(l, pfd);
    return wait_fds(pfd, n, prepare(l, until));
}

int op_loop_run_once(struct op_loop *l, uint64_t until)
{
    return op_loop_run_many(&l, 1, until);
}

#define RUN_MANY_FDS 1024

int op_loop_run_many(struct op_loop *const *loops, int n, uint64_t until)
{
    struct pollfd pfd[RUN_MANY_FDS];
    int at[RUN_MANY_FDS], nfd = 0; /* each loop takes one fd at least */
    for (int i = 0; i < n; i++) {
        until = prepare(loops[i], until);
        if (nfd + 1 + loops[i]->n_watches > RUN_MANY_FDS)
            return -EMFILE;
        at[i] = nfd;
        nfd += add_fds(loops[i], pfd + nfd);
    }
    int err = wait_fds(pfd, nfd, until), total = 0;
    for (int i = 0; i < n && err == 0; i++) {
        /* one loop reads whatever its fd said (a busy round waited for
         * nothing); of many, only those whose socket has packets: the rest
         * would each cost an empty receive call */
        bool ready = n == 1 || loops[i]->backlog || (pfd[at[i]].revents & POLLIN);
        int got = round_of(loops[i], pfd + at[i] + 1, ready);
        if (got < 0)
            return got;
        total += got;
    }
    return err != 0 ? err : total;
}

int op_loop_poll(struct op_loop *l, int max)
{
    lock(l);
    /* One clock read for the packets and the timers, before the read: a
     * latency test polls here, and a packet that came is then handed over
     * at once (the engine's timers do not need the read's sub-us). */
    uint64_t now = op_now_ns();
    int n = op_io_recv(l->cfg.io, l->rx.pkts, max < l->rx.n ? max : l->rx.n);
    if (n > 0)
        hand_over(l, n, now);
    fire_timers(l, now);
    unlock(l);
    n = n > 0 ? n : 0;
    after_round(l, n, true);
    return n;
}

void op_loop_stats(const struct op_loop *l, struct op_loop_stats *out) { *out = l->stats; }

uint64_t op_loop_next_deadline(const struct op_loop *l) { return next_deadline(l, UINT64_MAX); }
