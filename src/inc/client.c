/* Blocking INC client: engines driven over a UDP socket. A process has one
 * socket (a port) however many groups it belongs to, as a NIC has one RoCEv2
 * port: packets are handed to the engine they belong to. Each call waits in
 * poll with its engine's next deadline, so dozens of leaders share two cores.
 *
 * A port may also be driven by another thread (op_inc_port_progress: an MPI
 * library's progress thread for nonblocking allreduces) while a blocking call
 * runs on the port: a mutex guards the port and its engines, never held while
 * waiting in poll, and whoever reads a packet hands it to its engine, so each
 * thread's calls progress whichever thread happens to read. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "offpath/inc.h"
#include "offpath/loop.h"

struct op_inc_port {
    struct op_io *io;
    struct op_loop *loop; /* runs the clients' engines (offpath/loop.h) */
    pthread_mutex_t lock;
};

struct op_inc_client {
    struct op_inc_port *port;
    bool owns_port;
    struct op_inc_config cfg;
    struct op_inc_eng *eng;
    atomic_bool *cancel; /* op_inc_client_watch */
};

/* Does a control message name this client's communicator? */
static bool names_comm(const struct op_inc_ctrl *c, const struct op_inc_client *cl)
{
    return c->job_id == cl->cfg.job_id && c->true_comm_id == cl->cfg.comm_id &&
           c->c_id == cl->cfg.c_id;
}

/* The client a packet is for: data and kills by group id and token, the
 * join's control messages by the communicator they name. */
static void *owner(void *ctx, const struct op_pkt *pkt)
{
    const struct op_inc_port *p = ctx;
    struct op_inc_pkt ip;
    int n = op_loop_engines(p->loop);
    if (n == 1)
        return op_loop_engine(p->loop, 0);
    if (op_inc_decode(pkt->data, pkt->len, &ip) != OP_OK)
        return NULL;
    bool ctrl = ip.hdr.kind == OP_INC_KIND_CTRL;
    bool by_key = ctrl && ip.hdr.group_id == 0;
    for (int i = 0; i < n; i++) {
        struct op_inc_client *cl = op_loop_engine(p->loop, i);
        const struct op_inc_caps *caps = op_inc_eng_caps(cl->eng);
        if (by_key ? names_comm(&ip.ctrl, cl)
                   : ip.hdr.group_id == caps->group_id && ip.hdr.token == caps->token)
            return cl;
        /* a notify carries the new group id: match it by communicator too */
        if (!by_key && ctrl && caps->group_id == 0 && names_comm(&ip.ctrl, cl))
            return cl;
    }
    return NULL;
}

op_status_t op_inc_port_open(uint32_t ip, uint16_t udp_port, bool udp_batching,
                             struct op_inc_port **out)
{
    struct op_inc_port *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return OP_ERR_NOMEM;
    pthread_mutex_init(&p->lock, NULL);
    op_status_t st = op_io_udp_open(ip, udp_port, &p->io);
    if (st == OP_OK) {
        op_io_udp_batching(p->io, udp_batching);
        struct op_loop_config lc = {.io = p->io, .demux = owner, .demux_ctx = p, .lock = &p->lock};
        st = op_loop_create(&lc, &p->loop);
    }
    if (st == OP_OK)
        *out = p;
    else
        op_inc_port_close(p);
    return st;
}

void op_inc_port_close(struct op_inc_port *p)
{
    if (p == NULL)
        return;
    pthread_mutex_destroy(&p->lock);
    op_loop_destroy(p->loop);
    op_io_close(p->io);
    free(p);
}

/* ---- a client as the loop's engine (offpath/loop.h) */

static void client_input(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    struct op_inc_client *c = eng;
    op_inc_eng_input(c->eng, pkt, now, out);
}

static bool cancel_pending(const struct op_inc_client *c)
{
    return c->cancel != NULL && atomic_load(c->cancel);
}

static void client_timer(void *eng, uint64_t now, struct op_txq *out)
{
    struct op_inc_client *c = eng;
    if (cancel_pending(c) && op_inc_eng_cancel(c->eng))
        atomic_store(c->cancel, false); /* an allreduce stopped; else it waits for one */
    op_inc_eng_timer(c->eng, now, out);
}

/* A cancel asks for the timer now; an engine with no operation running has
 * nothing to time. */
static uint64_t client_deadline(const void *eng)
{
    const struct op_inc_client *c = eng;
    if (op_inc_eng_status(c->eng) != OP_INPROGRESS)
        return UINT64_MAX;
    return cancel_pending(c) ? 0 : op_inc_eng_next_timer(c->eng);
}

static const struct op_engine_ops client_ops = {
    .name = "inc leader",
    .input = client_input,
    .timer = client_timer,
    .next_deadline = client_deadline,
};

/* An engine call outside the loop (starting an operation) runs under the
 * port's lock with the loop's queue; what it queued leaves here. */
static struct op_txq *queue_of(struct op_inc_port *p)
{
    pthread_mutex_lock(&p->lock);
    return op_loop_txq(p->loop);
}

static op_status_t sent(struct op_inc_port *p, op_status_t st)
{
    op_loop_flush(p->loop);
    pthread_mutex_unlock(&p->lock);
    return st;
}

static op_status_t status_locked(struct op_inc_client *c)
{
    pthread_mutex_lock(&c->port->lock);
    op_status_t st = op_inc_eng_status(c->eng);
    pthread_mutex_unlock(&c->port->lock);
    return st;
}

/* Drive the port until c's current operation ends (it always does: every
 * operation has a deadline). Other groups' packets still reach them. */
static op_status_t run(struct op_inc_client *c)
{
    op_status_t st;
    uint64_t spin_until = c->cfg.spin_ns ? op_now_ns() + c->cfg.spin_ns : 0;
    while ((st = status_locked(c)) == OP_INPROGRESS) {
        uint64_t now = spin_until ? op_now_ns() : 0;
        if (op_loop_run_once(c->port->loop, now < spin_until ? now : UINT64_MAX) == 0 &&
            now < spin_until)
            sched_yield();
    }
    return st;
}

void op_inc_port_progress(struct op_inc_port *p, uint64_t until)
{
    op_loop_run_once(p->loop, until);
}

op_status_t op_inc_client_status(struct op_inc_client *c) { return status_locked(c); }

void op_inc_client_free(struct op_inc_client *c)
{
    if (c == NULL)
        return;
    struct op_inc_port *p = c->port;
    pthread_mutex_lock(&p->lock);
    op_loop_remove(p->loop, c);
    op_inc_eng_destroy(c->eng);
    pthread_mutex_unlock(&p->lock);
    if (c->owns_port)
        op_inc_port_close(p);
    free(c);
}

op_status_t op_inc_join_on(struct op_inc_port *p, const struct op_inc_config *cfg,
                           struct op_inc_client **out, uint8_t *reason)
{
    struct op_inc_client *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return OP_ERR_NOMEM;
    c->port = p;
    c->cfg = *cfg;
    op_status_t st = op_inc_eng_create(cfg, &c->eng);
    if (st != OP_OK) {
        free(c);
        return st;
    }
    pthread_mutex_lock(&p->lock);
    op_status_t added = op_loop_add(p->loop, &client_ops, c);
    if (added == OP_OK) {
        st = op_inc_eng_join(c->eng, op_now_ns(), op_loop_txq(p->loop));
        op_loop_flush(p->loop);
    }
    pthread_mutex_unlock(&p->lock);
    if (added != OP_OK) {
        op_inc_eng_destroy(c->eng);
        free(c);
        return added;
    }
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

op_status_t op_inc_join(const struct op_inc_config *cfg, struct op_inc_client **out,
                        uint8_t *reason)
{
    struct op_inc_port *p;
    op_status_t st = op_inc_port_open(cfg->ip, cfg->port, cfg->udp_batching, &p);
    if (st != OP_OK)
        return st;
    st = op_inc_join_on(p, cfg, out, reason);
    if (st != OP_OK) {
        op_inc_port_close(p);
        return st;
    }
    (*out)->owns_port = true;
    return OP_OK;
}

op_status_t op_inc_allreduce_start(struct op_inc_client *c, const void *sendbuf, void *recvbuf,
                                   size_t count, unsigned type, unsigned op)
{
    struct op_txq *q = queue_of(c->port);
    return sent(c->port, op_inc_eng_allreduce(c->eng, sendbuf, recvbuf, count, type, op,
                                              op_now_ns(), q));
}

op_status_t op_inc_allreduce(struct op_inc_client *c, const void *sendbuf, void *recvbuf,
                             size_t count, unsigned type, unsigned op)
{
    op_status_t st = op_inc_allreduce_start(c, sendbuf, recvbuf, count, type, op);
    return st == OP_OK ? run(c) : st;
}

op_status_t op_inc_resume_start(struct op_inc_client *c)
{
    struct op_txq *q = queue_of(c->port);
    return sent(c->port, op_inc_eng_resume(c->eng, op_now_ns(), q));
}

op_status_t op_inc_resume(struct op_inc_client *c)
{
    op_status_t st = op_inc_resume_start(c);
    return st == OP_OK ? run(c) : st;
}

void op_inc_client_settled(struct op_inc_client *c)
{
    pthread_mutex_lock(&c->port->lock);
    op_inc_eng_settled(c->eng);
    pthread_mutex_unlock(&c->port->lock);
}

void op_inc_client_watch(struct op_inc_client *c, atomic_bool *cancel) { c->cancel = cancel; }

op_status_t op_inc_leave(struct op_inc_client *c)
{
    struct op_txq *q = queue_of(c->port);
    op_status_t st = sent(c->port, op_inc_eng_leave(c->eng, op_now_ns(), q));
    return st == OP_OK ? run(c) : st;
}

struct op_inc_eng *op_inc_client_engine(struct op_inc_client *c) { return c->eng; }
