/* `offpath topo`'s processes inside the namespaces: the switches `up`
 * starts on the path of every TOR and SPINE (`offpath switch --ports all`),
 * and, on `down`, every process found in one of the topology's namespaces
 * (the switches, what `exec` left running, a leader of a killed job), so
 * that deleting the namespaces leaves nothing behind, also after `up` was
 * killed before it could write anything down. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nstopo_internal.h"

#define READY_MS 10000
#define STOP_MS 2000

/* The child: its namespace, its own session (a terminal's ^C or the end of
 * `up` does not reach it), its output to its log, then the switch. */
static void switch_child(const struct op_nstopo *t, int node, const char *exe, const char *file,
                         int ready, char *const *extra)
{
    char ns[128], path[192], log[256], stats[256], fd[16];
    op_nstopo_netns(t, node, ns, sizeof(ns));
    snprintf(path, sizeof(path), "/run/netns/%s", ns);
    nstopo_daemon_file(t, node, "log", log, sizeof(log));
    nstopo_daemon_file(t, node, "json", stats, sizeof(stats));
    snprintf(fd, sizeof(fd), "%d", ready);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    int out = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (nsfd < 0 || out < 0 || setns(nsfd, CLONE_NEWNET) != 0 || setsid() < 0 ||
        dup2(out, 1) < 0 || dup2(out, 2) < 0 || fcntl(ready, F_SETFD, 0) != 0)
        _exit(127);
    /* extra options come after --max-data and override it */
    char max_data[8];
    snprintf(max_data, sizeof(max_data), "%u", (unsigned)OP_NSTOPO_SWITCH_MAX_DATA);
    const char *argv[64] = {exe, "switch", "--topology", file, "--name", t->nodes[node].name,
                            "--ports", "all", "--json", "--stats-json", stats, "--ready-fd", fd,
                            "--max-data", max_data};
    int n = 15;
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 63; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    execv(exe, (char *const *)argv);
    _exit(127);
}

/* Waits for "ready" on r (a socket, so that the wait is bounded by its
 * receive timeout); false when the switch died or said nothing. */
static bool wait_ready(int r)
{
    struct timeval tv = {.tv_sec = READY_MS / 1000};
    char buf[8];
    return setsockopt(r, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0 &&
           read(r, buf, sizeof(buf)) > 0;
}

static bool start_one(const struct op_nstopo *t, int node, const char *exe, const char *file,
                      char *const *extra)
{
    int pipefd[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pipefd) != 0)
        return false;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        switch_child(t, node, exe, file, pipefd[1], extra);
    }
    close(pipefd[1]);
    bool ok = pid > 0 && wait_ready(pipefd[0]);
    close(pipefd[0]);
    if (!ok) {
        char log[256];
        nstopo_daemon_file(t, node, "log", log, sizeof(log));
        fprintf(stderr, "offpath topo: switch %s did not start (see %s)\n", t->nodes[node].name,
                log);
    }
    return ok;
}

int nstopo_start_switches(const struct op_nstopo *t, const char *file, char *const *extra)
{
    char exe[4096], abs[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0 || realpath(file, abs) == NULL) {
        fprintf(stderr, "offpath topo: cannot find this program or %s: %s\n", file,
                strerror(errno));
        return -1;
    }
    exe[n] = '\0';
    int started = 0;
    for (int i = 0; i < t->n_nodes; i++) {
        if (t->nodes[i].role == OP_NSTOPO_HOST)
            continue;
        if (!start_one(t, i, exe, abs, extra))
            return -1;
        started++;
    }
    return started;
}

void nstopo_daemon_file(const struct op_nstopo *t, int node, const char *ext, char *out,
                        size_t len)
{
    snprintf(out, len, NSTOPO_STATE_DIR "/topo-%s-%s.%s", t->name, t->nodes[node].name, ext);
}

/* ---- down: every process in the namespace */

static bool same_netns(const char *proc_pid, const struct stat *ns)
{
    char path[300];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%s/ns/net", proc_pid);
    return stat(path, &st) == 0 && st.st_ino == ns->st_ino && st.st_dev == ns->st_dev;
}

/* Signals every process in netns ns; how many there were. */
static int signal_in(const char *ns, int sig)
{
    char path[192];
    struct stat nst;
    snprintf(path, sizeof(path), "/run/netns/%s", ns);
    DIR *d = stat(path, &nst) == 0 ? opendir("/proc") : NULL;
    if (d == NULL)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 1 || pid == getpid() || !same_netns(e->d_name, &nst))
            continue;
        if (kill((pid_t)pid, sig) == 0)
            n++;
    }
    closedir(d);
    return n;
}

int nstopo_stop_processes(const char *ns)
{
    int n = signal_in(ns, SIGTERM);
    for (int waited = 0; n > 0 && waited < STOP_MS; waited += 20) {
        usleep(20000);
        while (waitpid(-1, NULL, WNOHANG) > 0) /* ours (a switch `up` started here) */
            ;
        if (signal_in(ns, 0) == 0)
            return n;
    }
    signal_in(ns, SIGKILL);
    return n;
}
