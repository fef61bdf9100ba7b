/* Bandwidth tests: keep tx_depth messages outstanding on every QP, signal
 * every cq_mod-th, time each post and completion (perftest's tposted and
 * tcompleted), or count completions inside the -D window. */
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_int.h"

#define OOB_CHECK_EVERY 64 /* loops between looks at the side channel */
#define QUIET_NS (50 * OP_NS_PER_MS)
#define SIGINT_LOOK_NS (20 * OP_NS_PER_MS) /* --run_infinitely: how often it looks */
/* Without -e a side spins, but not past this with nothing to do: both ends
 * of the emulated fabric are processes, and one spinning while its peer
 * waits for a core only delays the peer. */
#define SPIN_MAX_NS (20 * OP_NS_PER_US)
/* While it spins, a side yields every YIELD_EVERY empty turns: where the
 * scheduler keeps both sides on one core (a loaded machine), that is how
 * one hands the core to the other. It helps only while the other side is
 * what runs next: when the competing work is in our own scheduling group
 * (a build or busy loop started from the same session), a yield hands the
 * core to that work for a whole slice, a tick or more, and beside two busy
 * loops ib_write_bw fell from ~3000 to 600-1000 MiB/s. So yields are
 * timed: when more than a quarter of YIELD_JUDGE of them kept us off the
 * core for YIELD_LONG_NS or more, the side stops yielding (spins, then
 * sleeps) for YIELD_PAUSE_NS, then tries again. */
#define YIELD_EVERY 2
#define YIELD_JUDGE 16
#define YIELD_LONG_NS (1 * OP_NS_PER_MS)
#define YIELD_PAUSE_NS (1 * OP_NS_PER_S)

struct bw_state {
    struct perf_run *r;
    uint64_t size, iters; /* iters per QP; UINT64_MAX with -D */
    bool i_send, peer_sends, i_receive;
    uint64_t total_posted, total_completed, total_received;
    uint64_t first_recv_ns, last_recv_ns, bad_len;
    uint64_t t0, win_start, win_end, in_window, recv_in_window; /* -D */
    uint64_t last_rx_ns;
    uint64_t idle_since; /* the first of the current run of empty turns; 0: busy */
    uint32_t empty_turns, yields, long_yields; /* see YIELD_EVERY */
    uint64_t no_yield_until;
    uint64_t row_start, row_count, sig_look_ns; /* --run_infinitely */
    bool sending_done, announced, peer_done;
    struct op_perf_bw_result peer;
};

static bool window_open(const struct bw_state *s, const struct perf_qp *q)
{
    const struct op_perf_config *c = s->r->cfg;
    return q->posted < s->iters && q->posted - q->completed < c->tx_depth;
}

/* Post on every QP while its queue has room: a whole round each time, so
 * that many QPs' packets leave in one batch. */
static op_status_t post_more(struct bw_state *s, uint64_t now)
{
    struct perf_ep *ep = &s->r->ep;
    const struct op_perf_config *c = s->r->cfg;
    struct op_rdma_sge sge;
    struct op_rdma_send_wr wr = {0};
    for (uint32_t i = 0; i < ep->nqp; i++) {
        struct perf_qp *q = &ep->qps[i];
        if (!window_open(s, q))
            continue;
        perf_ep_send_wr(ep, q, s->size, &sge, &wr);
        unsigned inline_flag = wr.send_flags & OP_RDMA_SEND_INLINE;
        while (window_open(s, q)) {
            wr.wr_id = (uint64_t)i << PERF_QP_SHIFT | q->posted;
            bool last = q->posted + 1 == s->iters;
            bool signaled = (q->posted + 1) % c->cq_mod == 0 || last;
            if (c->verb == OP_PERF_ATOMIC)
                perf_atomic_wr(ep, q, q->posted, &sge, &wr);
            wr.send_flags = inline_flag | (signaled ? OP_RDMA_SEND_SIGNALED : 0);
            op_status_t st = op_rdma_post_send(q->qp, &wr, now, perf_ep_txq(ep));
            if (st == OP_ERR_NOSPACE)
                break;
            if (st != OP_OK)
                return perf_refuse(s->r->why, sizeof s->r->why, "post_send: %s (QP %u)",
                                   op_rdma_qp_error(q->qp), i);
            if (s->r->posted != NULL)
                s->r->posted[s->total_posted] = now;
            s->total_posted++;
            q->posted++;
        }
    }
    perf_ep_flush(ep);
    return OP_OK;
}

static void note_completions(struct bw_state *s, struct perf_qp *q, uint64_t upto, uint64_t now)
{
    uint64_t n = upto - q->completed;
    if (s->r->cfg->verb == OP_PERF_ATOMIC) /* before their slots are used again */
        perf_atomic_check(s->r, q, q->completed, upto);
    q->completed = upto;
    s->row_count += n;
    for (uint64_t k = 0; k < n && s->r->completed != NULL; k++)
        s->r->completed[s->total_completed + k] = now;
    s->total_completed += n;
    if (s->win_end && now >= s->win_start && now < s->win_end)
        s->in_window += n;
}

static op_status_t poll_sends(struct bw_state *s, uint64_t now)
{
    struct perf_ep *ep = &s->r->ep;
    struct op_rdma_wc wc[32];
    int n;
    while ((n = op_rdma_poll_cq(ep->scq, 32, wc)) > 0)
        for (int i = 0; i < n; i++) {
            if (wc[i].status != OP_RDMA_WC_SUCCESS)
                return perf_wc_error(s->r, &wc[i]);
            struct perf_qp *q = &ep->qps[wc[i].wr_id >> PERF_QP_SHIFT];
            note_completions(s, q, (wc[i].wr_id & PERF_IDX_MASK) + 1, now);
        }
    return OP_OK;
}

static op_status_t poll_receives(struct bw_state *s, uint64_t now)
{
    struct perf_ep *ep = &s->r->ep;
    const struct op_perf_config *c = s->r->cfg;
    uint64_t expect = s->size + (c->type == OP_RDMA_QPT_UD ? OP_RDMA_UD_GRH_LEN : 0);
    struct op_rdma_wc wc[32];
    int n;
    while ((n = op_rdma_poll_cq(ep->rcq, 32, wc)) > 0)
        for (int i = 0; i < n; i++) {
            if (wc[i].status != OP_RDMA_WC_SUCCESS)
                return perf_wc_error(s->r, &wc[i]);
            uint32_t qi = perf_ep_recv_qp(ep, &wc[i]);
            struct perf_qp *q = &ep->qps[qi];
            q->recvs_out--;
            q->received++;
            s->bad_len += wc[i].byte_len != expect;
            if (s->total_received++ == 0)
                s->first_recv_ns = now;
            s->last_recv_ns = now;
            s->recv_in_window += now >= s->win_start && now < s->win_end;
            if (perf_ep_post_receives(ep, qi, c->rx_depth) != OP_OK)
                return perf_refuse(s->r->why, sizeof s->r->why, "post_recv: %s (QP %u)",
                                   op_rdma_qp_error(q->qp), qi);
        }
    return OP_OK;
}

static bool all_sent(const struct bw_state *s)
{
    const struct perf_ep *ep = &s->r->ep;
    for (uint32_t i = 0; i < ep->nqp; i++)
        if (ep->qps[i].completed < ep->qps[i].posted || ep->qps[i].posted < s->iters)
            return false;
    return true;
}

bool perf_sigint_taken(void)
{
    sigset_t set;
    const struct timespec zero = {0, 0};
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    return sigtimedwait(&set, NULL, &zero) == SIGINT;
}

void perf_block_sigint(bool block)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    if (!block)
        (void)perf_sigint_taken(); /* one that came at the very end must not kill us now */
    (void)sigprocmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

/* A row for the interval that just ended: its completions over its time. */
static void infinite_row(struct bw_state *s, uint64_t now)
{
    const struct op_perf_config *c = s->r->cfg;
    if (now < s->row_start + (uint64_t)c->duration_s * OP_NS_PER_S)
        return;
    struct op_perf_bw_result row;
    op_perf_bw_rate(s->size, s->row_count, now - s->row_start, c->report_gbits, &row);
    op_perf_print_bw(s->r->out, c, &row);
    fflush(s->r->out);
    s->row_start = now;
    s->row_count = 0;
}

static bool time_is_up(struct bw_state *s, uint64_t now)
{
    const struct op_perf_config *c = s->r->cfg;
    if (!c->run_infinitely)
        return now >= s->t0 + (uint64_t)c->duration_s * OP_NS_PER_S;
    infinite_row(s, now);
    if (now - s->sig_look_ns < SIGINT_LOOK_NS)
        return false;
    s->sig_look_ns = now;
    if (!perf_sigint_taken())
        return false;
    s->win_end = now; /* the final row covers the whole run */
    return true;
}

/* With -D, stop posting at the end of the duration and let what is out
 * complete: every QP runs up to the next multiple of cq_mod, whose last WR
 * is signaled. */
static void duration_cutoff(struct bw_state *s, uint64_t now)
{
    const struct op_perf_config *c = s->r->cfg;
    if (!s->win_end || s->iters != UINT64_MAX || !time_is_up(s, now))
        return;
    const struct perf_ep *ep = &s->r->ep;
    uint64_t most = 1;
    for (uint32_t i = 0; i < ep->nqp; i++)
        most = ep->qps[i].posted > most ? ep->qps[i].posted : most;
    s->iters = (most + c->cq_mod - 1) / c->cq_mod * c->cq_mod;
}

static op_status_t sender_step(struct bw_state *s, uint64_t now)
{
    duration_cutoff(s, now);
    op_status_t st = poll_sends(s, now);
    if (st == OP_OK && !s->sending_done)
        st = post_more(s, now);
    if (st == OP_OK && all_sent(s))
        s->sending_done = true;
    return st;
}

static void rate_over(const struct bw_state *s, uint64_t count, uint64_t ns,
                      struct op_perf_bw_result *res)
{
    op_perf_bw_rate(s->size, count, ns, s->r->cfg->report_gbits, res);
}

static void own_result(const struct bw_state *s, struct op_perf_bw_result *res)
{
    const struct op_perf_config *c = s->r->cfg;
    if (c->duration_s) {
        rate_over(s, s->in_window, s->win_end - s->win_start, res);
        return;
    }
    op_perf_bw_compute(s->r->posted, s->r->completed, s->total_completed, s->size, c->cq_mod,
                       c->no_peak, c->report_gbits, res);
    res->iters = c->iters; /* perftest's column: per QP */
}

/* What a receive-only side of ib_send_bw measures: its receives' span (or
 * those inside the -D window), with no peak, as perftest's server. */
static void receive_result(const struct bw_state *s, struct op_perf_bw_result *res)
{
    if (s->r->cfg->duration_s && !s->r->cfg->run_infinitely) {
        rate_over(s, s->recv_in_window, s->win_end - s->win_start, res);
        return;
    }
    uint64_t span = s->last_recv_ns > s->first_recv_ns ? s->last_recv_ns - s->first_recv_ns : 0;
    rate_over(s, s->total_received, span, res);
    res->iters = s->total_received / s->r->ep.nqp;
}

static op_status_t announce(struct bw_state *s, struct op_perf_bw_result *mine)
{
    char text[PERF_LINE_MAX];
    own_result(s, mine);
    s->announced = true;
    perf_format_bw_done(mine, text, sizeof text);
    if (perf_oob_send(&s->r->oob, "DONE %s", text) != OP_OK)
        return perf_refuse(s->r->why, sizeof s->r->why, "the peer closed the side channel");
    return OP_OK;
}

static op_status_t check_peer_done(struct bw_state *s)
{
    op_status_t st = perf_poll_done(s->r, &s->peer_done, perf_parse_bw_done, &s->peer);
    if (st == OP_OK && s->peer_done)
        s->last_rx_ns = op_now_ns(); /* the quiet time counts from here */
    return st;
}

/* UC and UD senders are done once their packets leave: what is still in
 * the socket must be read before counting (until all came or the link has
 * been quiet a while: the rest was lost). */
static bool unreliable_in_flight(const struct bw_state *s, uint64_t now)
{
    const struct op_perf_config *c = s->r->cfg;
    return s->i_receive && c->type != OP_RDMA_QPT_RC && !c->duration_s &&
           s->total_received < c->iters * s->r->ep.nqp && now < s->last_rx_ns + QUIET_NS;
}

/* An empty turn of a spinning side: every YIELD_EVERY-th yields, unless
 * the last YIELD_JUDGE yields showed that the core goes to other work. */
static void spin_turn(struct bw_state *s, uint64_t now)
{
    if (now < s->no_yield_until || ++s->empty_turns % YIELD_EVERY != 0)
        return;
    sched_yield();
    s->long_yields += op_now_ns() - now >= YIELD_LONG_NS;
    if (++s->yields < YIELD_JUDGE)
        return;
    if (s->long_yields * 4 > s->yields)
        s->no_yield_until = now + YIELD_PAUSE_NS;
    s->yields = s->long_yields = 0;
}

static op_status_t loop(struct bw_state *s, struct op_perf_bw_result *mine)
{
    struct perf_run *r = s->r;
    uint64_t total = s->iters == UINT64_MAX ? UINT64_MAX : s->iters * r->ep.nqp;
    for (uint64_t turn = 0;; turn++) {
        uint64_t now = op_now_ns();
        int got = perf_ep_progress(&r->ep);
        uint64_t posted = s->total_posted;
        op_status_t st = OP_OK;
        if (s->i_send && !s->announced) {
            st = sender_step(s, now);
            if (st == OP_OK && s->sending_done)
                st = announce(s, mine);
        }
        if (st == OP_OK && s->i_receive)
            st = poll_receives(s, now);
        /* nothing came and nothing could be posted: -e sleeps at once, a
         * spinning side after SPIN_MAX_NS */
        bool idle = got == 0 && s->total_posted == posted;
        s->idle_since = !idle ? 0 : s->idle_since != 0 ? s->idle_since : now;
        bool slept = idle && (r->cfg->use_event || now - s->idle_since >= SPIN_MAX_NS);
        if (slept)
            perf_ep_wait(&r->ep, now);
        else if (idle)
            spin_turn(s, now);
        /* a side that expects nothing still looks: the peer may have failed.
         * Not at every empty turn: a receiver that waits on the sender polls
         * empty tens of thousands of times a GiB, and each look is a
         * system call on the side channel. */
        if (st == OP_OK && !s->peer_done &&
            (slept || turn % (s->peer_sends ? OOB_CHECK_EVERY : 1024) == 0))
            st = check_peer_done(s);
        if (st != OP_OK)
            return st;
        if (got > 0)
            s->last_rx_ns = now;
        if ((!s->i_send || s->announced) && (!s->peer_sends || s->peer_done) &&
            !unreliable_in_flight(s, now))
            return OP_OK;
        if (turn % 1024 == 0)
            perf_progress_note(r, s->size, s->i_send ? s->total_completed : s->total_received,
                               s->i_send ? total : UINT64_MAX);
    }
}

static op_status_t prepare(struct bw_state *s)
{
    struct perf_run *r = s->r;
    const struct op_perf_config *c = r->cfg;
    uint64_t n = c->duration_s ? 0 : c->iters * r->ep.nqp;
    if (n > r->stamps_cap) {
        free(r->posted);
        free(r->completed);
        r->posted = malloc(n * sizeof(uint64_t));
        r->completed = malloc(n * sizeof(uint64_t));
        r->stamps_cap = n;
        if (r->posted == NULL || r->completed == NULL)
            return perf_refuse(r->why, sizeof r->why, "no memory for %" PRIu64 " time stamps", n);
    }
    if (c->verb == OP_PERF_ATOMIC)
        perf_atomic_reset(r);
    for (uint32_t i = 0; i < r->ep.nqp; i++) {
        struct perf_qp *q = &r->ep.qps[i];
        q->posted = q->completed = q->received = 0;
        if (s->i_receive && perf_ep_post_receives(&r->ep, i, c->rx_depth) != OP_OK)
            return perf_refuse(r->why, sizeof r->why, "post_recv: %s", op_rdma_qp_error(q->qp));
    }
    return OP_OK;
}

op_status_t perf_run_bw(struct perf_run *r, uint64_t size, struct op_perf_bw_result *res)
{
    const struct op_perf_config *c = r->cfg;
    struct bw_state s = {.r = r, .size = size};
    s.i_send = !r->is_server || c->bidirectional;
    s.peer_sends = r->is_server || c->bidirectional;
    s.i_receive = c->verb == OP_PERF_SEND && s.peer_sends;
    s.iters = c->duration_s ? UINT64_MAX : c->iters;
    struct op_perf_bw_result mine = {0};
    op_status_t st = prepare(&s);
    if (st == OP_OK)
        st = perf_barrier(r, "GO");
    s.t0 = op_now_ns();
    if (c->duration_s) {
        s.win_start = s.t0 + (uint64_t)c->margin_s * OP_NS_PER_S;
        s.win_end = s.t0 + (uint64_t)(c->duration_s - c->margin_s) * OP_NS_PER_S;
    }
    bool infinite = c->run_infinitely && s.i_send;
    if (infinite) {
        s.win_end = UINT64_MAX; /* until SIGINT */
        s.row_start = s.sig_look_ns = s.t0;
        perf_block_sigint(true);
    }
    if (st == OP_OK)
        st = loop(&s, &mine);
    if (infinite)
        perf_block_sigint(false);
    if (st != OP_OK)
        return st;
    if (c->bidirectional) { /* perftest adds both directions */
        *res = mine;
        res->bw_peak += s.peer.bw_peak;
        res->bw_avg += s.peer.bw_avg;
        res->msg_rate += s.peer.msg_rate;
    } else if (s.i_send) {
        *res = mine;
    } else if (c->verb == OP_PERF_SEND) {
        receive_result(&s, res);
    } else {
        *res = s.peer;
    }
    /* where the bytes landed: the target of writes and sends, the reader */
    bool landed_here = c->verb == OP_PERF_READ ? s.i_send : s.peer_sends;
    /* every QP writes or reads at least once; sends may all be lost on UD */
    uint64_t messages = c->verb == OP_PERF_SEND ? s.total_received : 1;
    r->check[0] = '\0';
    if (c->verb == OP_PERF_ATOMIC)
        perf_atomic_verdict(r, s.i_send, s.peer_sends, c->duration_s ? 0 : c->iters);
    else if (landed_here)
        perf_check_data(r, size, messages);
    uint64_t fewest = UINT64_MAX; /* with an SRQ every QP must still get all of its own */
    for (uint32_t i = 0; i < r->ep.nqp; i++)
        fewest = r->ep.qps[i].received < fewest ? r->ep.qps[i].received : fewest;
    if (s.i_receive && c->type == OP_RDMA_QPT_RC && !c->duration_s &&
        (s.total_received != c->iters * r->ep.nqp || fewest != c->iters)) {
        snprintf(r->check, sizeof r->check,
                 "failed: %" PRIu64 " messages received, %" PRIu64 " sent", s.total_received,
                 c->iters * r->ep.nqp);
        r->check_failed = true;
    }
    if (s.bad_len) {
        snprintf(r->check, sizeof r->check, "failed: %" PRIu64 " receives of a wrong length",
                 s.bad_len);
        r->check_failed = true;
    }
    return OP_OK;
}
