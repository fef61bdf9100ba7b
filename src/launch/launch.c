/* offpath mpirun: topology, switches, mpirun with the library preloaded. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch_internal.h"

#define LAUNCH_MAX_ARGS 256

void op_launch_config_default(struct op_launch_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->nodes = 2;
    cfg->tors = 1;
    cfg->spines = -1;
    cfg->ppn = 1;
    cfg->sockets = 1;
    cfg->mode = OP_MODE_NODE;
    cfg->net = 60;
    cfg->port = 4791;
    cfg->deadline_ms = 5000;
    cfg->max_data = 0; /* LAUNCH_LOOPBACK_MAX_DATA, or what a --topo's MTU allows */
    cfg->window = 32;
    cfg->udp_batching = true;
    cfg->workdir = "/tmp";
}

static int first_node(const struct op_launch_config *cfg, int tor)
{
    return (int)((int64_t)tor * cfg->nodes / cfg->tors);
}

/* Rank r of node n, local index l has address 127.<net>.<n+1>.<l+1> (the
 * library computes the same); a TOR serves its nodes' whole /24s. */
static int write_topology(const struct op_launch_config *cfg, int spines, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "# written by offpath mpirun: %d nodes x %d ranks\n", cfg->nodes, cfg->ppn);
    for (int s = 0; s < spines; s++)
        fprintf(f, "spine s%d 127.%u.0.%d port %u\n", s, cfg->net + 2u, s + 1, cfg->port);
    for (int t = 0; t < cfg->tors; t++) {
        fprintf(f, "tor t%d 127.%u.0.%d port %u hosts 127.%u.%d.1-127.%u.%d.254", t,
                cfg->net + 1u, t + 1, cfg->port, cfg->net, first_node(cfg, t) + 1, cfg->net,
                first_node(cfg, t + 1));
        for (int s = 0; s < spines; s++)
            fprintf(f, "%s%d", s ? ",s" : " spines s", s);
        fprintf(f, "\n");
    }
    return fclose(f);
}

/* liboffpath_mpi.so (Open MPI) or liboffpath_mpich.so, looked for next to
 * the binary: build/src/cli/../mpi in a build tree, the prefix's libdir when
 * installed (the multiarch one or plain ../lib if the prefix was moved). */
bool op_launch_lib_path(const char *self_exe, enum op_launch_mpi mpi, char *out, size_t len)
{
    const char *name = mpi == OP_LAUNCH_MPICH ? "liboffpath_mpich.so" : "liboffpath_mpi.so";
    const char *const rel[] = {"../mpi", "../src/mpi", OP_REL_LIBDIR, "../lib", "."};
    return op_path_find(self_exe, rel, sizeof(rel) / sizeof(rel[0]), name, R_OK, out, len);
}

static bool find_lib(const struct op_launch_config *cfg, char *out, size_t len)
{
    if (cfg->lib != NULL) {
        snprintf(out, len, "%s", cfg->lib);
        return access(out, R_OK) == 0;
    }
    return op_launch_lib_path(cfg->self_exe, cfg->mpi, out, len);
}

static void set_env(const struct op_launch_config *cfg, const char *topo)
{
    char v[64];
    setenv("OFFPATH_MODE", op_mode_name(cfg->mode), 1);
    /* the switches inject on what they send; host mode's leaders on theirs */
    snprintf(v, sizeof(v), "%g", cfg->drop_rate);
    setenv("OFFPATH_DROP_RATE", v, 1);
    snprintf(v, sizeof(v), "%g", cfg->dup_rate);
    setenv("OFFPATH_DUP_RATE", v, 1);
    setenv("OFFPATH_TOPOLOGY", topo, 1);
    snprintf(v, sizeof(v), "%d", cfg->ppn);
    setenv("OFFPATH_PPN", v, 1);
    snprintf(v, sizeof(v), "%d", cfg->sockets);
    setenv("OFFPATH_SOCKETS", v, 1);
    snprintf(v, sizeof(v), "%u", cfg->net);
    setenv("OFFPATH_NET", v, 1);
    snprintf(v, sizeof(v), "%u", cfg->port);
    setenv("OFFPATH_PORT", v, 1);
    snprintf(v, sizeof(v), "%d", cfg->verbose);
    setenv("OFFPATH_VERBOSE", v, 1);
    snprintf(v, sizeof(v), "%llu", (unsigned long long)cfg->deadline_ms);
    setenv("OFFPATH_DEADLINE_MS", v, 1);
    snprintf(v, sizeof(v), "%d", (int)getpid());
    setenv("OFFPATH_JOB", v, 1);
    setenv("OFFPATH_MPI", cfg->mpi == OP_LAUNCH_MPICH ? "mpich" : "openmpi", 1);
    if (cfg->spin_us != NULL)
        setenv("OFFPATH_SPIN_US", cfg->spin_us, 1);
    /* Open MPI refuses root unless told twice; these machines run as root */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
}

static const char *const forwarded[] = {
    "OFFPATH_MODE", "OFFPATH_TOPOLOGY", "OFFPATH_PPN", "OFFPATH_SOCKETS", "OFFPATH_NET",
    "OFFPATH_PORT", "OFFPATH_VERBOSE", "OFFPATH_DEADLINE_MS", "OFFPATH_JOB", "OFFPATH_MPI",
    "OFFPATH_DROP_RATE", "OFFPATH_DUP_RATE",
};

struct argv_buf {
    char *v[LAUNCH_MAX_ARGS];
    char store[LAUNCH_MAX_ARGS][4224]; /* a path fits */
    int n;
};

static void add(struct argv_buf *a, const char *fmt, const char *s)
{
    if (a->n >= LAUNCH_MAX_ARGS - 1)
        return;
    snprintf(a->store[a->n], sizeof(a->store[0]), fmt, s ? s : "");
    a->v[a->n] = a->store[a->n];
    a->n++;
}

static void add_mca(struct argv_buf *a, const char *name, const char *value)
{
    add(a, "%s", "--mca");
    add(a, "%s", name);
    add(a, "%s", value);
}

/* On a namespace topology the program runs under `offpath topo_rank`, which
 * enters the rank's host and preloads the library into the program only.
 * MPI's own traffic goes over TCP between the hosts' addresses, across the
 * links (Open MPI: the hosts' prefix; MPICH's UCX: TCP, not shared memory,
 * which would reach the other namespaces directly). */
static void add_topo_rank(const struct op_launch_config *cfg, const struct launch_ns *ns,
                          const char *lib, struct argv_buf *a)
{
    char ppn[16];
    snprintf(ppn, sizeof(ppn), "%d", cfg->ppn);
    add(a, "%s", cfg->self_exe);
    add(a, "%s", "topo_rank");
    add(a, "%s", "--ppn");
    add(a, "%s", ppn);
    if (lib != NULL) {
        add(a, "%s", "--preload");
        add(a, "%s", lib);
    }
    add(a, "%s", ns->file);
    add(a, "%s", "--");
}

static void build_argv(const struct op_launch_config *cfg, const struct launch_ns *ns,
                       const char *lib, struct argv_buf *a)
{
    char np[16];
    snprintf(np, sizeof(np), "%d", cfg->nodes * cfg->ppn);
    bool ompi = cfg->mpi == OP_LAUNCH_OPENMPI;
    const char *preload = ns == NULL ? lib : NULL;
    add(a, "%s", ompi ? "mpirun.openmpi" : "mpirun.mpich");
    add(a, "%s", "-np");
    add(a, "%s", np);
    if (ompi) {
        /* oversubscription makes idle ranks yield: 16 ranks on 2 cores progress */
        add(a, "%s", "--oversubscribe");
        add(a, "%s", "--bind-to");
        add(a, "%s", "none");
        if (cfg->tcp || ns != NULL)
            add_mca(a, "btl", "tcp,self");
        if (ns != NULL) {
            add_mca(a, "btl_tcp_if_include", ns->hosts_cidr);
            add(a, "%s", "-x");
            add(a, "%s", "OFFPATH_MTU");
        }
        for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
            add(a, "%s", "-x");
            add(a, "%s", forwarded[i]);
        }
        if (cfg->spin_us != NULL) { /* `-x` of an unset variable makes Open MPI warn */
            add(a, "%s", "-x");
            add(a, "%s", "OFFPATH_SPIN_US");
        }
        if (preload != NULL) {
            add(a, "%s", "-x");
            add(a, "LD_PRELOAD=%s", preload);
        }
    } else if (preload != NULL) {
        add(a, "%s", "-genv");
        add(a, "%s", "LD_PRELOAD");
        add(a, "%s", preload);
    }
    if (!ompi && ns != NULL) {
        add(a, "%s", "-genv");
        add(a, "%s", "UCX_TLS");
        add(a, "%s", "tcp,self");
    }
    if (ns != NULL)
        add_topo_rank(cfg, ns, lib, a);
    for (int i = 0; i < cfg->argc; i++)
        a->v[a->n++] = cfg->argv[i];
    a->v[a->n] = NULL;
}

/* The signal that asked a launcher on a namespace topology to stop (0:
 * none): the handler leaves the mark, the launcher forwards it to mpirun and
 * takes down what it built. The one mutable static: signals need it. */
static volatile sig_atomic_t stop_signal;

static void note_signal(int sig) { stop_signal = sig; }

static void catch_stop_signals(void)
{
    /* no SA_RESTART: the wait for mpirun returns to forward the signal */
    struct sigaction sa = {.sa_handler = note_signal};
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        (void)sigaction(sigs[i], &sa, NULL);
}

static int wait_job(pid_t pid)
{
    int status = 0;
    bool forwarded = false;
    for (;;) {
        if (stop_signal != 0 && !forwarded) {
            (void)kill(pid, SIGTERM); /* mpirun stops its ranks */
            forwarded = true;
        }
        if (waitpid(pid, &status, 0) == pid)
            break;
        if (errno != EINTR)
            return 2;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int run_mpirun(const struct op_launch_config *cfg, const struct launch_ns *ns,
                      const char *lib)
{
    struct argv_buf *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return 2;
    build_argv(cfg, ns, lib, a);
    if (cfg->verbose > 1) {
        for (int i = 0; i < a->n; i++)
            fprintf(stderr, "%s%s", i ? " " : "offpath mpirun: ", a->v[i]);
        fprintf(stderr, "\n");
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* A launcher killed outright (a test's timeout, kill -9) must not
         * leave the MPI job running: it would hold its addresses and ports
         * for every later job. SIGTERM lets mpirun stop its ranks. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
            _exit(126);
        execvp(a->v[0], a->v);
        fprintf(stderr, "offpath mpirun: cannot run %s: %s\n", a->v[0], strerror(errno));
        _exit(127);
    }
    free(a);
    return pid < 0 ? 2 : wait_job(pid);
}

static void report_switches(const uint64_t t[])
{
    const struct op_counter_set s = {op_sw_counter_names(), t, OP_SW_C_COUNT_};
    (void)op_counter_set_render(
        stderr, &s,
        "offpath mpirun: switches aggregated {chunks_aggregated} chunks ({contributions} "
        "contributions); {retransmissions} retransmissions, {duplicates} duplicates, "
        "{injected_drops} injected drops; groups created {groups_created}, freed "
        "{groups_freed}\n");
}

struct job {
    struct op_launch_config cfg;
    char topo_path[512], lib[4096];
    bool own_topo; /* topo_path is this job's to remove */
    struct launch_ns *ns;
    struct op_topo topo;
    struct op_fabric *fabric;
};

/* The switches' fabric file: written for loopback, derived from --topo
 * (bringing the namespaces up), or --connect's. 0 or an exit status. */
static int prepare_topology(struct job *j)
{
    struct op_launch_config *cfg = &j->cfg;
    char err[300];
    j->own_topo = cfg->connect == NULL;
    if (j->own_topo)
        snprintf(j->topo_path, sizeof(j->topo_path), "%s/offpath-mpirun-%d.topo", cfg->workdir,
                 (int)getpid());
    else
        snprintf(j->topo_path, sizeof(j->topo_path), "%s", cfg->connect);
    if (cfg->topo != NULL) {
        j->ns = calloc(1, sizeof(*j->ns));
        int rc = j->ns == NULL ? 2 : launch_ns_open(j->ns, cfg, j->topo_path);
        if (rc != 0)
            return rc;
    } else if (j->own_topo) {
        int spines = cfg->spines >= 0 ? cfg->spines : cfg->tors >= 2;
        if (write_topology(cfg, spines, j->topo_path) != 0) {
            fprintf(stderr, "offpath mpirun: cannot write %s: %s\n", j->topo_path,
                    strerror(errno));
            return 2;
        }
    }
    if (op_topo_load(j->topo_path, &j->topo, err, sizeof(err)) != OP_OK) {
        fprintf(stderr, "offpath mpirun: topology %s\n", err);
        return 2;
    }
    return 0;
}

static int start_switches(struct job *j)
{
    const struct op_launch_config *cfg = &j->cfg;
    char err[300];
    if (cfg->mode == OP_MODE_OFF || cfg->mode == OP_MODE_HOST || !j->own_topo)
        return 0;
    if (j->ns != NULL && !j->ns->brought_up && op_nstopo_has_switches(&j->ns->t, NULL)) {
        if (cfg->verbose) /* `topo up`'s own: their counters are theirs */
            fprintf(stderr, "offpath mpirun: the switches `offpath topo up` started on the "
                            "path serve the job (counters: /run/offpath/topo-%s-*.log at down)\n",
                    j->ns->t.name);
        return 0;
    }
    if (cfg->fault_switch != NULL && op_topo_find(&j->topo, cfg->fault_switch) < 0) {
        fprintf(stderr, "offpath mpirun: --fault-switch %s: no such switch in the topology\n",
                cfg->fault_switch);
        return 2;
    }
    struct op_fabric_opts o = {.workdir = cfg->workdir, .drop_rate = cfg->drop_rate,
                               .dup_rate = cfg->dup_rate, .faulty = cfg->fault_switch,
                               .max_data = cfg->max_data ? cfg->max_data
                                                         : LAUNCH_LOOPBACK_MAX_DATA,
                               .window = cfg->window, .udp_batching = cfg->udp_batching};
    op_status_t st = j->ns != NULL
                         ? launch_ns_switches(j->ns, &o, &j->topo, &j->fabric, err, sizeof(err))
                         : op_fabric_start(&o, &j->topo, &j->fabric, err, sizeof(err));
    if (st != OP_OK)
        fprintf(stderr, "offpath mpirun: %s\n", err);
    return st == OP_OK ? 0 : 2;
}

static void finish(struct job *j)
{
    uint64_t totals[OP_SW_C_COUNT_] = {0};
    if (j->fabric != NULL) {
        op_fabric_stop(j->fabric, totals);
        if (j->cfg.verbose)
            report_switches(totals);
    }
    if (j->own_topo)
        unlink(j->topo_path);
    if (j->ns != NULL)
        launch_ns_close(j->ns);
    free(j->ns);
}

int op_launch_run(const struct op_launch_config *in)
{
    struct job j = {.cfg = *in};
    if (j.cfg.mode != OP_MODE_OFF && !find_lib(&j.cfg, j.lib, sizeof(j.lib))) {
        fprintf(stderr, "offpath mpirun: cannot find %s (build it, or give --lib)\n", j.lib);
        return 2;
    }
    if (j.cfg.topo != NULL)
        catch_stop_signals();
    int rc = prepare_topology(&j);
    if (rc == 0)
        rc = start_switches(&j);
    if (rc == 0 && stop_signal == 0) {
        set_env(&j.cfg, j.topo_path);
        char mtu[16];
        snprintf(mtu, sizeof(mtu), "%u", j.ns != NULL ? op_nstopo_mtu(&j.ns->t) : 0u);
        if (j.ns != NULL) /* the leaders' packets fit the links */
            setenv("OFFPATH_MTU", mtu, 1);
        rc = run_mpirun(&j.cfg, j.ns, j.cfg.mode == OP_MODE_OFF ? NULL : j.lib);
    }
    finish(&j);
    return stop_signal != 0 ? 128 + stop_signal : rc;
}
