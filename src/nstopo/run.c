/* `offpath topo`'s I/O: runs the plan's commands, keeps the state file that
 * lets `down` remove everything even after `up` was killed, and enters a
 * node's namespace for `exec`. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nstopo_internal.h"

extern char **environ;

#define STATE_DIR NSTOPO_STATE_DIR
#define NETNS_DIR "/run/netns/"

struct up_ctx {
    bool verbose;
    FILE *state;
};

static void say(const char *fmt, ...) OP_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "offpath topo: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

static void print_cmd(FILE *f, int argc, const char *const *argv)
{
    for (int i = 0; i < argc; i++)
        fprintf(f, "%s%s", i > 0 ? " " : "", argv[i]);
    fprintf(f, "\n");
}

/* exit status of argv, -1 if it could not start; its stdout discarded
 * (ethtool reports what it changed), its errors shown */
static int spawn_wait(const char *const *argv)
{
    pid_t pid;
    int status;
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -1;
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -1;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static bool netns_exists(const char *ns)
{
    char path[192];
    snprintf(path, sizeof(path), NETNS_DIR "%s", ns);
    return access(path, F_OK) == 0;
}

void op_nstopo_state_path(const struct op_nstopo *t, const char *state, char *out, size_t len)
{
    if (state != NULL)
        snprintf(out, len, "%s", state);
    else
        snprintf(out, len, STATE_DIR "/topo-%s.state", t->name);
}

/* Recorded, and on disk, before the namespace exists: a kill at any point
 * leaves nothing `down` does not know of. */
static bool record_netns(struct up_ctx *u, const char *ns)
{
    if (fprintf(u->state, "netns %s\n", ns) < 0 || fflush(u->state) != 0 ||
        fsync(fileno(u->state)) != 0) {
        say("cannot write the state file: %s", strerror(errno));
        return false;
    }
    return true;
}

static bool up_emit(int argc, const char *const *argv, void *ctx)
{
    struct up_ctx *u = ctx;
    if (argc == 4 && strcmp(argv[1], "netns") == 0 && strcmp(argv[2], "add") == 0 &&
        !record_netns(u, argv[3]))
        return false;
    if (u->verbose)
        print_cmd(stderr, argc, argv);
    int rc = spawn_wait(argv);
    if (rc == 0)
        return true;
    fprintf(stderr, "offpath topo: failed (exit %d): ", rc);
    print_cmd(stderr, argc, argv);
    return false;
}

/* Deletes our namespaces by name: those the state file lists, and those the
 * topology implies (a state file lost with /run still leaves them known).
 * Only names under this topology's prefix are touched. */
static int remove_all(const struct op_nstopo *t, const char *state, bool quiet)
{
    char prefix[64], ns[128], line[192];
    int removed = 0, failed = 0, stopped = 0;
    snprintf(prefix, sizeof(prefix), "opt-%s-", t->name);
    FILE *f = fopen(state, "r");
    for (int i = 0;; i++) {
        if (i < t->n_nodes) {
            op_nstopo_netns(t, i, ns, sizeof(ns));
        } else {
            if (f == NULL || fgets(line, sizeof(line), f) == NULL)
                break;
            if (sscanf(line, "netns %127s", ns) != 1 || strncmp(ns, prefix, strlen(prefix)) != 0)
                continue;
        }
        if (!netns_exists(ns))
            continue;
        stopped += nstopo_stop_processes(ns);
        const char *argv[] = {"ip", "netns", "del", ns, NULL};
        if (spawn_wait(argv) == 0)
            removed++;
        else
            failed++;
    }
    if (f != NULL)
        fclose(f);
    if (failed == 0 && unlink(state) != 0 && errno != ENOENT)
        say("cannot remove state file %s: %s", state, strerror(errno));
    if (!quiet)
        printf("topo %s down: %d namespaces removed%s, %d processes in them stopped\n",
               t->name, removed, failed > 0 ? " (some could not be)" : "", stopped);
    return failed > 0 ? 1 : 0;
}

static void print_up(const struct op_nstopo_cfg *cfg, const struct op_nstopo *t, int commands,
                     int switches)
{
    char ns[128];
    if (!cfg->json) {
        printf("topo %s up: %d namespaces, %d links, %d commands, %d switches on the path%s\n",
               t->name, t->n_nodes, t->n_links, commands, switches,
               cfg->no_switches ? " (--no-switches: the kernel forwards)" : "");
        return;
    }
    printf("{\"topo\":\"%s\",\"links\":%d,\"switches\":%d,\"namespaces\":[", t->name,
           t->n_links, switches);
    for (int i = 0; i < t->n_nodes; i++) {
        op_nstopo_netns(t, i, ns, sizeof(ns));
        printf("%s\"%s\"", i > 0 ? "," : "", ns);
    }
    printf("]}\n");
}

int op_nstopo_up(const struct op_nstopo *t, const char *state_arg, bool verbose)
{
    char state[256], ns[128];
    op_nstopo_state_path(t, state_arg, state, sizeof(state));
    for (int i = 0; i < t->n_nodes; i++) {
        op_nstopo_netns(t, i, ns, sizeof(ns));
        if (netns_exists(ns)) {
            say("namespace %s exists: topology %s is up (offpath topo down its file first)", ns,
                t->name);
            return 1;
        }
    }
    if (state_arg == NULL)
        mkdir(STATE_DIR, 0755);
    struct up_ctx u = {.verbose = verbose, .state = fopen(state, "a")};
    if (u.state == NULL) {
        say("cannot write state file %s: %s", state, strerror(errno));
        return 1;
    }
    fprintf(u.state, "topo %s\n", t->name);
    bool ok = op_nstopo_plan(t, up_emit, &u);
    fclose(u.state);
    if (!ok) {
        remove_all(t, state, true);
        return 1;
    }
    return 0;
}

int op_nstopo_down(const struct op_nstopo *t, const char *state_arg)
{
    char state[256];
    op_nstopo_state_path(t, state_arg, state, sizeof(state));
    return remove_all(t, state, true);
}

static bool count_cmd(int argc, const char *const *argv, void *ctx)
{
    (void)argc;
    (void)argv;
    ++*(int *)ctx;
    return true;
}

/* The state file's last line: switches run on the path (a job uses them). */
static void note_switches(const struct op_nstopo *t, const char *state_arg, int n)
{
    char state[256];
    op_nstopo_state_path(t, state_arg, state, sizeof(state));
    FILE *f = fopen(state, "a");
    if (f != NULL) {
        fprintf(f, "switches %d\n", n);
        fclose(f);
    }
}

bool op_nstopo_has_switches(const struct op_nstopo *t, const char *state_arg)
{
    char state[256], line[192];
    int n = 0;
    op_nstopo_state_path(t, state_arg, state, sizeof(state));
    FILE *f = fopen(state, "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "switches %d", &n) == 1 && n > 0)
            break;
    if (f != NULL)
        fclose(f);
    return n > 0;
}

/* The namespaces and links, then the switches on the path (unless
 * --no-switches); a switch that does not start takes it all down. */
static int topo_up(const struct op_nstopo_cfg *cfg, const struct op_nstopo *t)
{
    int rc = op_nstopo_up(t, cfg->state, cfg->verbose), commands = 0;
    if (rc != 0)
        return rc;
    int switches = cfg->no_switches ? 0 : nstopo_start_switches(t, cfg->file, cfg->argv);
    if (switches < 0) {
        char state[256];
        op_nstopo_state_path(t, cfg->state, state, sizeof(state));
        remove_all(t, state, true);
        return 1;
    }
    if (switches > 0)
        note_switches(t, cfg->state, switches);
    (void)op_nstopo_plan(t, count_cmd, &commands);
    print_up(cfg, t, commands, switches);
    return 0;
}

static int topo_hosts(const struct op_nstopo_cfg *cfg, const struct op_nstopo *t)
{
    char a[16], ns[128];
    int n = 0;
    if (cfg->json)
        printf("[");
    for (int i = 0; i < t->n_nodes; i++) {
        if (t->nodes[i].role != OP_NSTOPO_HOST)
            continue;
        op_nstopo_ip4(t->nodes[i].ip, a);
        op_nstopo_netns(t, i, ns, sizeof(ns));
        if (cfg->json) {
            char a6[INET6_ADDRSTRLEN] = "";
            if (t->ip6)
                inet_ntop(AF_INET6, t->nodes[i].ip6, a6, sizeof(a6));
            printf("%s{\"name\":\"%s\",\"address\":\"%s\",", n > 0 ? "," : "",
                   t->nodes[i].name, a);
            if (t->ip6)
                printf("\"address6\":\"%s\",", a6);
            printf("\"netns\":\"%s\"}", ns);
        }
        else
            printf("%s\n", a);
        n++;
    }
    if (cfg->json)
        printf("]\n");
    return 0;
}

/* The switches' fabric file on stdout (--json: {"topo": ..., "switches": text}). */
static int topo_switches(const struct op_nstopo_cfg *cfg, const struct op_nstopo *t)
{
    static char text[16384];
    char err[256];
    if (op_nstopo_switches(t, text, sizeof text, err, sizeof err) != OP_OK) {
        fprintf(stderr, "offpath topo: %s: %s\n", cfg->file, err);
        return 2;
    }
    if (!cfg->json) {
        fputs(text, stdout);
        return 0;
    }
    printf("{\"topo\":\"%s\",\"switches\":\"", t->name);
    for (const char *c = text; *c; c++)
        fputs(*c == '\n' ? "\\n" : *c == '"' ? "\\\"" : (char[2]){*c, 0}, stdout);
    printf("\"}\n");
    return 0;
}

op_status_t op_nstopo_enter(const struct op_nstopo *t, int node, char *err, size_t errlen)
{
    char ns[128], path[192];
    op_nstopo_netns(t, node, ns, sizeof(ns));
    snprintf(path, sizeof(path), NETNS_DIR "%s", ns);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "topology %s is not up (no namespace %s)", t->name, ns);
        return OP_ERR_STATE;
    }
    int rc = setns(fd, CLONE_NEWNET);
    close(fd);
    if (rc != 0) {
        snprintf(err, errlen, "cannot enter %s: %s", ns, strerror(errno));
        return op_status_errno(errno);
    }
    /* /sys shows the namespace that mounted it: a sysfs mounted from inside
     * this one, private to this process's own mount namespace */
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) != 0 ||
        (umount2("/sys", MNT_DETACH) != 0 && errno != EINVAL) ||
        mount(ns, "/sys", "sysfs", 0, NULL) != 0) {
        snprintf(err, errlen, "in %s, cannot remount /sys: %s", ns, strerror(errno));
        return op_status_errno(errno);
    }
    return OP_OK;
}

static int topo_exec(const struct op_nstopo_cfg *cfg, const struct op_nstopo *t)
{
    char err[300];
    int node = op_nstopo_find(t, cfg->host);
    if (node < 0) {
        say("no node '%s' in %s (a name or an address of the file)", cfg->host, cfg->file);
        return 2;
    }
    op_status_t st = op_nstopo_enter(t, node, err, sizeof(err));
    if (st != OP_OK) {
        say("%s%s", err, st == OP_ERR_STATE ? ": offpath topo up first" : "");
        return 1;
    }
    fflush(NULL);
    execvp(cfg->argv[0], cfg->argv);
    say("cannot run '%s': %s", cfg->argv[0], strerror(errno));
    return 127;
}

int op_nstopo_run(const struct op_nstopo_cfg *cfg)
{
    struct op_nstopo *t = malloc(sizeof(*t));
    struct op_nstopo_stats stats = {0};
    char err[256] = "", state[256];
    if (t == NULL)
        return 1;
    int rc;
    if (op_nstopo_load(cfg->file, t, &stats, err, sizeof(err)) != OP_OK) {
        fprintf(stderr, "offpath topo: %s: %s", cfg->file, err);
        if (stats.malformed > 0)
            fprintf(stderr, " (%u malformed of %u lines)", stats.malformed, stats.lines);
        fprintf(stderr, "\n");
        rc = 2;
    } else if (cfg->action == OP_NSTOPO_UP) {
        rc = topo_up(cfg, t);
    } else if (cfg->action == OP_NSTOPO_DOWN) {
        op_nstopo_state_path(t, cfg->state, state, sizeof(state));
        rc = remove_all(t, state, cfg->json);
        if (cfg->json)
            printf("{\"topo\":\"%s\",\"down\":%s}\n", t->name, rc == 0 ? "true" : "false");
    } else if (cfg->action == OP_NSTOPO_HOSTS) {
        rc = topo_hosts(cfg, t);
    } else if (cfg->action == OP_NSTOPO_SWITCHES) {
        rc = topo_switches(cfg, t);
    } else {
        rc = topo_exec(cfg, t);
    }
    free(t);
    return rc;
}
