/* The all-to-all daemon (offpath/agent.h): sessions of its clients' ranks.
 * A session's ranks are op_a2a ranks (the same workers as in-process), one
 * thread a client takes its requests and runs its rank's calls, so the
 * daemon serves all its clients at once; the chunks move between daemons
 * only as RDMA writes. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "plumb.h"

struct server {
    struct session *s;
    uint32_t local; /* its rank's place among this daemon's */
    struct op_channel *ch;
    uint8_t *reply; /* OP_AGENT_ID_HDR + ranks * chunk */
    pthread_t thread;
    bool started;
};

struct session {
    struct a2a_daemon *d;
    struct op_agent_a2a_hello first; /* the session's size, from its first client */
    size_t bytes;                 /* ranks * chunk */
    uint32_t greeted;
    uint32_t taking; /* the local rank greet just admitted */
    struct op_a2a *local[OP_AGENT_MAX_CLIENTS];
    struct server srv[OP_AGENT_MAX_CLIENTS]; /* by local rank */
};

struct a2a_daemon {
    const struct op_a2a_daemon_config *cfg;
    struct agent_plumb p;
    _Atomic uint64_t n[OP_A2A_D_COUNT_];
};

static const char *const counter_names[] = {OP_A2A_DAEMON_COUNTERS(OP_COUNTER_NAME)};

const char *op_a2a_daemon_counter_name(unsigned c)
{
    return c < OP_A2A_D_COUNT_ ? counter_names[c] : "?";
}

static void count(struct a2a_daemon *d, enum op_a2a_daemon_counter c)
{
    atomic_fetch_add_explicit(&d->n[c], 1, memory_order_relaxed);
}

/* " name=value ..." of every counter (and their values into out). */
static void counters_text(struct a2a_daemon *d, char *line, size_t cap, uint64_t *out)
{
    uint64_t v[OP_A2A_D_COUNT_];
    d->n[OP_A2A_D_refused] = d->p.refused;
    for (unsigned c = 0; c < OP_A2A_D_COUNT_; c++)
        v[c] = atomic_load(&d->n[c]);
    if (out != NULL)
        memcpy(out, v, sizeof v);
    const struct op_counter_set s = {.names = counter_names, .vals = v, .n = OP_A2A_D_COUNT_};
    op_counter_set_format(&s, OP_COUNTERS_KV, line, cap);
}

/* ---- admission: every client of a session agrees with its first */

static op_status_t session_fits(const struct session *s, const struct op_agent_a2a_hello *h,
                                char *why, size_t why_len)
{
    const struct op_a2a_daemon_config *c = s->d->cfg;
    uint32_t self = s->d->p.self, ranks = c->net.n_daemons * c->net.clients;
    if (h->ranks != ranks)
        snprintf(why, why_len, "ranks: %u there, %u here (%u daemons x %u clients, -c)",
                 h->ranks, ranks, c->net.n_daemons, c->net.clients);
    else if (h->rank / c->net.clients != self)
        snprintf(why, why_len, "rank %u belongs to daemon %u; this is daemon %u", h->rank,
                 h->rank / c->net.clients, self);
    else if (s->srv[h->rank - self * c->net.clients].ch != NULL)
        snprintf(why, why_len, "rank %u is already connected", h->rank);
    else if (s->greeted > 0 && h->chunk != s->first.chunk)
        snprintf(why, why_len, "chunk (bytes to each rank): %llu here, %llu there",
                 (unsigned long long)s->first.chunk, (unsigned long long)h->chunk);
    else if (s->greeted > 0 && h->workers != s->first.workers)
        snprintf(why, why_len, "workers (-t): %u here, %u there", s->first.workers, h->workers);
    else
        return OP_OK;
    return OP_ERR_INVAL;
}

static op_status_t greet(void *ctx, const uint8_t *msg, size_t len, uint8_t reply[32],
                         size_t *reply_len, char *why, size_t why_len)
{
    struct session *s = ctx;
    const struct op_a2a_daemon_config *c = s->d->cfg;
    struct op_agent_a2a_hello h;
    if (op_agent_a2a_hello_decode(msg, len, &h) != OP_OK ||
        h.chunk > (OP_CHAN_LIMIT_MAX_MSG - OP_AGENT_ID_HDR) / h.ranks) {
        snprintf(why, why_len, "malformed all-to-all greeting (%zu bytes)", len);
        return OP_ERR_MALFORMED;
    }
    op_status_t st = session_fits(s, &h, why, why_len);
    if (st != OP_OK)
        return st;
    if (s->greeted++ == 0)
        s->first = h;
    struct op_agent_welcome w = {.rank = h.rank, .clients = h.ranks, .daemons = c->net.n_daemons,
                              .per_daemon = c->net.clients};
    *reply_len = op_agent_welcome_encode(&w, reply);
    s->taking = h.rank - s->d->p.self * c->net.clients;
    return OP_OK;
}

static op_status_t admit(struct session *s)
{
    for (uint32_t k = 0; k < s->d->cfg->net.clients; k++) {
        struct op_channel *ch = NULL;
        s->d->p.idle = k == 0; /* between sessions */
        op_status_t st = agent_plumb_accept(&s->d->p, greet, s, &ch);
        if (ch != NULL)
            s->srv[s->taking] = (struct server){.s = s, .local = s->taking, .ch = ch};
        if (st != OP_OK)
            return st;
    }
    return OP_OK;
}

/* ---- a client's calls */

/* The client is told why its call failed, then the channel closes. */
static void fail(struct server *v, const char *fmt, const char *what)
{
    char why[200];
    snprintf(why, sizeof why, fmt, what);
    struct a2a_daemon *d = v->s->d;
    OP_ERROR(d->cfg->net.log, "rank %u: %s", d->p.self * d->cfg->net.clients + v->local, why);
    agent_refuse(v->ch, why);
    v->ch = NULL;
}

/* One request: the send buffer in, the all-to-all, the receive buffer out.
 * false when the session ends for this client (goodbye or failure). */
static bool one_call(struct server *v)
{
    struct session *s = v->s;
    struct a2a_daemon *d = s->d;
    struct op_a2a *a = s->local[v->local];
    const uint8_t *msg, *data;
    size_t len;
    uint64_t id;
    op_status_t st = op_channel_recv(v->ch, &msg, &len);
    if (st != OP_OK) {
        count(d, OP_A2A_D_clients_gone);
        OP_ERROR(d->cfg->net.log, "rank %u: client gone (%s): its rank's resources freed",
                 d->p.self * d->cfg->net.clients + v->local, op_channel_error(v->ch));
        return false;
    }
    if (len == 1 && msg[0] == OP_AGENT_MSG_BYE)
        return false;
    if (op_agent_id_decode(msg, len, OP_AGENT_MSG_VECTOR, s->bytes, &id, &data) != OP_OK) {
        count(d, OP_A2A_D_malformed);
        fail(v, "request refused: %s", "malformed, or not ranks * chunk bytes of this session");
        return false;
    }
    memcpy(op_a2a_sendbuf(a), data, s->bytes);
    st = op_a2a_run(a, op_now_ns() + d->cfg->net.timeout_ns);
    if (st != OP_OK) {
        count(d, OP_A2A_D_failed_calls);
        fail(v, "all-to-all between the daemons failed: %s", op_status_str(st));
        return false;
    }
    op_agent_id_encode(OP_AGENT_MSG_RESULT, id, v->reply);
    memcpy(v->reply + OP_AGENT_ID_HDR, op_a2a_recvbuf(a), s->bytes);
    if (op_channel_send(v->ch, v->reply, OP_AGENT_ID_HDR + s->bytes, 0) != OP_OK) {
        count(d, OP_A2A_D_clients_gone);
        return false;
    }
    count(d, OP_A2A_D_calls);
    return true;
}

static void *serve(void *arg)
{
    struct server *v = arg;
    while (one_call(v)) /* bounded: each call waits at most the timeout */
        continue;
    return NULL;
}

/* ---- a session */

static op_status_t open_ranks(struct session *s)
{
    const struct op_a2a_daemon_config *c = s->d->cfg;
    for (uint32_t i = 0; i < c->net.clients; i++) {
        struct op_a2a_config ac = {.ranks = s->first.ranks,
                                   .rank = s->d->p.self * c->net.clients + i,
                                   .workers = s->first.workers, .ip = c->net.ip,
                                   .chunk = s->first.chunk, .log = c->net.log};
        op_status_t st = op_a2a_create(&ac, &s->local[i]);
        if (st == OP_OK)
            st = (s->srv[i].reply = malloc(OP_AGENT_ID_HDR + s->bytes)) ? OP_OK : OP_ERR_NOMEM;
        if (st != OP_OK)
            return st;
    }
    return agent_plumb_link(&s->d->p, s->local, c->net.clients);
}

static void start_servers(struct session *s)
{
    for (uint32_t i = 0; i < s->d->cfg->net.clients; i++) {
        struct server *v = &s->srv[i];
        v->started = pthread_create(&v->thread, NULL, serve, v) == 0;
        if (!v->started)
            fail(v, "%s", "the daemon cannot start a thread for this client");
    }
}

static void end_session(struct session *s)
{
    for (uint32_t i = 0; i < OP_AGENT_MAX_CLIENTS; i++) {
        struct server *v = &s->srv[i];
        if (v->started)
            pthread_join(v->thread, NULL);
        op_channel_close(v->ch);
        free(v->reply);
        op_a2a_destroy(s->local[i]);
    }
}

/* A session to its end: its clients admitted, their ranks linked with the
 * other daemons', their calls served. A failure ends only the session. */
static void session(struct a2a_daemon *d)
{
    struct session *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return;
    s->d = d;
    op_status_t st = admit(s);
    if (st != OP_OK && s->greeted == 0) { /* idle: nobody came within the timeout */
        free(s);
        return;
    }
    s->bytes = (size_t)s->first.ranks * s->first.chunk;
    if (st == OP_OK)
        st = open_ranks(s);
    if (st == OP_OK) {
        start_servers(s);
    } else {
        OP_ERROR(d->cfg->net.log, "session: %s", op_status_str(st));
        for (uint32_t i = 0; i < d->cfg->net.clients; i++)
            if (s->srv[i].ch != NULL)
                fail(&s->srv[i], "the daemon cannot set up this session: %s",
                     op_status_str(st));
    }
    end_session(s);
    count(d, OP_A2A_D_sessions);
    char line[512];
    counters_text(d, line, sizeof line, NULL);
    OP_INFO(d->cfg->net.log, "daemon %u: session of %u ranks (%llu bytes to each, %u workers a "
            "rank) ended; counters:%s", d->p.self, s->first.ranks,
            (unsigned long long)s->first.chunk, s->first.workers, line);
    free(s);
}

op_status_t op_a2a_daemon_run(const struct op_a2a_daemon_config *cfg, uint64_t *counters)
{
    if (cfg->net.clients == 0 || cfg->net.clients > OP_AGENT_MAX_CLIENTS || cfg->net.n_daemons == 0 ||
        cfg->net.n_daemons > OP_AGENT_MAX_DAEMONS)
        return OP_ERR_INVAL;
    struct a2a_daemon *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return OP_ERR_NOMEM;
    d->cfg = cfg;
    d->p = (struct agent_plumb){.net = &cfg->net, .max_msg = OP_CHAN_LIMIT_MAX_MSG};
    op_status_t st = agent_plumb_open(&d->p);
    if (st == OP_OK)
        OP_INFO(cfg->net.log, "daemon %u of %u: serving all-to-all sessions of %u clients",
                d->p.self, cfg->net.n_daemons, cfg->net.clients);
    for (uint64_t k = 0; st == OP_OK && (cfg->sessions == 0 || k < cfg->sessions); k++)
        session(d);
    char line[512];
    counters_text(d, line, sizeof line, counters);
    OP_INFO(cfg->net.log, "daemon %u: counters:%s", d->p.self, line);
    agent_plumb_close(&d->p);
    free(d);
    return st;
}
