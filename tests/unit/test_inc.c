/* Switch + leader engines together on an in-memory fabric: every op x type x
 * count against a reference computed here in the switches' tree order, loss,
 * duplication and reordering, refusals, dead switches, hostile packets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "incsim.h"
#include "offpath/reduce.h"

static void fill(unsigned type, unsigned op, int rank, size_t count, uint8_t *buf)
{
    struct op_rng r;
    op_rng_seed(&r, 1000 + (uint64_t)rank * 7919 + count);
    size_t es = op_red_type_size(type);
    for (size_t i = 0; i < count; i++) {
        uint64_t x = op_rng_next(&r);
        if (op == OP_RED_LAND || op == OP_RED_LOR || op == OP_RED_LXOR)
            x = (x % 4 == 0) ? 0 : x; /* enough zeros for logical ops to matter */
        if (type == OP_RED_FLOAT32) {
            float f = (float)((double)(int64_t)x / 9.2e15);
            if (op == OP_RED_LAND || op == OP_RED_LOR || op == OP_RED_LXOR)
                f = (x % 4 == 0) ? 0.0f : f;
            memcpy(buf + i * es, &f, 4);
        } else if (type == OP_RED_FLOAT64) {
            double d = (double)(int64_t)x / 9.2e13;
            if (op == OP_RED_LAND || op == OP_RED_LOR || op == OP_RED_LXOR)
                d = (x % 4 == 0) ? 0.0 : d;
            memcpy(buf + i * es, &d, 8);
        } else {
            memcpy(buf + i * es, &x, es); /* little-endian host: low bytes */
        }
    }
}

/* The switches' order: each TOR folds its leaders by rank, the SPINE folds the
 * TORs in topology order. */
static void reference(const struct sim *s, unsigned type, unsigned op, size_t count, uint8_t *out)
{
    size_t bytes = count * op_red_type_size(type);
    uint8_t *in = malloc(bytes ? bytes : 1), *part = malloc(bytes ? bytes : 1);
    assert_non_null(in);
    assert_non_null(part);
    bool have_out = false;
    for (int t = 0; t < s->topo.n; t++) {
        bool have_part = false;
        for (int l = 0; l < s->n_leaders; l++) {
            if (sim_tor_of_leader(s, l) != t)
                continue;
            fill(type, op, l, count, have_part ? in : part);
            if (have_part)
                op_reduce(op, type, part, in, count);
            have_part = true;
        }
        if (!have_part)
            continue;
        if (have_out)
            op_reduce(op, type, out, part, count);
        else
            memcpy(out, part, bytes);
        have_out = true;
    }
    free(in);
    free(part);
}

/* Run one allreduce on every leader and compare each result bit for bit. */
static void check_allreduce(struct sim *s, unsigned type, unsigned op, size_t count, bool in_place)
{
    size_t bytes = count * op_red_type_size(type) + 1;
    uint8_t *ref = malloc(bytes);
    uint8_t **send = calloc((size_t)s->n_leaders, sizeof(*send));
    uint8_t **recv = calloc((size_t)s->n_leaders, sizeof(*recv));
    assert_non_null(ref);
    reference(s, type, op, count, ref);
    for (int l = 0; l < s->n_leaders; l++) {
        send[l] = malloc(bytes);
        recv[l] = in_place ? send[l] : malloc(bytes);
        fill(type, op, l, count, send[l]);
        assert_int_equal(op_inc_eng_allreduce(s->leader[l], send[l], recv[l], count, type, op,
                                              s->now, &s->q),
                         OP_OK);
    }
    assert_true(sim_run(s));
    for (int l = 0; l < s->n_leaders; l++) {
        assert_int_equal(op_inc_eng_status(s->leader[l]), OP_OK);
        if (memcmp(recv[l], ref, bytes - 1) != 0)
            fail_msg("leader %d: %s %s count %zu differs from the reference", l,
                     op_red_op_name(op), op_red_type_name(type), count);
        if (!in_place)
            free(recv[l]);
        free(send[l]);
    }
    free(send);
    free(recv);
    free(ref);
}

static void every_op_and_type(struct sim *s, size_t count)
{
    for (unsigned type = 0; type < OP_RED_TYPE_COUNT_; type++)
        for (unsigned op = 0; op < OP_RED_OP_COUNT_; op++)
            if (op_red_valid(op, type))
                check_allreduce(s, type, op, count, false);
}

static void test_two_level_all_ops_types_small_counts(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 3, .seed = 1};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    const size_t counts[] = {1, 7, 64, 1000};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
        every_op_and_type(&s, counts[i]);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_drop_malformed), 0);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_drop_icrc), 0);
    assert_int_equal(sim_leader_total(&s, OP_INC_C_retransmissions), 0);
    sim_free(&s);
}

static void test_one_tor_all_ops_types_million(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 1, .leaders = 2, .max_data = 4096, .window = 64, .seed = 2};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    every_op_and_type(&s, 1000000);
    sim_free(&s);
}

static void test_two_level_million_sum(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 4, .seed = 3};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    check_allreduce(&s, OP_RED_FLOAT32, OP_RED_SUM, 1000000, true);
    check_allreduce(&s, OP_RED_INT64, OP_RED_SUM, 1000000, false);
    sim_free(&s);
}

static void test_loss_dup_reorder_exact(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 8, .drop = 0.05, .dup = 0.02,
                            .jitter_ns = 50 * OP_NS_PER_US, .window = 8, .seed = 4};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    const size_t counts[] = {1, 7, 1000, 100000};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        check_allreduce(&s, OP_RED_FLOAT64, OP_RED_SUM, counts[i], false);
        check_allreduce(&s, OP_RED_INT32, OP_RED_PROD, counts[i], true);
        check_allreduce(&s, OP_RED_UINT8, OP_RED_BXOR, counts[i], false);
        check_allreduce(&s, OP_RED_FLOAT32, OP_RED_MIN, counts[i], false);
    }
    assert_true(s.dropped > 0);
    assert_true(sim_leader_total(&s, OP_INC_C_retransmissions) > 0);
    assert_true(sim_sw_total(&s, OP_SW_C_retransmissions) > 0);
    assert_true(sim_sw_total(&s, OP_SW_C_duplicates) > 0);
    assert_true(sim_sw_total(&s, OP_SW_C_results_resent) > 0);
    sim_free(&s);
}

/* The nth data packet one leader sends is lost, once. */
struct one_loss {
    uint32_t leader;
    int nth, seen;
};

static bool lose_nth_chunk(struct sim *s, const struct op_pkt *p)
{
    struct one_loss *l = s->lose_ctx;
    struct op_inc_pkt ip;
    if (p->flow.src.v4 != l->leader || op_inc_decode(p->data, p->len, &ip) != OP_OK ||
        ip.hdr.kind != OP_INC_KIND_DATA || (ip.hdr.flags & OP_INC_F_RESULT))
        return false;
    return ++l->seen == l->nth;
}

/* One chunk lost among many: the results of the chunks sent after it come
 * back first, so it goes again at once, before any timer (RACK's rule):
 * one fast retransmission, no timeout, results exact. */
static void test_lost_chunk_found_by_later_results(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 4, .window = 16, .seed = 12};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    struct one_loss l = {.leader = sim_leader_ip(3), .nth = 5};
    s.lose = lose_nth_chunk;
    s.lose_ctx = &l;
    check_allreduce(&s, OP_RED_INT32, OP_RED_SUM, 50000, false);
    assert_int_equal(l.seen > l.nth, true);
    const uint64_t *c = op_inc_eng_counters(s.leader[3]);
    assert_int_equal(c[OP_INC_C_fast_retransmits], 1);
    assert_int_equal(c[OP_INC_C_retransmissions], 1);
    assert_int_equal(sim_leader_total(&s, OP_INC_C_timeouts), 0);
    sim_free(&s);
}

/* A queue marks (FECN, as the switch on the path hands a CE frame to its
 * engine, or marks its own INC packet) while `marking`: every contribution
 * one leader sends up, or (down) every result sent to it. */
struct marker {
    bool marking, down;
    uint32_t leader;
};

static bool mark_fecn(struct sim *s, const struct op_pkt *p)
{
    const struct marker *m = s->lose_ctx;
    struct op_inc_pkt ip;
    uint32_t end = m->down ? p->flow.dst.v4 : p->flow.src.v4;
    if (m->marking && end == m->leader && op_inc_decode(p->data, p->len, &ip) == OP_OK &&
        ip.hdr.kind == OP_INC_KIND_DATA && ((ip.hdr.flags & OP_INC_F_RESULT) != 0) == m->down)
        p->data[OP_BTH_FECN_BYTE] |= OP_BTH_FECN_BIT;
    return false;
}

/* Marked rounds come back congested to every leader, which all narrow
 * their windows alike (DCTCP's cut), results exact; unmarked rounds grow
 * the windows back to what the switches granted. */
static void test_congestion_narrows_every_window_alike(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 4, .window = 16, .seed = 9};
    sim_init(&s, &spec);
    struct marker m = {.marking = true, .leader = sim_leader_ip(1)};
    s.lose = mark_fecn;
    s.lose_ctx = &m;
    assert_int_equal(sim_join(&s, 1), OP_OK);
    for (int l = 0; l < s.n_leaders; l++)
        assert_int_equal(op_inc_eng_cwnd(s.leader[l]), 16);
    check_allreduce(&s, OP_RED_INT32, OP_RED_SUM, 100000, false);
    uint32_t narrowed = op_inc_eng_cwnd(s.leader[0]);
    assert_true(narrowed < 16 && narrowed >= 1);
    for (int l = 0; l < s.n_leaders; l++) {
        const uint64_t *c = op_inc_eng_counters(s.leader[l]);
        assert_int_equal(op_inc_eng_cwnd(s.leader[l]), narrowed);
        assert_int_equal(c[OP_INC_C_congested_results], c[OP_INC_C_results]);
        assert_true(c[OP_INC_C_window_cuts] > 0);
    }
    assert_true(sim_sw_total(&s, OP_SW_C_congestion_seen) > 0);
    m.marking = false;
    uint64_t cuts = op_inc_eng_counters(s.leader[0])[OP_INC_C_window_cuts];
    check_allreduce(&s, OP_RED_FLOAT64, OP_RED_SUM, 200000, false);
    for (int l = 0; l < s.n_leaders; l++) {
        assert_int_equal(op_inc_eng_cwnd(s.leader[l]), 16);
        assert_int_equal(op_inc_eng_counters(s.leader[l])[OP_INC_C_window_cuts], cuts);
    }
    sim_free(&s);
}

/* The queue down to one leader marks its results (as the TOR's shaper
 * marks its own INC packets): that leader narrows its window, the others
 * see nothing; results exact. */
static void test_congestion_down_to_one_leader(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 4, .window = 16, .seed = 10};
    sim_init(&s, &spec);
    struct marker m = {.marking = true, .down = true, .leader = sim_leader_ip(2)};
    s.lose = mark_fecn;
    s.lose_ctx = &m;
    assert_int_equal(sim_join(&s, 1), OP_OK);
    check_allreduce(&s, OP_RED_INT64, OP_RED_BOR, 50000, true);
    for (int l = 0; l < s.n_leaders; l++) {
        const uint64_t *c = op_inc_eng_counters(s.leader[l]);
        assert_int_equal(c[OP_INC_C_congested_results], l == 2 ? c[OP_INC_C_results] : 0);
        assert_int_equal(c[OP_INC_C_window_cuts] > 0, l == 2);
        assert_int_equal(op_inc_eng_cwnd(s.leader[l]) < 16, l == 2);
    }
    sim_free(&s);
}

static void test_heavy_loss_control_and_data(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 3, .spines = 2, .leaders = 9, .drop = 0.25, .dup = 0.1,
                            .jitter_ns = 200 * OP_NS_PER_US, .window = 4, .seed = 5};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    check_allreduce(&s, OP_RED_FLOAT64, OP_RED_SUM, 5000, false);
    check_allreduce(&s, OP_RED_INT16, OP_RED_MAX, 3000, false);
    sim_free(&s);
}

static void test_many_leaders_one_tor(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 1, .leaders = 100, .seed = 6};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    check_allreduce(&s, OP_RED_FLOAT32, OP_RED_SUM, 3000, false);
    check_allreduce(&s, OP_RED_UINT64, OP_RED_BOR, 100, false);
    sim_free(&s);
}

static void test_refused_when_no_group_free(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 2, .max_groups = 1, .seed = 7};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    assert_int_equal(sim_join(&s, 2), OP_ERR_REFUSED);
    for (int l = 0; l < s.n_leaders; l++)
        assert_int_equal(op_inc_eng_reason(s.leader[l]), OP_INC_R_NO_GROUP);
    assert_true(sim_sw_total(&s, OP_SW_C_refusals) > 0);
    sim_free(&s);
}

static void test_master_picks_spine_with_most_free_groups(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 2, .leaders = 4, .max_groups = 4, .seed = 8};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    uint32_t first = op_inc_eng_caps(s.leader[0])->spine_ip;
    assert_int_equal(sim_join(&s, 2), OP_OK);
    uint32_t second = op_inc_eng_caps(s.leader[0])->spine_ip;
    assert_int_not_equal(first, second); /* the used spine has one group fewer */
    sim_free(&s);
}

static void test_dead_switch_times_out(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 4, .seed = 9};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    s.dead_ip = s.topo.sw[0].ip; /* the spine */
    uint64_t start = s.now;
    int32_t buf[64] = {0};
    for (int l = 0; l < s.n_leaders; l++)
        assert_int_equal(op_inc_eng_allreduce(s.leader[l], buf, buf, 64, OP_RED_INT32, OP_RED_SUM,
                                              s.now, &s.q),
                         OP_OK);
    assert_true(sim_run(&s));
    for (int l = 0; l < s.n_leaders; l++)
        assert_int_equal(op_inc_eng_status(s.leader[l]), OP_ERR_TIMEOUT);
    assert_true(s.now - start <= 5 * OP_NS_PER_S + OP_NS_PER_MS);
    /* the group is broken from now on: later calls fail at once */
    assert_int_equal(op_inc_eng_allreduce(s.leader[0], buf, buf, 64, OP_RED_INT32, OP_RED_SUM,
                                          s.now, &s.q),
                     OP_ERR_STATE);
    sim_free(&s);
}

/* A leader that has not started the call yet: the others reach their
 * deadline, resume the same call when the caller decides the peer is only
 * late, and finish it through the switch with the right result. */
static void test_late_leader_call_resumed(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 4, .seed = 21};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    const size_t count = 3000; /* several chunks */
    uint8_t *buf[4], *ref = malloc(count * 4);
    reference(&s, OP_RED_INT32, OP_RED_SUM, count, ref);
    for (int l = 0; l < 4; l++) {
        buf[l] = malloc(count * 4);
        fill(OP_RED_INT32, OP_RED_SUM, l, count, buf[l]);
    }
    for (int l = 0; l < 3; l++)
        assert_int_equal(op_inc_eng_allreduce(s.leader[l], buf[l], buf[l], count, OP_RED_INT32,
                                              OP_RED_SUM, s.now, &s.q),
                         OP_OK);
    assert_true(sim_run(&s));
    for (int l = 0; l < 3; l++)
        assert_int_equal(op_inc_eng_status(s.leader[l]), OP_ERR_TIMEOUT);
    assert_int_equal(op_inc_eng_resume(s.leader[3], s.now, &s.q), OP_ERR_STATE); /* never ran */
    assert_int_equal(op_inc_eng_allreduce(s.leader[3], buf[3], buf[3], count, OP_RED_INT32,
                                          OP_RED_SUM, s.now, &s.q),
                     OP_OK);
    for (int l = 0; l < 3; l++)
        assert_int_equal(op_inc_eng_resume(s.leader[l], s.now, &s.q), OP_OK);
    assert_true(sim_run(&s));
    for (int l = 0; l < 4; l++) {
        assert_int_equal(op_inc_eng_status(s.leader[l]), OP_OK);
        assert_memory_equal(buf[l], ref, count * 4);
        free(buf[l]);
    }
    free(ref);
    /* the group goes on: the next call needs no resume */
    check_allreduce(&s, OP_RED_INT32, OP_RED_SUM, 100, true);
    sim_free(&s);
}

/* A process stopped for longer than the deadline (SIGSTOP, an oversubscribed
 * machine) wakes to a clock past it: the gap is not the switch's fault, so
 * the call goes on, and a cancel stops it at once, resumable too. */
static void test_own_stall_moves_the_deadline_cancel_stops(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 1, .leaders = 2, .seed = 5};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    int32_t a[16] = {1}, b[16] = {2};
    assert_int_equal(op_inc_eng_allreduce(s.leader[0], a, a, 16, OP_RED_INT32, OP_RED_SUM, s.now,
                                          &s.q),
                     OP_OK);
    s.now += 7 * OP_NS_PER_S; /* stopped past the 5 s deadline */
    op_inc_eng_timer(s.leader[0], s.now, &s.q);
    assert_int_equal(op_inc_eng_status(s.leader[0]), OP_INPROGRESS);
    assert_int_equal(op_inc_eng_counters(s.leader[0])[OP_INC_C_stalls], 1);
    op_inc_eng_cancel(s.leader[0]);
    assert_int_equal(op_inc_eng_status(s.leader[0]), OP_ERR_TIMEOUT);
    assert_int_equal(op_inc_eng_resume(s.leader[0], s.now, &s.q), OP_OK);
    assert_int_equal(op_inc_eng_allreduce(s.leader[1], b, b, 16, OP_RED_INT32, OP_RED_SUM, s.now,
                                          &s.q),
                     OP_OK);
    assert_true(sim_run(&s));
    assert_int_equal(op_inc_eng_status(s.leader[0]), OP_OK);
    assert_int_equal(a[0], 3);
    assert_int_equal(b[0], 3);
    sim_free(&s);
}

static size_t forge(const struct sim *s, uint64_t token, uint32_t rank, uint32_t seq,
                    const struct op_flow *flow, uint8_t *out)
{
    const struct op_inc_caps *caps = op_inc_eng_caps(s->leader[0]);
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_DATA,
                           .group_id = caps->group_id, .op = OP_RED_SUM, .dtype = OP_RED_INT32,
                           .src_rank = rank, .token = token, .seq = seq,
                           .slot = (uint16_t)(seq % caps->window), .count = 16,
                           .req_id = (uint8_t)seq};
    int32_t evil[16];
    for (int i = 0; i < 16; i++)
        evil[i] = 12345;
    size_t n = op_inc_encode(&h, 0, evil, sizeof(evil), out, OP_INC_MAX_PKT);
    return op_icrc_seal(flow, out, n, OP_INC_MAX_PKT);
}

static void test_foreign_packets_never_change_results(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 4, .seed = 10};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    uint64_t token = op_inc_eng_caps(s.leader[0])->token;
    uint8_t pkt[OP_INC_MAX_PKT];
    struct op_flow member = {.src.v4 = sim_leader_ip(1), .src_port = 4791,
                             .dst.v4 = s.topo.sw[1].ip, .dst_port = 4791};
    struct op_flow stranger = member;
    stranger.src.v4 = sim_leader_ip(0) + 1000; /* not under any TOR of the group */
    struct op_flow neighbour = member;
    neighbour.src.v4 = sim_leader_ip(2);       /* a member, but of the other TOR */
    for (uint32_t seq = 0; seq < 4; seq++) {
        size_t n = forge(&s, token ^ 0x5a5a, 1, seq, &member, pkt);
        sim_inject(&s, &member, pkt, n);
        n = forge(&s, token, 1, seq, &stranger, pkt);
        sim_inject(&s, &stranger, pkt, n);
        n = forge(&s, token, 2, seq, &neighbour, pkt);
        sim_inject(&s, &neighbour, pkt, n);
        n = forge(&s, token, 1, seq, &member, pkt);
        pkt[n - 1] ^= 1; /* a broken ICRC */
        sim_inject(&s, &member, pkt, n);
    }
    check_allreduce(&s, OP_RED_INT32, OP_RED_SUM, 16, false);
    check_allreduce(&s, OP_RED_INT32, OP_RED_SUM, 64, false);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_drop_bad_token), 4);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_drop_not_member), 8);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_drop_icrc), 4);
    sim_free(&s);
}

static void test_leave_frees_groups_everywhere(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 4, .drop = 0.1, .seed = 11};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_groups_live), 3);
    for (int l = 0; l < s.n_leaders; l++)
        assert_int_equal(op_inc_eng_leave(s.leader[l], s.now, &s.q), OP_OK);
    assert_true(sim_run(&s));
    assert_int_equal(op_inc_eng_status(s.leader[0]), OP_OK);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_groups_live), 0);
    sim_free(&s);
}

/* Loses, on the way to one leader, every result and the first kill. */
struct lose_leave {
    uint32_t ip;
    int kills_seen;
};

static bool lose_results_and_first_kill(struct sim *s, const struct op_pkt *p)
{
    struct lose_leave *l = s->lose_ctx;
    struct op_inc_pkt ip;
    struct op_inc_ctrl c;
    if (p->flow.dst.v4 != l->ip || op_inc_decode(p->data, p->len, &ip) != OP_OK)
        return false;
    if (ip.hdr.kind == OP_INC_KIND_DATA)
        return (ip.hdr.flags & OP_INC_F_RESULT) != 0;
    return op_inc_ctrl_decode(ip.payload, ip.payload_len, &c) == OP_OK &&
           (c.query_notify_hop & 0x0f) == OP_INC_CTRL_KILL && l->kills_seen++ == 0;
}

/* ---- the leave's barrier result and the kill to one leader are lost: the
 * master has freed the group everywhere; the leader's retransmission into
 * the freed group hears the kill again and its leave ends well before the
 * deadline (it used to time out) */
static void test_leave_when_result_and_kill_are_lost(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 4, .seed = 13};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    const struct op_inc_caps caps = *op_inc_eng_caps(s.leader[3]);
    struct lose_leave lose = {.ip = sim_leader_ip(3)};
    s.lose = lose_results_and_first_kill;
    s.lose_ctx = &lose;
    uint64_t t0 = s.now;
    for (int l = 0; l < s.n_leaders; l++)
        assert_int_equal(op_inc_eng_leave(s.leader[l], s.now, &s.q), OP_OK);
    assert_true(sim_run(&s));
    for (int l = 0; l < s.n_leaders; l++)
        assert_int_equal(op_inc_eng_status(s.leader[l]), OP_OK);
    assert_true(s.now - t0 < OP_NS_PER_S); /* the deadline is 5 s */
    assert_int_equal(lose.kills_seen, 2); /* the kill down (lost), and the one heard again */
    assert_int_equal(sim_sw_total(&s, OP_SW_C_kills_repeated), 1);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_groups_live), 0);
    /* without the group's token the switch says nothing of a killed group */
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_DATA,
                           .group_id = caps.group_id, .op = OP_RED_SUM, .dtype = OP_RED_INT32,
                           .src_rank = 3, .token = caps.token ^ 1, .count = 1};
    struct op_flow from = {.src.v4 = sim_leader_ip(3), .src_port = 4791,
                           .dst.v4 = s.topo.sw[sim_tor_of_leader(&s, 3)].ip, .dst_port = 4791};
    int32_t one = 1;
    uint8_t pkt[OP_INC_MAX_PKT];
    size_t n = op_inc_encode(&h, 0, &one, sizeof one, pkt, sizeof pkt);
    uint64_t unknown = sim_sw_total(&s, OP_SW_C_drop_unknown_group);
    sim_inject(&s, &from, pkt, op_icrc_seal(&from, pkt, n, sizeof pkt));
    assert_true(sim_run(&s));
    assert_int_equal(sim_sw_total(&s, OP_SW_C_drop_unknown_group), unknown + 1);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_kills_repeated), 1);
    sim_free(&s);
}

static void test_lease_frees_silent_group(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 1, .leaders = 2, .lease_ms = 100, .seed = 12};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_groups_live), 1);
    op_sw_timer(s.sw[0], s.now + 50 * OP_NS_PER_MS, &s.q);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_groups_live), 1);
    op_sw_timer(s.sw[0], s.now + 400 * OP_NS_PER_MS, &s.q);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_groups_live), 0);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_groups_expired), 1);
    sim_free(&s);
}

static void test_unsupported_and_invalid_calls(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 1, .leaders = 2, .seed = 13};
    sim_init(&s, &spec);
    double d[4] = {0};
    assert_int_equal(op_inc_eng_allreduce(s.leader[0], d, d, 4, OP_RED_FLOAT64, OP_RED_SUM, 0,
                                          &s.q),
                     OP_ERR_BUSY); /* not joined yet */
    assert_int_equal(sim_join(&s, 1), OP_OK);
    assert_int_equal(op_inc_eng_allreduce(s.leader[0], d, d, 4, OP_RED_FLOAT64, OP_RED_BAND,
                                          s.now, &s.q),
                     OP_ERR_INVAL);
    assert_int_equal(op_inc_eng_allreduce(s.leader[0], d, d, 4, 99, OP_RED_SUM, s.now, &s.q),
                     OP_ERR_INVAL);
    sim_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_level_all_ops_types_small_counts),
        cmocka_unit_test(test_one_tor_all_ops_types_million),
        cmocka_unit_test(test_two_level_million_sum),
        cmocka_unit_test(test_loss_dup_reorder_exact),
        cmocka_unit_test(test_lost_chunk_found_by_later_results),
        cmocka_unit_test(test_heavy_loss_control_and_data),
        cmocka_unit_test(test_congestion_narrows_every_window_alike),
        cmocka_unit_test(test_congestion_down_to_one_leader),
        cmocka_unit_test(test_many_leaders_one_tor),
        cmocka_unit_test(test_refused_when_no_group_free),
        cmocka_unit_test(test_master_picks_spine_with_most_free_groups),
        cmocka_unit_test(test_dead_switch_times_out),
        cmocka_unit_test(test_foreign_packets_never_change_results),
        cmocka_unit_test(test_leave_frees_groups_everywhere),
        cmocka_unit_test(test_leave_when_result_and_kill_are_lost),
        cmocka_unit_test(test_lease_frees_silent_group),
        cmocka_unit_test(test_unsupported_and_invalid_calls),
        cmocka_unit_test(test_late_leader_call_resumed),
        cmocka_unit_test(test_own_stall_moves_the_deadline_cancel_stops),
    };
    return cmocka_run_group_tests_name("inc", tests, NULL, NULL);
}
