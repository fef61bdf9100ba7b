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
    int fd; /* -1: unwatched during a round, dropped after it */
    unsigned events;
    op_loop_fd_fn fn;          /* op_loop_watch's, or */
    op_loop_ready_fn ready_fn; /* op_loop_watch_events' */
    void *ctx;
};

struct op_loop {
    struct op_loop_config cfg;
    struct op_pktbuf rx, tx;
    int rx_lent; /* rx's packets the last receive may have pointed elsewhere */
    struct op_txq q;
    /* frames: buffers and arrays of their own (rx_frames hands buffers to
     * the queue and back as engines forward) */
    struct op_pktbuf rx_mem, tx_mem;
    struct op_frame *rx_frames, *tx_frames;
    uint8_t **tx_bufs;
    bool lent; /* the backend lends its buffers (a DPDK queue's mbufs) */
    struct op_frameq fq;
    struct slot engines[OP_LOOP_MAX_ENGINES];
    int n;
    struct watch *watches; /* grown as watched (a server's connections) */
    int n_watches, cap_watches;
    int n_waited; /* the watches the last wait looked at */
    struct pollfd *pfd; /* a single loop's wait: the backend, then the watches */
    int cap_pfd;
    uint64_t empty_rounds, timer_rounds;
    uint64_t poll_time; /* op_loop_poll's last clock read */
    uint64_t busy_waits; /* rounds of spinning loops: every WATCH_EVERY-th looks at the fds */
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
    else if (l->cfg.io != NULL)
        op_io_send(l->cfg.io, q->pkts, q->n);
    q->n = 0;
}

static void send_frames(void *ctx, struct op_frameq *q)
{
    struct op_loop *l = ctx;
    if (q->n == 0)
        return;
    l->stats.flushes++;
    if (l->cfg.flush_frames != NULL)
        l->cfg.flush_frames(l->cfg.flush_ctx, l->cfg.io, q);
    else
        (void)op_io_send_frames(l->cfg.io, q->frames, q->n);
    q->n = 0;
}

static bool config_ok(const struct op_loop_config *c)
{
    return c->burst >= 0 && c->tx_queue >= 0 && c->bursts_per_round >= 0 &&
           c->timer_every >= 0 && c->yield_every >= 0 && (!c->frames || (c->io != NULL && op_io_has_frames(c->io)));
}

static op_status_t frame_buffers(struct op_loop *l)
{
    op_status_t st = op_pktbuf_init(&l->rx_mem, l->cfg.burst);
    if (st == OP_OK)
        st = op_pktbuf_init(&l->tx_mem, l->cfg.tx_queue);
    l->rx_frames = calloc((size_t)l->cfg.burst, sizeof *l->rx_frames);
    l->tx_frames = calloc((size_t)l->cfg.tx_queue, sizeof *l->tx_frames);
    l->tx_bufs = calloc((size_t)l->cfg.tx_queue, sizeof *l->tx_bufs);
    if (st != OP_OK || l->rx_frames == NULL || l->tx_frames == NULL || l->tx_bufs == NULL)
        return st != OP_OK ? st : OP_ERR_NOMEM;
    op_pktbuf_frames(&l->rx_mem, l->rx_frames);
    for (int i = 0; i < l->cfg.tx_queue; i++)
        l->tx_bufs[i] = l->tx_mem.pkts[i].data;
    l->fq = (struct op_frameq){.frames = l->tx_frames, .bufs = l->tx_bufs,
                               .cap = l->cfg.tx_queue, .flush = send_frames, .ctx = l};
    l->lent = op_io_lends_frames(l->cfg.io);
    return OP_OK;
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
    if (l->cfg.yield_every == 0)
        l->cfg.yield_every = OP_LOOP_YIELD_EVERY;
    op_status_t st = op_pktbuf_init(&l->rx, l->cfg.burst);
    if (st == OP_OK)
        st = op_pktbuf_init(&l->tx, l->cfg.tx_queue);
    if (st == OP_OK && l->cfg.frames)
        st = frame_buffers(l);
    if (st != OP_OK) {
        op_loop_destroy(l);
        return st;
    }
    /* a flush hook of the driver's reads the queue's packets itself */
    l->q = (struct op_txq){.pkts = l->tx.pkts, .cap = l->tx.n, .flush = send_queue, .ctx = l,
                           .ext_ok = cfg->io != NULL && cfg->flush == NULL &&
                                     op_io_takes_ext(cfg->io)};
    *out = l;
    return OP_OK;
}

void op_loop_destroy(struct op_loop *l)
{
    if (l == NULL)
        return;
    if (l->lent) /* lent frames queued and never sent go back */
        op_io_release_frames(l->cfg.io, l->fq.frames, l->fq.n);
    op_pktbuf_free(&l->rx);
    op_pktbuf_free(&l->tx);
    op_pktbuf_free(&l->rx_mem);
    op_pktbuf_free(&l->tx_mem);
    free(l->rx_frames);
    free(l->tx_frames);
    free(l->tx_bufs);
    free(l->watches);
    free(l->pfd);
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

static op_status_t add_watch(struct op_loop *l, const struct watch *w)
{
    if (w->fd < 0 || (w->fn == NULL && w->ready_fn == NULL) || w->events == 0)
        return OP_ERR_INVAL;
    if (l->n_watches == OP_LOOP_MAX_WATCHES)
        return OP_ERR_NOSPACE;
    if (l->n_watches == l->cap_watches) {
        int cap = l->cap_watches > 0 ? 2 * l->cap_watches : 8;
        struct watch *grown = realloc(l->watches, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return OP_ERR_NOMEM;
        l->watches = grown;
        l->cap_watches = cap;
    }
    l->watches[l->n_watches++] = *w;
    return OP_OK;
}

op_status_t op_loop_watch(struct op_loop *l, int fd, op_loop_fd_fn fn, void *ctx)
{
    return add_watch(l, &(struct watch){.fd = fd, .events = OP_IO_IN, .fn = fn, .ctx = ctx});
}

op_status_t op_loop_watch_events(struct op_loop *l, int fd, unsigned events, op_loop_ready_fn fn,
                                 void *ctx)
{
    return add_watch(l, &(struct watch){.fd = fd, .events = events & (OP_IO_IN | OP_IO_OUT),
                                        .ready_fn = fn, .ctx = ctx});
}

static struct watch *watch_of(struct op_loop *l, int fd)
{
    for (int i = 0; fd >= 0 && i < l->n_watches; i++)
        if (l->watches[i].fd == fd)
            return &l->watches[i];
    return NULL;
}

op_status_t op_loop_watch_set(struct op_loop *l, int fd, unsigned events)
{
    struct watch *w = watch_of(l, fd);
    if (w == NULL || (events & (OP_IO_IN | OP_IO_OUT)) == 0)
        return OP_ERR_INVAL;
    w->events = events & (OP_IO_IN | OP_IO_OUT);
    return OP_OK;
}

/* Marked now, dropped after the round: a callback may unwatch its own fd
 * or another's while the round walks the list. */
void op_loop_unwatch(struct op_loop *l, int fd)
{
    struct watch *w = watch_of(l, fd);
    if (w != NULL)
        w->fd = -1;
}

static void drop_unwatched(struct op_loop *l)
{
    int k = 0;
    for (int i = 0; i < l->n_watches; i++)
        if (l->watches[i].fd >= 0)
            l->watches[k++] = l->watches[i];
    l->n_watches = k;
}

struct op_txq *op_loop_txq(struct op_loop *l) { return &l->q; }

struct op_frameq *op_loop_frameq(struct op_loop *l) { return l->cfg.frames ? &l->fq : NULL; }

static void flush_all(struct op_loop *l)
{
    send_queue(l, &l->q);
    if (l->cfg.frames)
        send_frames(l, &l->fq);
}

void op_loop_flush(struct op_loop *l) { flush_all(l); }

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

/* Packets in rx, lent by the backend where it can (the packets of a GRO
 * datagram where they lie: engines copy what they keep, and the next
 * receive comes after they are done with these), their payloads read
 * where the first engine foresees them when it does (rx_place: a
 * responder in the middle of a WRITE). rx's own buffers go back first. */
static int receive_lent(struct op_loop *l, int max)
{
    for (int i = 0; i < l->rx_lent; i++) {
        l->rx.pkts[i].data = l->rx.mem + (size_t)i * OP_IO_BUF_SIZE;
        l->rx.pkts[i].ext = NULL;
    }
    struct op_io_place place;
    const struct slot *e = &l->engines[0];
    bool placed = l->cfg.demux == NULL && l->n > 0 && e->ops->rx_place != NULL &&
                  e->ops->rx_place(e->eng, &place);
    int n = op_io_recv_placed(l->cfg.io, l->rx.pkts, max, placed ? &place : NULL);
    l->rx_lent = n > 0 ? n : 0;
    return n;
}

static int receive_burst(struct op_loop *l)
{
    int max = l->rx.n;
    if (l->cfg.rx_budget != NULL) {
        int room = l->cfg.rx_budget(l->cfg.budget_ctx);
        if ((max = room < max ? room : max) <= 0)
            return 0;
    }
    if (!l->cfg.frames) {
        int n = receive_lent(l, max);
        if (n > 0)
            hand_over(l, n, op_now_ns());
        return n;
    }
    int n = l->lent ? op_io_recv_frames_lent(l->cfg.io, l->rx_frames, max)
                    : op_io_recv_frames(l->cfg.io, l->rx_frames, max);
    if (n <= 0)
        return n;
    if (l->n > 0 && l->engines[0].ops->input_frames != NULL) {
        l->engines[0].ops->input_frames(l->engines[0].eng, l->rx_frames, n, op_now_ns(), &l->fq);
        l->stats.rx += (uint64_t)n;
    } else {
        l->stats.unclaimed += (uint64_t)n;
    }
    if (l->lent) /* what the engine did not hand on goes back (put empties a frame) */
        op_io_release_frames(l->cfg.io, l->rx_frames, n);
    return n;
}

/* Bursts until the backend has no more or the round's cap. */
static int receive(struct op_loop *l)
{
    int n = 0, total = 0;
    for (int b = 0; l->cfg.bursts_per_round == 0 || b < l->cfg.bursts_per_round; b++) {
        if ((n = receive_burst(l)) <= 0)
            break;
        if (!l->cfg.flush_per_round)
            flush_all(l);
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
    if (l->cfg.io != NULL && op_io_deadline(l->cfg.io) <= now)
        op_io_poll(l->cfg.io, now);
    if (++l->timer_rounds < (uint64_t)l->cfg.timer_every)
        return;
    l->timer_rounds = 0;
    for (int i = 0; i < l->n; i++)
        if (engine_deadline(&l->engines[i]) <= now)
            l->engines[i].ops->timer(l->engines[i].eng, now, &l->q);
}

static uint64_t next_deadline(const struct op_loop *l, uint64_t until)
{
    uint64_t t = l->cfg.io != NULL ? op_io_deadline(l->cfg.io) : UINT64_MAX;
    until = t < until ? t : until;
    for (int i = 0; i < l->n; i++) {
        t = engine_deadline(&l->engines[i]);
        until = t < until ? t : until;
    }
    return until;
}

/* Busy polling, asked for or because the backend has no descriptor to
 * wait on (a DPDK queue): rounds do not sleep. */
static bool spins(const struct op_loop *l)
{
    return l->cfg.busy_poll || (l->cfg.io != NULL && op_io_fd(l->cfg.io) < 0);
}

/* An empty round that did not sleep counts towards a yield (see busy_poll). */
static void after_round(struct op_loop *l, int got, bool spinning)
{
    if (got != 0) {
        l->empty_rounds = 0;
        return;
    }
    if (spinning && ++l->empty_rounds == (uint64_t)l->cfg.yield_every) {
        l->empty_rounds = 0;
        l->stats.yields++;
        sched_yield();
    }
}

static unsigned ready_of(short revents)
{
    return (revents & POLLIN ? OP_IO_IN : 0) | (revents & POLLOUT ? OP_IO_OUT : 0) |
           (revents & (POLLERR | POLLHUP | POLLNVAL) ? OP_IO_ERR : 0);
}

/* The watches the wait looked at (those added since wait for the next
 * round; those unwatched meanwhile are skipped). */
static void serve_watches(struct op_loop *l, const struct pollfd *pfd)
{
    for (int i = 0; i < l->n_waited && i < l->n_watches; i++) {
        const struct watch *w = &l->watches[i];
        unsigned ready = ready_of(pfd[i].revents);
        if (w->fd < 0 || w->fd != pfd[i].fd || ready == 0)
            continue;
        if (w->ready_fn != NULL)
            w->ready_fn(w->ctx, w->fd, ready);
        else if (ready & OP_IO_IN)
            w->fn(w->ctx, w->fd);
    }
    drop_unwatched(l);
}

static short poll_events(unsigned events)
{
    return (short)((events & OP_IO_IN ? POLLIN : 0) | (events & OP_IO_OUT ? POLLOUT : 0));
}

static void watch_fds(struct op_loop *l, struct pollfd *pfd)
{
    for (int i = 0; i < l->n_watches; i++)
        pfd[i] = (struct pollfd){.fd = l->watches[i].fd, .events = poll_events(l->watches[i].events)};
    l->n_waited = l->n_watches;
}

/* watches: the poll results of the watched fds (NULL: none looked at);
 * ready: whether to read the backend. The round's after_round is the
 * caller's (one for all the loops of a wait). */
static int round_body(struct op_loop *l, const struct pollfd *watches, bool ready)
{
    lock(l);
    l->stats.rounds++;
    if (watches != NULL)
        serve_watches(l, watches);
    int n = ready && l->cfg.io != NULL ? receive(l) : 0;
    fire_timers(l, op_now_ns());
    flush_all(l);
    unlock(l);
    return n;
}

static int round_of(struct op_loop *l, const struct pollfd *watches, bool ready)
{
    int n = round_body(l, watches, ready);
    after_round(l, n, spins(l));
    return n;
}

/* The loop's own poll array with room for n (grown outside rounds only,
 * so a round never walks a moved array); NULL when memory is out. */
static struct pollfd *pfd_room(struct op_loop *l, int n)
{
    if (n > l->cap_pfd) {
        struct pollfd *grown = realloc(l->pfd, (size_t)n * sizeof *grown);
        if (grown == NULL)
            return NULL;
        l->pfd = grown;
        l->cap_pfd = n;
    }
    return l->pfd;
}

int op_loop_serve(struct op_loop *l)
{
    struct pollfd *pfd = pfd_room(l, 1 + l->n_watches);
    if (pfd == NULL)
        return -ENOMEM;
    watch_fds(l, pfd + 1);
    if (l->n_watches > 0 && poll(pfd + 1, (nfds_t)l->n_watches, 0) < 0)
        return -errno;
    return round_of(l, l->n_watches > 0 ? pfd + 1 : NULL, true);
}

static int add_fds(struct op_loop *l, struct pollfd *pfd)
{
    pfd[0] = (struct pollfd){.fd = l->cfg.io != NULL ? op_io_fd(l->cfg.io) : -1, .events = POLLIN};
    watch_fds(l, pfd + 1);
    return 1 + l->n_watches;
}

/* The wait before a round: queued output leaves first (an engine started
 * an operation outside a round), then ppoll until the earliest deadline. */
static uint64_t prepare(struct op_loop *l, uint64_t until)
{
    lock(l);
    flush_all(l);
    uint64_t deadline = spins(l) || l->backlog ? 0 : next_deadline(l, until);
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
    struct pollfd *pfd = pfd_room(l, 1 + l->n_watches);
    if (pfd == NULL)
        return -ENOMEM;
    int n = add_fds(l, pfd);
    return wait_fds(pfd, n, prepare(l, until));
}

int op_loop_run_once(struct op_loop *l, uint64_t until)
{
    return op_loop_run_many(&l, 1, until);
}

#define RUN_MANY_FDS 1024
/* Loops that all spin look at their descriptors (watched fds such as a
 * signalfd, sockets' readiness) once every this many rounds, and otherwise
 * read every backend without asking: a ppoll of nothing each round was 10 %
 * of a DPDK port's core (its queues have no fd), 4 % of an AF_XDP one's
 * (its ring is read without a system call either way). A signal then waits
 * a few microseconds more. */
#define WATCH_EVERY 64

static bool all_spin(struct op_loop *const *loops, int n)
{
    for (int i = 0; i < n; i++)
        if (!spins(loops[i]))
            return false;
    return true;
}

int op_loop_run_many(struct op_loop *const *loops, int n, uint64_t until)
{
    struct pollfd many[RUN_MANY_FDS];
    int at[RUN_MANY_FDS], nfd = 0; /* each loop takes one fd at least */
    /* one loop: its own array, as long as its watches need */
    struct pollfd *pfd = n == 1 ? pfd_room(loops[0], 1 + loops[0]->n_watches) : many;
    if (pfd == NULL || n > RUN_MANY_FDS)
        return pfd == NULL ? -ENOMEM : -EMFILE;
    for (int i = 0; i < n; i++) {
        until = prepare(loops[i], until);
        if (pfd == many && nfd + 1 + loops[i]->n_watches > RUN_MANY_FDS)
            return -EMFILE;
        at[i] = nfd;
        nfd += add_fds(loops[i], pfd + nfd);
    }
    bool look = !all_spin(loops, n) || loops[0]->busy_waits++ % WATCH_EVERY == 0;
    int err = look ? wait_fds(pfd, nfd, until) : 0, total = 0;
    for (int i = 0; i < n && err == 0; i++) {
        /* one loop reads whatever its fd said (a busy round waited for
         * nothing); of many, only those whose socket has packets: the rest
         * would each cost an empty receive call */
        bool ready = !look || n == 1 || loops[i]->backlog || (pfd[at[i]].revents & POLLIN) ||
                     pfd[at[i]].fd < 0;
        int got = round_body(loops[i], look ? pfd + at[i] + 1 : NULL, ready);
        if (got < 0)
            return got;
        total += got;
    }
    /* a spinning thread yields when the wait brought nothing anywhere: an
     * idle port beside a loaded one is no reason to give the core away */
    if (err == 0)
        after_round(loops[0], total, spins(loops[0]));
    return err != 0 ? err : total;
}

/* The end of a poll, locked: what it read handed over, the timers. */
static int poll_end(struct op_loop *l, int n, uint64_t now)
{
    if (n > 0)
        hand_over(l, n, now);
    fire_timers(l, now);
    unlock(l);
    n = n > 0 ? n : 0;
    after_round(l, n, true);
    return n;
}

int op_loop_poll(struct op_loop *l, int max)
{
    lock(l);
    /* One clock read for the packets and the timers, before the read: a
     * latency test polls here, and a packet that came is then handed over
     * at once (the engine's timers do not need the read's sub-us). */
    uint64_t now = l->poll_time = op_now_ns();
    int n = l->cfg.io != NULL ? receive_lent(l, max < l->rx.n ? max : l->rx.n) : 0;
    return poll_end(l, n, now);
}

int op_loop_spin(struct op_loop *l, int max, int reads)
{
    int n = 0;
    if (max > l->rx.n)
        max = l->rx.n;
    for (int i = 0; i < reads && n <= 0 && l->cfg.io != NULL; i++) {
        lock(l);
        n = receive_lent(l, max);
        unlock(l);
        if (n <= 0 && i + 1 < reads)
            after_round(l, 0, true);
    }
    lock(l);
    return poll_end(l, n, l->poll_time = op_now_ns());
}

uint64_t op_loop_poll_time(const struct op_loop *l) { return l->poll_time; }

void op_loop_stats(const struct op_loop *l, struct op_loop_stats *out) { *out = l->stats; }

uint64_t op_loop_next_deadline(const struct op_loop *l) { return next_deadline(l, UINT64_MAX); }
