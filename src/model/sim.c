/* Runs simulations in child processes: SimGrid's engine is one per process
 * and cannot be reset, so each scenario gets a fresh process (as many at
 * once as there are cores to use); the results come back through pipes. */
#include <errno.h>
#include <sched.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model_internal.h"

#define MAX_JOBS 8

bool op_model_available(void)
{
    return true;
}

const char *mdl_host_of(const struct op_model_platform *p, char kind, int idx, char *buf,
                        size_t len)
{
    if (!mdl_on_links(p))
        snprintf(buf, len, "here");
    else if (kind == 'n')
        snprintf(buf, len, "n%d", idx);
    else if (kind == 't')
        snprintf(buf, len, "tor%d", idx);
    else
        snprintf(buf, len, "spine");
    return buf;
}

void mdl_cpu(struct mdl_run *r, double seconds)
{
    const struct op_model_platform *p = r->p;
    if (seconds <= 0)
        return;
    r->cpu += seconds;
    if (r->cpu_host != NULL) { /* the actor's host is its namespace; its CPU the machine's */
        sg_exec_t e = sg_actor_exec_init(seconds * 1e9);
        sg_exec_set_host(e, r->cpu_host);
        sg_exec_start(e);
        sg_exec_wait(e);
    } else if (p->shared_cores > 0) {
        sg_actor_execute(seconds * 1e9); /* the host runs 1e9 flops a second a core */
    } else {
        sg_actor_sleep_for(seconds);
    }
}

void mdl_send(struct mdl_outq *q, void *mailbox, void *msg, long bytes)
{
    if (q->n == MDL_OUTQ) {
        unsigned k = 0;
        for (unsigned i = 0; i < q->n; i++)
            if (!sg_comm_test(q->c[i])) /* a finished comm is released by the test */
                q->c[k++] = q->c[i];
        q->n = k;
        if (k == MDL_OUTQ) { /* all still in flight: this one goes detached */
            sg_comm_detach(sg_mailbox_put_init(mailbox, msg, bytes), NULL);
            return;
        }
    }
    q->c[q->n++] = sg_mailbox_put_async(mailbox, msg, bytes);
}

void mdl_outq_drain(struct mdl_outq *q)
{
    sg_comm_wait_all((sg_comm_t *)q->c, q->n);
    q->n = 0;
}

static op_status_t check(const struct op_model_platform *p, unsigned nodes, unsigned ppn,
                         const struct op_model_scenario *sc, size_t n)
{
    if (mdl_platform_check(p) != OP_OK || nodes < 1 || nodes > 65536 || ppn < 1 || ppn > 1024)
        return OP_ERR_INVAL;
    uint64_t per_tor = (uint64_t)(nodes < p->rack_nodes ? nodes : p->rack_nodes) * p->sockets;
    if (per_tor > (1u << 18)) /* a child's number in a message */
        return OP_ERR_INVAL;
    for (size_t i = 0; i < n; i++)
        if (sc[i].mode >= OP_MODEL_MODE_COUNT_ || sc[i].alg >= OP_MODEL_ALG_COUNT_ ||
            !(sc[i].loss >= 0 && sc[i].loss < 1) || sc[i].bytes > (1ull << 40))
            return OP_ERR_INVAL;
    return OP_OK;
}

static bool write_all(int fd, const void *buf, size_t len)
{
    const char *b = buf;
    while (len > 0) {
        ssize_t w = write(fd, b, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        b += w;
        len -= (size_t)w;
    }
    return true;
}

/* One scenario in this (child) process: a fresh engine each time, since
 * leftovers of an earlier run (killed switches, packets in flight) slow the
 * next one down. */
static _Noreturn void child(int fd, const char *platform, const struct op_model_platform *p,
                            unsigned nodes, unsigned ppn, const struct op_model_scenario *sc)
{
    char *argv[] = {"offpath-model", "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                    "--cfg=contexts/stack-size:64", "--cfg=contexts/guard-size:0",
                    "--cfg=surf/precision:1e-13", "--log=root.thres:critical",
#if defined(__SANITIZE_ADDRESS__)
                    /* ASan cannot follow SimGrid's own context switches */
                    "--cfg=contexts/factory:thread",
#endif
                    NULL};
    int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;
    if (sc->trace) /* SimGrid's own messages */
        argv[6] = "--log=root.thres:info";
    simgrid_init(&argc, argv);
    simgrid_load_platform(platform);
    struct op_model_result res = {0};
    struct mdl_run r = {.p = p, .nodes = nodes, .ppn = ppn, .sc = sc, .res = &res};
    if (p->shared_cores > 0 && mdl_on_links(p))
        r.cpu_host = sg_host_by_name("cpu");
    if (sc->mode == OP_MODEL_HOST)
        mdl_host_simulate(&r);
    else
        mdl_inc_simulate(&r);
    if (sc->trace)
        fprintf(stderr, "model: %s %llu B: %.3f us, %.2f s of CPU\n", op_model_mode_name(sc->mode),
                (unsigned long long)sc->bytes, res.latency_s * 1e6,
                (double)clock() / CLOCKS_PER_SEC);
    _exit(write_all(fd, &res, sizeof(res)) ? 0 : 4);
}

/* A child simulating one scenario, and the pipe its result comes on. */
struct job {
    pid_t pid;
    int fd;
};

static op_status_t spawn(const char *platform, const struct op_model_platform *p, unsigned nodes,
                         unsigned ppn, const struct op_model_scenario *sc, struct job *j)
{
    int fds[2];
    if (pipe(fds) != 0)
        return op_status_from_errno(errno);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return op_status_from_errno(errno);
    }
    if (pid == 0) {
        close(fds[0]);
        child(fds[1], platform, p, nodes, ppn, sc);
    }
    close(fds[1]);
    *j = (struct job){.pid = pid, .fd = fds[0]};
    return OP_OK;
}

static op_status_t reap(struct job *j, struct op_model_result *out)
{
    size_t got = 0;
    while (got < sizeof(*out)) {
        ssize_t r = read(j->fd, (char *)out + got, sizeof(*out) - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(j->fd);
    int status = 0;
    while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
        ;
    return got == sizeof(*out) && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? OP_OK : OP_ERR_IO;
}

/* Scenarios are independent: as many children at once as this process may
 * use cores (a 4096-node projection: 64 s on one of 2 loaded cores). */
static size_t parallel_jobs(void)
{
    cpu_set_t set;
    size_t n = sched_getaffinity(0, sizeof(set), &set) == 0 ? (size_t)CPU_COUNT(&set) : 1;
    return n < 1 ? 1 : n > MAX_JOBS ? MAX_JOBS : n;
}

static op_status_t run_all(const char *platform, const struct op_model_platform *p,
                           unsigned nodes, unsigned ppn, const struct op_model_scenario *sc,
                           size_t n, struct op_model_result *out)
{
    struct job jobs[MAX_JOBS];
    size_t width = parallel_jobs(), started = 0, done = 0;
    op_status_t st = OP_OK;
    while (done < n) {
        while (st == OP_OK && started < n && started - done < width) {
            st = spawn(platform, p, nodes, ppn, &sc[started], &jobs[started % MAX_JOBS]);
            started += st == OP_OK;
        }
        if (done == started)
            break;
        op_status_t r = reap(&jobs[done % MAX_JOBS], &out[done]);
        st = st == OP_OK ? r : st;
        done++;
    }
    return st;
}

op_status_t op_model_simulate(const struct op_model_platform *p, unsigned nodes, unsigned ppn,
                              const struct op_model_scenario *sc, size_t n,
                              struct op_model_result *out)
{
    op_status_t st = check(p, nodes, ppn, sc, n);
    if (st != OP_OK)
        return st;
    char path[] = "/tmp/offpath-model-XXXXXX";
    int pf = mkstemp(path);
    FILE *f = pf < 0 ? NULL : fdopen(pf, "w");
    if (f == NULL) {
        if (pf >= 0)
            close(pf);
        return op_status_from_errno(errno);
    }
    mdl_platform_write(p, nodes, f);
    st = fclose(f) == 0 ? OP_OK : op_status_from_errno(errno);
    if (st == OP_OK)
        st = run_all(path, p, nodes, ppn, sc, n, out);
    unlink(path);
    return st;
}
