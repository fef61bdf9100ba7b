/* An allreduce client (offpath/agent.h), DOCA's measurement: a barrier, 3
 * warm-up batches for the pure network time, a matrix-multiply loop sized
 * to it, then per batch: submit -> compute -> wait. Offloaded: the vectors
 * go to the daemon and a receiving thread takes the results as they come
 * (the host computes meanwhile). Non-offloaded (the mesh, client_mesh.c):
 * every vector goes to every other client, a thread a peer takes theirs,
 * and the wait reduces them on the host, in rank order. Every result is
 * checked against the reference after its batch. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_internal.h"
#include "offpath/reduce.h"

#define WARMUP_BATCHES 3

/* The result every client must get for operation id: each daemon's
 * clients folded in order, then the daemons' partials in order. */
static void reference(struct client *cl, uint64_t id)
{
    const struct op_agent_job *job = &cl->cfg->job;
    unsigned type = op_agent_red_type(job->type);
    for (uint32_t d = 0; d < cl->w.daemons; d++) {
        uint8_t *partial = d == 0 ? cl->ref : cl->tmp;
        agent_fill(job, d * cl->w.per_daemon, id, partial);
        for (uint32_t k = 1; k < cl->w.per_daemon; k++) {
            agent_fill(job, d * cl->w.per_daemon + k, id, cl->vec);
            op_reduce(job->op, type, partial, cl->vec, job->size);
        }
        if (d > 0)
            op_reduce(job->op, type, cl->ref, cl->tmp, job->size);
    }
}

static uint64_t differing(const struct client *cl, const uint8_t *got)
{
    size_t e = agent_elem_size(cl->cfg->job.type);
    uint64_t n = 0;
    for (uint64_t i = 0; i < cl->cfg->job.size; i++)
        n += memcmp(got + i * e, cl->ref + i * e, e) != 0;
    return n;
}

static void *receive(void *arg)
{
    struct client *cl = arg;
    for (;;) {
        pthread_mutex_lock(&cl->mu);
        bool done = cl->results >= cl->expected;
        pthread_mutex_unlock(&cl->mu);
        if (done)
            return NULL;
        const uint8_t *msg, *data;
        size_t len;
        uint64_t id;
        op_status_t st = op_channel_recv(cl->ch, &msg, &len);
        if (st == OP_OK && len >= 1 && msg[0] == OP_AGENT_MSG_REFUSED) {
            OP_ERROR(cl->cfg->log, "the daemon ended the job: %.*s", (int)(len - 1), msg + 1);
            st = OP_ERR_REFUSED;
        } else if (st == OP_OK && op_agent_id_decode(msg, len, OP_AGENT_MSG_RESULT, cl->bytes, &id,
                                                     &data) != OP_OK) {
            st = OP_ERR_MALFORMED;
        }
        uint64_t slot = st == OP_OK ? id % cl->cfg->job.batch : 0;
        if (st == OP_OK) {
            memcpy(cl->in + slot * cl->bytes, data, cl->bytes);
            cl->in_id[slot] = id;
        }
        pthread_mutex_lock(&cl->mu);
        cl->rx_st = st;
        cl->results += st == OP_OK;
        pthread_cond_signal(&cl->got);
        pthread_mutex_unlock(&cl->mu);
        if (st != OP_OK)
            return NULL;
    }
}

/* Until `count` results are in (or the receiver failed, or the timeout). */
static op_status_t wait_results(struct client *cl, uint64_t count)
{
    struct timespec ts = agent_abstime(op_now_ns() + cl->cfg->timeout_ns);
    op_status_t st = OP_OK;
    pthread_mutex_lock(&cl->mu);
    /* offloaded: the batch sent too (its requests' buffers are free) */
    while ((cl->cfg->mesh ? !mesh_all_in(cl, count)
                          : cl->results < count || cl->tx_done < cl->tx_gen) &&
           cl->rx_st == OP_OK && cl->tx_st == OP_OK && st == OP_OK)
        if (pthread_cond_timedwait(&cl->got, &cl->mu, &ts) != 0)
            st = OP_ERR_TIMEOUT;
    if (st == OP_OK)
        st = cl->rx_st != OP_OK ? cl->rx_st : cl->tx_st;
    pthread_mutex_unlock(&cl->mu);
    return st;
}

static void prepare(struct client *cl, uint64_t first, uint64_t n)
{
    for (uint64_t k = 0; k < n; k++) {
        uint8_t *msg = cl->out + k * (OP_AGENT_ID_HDR + cl->bytes);
        op_agent_id_encode(OP_AGENT_MSG_VECTOR, first + k, msg);
        agent_fill(&cl->cfg->job, cl->w.rank, first + k, msg + OP_AGENT_ID_HDR);
    }
}

op_status_t client_send_batch(struct client *cl, struct op_channel *ch, uint64_t n)
{
    op_status_t st = OP_OK;
    for (uint64_t k = 0; st == OP_OK && k < n; k++)
        st = op_channel_send(ch, cl->out + k * (OP_AGENT_ID_HDR + cl->bytes),
                             OP_AGENT_ID_HDR + cl->bytes, k + 1 < n ? OP_CHAN_MORE : 0);
    return st;
}

static void *send_main(void *arg)
{
    struct client *cl = arg;
    pthread_mutex_lock(&cl->mu);
    for (;;) {
        while (cl->tx_gen == cl->tx_done && !cl->tx_quit)
            pthread_cond_wait(&cl->tx, &cl->mu);
        if (cl->tx_quit)
            break;
        uint64_t n = cl->tx_n;
        pthread_mutex_unlock(&cl->mu);
        op_status_t st = client_send_batch(cl, cl->ch, n);
        pthread_mutex_lock(&cl->mu);
        cl->tx_st = cl->tx_st == OP_OK ? st : cl->tx_st;
        cl->tx_done++;
        pthread_cond_signal(&cl->got);
    }
    pthread_mutex_unlock(&cl->mu);
    return NULL;
}

/* To the daemon (a hand-off to the sending thread: the call returns at
 * once), or (mesh) to every other client, the host's own work. */
static op_status_t submit(struct client *cl, uint64_t n)
{
    if (!cl->cfg->mesh) {
        pthread_mutex_lock(&cl->mu);
        cl->tx_n = n;
        cl->tx_gen++;
        pthread_cond_signal(&cl->tx);
        pthread_mutex_unlock(&cl->mu);
        return OP_OK;
    }
    return mesh_submit(cl, n);
}

/* Every result of the batch first .. first + n - 1 against the reference. */
static void check(struct client *cl, uint64_t first, uint64_t n)
{
    for (uint64_t id = first; id < first + n; id++) {
        uint64_t slot = id % cl->cfg->job.batch;
        reference(cl, id);
        cl->wrong += cl->in_id[slot] == id ? differing(cl, cl->in + slot * cl->bytes)
                                           : cl->cfg->job.size;
    }
}

static void compute(struct client *cl, uint64_t reps)
{
    for (uint64_t r = 0; r < reps; r++)
        for (int i = 0; i < MM_N; i++)
            for (int j = 0; j < MM_N; j++) {
                double s = 0;
                for (int k = 0; k < MM_N; k++)
                    s += cl->a[i * MM_N + k] * cl->b[k * MM_N + j];
                cl->c[i * MM_N + j] = s;
            }
}

static double seconds_since(uint64_t t0) { return (double)(op_now_ns() - t0) / 1e9; }

/* A batch: its operations submitted, `reps` of compute, its results
 * awaited; where its time went in cl->part (submit, compute, wait). */
static op_status_t batch_of(struct client *cl, uint64_t *next_id, uint64_t n, uint64_t reps,
                            double *secs)
{
    uint64_t first = *next_id;
    prepare(cl, first, n);
    uint64_t t0 = op_now_ns();
    op_status_t st = submit(cl, n);
    uint64_t t1 = op_now_ns();
    *next_id += n;
    compute(cl, reps);
    uint64_t t2 = op_now_ns();
    if (st == OP_OK)
        st = wait_results(cl, *next_id);
    if (st == OP_OK && cl->cfg->mesh)
        mesh_reduce(cl, first, n); /* the host's own work: timed */
    *secs = seconds_since(t0);
    cl->part[0] = (double)(t1 - t0) / 1e9;
    cl->part[1] = (double)(t2 - t1) / 1e9;
    cl->part[2] = *secs - cl->part[0] - cl->part[1];
    if (st == OP_OK)
        check(cl, first, n);
    return st;
}

static op_status_t batch(struct client *cl, uint64_t *next_id, uint64_t reps, double *secs)
{
    return batch_of(cl, next_id, cl->cfg->job.batch, reps, secs);
}

/* The least of three runs of `reps` products (what computing costs, not
 * what a neighbour's burst added). */
static double compute_time(struct client *cl, uint64_t reps)
{
    double least = 0;
    for (int k = 0; k < 3; k++) {
        uint64_t t0 = op_now_ns();
        compute(cl, reps);
        double c = seconds_since(t0);
        least = k == 0 || c < least ? c : least;
    }
    return least;
}

static uint64_t reps_for(double seconds, double one)
{
    uint64_t r = one > 0 ? (uint64_t)llround(seconds / one) : 1;
    return r > 0 ? r : 1;
}

/* Warm-up batches with no compute give the pure network time (their
 * median: one batch slowed by another process would skew a mean); the
 * compute loop is sized to it, as DOCA's is: from one product's cost (the
 * least of 5 tries of 4), then once more from the whole loop's time (a
 * long loop does not run at a short one's rate), since DOCA's formula
 * caps the overlap at min / max of the two when they differ. */
static op_status_t calibrate(struct client *cl, uint64_t *next_id, double *network,
                             uint64_t *reps, double *compute_s)
{
    double s[WARMUP_BATCHES];
    op_status_t st = OP_OK;
    for (int k = 0; k < WARMUP_BATCHES && st == OP_OK; k++)
        st = batch(cl, next_id, 0, &s[k]);
    for (int i = 1; i < WARMUP_BATCHES; i++) /* a sort of three */
        for (int j = i; j > 0 && s[j] < s[j - 1]; j--) {
            double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    *network = s[WARMUP_BATCHES / 2];
    double one = 0;
    for (int k = 0; k < 5; k++) {
        uint64_t t0 = op_now_ns();
        compute(cl, 4);
        double t = seconds_since(t0) / 4;
        one = k == 0 || t < one ? t : one;
    }
    *reps = reps_for(*network, one);
    *compute_s = compute_time(cl, *reps);
    *reps = reps_for(*network, *compute_s / (double)*reps);
    *compute_s = compute_time(cl, *reps);
    return st;
}

static op_status_t hello(struct client *cl)
{
    uint8_t msg[1 + OP_AR_HANDSHAKE_MAX];
    msg[0] = OP_AGENT_MSG_HELLO;
    agent_handshake_text(&cl->cfg->job, (char *)msg + 1);
    op_status_t st = op_channel_send(cl->ch, msg, 1 + strlen((char *)msg + 1), 0);
    const uint8_t *reply;
    size_t len;
    if (st == OP_OK)
        st = op_channel_recv(cl->ch, &reply, &len);
    if (st != OP_OK) {
        OP_ERROR(cl->cfg->log, "no answer to the configuration handshake: %s",
                 op_channel_error(cl->ch));
        return st;
    }
    if (len >= 1 && reply[0] == OP_AGENT_MSG_REFUSED) {
        OP_ERROR(cl->cfg->log, "the daemon refused this client: %.*s", (int)(len - 1), reply + 1);
        return OP_ERR_REFUSED;
    }
    if (op_agent_welcome_decode(reply, len, &cl->w) != OP_OK) {
        OP_ERROR(cl->cfg->log, "malformed answer to the configuration handshake");
        return OP_ERR_MALFORMED;
    }
    return OP_OK;
}

static void overlap(struct op_agent_client_result *r)
{
    double most = r->network_s > r->compute_s ? r->network_s : r->compute_s;
    double x = most > 0 ? (r->network_s + r->compute_s - r->batch_avg_s) / most : 0;
    r->overlap_pct = 100 * (x < 0 ? 0 : x > 1 ? 1 : x);
}

static op_status_t measure(struct client *cl, struct op_agent_client_result *r)
{
    uint64_t next = 0, reps;
    double s;
    op_status_t st = batch_of(cl, &next, 1, 0, &s); /* the barrier: every client's first call */
    if (st == OP_OK)
        st = calibrate(cl, &next, &r->network_s, &reps, &r->compute_s);
    for (uint64_t k = 0; k < cl->cfg->job.batches && st == OP_OK; k++) {
        st = batch(cl, &next, reps, &s);
        r->submit_s += cl->part[0] / (double)cl->cfg->job.batches;
        r->compute_in_batch_s += cl->part[1] / (double)cl->cfg->job.batches;
        r->wait_s += cl->part[2] / (double)cl->cfg->job.batches;
        r->batch_min_s = k == 0 || s < r->batch_min_s ? s : r->batch_min_s;
        r->batch_max_s = s > r->batch_max_s ? s : r->batch_max_s;
        r->total_s += s;
    }
    r->batch_avg_s = r->total_s / (double)cl->cfg->job.batches;
    overlap(r);
    return st;
}

static op_status_t open_client(struct client *cl)
{
    const struct op_agent_client_config *c = cl->cfg;
    struct op_channel_config cc = {.addr = c->daemon, .local = c->key, .timeout_ns = c->timeout_ns};
    memcpy(cc.peer_pub, c->peer_pub, OP_CHAN_KEY_BYTES);
    cc.max_msg = (uint32_t)(OP_AGENT_ID_HDR + cl->bytes < 4096 ? 4096 : OP_AGENT_ID_HDR + cl->bytes);
    char why[256];
    op_status_t st = op_channel_open(&cc, &cl->ch, why);
    if (st != OP_OK)
        OP_ERROR(c->log, "cannot reach the daemon: %s", why);
    return st;
}

static void init_sync(struct client *cl)
{
    agent_sync_init(&cl->mu, &cl->got);
    pthread_cond_init(&cl->tx, NULL);
    for (int i = 0; i < MM_N * MM_N; i++) {
        cl->a[i] = (double)(i % 7) * 0.5;
        cl->b[i] = (double)(i % 5) * 0.25;
    }
}

static op_status_t finish(struct client *cl, struct op_agent_client_result *out, op_status_t st,
                          bool free_all);

/* The receiving thread and the sending one, or neither. */
static bool start_io(struct client *cl)
{
    if (pthread_create(&cl->thread, NULL, receive, cl) != 0)
        return false;
    if (pthread_create(&cl->sender, NULL, send_main, cl) != 0) {
        pthread_detach(cl->thread); /* ends when the channel closes */
        return false;
    }
    if (cl->cfg->io_pinned) { /* away from the core that computes */
        agent_pin(cl->thread, cl->cfg->io_cpu, cl->cfg->log);
        agent_pin(cl->sender, cl->cfg->io_cpu, cl->cfg->log);
    }
    return true;
}

/* join: every batch was sent; otherwise it may be blocked on a dead link
 * until its timeout (the tool exits first) */
static void stop_sender(struct client *cl, bool join)
{
    pthread_mutex_lock(&cl->mu);
    cl->tx_quit = true;
    pthread_cond_signal(&cl->tx);
    pthread_mutex_unlock(&cl->mu);
    if (join)
        pthread_join(cl->sender, NULL);
    else
        pthread_detach(cl->sender);
}

op_status_t op_agent_client_run(const struct op_agent_client_config *cfg,
                                struct op_agent_client_result *out)
{
    if (!op_agent_job_ok(&cfg->job) ||
        (cfg->mesh && (cfg->n_clients == 0 || cfg->n_clients > OP_AGENT_MAX_CLIENTS)))
        return OP_ERR_INVAL;
    struct client *cl = calloc(1, sizeof(*cl));
    if (cl == NULL)
        return OP_ERR_NOMEM;
    cl->cfg = cfg;
    cl->bytes = cfg->job.size * agent_elem_size(cfg->job.type);
    cl->expected = 1 + (WARMUP_BATCHES + cfg->job.batches) * cfg->job.batch;
    init_sync(cl);
    cl->vec = malloc(cl->bytes);
    cl->ref = malloc(cl->bytes);
    cl->tmp = malloc(cl->bytes);
    cl->out = malloc(cfg->job.batch * (OP_AGENT_ID_HDR + cl->bytes));
    cl->in = malloc(cfg->job.batch * cl->bytes);
    cl->in_id = calloc(cfg->job.batch, sizeof(*cl->in_id));
    cl->listener = -1;
    bool buffers = cl->vec && cl->ref && cl->tmp && cl->out && cl->in && cl->in_id;
    memset(out, 0, sizeof(*out));
    if (!buffers)
        return OP_ERR_NOMEM; /* (leaks on a failed allocation: the tool exits) */
    if (cfg->mesh) {
        op_status_t st = mesh_open(cl);
        if (st == OP_OK)
            st = measure(cl, out);
        mesh_close(cl, st == OP_OK);
        return finish(cl, out, st, st == OP_OK);
    }
    op_status_t st = open_client(cl);
    if (st == OP_OK)
        st = hello(cl);
    bool receiving = st == OP_OK && start_io(cl);
    if (st == OP_OK && !receiving)
        st = OP_ERR_NOMEM;
    if (st == OP_OK)
        st = measure(cl, out);
    if (receiving)
        stop_sender(cl, st == OP_OK);
    uint8_t bye = OP_AGENT_MSG_BYE;
    if (st == OP_OK)
        st = op_channel_send(cl->ch, &bye, 1, 0);
    if (receiving && st == OP_OK)
        pthread_join(cl->thread, NULL);
    else if (receiving)
        pthread_detach(cl->thread); /* blocked on a dead link until its timeout */
    op_channel_close(!receiving || st == OP_OK ? cl->ch : NULL);
    return finish(cl, out, st, !receiving || st == OP_OK);
}

/* The result out; the client freed unless a detached thread may still
 * touch it (it ends at its timeout; the tool exits first). */
static op_status_t finish(struct client *cl, struct op_agent_client_result *out, op_status_t st,
                          bool free_all)
{
    out->rank = cl->w.rank;
    out->clients = cl->w.clients;
    out->daemons = cl->w.daemons;
    out->results = cl->results;
    out->wrong = cl->wrong;
    if (free_all) {
        free(cl->vec);
        free(cl->ref);
        free(cl->tmp);
        free(cl->out);
        free(cl->in);
        free(cl->in_id);
        pthread_cond_destroy(&cl->got);
        pthread_cond_destroy(&cl->tx);
        pthread_mutex_destroy(&cl->mu);
        free(cl);
    }
    return st;
}
