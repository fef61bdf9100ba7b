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
#define EXTRA_RUNS 6 /* more runs at most of a cell that disagrees with itself */
#define RUNS_MAX MDL_RUNS_MAX
_Static_assert(INC_RUNS + EXTRA_RUNS <= MDL_RUNS_MAX, "a cell's runs fit");

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double mdl_median(double *v, size_t n)
{
    qsort(v, n, sizeof(v[0]), cmp_double);
    return v[n / 2];
}

/* ---- other users' work during a run
 * The model predicts this machine with its cores to ourselves (and the
 * spinners, which only take what nobody wants). A run during which someone
 * else's build took the cores measured something else: 2-17x slower here
 * in runs minutes apart. So every run notes the share of the cores that
 * work neither ours nor the spinners' took (/proc/stat's busy time less the
 * CPU of this process, of our reaped children and of our live ones: the
 * spinners, our own switch),
 * and a cell's figure comes from its least disturbed runs. */

/* Busy CPU seconds of every core since boot (/proc/stat, USER_HZ ticks:
 * user, nice, system, irq, softirq and steal, the hypervisor's other guests). */
static double machine_busy_s(void)
{
    unsigned long long t[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (f == NULL)
        return 0;
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &t[0], &t[1], &t[2], &t[3],
                     &t[4], &t[5], &t[6], &t[7]);
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (got != 8 || hz <= 0)
        return 0;
    return (double)(t[0] + t[1] + t[2] + t[5] + t[6] + t[7]) / (double)hz;
}

static double run_time_s(pid_t pid);

/* CPU of our live children (the spinners, a switch of ours). */
static double live_children_s(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
    FILE *f = fopen(path, "r");
    double sum = 0;
    int pid;
    while (f != NULL && fscanf(f, "%d", &pid) == 1) {
        double t = run_time_s(pid);
        sum += t > 0 ? t : 0;
    }
    if (f != NULL)
        fclose(f);
    return sum;
}

static double rusage_s(int who);
static double children_cpu_s(void);

void mdl_busy_mark(struct mdl_busy *m, double also_ours_s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    m->wall_s = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    m->busy_s = machine_busy_s();
    m->ours_s = rusage_s(RUSAGE_SELF) + children_cpu_s() + live_children_s() + also_ours_s;
}

double mdl_others_share(const struct mdl_busy *a, double also_ours_s)
{
    struct mdl_busy b;
    mdl_busy_mark(&b, also_ours_s);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double cap = (b.wall_s - a->wall_s) * (double)(cores > 0 ? cores : 1);
    double others = (b.busy_s - a->busy_s) - (b.ours_s - a->ours_s);
    return cap > 0 ? fmin(fmax(others / cap, 0), 1) : 0;
}

/* ---- a cell's runs and its figure */

/* Others took at most this share of the cores: a quiet run (USER_HZ ticks
 * make a second's share good to ~1 %). */
#define QUIET_SHARE 0.10
#define KEEP_MIN 3

void mdl_runs_add(struct mdl_runs *r, double v, double q)
{
    if (r->n < RUNS_MAX) {
        r->v[r->n] = v;
        r->q[r->n++] = q;
    }
}

static unsigned quiet_runs(const struct mdl_runs *r)
{
    unsigned n = 0;
    for (unsigned i = 0; i < r->n; i++)
        n += r->q[i] <= QUIET_SHARE;
    return n;
}

/* The runs kept: the quiet ones, or where fewer than KEEP_MIN were, the
 * least disturbed half (at least KEEP_MIN); sorted by figure. */
static unsigned kept_runs(const struct mdl_runs *r, double *kept)
{
    unsigned half = (r->n + 1) / 2, quiet = quiet_runs(r), n = 0;
    unsigned take = quiet >= KEEP_MIN ? quiet : half > KEEP_MIN ? half : KEEP_MIN;
    bool used[RUNS_MAX] = {false};
    take = take < r->n ? take : r->n;
    while (n < take) {
        int best = -1;
        for (unsigned i = 0; i < r->n; i++)
            if (!used[i] && (best < 0 || r->q[i] < r->q[best]))
                best = (int)i;
        used[best] = true;
        kept[n++] = r->v[best];
    }
    qsort(kept, n, sizeof(kept[0]), cmp_double);
    return n;
}

/* The figure of the kept runs: from five on, the mean of all but the
 * lowest and the highest; below, their median. inc_test's latency here has
 * two modes by where the scheduler puts the processes (2 leaders, 4 B:
 * 13-16 us or 31-34 us in runs a second apart, now and then 63): a median
 * jumps from one mode to the other as their shares move around a half,
 * the trimmed mean moves with the shares (`median`: the median all the
 * same). The spread: the lowest and the highest of the runs it averages. */
void mdl_runs_figure(const struct mdl_runs *r, double *us, struct mdl_spread *sp, bool median)
{
    double v[RUNS_MAX], sum = 0;
    unsigned n = r->n > 0 ? kept_runs(r, v) : (v[0] = 0, 1), cut = n >= 5;
    for (unsigned i = cut; i + cut < n; i++)
        sum += v[i];
    *us = n >= 5 && !median ? sum / (double)(n - 2) : v[n / 2];
    if (sp != NULL)
        *sp = (struct mdl_spread){.lo = v[cut], .hi = v[n - 1 - cut], .kept = n, .runs = r->n,
                                  .quiet = quiet_runs(r)};
}

/* A cell disagrees with itself when the runs its figure averages reach
 * beyond the tolerance either side of it: the measurement alone could not
 * place the model within it. (Too few quiet runs is no reason for more: on
 * a machine busy throughout, more runs would be as disturbed.) */
bool mdl_runs_unsettled(const struct mdl_runs *r, double tolerance)
{
    double us;
    struct mdl_spread sp;
    mdl_runs_figure(r, &us, &sp, false);
    return sp.lo < us * (1 - tolerance) || sp.hi > us * (1 + tolerance);
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

/* CPU (user + system) of this process (RUSAGE_SELF) or of every descendant
 * reaped so far (RUSAGE_CHILDREN: inc_test reaps its leaders and switches,
 * the shell reaps inc_test). */
static double rusage_s(int who)
{
    struct rusage u;
    if (getrusage(who, &u) != 0)
        return 0;
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

static double children_cpu_s(void)
{
    return rusage_s(RUSAGE_CHILDREN);
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

/* The CPU a call of a run of `calls` calls (s), less that of a run of one
 * call (start, join, leave), over the other calls (us). */
static double cpu_a_call(double run_s, double one_s, unsigned calls)
{
    return (run_s - one_s) / (calls - 1) * 1e6;
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
    double c[MDL_MEASURE_MAX][INC_RUNS], sc[MDL_MEASURE_MAX][INC_RUNS], p50, one, sw_one;
    struct mdl_runs v[MDL_MEASURE_MAX] = {0};
    struct own_switch sw = {0};
    if (n > MDL_MEASURE_MAX || (cpu_us != NULL && !switch_start(cfg, leaders, &sw)))
        return false;
    const struct own_switch *own = cpu_us != NULL ? &sw : NULL;
    bool ok = true;
    for (int k = 0; k < INC_RUNS && ok; k++)
        for (size_t i = 0; i < n && ok; i++) {
            unsigned iters = sizes[i] >= 65536 ? cfg->iters / 10 + 1 : cfg->iters, warmup = 5;
            struct mdl_busy m;
            mdl_busy_mark(&m, 0);
            ok = inc_run(cfg, leaders, sizes[i], iters, warmup, own, &p50, &c[i][k], &sc[i][k]);
            mdl_runs_add(&v[i], p50, mdl_others_share(&m, 0));
            if (!ok || own == NULL)
                continue;
            ok = inc_run(cfg, leaders, sizes[i], 1, 0, own, &p50, &one, &sw_one);
            c[i][k] = cpu_a_call(c[i][k], one, iters + warmup);
            sc[i][k] = cpu_a_call(sc[i][k], sw_one, iters + warmup);
        }
    switch_stop(&sw);
    for (size_t i = 0; i < n && ok; i++) {
        mdl_runs_figure(&v[i], &us[i], NULL, false);
        if (own != NULL) {
            cpu_us[i] = fmax(mdl_median(c[i], INC_RUNS), 0);
            sw_cpu_us[i] = fmax(mdl_median(sc[i], INC_RUNS), 0);
        }
    }
    return ok;
}

/* One run of inc_test for a cell, noted with others' share of the cores;
 * with cpu, also the CPU a call of inc_test's processes (a run of one call
 * more). */
static bool inc_cell_run(const struct op_model_cfg *cfg, unsigned leaders, uint64_t bytes,
                         struct mdl_runs *r, double *cpu)
{
    unsigned iters = bytes >= 65536 ? cfg->iters / 10 + 1 : cfg->iters, warmup = 5;
    double p50, run_s, one_s, sw_cpu;
    struct mdl_busy m;
    mdl_busy_mark(&m, 0);
    if (!inc_run(cfg, leaders, bytes, iters, warmup, NULL, &p50, &run_s, &sw_cpu))
        return false;
    mdl_runs_add(r, p50, mdl_others_share(&m, 0));
    if (cpu == NULL)
        return true;
    if (!inc_run(cfg, leaders, bytes, 1, 0, NULL, &p50, &one_s, &sw_cpu))
        return false;
    *cpu = cpu_a_call(run_s, one_s, iters + warmup);
    return true;
}

/* Each of n cells' (leaders, bytes) figure of inc_test's p50 (us) and its
 * spread, measured in rounds: run k of every cell, then run k + 1, so that
 * the machine's moods (other users' work, where the scheduler puts the
 * processes) fall on every cell alike, a calibration's and a validation's.
 * After INC_RUNS rounds, the cells that disagree with themselves get up to
 * EXTRA_RUNS more rounds of their own. The CPU a call is measured in the
 * same runs (eleventh session): calibrate's own runs of the same cells
 * caught the machine in another mood (2 leaders x 256 KiB: 819 us a call
 * there, 458 in validate's rounds, and 1865 us of CPU a call against
 * 2040-2130 in runs of the fast mode). */
bool mdl_measure_inc_cells(const struct op_model_cfg *cfg, const unsigned *leaders,
                           const uint64_t *sizes, size_t n, double *us, struct mdl_spread *sp,
                           double *cpu_us)
{
    static struct mdl_runs v[MDL_CELLS_MAX];
    double cpu[MDL_CELLS_MAX][RUNS_MAX]; /* each cell's runs' CPU a call */
    if (n > MDL_CELLS_MAX)
        return false;
    memset(v, 0, sizeof(v));
    for (int k = 0; k < INC_RUNS + EXTRA_RUNS; k++) {
        size_t todo = 0;
        for (size_t i = 0; i < n; i++)
            todo += k < INC_RUNS || mdl_runs_unsettled(&v[i], cfg->tolerance);
        if (todo == 0)
            break;
        fprintf(stderr, "offpath model: measuring inc_test, round %d (%zu cells)\n", k + 1, todo);
        for (size_t i = 0; i < n; i++) {
            bool cpu_too = cpu_us != NULL && sizes[i] >= MDL_CPU_MIN_BYTES;
            if ((k < INC_RUNS || mdl_runs_unsettled(&v[i], cfg->tolerance)) &&
                !inc_cell_run(cfg, leaders[i], sizes[i], &v[i], cpu_too ? &cpu[i][v[i].n] : NULL))
                return false;
        }
    }
    for (size_t i = 0; i < n; i++) {
        mdl_runs_figure(&v[i], &us[i], sp != NULL ? &sp[i] : NULL, false);
        if (cpu_us != NULL)
            cpu_us[i] = sizes[i] >= MDL_CPU_MIN_BYTES ? fmax(mdl_median(cpu[i], v[i].n), 0) : 0;
    }
    return true;
}

/* The median of `runs` runs of a shell command that prints one positive
 * figure; -1 when one fails. */
double mdl_median_of_runs(const char *cmd, unsigned runs)
{
    double v[RUNS_MAX];
    char buf[1024];
    runs = runs < RUNS_MAX ? runs : RUNS_MAX;
    for (unsigned k = 0; k < runs; k++) {
        char *end;
        if (!mdl_run_cmd(cmd, buf, sizeof(buf)) || (v[k] = strtod(buf, &end), end == buf) ||
            !(v[k] > 0))
            return -1;
    }
    return mdl_median(v, runs);
}

/* One-way latency of a 64-byte UD SEND between two processes that sleep in
 * poll(2) as the leaders and the switch do (perftest's typical latency, half
 * the round trip), median of INC_RUNS runs; -1 on failure. The server is
 * bounded by timeout(1) in case the client never comes. */
double mdl_measure_hop(const struct op_model_cfg *cfg)
{
    char nice[32], cmd[2048];
    const char *pre = mdl_nice_prefix(cfg, nice, sizeof(nice));
    snprintf(cmd, sizeof(cmd),
             "%stimeout 30 '%s' ib_send_lat -p %u -d 127.%u.0.201 -e -c UD -s 64 -n 2000 "
             ">/dev/null 2>&1 & s=$!; sleep 0.3; "
             "%stimeout 30 '%s' ib_send_lat -p %u -d 127.%u.0.202 -e -c UD -s 64 -n 2000 "
             "--output=latency 127.%u.0.201 2>/dev/null; r=$?; wait $s; exit $r",
             pre, cfg->bin, cfg->port + 1, cfg->net + 2, pre, cfg->bin, cfg->port + 1,
             cfg->net + 2, cfg->net + 2);
    return mdl_median_of_runs(cmd, INC_RUNS);
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

/* One osu_allreduce job: each size's average (us) into its cell's runs,
 * all noted with others' share of the cores during the job. A job that
 * failed to start (Open MPI's own start-up) gets one more try. */
static bool osu_run(const char *cmd, const uint64_t *sizes, size_t n, struct mdl_runs *cells)
{
    char buf[8192];
    double us[MDL_MEASURE_MAX];
    struct mdl_busy m;
    mdl_busy_mark(&m, 0);
    if (!mdl_run_cmd(cmd, buf, sizeof(buf)) && (mdl_busy_mark(&m, 0), !mdl_run_cmd(cmd, buf, sizeof(buf))))
        return false;
    if (!osu_parse(buf, sizes, n, us))
        return false;
    double q = mdl_others_share(&m, 0);
    for (size_t i = 0; i < n; i++)
        mdl_runs_add(&cells[i], us[i], q);
    return true;
}

/* osu_allreduce under `offpath mpirun` (job: nodes, ranks a node, sockets,
 * mode): each of n sizes' average latency (OSU's figure, us) from OSU_RUNS
 * runs, more (up to EXTRA_RUNS) while a size disagrees with itself, and
 * with sp its spread. False when a run fails or lacks a size. */
bool mdl_measure_osu(const struct op_model_cfg *cfg, const struct mdl_job *job,
                     const uint64_t *sizes, size_t n, double *us, struct mdl_spread *sp)
{
    struct mdl_runs cells[MDL_MEASURE_MAX] = {0};
    char nice[32], cmd[2048], flags[160], iters[48];
    if (n == 0 || n > MDL_MEASURE_MAX)
        return n == 0;
    osu_flags(job, flags, sizeof(flags));
    osu_iters(cfg, iters, sizeof(iters));
    snprintf(cmd, sizeof(cmd),
             "%s'%s' mpirun --nodes %u %s --net %u --port %u -- "
             "'%s' osu_allreduce -m %llu:%llu%s 2>/dev/null",
             mdl_nice_prefix(cfg, nice, sizeof(nice)), cfg->bin, job->nodes, flags, cfg->net,
             cfg->port + 2, cfg->bin, (unsigned long long)sizes[0],
             (unsigned long long)sizes[n - 1], iters);
    for (int k = 0; k < OSU_RUNS + EXTRA_RUNS; k++) {
        bool more = k < OSU_RUNS;
        for (size_t i = 0; i < n && !more; i++)
            more = mdl_runs_unsettled(&cells[i], cfg->tolerance);
        if (!more)
            break;
        if (!osu_run(cmd, sizes, n, cells))
            return false;
    }
    /* One node's two ranks (Open MPI's shared memory, both polling) stall
     * now and then for seconds on the loaded cores: 4 B averaged 3.2 and
     * 4.1 ms in such runs where it takes 0.4 us, and in two of five runs;
     * their median does not move. Two modes elsewhere (15 or 60 us at 2
     * nodes, 4 B): the trimmed mean. */
    for (size_t i = 0; i < n; i++)
        mdl_runs_figure(&cells[i], &us[i], sp != NULL ? &sp[i] : NULL, job->nodes == 1);
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
