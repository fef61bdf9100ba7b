/* Unix-socket and TCP transports: one connected stream socket, non-blocking,
 * every wait bounded by the caller's deadline (op_io_wait_fd). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "channel_internal.h"
#include "offpath/io.h"

#define RETRY_NS (20 * OP_NS_PER_MS)

struct sock_transport {
    struct chan_transport base;
    int fd;
};

/* Waits until fd is ready for events; false at the deadline (an error is
 * readiness: the following call reports it). */
static bool wait_fd(int fd, unsigned events, uint64_t deadline_ns)
{
    return op_io_wait_fd(fd, events, deadline_ns) != 0;
}

static op_status_t sock_write(struct chan_transport *t, const uint8_t *buf, size_t len,
                              uint64_t deadline_ns)
{
    struct sock_transport *s = (struct sock_transport *)t;
    while (len > 0) {
        ssize_t n = send(s->fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN) {
            snprintf(t->tx_why, sizeof t->tx_why, "send to the peer failed: %s", strerror(errno));
            return op_status_from_errno(errno);
        }
        if (!wait_fd(s->fd, OP_IO_OUT, deadline_ns)) {
            snprintf(t->tx_why, sizeof t->tx_why, "the peer stopped reading (send timed out)");
            return OP_ERR_TIMEOUT;
        }
    }
    return OP_OK;
}

static op_status_t sock_read(struct chan_transport *t, uint8_t *buf, size_t cap, size_t *got,
                             uint64_t deadline_ns)
{
    struct sock_transport *s = (struct sock_transport *)t;
    *got = 0;
    for (;;) {
        ssize_t n = recv(s->fd, buf, cap, 0);
        if (n > 0) {
            *got = (size_t)n;
            return OP_OK;
        }
        if (n == 0) {
            snprintf(t->rx_why, sizeof t->rx_why, "the peer closed the connection");
            return OP_ERR_IO;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN) {
            snprintf(t->rx_why, sizeof t->rx_why, "receive from the peer failed: %s", strerror(errno));
            return op_status_from_errno(errno);
        }
        if (!wait_fd(s->fd, OP_IO_IN, deadline_ns)) {
            snprintf(t->rx_why, sizeof t->rx_why, "nothing from the peer before the timeout (stalled?)");
            return OP_ERR_TIMEOUT;
        }
    }
}

static void sock_close(struct chan_transport *t)
{
    struct sock_transport *s = (struct sock_transport *)t;
    close(s->fd);
    free(s);
}

static const struct chan_transport_ops sock_ops = {
    .write = sock_write, .read = sock_read, .close = sock_close};

static op_status_t resolve(const struct op_chan_addr *a, struct sockaddr_storage *ss,
                           socklen_t *len, char why[256])
{
    memset(ss, 0, sizeof *ss);
    if (a->kind == OP_CHAN_UNIX) {
        struct sockaddr_un *un = (struct sockaddr_un *)ss;
        un->sun_family = AF_UNIX;
        memcpy(un->sun_path, a->path, strlen(a->path) + 1);
        *len = sizeof *un;
        return OP_OK;
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(a->host, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(why, 256, "cannot resolve %s: %s", a->host, gai_strerror(rc));
        return OP_ERR_INVAL;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    ((struct sockaddr_in *)ss)->sin_port = htons(a->port);
    *len = (socklen_t)res->ai_addrlen;
    freeaddrinfo(res);
    return OP_OK;
}

static op_status_t sys_fail(const char *what, const struct op_chan_addr *a, char why[256])
{
    int e = errno;
    if (a->kind == OP_CHAN_UNIX)
        snprintf(why, 256, "%s unix:%s: %s", what, a->path, strerror(e));
    else
        snprintf(why, 256, "%s tcp:%s:%u: %s", what, a->host, (unsigned)a->port, strerror(e));
    return op_status_from_errno(e);
}

static int new_socket(const struct op_chan_addr *a)
{
    return socket(a->kind == OP_CHAN_UNIX ? AF_UNIX : AF_INET,
                  SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
}

/* A lone message must leave at once; batching is the channel's job. */
static void tune(int fd, const struct op_chan_addr *a)
{
    int one = 1;
    if (a->kind == OP_CHAN_TCP)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static bool accepted_source(const struct op_channel_config *cfg, const struct sockaddr_in *from)
{
    return cfg->addr.kind != OP_CHAN_TCP || cfg->accept_ipv4 == 0 ||
           ntohl(from->sin_addr.s_addr) == cfg->accept_ipv4;
}

static op_status_t accept_one(int lfd, const struct op_channel_config *cfg, int *out,
                              char why[256])
{
    uint64_t deadline = op_now_ns() + cfg->timeout_ns;
    for (;;) {
        struct sockaddr_in from;
        socklen_t from_len = sizeof from;
        int fd = accept4(lfd, (struct sockaddr *)&from, &from_len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0 && !accepted_source(cfg, &from)) {
            close(fd); /* -r names another host: keep waiting for the right one */
            continue;
        }
        if (fd >= 0) {
            *out = fd;
            return OP_OK;
        }
        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
            return sys_fail("accept on", &cfg->addr, why);
        if (!wait_fd(lfd, OP_IO_IN, deadline)) {
            snprintf(why, 256, "no peer connected within the timeout");
            return OP_ERR_TIMEOUT;
        }
    }
}

op_status_t op_chan_listen(const struct op_chan_addr *a, int *fd, char why[256])
{
    struct sockaddr_storage ss;
    socklen_t len;
    struct stat sb;
    int one = 1;
    if (a->kind == OP_CHAN_SHM) {
        snprintf(why, 256, "a shm channel has one peer: no listener");
        return OP_ERR_UNSUPPORTED;
    }
    op_status_t st = resolve(a, &ss, &len, why);
    if (st != OP_OK)
        return st;
    int lfd = new_socket(a);
    if (lfd < 0)
        return sys_fail("socket for", a, why);
    /* A socket file left by an agent that died would block bind forever. */
    if (a->kind == OP_CHAN_UNIX && stat(a->path, &sb) == 0 && S_ISSOCK(sb.st_mode))
        unlink(a->path);
    if (a->kind == OP_CHAN_TCP)
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&ss, len) != 0 || listen(lfd, 64) != 0) {
        st = sys_fail("cannot listen on", a, why);
        close(lfd);
        return st;
    }
    *fd = lfd;
    return OP_OK;
}

static op_status_t listen_accept(const struct op_channel_config *cfg, int *out, char why[256])
{
    int lfd;
    op_status_t st = op_chan_listen(&cfg->addr, &lfd, why);
    if (st != OP_OK)
        return st;
    st = accept_one(lfd, cfg, out, why);
    close(lfd);
    if (cfg->addr.kind == OP_CHAN_UNIX)
        unlink(cfg->addr.path); /* one peer per listen: nobody else may connect */
    return st;
}

/* The agent may not be listening yet: retry until the deadline. */
static op_status_t connect_retry(const struct op_channel_config *cfg, int *out, char why[256])
{
    struct sockaddr_storage ss;
    socklen_t len;
    uint64_t deadline = op_now_ns() + cfg->timeout_ns;
    op_status_t st = resolve(&cfg->addr, &ss, &len, why);
    if (st != OP_OK)
        return st;
    for (;;) {
        int fd = new_socket(&cfg->addr);
        if (fd < 0)
            return sys_fail("socket for", &cfg->addr, why);
        int rc = connect(fd, (struct sockaddr *)&ss, len);
        if (rc != 0 && errno == EINPROGRESS && wait_fd(fd, OP_IO_OUT, deadline)) {
            socklen_t el = sizeof rc;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &el);
            errno = rc;
        }
        if (rc == 0) {
            *out = fd;
            return OP_OK;
        }
        bool again = errno == ECONNREFUSED || errno == ENOENT || errno == EINPROGRESS;
        st = sys_fail("cannot connect to", &cfg->addr, why);
        close(fd);
        if (!again || op_now_ns() + RETRY_NS >= deadline)
            return st;
        nanosleep(&(struct timespec){.tv_nsec = (long)RETRY_NS}, NULL);
    }
}

op_status_t chan_sock_open(const struct op_channel_config *cfg, struct chan_transport **out,
                           char why[256])
{
    int fd = -1;
    op_status_t st = !cfg->listen        ? connect_retry(cfg, &fd, why)
                     : cfg->use_listener ? accept_one(cfg->listener, cfg, &fd, why)
                                         : listen_accept(cfg, &fd, why);
    if (st != OP_OK)
        return st;
    tune(fd, &cfg->addr);
    struct sock_transport *s = calloc(1, sizeof *s);
    if (s == NULL) {
        close(fd);
        return OP_ERR_NOMEM;
    }
    s->base.ops = &sock_ops;
    s->fd = fd;
    *out = &s->base;
    return OP_OK;
}
