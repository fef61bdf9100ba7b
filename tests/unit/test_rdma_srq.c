/* Shared receive queues: two RC QPs on one device take their receives from
 * one SRQ while multi-packet SENDs from both interleave, under loss,
 * duplication and reordering; RNR while the SRQ is empty; a QP's error
 * flushes the receive it held but leaves the SRQ's others; the post checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rdmasim.h"

#define MSG 1000 /* 4 packets at MTU 256 */
#define LIMIT_NS (60 * OP_NS_PER_S)

struct sfx {
    struct rsim s;
    struct op_rdma_srq *srq;
    struct rsim_ep a[2], b[2];
    uint8_t *src, *dst;
    struct op_rdma_mr *smr, *dmr;
    size_t nrecv;
};

static void sfx_init(struct sfx *f, uint64_t seed, size_t nrecv, uint8_t retry)
{
    rsim_init(&f->s, seed);
    assert_int_equal(op_rdma_srq_create(f->s.dev[1], (uint32_t)nrecv, &f->srq), OP_OK);
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 256, .retry_cnt = retry,
                                   .rnr_retry = 7, .srq_b = f->srq, .timeout = 8};
    for (int i = 0; i < 2; i++)
        rsim_connect(&f->s, &o, &f->a[i], &f->b[i]);
    f->nrecv = nrecv;
    f->src = malloc(2 * 64 * MSG);
    f->dst = calloc(nrecv, MSG);
    assert_non_null(f->src);
    assert_non_null(f->dst);
    for (size_t i = 0; i < 2 * 64 * MSG; i++)
        f->src[i] = (uint8_t)(i * 7 + i / MSG);
    assert_int_equal(op_rdma_reg_mr(f->s.dev[0], f->src, 2 * 64 * MSG,
                                    OP_RDMA_ACCESS_LOCAL_WRITE, &f->smr), OP_OK);
    assert_int_equal(op_rdma_reg_mr(f->s.dev[1], f->dst, nrecv * MSG, OP_RDMA_ACCESS_LOCAL_WRITE,
                                    &f->dmr), OP_OK);
}

static void sfx_free(struct sfx *f)
{
    rsim_free(&f->s); /* the SRQ too */
    free(f->src);
    free(f->dst);
}

static void post_srq(struct sfx *f, size_t i)
{
    struct op_rdma_sge sg = {(uint64_t)(uintptr_t)(f->dst + i * MSG), MSG,
                             op_rdma_mr_lkey(f->dmr)};
    struct op_rdma_recv_wr wr = {.wr_id = i, .sg_list = &sg, .num_sge = 1};
    assert_int_equal(op_rdma_post_srq_recv(f->srq, &wr), OP_OK);
}

/* Message k of sender q: its own bytes of src. */
static const uint8_t *msg(const struct sfx *f, int q, size_t k)
{
    return f->src + ((size_t)q * 64 + k) * MSG;
}

static void send(struct sfx *f, int q, size_t k)
{
    struct op_rdma_sge sg = {(uint64_t)(uintptr_t)msg(f, q, k), MSG, op_rdma_mr_lkey(f->smr)};
    struct op_rdma_send_wr wr = {.wr_id = k, .opcode = OP_RDMA_WR_SEND, .sg_list = &sg,
                                 .num_sge = 1, .send_flags = OP_RDMA_SEND_SIGNALED};
    assert_int_equal(op_rdma_post_send(f->a[q].qp, &wr, f->s.now, &f->s.q), OP_OK);
}

struct got {
    struct op_rdma_cq *cq[2];
    int want, n[2];
    struct op_rdma_wc wc[2][128];
};

static bool got_all(void *arg)
{
    struct got *g = arg;
    for (int i = 0; i < 2; i++)
        g->n[i] += op_rdma_poll_cq(g->cq[i], 128 - g->n[i], g->wc[i] + g->n[i]);
    return g->n[0] + g->n[1] >= g->want;
}

/* 2 x n interleaved 4-packet SENDs into one SRQ: every receive holds one
 * whole message, each QP's messages arrive in order, the QPN says whose. */
static void shared(double drop, double dup, double reorder, size_t n, uint64_t seed)
{
    struct sfx f;
    struct got g = {0};
    sfx_init(&f, seed, 2 * n, 7);
    for (int i = 0; i < 2; i++)
        f.s.link[i] = (struct rsim_link){.drop = drop, .dup = dup, .reorder = reorder,
                                         .jitter_ns = 30 * OP_NS_PER_US};
    for (size_t i = 0; i < 2 * n; i++)
        post_srq(&f, i);
    for (size_t k = 0; k < n; k++)
        for (int q = 0; q < 2; q++)
            send(&f, q, k);
    g.cq[0] = f.b[0].rcq;
    g.cq[1] = f.b[1].rcq;
    g.want = (int)(2 * n);
    assert_true(rsim_run(&f.s, got_all, &g, LIMIT_NS));
    bool used[128] = {0};
    for (int q = 0; q < 2; q++) {
        assert_int_equal(g.n[q], (int)n);
        for (int k = 0; k < g.n[q]; k++) {
            const struct op_rdma_wc *wc = &g.wc[q][k];
            assert_int_equal(wc->status, OP_RDMA_WC_SUCCESS);
            assert_int_equal(wc->qp_num, op_rdma_qp_num(f.b[q].qp));
            assert_int_equal(wc->byte_len, MSG);
            assert_true(wc->wr_id < 2 * n && !used[wc->wr_id]);
            used[wc->wr_id] = true;
            assert_memory_equal(f.dst + wc->wr_id * MSG, msg(&f, q, (size_t)k), MSG);
        }
    }
    assert_int_equal(op_rdma_srq_posted(f.srq), 0);
    sfx_free(&f);
}

static void test_two_qps_share_one_srq(void **state)
{
    (void)state;
    shared(0, 0, 0, 30, 1);
    shared(0.05, 0.03, 0.05, 30, 2);
    shared(0.2, 0, 0.1, 20, 3);
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

/* Empty SRQ: RNR NAK, nothing consumed; a receive posted later is taken. */
static void test_rnr_until_srq_posted(void **state)
{
    (void)state;
    struct sfx f;
    struct got g = {0};
    sfx_init(&f, 4, 4, 7);
    send(&f, 0, 0);
    assert_false(rsim_run(&f.s, never, NULL, 5 * OP_NS_PER_MS));
    assert_true(op_rdma_qp_counters(f.b[0].qp)[OP_RDMA_QP_C_nak_rnr_sent] > 0);
    post_srq(&f, 2);
    g.cq[0] = f.b[0].rcq;
    g.cq[1] = f.b[1].rcq;
    g.want = 1;
    assert_true(rsim_run(&f.s, got_all, &g, LIMIT_NS));
    assert_int_equal(g.wc[0][0].wr_id, 2);
    assert_memory_equal(f.dst + 2 * MSG, msg(&f, 0, 0), MSG);
    sfx_free(&f);
}

/* A message longer than the receive: LOC_LEN_ERR on the receive it took, the
 * QP to ERR; the SRQ's other receives stay for the other QP. */
static void test_error_leaves_srq_receives(void **state)
{
    (void)state;
    struct sfx f;
    struct got g = {0};
    sfx_init(&f, 5, 3, 7);
    struct op_rdma_sge small = {(uint64_t)(uintptr_t)f.dst, 100, op_rdma_mr_lkey(f.dmr)};
    struct op_rdma_recv_wr wr = {.wr_id = 9, .sg_list = &small, .num_sge = 1};
    assert_int_equal(op_rdma_post_srq_recv(f.srq, &wr), OP_OK);
    post_srq(&f, 1);
    post_srq(&f, 2);
    send(&f, 0, 0);
    g.cq[0] = f.b[0].rcq;
    g.cq[1] = f.b[1].rcq;
    g.want = 1;
    assert_true(rsim_run(&f.s, got_all, &g, LIMIT_NS));
    assert_int_equal(g.wc[0][0].wr_id, 9);
    assert_int_equal(g.wc[0][0].status, OP_RDMA_WC_LOC_LEN_ERR);
    assert_int_equal(op_rdma_qp_state(f.b[0].qp), OP_RDMA_QPS_ERR);
    assert_int_equal(op_rdma_srq_posted(f.srq), 2);
    send(&f, 1, 0);
    g.want = 2;
    assert_true(rsim_run(&f.s, got_all, &g, LIMIT_NS));
    assert_int_equal(g.wc[1][0].status, OP_RDMA_WC_SUCCESS);
    assert_int_equal(g.wc[1][0].wr_id, 1);
    assert_int_equal(op_rdma_srq_posted(f.srq), 1);
    sfx_free(&f);
}

static void test_post_checks(void **state)
{
    (void)state;
    struct sfx f;
    sfx_init(&f, 6, 1, 7);
    uint8_t b[8];
    struct op_rdma_sge sg = {(uint64_t)(uintptr_t)f.dst, 8, op_rdma_mr_lkey(f.dmr)};
    struct op_rdma_recv_wr wr = {.sg_list = &sg, .num_sge = 1};
    assert_int_equal(op_rdma_post_recv(f.b[0].qp, &wr), OP_ERR_INVAL); /* it has an SRQ */
    assert_int_equal(op_rdma_post_srq_recv(f.srq, &wr), OP_OK);
    assert_int_equal(op_rdma_post_srq_recv(f.srq, &wr), OP_ERR_NOSPACE);
    sg.addr = (uint64_t)(uintptr_t)b; /* not in a region */
    assert_int_equal(op_rdma_srq_create(f.s.dev[1], 0, &f.srq), OP_ERR_INVAL);
    struct op_rdma_srq *other;
    assert_int_equal(op_rdma_srq_create(f.s.dev[0], 4, &other), OP_OK);
    assert_int_equal(op_rdma_post_srq_recv(other, &wr), OP_ERR_INVAL);
    const struct op_rdma_qp_init_attr ia = {.type = OP_RDMA_QPT_RC, .send_cq = f.b[0].scq,
                                            .recv_cq = f.b[0].rcq, .max_send_wr = 4,
                                            .srq = other};
    struct op_rdma_qp *qp;
    assert_int_equal(op_rdma_qp_create(f.s.dev[1], &ia, &qp), OP_ERR_INVAL); /* other device */
    op_rdma_srq_destroy(other);
    sfx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_qps_share_one_srq),
        cmocka_unit_test(test_rnr_until_srq_posted),
        cmocka_unit_test(test_error_leaves_srq_receives),
        cmocka_unit_test(test_post_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
