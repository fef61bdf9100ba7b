/* All-to-all by worker threads (offpath/agent.h): each worker drives its
 * own RoCEv2 device over its own UDP socket through the loop, and moves its
 * share of the pairs with RDMA WRITE WITH IMMEDIATE. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent_proto.h"
#include "offpath/io.h"
#include "offpath/loop.h"
#include "offpath/rdma.h"

#define A2A_RNR_TIMER 1 /* 0.01 ms: a peer that enters the call a little later */
#define A2A_TIMEOUT 14  /* 67 ms per try (4.096 us * 2^14) */
#define A2A_RETRY 7     /* retry forever: the call's deadline ends it */
#define A2A_WAIT_NS (10 * OP_NS_PER_MS)

struct worker {
    struct op_a2a *a;
    uint32_t idx;
    struct op_io *io;
    struct op_rdma_dev *dev;
    struct op_rdma_cq *cq;
    struct op_rdma_mr *send_mr, *recv_mr;
    struct op_loop *loop;
    pthread_t thread;
    uint32_t peers; /* pairs it owns */
    op_status_t status; /* of the current call */
};

struct op_a2a {
    struct op_a2a_config cfg;
    uint8_t *sendbuf;
    /* two halves, call k's chunks land in half k % 2: a peer can be one
     * call ahead at most (it cannot finish call k + 1 without this rank's
     * chunk of it), so its writes never reach the half being read */
    uint8_t *recvbuf;
    struct worker w[OP_A2A_MAX_WORKERS];
    struct op_rdma_qp **qp; /* [ranks]: this rank's QP to each peer (NULL: itself) */
    struct op_a2a_endpoint *eps;
    /* a call: gen moves on and every started worker runs it once */
    pthread_mutex_t mu;
    pthread_cond_t go, fin;
    uint64_t gen;
    uint32_t started, finished;
    bool quit;
    uint64_t deadline, calls;
};

static uint32_t owner_of(const struct op_a2a *a, uint32_t peer) { return peer % a->cfg.workers; }

/* ---- setup */

static bool config_ok(const struct op_a2a_config *c)
{
    return c->ranks > 0 && c->ranks <= OP_A2A_MAX_RANKS && c->rank < c->ranks &&
           (!c->pinned || (c->cpu >= 0 && c->cpu < CPU_SETSIZE)) &&
           c->workers > 0 && c->workers <= OP_A2A_MAX_WORKERS && c->chunk > 0 &&
           c->chunk <= UINT32_MAX && (c->mtu == 0 || (c->mtu >= 256 && c->mtu <= 4096 &&
                                                       (c->mtu & (c->mtu - 1)) == 0));
}

static op_status_t open_worker(struct op_a2a *a, struct worker *w, uint32_t idx)
{
    size_t bytes = (size_t)a->cfg.ranks * a->cfg.chunk;
    unsigned access = OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE;
    w->a = a;
    w->idx = idx;
    op_status_t st = op_io_udp_open(a->cfg.ip, 0, &w->io);
    if (st != OP_OK)
        return st;
    struct op_rdma_dev_config dc = {.ip = a->cfg.ip, .port = op_io_local_port(w->io),
                                    .seed = op_now_ns() ^ ((uint64_t)a->cfg.rank << 32) ^ idx,
                                    .log = a->cfg.log};
    for (uint32_t q = idx; q < a->cfg.ranks; q += a->cfg.workers)
        w->peers += q != a->cfg.rank;
    uint32_t depth = 2 * w->peers + 16;
    struct op_loop_config lc = {.io = w->io};
    if ((st = op_rdma_dev_create(&dc, &w->dev)) != OP_OK ||
        (st = op_rdma_cq_create(w->dev, depth, &w->cq)) != OP_OK ||
        (st = op_rdma_reg_mr(w->dev, a->sendbuf, bytes, access, &w->send_mr)) != OP_OK ||
        (st = op_rdma_reg_mr(w->dev, a->recvbuf, 2 * bytes, access, &w->recv_mr)) != OP_OK ||
        (st = op_loop_create(&lc, &w->loop)) != OP_OK)
        return st;
    return op_loop_add(w->loop, &op_rdma_dev_ops, w->dev);
}

static op_status_t create_qps(struct op_a2a *a)
{
    for (uint32_t q = 0; q < a->cfg.ranks; q++) {
        if (q == a->cfg.rank)
            continue;
        struct worker *w = &a->w[owner_of(a, q)];
        struct op_rdma_qp_init_attr ia = {.type = OP_RDMA_QPT_RC, .send_cq = w->cq,
                                          .recv_cq = w->cq, .max_send_wr = 4, .max_recv_wr = 4};
        op_status_t st = op_rdma_qp_create(w->dev, &ia, &a->qp[q]);
        if (st != OP_OK)
            return st;
    }
    return OP_OK;
}

static void *worker_main(void *arg);

/* Worker 0 is the calling thread itself (one wake-up less a call; with one
 * worker, no thread at all), unless the call must move on while the caller
 * does something else (cfg.progress); the others wait for calls in threads. */
static uint32_t first_thread(const struct op_a2a *a) { return a->cfg.progress ? 0 : 1; }

static op_status_t start_workers(struct op_a2a *a)
{
    for (uint32_t i = first_thread(a); i < a->cfg.workers; i++) {
        int e = pthread_create(&a->w[i].thread, NULL, worker_main, &a->w[i]);
        if (e != 0)
            return op_status_from_errno(e);
        a->started++;
        if (a->cfg.pinned)
            agent_pin(a->w[i].thread, a->cfg.cpu, a->cfg.log);
    }
    return OP_OK;
}

op_status_t op_a2a_create(const struct op_a2a_config *cfg, struct op_a2a **out)
{
    if (!config_ok(cfg))
        return OP_ERR_INVAL;
    struct op_a2a *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return OP_ERR_NOMEM;
    a->cfg = *cfg;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->go, NULL);
    pthread_cond_init(&a->fin, NULL);
    if (a->cfg.workers > a->cfg.ranks)
        a->cfg.workers = a->cfg.ranks;
    if (a->cfg.mtu == 0)
        a->cfg.mtu = 1024;
    size_t bytes = (size_t)a->cfg.ranks * a->cfg.chunk;
    a->sendbuf = calloc(1, bytes);
    a->recvbuf = calloc(2, bytes);
    a->qp = calloc(a->cfg.ranks, sizeof(*a->qp));
    a->eps = calloc(a->cfg.ranks, sizeof(*a->eps));
    op_status_t st = a->sendbuf && a->recvbuf && a->qp && a->eps ? OP_OK : OP_ERR_NOMEM;
    for (uint32_t i = 0; st == OP_OK && i < a->cfg.workers; i++)
        st = open_worker(a, &a->w[i], i);
    if (st == OP_OK)
        st = create_qps(a);
    if (st == OP_OK)
        st = start_workers(a);
    if (st != OP_OK) {
        op_a2a_destroy(a);
        return st;
    }
    *out = a;
    return OP_OK;
}

static void stop_workers(struct op_a2a *a)
{
    pthread_mutex_lock(&a->mu);
    a->quit = true;
    pthread_cond_broadcast(&a->go);
    pthread_mutex_unlock(&a->mu);
    for (uint32_t i = first_thread(a); i < first_thread(a) + a->started; i++)
        pthread_join(a->w[i].thread, NULL);
}

void op_a2a_destroy(struct op_a2a *a)
{
    if (a == NULL)
        return;
    stop_workers(a);
    pthread_cond_destroy(&a->go);
    pthread_cond_destroy(&a->fin);
    pthread_mutex_destroy(&a->mu);
    for (uint32_t i = 0; i < a->cfg.workers; i++) {
        op_loop_destroy(a->w[i].loop);
        op_rdma_dev_destroy(a->w[i].dev); /* its QPs, CQ and regions too */
        op_io_close(a->w[i].io);
    }
    free(a->qp);
    free(a->eps);
    free(a->sendbuf);
    free(a->recvbuf);
    free(a);
}

void op_a2a_endpoint(const struct op_a2a *a, struct op_a2a_endpoint *out)
{
    memset(out, 0, sizeof(*out));
    out->ip = a->cfg.ip;
    out->workers = a->cfg.workers;
    out->recv_addr = (uintptr_t)a->recvbuf;
    out->chunk = a->cfg.chunk;
    for (uint32_t i = 0; i < a->cfg.workers; i++) {
        out->port[i] = op_io_local_port(a->w[i].io);
        out->rkey[i] = op_rdma_mr_rkey(a->w[i].recv_mr);
    }
}

/* The PSN a QP starts from: its number mixed, so pairs differ. */
static uint32_t first_psn(const struct op_rdma_qp *qp)
{
    return (op_rdma_qp_num(qp) * 2654435761u) & 0xffffffu;
}

void op_a2a_qp_infos(const struct op_a2a *a, struct op_a2a_qp_info *out)
{
    for (uint32_t q = 0; q < a->cfg.ranks; q++)
        out[q] = a->qp[q] == NULL ? (struct op_a2a_qp_info){0, 0}
                                  : (struct op_a2a_qp_info){op_rdma_qp_num(a->qp[q]),
                                                            first_psn(a->qp[q])};
}

/* The half of call k: the one op_a2a_recvbuf shows after it. */
static uint8_t *half(const struct op_a2a *a, uint64_t call)
{
    return a->recvbuf + (call % 2) * (size_t)a->cfg.ranks * a->cfg.chunk;
}

/* The receive rank q's write of call `call` completes, into that call's
 * half. Posted a call ahead (the half is the one before last, read by
 * now), so a peer that enters the call first is never refused (RNR) and
 * made to wait. */
static op_status_t post_receive(struct op_a2a *a, uint32_t q, uint64_t call)
{
    size_t chunk = a->cfg.chunk;
    struct op_rdma_sge rs = {(uintptr_t)(half(a, call) + q * chunk), (uint32_t)chunk,
                             op_rdma_mr_lkey(a->w[owner_of(a, q)].recv_mr)};
    struct op_rdma_recv_wr rwr = {.wr_id = q, .sg_list = &rs, .num_sge = 1};
    return op_rdma_post_recv(a->qp[q], &rwr);
}

static op_status_t connect_pair(struct op_a2a *a, uint32_t q, const struct op_a2a_qp_info *peer)
{
    const struct op_a2a_endpoint *e = &a->eps[q];
    struct op_rdma_qp_attr at = {.access = OP_RDMA_ACCESS_REMOTE_WRITE, .path_mtu = a->cfg.mtu,
                                 .dest_qpn = peer->qpn, .rq_psn = peer->psn,
                                 .remote_ip = e->ip,
                                 .remote_port = e->port[a->cfg.rank % e->workers],
                                 .min_rnr_timer = A2A_RNR_TIMER, .sq_psn = first_psn(a->qp[q]),
                                 .timeout = A2A_TIMEOUT, .retry_cnt = A2A_RETRY, .rnr_retry = 7};
    op_status_t st = op_rdma_qp_modify(a->qp[q], OP_RDMA_QPS_INIT, &at);
    if (st == OP_OK)
        st = op_rdma_qp_modify(a->qp[q], OP_RDMA_QPS_RTR, &at);
    if (st == OP_OK)
        st = op_rdma_qp_modify(a->qp[q], OP_RDMA_QPS_RTS, &at);
    return st;
}

static bool peer_agrees(const struct op_a2a *a, uint32_t q, const struct op_a2a_endpoint *e)
{
    if (e->chunk == a->cfg.chunk && e->workers == a->cfg.workers)
        return true;
    OP_ERROR(a->cfg.log,
             "all-to-all: rank %u has %llu bytes a chunk and %u workers, rank %u %llu and %u",
             q, (unsigned long long)e->chunk, e->workers, a->cfg.rank,
             (unsigned long long)a->cfg.chunk, a->cfg.workers);
    return false;
}

op_status_t op_a2a_connect(struct op_a2a *a, const struct op_a2a_endpoint *eps,
                           const struct op_a2a_qp_info *theirs)
{
    memcpy(a->eps, eps, a->cfg.ranks * sizeof(*eps));
    for (uint32_t q = 0; q < a->cfg.ranks; q++) {
        if (q == a->cfg.rank)
            continue;
        if (!peer_agrees(a, q, &eps[q]))
            return OP_ERR_INVAL;
        op_status_t st = connect_pair(a, q, &theirs[q]);
        if (st == OP_OK)
            st = post_receive(a, q, 1); /* the first call's */
        if (st != OP_OK)
            return st;
    }
    return OP_OK;
}

void *op_a2a_sendbuf(struct op_a2a *a) { return a->sendbuf; }
void *op_a2a_recvbuf(struct op_a2a *a) { return half(a, a->calls); }
uint32_t op_a2a_workers(const struct op_a2a *a) { return a->cfg.workers; }

/* ---- a call */

static op_status_t post_pair(struct worker *w, uint32_t q)
{
    struct op_a2a *a = w->a;
    size_t chunk = a->cfg.chunk;
    struct op_rdma_sge ss = {(uintptr_t)(a->sendbuf + q * chunk), (uint32_t)chunk,
                             op_rdma_mr_lkey(w->send_mr)};
    const struct op_a2a_endpoint *e = &a->eps[q];
    uint64_t at = e->recv_addr + ((a->calls % 2) * a->cfg.ranks + a->cfg.rank) * chunk;
    struct op_rdma_send_wr wr = {.wr_id = q, .opcode = OP_RDMA_WR_RDMA_WRITE_WITH_IMM,
                                 .send_flags = OP_RDMA_SEND_SIGNALED, .sg_list = &ss,
                                 .num_sge = 1, .imm_data = (uint32_t)a->calls,
                                 .rdma = {.remote_addr = at,
                                          .rkey = e->rkey[a->cfg.rank % e->workers]}};
    return op_rdma_post_send(a->qp[q], &wr, op_now_ns(), op_loop_txq(w->loop));
}

/* Completions: each pair gives one for its write and one for the peer's. */
static op_status_t reap(struct worker *w, uint32_t *left)
{
    struct op_rdma_wc wc[32];
    int n;
    while ((n = op_rdma_poll_cq(w->cq, 32, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            if (wc[i].status != OP_RDMA_WC_SUCCESS) {
                OP_ERROR(w->a->cfg.log, "all-to-all: rank %u, pair with rank %llu: %s%s%s",
                         w->a->cfg.rank, (unsigned long long)wc[i].wr_id,
                         op_rdma_wc_status_str(wc[i].status), wc[i].cause ? ": " : "",
                         wc[i].cause ? wc[i].cause : "");
                return OP_ERR_IO;
            }
            (*left)--;
        }
    }
    return OP_OK;
}

static op_status_t worker_call(struct worker *w)
{
    struct op_a2a *a = w->a;
    uint32_t left = 2 * w->peers;
    for (uint32_t q = w->idx; q < a->cfg.ranks; q += a->cfg.workers) {
        if (q == a->cfg.rank)
            continue;
        op_status_t st = post_pair(w, q);
        if (st != OP_OK)
            return st;
    }
    op_loop_flush(w->loop);
    op_status_t st = OP_OK;
    while (st == OP_OK && left > 0) {
        uint64_t now = op_now_ns();
        if (now >= a->deadline)
            return OP_ERR_TIMEOUT;
        uint64_t until = now + A2A_WAIT_NS < a->deadline ? now + A2A_WAIT_NS : a->deadline;
        int r = op_loop_run_once(w->loop, until);
        st = r < 0 ? op_status_from_errno(-r) : reap(w, &left);
    }
    for (uint32_t q = w->idx; st == OP_OK && q < a->cfg.ranks; q += a->cfg.workers)
        if (q != a->cfg.rank)
            st = post_receive(a, q, a->calls + 1);
    return st;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct op_a2a *a = w->a;
    uint64_t seen = 0;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (a->gen == seen && !a->quit)
            pthread_cond_wait(&a->go, &a->mu);
        if (a->quit)
            break;
        seen = a->gen;
        pthread_mutex_unlock(&a->mu);
        w->status = worker_call(w);
        pthread_mutex_lock(&a->mu);
        a->finished++;
        pthread_cond_signal(&a->fin);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* A QP left mid-call (a deadline, an error) holds WRs of that call: it
 * cannot serve another, so it goes to ERR and every later call fails. */
static void poison(struct op_a2a *a)
{
    for (uint32_t q = 0; q < a->cfg.ranks; q++)
        if (a->qp[q] != NULL)
            (void)op_rdma_qp_modify(a->qp[q], OP_RDMA_QPS_ERR, NULL);
}

void op_a2a_start(struct op_a2a *a, uint64_t deadline_ns)
{
    pthread_mutex_lock(&a->mu);
    a->calls++;
    a->deadline = deadline_ns;
    a->finished = 0;
    a->gen++;
    pthread_cond_broadcast(&a->go);
    pthread_mutex_unlock(&a->mu);
    size_t chunk = a->cfg.chunk;
    memcpy(half(a, a->calls) + a->cfg.rank * chunk, a->sendbuf + a->cfg.rank * chunk, chunk);
}

bool op_a2a_done(struct op_a2a *a)
{
    pthread_mutex_lock(&a->mu);
    bool done = a->cfg.progress && a->finished == a->started;
    pthread_mutex_unlock(&a->mu);
    return done;
}

op_status_t op_a2a_wait(struct op_a2a *a)
{
    if (!a->cfg.progress)
        a->w[0].status = worker_call(&a->w[0]);
    pthread_mutex_lock(&a->mu);
    while (a->finished < a->started)
        pthread_cond_wait(&a->fin, &a->mu);
    pthread_mutex_unlock(&a->mu);
    op_status_t st = OP_OK;
    for (uint32_t i = 0; i < a->cfg.workers && st == OP_OK; i++)
        st = a->w[i].status;
    if (st != OP_OK)
        poison(a);
    return st;
}

op_status_t op_a2a_run(struct op_a2a *a, uint64_t deadline_ns)
{
    op_a2a_start(a, deadline_ns);
    return op_a2a_wait(a);
}
