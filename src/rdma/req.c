/* The requester: segments WRs into MTU-sized packets with PSNs, keeps a
 * window of them outstanding, takes ACKs, NAKs and READ responses, and goes
 * back to the oldest unacknowledged PSN (go-back-N) on a timeout, a
 * sequence NAK, the end of an RNR wait, or a response that skipped a READ's
 * data. UC and UD send and complete at once: nothing comes back for them. */
#include <inttypes.h>
#include <stdio.h>

#include "rdma_internal.h"

#define RETRY_FOREVER 7
#define WINDOW_MIN 4 /* PSNs: what a loss leaves the window at least */

static struct rdma_swqe *swqe(struct rdma_req *r, uint32_t i) { return rdma_swqe_at(r, i); }

static uint32_t last_psn(const struct rdma_swqe *w) { return psn_add(w->first_psn, w->npkts - 1); }

static bool outstanding(const struct rdma_req *r) { return psn_diff(r->hi_psn, r->una) > 0; }

void rdma_req_init(struct op_rdma_qp *qp)
{
    struct rdma_req *r = &qp->req;
    r->una = r->next_psn = r->hi_psn = qp->attr.sq_psn;
    r->cur_pkt = r->since_ackreq = 0;
    r->window = r->window_max = qp->attr.max_outstanding;
    r->grow_from = r->una;
    r->rto_ns = op_rdma_timeout_ns(qp->attr.timeout);
    r->rto_at = r->rnr_at = r->probe_at = UINT64_MAX;
    r->srtt_ns = r->rttvar_ns = r->last_response_at = 0;
    r->sampling = false;
    r->probes_in_row = 0;
    r->probe_floor_ns = 0;
    r->undo_armed = false;
    r->retries = qp->attr.retry_cnt;
    r->rnr_retries = qp->attr.rnr_retry;
    r->rewound = false;
}

uint64_t rdma_req_deadline(const struct op_rdma_qp *qp)
{
    const struct rdma_req *r = &qp->req;
    uint64_t t = r->rto_at < r->rnr_at ? r->rto_at : r->rnr_at;
    return r->probe_at < t ? r->probe_at : t;
}

void rdma_req_flush(struct op_rdma_qp *qp, unsigned status, const char *cause)
{
    struct rdma_req *r = &qp->req;
    for (; r->head != r->tail; r->head++)
        rdma_complete_send(qp, swqe(r, r->head), status, cause);
    r->cur = r->tail;
    r->rto_at = r->rnr_at = r->probe_at = UINT64_MAX;
}

/* The head WR fails with status; the QP goes to ERR and flushes the rest. */
static void req_fail(struct op_rdma_qp *qp, unsigned status, const char *cause)
{
    struct rdma_req *r = &qp->req;
    char text[RDMA_CAUSE_LEN];
    snprintf(text, sizeof text, "%s", cause);
    if (r->head != r->tail) {
        rdma_complete_send(qp, swqe(r, r->head), status, qp->cause);
        r->head++;
    }
    rdma_qp_fail(qp, "%s", text);
}

/* ---- sending */
static uint8_t first_mid_last(uint8_t first, uint32_t k, uint32_t n, bool imm)
{
    /* FIRST, MIDDLE, LAST, LAST_IMM, ONLY, ONLY_IMM follow one another in
     * the opcode table for both SEND and WRITE */
    if (n == 1)
        return (uint8_t)(first + 4 + imm);
    if (k == 0)
        return first;
    return (uint8_t)(k + 1 < n ? first + 1 : first + 2 + imm);
}

/* A READ request for what the window has room for (at least one PSN): the
 * responder answers a request in one burst, so the window bounds the burst
 * as it bounds WRITEs. */
static void read_request(struct rdma_req *r, const struct rdma_swqe *w, uint32_t mtu,
                         struct op_reth *reth, struct rdma_out *o)
{
    uint32_t k = r->cur_pkt, room = r->window - (uint32_t)psn_diff(r->next_psn, r->una);
    uint32_t n = w->npkts - k < room ? w->npkts - k : room;
    reth->va += o->off;
    reth->dma_len = k + n == w->npkts ? w->len - o->off : n * mtu;
    o->reth = reth;
    o->sgl = NULL;
    o->opcode = OP_RC_READ_REQUEST;
    r->cur_pkt = k + n;
}

/* The last packet of a message asks for an ACK when someone waits for the
 * completion (a signaled WR), when the send queue is half full (its slots
 * come back with ACKs only) or when it is a resend (a responder answers a
 * duplicate only when asked). Other messages are acknowledged together
 * with a later one or by the responder's delayed ACK: a ping-pong's answer
 * then leaves as one packet instead of two. */
static bool message_wants_ack(const struct op_rdma_qp *qp, const struct rdma_swqe *w, bool resend)
{
    const struct rdma_req *r = &qp->req;
    return w->signaled || qp->init.sq_sig_all || resend || 2 * (r->tail - r->head) >= r->cap;
}

/* One SEND or WRITE packet: headers by its place in the message. */
static void data_packet(struct rdma_req *r, const struct rdma_swqe *w, uint32_t mtu,
                        const struct op_reth *reth, bool ack_last, struct rdma_out *o)
{
    uint32_t k = r->cur_pkt;
    bool write = w->opcode >= OP_RDMA_WR_RDMA_WRITE;
    bool imm = w->opcode == OP_RDMA_WR_SEND_WITH_IMM || w->opcode == OP_RDMA_WR_RDMA_WRITE_WITH_IMM;
    o->len = w->len - o->off < mtu ? w->len - o->off : mtu;
    o->opcode = first_mid_last(write ? OP_RC_WRITE_FIRST : OP_RC_SEND_FIRST, k, w->npkts, imm);
    o->reth = write && k == 0 ? reth : NULL;
    o->imm = imm && k + 1 == w->npkts ? &w->imm : NULL;
    r->cur_pkt++;
    /* twice per window at least: a window shrunk below a message must not
     * wait for an ACK that only the message's last packet asks for */
    uint32_t every = r->window / 2 < OP_RDMA_ACKREQ_EVERY ? r->window / 2 : OP_RDMA_ACKREQ_EVERY;
    o->ackreq = (r->cur_pkt == w->npkts && ack_last) || ++r->since_ackreq >= (every ? every : 1);
}

/* The next packet of w (RC or UC): PSN first_psn + cur_pkt. */
static void send_data(struct op_rdma_qp *qp, struct rdma_swqe *w, uint64_t now,
                      struct op_txq *out)
{
    struct rdma_req *r = &qp->req;
    uint32_t mtu = rdma_mtu(qp), psn = psn_add(w->first_psn, r->cur_pkt);
    struct op_reth reth = {.va = w->raddr, .rkey = w->rkey, .dma_len = w->len};
    struct rdma_out o = {.dest_qp = qp->attr.dest_qpn, .psn = psn, .sgl = &w->sgl,
                         .off = r->cur_pkt * mtu, .dst_ip = qp->attr.remote_ip,
                         .dst_port = qp->attr.remote_port};
    bool resend = psn_diff(psn, r->hi_psn) < 0;
    struct op_atomic_eth aeth;
    if (w->opcode == OP_RDMA_WR_RDMA_READ)
        read_request(r, w, mtu, &reth, &o);
    else if (rdma_wr_is_atomic(w->opcode)) {
        rdma_atomic_request(w, &aeth, &o);
        r->cur_pkt = 1;
    } else
        data_packet(r, w, mtu, &reth, message_wants_ack(qp, w, resend), &o);
    if (qp->init.type == OP_RDMA_QPT_UC) {
        o.opcode |= OP_UC_BASE;
        o.ackreq = false;
    }
    if (o.ackreq)
        r->since_ackreq = 0;
    if (resend)
        qp->c[OP_RDMA_QP_C_retransmissions]++;
    if (qp->init.type == OP_RDMA_QPT_RC)
        rdma_probe_sent(r, psn, o.ackreq || w->opcode == OP_RDMA_WR_RDMA_READ, resend, now);
    rdma_emit(qp, &o, out);
    r->next_psn = psn_add(w->first_psn, r->cur_pkt);
    if (psn_diff(r->next_psn, r->hi_psn) > 0)
        r->hi_psn = r->next_psn;
}

static void send_ud(struct op_rdma_qp *qp, struct rdma_swqe *w, struct op_txq *out)
{
    struct rdma_req *r = &qp->req;
    bool imm = w->opcode == OP_RDMA_WR_SEND_WITH_IMM;
    const struct op_deth deth = {.qkey = w->ud_qkey, .src_qp = qp->qpn};
    const struct rdma_out o = {.opcode = imm ? OP_UD_SEND_ONLY_IMM : OP_UD_SEND_ONLY,
                               .dest_qp = w->ud_qpn, .psn = r->next_psn, .deth = &deth,
                               .imm = imm ? &w->imm : NULL, .sgl = &w->sgl, .len = w->len,
                               .dst_ip = w->ud_ip, .dst_port = w->ud_port};
    rdma_emit(qp, &o, out);
    r->cur_pkt = 1;
    r->next_psn = r->hi_psn = r->una = psn_add(r->next_psn, 1);
}

/* A packet fits in the window; a READ request waits for room for half a
 * window (or all that is left of it), or it would dwindle to one PSN each. */
static bool window_allows(const struct op_rdma_qp *qp, const struct rdma_req *r,
                          const struct rdma_swqe *w)
{
    uint32_t used = (uint32_t)psn_diff(r->next_psn, r->una);
    if (used >= r->window)
        return false;
    if (w->opcode != OP_RDMA_WR_RDMA_READ)
        return true;
    /* also before its first request: a READ behind others must not start
     * with the one PSN they left (it was split 1 + rest) */
    uint32_t npkts = w->started ? w->npkts : rdma_npkts(w->len, rdma_mtu(qp));
    uint32_t left = npkts - r->cur_pkt, half = r->window / 2 ? r->window / 2 : 1;
    return r->window - used >= (left < half ? left : half);
}

/* A READ or an atomic may start while fewer than max_rd_atomic of them are
 * in flight (started, not complete): verbs' limit, perftest's -o. Atomics
 * also stay within OP_RDMA_ATOMIC_DEPTH, the results a responder keeps to
 * answer duplicates. WRs start in order, so the started ones are the run
 * from head. */
static bool rd_atomic_may_start(const struct op_rdma_qp *qp, const struct rdma_req *r,
                                const struct rdma_swqe *w)
{
    uint32_t n = 0, max = qp->attr.max_rd_atomic;
    if (rdma_wr_is_atomic(w->opcode) && (max == 0 || max > OP_RDMA_ATOMIC_DEPTH))
        max = OP_RDMA_ATOMIC_DEPTH;
    for (uint32_t i = r->head; max != 0 && i != r->tail && rdma_swqe_at(r, i)->started; i++)
        n += rdma_wr_needs_response(rdma_swqe_at(r, i)->opcode);
    return max == 0 || n < max;
}

/* Send what the window allows; UC and UD WRs complete once sent. */
void rdma_req_progress(struct op_rdma_qp *qp, uint64_t now, struct op_txq *out)
{
    struct rdma_req *r = &qp->req;
    bool rc = qp->init.type == OP_RDMA_QPT_RC, was_idle = !outstanding(r);
    if (qp->state != OP_RDMA_QPS_RTS || r->rnr_at != UINT64_MAX)
        return;
    while (r->cur != r->tail) {
        struct rdma_swqe *w = swqe(r, r->cur);
        if (rc && !window_allows(qp, r, w))
            break;
        if (rc && !w->started && rdma_wr_needs_response(w->opcode) &&
            !rd_atomic_may_start(qp, r, w))
            break;
        if (!w->started) {
            w->started = true;
            w->first_psn = r->next_psn;
            w->npkts = qp->init.type == OP_RDMA_QPT_UD ? 1 : rdma_npkts(w->len, rdma_mtu(qp));
        }
        if (qp->init.type == OP_RDMA_QPT_UD)
            send_ud(qp, w, out);
        else
            send_data(qp, w, now, out);
        if (r->cur_pkt < w->npkts)
            continue;
        r->cur++;
        r->cur_pkt = 0;
        if (!rc) {
            r->una = r->next_psn;
            rdma_complete_send(qp, w, OP_RDMA_WC_SUCCESS, NULL);
            r->head++;
        }
    }
    if (rc && was_idle)
        r->progress_at = now;
    if (rc && outstanding(r) && r->rto_at == UINT64_MAX && r->rto_ns != 0)
        r->rto_at = now + r->rto_ns;
    if (rc && r->probe_at == UINT64_MAX)
        rdma_probe_arm(r, outstanding(r), now);
}

/* Resume sending at una: the WR holding it becomes cur again. */
static void rewind_to_una(struct rdma_req *r)
{
    r->cur = r->head;
    r->cur_pkt = 0;
    r->next_psn = r->una;
    r->since_ackreq = 0;
    r->sampling = false; /* what is resent would time ambiguously (Karn) */
    if (r->head != r->tail && swqe(r, r->head)->started)
        r->cur_pkt = (uint32_t)psn_diff(r->una, swqe(r, r->head)->first_psn);
}

static bool use_retry(uint8_t *left)
{
    if (*left == RETRY_FOREVER)
        return true;
    if (*left == 0)
        return false;
    (*left)--;
    return true;
}

/* Out of retries: say which PSN, how long and why, not just "status 12". */
static void retries_out(struct op_rdma_qp *qp, uint64_t now, bool timer)
{
    char cause[RDMA_CAUSE_LEN];
    uint64_t ms = (now - qp->req.progress_at) / OP_NS_PER_MS;
    snprintf(cause, sizeof cause,
             "%s PSN 0x%06" PRIx32 " after %u retries over %" PRIu64
             " ms (timeout %u = %.1f ms per try)",
             timer ? "no ACK for" : "sequence NAKs or lost READ data for", qp->req.una,
             (unsigned)qp->attr.retry_cnt, ms, (unsigned)qp->attr.timeout,
             (double)qp->req.rto_ns / (double)OP_NS_PER_MS);
    req_fail(qp, OP_RDMA_WC_RETRY_EXC_ERR, cause);
}

/* Loss adapts the window (AIMD, as TCP): halved at each go-back, one PSN
 * more per window of PSNs acknowledged. Go-back-N resends everything in
 * flight after a loss, so under random loss a full 128-PSN window resends
 * ~64 packets per loss; the window settles where that stays affordable. */
static void shrink_window(struct rdma_req *r)
{
    r->window = r->window / 2 > WINDOW_MIN ? r->window / 2 : WINDOW_MIN;
    if (r->window > r->window_max)
        r->window = r->window_max;
    r->grow_from = r->una;
}

static void grow_window(struct rdma_req *r)
{
    if (r->window < r->window_max && psn_diff(r->una, r->grow_from) >= (int32_t)r->window) {
        r->window++;
        r->grow_from = r->una;
    }
}

/* A probe resends the oldest packet alone. The first ACK after it settles
 * it: one for PSNs not sent again yet (una past next_psn) proves their
 * first copies arrived, in order, so nothing was lost and the window comes
 * back whole (Eifel's response, RFC 4015, with go-back-N's order as the
 * proof instead of timestamps), and sending resumes where the probe found
 * it; otherwise it was a loss and the window is halved, as for a NAK. */
static void settle_probe(struct op_rdma_qp *qp)
{
    struct rdma_req *r = &qp->req;
    if (!r->undo_armed)
        return;
    r->undo_armed = false;
    r->window = r->undo_window;
    if (psn_diff(r->una, r->next_psn) > 0) {
        qp->c[OP_RDMA_QP_C_probes_undone]++;
        rdma_probe_needless(r);
        if (psn_diff(r->undo_next_psn, r->una) > 0) { /* the rest is on its way too */
            r->cur = r->undo_cur;
            r->cur_pkt = r->undo_cur_pkt;
            r->next_psn = r->undo_next_psn;
        }
    } else {
        shrink_window(r);
    }
}

/* A NAK or a timeout after a probe: the loss is certain, the window the
 * probe left is restored before it is halved once. */
static void unsettle_probe(struct rdma_req *r)
{
    if (r->undo_armed)
        r->window = r->undo_window;
    r->undo_armed = false;
}

/* A sequence NAK or lost READ data: go back once per una (duplicated NAKs
 * and the rest of a burst would each restart the window otherwise). */
static void go_back(struct op_rdma_qp *qp, uint64_t now)
{
    struct rdma_req *r = &qp->req;
    if (r->rewound || r->rnr_at != UINT64_MAX || !outstanding(r))
        return;
    if (!use_retry(&r->retries)) {
        retries_out(qp, now, false);
        return;
    }
    r->rewound = true;
    unsettle_probe(r);
    shrink_window(r);
    rewind_to_una(r);
}

static void made_progress(struct op_rdma_qp *qp, uint64_t now)
{
    struct rdma_req *r = &qp->req;
    settle_probe(qp);
    r->retries = qp->attr.retry_cnt;
    r->rnr_retries = qp->attr.rnr_retry;
    r->rewound = false;
    r->progress_at = now;
    grow_window(r);
    r->rto_at = outstanding(r) && r->rto_ns != 0 ? now + r->rto_ns : UINT64_MAX;
    rdma_probe_acked(r, now);
    rdma_probe_arm(r, outstanding(r), now);
    if (psn_diff(r->una, r->next_psn) > 0)
        rewind_to_una(r); /* a late ACK covered what a go-back resent */
}

/* Every PSN up to psn is acknowledged. False when that would pass over a
 * READ whose data has not all arrived: the response was lost (implicit NAK). */
static bool ack_upto(struct op_rdma_qp *qp, uint32_t psn, uint64_t now)
{
    struct rdma_req *r = &qp->req;
    bool moved = false, ok = true;
    while (r->head != r->tail && swqe(r, r->head)->started && psn_diff(psn, r->una) >= 0) {
        struct rdma_swqe *w = swqe(r, r->head);
        if (rdma_wr_needs_response(w->opcode)) {
            ok = false;
            break;
        }
        if (psn_diff(psn, last_psn(w)) < 0) {
            r->una = psn_add(psn, 1);
            moved = true;
            break;
        }
        r->una = psn_add(last_psn(w), 1);
        r->head++;
        moved = true;
        rdma_complete_send(qp, w, OP_RDMA_WC_SUCCESS, NULL);
    }
    if (moved)
        made_progress(qp, now);
    return ok;
}

static void rnr_nak(struct op_rdma_qp *qp, uint32_t psn, uint8_t timer, uint64_t now)
{
    struct rdma_req *r = &qp->req;
    char cause[RDMA_CAUSE_LEN];
    if (psn_diff(psn, r->una) > 0)
        (void)ack_upto(qp, psn_add(psn, RDMA_PSN_MASK), now);
    if (psn != r->una || r->rnr_at != UINT64_MAX)
        return; /* stale, or a copy of the NAK we are already waiting out */
    qp->c[OP_RDMA_QP_C_rnr_waits]++;
    if (!use_retry(&r->rnr_retries)) {
        snprintf(cause, sizeof cause,
                 "receiver not ready for PSN 0x%06" PRIx32 " after %u RNR retries", psn,
                 (unsigned)qp->attr.rnr_retry);
        req_fail(qp, OP_RDMA_WC_RNR_RETRY_EXC_ERR, cause);
        return;
    }
    r->rnr_at = now + op_rdma_rnr_ns(timer);
    r->rto_at = r->probe_at = UINT64_MAX;
}

static void nak_fail(struct op_rdma_qp *qp, uint32_t psn, unsigned status, unsigned counter)
{
    char cause[RDMA_CAUSE_LEN];
    qp->c[counter]++;
    if (psn_diff(psn, qp->req.una) < 0)
        return;
    snprintf(cause, sizeof cause, "the responder refused PSN 0x%06" PRIx32 " (%s NAK)", psn,
             status == OP_RDMA_WC_REM_ACCESS_ERR  ? "remote access error"
             : status == OP_RDMA_WC_REM_INV_REQ_ERR ? "invalid request"
                                                     : "remote operational error");
    req_fail(qp, status, cause);
}

static void ack_input(struct op_rdma_qp *qp, const struct rdma_pkt *p, uint64_t now)
{
    uint32_t psn = p->bth.psn;
    uint8_t syn = p->aeth.syndrome;
    switch (syn >> 5) {
    case 0: /* ACK */
        qp->c[OP_RDMA_QP_C_acks_recv]++;
        if (psn_diff(psn, qp->req.una) < 0)
            qp->c[OP_RDMA_QP_C_dup_responses]++;
        else if (!ack_upto(qp, psn, now)) {
            qp->c[OP_RDMA_QP_C_implicit_naks]++;
            go_back(qp, now);
        }
        return;
    case 1:
        qp->c[OP_RDMA_QP_C_nak_rnr_recv]++;
        rnr_nak(qp, psn, syn & 0x1fu, now);
        return;
    case 3:
        break;
    default:
        qp->c[OP_RDMA_QP_C_drop_opcode]++;
        return;
    }
    if (syn == RDMA_AETH_NAK_SEQ) {
        qp->c[OP_RDMA_QP_C_nak_seq_recv]++;
        if (psn_diff(psn, qp->req.una) > 0)
            (void)ack_upto(qp, psn_add(psn, RDMA_PSN_MASK), now);
        if (psn == qp->req.una)
            go_back(qp, now);
    } else if (syn == RDMA_AETH_NAK_INV)
        nak_fail(qp, psn, OP_RDMA_WC_REM_INV_REQ_ERR, OP_RDMA_QP_C_nak_inv_recv);
    else if (syn == RDMA_AETH_NAK_ACCESS)
        nak_fail(qp, psn, OP_RDMA_WC_REM_ACCESS_ERR, OP_RDMA_QP_C_nak_access_recv);
    else
        nak_fail(qp, psn, OP_RDMA_WC_REM_OP_ERR, OP_RDMA_QP_C_nak_op_recv);
}

/* The started WR whose PSN range holds psn; NULL if none. */
static struct rdma_swqe *wr_of_psn(struct rdma_req *r, uint32_t psn)
{
    for (uint32_t i = r->head; i != r->tail && swqe(r, i)->started; i++) {
        struct rdma_swqe *w = swqe(r, i);
        if (psn_diff(psn, w->first_psn) >= 0 && psn_diff(psn, last_psn(w)) <= 0)
            return w;
    }
    return NULL;
}

/* A response packet holds exactly the bytes of its place in the READ, and
 * the READ's last packet says it is last. (Earlier ones may end the
 * response to one of the READ's partial requests.) */
static bool resp_fits(const struct op_rdma_qp *qp, const struct rdma_swqe *w,
                      const struct rdma_pkt *p)
{
    uint32_t mtu = rdma_mtu(qp), k = (uint32_t)psn_diff(p->bth.psn, w->first_psn);
    if (k + 1 < w->npkts)
        return p->len == mtu;
    return p->len == w->len - k * mtu && (p->hdr & RDMA_H_LAST);
}

/* A READ response fits its READ; an ATOMIC_ACK (an ACK, never a NAK)
 * answers an atomic. */
static bool answers(const struct op_rdma_qp *qp, const struct rdma_swqe *w,
                    const struct rdma_pkt *p)
{
    if (p->hdr & RDMA_H_ATOMIC_ACK)
        return rdma_wr_is_atomic(w->opcode) && (p->aeth.syndrome >> 5) == 0;
    return w->opcode == OP_RDMA_WR_RDMA_READ && resp_fits(qp, w, p);
}

/* A READ response packet or an ATOMIC_ACK: the data of the WR at una. */
static void data_resp(struct op_rdma_qp *qp, const struct rdma_pkt *p, uint64_t now)
{
    struct rdma_req *r = &qp->req;
    uint32_t psn = p->bth.psn;
    if (psn_diff(psn, r->una) < 0) {
        qp->c[OP_RDMA_QP_C_dup_responses]++;
        return;
    }
    struct rdma_swqe *w = wr_of_psn(r, psn);
    if (w == NULL || !answers(qp, w, p)) {
        qp->c[OP_RDMA_QP_C_drop_psn]++;
        return;
    }
    /* a response to this READ means everything before it was executed */
    if (psn_diff(w->first_psn, r->una) > 0)
        (void)ack_upto(qp, psn_add(w->first_psn, RDMA_PSN_MASK), now);
    if (psn != r->una) {
        qp->c[OP_RDMA_QP_C_implicit_naks]++;
        go_back(qp, now);
        return;
    }
    uint32_t k = (uint32_t)psn_diff(psn, w->first_psn);
    if (p->hdr & RDMA_H_ATOMIC_ACK)
        rdma_atomic_response(qp, w, p);
    else
        rdma_sgl_put(&w->sgl, k * rdma_mtu(qp), p->payload, p->len);
    r->una = psn_add(psn, 1);
    if (k + 1 == w->npkts) {
        r->head++;
        rdma_complete_send(qp, w, OP_RDMA_WC_SUCCESS, NULL);
    }
    made_progress(qp, now);
}

void rdma_req_input(struct op_rdma_qp *qp, const struct rdma_pkt *p, uint64_t now,
                    struct op_txq *out)
{
    if (psn_diff(p->bth.psn, qp->req.hi_psn) >= 0) {
        qp->c[OP_RDMA_QP_C_drop_psn]++; /* answers something never sent */
        return;
    }
    if (p->hdr & (RDMA_H_READ_RESP | RDMA_H_ATOMIC_ACK))
        data_resp(qp, p, now);
    else
        ack_input(qp, p, now);
    rdma_req_progress(qp, now, out);
}

/* Back to una before the configured timer, unless the peer is still
 * acknowledging other QPs' packets (then later). */
static void probe(struct op_rdma_qp *qp, uint64_t now)
{
    struct rdma_req *r = &qp->req;
    uint64_t later = rdma_probe_defer(r, qp->dev->last_response_at, now);
    if (later != 0) {
        r->probe_at = later;
        return;
    }
    qp->c[OP_RDMA_QP_C_probes]++;
    if (!r->undo_armed) {
        r->undo_cur = r->cur;
        r->undo_cur_pkt = r->cur_pkt;
        r->undo_next_psn = r->next_psn;
    }
    rdma_probe_fired(r);
    r->window = 1; /* see settle_probe */
    rewind_to_una(r);
    r->rewound = true;
}

void rdma_req_timer(struct op_rdma_qp *qp, uint64_t now, struct op_txq *out)
{
    struct rdma_req *r = &qp->req;
    if (qp->state != OP_RDMA_QPS_RTS) {
        r->rto_at = r->rnr_at = r->probe_at = UINT64_MAX;
        return;
    }
    if (r->rnr_at <= now) {
        r->rnr_at = UINT64_MAX;
        rewind_to_una(r);
    } else if (r->rto_at <= now) {
        qp->c[OP_RDMA_QP_C_timeouts]++;
        r->rto_at = UINT64_MAX;
        if (!use_retry(&r->retries)) {
            retries_out(qp, now, true);
            return;
        }
        r->probe_at = UINT64_MAX;
        unsettle_probe(r);
        shrink_window(r);
        rewind_to_una(r);
        r->rewound = true;
    } else if (r->probe_at <= now) {
        probe(qp, now);
    }
    rdma_req_progress(qp, now, out);
}
