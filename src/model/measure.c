/* What `offpath model calibrate` and `validate` measure here, each with
 * offpath's own tools and each the median of several runs:
 *   inc_test       leaders through a software TOR (the INC path);
 *   ib_send_lat    one UDP hop between two processes that sleep in poll(2);
 *   osu_allreduce  under `offpath mpirun --mode host`: between nodes the
 *                  host path over the same UDP transport (src/hostar), and
 *                  on one node of two ranks the shared-memory reduce.
 * One runs at a time, each reaping its processes before the next starts, so
 * they share the addresses 127.N..N+2 and ports P..P+2: inc_test 127.N
 * (leaders) and N+1 (TOR), UDP port P; ib_send_lat 127.N+2.0.201 and .202
 * (SPINE addresses: inc_test has no SPINE here), TCP port P+1; mpirun
 * 127.N.., UDP port P+2. */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model_internal.h"

#define INC_RUNS 7
#define OSU_RUNS 5

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(v[0]), cmp_double);
    return v[n / 2];
}

/* The mean of all but the lowest and the highest. inc_test's latency here
 * has two modes by where the scheduler puts the processes (2 leaders, 4 B:
 * 13-16 us or 31-34 us in runs a second apart, now and then 63): a median
 * jumps from one mode to the other as their shares move around a half,
 * this mean moves with the shares. */
static double trimmed_mean(double *v, size_t n)
{
    qsort(v, n, sizeof(v[0]), cmp_double);
    double sum = 0;
    for (size_t i = 1; i + 1 < n; i++)
        sum += v[i];
    return sum / (double)(n - 2);
}

/* A cell's figure and the spread of the runs it averages (the lowest and
 * the highest of the middle ones): how far the same command moved here. */
static void summarise(double *v, size_t n, double *us, double *lo, double *hi)
{
    *us = trimmed_mean(v, n);
    if (lo != NULL)
        *lo = v[1];
    if (hi != NULL)
        *hi = v[n - 2];
}

/* Runs a shell command and keeps up to len-1 bytes of its output; false
 * when it cannot start or exits non-zero. */
bool mdl_run_cmd(const char *cmd, char *buf, size_t len)
{
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return false;
    size_t n = 0, got;
    char rest[512];
    while ((got = fread(buf + n, 1, len - 1 - n, p)) > 0 && (n += got) < len - 1)
        ;
    while (fread(rest, 1, sizeof(rest), p) > 0) /* the child must not block on a full pipe */
        ;
    buf[n] = '\0';
    return pclose(p) == 0;
}

const char *mdl_nice_prefix(const struct op_model_cfg *cfg, char *buf, size_t len)
{
    if (cfg->nice == 0)
        return "";
    snprintf(buf, len, "nice -n %d ", cfg->nice);
    return buf;
}

/* CPU (user + system) of every descendant reaped so far: inc_test reaps its
 * leaders and switches, the shell reaps inc_test. */
static double children_cpu_s(void)
{
    struct rusage u;
    if (getrusage(RUSAGE_CHILDREN, &u) != 0)
        return 0;
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

/* ---- a switch of our own, so that its CPU can be read apart */

struct own_switch {
    pid_t pid;
    char topo[64];
};

/* CPU time the process has run, from the scheduler (ns resolution, where
 * /proc/PID/stat counts 10 ms ticks). */
static double run_time_s(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long ns = 0;
    if (f == NULL)
        return -1;
    int got = fscanf(f, "%llu", &ns);
    fclose(f);
    return got == 1 ? (double)ns * 1e-9 : -1;
}

static void switch_stop(struct own_switch *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    s->pid = 0;
    if (s->topo[0])
        unlink(s->topo);
    s->topo[0] = '\0';
}

/* `offpath switch` as the TOR of a topology of `leaders` hosts laid out as
 * inc_test lays them out (127.N.0.1.., the TOR 127.N+1.0.1), started here
 * and used by inc_test --connect; false when it exited before it was ready. */
static bool switch_start(const struct op_model_cfg *cfg, unsigned leaders, struct own_switch *s)
{
    int fds[2];
    snprintf(s->topo, sizeof(s->topo), "/tmp/offpath-model-topo-XXXXXX");
    int tf = mkstemp(s->topo);
    FILE *f = tf < 0 ? NULL : fdopen(tf, "w");
    s->pid = 0;
    if (f == NULL || leaders > 254 || pipe(fds) != 0) {
        if (f != NULL)
            fclose(f);
        switch_stop(s);
        return false;
    }
    fprintf(f, "tor t0 127.%u.0.1 port %u hosts 127.%u.0.1-127.%u.0.%u\n", cfg->net + 1, cfg->port,
            cfg->net, cfg->net, leaders);
    fclose(f);
    fflush(NULL);
    s->pid = fork();
    if (s->pid == 0) {
        char fd[16];
        snprintf(fd, sizeof(fd), "%d", fds[1]);
        close(fds[0]);
        if (cfg->nice != 0)
            (void)setpriority(PRIO_PROCESS, 0, cfg->nice); /* not root: stays at 0 */
        if (freopen("/dev/null", "w", stdout) == NULL || freopen("/dev/null", "w", stderr) == NULL)
            _exit(127);
        execl(cfg->bin, cfg->bin, "switch", "--topology", s->topo, "--name", "t0", "--ready-fd",
              fd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    /* the switch writes "ready" once it listens, or exits and the pipe
     * ends: one read either way */
    char buf[16] = "";
    ssize_t got;
    while ((got = read(fds[0], buf, sizeof(buf) - 1)) < 0 && errno == EINTR)
        ;
    bool ready = s->pid > 0 && got > 0;
    close(fds[0]);
    if (!ready)
        switch_stop(s);
    return ready;
}

/* One inc_test run: its p50 (us), the CPU its own processes spent (s) and,
 * with a switch of ours (sw), the CPU that switch spent (s). */
static bool inc_run(const struct op_model_cfg *cfg, unsigned leaders, uint64_t bytes,
                    unsigned iters, unsigned warmup, const struct own_switch *sw, double *p50,
                    double *cpu, double *sw_cpu)
{
    char nice[32], cmd[1024], buf[8192], topo[96] = "";
    if (sw != NULL)
        snprintf(topo, sizeof(topo), " --connect '%s'", sw->topo);
    snprintf(cmd, sizeof(cmd),
             "%s'%s' inc_test --leaders %u --count %llu --type int32 --iters %u --warmup %u "
             "--json --quiet --net %u --port %u%s 2>/dev/null",
             mdl_nice_prefix(cfg, nice, sizeof(nice)), cfg->bin, leaders,
             (unsigned long long)(bytes / 4 ? bytes / 4 : 1), iters, warmup, cfg->net, cfg->port,
             topo);
    double before = children_cpu_s(), sw_before = sw != NULL ? run_time_s(sw->pid) : 0;
    const char *at;
    if (!mdl_run_cmd(cmd, buf, sizeof(buf)) || (at = strstr(buf, "\"p50\": ")) == NULL)
        return false;
    *cpu = children_cpu_s() - before;
    *sw_cpu = sw != NULL ? run_time_s(sw->pid) - sw_before : 0;
    *p50 = strtod(at + 7, NULL);
    return sw == NULL || sw_before >= 0;
}

/* For each of n sizes, the trimmed mean of INC_RUNS runs' p50 of inc_test
 * (us).
 * With cpu_us, the median CPU one call costs the leaders (inc_test's own
 * processes), and sw_cpu_us the switch: a run's CPU less that of a run of
 * one call (start, join, leave), over the other calls; the switch is then
 * one started here (inc_test --connect), so that its CPU reads apart. The
 * runs go round the sizes, so that a few seconds of someone else's work
 * disturb one run of several sizes, not every run of one. Not the lowest
 * p50: a run during which other work kept the cores awake comes out faster
 * than the machine is for us alone (4 leaders, 4 B: 27 us once where every
 * other run gave 55-75). The CPU figures have one mode: their median. */
bool mdl_measure_inc(const struct op_model_cfg *cfg, unsigned leaders, const uint64_t *sizes,
                     size_t n, double *us, double *cpu_us, double *sw_cpu_us)
{
    double v[MDL_MEASURE_MAX][INC_RUNS], c[MDL_MEASURE_MAX][INC_RUNS];
    double sc[MDL_MEASURE_MAX][INC_RUNS], p50, one, sw_one;
    struct own_switch sw = {0};
    if (n > MDL_MEASURE_MAX || (cpu_us != NULL && !switch_start(cfg, leaders, &sw)))
        return false;
    const struct own_switch *own = cpu_us != NULL ? &sw : NULL;
    bool ok = true;
    for (int k = 0; k < INC_RUNS && ok; k++)
        for (size_t i = 0; i < n && ok; i++) {
            unsigned iters = sizes[i] >= 65536 ? cfg->iters / 10 + 1 : cfg->iters, warmup = 5;
            ok = inc_run(cfg, leaders, sizes[i], iters, warmup, own, &v[i][k], &c[i][k],
                         &sc[i][k]);
            if (!ok || own == NULL)
                continue;
            ok = inc_run(cfg, leaders, sizes[i], 1, 0, own, &p50, &one, &sw_one);
            c[i][k] = (c[i][k] - one) / (iters + warmup - 1) * 1e6;
            sc[i][k] = (sc[i][k] - sw_one) / (iters + warmup - 1) * 1e6;
        }
    switch_stop(&sw);
    for (size_t i = 0; i < n && ok; i++) {
        us[i] = trimmed_mean(v[i], INC_RUNS);
        if (own != NULL) {
            cpu_us[i] = fmax(median(c[i], INC_RUNS), 0);
            sw_cpu_us[i] = fmax(median(sc[i], INC_RUNS), 0);
        }
    }
    return ok;
}

/* The trimmed mean of INC_RUNS runs' p50 (us) of each of n cells (leaders,
 * bytes), measured in rounds: run k of every cell, then run k + 1, so that
 * the machine's moods (other users' work, where the scheduler puts the
 * processes) fall on every cell alike, a calibration's and a validation's. */
bool mdl_measure_inc_cells(const struct op_model_cfg *cfg, const unsigned *leaders,
                           const uint64_t *sizes, size_t n, double *us, double *lo, double *hi)
{
    double v[MDL_CELLS_MAX][INC_RUNS];
    double cpu, sw_cpu;
    if (n > MDL_CELLS_MAX)
        return false;
    for (int k = 0; k < INC_RUNS; k++) {
        fprintf(stderr, "offpath model: measuring inc_test, round %d of %d\n", k + 1, INC_RUNS);
        for (size_t i = 0; i < n; i++) {
            unsigned iters = sizes[i] >= 65536 ? cfg->iters / 10 + 1 : cfg->iters;
            if (!inc_run(cfg, leaders[i], sizes[i], iters, 5, NULL, &v[i][k], &cpu, &sw_cpu))
                return false;
        }
    }
    for (size_t i = 0; i < n; i++)
        summarise(v[i], INC_RUNS, &us[i], lo != NULL ? &lo[i] : NULL, hi != NULL ? &hi[i] : NULL);
    return true;
}

/* One-way latency of a 64-byte UD SEND between two processes that sleep in
 * poll(2) as the leaders and the switch do (perftest's typical latency, half
 * the round trip), median of INC_RUNS runs; -1 on failure. The server is
 * bounded by timeout(1) in case the client never comes. */
double mdl_measure_hop(const struct op_model_cfg *cfg)
{
    double v[INC_RUNS];
    char nice[32], cmd[2048], buf[4096];
    const char *pre = mdl_nice_prefix(cfg, nice, sizeof(nice));
    for (int k = 0; k < INC_RUNS; k++) {
        snprintf(cmd, sizeof(cmd),
                 "%stimeout 30 '%s' ib_send_lat -p %u -d 127.%u.0.201 -e -c UD -s 64 -n 2000 "
                 ">/dev/null 2>&1 & s=$!; sleep 0.3; "
                 "%stimeout 30 '%s' ib_send_lat -p %u -d 127.%u.0.202 -e -c UD -s 64 -n 2000 "
                 "--output=latency 127.%u.0.201 2>/dev/null; r=$?; wait $s; exit $r",
                 pre, cfg->bin, cfg->port + 1, cfg->net + 2, pre, cfg->bin, cfg->port + 1,
                 cfg->net + 2, cfg->net + 2);
        if (!mdl_run_cmd(cmd, buf, sizeof(buf)))
            return -1;
        char *end;
        v[k] = strtod(buf, &end);
        if (end == buf || !(v[k] > 0))
            return -1;
    }
    return median(v, INC_RUNS);
}

/* The flags of an osu_allreduce job: the in-network modes use inc_test's
 * packets (1024 data bytes, the `here` platform's max_data). */
static void osu_flags(const struct mdl_job *job, char *buf, size_t len)
{
    if (strcmp(job->mode, "host") == 0)
        snprintf(buf, len, "--ppn %u --mode host", job->ppn);
    else
        snprintf(buf, len, "--ppn %u --sockets %u --mode %s --max-data 1024 --window 32",
                 job->ppn, job->sockets, job->mode);
}

/* inc_test's iteration count for every size (OSU's own, 1000 below 8 KiB,
 * made a host-path job of 13 sizes take seconds on the loaded cores); OSU's
 * own warm-up (200 below 8 KiB: with 21 the first size of a 1-node job
 * once averaged 2.6 ms where it takes 0.4 us). */
static void osu_iters(const struct op_model_cfg *cfg, char *buf, size_t len)
{
    snprintf(buf, len, " -i %u", cfg->iters);
}

/* Each size's average latency (OSU's figure, us) in a run's output; false
 * when a size is missing. */
static bool osu_parse(const char *buf, const uint64_t *sizes, size_t n, double *us)
{
    for (size_t i = 0; i < n; i++) {
        us[i] = -1;
        for (const char *line = buf; line != NULL && *line; line = strchr(line, '\n')) {
            line += *line == '\n';
            char *end;
            unsigned long long sz = strtoull(line, &end, 10);
            if (end != line && sz == sizes[i]) {
                us[i] = strtod(end, NULL);
                break;
            }
        }
        if (!(us[i] > 0))
            return false;
    }
    return true;
}

/* osu_allreduce under `offpath mpirun` (job: nodes, ranks a node, sockets,
 * mode): the average latency (OSU's figure, us) of each of n sizes, the
 * trimmed mean of OSU_RUNS runs, and with lo/hi the spread of the runs it
 * averages. False when a run fails or lacks a size. */
bool mdl_measure_osu(const struct op_model_cfg *cfg, const struct mdl_job *job,
                     const uint64_t *sizes, size_t n, double *us, double *lo, double *hi)
{
    double v[OSU_RUNS][MDL_MEASURE_MAX];
    char nice[32], cmd[2048], buf[8192], flags[160], iters[48];
    if (n == 0 || n > MDL_MEASURE_MAX)
        return n == 0;
    osu_flags(job, flags, sizeof(flags));
    osu_iters(cfg, iters, sizeof(iters));
    for (int k = 0; k < OSU_RUNS; k++) {
        snprintf(cmd, sizeof(cmd),
                 "%s'%s' mpirun --nodes %u %s --net %u --port %u -- "
                 "'%s' osu_allreduce -m %llu:%llu%s 2>/dev/null",
                 mdl_nice_prefix(cfg, nice, sizeof(nice)), cfg->bin, job->nodes, flags, cfg->net,
                 cfg->port + 2, cfg->bin, (unsigned long long)sizes[0],
                 (unsigned long long)sizes[n - 1], iters);
        /* a job that failed to start (Open MPI's own start-up) gets one more try */
        if (!mdl_run_cmd(cmd, buf, sizeof(buf)) && !mdl_run_cmd(cmd, buf, sizeof(buf)))
            return false;
        if (!osu_parse(buf, sizes, n, v[k]))
            return false;
    }
    for (size_t i = 0; i < n; i++) {
        double col[OSU_RUNS];
        for (int k = 0; k < OSU_RUNS; k++)
            col[k] = v[k][i];
        /* two modes too: 15 or 60 us at 2 nodes, 4 B */
        summarise(col, OSU_RUNS, &us[i], lo != NULL ? &lo[i] : NULL, hi != NULL ? &hi[i] : NULL);
        /* One node's two ranks (Open MPI's shared memory, both polling) stall
         * now and then for seconds on the loaded cores: 4 B averaged 3.2 and
         * 4.1 ms in such runs where it takes 0.4 us, and in two of five
         * runs; their median does not move. */
        if (job->nodes == 1)
            us[i] = median(col, OSU_RUNS);
    }
    return true;
}

/* ---- keeping the cores awake */

#define SPIN_MAX_S 1800 /* a spinner ends itself after this long whatever happens */

static _Noreturn void spin(void)
{
    struct sched_param none = {0};
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (sched_setscheduler(0, SCHED_IDLE, &none) != 0)
        _exit(0); /* at normal priority it would take the cores from what it should help */
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (volatile unsigned long i = 1;; i++) {
        if (i % (1ul << 22) != 0)
            continue;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > SPIN_MAX_S)
            _exit(0);
    }
}

/* One SCHED_IDLE spinner a core: it runs only when nothing else wants the
 * core, so it takes nothing from the measured processes, but an idle vCPU
 * never halts, and a process woken there starts in microseconds instead of
 * the ~40 us a halted vCPU takes. Whether the cores sit idle otherwise
 * depends on what else runs on the machine (the same 2-leader 4 B call
 * measured 18 and 75 us a minute apart); with the spinners it does not. */
void mdl_warm_start(struct mdl_warm *w)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    w->n = 0;
    fflush(NULL);
    for (long c = 0; c < cores && w->n < MDL_WARM_MAX; c++) {
        pid_t pid = fork();
        if (pid == 0)
            spin();
        if (pid > 0)
            w->pid[w->n++] = pid;
    }
}

void mdl_warm_stop(struct mdl_warm *w)
{
    for (unsigned i = 0; i < w->n; i++) {
        kill(w->pid[i], SIGKILL);
        while (waitpid(w->pid[i], NULL, 0) < 0 && errno == EINTR)
            ;
    }
    w->n = 0;
}
