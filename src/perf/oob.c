/* The out-of-band side channel: one TCP connection carrying text lines
 * (parameters, QP addresses, barriers, results), as perftest's port 18515. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "perf_int.h"

#define CONNECT_RETRY_NS (5 * OP_NS_PER_S) /* a client may start just before its server */

static void oob_init(struct perf_oob *o, int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    memset(o, 0, sizeof(*o));
    o->fd = fd;
}

op_status_t perf_oob_listen(uint16_t port, int backlog, int *lfd_out, char *why, size_t len)
{
    int one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_ANY)};
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0)
        return perf_refuse(why, len, "socket: %s", strerror(errno));
    (void)setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, backlog) != 0) {
        int e = errno;
        close(lfd);
        return perf_refuse(why, len, "cannot listen on TCP port %u (-p): %s", port, strerror(e));
    }
    *lfd_out = lfd;
    return OP_OK;
}

op_status_t perf_oob_accept_on(int lfd, struct perf_oob *o, char *why, size_t len)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return perf_refuse(why, len, "accept on the side channel: %s", strerror(errno));
    oob_init(o, fd);
    return OP_OK;
}

op_status_t perf_oob_accept(uint16_t port, struct perf_oob *o, char *why, size_t len)
{
    int lfd = -1;
    op_status_t st = perf_oob_listen(port, 1, &lfd, why, len);
    if (st == OP_OK)
        st = perf_oob_accept_on(lfd, o, why, len);
    if (lfd >= 0)
        close(lfd);
    return st;
}

static int try_connect(const struct addrinfo *ai)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
        return fd;
    close(fd);
    return -1;
}

op_status_t perf_oob_connect(const char *host, uint16_t port, struct perf_oob *o, char *why,
                             size_t len)
{
    char service[8];
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    snprintf(service, sizeof service, "%u", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0)
        return perf_refuse(why, len, "cannot resolve server '%s': %s", host, gai_strerror(rc));
    uint64_t deadline = op_now_ns() + CONNECT_RETRY_NS;
    int fd = -1;
    while (fd < 0) {
        for (const struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next)
            fd = try_connect(ai);
        if (fd >= 0 || op_now_ns() > deadline)
            break;
        usleep(20000);
    }
    freeaddrinfo(res);
    if (fd < 0)
        return perf_refuse(why, len, "Couldn't connect to %s:%u (is the server running?)", host,
                           port);
    oob_init(o, fd);
    return OP_OK;
}

void perf_oob_close(struct perf_oob *o)
{
    perf_comm_close(o->comm);
    o->comm = NULL;
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
}

bool perf_oob_peer_failed(const struct perf_oob *o)
{
    char head[5];
    if (o->comm != NULL)
        return perf_comm_peer_failed(o->comm);
    if (o->len > 0)
        return strncmp(o->buf, "FAIL ", o->len < 5 ? o->len : 5) == 0;
    ssize_t n = recv(o->fd, head, sizeof head, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0)
        return errno != EAGAIN && errno != EWOULDBLOCK;
    return n == 0 || strncmp(head, "FAIL ", (size_t)n) == 0;
}

uint32_t perf_oob_peer_ip(const struct perf_oob *o)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    if (getpeername(o->fd, (struct sockaddr *)&sa, &len) != 0 || sa.sin_family != AF_INET)
        return 0;
    return ntohl(sa.sin_addr.s_addr);
}

uint32_t perf_oob_local_ip(const struct perf_oob *o)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    if (getsockname(o->fd, (struct sockaddr *)&sa, &len) != 0 || sa.sin_family != AF_INET)
        return 0;
    return ntohl(sa.sin_addr.s_addr);
}

op_status_t perf_oob_send(struct perf_oob *o, const char *fmt, ...)
{
    char line[PERF_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line - 1)
        return OP_ERR_NOSPACE;
    if (o->comm != NULL) {
        int e = perf_comm_send(o->comm, line, (size_t)n);
        return e == 0 ? OP_OK : op_status_from_errno(-e);
    }
    line[n++] = '\n';
    for (int off = 0; off < n;) {
        ssize_t w = send(o->fd, line + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? op_status_from_errno(errno) : OP_ERR_IO;
        off += (int)w;
    }
    return OP_OK;
}

/* A complete line from what was read, if there is one. */
static bool take_line(struct perf_oob *o, char *line, size_t cap)
{
    char *nl = memchr(o->buf, '\n', o->len);
    if (nl == NULL)
        return false;
    size_t n = (size_t)(nl - o->buf);
    size_t copy = n < cap - 1 ? n : cap - 1;
    memcpy(line, o->buf, copy);
    line[copy] = '\0';
    memmove(o->buf, nl + 1, o->len - n - 1);
    o->len -= n + 1;
    return true;
}

int perf_oob_poll_line(struct perf_oob *o, char *line, size_t cap)
{
    if (o->comm != NULL)
        return perf_comm_poll_line(o->comm, line, cap);
    if (take_line(o, line, cap))
        return 1;
    if (o->len == sizeof o->buf)
        return -EMSGSIZE; /* a peer that never ends its line */
    ssize_t r = recv(o->fd, o->buf + o->len, sizeof o->buf - o->len, MSG_DONTWAIT);
    if (r == 0)
        return -ECONNRESET;
    if (r < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
    o->len += (size_t)r;
    return take_line(o, line, cap) ? 1 : 0;
}

int perf_oob_wait_readable(const struct perf_oob *o, int timeout_ms)
{
    if (o->comm != NULL) /* it moves with the endpoint, which its callers drive */
        return perf_comm_pending(o->comm);
    if (memchr(o->buf, '\n', o->len) != NULL)
        return 1;
    return op_io_wait_fd(o->fd, OP_IO_IN, op_io_deadline_in_ms(timeout_ms));
}
