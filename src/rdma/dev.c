/* The device: owns regions, CQs and QPs, routes received packets to their QP
 * by destination QPN, runs the QPs' timers. Also the CQ and the name tables. */
#include <stdlib.h>
#include <string.h>

#include "offpath/loop.h"
#include "rdma_internal.h"

#define RDMA_OK_ OP_RDMA_QP_C_COUNT_

static const char *const dev_counter_names[] = {OP_RDMA_DEV_COUNTERS(OP_COUNTER_NAME)};
static const char *const qp_counter_names[] = {OP_RDMA_QP_COUNTERS(OP_COUNTER_NAME)};

const char *op_rdma_dev_counter_name(unsigned c)
{
    return op_counter_name(dev_counter_names, OP_RDMA_DEV_C_COUNT_, c);
}

const char *op_rdma_qp_counter_name(unsigned c)
{
    return op_counter_name(qp_counter_names, OP_RDMA_QP_C_COUNT_, c);
}

const char *op_rdma_wc_status_str(unsigned status)
{
    static const char *const names[] = {
        [OP_RDMA_WC_SUCCESS] = "SUCCESS",
        [OP_RDMA_WC_LOC_LEN_ERR] = "LOC_LEN_ERR",
        [OP_RDMA_WC_LOC_QP_OP_ERR] = "LOC_QP_OP_ERR",
        [OP_RDMA_WC_LOC_PROT_ERR] = "LOC_PROT_ERR",
        [OP_RDMA_WC_WR_FLUSH_ERR] = "WR_FLUSH_ERR",
        [OP_RDMA_WC_BAD_RESP_ERR] = "BAD_RESP_ERR",
        [OP_RDMA_WC_LOC_ACCESS_ERR] = "LOC_ACCESS_ERR",
        [OP_RDMA_WC_REM_INV_REQ_ERR] = "REM_INV_REQ_ERR",
        [OP_RDMA_WC_REM_ACCESS_ERR] = "REM_ACCESS_ERR",
        [OP_RDMA_WC_REM_OP_ERR] = "REM_OP_ERR",
        [OP_RDMA_WC_RETRY_EXC_ERR] = "RETRY_EXC_ERR",
        [OP_RDMA_WC_RNR_RETRY_EXC_ERR] = "RNR_RETRY_EXC_ERR",
        [OP_RDMA_WC_GENERAL_ERR] = "GENERAL_ERR",
    };
    const char *s = status < sizeof names / sizeof names[0] ? names[status] : NULL;
    return s != NULL ? s : "UNKNOWN";
}

const char *op_rdma_qp_state_str(unsigned state)
{
    static const char *const names[] = {"RESET", "INIT", "RTR", "RTS", "ERR"};
    return state <= OP_RDMA_QPS_ERR ? names[state] : "UNKNOWN";
}

uint64_t op_rdma_timeout_ns(uint8_t timeout)
{
    /* 4.096 us * 2^t; IBTA caps t at 31 and gives 0 no timer at all */
    if (timeout == 0 || timeout > 31)
        return 0;
    return 4096ull << timeout;
}

uint64_t op_rdma_rnr_ns(uint8_t rnr_timer)
{
    /* IBTA table 45, in microseconds; 0 is the longest */
    static const uint32_t us[32] = {
        655360, 10,    20,    30,    40,    60,    80,     120,    160,    240,   320,
        480,    640,   960,   1280,  1920,  2560,  3840,   5120,   7680,   10240, 15360,
        20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
    };
    return (uint64_t)us[rnr_timer & 31u] * OP_NS_PER_US;
}

op_status_t op_rdma_dev_create(const struct op_rdma_dev_config *cfg, struct op_rdma_dev **out)
{
    struct op_rdma_dev *dev = calloc(1, sizeof(*dev));
    if (dev == NULL || (dev->flat = malloc(OP_IO_BUF_SIZE)) == NULL) {
        free(dev);
        return OP_ERR_NOMEM;
    }
    dev->cfg = *cfg;
    op_rng_seed(&dev->rng, cfg->seed);
    *out = dev;
    return OP_OK;
}

void op_rdma_dev_destroy(struct op_rdma_dev *dev)
{
    if (dev == NULL)
        return;
    for (uint32_t i = 0; i < dev->n_qps; i++)
        op_rdma_qp_destroy(dev->qps[i]);
    free(dev->qps);
    while (dev->n_cqs > 0) /* each destroy takes its CQ off the list */
        op_rdma_cq_destroy(dev->cqs[dev->n_cqs - 1]);
    free(dev->cqs);
    op_rdma_cm_destroy(dev->cm);
    rdma_srq_free_all(dev);
    rdma_mr_free_all(dev);
    free(dev->flat);
    free(dev);
}

const uint64_t *op_rdma_dev_counters(const struct op_rdma_dev *dev) { return dev->c; }

static struct op_rdma_qp *qp_of(const struct op_rdma_dev *dev, uint32_t qpn)
{
    uint32_t i = qpn - RDMA_QPN_BASE;
    return qpn >= RDMA_QPN_BASE && i < dev->n_qps ? dev->qps[i] : NULL;
}

/* RC requests and UC/UD packets go to the responder; ACKs and READ
 * responses to the requester, which needs RTS. */
static void qp_input(struct op_rdma_qp *qp, const struct rdma_pkt *p, uint64_t now,
                     struct op_txq *out)
{
    bool to_req = (p->hdr & (RDMA_H_ACK | RDMA_H_READ_RESP)) != 0;
    if (to_req && qp->state != OP_RDMA_QPS_RTS) {
        qp->c[OP_RDMA_QP_C_drop_state]++;
        return;
    }
    if (qp->init.type == OP_RDMA_QPT_UD) {
        rdma_ud_input(qp, p);
    } else if (to_req) {
        qp->dev->last_response_at = qp->req.last_response_at = now;
        rdma_req_input(qp, p, now, out);
    } else {
        rdma_resp_input(qp, p, now, out);
    }
}

/* pkt's bytes in one piece in dev->flat (its ext came where a placed
 * receive put it, not as the parser or the CM reads packets). */
static const struct op_pkt *flattened(struct op_rdma_dev *dev, const struct op_pkt *pkt,
                                      struct op_pkt *flat)
{
    *flat = (struct op_pkt){.flow = pkt->flow, .data = dev->flat};
    flat->len = op_pkt_flatten(pkt, dev->flat, OP_IO_BUF_SIZE);
    return flat;
}

void op_rdma_dev_input(struct op_rdma_dev *dev, const struct op_pkt *pkt, uint64_t now,
                       struct op_txq *out)
{
    struct op_bth bth;
    struct op_pkt flat;
    dev->c[OP_RDMA_DEV_C_pkts_in]++;
    if (pkt->len < OP_BTH_LEN + OP_ICRC_LEN || op_bth_decode(pkt->data, pkt->len, &bth) != OP_OK) {
        dev->c[OP_RDMA_DEV_C_drop_truncated]++;
        return;
    }
    if (bth.dest_qp == OP_CM_GSI_QPN && dev->cm != NULL) {
        rdma_cm_input(dev->cm, pkt->ext != NULL ? flattened(dev, pkt, &flat) : pkt, now, out);
        return;
    }
    struct op_rdma_qp *qp = qp_of(dev, bth.dest_qp);
    if (qp == NULL) {
        dev->c[OP_RDMA_DEV_C_drop_no_qp]++;
        return;
    }
    qp->c[OP_RDMA_QP_C_pkts_in]++;
    if (qp->state < OP_RDMA_QPS_RTR || qp->state == OP_RDMA_QPS_ERR) {
        qp->c[OP_RDMA_QP_C_drop_state]++; /* not connected: nothing to check against */
        return;
    }
    if (rdma_rx_fast(qp, pkt, now, out))
        return;
    struct rdma_pkt p;
    unsigned why = rdma_parse(qp, pkt, &bth, &p);
    if (why == RDMA_PARSE_FLATTEN) {
        qp->c[OP_RDMA_QP_C_placed_moved]++;
        why = rdma_parse(qp, flattened(dev, pkt, &flat), &bth, &p);
    }
    if (why != RDMA_OK_) {
        qp->c[why]++;
        return;
    }
    qp_input(qp, &p, now, out);
    if (qp->resp.in_msg == RDMA_H_WRITE)
        dev->place_qpn = qp->qpn;
}

bool op_rdma_dev_rx_place(struct op_rdma_dev *dev, struct op_io_place *out)
{
    struct op_rdma_qp *qp = dev->place_qpn != 0 ? qp_of(dev, dev->place_qpn) : NULL;
    return qp != NULL && rdma_resp_place(qp, out);
}

void op_rdma_dev_timer(struct op_rdma_dev *dev, uint64_t now, struct op_txq *out)
{
    if (dev->cm != NULL && rdma_cm_deadline(dev->cm) <= now)
        rdma_cm_timer(dev->cm, now, out);
    for (uint32_t i = 0; i < dev->n_qps; i++) {
        struct op_rdma_qp *qp = dev->qps[i];
        if (qp == NULL)
            continue;
        if (rdma_resp_deadline(qp) <= now)
            rdma_resp_timer(qp, now, out);
        if (rdma_req_deadline(qp) <= now)
            rdma_req_timer(qp, now, out);
    }
}

/* The earlier of the requester's timers and the responder's delayed ACK. */
static uint64_t qp_deadline(const struct op_rdma_qp *qp)
{
    uint64_t q = rdma_req_deadline(qp), r = rdma_resp_deadline(qp);
    return q < r ? q : r;
}

uint64_t op_rdma_dev_next_timer(const struct op_rdma_dev *dev)
{
    uint64_t t = dev->cm != NULL ? rdma_cm_deadline(dev->cm) : UINT64_MAX;
    for (uint32_t i = 0; i < dev->n_qps; i++)
        if (dev->qps[i] != NULL) {
            uint64_t d = qp_deadline(dev->qps[i]);
            t = d < t ? d : t;
        }
    return t;
}

/* ---- completion queues */
op_status_t op_rdma_cq_create(struct op_rdma_dev *dev, uint32_t depth, struct op_rdma_cq **out)
{
    if (depth == 0 || depth > (1u << 24))
        return OP_ERR_INVAL;
    struct op_rdma_cq **cqs = realloc(dev->cqs, (dev->n_cqs + 1) * sizeof(*cqs));
    if (cqs == NULL)
        return OP_ERR_NOMEM;
    dev->cqs = cqs;
    struct op_rdma_cq *cq = calloc(1, sizeof(*cq));
    if (cq == NULL || (cq->ring = calloc(rdma_ring_size(depth), sizeof(*cq->ring))) == NULL) {
        free(cq);
        return OP_ERR_NOMEM;
    }
    cq->dev = dev;
    cq->depth = depth;
    cq->mask = rdma_ring_size(depth) - 1;
    dev->cqs[dev->n_cqs++] = cq;
    *out = cq;
    return OP_OK;
}

void op_rdma_cq_destroy(struct op_rdma_cq *cq)
{
    if (cq == NULL)
        return;
    struct op_rdma_dev *dev = cq->dev;
    for (uint32_t i = 0; i < dev->n_cqs; i++)
        if (dev->cqs[i] == cq) {
            dev->cqs[i] = dev->cqs[--dev->n_cqs];
            break;
        }
    free(cq->ring);
    free(cq);
}

void rdma_cq_push(struct op_rdma_cq *cq, const struct op_rdma_wc *wc)
{
    if (cq->n == cq->depth) {
        cq->overruns++;
        return;
    }
    cq->ring[(cq->head + cq->n++) & cq->mask] = *wc;
}

int op_rdma_poll_cq(struct op_rdma_cq *cq, int max, struct op_rdma_wc *wc)
{
    int n = 0;
    for (; n < max && cq->n > 0; n++) {
        wc[n] = cq->ring[cq->head];
        cq->head = (cq->head + 1) & cq->mask;
        cq->n--;
    }
    return n;
}

uint64_t op_rdma_cq_overruns(const struct op_rdma_cq *cq) { return cq->overruns; }

/* ---- the device as the loop's engine */

static void dev_input(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    op_rdma_dev_input(eng, pkt, now, out);
}

static void dev_timer(void *eng, uint64_t now, struct op_txq *out)
{
    op_rdma_dev_timer(eng, now, out);
}

static uint64_t dev_deadline(const void *eng) { return op_rdma_dev_next_timer(eng); }

static bool dev_rx_place(void *eng, struct op_io_place *out)
{
    return op_rdma_dev_rx_place(eng, out);
}

const struct op_engine_ops op_rdma_dev_ops = {
    .name = "rdma device",
    .input = dev_input,
    .timer = dev_timer,
    .next_deadline = dev_deadline,
    .rx_place = dev_rx_place,
};
