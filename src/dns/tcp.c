/* The TCP thread every model shares (RFC 7766: 2-byte length framing,
 * pipelined queries answered in order, idle connections closed, zone
 * transfers to whom --allow-transfer lets): a kernel socket and its
 * connections as watches of a loop (src/loop) with no packet backend, the
 * idle timeout as that loop's one engine's timer. */
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
#include "offpath/loop.h"

#define POLL_MS 100 /* how soon a blocked thread sees stop */

/* ---- TCP ---- */
struct tcp_server;

struct conn {
    int fd;
    unsigned slot;              /* its place in the server's table */
    struct tcp_server *ts;
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

/* The thread's state: the loop that waits on the listening socket and
 * every connection, and the connections by slot. */
struct tcp_server {
    struct dns_worker *w;
    struct op_loop *loop;
    struct conn **conns;
    unsigned max;
};

static void tcp_close(struct tcp_server *ts, struct conn *c)
{
    op_loop_unwatch(ts->loop, c->fd);
    conn_close(ts->w, &ts->conns[c->slot]);
}

/* A connection ready: served, then waited on for reading, or for writing
 * while an answer is on its way; closed when it is gone. */
static void conn_ready(void *ctx, int fd, unsigned ready)
{
    struct conn *c = ctx;
    struct tcp_server *ts = c->ts;
    (void)fd;
    if (!conn_serve(ts->w, c, ready, op_now_ns()))
        tcp_close(ts, c);
    else
        (void)op_loop_watch_set(ts->loop, c->fd, c->outlen ? OP_IO_OUT : OP_IO_IN);
}

static void tcp_accept(void *ctx, int lfd, unsigned ready)
{
    struct tcp_server *ts = ctx;
    struct dns_worker *w = ts->w;
    struct sockaddr_in6 peer;
    socklen_t plen = sizeof(peer);
    (void)ready;
    int fd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    for (unsigned i = 0; i < ts->max; i++) {
        if (ts->conns[i] != NULL)
            continue;
        struct conn *c = calloc(1, sizeof(struct conn));
        if (c == NULL || op_loop_watch_events(ts->loop, fd, OP_IO_IN, conn_ready, c) != OP_OK) {
            free(c);
            break;
        }
        *c = (struct conn){.fd = fd, .slot = i, .ts = ts, .last_ns = op_now_ns()};
        c->xfr_ok = op_dns_acl_allows(w->s->cfg.xfr_acl, w->s->cfg.n_xfr_acl, &peer);
        ts->conns[i] = c;
        w->c[OP_DNS_C_tcp_conns]++;
        return;
    }
    w->c[OP_DNS_C_tcp_conn_refused]++;
    close(fd);
}

/* Idle connections close (RFC 7766's idle timeout): an engine with a
 * timer and no packets. */
static uint64_t idle_ns(const struct tcp_server *ts)
{
    return (uint64_t)ts->w->s->cfg.tcp_idle_ms * OP_NS_PER_MS;
}

static uint64_t idle_deadline(const void *eng)
{
    const struct tcp_server *ts = eng;
    uint64_t t = UINT64_MAX;
    for (unsigned i = 0; i < ts->max; i++)
        if (ts->conns[i] != NULL && ts->conns[i]->last_ns + idle_ns(ts) < t)
            t = ts->conns[i]->last_ns + idle_ns(ts);
    return t;
}

static void idle_close(void *eng, uint64_t now, struct op_txq *out)
{
    struct tcp_server *ts = eng;
    (void)out;
    for (unsigned i = 0; i < ts->max; i++)
        if (ts->conns[i] != NULL && now - ts->conns[i]->last_ns > idle_ns(ts)) {
            ts->w->c[OP_DNS_C_tcp_idle_closed]++;
            tcp_close(ts, ts->conns[i]);
        }
}

static const struct op_engine_ops idle_ops = {
    .name = "dns_tcp_idle", .timer = idle_close, .next_deadline = idle_deadline};

static void *tcp_main(void *arg)
{
    struct dns_worker *w = arg;
    struct tcp_server ts = {.w = w, .max = w->s->cfg.tcp_max};
    struct op_loop_config c = {.io = NULL};
    ts.conns = calloc(ts.max, sizeof(*ts.conns));
    if (ts.conns == NULL || op_loop_create(&c, &ts.loop) != OP_OK ||
        op_loop_add(ts.loop, &idle_ops, &ts) != OP_OK ||
        op_loop_watch_events(ts.loop, w->fd, OP_IO_IN, tcp_accept, &ts) != OP_OK) {
        OP_ERROR(w->s->cfg.log, "dns: tcp thread: out of memory");
    } else {
        while (!dns_server_stopping(w->s)) {
            (void)op_loop_run_once(ts.loop, op_now_ns() + POLL_MS * OP_NS_PER_MS);
            dns_publish(w);
        }
        for (unsigned i = 0; i < ts.max; i++)
            if (ts.conns[i] != NULL)
                tcp_close(&ts, ts.conns[i]);
        dns_publish(w);
    }
    op_loop_destroy(ts.loop);
    free(ts.conns);
    return NULL;
}

op_status_t dns_tcp_start(struct dns_worker *w)
{
    return dns_worker_start(w, SOCK_STREAM, tcp_main);
}
