/* -R's control channel: the test's lines (parameters, barriers, results)
 * as SENDs on an RC QP of its own, connected by the CM like the test's QPs,
 * as perftest's -R exchanges its data over an rdma_cm connection instead of
 * a TCP socket. It lives on the endpoint's device, so it moves only while
 * the endpoint is driven (every wait of a test drives it), and RC makes it
 * as reliable as TCP was, under --loss too. A peer that is killed closes
 * nothing, so a side that has heard nothing for a second sends an empty
 * message (ignored at the other end); one that stays unacknowledged for
 * DEAD_NS while RC keeps resending means the peer is gone. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "perf_int.h"

#define COMM_DEPTH 32    /* lines in flight each way */
#define COMM_TIMEOUT 14  /* 4.096 us * 2^14 = 67 ms a try */
#define COMM_RETRIES 7   /* for ever: loss must not end the channel, DEAD_NS does */
#define LINGER_NS (2 * OP_NS_PER_S) /* close: our last lines reach the peer */
#define KEEPALIVE_NS OP_NS_PER_S
#define DEAD_NS (5 * OP_NS_PER_S)

struct perf_comm {
    struct perf_ep *ep;
    struct op_rdma_qp *qp;
    struct op_rdma_cq *scq, *rcq;
    struct op_rdma_mr *mr;
    uint8_t *bufs; /* COMM_DEPTH receives of PERF_LINE_MAX bytes */
    uint32_t psn, sends_out;
    uint64_t heard_ns; /* the peer's last message or acknowledgement */
    uint64_t acked_ns; /* the last send completed, or the first posted since */
    int err;          /* the first failure (-errno), 0 if none */
    bool have_next;   /* a line read and not yet taken (perf_comm_peer_failed peeked) */
    char next[PERF_LINE_MAX];
};

op_status_t perf_comm_open(struct perf_ep *ep, struct perf_comm **out)
{
    struct perf_comm *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return OP_ERR_NOMEM;
    c->ep = ep;
    c->psn = (uint32_t)(op_now_ns() * 2654435761u) & 0xffffffu;
    c->bufs = calloc(COMM_DEPTH, PERF_LINE_MAX);
    const struct op_rdma_qp_init_attr ia = {.type = OP_RDMA_QPT_RC, .max_send_wr = COMM_DEPTH,
                                            .max_recv_wr = COMM_DEPTH,
                                            .max_inline_data = PERF_LINE_MAX};
    op_status_t st = c->bufs == NULL ? OP_ERR_NOMEM
                                     : op_rdma_reg_mr(ep->dev, c->bufs, COMM_DEPTH * PERF_LINE_MAX,
                                                      OP_RDMA_ACCESS_LOCAL_WRITE, &c->mr);
    if (st == OP_OK)
        st = op_rdma_cq_create(ep->dev, COMM_DEPTH + 1, &c->scq);
    if (st == OP_OK)
        st = op_rdma_cq_create(ep->dev, COMM_DEPTH + 1, &c->rcq);
    struct op_rdma_qp_init_attr qa = ia;
    qa.send_cq = c->scq;
    qa.recv_cq = c->rcq;
    if (st == OP_OK)
        st = op_rdma_qp_create(ep->dev, &qa, &c->qp);
    if (st != OP_OK) {
        perf_comm_close(c);
        return st;
    }
    *out = c;
    return OP_OK;
}

void perf_comm_side(const struct perf_comm *c, struct op_rdma_cm_side *s)
{
    *s = (struct op_rdma_cm_side){.qpn = op_rdma_qp_num(c->qp), .psn = c->psn,
                                  .mtu = c->ep->mtu, .retry_count = COMM_RETRIES,
                                  .rnr_retry = 7, .timeout = COMM_TIMEOUT};
}

static op_status_t post_recv(struct perf_comm *c, uint32_t slot)
{
    struct op_rdma_sge sge = {(uintptr_t)(c->bufs + (size_t)slot * PERF_LINE_MAX), PERF_LINE_MAX,
                              op_rdma_mr_lkey(c->mr)};
    struct op_rdma_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1};
    return op_rdma_post_recv(c->qp, &wr);
}

op_status_t perf_comm_connect(struct perf_comm *c, const struct op_rdma_cm_side *peer,
                              uint32_t ip, uint16_t port)
{
    struct op_rdma_qp_attr a = {.path_mtu = c->ep->mtu, .dest_qpn = peer->qpn,
                                .rq_psn = peer->psn, .remote_ip = ip, .remote_port = port,
                                .min_rnr_timer = 1, .sq_psn = c->psn, .timeout = COMM_TIMEOUT,
                                .retry_cnt = COMM_RETRIES, .rnr_retry = 7};
    c->heard_ns = op_now_ns();
    op_status_t st = op_rdma_qp_modify(c->qp, OP_RDMA_QPS_INIT, &a);
    for (uint32_t i = 0; st == OP_OK && i < COMM_DEPTH; i++)
        st = post_recv(c, i);
    if (st == OP_OK)
        st = op_rdma_qp_modify(c->qp, OP_RDMA_QPS_RTR, &a);
    return st == OP_OK ? op_rdma_qp_modify(c->qp, OP_RDMA_QPS_RTS, &a) : st;
}

/* Send completions: room in the queue again, or the channel's end. */
static void reap_sends(struct perf_comm *c)
{
    struct op_rdma_wc wc[COMM_DEPTH];
    int n = op_rdma_poll_cq(c->scq, COMM_DEPTH, wc);
    if (n > 0)
        c->heard_ns = c->acked_ns = op_now_ns();
    for (int i = 0; i < n; i++) {
        c->sends_out--;
        if (wc[i].status != OP_RDMA_WC_SUCCESS && c->err == 0)
            c->err = -ECONNRESET; /* the peer stopped answering: it is gone */
    }
}

static int post_send(struct perf_comm *c, const char *line, size_t n)
{
    uint64_t now = op_now_ns();
    struct op_rdma_sge sge = {(uintptr_t)line, (uint32_t)n, 0};
    struct op_rdma_send_wr wr = {.opcode = OP_RDMA_WR_SEND, .sg_list = &sge, .num_sge = n > 0,
                                 .send_flags = OP_RDMA_SEND_SIGNALED | OP_RDMA_SEND_INLINE};
    if (op_rdma_post_send(c->qp, &wr, now, perf_ep_txq(c->ep)) != OP_OK)
        return -EIO;
    if (c->sends_out++ == 0)
        c->acked_ns = now;
    perf_ep_flush(c->ep);
    return 0;
}

/* Nothing came in for a while: an empty message asks the peer for an
 * acknowledgement; none for DEAD_NS (RC resending all along): gone. */
static void check_peer(struct perf_comm *c)
{
    uint64_t now = op_now_ns();
    if (c->err != 0 || op_rdma_qp_state(c->qp) != OP_RDMA_QPS_RTS)
        return;
    if (c->sends_out > 0 && now - c->acked_ns > DEAD_NS)
        c->err = -ETIMEDOUT;
    else if (c->sends_out == 0 && now - c->heard_ns > KEEPALIVE_NS)
        c->err = post_send(c, "", 0);
}

int perf_comm_send(struct perf_comm *c, const char *line, size_t n)
{
    reap_sends(c);
    for (uint64_t until = op_now_ns() + LINGER_NS; c->sends_out >= COMM_DEPTH && c->err == 0;) {
        (void)perf_ep_progress(c->ep);
        reap_sends(c);
        if (op_now_ns() > until)
            c->err = -ETIMEDOUT;
    }
    return c->err != 0 ? c->err : post_send(c, line, n);
}

/* The next line into c->next, if one came. */
static int read_next(struct perf_comm *c)
{
    struct op_rdma_wc wc;
    if (c->have_next)
        return 1;
    reap_sends(c);
    do {
        if (op_rdma_poll_cq(c->rcq, 1, &wc) == 0) {
            check_peer(c);
            return c->err;
        }
        if (wc.status != OP_RDMA_WC_SUCCESS)
            return c->err = -ECONNRESET;
        c->heard_ns = op_now_ns();
    } while (wc.byte_len == 0 && post_recv(c, (uint32_t)wc.wr_id) == OP_OK);
    if (wc.byte_len == 0)
        return c->err = -EIO;
    const uint8_t *b = c->bufs + (size_t)wc.wr_id * PERF_LINE_MAX;
    size_t n = wc.byte_len < PERF_LINE_MAX ? wc.byte_len : PERF_LINE_MAX - 1;
    memcpy(c->next, b, n);
    c->next[n] = '\0';
    c->have_next = true;
    return post_recv(c, (uint32_t)wc.wr_id) == OP_OK ? 1 : (c->err = -EIO);
}

int perf_comm_poll_line(struct perf_comm *c, char *line, size_t cap)
{
    int n = read_next(c);
    if (n <= 0)
        return n;
    snprintf(line, cap, "%s", c->next);
    c->have_next = false;
    return 1;
}

bool perf_comm_peer_failed(struct perf_comm *c)
{
    return read_next(c) < 0 || (c->have_next && strncmp(c->next, "FAIL ", 5) == 0);
}

bool perf_comm_pending(const struct perf_comm *c) { return c->have_next; }

void perf_comm_close(struct perf_comm *c)
{
    if (c == NULL)
        return;
    /* what we said last (a FAIL, the BYE) is acknowledged before the QP goes */
    for (uint64_t until = op_now_ns() + LINGER_NS;
         c->qp != NULL && c->sends_out > 0 && c->err == 0 && op_now_ns() < until;) {
        (void)perf_ep_progress(c->ep);
        reap_sends(c);
    }
    if (c->qp != NULL)
        op_rdma_qp_destroy(c->qp);
    if (c->scq != NULL)
        op_rdma_cq_destroy(c->scq);
    if (c->rcq != NULL)
        op_rdma_cq_destroy(c->rcq);
    if (c->mr != NULL)
        op_rdma_dereg_mr(c->mr);
    free(c->bufs);
    free(c);
}
