/* The all-to-all of worker threads (offpath/agent.h): ranks in this
 * process, each with its own workers, devices and sockets on loopback,
 * exchange every chunk; each received byte is checked against what its
 * sender wrote. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "offpath/agent.h"

#define LOOPBACK 0x7f000001u
#define MAX_RANKS 8

struct job {
    struct op_a2a *a[MAX_RANKS];
    uint32_t ranks;
    size_t chunk;
    op_status_t st[MAX_RANKS];
    uint64_t deadline;
};

static uint8_t byte_of(uint32_t from, uint32_t to, size_t i, uint32_t call)
{
    return (uint8_t)(from * 31 + to * 7 + i + call * 13);
}

static void setup(struct job *j, uint32_t ranks, uint32_t workers, size_t chunk)
{
    memset(j, 0, sizeof(*j));
    j->ranks = ranks;
    j->chunk = chunk;
    struct op_a2a_endpoint eps[MAX_RANKS];
    for (uint32_t r = 0; r < ranks; r++) {
        struct op_a2a_config c = {.ranks = ranks, .rank = r, .workers = workers,
                                  .ip = LOOPBACK, .chunk = chunk};
        assert_int_equal(op_a2a_create(&c, &j->a[r]), OP_OK);
        op_a2a_endpoint(j->a[r], &eps[r]);
    }
    struct op_a2a_qp_info info[MAX_RANKS][MAX_RANKS], theirs[MAX_RANKS];
    for (uint32_t r = 0; r < ranks; r++)
        op_a2a_qp_infos(j->a[r], info[r]);
    for (uint32_t r = 0; r < ranks; r++) {
        for (uint32_t q = 0; q < ranks; q++) /* what an MPI_Alltoall of them gives */
            theirs[q] = info[q][r];
        assert_int_equal(op_a2a_connect(j->a[r], eps, theirs), OP_OK);
    }
}

static void teardown(struct job *j)
{
    for (uint32_t r = 0; r < j->ranks; r++)
        op_a2a_destroy(j->a[r]);
}

struct rank_call {
    struct job *j;
    uint32_t r;
};

static void *run_rank(void *arg)
{
    struct rank_call *c = arg;
    c->j->st[c->r] = op_a2a_run(c->j->a[c->r], c->j->deadline);
    return NULL;
}

/* Every rank in its own thread (a call returns when its peers' chunks are
 * in); those not in `present` stay away. */
static void call_all(struct job *j, uint32_t present, uint64_t budget_ns)
{
    pthread_t t[MAX_RANKS];
    struct rank_call rc[MAX_RANKS];
    j->deadline = op_now_ns() + budget_ns;
    for (uint32_t r = 0; r < present; r++) {
        rc[r] = (struct rank_call){j, r};
        assert_int_equal(pthread_create(&t[r], NULL, run_rank, &rc[r]), 0);
    }
    for (uint32_t r = 0; r < present; r++)
        pthread_join(t[r], NULL);
}

static void fill(struct job *j, uint32_t call)
{
    for (uint32_t r = 0; r < j->ranks; r++) {
        uint8_t *s = op_a2a_sendbuf(j->a[r]);
        for (uint32_t q = 0; q < j->ranks; q++)
            for (size_t i = 0; i < j->chunk; i++)
                s[q * j->chunk + i] = byte_of(r, q, i, call);
    }
}

static void check(const struct job *j, uint32_t call)
{
    for (uint32_t r = 0; r < j->ranks; r++) {
        assert_int_equal(j->st[r], OP_OK);
        const uint8_t *got = op_a2a_recvbuf(j->a[r]);
        for (uint32_t q = 0; q < j->ranks; q++)
            for (size_t i = 0; i < j->chunk; i++)
                if (got[q * j->chunk + i] != byte_of(q, r, i, call))
                    fail_msg("rank %u: byte %zu from rank %u is %u, not %u (call %u)", r, i, q,
                             got[q * j->chunk + i], byte_of(q, r, i, call), call);
    }
}

static void exchange(uint32_t ranks, uint32_t workers, size_t chunk, uint32_t calls)
{
    struct job j;
    setup(&j, ranks, workers, chunk);
    assert_int_equal(op_a2a_workers(j.a[0]), workers < ranks ? workers : ranks);
    for (uint32_t c = 0; c < calls; c++) {
        fill(&j, c);
        call_all(&j, ranks, 10 * OP_NS_PER_S);
        check(&j, c);
    }
    teardown(&j);
}

static void test_small_chunks(void **state)
{
    (void)state;
    exchange(4, 2, 8, 3);
}

/* a chunk of several packets (MTU 1024), more workers than pairs */
static void test_chunks_of_many_packets(void **state)
{
    (void)state;
    exchange(3, 8, 5000, 2);
}

static void test_one_worker_many_ranks(void **state)
{
    (void)state;
    exchange(8, 1, 64, 2);
}

static void test_a_single_rank_copies_to_itself(void **state)
{
    (void)state;
    exchange(1, 1, 100, 1);
}

struct stream {
    struct job *j;
    uint32_t r, calls;
    uint64_t wrong;
    op_status_t st;
};

/* One rank calling back to back with no barrier: a peer may already be in
 * the next call while this one reads its receive buffer. */
static void *stream_rank(void *arg)
{
    struct stream *s = arg;
    struct job *j = s->j;
    uint8_t *send = op_a2a_sendbuf(j->a[s->r]);
    for (uint32_t c = 0; c < s->calls && s->st == OP_OK; c++) {
        for (uint32_t q = 0; q < j->ranks; q++)
            for (size_t i = 0; i < j->chunk; i++)
                send[q * j->chunk + i] = byte_of(s->r, q, i, c);
        s->st = op_a2a_run(j->a[s->r], op_now_ns() + 10 * OP_NS_PER_S);
        const uint8_t *got = op_a2a_recvbuf(j->a[s->r]);
        for (uint32_t q = 0; q < j->ranks && s->st == OP_OK; q++)
            for (size_t i = 0; i < j->chunk; i++)
                s->wrong += got[q * j->chunk + i] != byte_of(q, s->r, i, c);
    }
    return NULL;
}

static void streaming(size_t chunk)
{
    struct job j;
    setup(&j, 4, 2, chunk);
    pthread_t t[4];
    struct stream s[4];
    for (uint32_t r = 0; r < 4; r++) {
        s[r] = (struct stream){.j = &j, .r = r, .calls = 40};
        assert_int_equal(pthread_create(&t[r], NULL, stream_rank, &s[r]), 0);
    }
    for (uint32_t r = 0; r < 4; r++) {
        pthread_join(t[r], NULL);
        assert_int_equal(s[r].st, OP_OK);
        assert_int_equal(s[r].wrong, 0);
    }
    teardown(&j);
}

static void test_calls_back_to_back(void **state)
{
    (void)state;
    streaming(24);
    streaming(3000); /* chunks of several packets: placed as they come */
}

/* A rank that never calls: the others end at their deadline, not later,
 * and their queue pairs refuse further calls. */
static void test_absent_rank_times_out(void **state)
{
    (void)state;
    struct job j;
    setup(&j, 3, 2, 16);
    fill(&j, 0);
    uint64_t t0 = op_now_ns();
    call_all(&j, 2, 300 * OP_NS_PER_MS);
    assert_true(op_now_ns() - t0 < 3 * OP_NS_PER_S);
    for (uint32_t r = 0; r < 2; r++)
        assert_int_equal(j.st[r], OP_ERR_TIMEOUT);
    call_all(&j, 2, 300 * OP_NS_PER_MS);
    for (uint32_t r = 0; r < 2; r++)
        assert_int_not_equal(j.st[r], OP_OK);
    teardown(&j);
}

static void test_mismatched_peer_refused(void **state)
{
    (void)state;
    struct op_a2a *a, *b;
    struct op_a2a_config ca = {.ranks = 2, .rank = 0, .workers = 1, .ip = LOOPBACK, .chunk = 8};
    struct op_a2a_config cb = {.ranks = 2, .rank = 1, .workers = 1, .ip = LOOPBACK, .chunk = 16};
    assert_int_equal(op_a2a_create(&ca, &a), OP_OK);
    assert_int_equal(op_a2a_create(&cb, &b), OP_OK);
    struct op_a2a_endpoint eps[2];
    struct op_a2a_qp_info ia[2], ib[2];
    op_a2a_endpoint(a, &eps[0]);
    op_a2a_endpoint(b, &eps[1]);
    op_a2a_qp_infos(a, ia);
    op_a2a_qp_infos(b, ib);
    struct op_a2a_qp_info theirs_a[2] = {ia[0], ib[0]};
    assert_int_equal(op_a2a_connect(a, eps, theirs_a), OP_ERR_INVAL);
    struct op_a2a_config bad = ca;
    bad.workers = 0;
    assert_int_equal(op_a2a_create(&bad, &b), OP_ERR_INVAL);
    bad = ca;
    bad.rank = 2;
    assert_int_equal(op_a2a_create(&bad, &b), OP_ERR_INVAL);
    bad = ca;
    bad.mtu = 1000;
    assert_int_equal(op_a2a_create(&bad, &b), OP_ERR_INVAL);
    op_a2a_destroy(a);
    op_a2a_destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_chunks),
        cmocka_unit_test(test_chunks_of_many_packets),
        cmocka_unit_test(test_one_worker_many_ranks),
        cmocka_unit_test(test_a_single_rank_copies_to_itself),
        cmocka_unit_test(test_calls_back_to_back),
        cmocka_unit_test(test_absent_rank_times_out),
        cmocka_unit_test(test_mismatched_peer_refused),
    };
    return cmocka_run_group_tests_name("agent", tests, NULL, NULL);
}
