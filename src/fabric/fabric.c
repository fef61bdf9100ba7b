/* Switch processes of a topology: start, wait until listening, stop. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "offpath/fabric.h"

struct op_fabric {
    struct op_fabric_opts o;
    struct op_topo topo;
    pid_t pid[OP_TOPO_MAX_SWITCHES];
    int counters[OP_TOPO_MAX_SWITCHES]; /* the read end of each switch's counter pipe */
    pid_t owner;
};

/* Where switch i leaves a file of kind ext ("pcap") for the owner. */
static void switch_file(const struct op_fabric *f, int i, const char *ext, char *out, size_t len)
{
    snprintf(out, len, "%s/offpath-fabric-%d-%s.%s", f->o.workdir ? f->o.workdir : "/tmp",
             (int)f->owner, f->topo.sw[i].name, ext);
}

/* A forked child starts as an exec'd program would: the parent's signal
 * handlers are not the switch's (exec resets caught signals to default and
 * keeps ignored ones, so does this). */
static void reset_handlers(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL &&
            sa.sa_handler != SIG_IGN) {
            sa.sa_handler = SIG_DFL;
            sa.sa_flags = 0;
            (void)sigaction(sig, &sa, NULL);
        }
    }
}

/* Switch i's configuration: the engine's defaults, the fabric's limits and
 * faults; it says "ready" on one pipe and sends its counters on another. */
static void switch_config(const struct op_fabric *f, int i, int ready_fd, int counters_fd,
                          struct op_sw_run_config *rc)
{
    const struct op_fabric_opts *o = &f->o;
    bool faults = o->faulty == NULL || strcmp(o->faulty, f->topo.sw[i].name) == 0;
    *rc = (struct op_sw_run_config){.drop_rate = faults ? o->drop_rate : 0,
                                    .dup_rate = faults ? o->dup_rate : 0,
                                    .delay_us = faults ? o->delay_us : 0, .ready_fd = ready_fd,
                                    .counters_fd = counters_fd, .udp_batching = o->udp_batching};
    op_sw_config_default(&rc->sw);
    rc->sw.topo = &f->topo;
    rc->sw.self = i;
    if (o->window)
        rc->sw.window = o->window;
    if (o->max_data)
        rc->sw.max_data = o->max_data;
}

/* The child's whole life: run switch i until SIGTERM, then leave without
 * running the parent's exit handlers or flushing its stdio buffers. */
static _Noreturn void run_switch(const struct op_fabric *f, int i, int ready_fd, int counters_fd,
                                 pid_t parent)
{
    char pcap[600];
    struct op_sw_run_config rc;
    struct op_log log;
    reset_handlers();
    /* an owner killed outright (kill -9, a test's timeout) must not leave its
     * switches holding the fabric's addresses for every later job */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
        _exit(1);
    /* the switch's counters come back through their pipe, not its report */
    (void)!freopen("/dev/null", "w", stdout);
    if (f->o.enter != NULL && f->o.enter(i, f->o.enter_ctx) != OP_OK)
        _exit(1);
    switch_config(f, i, ready_fd, counters_fd, &rc);
    if (f->o.configure != NULL && f->o.configure(i, &rc, f->o.enter_ctx) != OP_OK)
        _exit(1);
    op_log_init(&log, "switch", OP_LOG_WARNING);
    rc.sw.log = &log;
    switch_file(f, i, "pcap", pcap, sizeof(pcap));
    op_status_t st = f->o.pcap != NULL ? op_pcap_open(pcap, &rc.pcap) : OP_OK;
    if (st == OP_OK)
        st = op_sw_run(&rc);
    op_status_t closed = rc.pcap != NULL ? op_pcap_close(rc.pcap) : OP_OK;
    if (st == OP_OK)
        st = closed;
    if (st != OP_OK)
        fprintf(stderr, "offpath: switch %s: %s\n", f->topo.sw[i].name, op_status_str(st));
    _exit(st == OP_OK ? 0 : 1);
}

static bool wait_ready(int fd)
{
    char buf[8] = {0};
    return op_io_wait_fd(fd, OP_IO_IN, op_io_deadline_in_ms(5000)) == 1 &&
           read(fd, buf, sizeof(buf) - 1) > 0 &&
           strncmp(buf, "ready", 5) == 0;
}

static bool start_one(struct op_fabric *f, int i)
{
    int p[2], c[2];
    if (pipe(p) != 0)
        return false;
    if (pipe(c) != 0) {
        close(p[0]);
        close(p[1]);
        return false;
    }
    /* what the parent has buffered must not be written twice */
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    f->pid[i] = fork();
    if (f->pid[i] == 0) {
        close(p[0]);
        close(c[0]);
        for (int k = 0; k < i; k++) /* the earlier switches' pipes are the owner's */
            close(f->counters[k]);
        run_switch(f, i, p[1], c[1], parent);
    }
    close(p[1]);
    close(c[1]);
    f->counters[i] = f->pid[i] > 0 ? c[0] : (close(c[0]), -1);
    bool ok = f->pid[i] > 0 && wait_ready(p[0]);
    close(p[0]);
    return ok;
}

static void stop(struct op_fabric *f, uint64_t totals[OP_SW_C_COUNT_], bool ran);

op_status_t op_fabric_start(const struct op_fabric_opts *o, const struct op_topo *topo,
                            struct op_fabric **out, char *err, size_t errlen)
{
    if (o->faulty != NULL && op_topo_find(topo, o->faulty) < 0) {
        snprintf(err, errlen, "no switch '%s' in the topology", o->faulty);
        return OP_ERR_INVAL;
    }
    struct op_fabric *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return OP_ERR_NOMEM;
    f->o = *o;
    f->topo = *topo;
    f->owner = getpid();
    for (int i = 0; i < f->topo.n; i++) {
        if (!start_one(f, i)) {
            snprintf(err, errlen, "switch %s did not start", f->topo.sw[i].name);
            stop(f, NULL, false);
            return OP_ERR_IO;
        }
    }
    *out = f;
    return OP_OK;
}

/* Switch i's counters, sent as it exits, added to totals (a switch that
 * died before it could send adds nothing). */
static void collect(struct op_fabric *f, int i, uint64_t totals[])
{
    uint64_t v[OP_SW_C_COUNT_];
    if (totals != NULL && op_counter_set_read(f->counters[i], v, OP_SW_C_COUNT_) == OP_OK)
        for (unsigned c = 0; c < OP_SW_C_COUNT_; c++)
            totals[c] += v[c];
    close(f->counters[i]);
    f->counters[i] = -1;
}

/* The switches' captures into one file in time order, as one capture point
 * would have written it (merge false: a start that failed, no run to keep). */
static void take_captures(const struct op_fabric *f, bool merge)
{
    char paths[OP_TOPO_MAX_SWITCHES][600];
    const char *p[OP_TOPO_MAX_SWITCHES];
    for (int i = 0; i < f->topo.n; i++) {
        switch_file(f, i, "pcap", paths[i], sizeof(paths[i]));
        p[i] = paths[i];
    }
    if (merge)
        (void)op_pcap_merge(f->o.pcap, p, f->topo.n); /* a failure sticks in the writer */
    for (int i = 0; i < f->topo.n; i++)
        unlink(paths[i]);
}

static void stop(struct op_fabric *f, uint64_t totals[OP_SW_C_COUNT_], bool ran)
{
    for (int i = 0; i < f->topo.n; i++)
        if (f->pid[i] > 0)
            kill(f->pid[i], SIGTERM);
    for (int i = 0; i < f->topo.n; i++) {
        if (f->pid[i] <= 0)
            continue;
        waitpid(f->pid[i], NULL, 0);
        collect(f, i, totals);
    }
    if (f->o.pcap != NULL)
        take_captures(f, ran);
    free(f);
}

void op_fabric_stop(struct op_fabric *f, uint64_t totals[OP_SW_C_COUNT_])
{
    if (f != NULL)
        stop(f, totals, true);
}
