/* Latency tests, perftest's ping-pong: the client posts, waits for the
 * answer, posts again; each sample is the interval between two posts (one
 * round trip). ib_write_lat answers by RDMA-writing a counter into the last
 * byte of the peer's buffer (both sides spin on their own), ib_send_lat by a
 * send, ib_read_lat needs no answer: the read's completion is the round trip. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "perf_int.h"

#define LAT_RECV_DEPTH 16
#define OOB_CHECK_EVERY 256

struct lat_state {
    struct perf_run *r;
    struct perf_qp *q;
    uint64_t size;
    uint64_t *stamps;
    uint64_t n, cap;     /* stamps taken, room */
    uint64_t t0, win_start, win_end;
    bool peer_done;      /* the client said DONE (the server's loop ends) */
    struct op_perf_lat_result peer;
};

static volatile const uint8_t *last_byte(const struct lat_state *s)
{
    return s->q->buf + s->r->ep.bufsize + s->size - 1;
}

static op_status_t reap_sends(struct lat_state *s, bool *read_done)
{
    struct op_rdma_wc wc[8];
    int n;
    while ((n = op_rdma_poll_cq(s->r->ep.scq, 8, wc)) > 0)
        for (int i = 0; i < n; i++) {
            if (wc[i].status != OP_RDMA_WC_SUCCESS)
                return perf_wc_error(s->r, &wc[i]);
            if (read_done != NULL && wc[i].opcode != OP_RDMA_WC_SEND &&
                wc[i].opcode != OP_RDMA_WC_RDMA_WRITE)
                *read_done = true; /* a READ or an atomic: its answer is here */
        }
    return OP_OK;
}

static op_status_t reap_receive(struct lat_state *s, bool *got)
{
    struct op_rdma_wc wc;
    if (op_rdma_poll_cq(s->r->ep.rcq, 1, &wc) <= 0)
        return OP_OK;
    if (wc.status != OP_RDMA_WC_SUCCESS)
        return perf_wc_error(s->r, &wc);
    s->q->recvs_out--;
    *got = true;
    if (perf_ep_post_receives(&s->r->ep, 0, LAT_RECV_DEPTH) != OP_OK)
        return perf_refuse(s->r->why, sizeof s->r->why, "post_recv: %s",
                           op_rdma_qp_error(s->q->qp));
    return OP_OK;
}

static op_status_t peer_line(struct lat_state *s)
{
    return perf_poll_done(s->r, &s->peer_done, perf_parse_lat_done, &s->peer);
}

/* Spin until this iteration's answer is here (true), or, on the server, the
 * client said it is done (false). */
static op_status_t await_answer(struct lat_state *s, uint64_t i, bool *arrived)
{
    const struct op_perf_config *c = s->r->cfg;
    uint8_t want = (uint8_t)(i + 1);
    *arrived = false;
    for (uint64_t turn = 0;; turn++) {
        bool got = false;
        int pkts = perf_ep_spin(&s->r->ep, 1);
        op_status_t st = reap_sends(s, perf_client_only(c) ? &got : NULL);
        if (st == OP_OK && c->verb == OP_PERF_SEND)
            st = reap_receive(s, &got);
        if (c->verb == OP_PERF_WRITE)
            got = *last_byte(s) == want;
        if (st != OP_OK || got) {
            *arrived = got;
            return st; /* the ACK waits for the answer's post */
        }
        perf_ep_flush(&s->r->ep);
        bool slept = c->use_event && pkts == 0;
        if (slept)
            perf_ep_wait(&s->r->ep, op_now_ns());
        /* Both sides look at the side channel (the client's DONE, a peer
         * gone) only every OOB_CHECK_EVERY turns when spinning: a TCP read
         * on every empty poll made each turn, and so the answer, about 1 us
         * later. After a sleep it costs nothing that matters. */
        if (slept || turn % OOB_CHECK_EVERY == OOB_CHECK_EVERY - 1) {
            st = peer_line(s);
            if (st != OP_OK || s->peer_done)
                return st;
        }
    }
}

/* Completion batching: a WRITE or SEND nobody waits for is signaled every
 * PERF_LAT_SIGNAL_EVERY-th time (and the last), so only those ask for an
 * ACK and one ACK covers the messages before it. Every ACK is a datagram
 * each side sends and reads (1-2 us of system calls on loopback), and in
 * an RC ping-pong an ACK per message kept both sides busy for the whole
 * round trip. READs and atomics are waited for: each is signaled. */
static bool signaled(const struct lat_state *s, uint64_t i)
{
    const struct op_perf_config *c = s->r->cfg;
    return perf_client_only(c) || (i + 1) % PERF_LAT_SIGNAL_EVERY == 0 ||
           (!c->duration_s && i + 1 == c->iters);
}

/* now: the clock read of the sample this post starts */
static op_status_t post_one(struct lat_state *s, uint64_t i, uint64_t now)
{
    struct perf_ep *ep = &s->r->ep;
    struct op_rdma_sge sge;
    struct op_rdma_send_wr wr;
    perf_ep_send_wr(ep, s->q, s->size, &sge, &wr);
    if (ep->cfg->verb == OP_PERF_ATOMIC)
        perf_atomic_wr(ep, s->q, i, &sge, &wr);
    wr.wr_id = i;
    if (signaled(s, i))
        wr.send_flags |= OP_RDMA_SEND_SIGNALED;
    if (ep->cfg->verb == OP_PERF_WRITE)
        s->q->buf[s->size - 1] = (uint8_t)(i + 1);
    uint64_t flushes;
    int acks;
    for (;;) {
        flushes = perf_ep_flushes(ep);
        acks = perf_ep_txq(ep)->n; /* ACKs queued by the poll that saw the question */
        op_status_t st = op_rdma_post_send(s->q->qp, &wr, now, perf_ep_txq(ep));
        if (st == OP_OK)
            break;
        if (st != OP_ERR_NOSPACE)
            return perf_refuse(s->r->why, sizeof s->r->why, "post_send: %s",
                               op_rdma_qp_error(s->q->qp));
        /* the previous message's ACK is not in yet: tx depth 1 */
        perf_ep_progress(ep);
        if ((st = reap_sends(s, NULL)) != OP_OK)
            return st;
        now = op_now_ns();
    }
    if (flushes == perf_ep_flushes(ep))
        perf_ep_answer_first(ep, acks);
    perf_ep_flush(ep);
    return OP_OK;
}

static op_status_t stamp(struct lat_state *s, uint64_t now)
{
    if (s->win_end && (now < s->win_start || now >= s->win_end))
        return OP_OK;
    if (s->n == s->cap) {
        uint64_t cap = s->cap ? s->cap * 2 : 4096;
        uint64_t *p = realloc(s->stamps, cap * sizeof(*p));
        if (p == NULL)
            return perf_refuse(s->r->why, sizeof s->r->why, "no memory for time stamps");
        s->stamps = p;
        s->cap = cap;
    }
    s->stamps[s->n++] = now;
    return OP_OK;
}

static bool more(const struct lat_state *s, uint64_t i, uint64_t now)
{
    const struct op_perf_config *c = s->r->cfg;
    if (c->duration_s)
        return now < s->t0 + (uint64_t)c->duration_s * OP_NS_PER_S;
    return i < c->iters;
}

/* The client: post, await, repeat. The server (write, send): await, post. */
static op_status_t ping_pong(struct lat_state *s)
{
    bool client = !s->r->is_server;
    for (uint64_t i = 0;; i++) {
        /* one clock read between the answer and the next post (the
         * client's: its sample's); the server takes its poll's (below) */
        uint64_t now = op_now_ns();
        if ((client || !s->r->cfg->duration_s) && !more(s, i, now))
            return OP_OK;
        bool arrived = true;
        op_status_t st = client ? OP_OK : await_answer(s, i, &arrived);
        if (st != OP_OK || !arrived)
            return st;
        /* the server's sample: the clock the spin read once the answer
         * came (a clock read here would delay the answer by its cost) */
        if (!client)
            now = perf_ep_poll_time(&s->r->ep);
        if ((st = stamp(s, now)) != OP_OK || (st = post_one(s, i, now)) != OP_OK)
            return st;
        if (client && (st = await_answer(s, i, &arrived)) != OP_OK)
            return st;
        if (client && s->r->cfg->verb == OP_PERF_ATOMIC)
            perf_atomic_check(s->r, s->q, i, i + 1);
        if (i % 1024 == 0)
            perf_progress_note(s->r, s->size, i, s->r->cfg->duration_s ? UINT64_MAX
                                                                       : s->r->cfg->iters);
    }
}

static op_status_t await_done(struct lat_state *s)
{
    while (!s->peer_done) {
        uint64_t now = op_now_ns();
        if (perf_ep_progress(&s->r->ep) == 0 && s->r->cfg->use_event)
            perf_ep_wait(&s->r->ep, now); /* ib_read_lat's server only serves */
        op_status_t st = reap_sends(s, NULL);
        if (st == OP_OK)
            st = peer_line(s);
        if (st != OP_OK)
            return st;
    }
    return OP_OK;
}

static op_status_t finish(struct lat_state *s, struct op_perf_lat_result *res)
{
    const struct op_perf_config *c = s->r->cfg;
    unsigned rtt = perf_client_only(c) ? 1 : 2; /* perftest: READ and atomics report the RTT */
    bool measured = !s->r->is_server || !perf_client_only(c);
    if (measured && op_perf_lat_compute(s->stamps, s->n, rtt, s->size, res) != OP_OK)
        return perf_refuse(s->r->why, sizeof s->r->why,
                           "%" PRIu64 " samples: too few for a latency report (-n, -D)", s->n);
    if (measured && !c->duration_s)
        res->iters = c->iters;
    if (!s->r->is_server) {
        char text[PERF_LINE_MAX];
        perf_format_lat_done(res, text, sizeof text);
        if (perf_oob_send(&s->r->oob, "DONE %s", text) != OP_OK)
            return perf_refuse(s->r->why, sizeof s->r->why, "the peer closed the side channel");
        return OP_OK;
    }
    op_status_t st = await_done(s);
    if (st == OP_OK && !measured)
        *res = s->peer; /* ib_read_lat's server only served: show the client's figures */
    return st;
}

op_status_t perf_run_lat(struct perf_run *r, uint64_t size, struct op_perf_lat_result *res)
{
    const struct op_perf_config *c = r->cfg;
    struct perf_ep *ep = &r->ep;
    struct lat_state s = {.r = r, .q = &ep->qps[0], .size = size};
    op_status_t st = OP_OK;
    *(uint8_t *)last_byte(&s) = 0;
    perf_ep_lat_batching(ep, size);
    if (c->verb == OP_PERF_ATOMIC)
        perf_atomic_reset(r);
    if (c->verb == OP_PERF_SEND)
        st = perf_ep_post_receives(ep, 0, LAT_RECV_DEPTH);
    if (st == OP_OK)
        st = perf_barrier(r, "GO");
    s.t0 = op_now_ns();
    if (c->duration_s) {
        s.win_start = s.t0 + (uint64_t)c->margin_s * OP_NS_PER_S;
        s.win_end = s.t0 + (uint64_t)(c->duration_s - c->margin_s) * OP_NS_PER_S;
    }
    bool pings = !r->is_server || !perf_client_only(c);
    if (st == OP_OK && pings)
        st = ping_pong(&s);
    if (st == OP_OK)
        st = finish(&s, res);
    s.q->buf[size - 1] = ep->pattern[size - 1]; /* the counter's byte */
    r->check[0] = '\0';
    if (st == OP_OK && c->verb == OP_PERF_ATOMIC)
        perf_atomic_verdict(r, !r->is_server, r->is_server, c->duration_s ? 0 : c->iters);
    else if (st == OP_OK && (c->verb != OP_PERF_READ || !r->is_server))
        perf_check_data(r, size, 1);
    free(s.stamps);
    return st;
}
