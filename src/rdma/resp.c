/* The responder: executes requests exactly once, in PSN order.
 * RC: duplicates are re-ACKed (or a READ's response regenerated), never
 * executed again; a PSN ahead of the expected one gets one sequence NAK and
 * silence until the expected PSN comes; a SEND with no receive posted gets an
 * RNR NAK; protection and protocol errors get a NAK and put the QP in ERR.
 * UC: the same execution, but a gap loses the message and errors drop it.
 * UD: single-packet sends, checked against the Q_Key. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "rdma_internal.h"

#define IPV4_HDR_LEN 20
#define UDP_HDR_LEN 8

enum exec_result { EX_OK, EX_RNR, EX_INV, EX_ACCESS, EX_TOO_LONG };

/* The receive the message took (rdma_recv_take) completes. */
static void recv_done(struct op_rdma_qp *qp, const struct rdma_pkt *p, unsigned opcode,
                      uint32_t len)
{
    struct rdma_resp *s = &qp->resp;
    struct op_rdma_wc wc = {.wr_id = s->open.wr_id, .opcode = opcode, .byte_len = len};
    if (p->hdr & RDMA_H_IMM) {
        wc.imm_data = p->imm;
        wc.wc_flags = OP_RDMA_WC_WITH_IMM;
    }
    if (p->hdr & RDMA_H_DETH) {
        wc.src_qp = p->deth.src_qp;
        wc.src_ip = p->raw->flow.src.v4;
        wc.src_port = p->raw->flow.src_port;
    }
    s->has_open = false;
    rdma_complete_recv(qp, &wc);
}

/* A message must open with FIRST/ONLY and continue with MIDDLE/LAST of the
 * same kind; FIRST and MIDDLE carry exactly one MTU. */
static bool in_sequence(const struct op_rdma_qp *qp, const struct rdma_pkt *p)
{
    const struct rdma_resp *s = &qp->resp;
    unsigned kind = p->hdr & (RDMA_H_SEND | RDMA_H_WRITE);
    if (s->in_msg != 0 ? (p->hdr & RDMA_H_FIRST) || kind != s->in_msg : !(p->hdr & RDMA_H_FIRST))
        return false;
    return (p->hdr & RDMA_H_LAST) || p->len == rdma_mtu(qp);
}

static enum exec_result exec_send(struct op_rdma_qp *qp, const struct rdma_pkt *p, char *cause)
{
    struct rdma_resp *s = &qp->resp;
    struct rdma_rwqe *w = rdma_recv_take(qp);
    if (w == NULL)
        return EX_RNR;
    if (p->hdr & RDMA_H_FIRST) {
        s->off = 0;
        s->in_msg = RDMA_H_SEND;
    }
    if (p->len > w->len - s->off) {
        snprintf(cause, RDMA_CAUSE_LEN, "a SEND longer than the %" PRIu32 "-byte receive buffer",
                 w->len);
        return EX_TOO_LONG;
    }
    rdma_sgl_put(&w->sgl, s->off, p->payload, p->len);
    s->off += p->len;
    if (p->hdr & RDMA_H_LAST) {
        recv_done(qp, p, OP_RDMA_WC_RECV, s->off);
        s->in_msg = 0;
    }
    return EX_OK;
}

/* The whole range is checked at FIRST/ONLY (IBTA); each packet looks its
 * region up again, so a region deregistered meanwhile is refused, not used. */
static enum exec_result open_write(struct op_rdma_qp *qp, const struct rdma_pkt *p, char *cause)
{
    struct rdma_resp *s = &qp->resp;
    if (p->reth.dma_len > 0 && rdma_rkey_check(qp, p->reth.rkey, p->reth.va, p->reth.dma_len,
                                               OP_RDMA_ACCESS_REMOTE_WRITE, cause,
                                               RDMA_CAUSE_LEN) == NULL)
        return EX_ACCESS;
    s->wrkey = p->reth.rkey;
    s->wva = p->reth.va;
    s->wlen = p->reth.dma_len;
    s->off = 0;
    s->in_msg = RDMA_H_WRITE;
    return EX_OK;
}

/* A payload a placed receive put where it belongs needs no copy; one it
 * put elsewhere (at bytes of this WRITE not yet received, as a placed read
 * only does) moves, and may overlap where it goes. */
static void place(struct op_rdma_qp *qp, uint8_t *to, const struct rdma_pkt *p)
{
    if (p->raw->ext == NULL) {
        memcpy(to, p->payload, p->len);
    } else if (to == p->payload) {
        qp->c[OP_RDMA_QP_C_placed]++;
    } else {
        memmove(to, p->payload, p->len);
        qp->c[OP_RDMA_QP_C_placed_moved]++;
    }
}

static enum exec_result exec_write(struct op_rdma_qp *qp, const struct rdma_pkt *p, char *cause)
{
    struct rdma_resp *s = &qp->resp;
    /* before any byte lands: a retry after the RNR NAK must find memory as is */
    if ((p->hdr & RDMA_H_IMM) && !rdma_recv_ready(qp))
        return EX_RNR;
    if (p->hdr & RDMA_H_FIRST) {
        enum exec_result r = open_write(qp, p, cause);
        if (r != EX_OK)
            return r;
    }
    bool last = (p->hdr & RDMA_H_LAST) != 0;
    if (p->len > s->wlen - s->off || (last && s->off + p->len != s->wlen)) {
        snprintf(cause, RDMA_CAUSE_LEN, "WRITE payload does not add up to its RETH length %" PRIu32,
                 s->wlen);
        return EX_INV;
    }
    if (p->len > 0) {
        uint64_t at = s->wva + s->off;
        const struct op_rdma_mr *mr = rdma_rkey_check(qp, s->wrkey, at, p->len,
                                                      OP_RDMA_ACCESS_REMOTE_WRITE, cause,
                                                      RDMA_CAUSE_LEN);
        if (mr == NULL)
            return EX_ACCESS;
        place(qp, mr->addr + (at - mr->va), p);
        rdma_rx_tmpl_keep(qp, p, mr->addr + (at - mr->va));
    }
    s->off += p->len;
    if (last) {
        if ((p->hdr & RDMA_H_IMM) && rdma_recv_take(qp) != NULL) /* ready: checked above */
            recv_done(qp, p, OP_RDMA_WC_RECV_RDMA_WITH_IMM, s->wlen);
        s->in_msg = 0;
    }
    return EX_OK;
}

/* Response packets psn .. for [va, va+len) of mr (NULL when len is 0). */
static void send_read_resp(struct op_rdma_qp *qp, const struct op_rdma_mr *mr, uint64_t va,
                           uint32_t len, uint32_t psn, struct op_txq *out)
{
    uint32_t mtu = rdma_mtu(qp), n = rdma_npkts(len, mtu);
    const struct op_aeth aeth = {.syndrome = RDMA_AETH_ACK, .msn = qp->resp.msn & RDMA_PSN_MASK};
    for (uint32_t k = 0; k < n; k++) {
        uint32_t off = k * mtu;
        struct rdma_out o = {.dest_qp = qp->attr.dest_qpn, .psn = psn_add(psn, k),
                             .len = len - off < mtu ? len - off : mtu,
                             .dst_ip = qp->attr.remote_ip, .dst_port = qp->attr.remote_port};
        o.opcode = n == 1 ? OP_RC_READ_RESP_ONLY
                   : k == 0 ? OP_RC_READ_RESP_FIRST
                   : k + 1 == n ? OP_RC_READ_RESP_LAST
                                : OP_RC_READ_RESP_MIDDLE;
        o.aeth = o.opcode == OP_RC_READ_RESP_MIDDLE ? NULL : &aeth;
        o.data = mr != NULL ? mr->addr + (va - mr->va) + off : NULL;
        rdma_emit(qp, &o, out);
    }
}

static const struct op_rdma_mr *read_region(struct op_rdma_qp *qp, const struct rdma_pkt *p,
                                            char *cause, bool *ok)
{
    *ok = true;
    if (p->reth.dma_len == 0)
        return NULL;
    const struct op_rdma_mr *mr = rdma_rkey_check(qp, p->reth.rkey, p->reth.va, p->reth.dma_len,
                                                  OP_RDMA_ACCESS_REMOTE_READ, cause, RDMA_CAUSE_LEN);
    *ok = mr != NULL;
    return mr;
}

static enum exec_result exec_read(struct op_rdma_qp *qp, const struct rdma_pkt *p, char *cause,
                                  struct op_txq *out)
{
    bool ok;
    if (rdma_npkts(p->reth.dma_len, rdma_mtu(qp)) > RDMA_MAX_MSG_PKTS) {
        snprintf(cause, RDMA_CAUSE_LEN, "READ of %" PRIu32 " bytes spans too many PSNs",
                 p->reth.dma_len);
        return EX_INV;
    }
    const struct op_rdma_mr *mr = read_region(qp, p, cause, &ok);
    if (!ok)
        return EX_ACCESS;
    qp->resp.msn++;
    send_read_resp(qp, mr, p->reth.va, p->reth.dma_len, p->bth.psn, out);
    return EX_OK;
}

/* A READ request seen before: its response again, from memory as it is now
 * (IBTA allows that). The requester asks for a READ in parts as its window
 * allows and asks again for all that is missing from una on, so a request
 * may begin before the expected PSN and end after it: then it also
 * executes the rest and the expected PSN moves past it. */
static void replay_read(struct op_rdma_qp *qp, const struct rdma_pkt *p, struct op_txq *out)
{
    char cause[RDMA_CAUSE_LEN];
    bool ok;
    uint32_t n = rdma_npkts(p->reth.dma_len, rdma_mtu(qp)), end = psn_add(p->bth.psn, n);
    const struct op_rdma_mr *mr = read_region(qp, p, cause, &ok);
    if (!ok || n > RDMA_MAX_MSG_PKTS)
        return;
    if (psn_diff(end, qp->resp.epsn) > 0) {
        qp->resp.msn++;
        qp->resp.epsn = end;
        qp->resp.nak_sent = false;
    }
    send_read_resp(qp, mr, p->reth.va, p->reth.dma_len, p->bth.psn, out);
}

static enum exec_result execute(struct op_rdma_qp *qp, const struct rdma_pkt *p, char *cause,
                                struct op_txq *out)
{
    if (!in_sequence(qp, p)) {
        snprintf(cause, RDMA_CAUSE_LEN, "opcode 0x%02x out of order in a message", p->bth.opcode);
        return EX_INV;
    }
    if (p->hdr & RDMA_H_SEND)
        return exec_send(qp, p, cause);
    if (p->hdr & RDMA_H_WRITE)
        return exec_write(qp, p, cause);
    if (p->hdr & RDMA_H_ATOMIC) {
        bool access;
        if (rdma_atomic_execute(qp, p, cause, &access, out))
            return EX_OK;
        return access ? EX_ACCESS : EX_INV;
    }
    return exec_read(qp, p, cause, out);
}

static void ack_now(struct op_rdma_qp *qp, uint32_t psn, struct op_txq *out)
{
    rdma_send_aeth(qp, RDMA_AETH_ACK, psn, out);
    qp->resp.unacked = 0;
    qp->resp.ack_at = 0;
}

/* The peer's retransmission timer is not known here; this QP's own (both
 * ends are usually set alike, as perftest's -u) keeps the delayed ACK well
 * inside it, so a short timer never fires for a request already executed. */
static uint64_t ack_delay_ns(const struct op_rdma_qp *qp)
{
    uint64_t quarter = op_rdma_timeout_ns(qp->attr.timeout) / 4;
    return qp->attr.timeout != 0 && quarter < OP_RDMA_ACK_DELAY_NS ? quarter
                                                                    : OP_RDMA_ACK_DELAY_NS;
}

/* Executed: the next PSN is expected; ACK when asked or when ack_every
 * packets went unacknowledged, else within OP_RDMA_ACK_DELAY_NS (one ACK then
 * covers all of them). A READ's response, an atomic's ATOMIC_ACK is its ACK. */
static void rc_advance(struct op_rdma_qp *qp, const struct rdma_pkt *p, uint64_t now,
                       struct op_txq *out)
{
    struct rdma_resp *s = &qp->resp;
    if (p->hdr & (RDMA_H_READ_REQ | RDMA_H_ATOMIC)) {
        uint32_t n = (p->hdr & RDMA_H_ATOMIC) ? 1 : rdma_npkts(p->reth.dma_len, rdma_mtu(qp));
        s->epsn = psn_add(p->bth.psn, n);
        s->unacked = 0;
        s->ack_at = 0;
        return;
    }
    if ((p->hdr & RDMA_H_LAST) && s->in_msg == 0)
        s->msn++;
    rdma_resp_advance(qp, p->bth.psn, p->bth.ackreq, now, out);
}

void rdma_resp_advance(struct op_rdma_qp *qp, uint32_t psn, bool ackreq, uint64_t now,
                       struct op_txq *out)
{
    struct rdma_resp *s = &qp->resp;
    s->epsn = psn_add(psn, 1);
    s->unacked++;
    if (ackreq || (qp->attr.ack_every != 0 && s->unacked >= qp->attr.ack_every))
        ack_now(qp, psn, out);
    else if (s->ack_at == 0)
        s->ack_at = now + ack_delay_ns(qp);
}

/* The rest of the open WRITE, where the next packets in sequence will put
 * their payloads: the region is looked up again, as for each packet.
 * Between two messages of a QP that took a WRITE of several packets, no
 * room: the next may open with the next packet. RC only: a packet that
 * fell where another belonged (one before it was lost) is dropped, and on RC
 * the retransmission writes those bytes again; UC drops the rest of the
 * message and nothing would (the region kept bytes its sender never wrote
 * there). */
bool rdma_resp_place(struct op_rdma_qp *qp, struct op_io_place *out)
{
    const struct rdma_resp *s = &qp->resp;
    char cause[RDMA_CAUSE_LEN];
    if (qp->init.type != OP_RDMA_QPT_RC ||
        (qp->state != OP_RDMA_QPS_RTR && qp->state != OP_RDMA_QPS_RTS))
        return false;
    if (s->in_msg != RDMA_H_WRITE || s->off >= s->wlen) {
        *out = (struct op_io_place){.room = 0};
        return s->in_msg == 0;
    }
    uint64_t at = s->wva + s->off;
    const struct op_rdma_mr *mr = rdma_rkey_check(qp, s->wrkey, at, s->wlen - s->off,
                                                  OP_RDMA_ACCESS_REMOTE_WRITE, cause, sizeof cause);
    if (mr == NULL)
        return false;
    *out = (struct op_io_place){.at = mr->addr + (at - mr->va), .room = s->wlen - s->off,
                                .hdr = OP_BTH_LEN, .payload = rdma_mtu(qp), .trl = OP_ICRC_LEN};
    return true;
}

uint64_t rdma_resp_deadline(const struct op_rdma_qp *qp)
{
    return qp->resp.ack_at != 0 ? qp->resp.ack_at : UINT64_MAX;
}

void rdma_resp_timer(struct op_rdma_qp *qp, uint64_t now, struct op_txq *out)
{
    if (qp->resp.ack_at == 0 || qp->resp.ack_at > now)
        return;
    if (qp->state == OP_RDMA_QPS_RTR || qp->state == OP_RDMA_QPS_RTS)
        ack_now(qp, psn_add(qp->resp.epsn, RDMA_PSN_MASK), out);
    qp->resp.ack_at = 0;
}

static void rc_error(struct op_rdma_qp *qp, const struct rdma_pkt *p, enum exec_result r,
                     const char *cause, struct op_txq *out)
{
    uint32_t psn = p->bth.psn;
    if (r == EX_RNR) {
        rdma_send_aeth(qp, (uint8_t)(RDMA_AETH_RNR | qp->attr.min_rnr_timer), psn, out);
        return;
    }
    if (r == EX_TOO_LONG) {
        const struct op_rdma_wc wc = {.wr_id = qp->resp.open.wr_id,
                                      .status = OP_RDMA_WC_LOC_LEN_ERR, .opcode = OP_RDMA_WC_RECV,
                                      .cause = qp->cause};
        qp->resp.has_open = false;
        rdma_complete_recv(qp, &wc);
    }
    rdma_send_aeth(qp, r == EX_ACCESS ? RDMA_AETH_NAK_ACCESS : RDMA_AETH_NAK_INV, psn, out);
    rdma_qp_fail(qp, "responder, PSN 0x%06" PRIx32 ": %s", psn, cause);
}

static void rc_duplicate(struct op_rdma_qp *qp, const struct rdma_pkt *p, struct op_txq *out)
{
    qp->c[OP_RDMA_QP_C_duplicates]++;
    if (p->hdr & RDMA_H_READ_REQ)
        replay_read(qp, p, out);
    else if (p->hdr & RDMA_H_ATOMIC)
        rdma_atomic_replay(qp, p, out);
    else if (p->bth.ackreq)
        rdma_send_aeth(qp, RDMA_AETH_ACK, psn_add(qp->resp.epsn, RDMA_PSN_MASK), out);
}

static void uc_input(struct op_rdma_qp *qp, const struct rdma_pkt *p, char *cause);

void rdma_resp_input(struct op_rdma_qp *qp, const struct rdma_pkt *p, uint64_t now,
                     struct op_txq *out)
{
    struct rdma_resp *s = &qp->resp;
    char cause[RDMA_CAUSE_LEN];
    if (qp->init.type == OP_RDMA_QPT_UC) {
        uc_input(qp, p, cause);
        return;
    }
    int32_t d = psn_diff(p->bth.psn, s->epsn);
    if (d < 0) {
        rc_duplicate(qp, p, out);
        return;
    }
    if (d > 0) {
        qp->c[OP_RDMA_QP_C_out_of_seq]++;
        /* once per gap, and again when a packet asks for an answer: a lost
         * NAK would otherwise leave the requester to its timer */
        if (!s->nak_sent || p->bth.ackreq)
            rdma_send_aeth(qp, RDMA_AETH_NAK_SEQ, s->epsn, out);
        s->nak_sent = true;
        return;
    }
    s->nak_sent = false;
    enum exec_result r = execute(qp, p, cause, out);
    if (r == EX_OK)
        rc_advance(qp, p, now, out);
    else
        rc_error(qp, p, r, cause, out);
}

/* ---- UC: no ACKs, no NAKs; a gap or an error loses the message */
static const unsigned uc_drop[] = {
    [EX_RNR] = OP_RDMA_QP_C_drop_no_recv,
    [EX_INV] = OP_RDMA_QP_C_drop_length,
    [EX_ACCESS] = OP_RDMA_QP_C_drop_access,
    [EX_TOO_LONG] = OP_RDMA_QP_C_drop_too_long,
};

static void uc_input(struct op_rdma_qp *qp, const struct rdma_pkt *p, char *cause)
{
    struct rdma_resp *s = &qp->resp;
    bool gap = p->bth.psn != s->epsn;
    s->epsn = psn_add(p->bth.psn, 1);
    if (s->in_msg != 0 && (gap || (p->hdr & RDMA_H_FIRST))) {
        qp->c[OP_RDMA_QP_C_uc_lost_msgs]++;
        s->in_msg = 0;
    }
    if (s->in_msg == 0 && !(p->hdr & RDMA_H_FIRST)) {
        qp->c[OP_RDMA_QP_C_out_of_seq]++;
        return;
    }
    enum exec_result r = execute(qp, p, cause, NULL);
    if (r != EX_OK) {
        qp->c[uc_drop[r]]++;
        s->in_msg = 0;
    }
}

/* ---- UD */
/* verbs place 40 bytes of GRH before a UD payload; for RoCEv2 over IPv4 the
 * IPv4 header fills its last 20 bytes. */
static void put_grh(const struct rdma_pkt *p, uint8_t grh[OP_RDMA_UD_GRH_LEN])
{
    uint8_t *ip = grh + OP_RDMA_UD_GRH_LEN - IPV4_HDR_LEN;
    uint32_t total = IPV4_HDR_LEN + UDP_HDR_LEN + p->raw->len;
    uint32_t src = p->raw->flow.src.v4, dst = p->raw->flow.dst.v4;
    memset(grh, 0, OP_RDMA_UD_GRH_LEN);
    ip[0] = 0x45;
    ip[2] = (uint8_t)(total >> 8);
    ip[3] = (uint8_t)total;
    ip[6] = 0x40; /* DF */
    ip[8] = 64;
    ip[9] = 17;
    for (int i = 0; i < 4; i++) {
        ip[12 + i] = (uint8_t)(src >> (24 - 8 * i));
        ip[16 + i] = (uint8_t)(dst >> (24 - 8 * i));
    }
}

void rdma_ud_input(struct op_rdma_qp *qp, const struct rdma_pkt *p)
{
    uint8_t grh[OP_RDMA_UD_GRH_LEN];
    if (p->deth.qkey != qp->attr.qkey) {
        qp->c[OP_RDMA_QP_C_drop_qkey]++;
        return;
    }
    struct rdma_rwqe *w = rdma_recv_take(qp);
    if (w == NULL) {
        qp->c[OP_RDMA_QP_C_drop_no_recv]++;
        return;
    }
    if (w->len < OP_RDMA_UD_GRH_LEN || p->len > w->len - OP_RDMA_UD_GRH_LEN) {
        qp->c[OP_RDMA_QP_C_drop_too_long]++;
        return;
    }
    put_grh(p, grh);
    rdma_sgl_put(&w->sgl, 0, grh, OP_RDMA_UD_GRH_LEN);
    rdma_sgl_put(&w->sgl, OP_RDMA_UD_GRH_LEN, p->payload, p->len);
    recv_done(qp, p, OP_RDMA_WC_RECV, OP_RDMA_UD_GRH_LEN + p->len);
}
