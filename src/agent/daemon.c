/* The allreduce daemon (offpath/agent.h): its clients over the secure
 * channel, the other daemons over RDMA (op_a2a), the reduction by the pure
 * engine (op_ar). One thread a client reads its vectors into a queue; the
 * main thread feeds the engine, exchanges each partial with the other
 * daemons and sends the results back. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plumb.h"

struct item {
    uint32_t client;
    /* VECTOR, BYE, REFUSED: a malformed request (refused), or 0: the
     * client is gone (why logged) */
    enum op_agent_msg type;
    uint64_t id;
    uint8_t *data;
    struct item *next;
};

struct daemon;

struct reader {
    struct daemon *d;
    uint32_t client;
    struct op_channel *ch;
    pthread_t thread;
    bool started;
};

struct daemon {
    const struct op_agent_daemon_config *cfg;
    size_t bytes; /* a vector's */
    struct op_a2a *a2a; /* NULL with one daemon */
    struct op_ar *ar;
    struct reader r[OP_AGENT_MAX_CLIENTS];
    uint32_t n_readers;
    pthread_mutex_t mu;
    pthread_cond_t more;
    struct item *head, *tail;
    struct agent_plumb p;
    bool partial_ready;
    uint64_t partial_id;
    op_status_t send_st;
    uint64_t malformed, gone; /* requests refused, clients that vanished */
};

/* ---- the queue the readers fill */

static void push(struct daemon *d, struct item *it)
{
    pthread_mutex_lock(&d->mu);
    if (d->tail != NULL)
        d->tail->next = it;
    else
        d->head = it;
    d->tail = it;
    pthread_cond_signal(&d->more);
    pthread_mutex_unlock(&d->mu);
}

static struct item *pop(struct daemon *d, uint64_t deadline)
{
    struct timespec ts = agent_abstime(deadline);
    pthread_mutex_lock(&d->mu);
    while (d->head == NULL)
        if (pthread_cond_timedwait(&d->more, &d->mu, &ts) != 0)
            break;
    struct item *it = d->head;
    if (it != NULL && (d->head = it->next) == NULL)
        d->tail = NULL;
    pthread_mutex_unlock(&d->mu);
    return it;
}

static void *read_client(void *arg)
{
    struct reader *r = arg;
    struct daemon *d = r->d;
    for (;;) {
        const uint8_t *msg;
        size_t len;
        struct item *it = calloc(1, sizeof(*it));
        op_status_t st = it != NULL ? op_channel_recv(r->ch, &msg, &len) : OP_ERR_NOMEM;
        const uint8_t *data;
        if (st == OP_OK && len == 1 && msg[0] == OP_AGENT_MSG_BYE) {
            it->type = OP_AGENT_MSG_BYE;
        } else if (st == OP_OK &&
                   op_agent_id_decode(msg, len, OP_AGENT_MSG_VECTOR, d->bytes, &it->id, &data) ==
                       OP_OK &&
                   (it->data = malloc(d->bytes)) != NULL) {
            it->type = OP_AGENT_MSG_VECTOR;
            memcpy(it->data, data, d->bytes);
        } else if (it != NULL && st == OP_OK) {
            it->type = OP_AGENT_MSG_REFUSED;
        } else if (it != NULL) {
            OP_ERROR(d->cfg->net.log, "client %u: gone (%s)", r->client, op_channel_error(r->ch));
        }
        if (it == NULL)
            return NULL;
        it->client = r->client;
        enum op_agent_msg type = it->type;
        push(d, it);
        if (type != OP_AGENT_MSG_VECTOR)
            return NULL;
    }
}

static op_status_t end_job(struct daemon *d, uint32_t client, bool malformed);
static void tell_clients(struct daemon *d, const char *why, uint32_t gone);

/* ---- the engine's output */

static void send_all(struct daemon *d, uint64_t id, const void *data)
{
    uint8_t *msg = malloc(OP_AGENT_ID_HDR + d->bytes);
    if (msg == NULL) {
        d->send_st = OP_ERR_NOMEM;
        return;
    }
    op_agent_id_encode(OP_AGENT_MSG_RESULT, id, msg);
    memcpy(msg + OP_AGENT_ID_HDR, data, d->bytes);
    for (uint32_t c = 0; c < d->n_readers; c++) {
        op_status_t st = op_channel_send(d->r[c].ch, msg, OP_AGENT_ID_HDR + d->bytes, 0);
        if (st != OP_OK && d->send_st == OP_OK) {
            OP_ERROR(d->cfg->net.log, "client %u: sending result %llu: %s", c,
                     (unsigned long long)id, op_channel_error(d->r[c].ch));
            d->send_st = end_job(d, c, false);
        }
    }
    free(msg);
}

static void on_output(void *ctx, const struct op_ar_out *o)
{
    struct daemon *d = ctx;
    if (o->kind == OP_AR_RESULT) {
        send_all(d, o->id, o->data);
        return;
    }
    /* the exchange runs after op_ar_client returns: not inside the engine */
    uint8_t *send = op_a2a_sendbuf(d->a2a);
    for (uint32_t j = 0; j < d->cfg->net.n_daemons; j++)
        memcpy(send + j * d->bytes, o->data, d->bytes);
    d->partial_ready = true;
    d->partial_id = o->id;
}

/* Every daemon's partial of the operation, by RDMA write, into the engine. */
static op_status_t exchange(struct daemon *d)
{
    d->partial_ready = false;
    op_status_t st = op_a2a_run(d->a2a, op_now_ns() + d->cfg->net.timeout_ns);
    if (st != OP_OK) {
        char why[128];
        snprintf(why, sizeof why, "operation %llu: exchange with the other daemons: %s",
                 (unsigned long long)d->partial_id, op_status_str(st));
        tell_clients(d, why, UINT32_MAX);
        return st;
    }
    const uint8_t *got = op_a2a_recvbuf(d->a2a);
    for (uint32_t j = 0; j < d->cfg->net.n_daemons && st == OP_OK; j++)
        if (j != d->p.self)
            st = op_ar_peer(d->ar, j, d->partial_id, got + j * d->bytes, d->bytes);
    return st;
}

/* ---- setup */

/* DOCA's handshake; a mismatch refused with the field named. */
static op_status_t greet(void *ctx, const uint8_t *msg, size_t len, uint8_t reply[32],
                         size_t *reply_len, char *why, size_t why_len)
{
    struct daemon *d = ctx;
    const struct op_agent_daemon_config *c = d->cfg;
    char mine[OP_AR_HANDSHAKE_MAX], theirs[OP_AR_HANDSHAKE_MAX];
    if (len < 2 || len > sizeof theirs || msg[0] != OP_AGENT_MSG_HELLO) {
        snprintf(why, why_len, "no handshake (a malformed greeting)");
        return OP_ERR_MALFORMED;
    }
    memcpy(theirs, msg + 1, len - 1);
    theirs[len - 1] = '\0';
    agent_handshake_text(&c->job, mine);
    op_status_t st = op_ar_handshake_check(mine, theirs, why, why_len);
    struct op_agent_welcome w = {.rank = d->p.self * c->net.clients + d->n_readers,
                              .clients = c->net.n_daemons * c->net.clients, .daemons = c->net.n_daemons,
                              .per_daemon = c->net.clients};
    *reply_len = op_agent_welcome_encode(&w, reply);
    return st;
}

static op_status_t link_daemons(struct daemon *d)
{
    const struct op_agent_daemon_config *c = d->cfg;
    struct op_a2a_config ac = {.ranks = c->net.n_daemons, .rank = d->p.self, .workers = 1,
                               .ip = c->net.ip, .chunk = d->bytes, .log = c->net.log};
    op_status_t st = op_a2a_create(&ac, &d->a2a);
    return st == OP_OK ? agent_plumb_link(&d->p, &d->a2a, 1) : st;
}

/* ---- the run */

/* The job cannot finish (every operation needs every client's vector and
 * every daemon's partial): every client still there is told why, rather
 * than left to its timeout. `gone`: a client not to write to (or none:
 * UINT32_MAX). Only this thread sends to clients; their readers end when
 * they hang up. */
static void tell_clients(struct daemon *d, const char *why, uint32_t gone)
{
    OP_ERROR(d->cfg->net.log, "%s: the job cannot finish", why);
    uint8_t msg[256] = {OP_AGENT_MSG_REFUSED};
    int n = snprintf((char *)msg + 1, sizeof msg - 1, "%s: the job cannot finish", why);
    size_t len = 1 + (n < (int)sizeof msg - 1 ? (size_t)n : sizeof msg - 2);
    for (uint32_t c = 0; c < d->n_readers; c++)
        if (c != gone)
            (void)op_channel_send(d->r[c].ch, msg, len, 0);
}

/* A client sent what no client may send (refused: it is told too), or
 * vanished. */
static op_status_t end_job(struct daemon *d, uint32_t client, bool malformed)
{
    char why[160];
    if (malformed)
        d->malformed++;
    else
        d->gone++;
    snprintf(why, sizeof why, "client %u %s", client,
             malformed ? "sent a malformed request (not an operation of -s elements of -d), "
                         "refused"
                       : "is gone");
    tell_clients(d, why, malformed ? UINT32_MAX : client);
    return malformed ? OP_ERR_MALFORMED : OP_ERR_IO;
}

static op_status_t serve(struct daemon *d)
{
    uint32_t byes = 0;
    op_status_t st = OP_OK;
    while (st == OP_OK && byes < d->n_readers) {
        struct item *it = pop(d, op_now_ns() + d->cfg->net.timeout_ns);
        if (it == NULL) {
            OP_ERROR(d->cfg->net.log, "no request from any client for the timeout: giving up");
            return OP_ERR_TIMEOUT;
        }
        if (it->type == OP_AGENT_MSG_BYE)
            byes++;
        else if (it->type == OP_AGENT_MSG_VECTOR)
            st = op_ar_client(d->ar, it->client, it->id, it->data, d->bytes);
        else
            st = end_job(d, it->client, it->type == OP_AGENT_MSG_REFUSED);
        if (st != OP_OK && it->type == OP_AGENT_MSG_VECTOR)
            OP_ERROR(d->cfg->net.log, "client %u: request %llu refused (%s)", it->client,
                     (unsigned long long)it->id, op_status_str(st));
        if (st == OP_OK && d->partial_ready)
            st = exchange(d);
        if (st == OP_OK)
            st = d->send_st;
        free(it->data);
        free(it);
    }
    return st;
}

/* Every counter, whatever the end: the engine's and the daemon's own. */
static void report(const struct daemon *d)
{
    static const char *const own_names[] = {"refused", "malformed", "clients_gone"};
    const uint64_t own_vals[] = {d->p.refused, d->malformed, d->gone};
    const struct op_counter_set own = {.names = own_names, .vals = own_vals, .n = 3};
    char engine[400] = "", mine[160];
    if (d->ar != NULL) {
        const struct op_counter_set s = op_ar_counter_set(d->ar);
        op_counter_set_format(&s, OP_COUNTERS_KV, engine, sizeof engine);
    }
    OP_INFO(d->cfg->net.log, "daemon %u: counters:%s%s", d->p.self, engine,
            op_counter_set_format(&own, OP_COUNTERS_KV, mine, sizeof mine));
}

static void finish(struct daemon *d)
{
    for (uint32_t c = 0; c < d->n_readers; c++) {
        if (d->r[c].started)
            pthread_join(d->r[c].thread, NULL);
        op_channel_close(d->r[c].ch);
    }
    for (struct item *it = d->head, *next; it != NULL; it = next) {
        next = it->next;
        free(it->data);
        free(it);
    }
    op_ar_destroy(d->ar);
    op_a2a_destroy(d->a2a);
    agent_plumb_close(&d->p);
    pthread_cond_destroy(&d->more);
    pthread_mutex_destroy(&d->mu);
}

static op_status_t start_readers(struct daemon *d)
{
    for (uint32_t c = 0; c < d->n_readers; c++) {
        int e = pthread_create(&d->r[c].thread, NULL, read_client, &d->r[c]);
        if (e != 0)
            return op_status_from_errno(e);
        d->r[c].started = true;
    }
    return OP_OK;
}

op_status_t op_agent_daemon_run(const struct op_agent_daemon_config *cfg)
{
    if (!op_agent_job_ok(&cfg->job) || cfg->net.clients == 0 || cfg->net.clients > OP_AGENT_MAX_CLIENTS ||
        cfg->net.n_daemons == 0 || cfg->net.n_daemons > OP_AGENT_MAX_DAEMONS)
        return OP_ERR_INVAL;
    struct daemon *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return OP_ERR_NOMEM;
    d->cfg = cfg;
    d->bytes = cfg->job.size * agent_elem_size(cfg->job.type);
    d->p = (struct agent_plumb){.net = &cfg->net, .max_msg = (uint32_t)(OP_AGENT_ID_HDR + d->bytes)};
    agent_sync_init(&d->mu, &d->more);
    struct op_ar_config ac = {.daemons = cfg->net.n_daemons, .clients = cfg->net.clients,
                              .count = cfg->job.size, .type = op_agent_red_type(cfg->job.type),
                              .op = cfg->job.op,
                              .window = cfg->job.batch < 1024 ? (uint32_t)cfg->job.batch : 1024};
    op_status_t st = agent_plumb_open(&d->p);
    ac.self = d->p.self;
    if (st == OP_OK)
        st = op_ar_create(&ac, on_output, d, &d->ar);
    if (st == OP_OK && cfg->net.n_daemons > 1)
        st = link_daemons(d);
    if (st == OP_OK)
        OP_INFO(cfg->net.log, "daemon %u of %u: waiting for %u clients", d->p.self, cfg->net.n_daemons,
                cfg->net.clients);
    for (uint32_t k = 0; st == OP_OK && k < cfg->net.clients; k++) {
        struct op_channel *ch = NULL;
        st = agent_plumb_accept(&d->p, greet, d, &ch);
        if (ch != NULL)
            d->r[d->n_readers++] = (struct reader){.d = d, .client = k, .ch = ch};
    }
    if (st == OP_OK)
        st = start_readers(d);
    if (st == OP_OK)
        st = serve(d);
    if (st == OP_OK) {
        const uint64_t *n = op_ar_counters(d->ar);
        OP_INFO(cfg->net.log, "daemon %u: %llu operations reduced for %u clients", d->p.self,
                (unsigned long long)n[OP_AR_C_results], cfg->net.clients);
    }
    report(d);
    finish(d);
    free(d);
    return st;
}
