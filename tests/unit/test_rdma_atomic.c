/* RC atomics on the in-memory link: results and completions, every atomic
 * executed exactly once under loss, duplication and reordering (duplicates
 * answered from the responder's result cache), the alignment and access
 * NAKs, the post call's checks, and the in-flight bound that keeps every
 * resent atomic inside the cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "offpath/wire/atomic.h"
#include "rdmasim.h"

#define ALL_ACCESS                                                                                 \
    (OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE | OP_RDMA_ACCESS_REMOTE_READ |       \
     OP_RDMA_ACCESS_REMOTE_ATOMIC)
#define QP_ACCESS (OP_RDMA_ACCESS_REMOTE_WRITE | OP_RDMA_ACCESS_REMOTE_ATOMIC)
#define LIMIT_NS (60 * OP_NS_PER_S)

/* results: side a, one 8-byte slot per WR; target: side b. */
struct afx {
    struct rsim s;
    struct rsim_ep a, b;
    uint64_t *results, *target;
    struct op_rdma_mr *rmr, *tmr;
    size_t n;
};

static void afx_init(struct afx *f, uint64_t seed, const struct rsim_qp_opts *o, size_t n,
                     unsigned target_access)
{
    rsim_init(&f->s, seed);
    rsim_connect(&f->s, o, &f->a, &f->b);
    f->n = n;
    f->results = calloc(n, 8);
    f->target = aligned_alloc(8, 64);
    assert_non_null(f->results);
    assert_non_null(f->target);
    memset(f->target, 0, 64);
    assert_int_equal(op_rdma_reg_mr(f->s.dev[0], f->results, n * 8, OP_RDMA_ACCESS_LOCAL_WRITE,
                                    &f->rmr),
                     OP_OK);
    assert_int_equal(op_rdma_reg_mr(f->s.dev[1], f->target, 64, target_access, &f->tmr), OP_OK);
}

static void afx_free(struct afx *f)
{
    op_rdma_dereg_mr(f->rmr);
    op_rdma_dereg_mr(f->tmr);
    free(f->results);
    free(f->target);
    rsim_free(&f->s);
}

/* An atomic on target byte off, its result into slot i. */
static op_status_t post_atomic(struct afx *f, enum op_rdma_wr_opcode op, size_t i, size_t off,
                               uint64_t compare_add, uint64_t swap, bool signaled)
{
    struct op_rdma_sge sg = {.addr = (uint64_t)(uintptr_t)&f->results[i], .length = 8,
                             .lkey = op_rdma_mr_lkey(f->rmr)};
    struct op_rdma_send_wr wr = {.wr_id = i, .opcode = op, .sg_list = &sg, .num_sge = 1,
                                 .send_flags = signaled ? OP_RDMA_SEND_SIGNALED : 0};
    wr.atomic.remote_addr = (uint64_t)(uintptr_t)f->target + off;
    wr.atomic.rkey = op_rdma_mr_rkey(f->tmr);
    wr.atomic.compare_add = compare_add;
    wr.atomic.swap = swap;
    return op_rdma_post_send(f->a.qp, &wr, f->s.now, &f->s.q);
}

struct want {
    struct op_rdma_cq *cq;
    int want, n;
    struct op_rdma_wc wc[64];
};

static bool got_all(void *arg)
{
    struct want *w = arg;
    int room = (int)(sizeof w->wc / sizeof w->wc[0]) - w->n;
    w->n += op_rdma_poll_cq(w->cq, room, w->wc + w->n);
    return w->n >= w->want;
}

static void complete(struct afx *f, struct want *w, int n)
{
    memset(w, 0, sizeof(*w));
    w->cq = f->a.scq;
    w->want = n;
    assert_true(rsim_run(&f->s, got_all, w, LIMIT_NS));
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

static uint64_t qc(const struct rsim_ep *e, unsigned c) { return op_rdma_qp_counters(e->qp)[c]; }

static void test_fetch_add_and_cmp_swap(void **state)
{
    (void)state;
    struct afx f;
    struct want w;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7, .access = QP_ACCESS};
    afx_init(&f, 1, &o, 4, ALL_ACCESS);
    f.target[1] = 40;
    assert_int_equal(post_atomic(&f, OP_RDMA_WR_ATOMIC_FETCH_AND_ADD, 0, 8, 2, 0, true), OP_OK);
    assert_int_equal(post_atomic(&f, OP_RDMA_WR_ATOMIC_CMP_AND_SWP, 1, 8, 42, 7, true), OP_OK);
    assert_int_equal(post_atomic(&f, OP_RDMA_WR_ATOMIC_CMP_AND_SWP, 2, 8, 42, 9, true), OP_OK);
    assert_int_equal(post_atomic(&f, OP_RDMA_WR_ATOMIC_FETCH_AND_ADD, 3, 8, UINT64_MAX, 0, true),
                     OP_OK);
    complete(&f, &w, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(w.wc[i].status, OP_RDMA_WC_SUCCESS);
        assert_int_equal(w.wc[i].wr_id, (uint64_t)i);
        assert_int_equal(w.wc[i].byte_len, 8);
    }
    assert_int_equal(w.wc[0].opcode, OP_RDMA_WC_FETCH_ADD);
    assert_int_equal(w.wc[1].opcode, OP_RDMA_WC_COMP_SWAP);
    assert_int_equal(f.results[0], 40); /* before the add */
    assert_int_equal(f.results[1], 42); /* equal: swapped */
    assert_int_equal(f.results[2], 7);  /* not equal: memory kept */
    assert_int_equal(f.results[3], 7);
    assert_int_equal(f.target[1], 6); /* 7 + (2^64 - 1) */
    assert_int_equal(f.target[0], 0);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_atomics_executed), 4);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_atomic_replays), 0);
    afx_free(&f);
}

/* n FETCH_ADDs of 1 through loss, duplication and reordering both ways,
 * mixed with WRITEs: executed in order exactly once each, so WR i returns
 * i and memory ends at n. */
static void lossy_atomics(double drop, double dup, double reorder, size_t n, uint64_t seed)
{
    struct afx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7, .access = QP_ACCESS,
                                   .depth = 64, .timeout = 8};
    afx_init(&f, seed, &o, n, ALL_ACCESS);
    for (int i = 0; i < 2; i++)
        f.s.link[i] = (struct rsim_link){.drop = drop, .dup = dup, .reorder = reorder,
                                         .jitter_ns = 40 * OP_NS_PER_US};
    size_t posted = 0, done = 0;
    while (done < n) {
        while (posted < n && posted - done < 48) {
            bool sig = posted % 8 == 7 || posted + 1 == n;
            assert_int_equal(post_atomic(&f, OP_RDMA_WR_ATOMIC_FETCH_AND_ADD, posted, 0, 1, 0, sig),
                             OP_OK);
            posted++;
            if (posted % 5 == 0) { /* a WRITE between them */
                struct op_rdma_sge sg = {(uint64_t)(uintptr_t)&f.results[0], 8,
                                         op_rdma_mr_lkey(f.rmr)};
                struct op_rdma_send_wr wr = {.wr_id = 1ull << 40, .opcode = OP_RDMA_WR_RDMA_WRITE,
                                             .sg_list = &sg, .num_sge = 1};
                wr.rdma.remote_addr = (uint64_t)(uintptr_t)&f.target[4];
                wr.rdma.rkey = op_rdma_mr_rkey(f.tmr);
                /* at most 48 atomics and 10 WRITEs wait: the queue holds 64 */
                assert_int_equal(op_rdma_post_send(f.a.qp, &wr, f.s.now, &f.s.q), OP_OK);
            }
        }
        struct want w;
        complete(&f, &w, 1);
        for (int i = 0; i < w.n; i++) {
            assert_int_equal(w.wc[i].status, OP_RDMA_WC_SUCCESS);
            done = w.wc[i].wr_id + 1;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (f.results[i] != i)
            fail_msg("FETCH_ADD %zu returned %llu", i, (unsigned long long)f.results[i]);
    assert_int_equal(f.target[0], n);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_atomics_executed), n);
    /* a network copy may come after the cache moved on (dropped then);
     * the requester's own resends never do */
    if (dup == 0 && reorder == 0)
        assert_int_equal(qc(&f.b, OP_RDMA_QP_C_atomic_uncached), 0);
    if (drop > 0 || dup > 0)
        assert_true(qc(&f.b, OP_RDMA_QP_C_atomic_replays) > 0);
    afx_free(&f);
}

static void test_atomics_under_loss_dup_reorder(void **state)
{
    (void)state;
    lossy_atomics(0.05, 0.05, 0.05, 1500, 11);
    lossy_atomics(0, 0.2, 0.2, 800, 12);
    lossy_atomics(0.2, 0, 0, 400, 13);
}

/* ---- exactly once: a lost ATOMIC_ACK and a late duplicate */
struct grab {
    uint8_t data[OP_IO_BUF_SIZE];
    struct op_pkt pkt;
    bool have;
    int acks_to_drop;
};

/* Keeps side a's first request; drops side b's first acks_to_drop ATOMIC_ACKs. */
static bool grab_and_drop(struct rsim *s, int from, const struct op_pkt *p)
{
    struct grab *g = s->hook_ctx;
    if (from == 0 && !g->have) {
        memcpy(g->data, p->data, p->len);
        g->pkt = *p;
        g->pkt.data = g->data;
        g->have = true;
    }
    if (from == 1 && p->data[0] == OP_RC_ATOMIC_ACK && g->acks_to_drop > 0) {
        g->acks_to_drop--;
        return true;
    }
    return false;
}

static void test_duplicate_answered_from_cache(void **state)
{
    (void)state;
    struct afx f;
    struct want w;
    struct grab g = {.acks_to_drop = 2};
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7, .access = QP_ACCESS};
    afx_init(&f, 3, &o, 2, ALL_ACCESS);
    f.s.hook = grab_and_drop;
    f.s.hook_ctx = &g;
    f.target[0] = 100;
    assert_int_equal(post_atomic(&f, OP_RDMA_WR_ATOMIC_FETCH_AND_ADD, 0, 0, 5, 0, true), OP_OK);
    complete(&f, &w, 1);
    assert_int_equal(w.wc[0].status, OP_RDMA_WC_SUCCESS);
    assert_int_equal(f.results[0], 100);
    assert_int_equal(f.target[0], 105); /* two ACKs lost, the request sent 3 times: added once */
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_atomics_executed), 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_atomic_replays), 2);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_duplicates), 2);

    /* a copy arriving long after: answered with the original value again,
     * which the requester counts as a duplicate response */
    f.target[0] = 7; /* the application moved on */
    rsim_deliver(&f.s, &g.pkt);
    assert_false(rsim_run(&f.s, never, NULL, OP_NS_PER_MS));
    assert_int_equal(op_rdma_poll_cq(f.a.scq, 4, w.wc), 0);
    assert_int_equal(f.target[0], 7);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_atomic_replays), 3);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_dup_responses), 1);
    assert_int_equal(f.results[0], 100);
    afx_free(&f);
}

/* Older than the cache: dropped and counted, never executed again. */
static void test_duplicate_older_than_cache(void **state)
{
    (void)state;
    struct afx f;
    struct want w;
    struct grab g = {0};
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7, .access = QP_ACCESS};
    size_t n = OP_RDMA_ATOMIC_DEPTH + 4;
    afx_init(&f, 4, &o, n, ALL_ACCESS);
    f.s.hook = grab_and_drop;
    f.s.hook_ctx = &g;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(post_atomic(&f, OP_RDMA_WR_ATOMIC_FETCH_AND_ADD, i, 0, 1, 0, i + 1 == n),
                         OP_OK);
    complete(&f, &w, 1);
    assert_int_equal(f.target[0], n);
    rsim_deliver(&f.s, &g.pkt);
    assert_int_equal(f.target[0], n);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_atomic_uncached), 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_atomics_executed), n);
    afx_free(&f);
}

/* ---- NAKs: misaligned is an invalid request, a region without
 * REMOTE_ATOMIC an access error; memory untouched either way */
static void one_nak(unsigned target_access, unsigned qp_access, size_t off, unsigned status)
{
    struct afx f;
    struct want w;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7, .access = qp_access};
    afx_init(&f, 5, &o, 2, target_access);
    memset(f.target, 0x33, 64);
    assert_int_equal(post_atomic(&f, OP_RDMA_WR_ATOMIC_CMP_AND_SWP, 0, off, 0x3333333333333333ull,
                                 1, true),
                     OP_OK);
    assert_int_equal(post_atomic(&f, OP_RDMA_WR_ATOMIC_FETCH_AND_ADD, 1, 0, 1, 0, true), OP_OK);
    complete(&f, &w, 2);
    assert_int_equal(w.wc[0].status, status);
    assert_non_null(w.wc[0].cause);
    assert_int_equal(w.wc[1].status, OP_RDMA_WC_WR_FLUSH_ERR);
    for (int i = 0; i < 64; i++)
        assert_int_equal(((uint8_t *)f.target)[i], 0x33);
    assert_int_equal(op_rdma_qp_state(f.a.qp), OP_RDMA_QPS_ERR);
    assert_int_equal(op_rdma_qp_state(f.b.qp), OP_RDMA_QPS_ERR);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_atomics_executed), 0);
    afx_free(&f);
}

static void test_alignment_and_access_naks(void **state)
{
    (void)state;
    one_nak(ALL_ACCESS, QP_ACCESS, 4, OP_RDMA_WC_REM_INV_REQ_ERR);
    one_nak(ALL_ACCESS & ~(unsigned)OP_RDMA_ACCESS_REMOTE_ATOMIC, QP_ACCESS, 8,
            OP_RDMA_WC_REM_ACCESS_ERR);
    one_nak(ALL_ACCESS, OP_RDMA_ACCESS_REMOTE_WRITE, 8, OP_RDMA_WC_REM_ACCESS_ERR);
}

/* ---- the post call: 8 bytes, RC, no INLINE, a writable local buffer */
static void test_post_checks(void **state)
{
    (void)state;
    struct afx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7, .access = QP_ACCESS,
                                   .max_inline = 64};
    afx_init(&f, 6, &o, 2, ALL_ACCESS);
    struct op_rdma_sge sg = {.addr = (uint64_t)(uintptr_t)f.results, .length = 4,
                             .lkey = op_rdma_mr_lkey(f.rmr)};
    struct op_rdma_send_wr wr = {.opcode = OP_RDMA_WR_ATOMIC_FETCH_AND_ADD, .sg_list = &sg,
                                 .num_sge = 1};
    assert_int_equal(op_rdma_post_send(f.a.qp, &wr, 0, &f.s.q), OP_ERR_INVAL);
    sg.length = 8;
    wr.send_flags = OP_RDMA_SEND_INLINE;
    assert_int_equal(op_rdma_post_send(f.a.qp, &wr, 0, &f.s.q), OP_ERR_INVAL);
    uint64_t ro = 0;
    struct op_rdma_mr *romr;
    assert_int_equal(op_rdma_reg_mr(f.s.dev[0], &ro, 8, 0, &romr), OP_OK);
    sg = (struct op_rdma_sge){(uint64_t)(uintptr_t)&ro, 8, op_rdma_mr_lkey(romr)};
    wr.send_flags = 0;
    assert_int_equal(op_rdma_post_send(f.a.qp, &wr, 0, &f.s.q), OP_ERR_INVAL);
    op_rdma_dereg_mr(romr);
    /* verbs: REMOTE_ATOMIC needs LOCAL_WRITE */
    assert_int_equal(op_rdma_reg_mr(f.s.dev[0], &ro, 8, OP_RDMA_ACCESS_REMOTE_ATOMIC, &romr),
                     OP_ERR_INVAL);
    afx_free(&f);

    struct afx u;
    const struct rsim_qp_opts uo = {.type = OP_RDMA_QPT_UC};
    afx_init(&u, 7, &uo, 2, ALL_ACCESS);
    assert_int_equal(post_atomic(&u, OP_RDMA_WR_ATOMIC_FETCH_AND_ADD, 0, 0, 1, 0, true),
                     OP_ERR_INVAL);
    afx_free(&u);
}

/* ---- in flight: at most OP_RDMA_ATOMIC_DEPTH (or max_rd_atomic), so a
 * resent atomic is always still in the responder's cache */
struct count_req {
    uint32_t psns[256];
    int n;
};

static bool count_and_drop(struct rsim *s, int from, const struct op_pkt *p)
{
    struct count_req *c = s->hook_ctx;
    if (from != 0 || p->data[0] != OP_RC_FETCH_ADD)
        return false;
    uint32_t psn = (uint32_t)p->data[9] << 16 | (uint32_t)p->data[10] << 8 | p->data[11];
    for (int i = 0; i < c->n; i++)
        if (c->psns[i] == psn)
            return true;
    if (c->n < 256)
        c->psns[c->n++] = psn;
    return true;
}

static void in_flight(uint8_t max_rd_atomic, int expect)
{
    struct afx f;
    struct count_req c = {0};
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7, .access = QP_ACCESS,
                                   .max_rd_atomic = max_rd_atomic};
    afx_init(&f, 8, &o, 40, ALL_ACCESS);
    f.s.hook = count_and_drop;
    f.s.hook_ctx = &c;
    for (size_t i = 0; i < 40; i++)
        assert_int_equal(post_atomic(&f, OP_RDMA_WR_ATOMIC_FETCH_AND_ADD, i, 0, 1, 0, true),
                         OP_OK);
    assert_false(rsim_run(&f.s, never, NULL, 500 * OP_NS_PER_MS));
    assert_int_equal(c.n, expect);
    afx_free(&f);
}

static void test_in_flight_bounded(void **state)
{
    (void)state;
    in_flight(0, OP_RDMA_ATOMIC_DEPTH);
    in_flight(4, 4);
    in_flight(200, OP_RDMA_ATOMIC_DEPTH);
}

/* ---- the wire: AtomicETH and AtomicAckETH, big-endian, truncation refused */
static void test_wire_headers(void **state)
{
    (void)state;
    const struct op_atomic_eth h = {.va = 0x0102030405060708ull, .rkey = 0x11223344u,
                                    .swap_add = 0xa1a2a3a4a5a6a7a8ull,
                                    .compare = 0xb1b2b3b4b5b6b7b8ull};
    const uint8_t want[OP_ATOMIC_ETH_LEN] = {
        1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0xa1, 0xa2,
        0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8};
    uint8_t b[OP_ATOMIC_ETH_LEN];
    struct op_atomic_eth d;
    op_atomic_eth_encode(&h, b);
    assert_memory_equal(b, want, sizeof b);
    assert_int_equal(op_atomic_eth_decode(b, sizeof b, &d), OP_OK);
    assert_true(d.va == h.va && d.rkey == h.rkey && d.swap_add == h.swap_add &&
                d.compare == h.compare);
    assert_int_equal(op_atomic_eth_decode(b, sizeof b - 1, &d), OP_ERR_TRUNCATED);
    uint64_t orig = 0;
    op_atomic_ack_encode(0x0807060504030201ull, b);
    assert_int_equal(b[0], 8);
    assert_int_equal(b[7], 1);
    assert_int_equal(op_atomic_ack_decode(b, 8, &orig), OP_OK);
    assert_int_equal(orig, 0x0807060504030201ull);
    assert_int_equal(op_atomic_ack_decode(b, 7, &orig), OP_ERR_TRUNCATED);
}

/* ---- malformed atomics: a payload after the AtomicETH, a short one */
static void test_malformed_atomic_dropped(void **state)
{
    (void)state;
    struct afx f;
    struct grab g = {0};
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7, .access = QP_ACCESS};
    afx_init(&f, 9, &o, 2, ALL_ACCESS);
    f.s.hook = grab_and_drop;
    f.s.hook_ctx = &g;
    struct want w;
    assert_int_equal(post_atomic(&f, OP_RDMA_WR_ATOMIC_FETCH_AND_ADD, 0, 0, 1, 0, true), OP_OK);
    complete(&f, &w, 1);
    assert_true(g.have);
    uint8_t buf[OP_IO_BUF_SIZE];
    struct op_pkt p = g.pkt;
    size_t hl = OP_BTH_LEN + OP_ATOMIC_ETH_LEN;
    /* 4 payload bytes where none may be, resealed so only the length is wrong */
    memcpy(buf, g.data, hl);
    memset(buf + hl, 0, 4);
    p.data = buf;
    p.len = (uint32_t)op_icrc_seal(&p.flow, buf, hl + 4, sizeof buf);
    rsim_deliver(&f.s, &p);
    /* cut inside the AtomicETH */
    p.len = (uint32_t)op_icrc_seal(&p.flow, buf, OP_BTH_LEN + 20, sizeof buf);
    rsim_deliver(&f.s, &p);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_drop_length), 2);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_atomics_executed), 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_duplicates), 0);
    assert_int_equal(f.target[0], 1);
    afx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_headers),
        cmocka_unit_test(test_malformed_atomic_dropped),
        cmocka_unit_test(test_fetch_add_and_cmp_swap),
        cmocka_unit_test(test_atomics_under_loss_dup_reorder),
        cmocka_unit_test(test_duplicate_answered_from_cache),
        cmocka_unit_test(test_duplicate_older_than_cache),
        cmocka_unit_test(test_alignment_and_access_naks),
        cmocka_unit_test(test_post_checks),
        cmocka_unit_test(test_in_flight_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
