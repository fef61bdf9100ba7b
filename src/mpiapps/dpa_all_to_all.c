/* `offpath dpa_all_to_all`: DOCA's dpa_all_to_all on offpath's worker
 * threads (offpath/agent.h): each rank's workers RDMA-write its chunks into
 * the peers' receive buffers over RoCEv2. Prints DOCA's header and send and
 * receive matrices, then the time of every (size, thread count) beside the
 * MPI's own MPI_Alltoall on the same buffers in the same run. Every
 * received element is checked against what its sender must have written.
 * With -d the workers are an agent daemon's (the DPU's role, `offpath
 * dpa_all_to_all -r daemon`): a rank hands its send buffer to its daemon
 * over the secure channel, the daemons move the chunks by RDMA writes, and
 * the rank gets its receive buffer back. */
#include <inttypes.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/agent.h"

#define A2A_CALL_NS (30 * OP_NS_PER_S)
#define MATRIX_AUTO_MAX 64 /* values a row */
#define DOCA_THREADS_MAX 8

struct bench {
    const struct op_a2a_bench_config *cfg;
    int rank, ranks;
    struct op_log log;
    uint64_t wrong; /* elements that were not what their sender wrote */
    struct op_chan_keypair key;          /* -d: the ranks' */
    uint8_t peer_pub[OP_CHAN_KEY_BYTES]; /* -d: the daemons' */
};

/* Where a rank's all-to-all runs: its own workers, or (-d) its daemon's. */
struct path {
    struct op_a2a *a;
    struct op_a2a_client *c;
};

static int32_t *path_send(struct path *p)
{
    return p->c != NULL ? op_a2a_client_sendbuf(p->c) : op_a2a_sendbuf(p->a);
}

static const int32_t *path_recv(struct path *p)
{
    return p->c != NULL ? op_a2a_client_recvbuf(p->c) : op_a2a_recvbuf(p->a);
}

static op_status_t path_run(struct path *p)
{
    if (p->a != NULL)
        return op_a2a_run(p->a, op_now_ns() + A2A_CALL_NS);
    op_status_t st = op_a2a_client_start(p->c);
    return st == OP_OK ? op_a2a_client_wait(p->c) : st;
}

static void path_close(struct path *p)
{
    op_a2a_destroy(p->a);
    op_a2a_client_close(p->c);
    *p = (struct path){NULL, NULL};
}

/* What rank `from` writes at element j of its send buffer in run `run`:
 * DOCA fills it with rand() % 10000; this is as random but known to all. */
static int32_t element(int from, uint32_t run, uint64_t j)
{
    uint64_t x = ((uint64_t)from << 40) ^ ((uint64_t)run << 20) ^ j;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (int32_t)(x % 10000);
}

static void fill(const struct bench *b, int32_t *send, uint64_t n, uint32_t run)
{
    for (uint64_t j = 0; j < n; j++)
        send[j] = element(b->rank, run, j);
}

/* recv[q * count + k] came from rank q's element rank * count + k */
static void check(struct bench *b, const int32_t *recv, uint64_t count, uint32_t run)
{
    for (int q = 0; q < b->ranks; q++)
        for (uint64_t k = 0; k < count; k++)
            b->wrong += recv[(uint64_t)q * count + k] !=
                        element(q, run, (uint64_t)b->rank * count + k);
}

static void print_matrix(const struct bench *b, const char *title, const int32_t *mine,
                         uint64_t n)
{
    int32_t *all = b->rank == 0 ? malloc((size_t)(n * (uint64_t)b->ranks) * sizeof(*all)) : NULL;
    MPI_Gather(mine, (int)n, MPI_INT, all, (int)n, MPI_INT, 0, MPI_COMM_WORLD);
    if (b->rank != 0)
        return;
    printf("------------%s----------------------\n", title);
    for (int r = 0; all != NULL && r < b->ranks; r++) {
        printf("Rank %d |", r);
        for (uint64_t j = 0; j < n; j++)
            printf(" %-5d", all[(uint64_t)r * n + j]);
        printf(" |\n");
    }
    fflush(stdout);
    free(all);
}

static bool show_matrices(const struct bench *b, uint64_t values)
{
    return b->cfg->matrices == OP_A2A_MATRIX_ALWAYS ||
           (b->cfg->matrices == OP_A2A_MATRIX_AUTO && values <= MATRIX_AUTO_MAX);
}

/* Every rank's verdict: a failure anywhere stops all. */
static bool all_ok(op_status_t st)
{
    int ok = st == OP_OK, all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all != 0;
}

/* ---- setup of the workers: endpoints to all, each pair's QP to its peer */

static op_status_t connect_all(struct bench *b, struct op_a2a *a)
{
    size_t n = (size_t)b->ranks;
    struct op_a2a_endpoint *eps = calloc(n, sizeof(*eps)), me;
    struct op_a2a_qp_info *mine = calloc(n, sizeof(*mine)), *theirs = calloc(n, sizeof(*theirs));
    op_status_t st = eps && mine && theirs ? OP_OK : OP_ERR_NOMEM;
    if (st == OP_OK) {
        op_a2a_endpoint(a, &me);
        op_a2a_qp_infos(a, mine);
        MPI_Allgather(&me, sizeof me, MPI_BYTE, eps, sizeof me, MPI_BYTE, MPI_COMM_WORLD);
        MPI_Alltoall(mine, sizeof *mine, MPI_BYTE, theirs, sizeof *mine, MPI_BYTE,
                     MPI_COMM_WORLD);
        st = op_a2a_connect(a, eps, theirs);
    }
    free(eps);
    free(mine);
    free(theirs);
    return st;
}

static op_status_t open_workers(struct bench *b, uint32_t threads, uint64_t chunk,
                                struct op_a2a **out)
{
    struct op_a2a_config c = {.ranks = (uint32_t)b->ranks, .rank = (uint32_t)b->rank,
                              .workers = threads, .ip = b->cfg->ip, .chunk = chunk,
                              .log = &b->log};
    op_status_t st = op_a2a_create(&c, out);
    if (st == OP_OK && (st = connect_all(b, *out)) != OP_OK)
        op_a2a_destroy(*out);
    return st;
}

/* -d: this rank's daemon, which answers when all the ranks it serves have
 * come and its ranks are linked with the other daemons'. */
static op_status_t open_daemon(struct bench *b, uint32_t threads, uint64_t chunk,
                               struct op_a2a_client **out)
{
    const struct op_a2a_bench_config *g = b->cfg;
    uint32_t j = (uint32_t)b->rank / ((uint32_t)b->ranks / g->n_daemons);
    struct op_a2a_client_config c = {.key = b->key, .ranks = (uint32_t)b->ranks,
                                     .rank = (uint32_t)b->rank, .workers = threads,
                                     .chunk = chunk,
                                     .timeout_ns = (uint64_t)g->timeout_s * OP_NS_PER_S,
                                     .log = &b->log};
    memcpy(c.peer_pub, b->peer_pub, OP_CHAN_KEY_BYTES);
    c.daemon.kind = OP_CHAN_TCP;
    op_format_ipv4(g->daemon_ip[j], c.daemon.host);
    c.daemon.port = g->daemon_port[j];
    return op_a2a_client_open(&c, out);
}

/* The workers (or the daemons) open for every rank, or for none (those
 * that opened close). */
static bool open_everywhere(struct bench *b, uint32_t threads, uint64_t chunk, struct path *p)
{
    *p = (struct path){NULL, NULL};
    op_status_t st = b->cfg->n_daemons > 0 ? open_daemon(b, threads, chunk, &p->c)
                                           : open_workers(b, threads, chunk, &p->a);
    if (st != OP_OK)
        OP_ERROR(&b->log, "rank %d: cannot start %u workers%s: %s", b->rank, threads,
                 b->cfg->n_daemons > 0 ? " at its daemon" : "", op_status_str(st));
    if (all_ok(st))
        return true;
    path_close(p);
    return false;
}

/* ---- timing: a run's time is its slowest rank's, entered after a barrier */

struct times {
    double sum, min, max;
    uint32_t n;
};

static void add(struct times *t, double us)
{
    if (t->n == 0 || us < t->min)
        t->min = us;
    if (us > t->max)
        t->max = us;
    t->sum += us;
    t->n++;
}

static double slowest(double us)
{
    double max;
    MPI_Allreduce(&us, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

static op_status_t offpath_run(struct bench *b, struct path *p, uint64_t count, uint32_t run,
                               double *us)
{
    fill(b, path_send(p), count * (uint64_t)b->ranks, run);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    op_status_t st = path_run(p);
    *us = slowest((MPI_Wtime() - t0) * 1e6);
    if (st == OP_OK)
        check(b, path_recv(p), count, run);
    else
        OP_ERROR(&b->log, "rank %d: all-to-all run %u: %s", b->rank, run, op_status_str(st));
    return st;
}

static double mpi_run(struct bench *b, int32_t *send, int32_t *recv, uint64_t count, uint32_t run)
{
    fill(b, send, count * (uint64_t)b->ranks, run);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Alltoall(send, (int)count, MPI_INT, recv, (int)count, MPI_INT, MPI_COMM_WORLD);
    double us = slowest((MPI_Wtime() - t0) * 1e6);
    check(b, recv, count, run);
    return us;
}

static void report(const struct bench *b, uint64_t msgsize, uint32_t threads,
                   const struct times *t, const struct times *m)
{
    if (b->rank != 0)
        return;
    printf("%-12" PRIu64 " %-9u %-12.2f %-12.2f %-12.2f %-12.2f %.2f\n", msgsize, threads,
           t->sum / t->n, t->min, t->max, m->sum / m->n, (m->sum / m->n) / (t->sum / t->n));
    if (b->cfg->json)
        printf("{\"processes\": %d, \"msgsize\": %" PRIu64 ", \"threads\": %u, \"runs\": %u, "
               "\"avg_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f, \"mpi_alltoall_avg_us\": "
               "%.3f}\n",
               b->ranks, msgsize, threads, t->n, t->sum / t->n, t->min, t->max, m->sum / m->n);
    fflush(stdout);
}

/* The measurement of one (size, thread count): warm-up runs, then timed
 * runs of the workers and of MPI_Alltoall taking turns. */
static op_status_t measure(struct bench *b, uint64_t msgsize, uint32_t threads, uint32_t *run)
{
    uint64_t count = msgsize / 4 / (uint64_t)b->ranks;
    struct path a;
    if (!open_everywhere(b, threads, count * 4, &a))
        return OP_ERR_STATE;
    int32_t *send = malloc(count * (uint64_t)b->ranks * 4), *recv = malloc(count * b->ranks * 4);
    struct times t = {0}, m = {0};
    op_status_t st = send && recv ? OP_OK : OP_ERR_NOMEM;
    for (uint32_t i = 0; i < b->cfg->warmup + b->cfg->iters && all_ok(st); i++) {
        double us;
        st = offpath_run(b, &a, count, ++*run, &us);
        double mus = mpi_run(b, send, recv, count, *run);
        if (i >= b->cfg->warmup) {
            add(&t, us);
            add(&m, mus);
        }
    }
    if (all_ok(st))
        report(b, msgsize, threads, &t, &m);
    else
        st = OP_ERR_STATE;
    free(send);
    free(recv);
    path_close(&a);
    return st;
}

/* DOCA's output: the header and the matrices of one run. */
static op_status_t show_one(struct bench *b, uint64_t msgsize, uint32_t threads)
{
    uint64_t count = msgsize / 4 / (uint64_t)b->ranks, n = count * (uint64_t)b->ranks;
    OP_INFO(&b->log,
            "Number of processes = %d, message size = %" PRIu64 ", message count = %" PRIu64
            ", buffer size = %" PRIu64,
            b->ranks, msgsize, count, n * 4);
    struct path a;
    if (!open_everywhere(b, threads, count * 4, &a))
        return OP_ERR_STATE;
    double us;
    op_status_t st = offpath_run(b, &a, count, 0, &us);
    if (all_ok(st) && show_matrices(b, n)) {
        print_matrix(b, "send buffs", path_send(&a), n);
        print_matrix(b, "recv buffs", path_recv(&a), n);
    }
    path_close(&a);
    return all_ok(st) ? OP_OK : OP_ERR_STATE;
}

/* -d: the ranks split evenly over the daemons, the buffers fit a channel
 * message, and both keys read. */
static bool daemons_ok(struct bench *b)
{
    const struct op_a2a_bench_config *c = b->cfg;
    char why[256] = "";
    if ((uint32_t)b->ranks % c->n_daemons != 0)
        snprintf(why, sizeof why, "-d (--devices): %d ranks do not split evenly over %u daemons",
                 b->ranks, c->n_daemons);
    for (int i = 0; i < c->n_msgsize && why[0] == '\0'; i++)
        if (c->msgsize[i] > OP_CHAN_LIMIT_MAX_MSG - 64)
            snprintf(why, sizeof why, "-m (--msgsize) %" PRIu64 ": at most %u bytes with -d "
                     "(one secure channel message)", c->msgsize[i], OP_CHAN_LIMIT_MAX_MSG - 64);
    op_status_t st = why[0] != '\0' ? OP_ERR_INVAL : op_chan_read_secret(c->key, &b->key, why);
    if (st == OP_OK)
        st = op_chan_read_public(c->peer, b->peer_pub, why);
    bool ok = all_ok(st);
    if (st != OP_OK && b->rank == 0)
        fprintf(stderr, "offpath dpa_all_to_all: %s\n", why);
    return ok;
}

static bool sizes_ok(const struct bench *b)
{
    for (int i = 0; i < b->cfg->n_msgsize; i++)
        if (b->cfg->msgsize[i] < 4 * (uint64_t)b->ranks ||
            b->cfg->msgsize[i] / 4 / (uint64_t)b->ranks > INT32_MAX) {
            if (b->rank == 0)
                fprintf(stderr,
                        "offpath dpa_all_to_all: -m (--msgsize) %" PRIu64
                        " is less than 4 bytes for each of the %d ranks\n",
                        b->cfg->msgsize[i], b->ranks);
            return false;
        }
    return true;
}

static int run_all(struct bench *b)
{
    struct op_a2a_bench_config c = *b->cfg;
    if (c.n_msgsize == 0)
        c.msgsize[c.n_msgsize++] = 4 * (uint64_t)b->ranks;
    if (c.n_threads == 0)
        c.threads[c.n_threads++] = b->ranks < DOCA_THREADS_MAX ? (uint32_t)b->ranks
                                                               : DOCA_THREADS_MAX;
    b->cfg = &c;
    if (!sizes_ok(b) || (c.n_daemons > 0 && !daemons_ok(b)) ||
        show_one(b, c.msgsize[0], c.threads[0]) != OP_OK)
        return 1;
    if (b->rank == 0)
        printf("# dpa_all_to_all: %d processes, %u runs each after %u warm-up; the time of a "
               "run is its slowest rank's\n# %-10s %-9s %-12s %-12s %-12s %-12s %s\n",
               b->ranks, c.iters, c.warmup, "Size (B)", "Threads", "Avg (us)", "Min (us)",
               "Max (us)", "MPI (us)", "MPI/offpath");
    uint32_t run = 0;
    for (int i = 0; i < c.n_msgsize; i++)
        for (int k = 0; k < c.n_threads; k++)
            if (measure(b, c.msgsize[i], c.threads[k], &run) != OP_OK)
                return 1;
    uint64_t wrong;
    MPI_Allreduce(&b->wrong, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (b->rank == 0 && wrong == 0)
        printf("offpath: data check ok (every element every rank received, both paths)\n");
    else if (b->rank == 0)
        printf("offpath: data check: %" PRIu64 " elements wrong\n", wrong);
    return wrong == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct op_a2a_bench_config cfg;
    struct bench b = {.cfg = &cfg};
    char err[256];
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.ranks);
    op_log_init(&b.log, "dpa_a2a", b.rank == 0 ? OP_LOG_INFO : OP_LOG_ERROR);
    b.log.doca = true; /* DOCA's line: [..][DOCA][INF][dpa_all_to_all.c:N][dpa_a2a] */
    op_status_t st = op_a2a_bench_parse(argc, argv, &cfg, err, sizeof err);
    int rc = st != OP_OK ? 2 : 0;
    if (b.rank == 0 && st != OP_OK)
        fprintf(stderr, "offpath dpa_all_to_all: %s\n", err);
    if (b.rank == 0 && (st != OP_OK || cfg.help))
        op_a2a_bench_usage(st != OP_OK ? stderr : stdout);
    if (st == OP_OK && !cfg.help)
        rc = run_all(&b);
    MPI_Finalize();
    return rc;
}
