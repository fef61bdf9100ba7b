/* A TCP relay between two network namespaces, for Open MPI's PMIx: mpirun's
 * PMIx server listens on 127.0.0.1 of the namespace mpirun runs in, which a
 * rank inside a host's namespace cannot reach. A socket stays in the
 * namespace it was created in, so the relay listens in the rank's namespace
 * (created before the switch of namespace) and connects out from the other
 * (its sockets created after entering it again). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launch_internal.h"
#include "offpath/io.h"

#define RELAY_MAX_PAIRS 8 /* a PMIx client holds one connection; reconnects fit */

struct pair {
    int in, out; /* accepted in the rank's namespace; connected to the server */
};

static int listen_loopback(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, RELAY_MAX_PAIRS) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static int connect_loopback(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Everything readable on from, written whole to to; false at EOF or error. */
static bool carry(int from, int to)
{
    char buf[65536];
    ssize_t n = read(from, buf, sizeof(buf));
    if (n <= 0)
        return n < 0 && (errno == EINTR || errno == EAGAIN);
    for (ssize_t done = 0; done < n;) {
        ssize_t w = write(to, buf + done, (size_t)(n - done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        done += w;
    }
    return true;
}

static void close_pair(struct pair *p)
{
    close(p->in);
    close(p->out);
    p->in = p->out = -1;
}

static void accept_one(int lfd, struct pair *pairs, uint16_t server_port)
{
    int in = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (in < 0)
        return;
    for (int i = 0; i < RELAY_MAX_PAIRS; i++)
        if (pairs[i].in < 0) {
            pairs[i] = (struct pair){.in = in, .out = connect_loopback(server_port)};
            if (pairs[i].out < 0)
                close_pair(&pairs[i]); /* the client sees the refusal it would have */
            return;
        }
    close(in);
}

/* Until the rank exits (its death signal ends this process). Slot 0 is
 * the listener, then each pair's two ends. */
static _Noreturn void serve(int lfd, uint16_t server_port)
{
    struct pair pairs[RELAY_MAX_PAIRS];
    struct op_io_waitset *w;
    if (op_io_waitset_new(1 + 2 * RELAY_MAX_PAIRS, &w) != OP_OK)
        _exit(1);
    for (int i = 0; i < RELAY_MAX_PAIRS; i++)
        pairs[i] = (struct pair){-1, -1};
    for (;;) {
        op_io_waitset_set(w, 0, lfd, OP_IO_IN);
        for (int i = 0; i < RELAY_MAX_PAIRS; i++) {
            op_io_waitset_set(w, 1 + 2 * (unsigned)i, pairs[i].in, OP_IO_IN);
            op_io_waitset_set(w, 2 + 2 * (unsigned)i, pairs[i].out, OP_IO_IN);
        }
        if (op_io_waitset_wait(w, UINT64_MAX) < 0)
            _exit(1);
        if (op_io_waitset_ready(w, 0) != 0)
            accept_one(lfd, pairs, server_port);
        for (int i = 0; i < RELAY_MAX_PAIRS; i++) {
            bool ok = true;
            if (pairs[i].in >= 0 && op_io_waitset_ready(w, 1 + 2 * (unsigned)i) != 0)
                ok = carry(pairs[i].in, pairs[i].out);
            if (ok && pairs[i].in >= 0 && op_io_waitset_ready(w, 2 + 2 * (unsigned)i) != 0)
                ok = carry(pairs[i].out, pairs[i].in);
            if (!ok)
                close_pair(&pairs[i]);
        }
    }
}

/* The relay holds none of the rank's descriptors: mpirun reads the rank's
 * output until every writer is gone, and the relay outlives it briefly. */
static void drop_descriptors(int keep)
{
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; fd++)
        (void)dup2(null, fd);
    if (null > 2)
        close(null);
    long max = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (max > 0 && max < 65536 ? max : 1024); fd++)
        if (fd != keep)
            close(fd);
}

op_status_t launch_relay_start(uint16_t server_port, int server_ns, uint16_t *port, char *err,
                               size_t errlen)
{
    int lfd = listen_loopback(port);
    if (lfd < 0) {
        snprintf(err, errlen, "PMIx relay: cannot listen on 127.0.0.1: %s", strerror(errno));
        return op_status_errno(errno);
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "PMIx relay: cannot fork: %s", strerror(errno));
        close(lfd);
        return op_status_errno(errno);
    }
    if (pid == 0) {
        /* the rank is this process's parent, exec'd: its end is the relay's */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(1);
        if (setns(server_ns, CLONE_NEWNET) != 0)
            _exit(1);
        drop_descriptors(lfd);
        serve(lfd, server_port);
    }
    close(lfd);
    return OP_OK;
}
