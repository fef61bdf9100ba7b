/* The socket model: UDP threads, each with its own SO_REUSEPORT socket
 * (the kernel spreads the clients across them), answering bursts on the one
 * driver (src/loop) over the udp backend (recvmmsg/sendmmsg), and one TCP
 * thread (RFC 7766: 2-byte length framing,
 * pipelined queries answered in order, idle connections closed).
 *
 * Threads block in poll when there is nothing to do, so an idle server
 * costs nothing. Each thread owns its counters and publishes them after
 * every burst (relaxed atomics, one writer). The zone set is swapped on
 * reload; a thread announces the set it is reading (a hazard pointer), and
 * the old set is handed back only when no thread announces it. */
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

void dns_publish(struct dns_worker *w)
{
    for (int i = 0; i < OP_DNS_C_COUNT_; i++)
        atomic_store_explicit(&w->pub[i], w->c[i], memory_order_relaxed);
}

const struct op_dns_zones *dns_zones_enter(struct dns_worker *w)
{
    const struct op_dns_zones *z;
    do {
        z = atomic_load(&w->s->zones);
        atomic_store(&w->hazard, z);
    } while (z != atomic_load(&w->s->zones));
    return z;
}

void dns_zones_leave(struct dns_worker *w) { atomic_store(&w->hazard, NULL); }

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

/* ---- TCP ---- */
struct conn {
    int fd;
    uint8_t in[2 + OP_DNS_MSG_MAX];
    size_t inlen;
    uint8_t out[2 + OP_DNS_MSG_MAX];
    size_t outlen, outoff;
    uint64_t last_ns;
    bool xfr_ok;         /* the client may transfer zones (--allow-transfer) */
    bool cont;           /* out holds a transfer's later message, not an answer */
    struct op_dns_xfr xfr;
};

static void conn_close(struct dns_worker *w, struct conn **cp)
{
    struct conn *c = *cp;
    if (c->outlen > c->outoff && !c->cont)
        w->c[OP_DNS_C_drop_tcp_closed]++;
    if (c->xfr.active || (c->outlen > c->outoff && c->cont))
        w->c[OP_DNS_C_xfr_aborted]++;
    close(c->fd);
    free(c);
    *cp = NULL;
}

/* Send what is pending; false when the connection is gone. */
static bool conn_flush(struct dns_worker *w, struct conn *c)
{
    while (c->outoff < c->outlen) {
        ssize_t r = send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r > 0) {
            c->outoff += (size_t)r;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else {
            return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
        }
    }
    if (c->outlen > 0 && !c->cont)
        w->c[OP_DNS_C_tcp_tx]++;
    c->outlen = c->outoff = 0;
    c->cont = false;
    return true;
}

static void conn_set_out(struct conn *c, size_t len, bool cont)
{
    c->out[0] = (uint8_t)(len >> 8);
    c->out[1] = (uint8_t)len;
    c->outlen = 2 + len;
    c->cont = cont;
}

/* A transfer's next message once the last has gone; false when there is
 * none to send. A reload since it began ends it (the set it reads may be
 * gone): the client sees the stream stop and asks again. */
static bool conn_continue(struct dns_worker *w, struct conn *c)
{
    if (c->outlen > 0 || !c->xfr.active)
        return false;
    const struct op_dns_zones *z = dns_zones_enter(w);
    size_t len = 0;
    if (z == c->xfr.zones)
        len = op_dns_xfr_next(&c->xfr, c->out + 2, OP_DNS_MSG_MAX, w->c);
    else
        c->xfr.active = false, w->c[OP_DNS_C_xfr_aborted]++;
    dns_zones_leave(w);
    if (len > 0)
        conn_set_out(c, len, true);
    return len > 0;
}

/* Answer the first whole message of the input, if there is one and no
 * answer is still on its way (answers go out in the order asked). */
static bool conn_answer(struct dns_worker *w, struct conn *c)
{
    if (c->outlen > 0 || c->xfr.active || c->inlen < 2)
        return false;
    size_t mlen = (size_t)c->in[0] << 8 | c->in[1];
    if (c->inlen < 2 + mlen)
        return false;
    struct op_dns_query_info qi = dns_query_info(&w->s->cfg, true, w->s->cfg.udp_max);
    qi.xfr = c->xfr_ok ? &c->xfr : NULL;
    w->c[OP_DNS_C_tcp_rx]++;
    const struct op_dns_zones *z = dns_zones_enter(w);
    size_t len = op_dns_respond(z, &qi, c->in + 2, mlen, c->out + 2, OP_DNS_MSG_MAX, w->c);
    dns_zones_leave(w);
    memmove(c->in, c->in + 2 + mlen, c->inlen - 2 - mlen);
    c->inlen -= 2 + mlen;
    if (len > 0)
        conn_set_out(c, len, false);
    return true;
}

/* Read, answer, write, until the connection would block; false to close. */
static bool conn_serve(struct dns_worker *w, struct conn *c, unsigned ready, uint64_t now)
{
    if (ready & (OP_IO_IN | OP_IO_ERR)) {
        ssize_t r = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return false;
        if (r > 0) {
            c->inlen += (size_t)r;
            c->last_ns = now;
        }
    }
    do {
        if (!conn_flush(w, c))
            return false;
    } while (conn_answer(w, c) || conn_continue(w, c));
    return conn_flush(w, c);
}

static void tcp_accept(struct dns_worker *w, int lfd, struct conn **conns, unsigned max, uint64_t now)
{
    struct sockaddr_in6 peer;
    socklen_t plen = sizeof(peer);
    int fd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    for (unsigned i = 0; i < max; i++) {
        if (conns[i] != NULL)
            continue;
        conns[i] = calloc(1, sizeof(struct conn));
        if (conns[i] == NULL)
            break;
        conns[i]->fd = fd;
        conns[i]->last_ns = now;
        conns[i]->xfr_ok = op_dns_acl_allows(w->s->cfg.xfr_acl, w->s->cfg.n_xfr_acl, &peer);
        w->c[OP_DNS_C_tcp_conns]++;
        return;
    }
    w->c[OP_DNS_C_tcp_conn_refused]++;
    close(fd);
}

/* Slot 0 the listening socket, slot 1 + i connection i: read, or written
 * while an answer is on its way. */
static void tcp_round(struct dns_worker *w, struct op_io_waitset *ws, struct conn **conns,
                      unsigned max)
{
    uint64_t now = op_now_ns(), idle = (uint64_t)w->s->cfg.tcp_idle_ms * OP_NS_PER_MS;
    op_io_waitset_set(ws, 0, w->fd, OP_IO_IN);
    for (unsigned i = 0; i < max; i++)
        op_io_waitset_set(ws, 1 + i, conns[i] ? conns[i]->fd : -1,
                          conns[i] && conns[i]->outlen ? OP_IO_OUT : OP_IO_IN);
    if (op_io_waitset_wait(ws, now + POLL_MS * OP_NS_PER_MS) < 0)
        return;
    now = op_now_ns();
    for (unsigned i = 0; i < max; i++) {
        if (conns[i] == NULL)
            continue;
        unsigned ready = op_io_waitset_ready(ws, 1 + i);
        if (ready != 0 && !conn_serve(w, conns[i], ready, now)) {
            conn_close(w, &conns[i]);
        } else if (now - conns[i]->last_ns > idle) {
            w->c[OP_DNS_C_tcp_idle_closed]++;
            conn_close(w, &conns[i]);
        }
    }
    if (op_io_waitset_ready(ws, 0) & OP_IO_IN)
        tcp_accept(w, w->fd, conns, max, now);
    dns_publish(w);
}

static void *tcp_main(void *arg)
{
    struct dns_worker *w = arg;
    unsigned max = w->s->cfg.tcp_max;
    struct conn **conns = calloc(max, sizeof(*conns));
    struct op_io_waitset *ws = NULL;
    if (conns == NULL || op_io_waitset_new(1 + max, &ws) != OP_OK) {
        OP_ERROR(w->s->cfg.log, "dns: tcp thread: out of memory");
    } else {
        while (!dns_server_stopping(w->s))
            tcp_round(w, ws, conns, max);
        for (unsigned i = 0; i < max; i++)
            if (conns[i] != NULL)
                conn_close(w, &conns[i]);
        dns_publish(w);
    }
    free(conns);
    op_io_waitset_free(ws);
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

/* ---- who may transfer ---- */

static bool prefix_eq(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned bytes = bits / 8, rest = bits % 8;
    if (memcmp(a, b, bytes) != 0)
        return false;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return rest == 0 || (a[bytes] & mask) == (b[bytes] & mask);
}

bool op_dns_acl_allows(const struct op_dns_acl *acl, unsigned n, const void *sa)
{
    static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    const struct sockaddr *s = sa;
    const uint8_t *v4 = NULL, *v6 = NULL;
    if (s->sa_family == AF_INET) {
        v4 = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
    } else if (s->sa_family == AF_INET6) {
        v6 = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        if (memcmp(v6, v4_mapped, 12) == 0)
            v4 = v6 + 12;
    }
    for (unsigned i = 0; i < n; i++) {
        const uint8_t *peer = acl[i].ipv6 ? v6 : v4;
        if (peer != NULL && prefix_eq(peer, acl[i].addr, acl[i].prefix))
            return true;
    }
    return false;
}

op_status_t op_dns_acl_parse(const char *text, struct op_dns_acl *out)
{
    char addr[INET6_ADDRSTRLEN];
    const char *slash = strchr(text, '/');
    size_t n = slash != NULL ? (size_t)(slash - text) : strlen(text);
    if (n == 0 || n >= sizeof(addr))
        return OP_ERR_INVAL;
    memcpy(addr, text, n);
    addr[n] = 0;
    memset(out, 0, sizeof(*out));
    if (inet_pton(AF_INET, addr, out->addr) == 1)
        out->prefix = 32;
    else if (inet_pton(AF_INET6, addr, out->addr) == 1)
        out->ipv6 = true, out->prefix = 128;
    else
        return OP_ERR_INVAL;
    uint64_t prefix;
    if (slash != NULL) {
        if (op_parse_u64(slash + 1, 0, out->prefix, &prefix) != OP_OK)
            return OP_ERR_INVAL;
        out->prefix = (uint8_t)prefix;
    }
    return OP_OK;
}

void op_dns_server_config_default(struct op_dns_server_config *cfg)
{
    *cfg = (struct op_dns_server_config){
        .addr = 0x7f000001u, .port = 53, .udp_threads = 1, .burst = 64, .tcp_max = 64,
        .tcp_idle_ms = 10000, .udp_max = OP_DNS_UDP_DEFAULT, .rrl_slip = 2, .log = NULL};
}

static void dns_server_free_workers(struct op_dns_server *s)
{
    for (unsigned i = 0; i < s->nw; i++)
        op_dns_rrl_free(s->w[i].rrl);
    free(s->w);
    free(s);
}

struct op_dns_server *dns_server_alloc(const struct op_dns_server_config *cfg,
                                       struct op_dns_zones *zones, unsigned nw)
{
    struct op_dns_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->cfg = *cfg;
    s->nw = nw;
    size_t size = (nw * sizeof(struct dns_worker) + 63) / 64 * 64;
    s->w = aligned_alloc(64, size);
    if (s->w == NULL) {
        free(s);
        return NULL;
    }
    memset(s->w, 0, size);
    for (unsigned i = 0; i < nw; i++) {
        s->w[i].s = s;
        s->w[i].fd = -1;
        s->w[i].index = i;
        s->w[i].rrl = cfg->rrl_rate > 0 ? op_dns_rrl_new(cfg->rrl_rate, cfg->rrl_slip) : NULL;
        if (cfg->rrl_rate > 0 && s->w[i].rrl == NULL) {
            dns_server_free_workers(s);
            return NULL;
        }
    }
    atomic_store(&s->zones, zones);
    return s;
}

bool dns_server_stopping(const struct op_dns_server *s)
{
    return atomic_load_explicit(&s->stop, memory_order_relaxed);
}

/* One socket and the thread that serves it. */
static op_status_t worker_start(struct dns_worker *w, int type, void *(*fn)(void *))
{
    op_status_t st = open_socket(&w->s->cfg, type, w->other_family, &w->fd);
    if (st != OP_OK)
        return st;
    if (pthread_create(&w->th, NULL, fn, w) != 0)
        return OP_ERR_NOMEM;
    w->started = true;
    return OP_OK;
}

op_status_t dns_tcp_start(struct dns_worker *w) { return worker_start(w, SOCK_STREAM, tcp_main); }

/* Join the thread (the caller has set stop), close the socket. */
void dns_thread_stop(struct dns_worker *w)
{
    if (w->started)
        pthread_join(w->th, NULL);
    w->started = false;
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
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
        st = worker_start(&s->w[i], SOCK_DGRAM, udp_main);
    if (st == OP_OK) /* the last worker: TCP */
        st = dns_tcp_start(&s->w[s->nw - 1]);
    if (st != OP_OK) {
        op_dns_server_stop(s, NULL);
        return st;
    }
    *out = s;
    return OP_OK;
}

struct op_dns_zones *op_dns_server_reload(struct op_dns_server *s, struct op_dns_zones *zones)
{
    struct op_dns_zones *old = atomic_exchange(&s->zones, zones);
    for (unsigned i = 0; i < s->nw; i++) {
        /* A thread holds a set for one burst or one TCP message: short. */
        while (atomic_load(&s->w[i].hazard) == old) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    return old;
}

void op_dns_server_count(struct op_dns_server *s, enum op_dns_counter c)
{
    if ((unsigned)c < OP_DNS_C_COUNT_)
        atomic_fetch_add_explicit(&s->ctl[c], 1, memory_order_relaxed);
}

void op_dns_server_counters(const struct op_dns_server *s, uint64_t out[OP_DNS_C_COUNT_])
{
    for (int k = 0; k < OP_DNS_C_COUNT_; k++) {
        out[k] = atomic_load_explicit(&s->ctl[k], memory_order_relaxed);
        for (unsigned i = 0; i < s->nw; i++)
            out[k] += atomic_load_explicit(&s->w[i].pub[k], memory_order_relaxed);
    }
    if (s->port_stats != NULL)
        s->port_stats(s, out);
}

struct op_dns_zones *op_dns_server_stop(struct op_dns_server *s, uint64_t final[OP_DNS_C_COUNT_])
{
    atomic_store(&s->stop, true);
    if (final != NULL) /* the device's counters go with the device */
        memset(final, 0, OP_DNS_C_COUNT_ * sizeof(*final));
    if (s->halt != NULL)
        s->halt(s, final);
    struct op_dns_zones *z = atomic_load(&s->zones);
    if (final != NULL) {
        uint64_t port[OP_DNS_C_COUNT_];
        memcpy(port, final, sizeof(port));
        s->port_stats = NULL;
        op_dns_server_counters(s, final);
        for (int k = 0; k < OP_DNS_C_COUNT_; k++)
            final[k] += port[k];
    }
    dns_server_free_workers(s);
    return z;
}
