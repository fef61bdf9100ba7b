/* Blocking hostar driver: engines over one UDP socket per process.
 *
 * A leader that has its result may still owe a slower peer a packet that was
 * lost; with no switch to keep results, only the leader itself can send it
 * again, and the application may by then be anywhere (in a barrier, in a
 * computation). So the port has a thread that runs the engines' timers while
 * no call does. During a call the caller drives the socket itself, holding
 * the lock. The thread sleeps on a timerfd, not on the socket (acks and early
 * packets wait there for the next call), which each call re-arms at its end
 * for PORT_IDLE_NS later at the earliest: while calls follow each other the
 * thread never wakes, and on two shared cores every wake-up is latency. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "offpath/hostar.h"
#include "offpath/loop.h"

#define PORT_IDLE_NS (1 * OP_NS_PER_MS)

struct op_har_client {
    struct op_har_port *port;
    uint32_t session;
    struct op_har_eng *eng;
};

struct op_har_port {
    struct op_io *io;
    struct op_loop *loop; /* runs the sessions' engines (offpath/loop.h); mu held */
    pthread_mutex_t mu;
    pthread_t timer;
    int tfd;
    bool have_timer, stop;
    atomic_bool busy; /* a call holds mu: the thread leaves the timers to it */
    uint64_t foreign;
};

static void *owner(void *ctx, const struct op_pkt *pkt)
{
    struct op_har_port *p = ctx;
    uint32_t session;
    if (op_har_session_of(pkt->data, pkt->len, &session))
        for (int i = 0; i < op_loop_engines(p->loop); i++) {
            struct op_har_client *c = op_loop_engine(p->loop, i);
            if (c->session == session)
                return c;
        }
    p->foreign++;
    return NULL;
}

/* ---- a session as the loop's engine (offpath/loop.h) */

static void client_input(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    op_har_eng_input(((struct op_har_client *)eng)->eng, pkt, now, out);
}

static void client_timer(void *eng, uint64_t now, struct op_txq *out)
{
    op_har_eng_timer(((struct op_har_client *)eng)->eng, now, out);
}

static uint64_t client_deadline(const void *eng)
{
    return op_har_eng_next_timer(((const struct op_har_client *)eng)->eng);
}

static const struct op_engine_ops client_ops = {
    .name = "hostar",
    .input = client_input,
    .timer = client_timer,
    .next_deadline = client_deadline,
};

/* The thread's next wake-up at t (absolute, op_now_ns clock; UINT64_MAX: none). */
static void arm(struct op_har_port *p, uint64_t t)
{
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (t != UINT64_MAX) {
        t = t ? t : 1; /* zero would disarm */
        its.it_value = (struct timespec){.tv_sec = (time_t)(t / OP_NS_PER_S),
                                         .tv_nsec = (long)(t % OP_NS_PER_S)};
    }
    timerfd_settime(p->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void *timer_main(void *arg)
{
    struct op_har_port *p = arg;
    for (;;) {
        uint64_t expirations;
        if (op_io_wait_fd(p->tfd, OP_IO_IN, UINT64_MAX) <= 0 ||
            read(p->tfd, &expirations, sizeof(expirations)) < 0)
            continue;
        /* a running call re-arms the timer when it ends */
        if (pthread_mutex_trylock(&p->mu) != 0) {
            if (atomic_load(&p->busy))
                continue;
            pthread_mutex_lock(&p->mu);
        }
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        if (op_loop_next_deadline(p->loop) <= op_now_ns())
            op_loop_serve(p->loop); /* what is due, without waiting */
        arm(p, op_loop_next_deadline(p->loop));
        pthread_mutex_unlock(&p->mu);
    }
}

static op_status_t start_timer(struct op_har_port *p)
{
    /* op_now_ns is CLOCK_MONOTONIC: the timer counts on it too */
    p->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (p->tfd < 0)
        return op_status_from_errno(errno);
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        close(p->tfd);
        return OP_ERR_NOMEM;
    }
    if (pthread_create(&p->timer, NULL, timer_main, p) != 0) {
        pthread_mutex_destroy(&p->mu);
        close(p->tfd);
        return OP_ERR_NOMEM;
    }
    p->have_timer = true;
    return OP_OK;
}

static op_status_t open_io(uint32_t ip, uint16_t udp_port, bool batching,
                           const struct op_fault_cfg *fault, struct op_io **out)
{
    struct op_io *io;
    op_status_t st = op_io_udp_open(ip, udp_port, &io);
    if (st != OP_OK)
        return st;
    op_io_udp_batching(io, batching);
    if (fault == NULL) {
        *out = io;
        return OP_OK;
    }
    st = op_io_fault_wrap(io, fault, out);
    if (st != OP_OK)
        op_io_close(io);
    return st;
}

op_status_t op_har_port_open(uint32_t ip, uint16_t udp_port, bool udp_batching,
                             const struct op_fault_cfg *fault, struct op_har_port **out)
{
    struct op_har_port *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return OP_ERR_NOMEM;
    op_status_t st = open_io(ip, udp_port, udp_batching, fault, &p->io);
    if (st == OP_OK) {
        /* no lock of the loop's own: a call holds mu throughout, the thread
         * takes it before it serves */
        struct op_loop_config lc = {.io = p->io, .demux = owner, .demux_ctx = p};
        st = op_loop_create(&lc, &p->loop);
    }
    if (st == OP_OK)
        st = start_timer(p);
    if (st != OP_OK) {
        op_har_port_close(p);
        return st;
    }
    *out = p;
    return OP_OK;
}

void op_har_port_close(struct op_har_port *p)
{
    if (p == NULL)
        return;
    if (p->have_timer) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        arm(p, 0);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->timer, NULL);
        pthread_mutex_destroy(&p->mu);
        close(p->tfd);
    }
    op_loop_destroy(p->loop);
    op_io_close(p->io);
    free(p);
}

void op_har_port_stats(struct op_har_port *p, uint64_t *foreign,
                       uint64_t fault[OP_FAULT_C_COUNT_])
{
    pthread_mutex_lock(&p->mu);
    if (foreign != NULL)
        *foreign = p->foreign;
    if (fault != NULL)
        op_io_fault_counters(p->io, fault);
    pthread_mutex_unlock(&p->mu);
}

op_status_t op_har_attach(struct op_har_port *p, const struct op_har_config *cfg,
                          struct op_har_client **out)
{
    struct op_har_client *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return OP_ERR_NOMEM;
    op_status_t st = op_har_eng_create(cfg, &c->eng);
    if (st != OP_OK) {
        free(c);
        return st;
    }
    c->port = p;
    c->session = cfg->session;
    pthread_mutex_lock(&p->mu);
    st = op_loop_add(p->loop, &client_ops, c);
    pthread_mutex_unlock(&p->mu);
    if (st != OP_OK) {
        op_har_eng_destroy(c->eng);
        free(c);
        return st;
    }
    *out = c;
    return OP_OK;
}

/* Drive the socket until c's call ends (every call has a deadline). Other
 * sessions' packets and timers are served on the way. */
static op_status_t run(struct op_har_client *c)
{
    while (op_har_eng_status(c->eng) == OP_INPROGRESS)
        op_loop_run_once(c->port->loop, UINT64_MAX);
    return op_har_eng_status(c->eng);
}

op_status_t op_har_allreduce(struct op_har_client *c, const void *sendbuf, void *recvbuf,
                             size_t count, unsigned type, unsigned op)
{
    struct op_har_port *p = c->port;
    atomic_store(&p->busy, true);
    pthread_mutex_lock(&p->mu);
    op_status_t st = op_har_eng_allreduce(c->eng, sendbuf, recvbuf, count, type, op, op_now_ns(),
                                          op_loop_txq(p->loop));
    if (st == OP_OK)
        st = run(c);
    /* The thread takes over the timers if no call comes for a while. Not
     * busy before the arming: a thread woken by this arm while we still hold
     * the lock (we may be descheduled for longer than PORT_IDLE_NS) must
     * wait for the lock, not take us for a running call and go back to
     * sleep with nothing armed; that left a finished leader's lost packet
     * unsent and its peer waiting out its deadline. */
    atomic_store(&p->busy, false);
    uint64_t idle = op_now_ns() + PORT_IDLE_NS, next = op_loop_next_deadline(p->loop);
    arm(p, next == UINT64_MAX ? next : next > idle ? next : idle);
    pthread_mutex_unlock(&p->mu);
    return st;
}

void op_har_client_counters(struct op_har_client *c, uint64_t *out)
{
    pthread_mutex_lock(&c->port->mu);
    const uint64_t *v = op_har_eng_counters(c->eng);
    for (unsigned i = 0; i < OP_HAR_C_COUNT_; i++)
        out[i] = v[i];
    pthread_mutex_unlock(&c->port->mu);
}

void op_har_client_free(struct op_har_client *c)
{
    if (c == NULL)
        return;
    /* out of the loop, no thread (the timer's) can reach the engine */
    pthread_mutex_lock(&c->port->mu);
    op_loop_remove(c->port->loop, c);
    pthread_mutex_unlock(&c->port->mu);
    op_har_eng_destroy(c->eng);
    free(c);
}
