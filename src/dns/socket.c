/* The socket model: UDP threads, each with its own SO_REUSEPORT socket
 * (the kernel spreads the clients across them), answering bursts on the one
 * driver (src/loop) over the udp backend (recvmmsg/sendmmsg), and the TCP
 * thread (tcp.c). Threads block in the loop's wait when there is nothing
 * to do, so an idle server costs nothing. Each thread owns its counters
 * and publishes them after every burst (relaxed atomics, one writer). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dns_internal.h"

#define UDP_BUF 4096
#define POLL_MS 100 /* how soon a blocked thread sees stop */

/* ---- UDP: the answer engine (udp.c) on the one driver over the udp backend */
static void *udp_main(void *arg)
{
    struct dns_worker *w = arg;
    struct dns_udp u = {.w = w, .udp_max = w->s->cfg.udp_max};
    struct op_io *io = NULL;
    struct op_loop *loop = NULL;
    op_status_t st = op_io_udp_adopt(w->fd, &io);
    if (st == OP_OK)
        st = dns_udp_loop(&u, io, &loop);
    if (st != OP_OK)
        OP_ERROR(w->s->cfg.log, "dns: udp thread: %s", op_status_str(st));
    while (st == OP_OK && !dns_server_stopping(w->s))
        (void)op_loop_run_once(loop, op_now_ns() + POLL_MS * OP_NS_PER_MS);
    op_loop_destroy(loop);
    op_io_close(io);
    return NULL;
}

/* ---- setup ---- */
/* --listen's address as a sockaddr of its family; returns its length. */
static socklen_t listen_addr(const struct op_dns_server_config *cfg, bool ipv6,
                             struct sockaddr_storage *out)
{
    struct op_endpoint e = {.addr = ipv6 ? op_addr_ipv6(cfg->addr6) : op_addr_ipv4(cfg->addr),
                            .port = cfg->port};
    return (socklen_t)op_io_sockaddr(&e, out);
}

/* A socket on --listen's address, or (other_family: the dual stack's
 * second kernel socket) on the other family's. */
static op_status_t open_socket(const struct op_dns_server_config *cfg, int type,
                               bool other_family, int *out)
{
    bool ipv6 = cfg->ipv6 != other_family;
    int fd = socket(ipv6 ? AF_INET6 : AF_INET,
                    type | SOCK_CLOEXEC | (type == SOCK_STREAM ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return op_status_from_errno(errno);
    int one = 1, rcvbuf = 4 << 20;
    struct sockaddr_storage sa;
    socklen_t salen = listen_addr(cfg, ipv6, &sa);
    if (ipv6 && cfg->dual_stack) /* this family alone: the other socket has the other */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (type == SOCK_DGRAM) /* a bigger queue absorbs bursts; best effort */
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&sa, salen) != 0 ||
        (type == SOCK_STREAM && listen(fd, 128) != 0)) {
        op_status_t st = op_status_from_errno(errno);
        close(fd);
        return st;
    }
    *out = fd;
    return OP_OK;
}

/* One socket and the thread that serves it. */
op_status_t dns_worker_start(struct dns_worker *w, int type, void *(*fn)(void *))
{
    op_status_t st = open_socket(&w->s->cfg, type, w->other_family, &w->fd);
    if (st != OP_OK)
        return st;
    if (pthread_create(&w->th, NULL, fn, w) != 0)
        return OP_ERR_NOMEM;
    w->started = true;
    return OP_OK;
}

static void socket_halt(struct op_dns_server *s, uint64_t *final)
{
    (void)final;
    for (unsigned i = 0; i < s->nw; i++)
        dns_thread_stop(&s->w[i]);
}

op_status_t op_dns_server_start(const struct op_dns_server_config *cfg,
                                struct op_dns_zones *zones, struct op_dns_server **out)
{
    if (cfg->udp_threads < 1 || cfg->udp_threads > 64 || cfg->burst < 1 || cfg->burst > 1024 ||
        cfg->tcp_max < 1 || cfg->udp_max < OP_DNS_UDP_MIN || cfg->udp_max > UDP_BUF)
        return OP_ERR_INVAL;
    struct op_dns_server *s = dns_server_alloc(cfg, zones, cfg->udp_threads + 1);
    if (s == NULL)
        return OP_ERR_NOMEM;
    s->halt = socket_halt;
    op_status_t st = OP_OK;
    for (unsigned i = 0; i + 1 < s->nw && st == OP_OK; i++)
        st = dns_worker_start(&s->w[i], SOCK_DGRAM, udp_main);
    if (st == OP_OK) /* the last worker: TCP */
        st = dns_tcp_start(&s->w[s->nw - 1]);
    if (st != OP_OK) {
        op_dns_server_stop(s, NULL);
        return st;
    }
    *out = s;
    return OP_OK;
}

