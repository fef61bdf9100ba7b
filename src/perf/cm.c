/* -R: the QPs are connected the way rdma_cm connects them, by CM REQ, REP
 * and RTU MADs to QP 1 on UDP 4791 (src/rdma/cm.c), not by the side
 * channel's QP lines. Each REQ and REP carries its QP's number, PSN, MTU
 * and limits in the IBTA fields and the buffer's rkey and address in the
 * private data (as an application's rdma_cm conn_param would). The TCP
 * side channel still carries the test's own lines (parameters, barriers,
 * results), as perftest's. */
#include <inttypes.h>
#include <string.h>

#include "perf_int.h"

#define CM_RETRY_NS (100 * OP_NS_PER_MS)
#define CM_RETRIES 50 /* 5 s without an answer: the peer is not there */
#define PRIV_LEN 16   /* rkey, buffer address, QP index */

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static void my_side(const struct perf_run *r, uint32_t i, struct op_rdma_cm_side *s)
{
    const struct perf_ep *ep = &r->ep;
    const struct perf_qp *q = &ep->qps[i];
    const struct op_perf_config *c = r->cfg;
    uint8_t rd = perf_client_only(c) ? (uint8_t)c->out_reads : 16;
    *s = (struct op_rdma_cm_side){.qpn = op_rdma_qp_num(q->qp), .psn = q->psn, .mtu = ep->mtu,
                                  .responder_resources = 16, .initiator_depth = rd,
                                  .retry_count = c->retry_cnt, .rnr_retry = 7,
                                  .timeout = c->qp_timeout};
    put_be(s->private_data, op_rdma_mr_rkey(q->mr), 4);
    put_be(s->private_data + 4, (uint64_t)(uintptr_t)q->buf, 8);
    put_be(s->private_data + 12, i, 4);
}

static op_status_t open_cm(struct perf_run *r, struct op_rdma_cm **cm)
{
    const struct op_rdma_cm_config cc = {.nconn = r->ep.nqp, .retry_ns = CM_RETRY_NS,
                                         .max_retries = CM_RETRIES};
    if (op_rdma_cm_create(r->ep.dev, &cc, cm) != OP_OK)
        return perf_refuse(r->why, sizeof r->why, "-R: cannot set up the connection manager");
    return OP_OK;
}

op_status_t perf_cm_listen(struct perf_run *r)
{
    struct op_rdma_cm *cm;
    op_status_t st = open_cm(r, &cm);
    if (st != OP_OK)
        return st;
    uint32_t want = perf_oob_local_ip(&r->oob); /* where the client reached us */
    if (r->ep.port != OP_ROCE_UDP_PORT || (r->cfg->device == NULL && r->ep.ip != want)) {
        char a[16];
        op_format_ipv4(want, a);
        return perf_refuse(r->why, sizeof r->why,
                           "-R: UDP port 4791 of %s is taken (rdma_cm peers find the server "
                           "there)", a);
    }
    for (uint32_t i = 0; i < r->ep.nqp; i++) {
        struct op_rdma_cm_side s;
        my_side(r, i, &s);
        if (op_rdma_cm_listen(cm, i, &s) != OP_OK)
            return perf_refuse(r->why, sizeof r->why, "-R: cannot listen for QP %u", i);
    }
    return OP_OK;
}

static const struct op_rdma_cm *cm_of(const struct perf_run *r)
{
    return op_rdma_dev_cm(r->ep.dev);
}

/* Every connection established (true), or the first failure's cause. */
static bool settled(struct perf_run *r, op_status_t *st)
{
    const struct op_rdma_cm *cm = cm_of(r);
    bool all = true;
    *st = OP_OK;
    for (uint32_t i = 0; i < r->ep.nqp; i++) {
        enum op_rdma_cm_state s = op_rdma_cm_state(cm, i);
        if (s == OP_RDMA_CM_FAILED) {
            *st = perf_refuse(r->why, sizeof r->why, "-R: QP %u: %s", i, op_rdma_cm_error(cm, i));
            return true;
        }
        all = all && s == OP_RDMA_CM_ESTABLISHED;
    }
    return all;
}

/* The peer as exchange_qps would have filled it in. */
static op_status_t take_peers(struct perf_run *r)
{
    const struct op_rdma_cm *cm = cm_of(r);
    for (uint32_t i = 0; i < r->ep.nqp; i++) {
        struct op_rdma_cm_side s;
        struct perf_peer *p = &r->ep.qps[i].peer;
        if (op_rdma_cm_peer(cm, i, &s, &p->ip, &p->port) != OP_OK)
            return perf_refuse(r->why, sizeof r->why, "-R: QP %u is not connected", i);
        if (s.mtu != r->ep.mtu)
            return perf_refuse(r->why, sizeof r->why,
                               "-R: the REQ's path MTU %u is not this side's %u (-m)", s.mtu,
                               r->ep.mtu);
        p->qpn = s.qpn;
        p->psn = s.psn;
        p->rkey = (uint32_t)get_be(s.private_data, 4);
        p->vaddr = get_be(s.private_data + 4, 8);
    }
    return OP_OK;
}

/* Drive the engine (its CM answers and resends) until every connection
 * settles. The side channel is only peeked at: a FAIL or a close ends the
 * wait, while the peer's next line (it may be done first) stays unread. */
static op_status_t drive(struct perf_run *r)
{
    op_status_t st;
    for (unsigned turn = 0; !settled(r, &st); turn++) {
        if (perf_ep_progress(&r->ep) > 0 || turn % 64 != 63)
            continue;
        (void)op_io_wait(r->ep.io, op_io_deadline_in_ms(1));
        if (perf_oob_peer_failed(&r->oob)) {
            bool got;
            char rest[PERF_LINE_MAX];
            st = perf_poll_tag(r, "FAIL", &got, rest, sizeof rest);
            return st != OP_OK ? st
                               : perf_refuse(r->why, sizeof r->why, "the peer failed: %.200s",
                                             rest);
        }
    }
    return st == OP_OK ? take_peers(r) : st;
}

op_status_t perf_cm_connect(struct perf_run *r)
{
    struct op_rdma_cm *cm;
    op_status_t st = open_cm(r, &cm);
    uint32_t server = perf_oob_peer_ip(&r->oob);
    for (uint32_t i = 0; st == OP_OK && i < r->ep.nqp; i++) {
        struct op_rdma_cm_side s;
        my_side(r, i, &s);
        if (op_rdma_cm_connect(cm, i, &s, server, OP_ROCE_UDP_PORT, op_now_ns(),
                               perf_ep_txq(&r->ep)) != OP_OK)
            st = perf_refuse(r->why, sizeof r->why, "-R: cannot connect QP %u", i);
    }
    perf_ep_flush(&r->ep);
    return st == OP_OK ? drive(r) : st;
}

op_status_t perf_cm_await(struct perf_run *r)
{
    return drive(r);
}
