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
#include <stdlib.h>

#include "offpath/inc.h"

#define PORT_MAX_CLIENTS 256

struct op_inc_port {
    struct op_io *io;
    struct op_pktbuf rx, tx;
    struct op_txq q;
    struct op_inc_client *clients[PORT_MAX_CLIENTS];
    int n_clients;
    pthread_mutex_t lock;
};

struct op_inc_client {
    struct op_inc_port *port;
    bool owns_port;
    struct op_inc_config cfg;
    struct op_inc_eng *eng;
    atomic_bool *cancel; /* op_inc_client_watch */
};

static void flush(void *ctx, struct op_txq *q)
{
    struct op_inc_port *p = ctx;
    if (q->n > 0)
        op_io_send(p->io, q->pkts, q->n);
    q->n = 0;
}

op_status_t op_inc_port_open(uint32_t ip, uint16_t udp_port, bool udp_batching,
                             struct op_inc_port **out)
{
    struct op_inc_port *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return OP_ERR_NOMEM;
    pthread_mutex_init(&p->lock, NULL);
    op_status_t st = op_pktbuf_init(&p->rx, OP_IO_BURST);
    if (st == OP_OK)
        st = op_pktbuf_init(&p->tx, OP_IO_BURST);
    if (st == OP_OK)
        st = op_io_udp_open(ip, udp_port, &p->io);
    if (st == OP_OK)
        op_io_udp_batching(p->io, udp_batching);
    if (st != OP_OK) {
        op_inc_port_close(p);
        return st;
    }
    p->q = (struct op_txq){.pkts = p->tx.pkts, .cap = p->tx.n, .flush = flush, .ctx = p};
    *out = p;
    return OP_OK;
}

void op_inc_port_close(struct op_inc_port *p)
{
    if (p == NULL)
        return;
    pthread_mutex_destroy(&p->lock);
    op_io_close(p->io);
    op_pktbuf_free(&p->rx);
    op_pktbuf_free(&p->tx);
    free(p);
}

/* Does a control message name this client's communicator? */
static bool names_comm(const struct op_inc_ctrl *c, const struct op_inc_client *cl)
{
    return c->job_id == cl->cfg.job_id && c->true_comm_id == cl->cfg.comm_id &&
           c->c_id == cl->cfg.c_id;
}

/* The engine a packet is for: data and kills by group id and token, the
 * join's control messages by the communicator they name. */
static struct op_inc_eng *owner(const struct op_inc_port *p, const struct op_pkt *pkt)
{
    struct op_inc_pkt ip;
    if (p->n_clients == 1)
        return p->clients[0]->eng;
    if (op_inc_decode(pkt->data, pkt->len, &ip) != OP_OK)
        return NULL;
    bool ctrl = ip.hdr.kind == OP_INC_KIND_CTRL;
    bool by_key = ctrl && ip.hdr.group_id == 0;
    for (int i = 0; i < p->n_clients; i++) {
        const struct op_inc_client *cl = p->clients[i];
        const struct op_inc_caps *caps = op_inc_eng_caps(cl->eng);
        if (by_key ? names_comm(&ip.ctrl, cl)
                   : ip.hdr.group_id == caps->group_id && ip.hdr.token == caps->token)
            return cl->eng;
        /* a notify carries the new group id: match it by communicator too */
        if (!by_key && ctrl && caps->group_id == 0 && names_comm(&ip.ctrl, cl))
            return cl->eng;
    }
    return NULL;
}

static void receive(struct op_inc_port *p)
{
    int n;
    while ((n = op_io_recv(p->io, p->rx.pkts, p->rx.n)) > 0) {
        uint64_t now = op_now_ns();
        for (int i = 0; i < n; i++) {
            struct op_inc_eng *e = owner(p, &p->rx.pkts[i]);
            if (e != NULL)
                op_inc_eng_input(e, &p->rx.pkts[i], now, &p->q);
        }
        flush(p, &p->q);
        if (n < p->rx.n)
            break;
    }
}

/* Every engine's timers, not only the caller's: another thread's operation
 * may be waiting on this port too. */
static void fire_timers(struct op_inc_port *p, uint64_t now)
{
    for (int i = 0; i < p->n_clients; i++) {
        struct op_inc_client *c = p->clients[i];
        if (c->cancel != NULL && atomic_load(c->cancel) && op_inc_eng_cancel(c->eng))
            atomic_store(c->cancel, false); /* an allreduce stopped; else it waits for one */
        op_inc_eng_timer(c->eng, now, &p->q);
    }
    flush(p, &p->q);
}

static uint64_t next_timer(const struct op_inc_port *p, uint64_t until)
{
    for (int i = 0; i < p->n_clients; i++) {
        const struct op_inc_eng *e = p->clients[i]->eng;
        uint64_t t = op_inc_eng_next_timer(e);
        if (op_inc_eng_status(e) == OP_INPROGRESS && t < until)
            until = t;
    }
    return until;
}

/* One round: wait (unlocked) for a packet or the first timer due before
 * `until`, then hand packets and expired timers to their engines. */
static void progress(struct op_inc_port *p, uint64_t until)
{
    pthread_mutex_lock(&p->lock);
    flush(p, &p->q);
    uint64_t deadline = next_timer(p, until);
    pthread_mutex_unlock(&p->lock);
    op_io_wait(p->io, deadline);
    pthread_mutex_lock(&p->lock);
    receive(p);
    fire_timers(p, op_now_ns());
    pthread_mutex_unlock(&p->lock);
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
    while ((st = status_locked(c)) == OP_INPROGRESS)
        progress(c->port, UINT64_MAX);
    return st;
}

void op_inc_port_progress(struct op_inc_port *p, uint64_t until) { progress(p, until); }

op_status_t op_inc_client_status(struct op_inc_client *c) { return status_locked(c); }

void op_inc_client_free(struct op_inc_client *c)
{
    if (c == NULL)
        return;
    struct op_inc_port *p = c->port;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->n_clients; i++)
        if (p->clients[i] == c)
            p->clients[i] = p->clients[--p->n_clients];
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
    if (p->n_clients == PORT_MAX_CLIENTS) {
        st = OP_ERR_NOSPACE;
    } else {
        p->clients[p->n_clients++] = c;
        st = op_inc_eng_join(c->eng, op_now_ns(), &p->q);
    }
    pthread_mutex_unlock(&p->lock);
    if (st == OP_ERR_NOSPACE) {
        op_inc_eng_destroy(c->eng);
        free(c);
        return st;
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
    pthread_mutex_lock(&c->port->lock);
    op_status_t st = op_inc_eng_allreduce(c->eng, sendbuf, recvbuf, count, type, op,
                                          op_now_ns(), &c->port->q);
    flush(c->port, &c->port->q);
    pthread_mutex_unlock(&c->port->lock);
    return st;
}

op_status_t op_inc_allreduce(struct op_inc_client *c, const void *sendbuf, void *recvbuf,
                             size_t count, unsigned type, unsigned op)
{
    op_status_t st = op_inc_allreduce_start(c, sendbuf, recvbuf, count, type, op);
    return st == OP_OK ? run(c) : st;
}

op_status_t op_inc_resume_start(struct op_inc_client *c)
{
    pthread_mutex_lock(&c->port->lock);
    op_status_t st = op_inc_eng_resume(c->eng, op_now_ns(), &c->port->q);
    flush(c->port, &c->port->q);
    pthread_mutex_unlock(&c->port->lock);
    return st;
}

op_status_t op_inc_resume(struct op_inc_client *c)
{
    op_status_t st = op_inc_resume_start(c);
    return st == OP_OK ? run(c) : st;
}

void op_inc_client_watch(struct op_inc_client *c, atomic_bool *cancel) { c->cancel = cancel; }

op_status_t op_inc_leave(struct op_inc_client *c)
{
    pthread_mutex_lock(&c->port->lock);
    op_status_t st = op_inc_eng_leave(c->eng, op_now_ns(), &c->port->q);
    pthread_mutex_unlock(&c->port->lock);
    return st == OP_OK ? run(c) : st;
}

struct op_inc_eng *op_inc_client_engine(struct op_inc_client *c) { return c->eng; }
