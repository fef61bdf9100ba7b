/* Tests for the scale model: the simulation against closed forms (one
 * switch without loss is the sum of its hop costs; the ring is
 * 2(n-1)/n x size/bw + 2(n-1) x latency), loss recovery, Socket mode, the
 * platform file parser with malformed input. Without SimGrid only the
 * closed forms and the parser are checked (the simulation must say so). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "offpath/model.h"

#include "../../src/model/calib_internal.h"

static void near(double a, double b, int line)
{
    if (!(fabs(a - b) <= 1e-9 * fabs(b) + 1e-12))
        fail_msg("line %d: %.12g, want %.12g", line, a, b);
}
#define NEAR(a, b) near((a), (b), __LINE__)

static double sim1(const struct op_model_platform *p, unsigned nodes, unsigned ppn,
                   struct op_model_scenario sc, struct op_model_result *res)
{
    struct op_model_result r;
    assert_int_equal(op_model_simulate(p, nodes, ppn, &sc, 1, &r), OP_OK);
    if (res != NULL)
        *res = r;
    return r.latency_s;
}

static bool skip_without_simgrid(void)
{
    if (op_model_available())
        return false;
    struct op_model_platform p;
    struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = 4};
    struct op_model_result r;
    assert_int_equal(op_model_preset("25G", &p), OP_OK);
    assert_int_equal(op_model_simulate(&p, 4, 1, &sc, 1, &r), OP_ERR_UNSUPPORTED);
    return true;
}

/* A switch with a per-chunk cost, so its serial work shows. */
static void costly_switch(struct op_model_platform *p)
{
    assert_int_equal(op_model_preset("25G", p), OP_OK);
    p->sw_chunk_s = 0.7e-6;
    p->sw_byte_s = 2e-9;
}

static void test_one_switch_is_sum_of_hops(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    costly_switch(&p);
    for (uint64_t bytes = 4; bytes <= 256; bytes *= 8) {
        struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = bytes};
        NEAR(sim1(&p, 6, 1, sc, NULL), op_model_one_switch_closed(&p, 6, bytes));
        /* ranks on the node add the shared-memory tree, nothing else */
        NEAR(sim1(&p, 6, 8, sc, NULL),
             op_model_one_switch_closed(&p, 6, bytes) + op_model_intra(&p, 8, true, bytes));
    }
}

/* The CPU a call costs is the sum of its per-packet costs: each leader
 * sends and takes one packet, the switch works on each contribution. */
static void test_cpu_is_sum_of_packet_costs(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    costly_switch(&p);
    struct op_model_result r;
    sim1(&p, 6, 1, (struct op_model_scenario){.mode = OP_MODEL_NODE, .bytes = 64}, &r);
    NEAR(r.cpu_s, 6 * (2 * p.leader_pkt_s + p.sw_chunk_s + 64 * p.sw_byte_s));
}

/* This machine's platform where only waking up costs: wake_s a leader,
 * sw_wake_s a switch (leaders that sleep at once). */
static void only_wakeups(struct op_model_platform *p, double wake_s, double sw_wake_s)
{
    assert_int_equal(op_model_preset("here", p), OP_OK);
    p->leader_pkt_s = p->leader_byte_s = p->sw_chunk_s = p->sw_byte_s = p->ctx_s = p->runq_s = 0;
    p->crowd_f = p->check_byte_s = p->spin_s = 0;
    p->wake_s = wake_s;
    p->sw_wake_s = sw_wake_s;
}

/* This machine's emulation batches (GRO in, GSO out): a window's packets
 * leave a leader as one datagram and a switch's wake sends its results as
 * one, so a wake-up is paid per datagram, not per packet. Without loss a
 * window of 32 chunks at 2 leaders wakes a handful of times, not 32 x 3. */
static void test_shared_cores_batch_wakeups(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    only_wakeups(&p, 10e-6, 10e-6);
    struct op_model_result r;
    uint64_t bytes = (uint64_t)p.window * p.max_data;
    sim1(&p, 2, 1, (struct op_model_scenario){.mode = OP_MODEL_NODE, .bytes = bytes}, &r);
    assert_true(r.cpu_s >= 3 * p.wake_s - 1e-12); /* each process woke at least once */
    assert_true(r.cpu_s <= 8 * p.wake_s + 1e-12);
    /* crowded: 8 leaders and a switch on 2 cores pay ctx_s on top of some wakes */
    p.ctx_s = 5e-6;
    struct op_model_result crowded;
    sim1(&p, 8, 1, (struct op_model_scenario){.mode = OP_MODEL_NODE, .bytes = 4}, &crowded);
    p.ctx_s = 0;
    sim1(&p, 8, 1, (struct op_model_scenario){.mode = OP_MODEL_NODE, .bytes = 4}, &r);
    assert_true(crowded.cpu_s > r.cpu_s + p.wake_s / 2);
    assert_true(crowded.latency_s > r.latency_s);
}

/* inc_test's checks between calls: all CPU a call either way; inside the
 * calls only with more leaders than cores (8 on 2: 3/4 of it). */
static void test_shared_cores_checks_between_calls(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    assert_int_equal(op_model_preset("here", &p), OP_OK);
    p.crowd_f = 0;
    uint64_t bytes = (uint64_t)p.window * p.max_data;
    struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = bytes};
    struct op_model_result two, eight, two_c, eight_c;
    p.check_byte_s = 0;
    sim1(&p, 2, 1, sc, &two);
    sim1(&p, 8, 1, sc, &eight);
    p.check_byte_s = 1e-9;
    sim1(&p, 2, 1, sc, &two_c);
    sim1(&p, 8, 1, sc, &eight_c);
    NEAR(two_c.latency_s, two.latency_s);
    NEAR(two_c.cpu_s - two.cpu_s, 2 * (double)bytes * p.check_byte_s);
    NEAR(eight_c.cpu_s - eight.cpu_s, 8 * (double)bytes * p.check_byte_s);
    assert_true(eight_c.latency_s > eight.latency_s);
}

/* validate's mpirun rows run osu_allreduce, which checks no result
 * between its calls: 4 nodes of 2 ranks (4 leaders on 2 cores) take no
 * share of inc_test's checks, which 4 inc_test leaders do. */
static void test_osu_rows_check_nothing(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p, none;
    assert_int_equal(op_model_preset("here", &p), OP_OK);
    uint64_t bytes = (uint64_t)p.window * p.max_data;
    struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = bytes};
    struct op_model_result plain, checked, ranks2;
    p.check_byte_s = 2e-9;
    none = p;
    none.check_byte_s = 0;
    sim1(&none, 4, 1, sc, &plain);
    sim1(&p, 4, 1, sc, &checked);
    assert_true(checked.latency_s > plain.latency_s); /* inc_test's 4 leaders check */
    sim1(&none, 4, 2, sc, &ranks2);
    double us;
    assert_true(mdl_predict_mpi_network(&p, OP_MODEL_NODE, 4, &bytes, 1, &us));
    NEAR(us, (ranks2.latency_s - ranks2.intra_s) * 1e6);
}

/* The host path's ranks on shared cores wake host_wake_s after their
 * messages arrive: once at 2 nodes (one exchange), once a step at 8
 * (three), where each rank blocks before its partner's message is there;
 * 8 ranks on 2 cores pay host_crowd_f more on their per-packet work, 2 do
 * not; the INC processes' crowd_f is not theirs. */
static void test_shared_cores_wake_host_ranks(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    assert_int_equal(op_model_preset("here", &p), OP_OK);
    struct op_model_scenario sc = {.mode = OP_MODEL_HOST, .alg = OP_MODEL_ALG_OFFPATH,
                                   .bytes = 1024};
    p.host_wake_s = p.crowd_f = p.host_crowd_f = 0;
    double two = sim1(&p, 2, 1, sc, NULL), eight = sim1(&p, 8, 1, sc, NULL);
    p.host_wake_s = 30e-6;
    NEAR(sim1(&p, 2, 1, sc, NULL), two + p.host_wake_s);
    NEAR(sim1(&p, 8, 1, sc, NULL), eight + 3 * p.host_wake_s);
    p.crowd_f = 0.5;
    NEAR(sim1(&p, 8, 1, sc, NULL), eight + 3 * p.host_wake_s);
    p.host_crowd_f = 0.5;
    NEAR(sim1(&p, 2, 1, sc, NULL), two + p.host_wake_s);
    assert_true(sim1(&p, 8, 1, sc, NULL) > eight + 3 * p.host_wake_s);
}

/* offpath's host path: recursive doubling below 32 KiB, the ring from it. */
static void test_offpath_host_rule(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    assert_int_equal(op_model_preset("25G", &p), OP_OK);
    unsigned alg;
    assert_int_equal(op_model_alg_parse("offpath", &alg), OP_OK);
    assert_int_equal(alg, OP_MODEL_ALG_OFFPATH);
    struct op_model_scenario sc = {.mode = OP_MODEL_HOST, .alg = alg, .bytes = 16384};
    struct op_model_scenario ref = sc;
    ref.alg = OP_MODEL_ALG_RD;
    NEAR(sim1(&p, 8, 1, sc, NULL), sim1(&p, 8, 1, ref, NULL));
    sc.bytes = ref.bytes = 65536;
    ref.alg = OP_MODEL_ALG_RING;
    NEAR(sim1(&p, 8, 1, sc, NULL), sim1(&p, 8, 1, ref, NULL));
}

/* SMPI's `ompi` selector (SimGrid 3.32, Open MPI 4.1's rules), phase by
 * phase; `ompi-classic` keeps Open MPI 4.0's fixed rule. */
static void plan_is(unsigned alg, unsigned P, uint64_t b, unsigned n, const unsigned *kinds,
                    const uint64_t *bytes, int line)
{
    struct mdl_plan pl;
    mdl_host_plan(alg, P, b, &pl);
    if (pl.n != n)
        fail_msg("line %d: %u ranks %llu B: %u phases, want %u", line, P, (unsigned long long)b,
                 pl.n, n);
    for (unsigned i = 0; i < n; i++)
        if (pl.ph[i].kind != kinds[i] || pl.ph[i].bytes != (bytes ? bytes[i] : b))
            fail_msg("line %d: %u ranks %llu B: phase %u is %u (%llu B), want %u", line, P,
                     (unsigned long long)b, i, pl.ph[i].kind,
                     (unsigned long long)pl.ph[i].bytes, kinds[i]);
}
#define PLAN1(alg, P, b, k) plan_is(alg, P, b, 1, (const unsigned[]){k}, NULL, __LINE__)
#define PLAN2(alg, P, b, k1, k2) plan_is(alg, P, b, 2, (const unsigned[]){k1, k2}, NULL, __LINE__)

static void test_ompi_selector_plans(void **state)
{
    (void)state;
    const unsigned O = OP_MODEL_ALG_OMPI;
    PLAN1(O, 4, 64, MDL_PH_RD);
    PLAN1(O, 4, 16384, MDL_PH_RAB);
    PLAN1(O, 16, 64, MDL_PH_RD);
    PLAN1(O, 16, 16384, MDL_PH_RAB);
    PLAN1(O, 32, 4096, MDL_PH_RAB);
    PLAN1(O, 64, 16384, MDL_PH_RD); /* 64-127 ranks: doubling up to 256 KiB */
    PLAN1(O, 64, 1 << 20, MDL_PH_RAB);
    PLAN1(O, 128, 131072, MDL_PH_RD);
    PLAN1(O, 512, 4096, MDL_PH_RD);
    PLAN1(O, 512, 16384, MDL_PH_RAB);
    PLAN1(O, 4096, 16384, MDL_PH_RD);
    PLAN1(O, 4096, 65536, MDL_PH_RAB);
    /* the ring with fewer elements than ranks: Open MPI's fallback */
    PLAN1(O, 2, 4, MDL_PH_RD);
    PLAN1(O, 4, 8, MDL_PH_RD);
    PLAN1(O, 32, 64, MDL_PH_RD);
    PLAN1(O, 64, 64, MDL_PH_RD);
    PLAN1(O, 4096, 8192, MDL_PH_RD);
    /* 128 ranks up, small: reduce + broadcast by the bcast rules */
    PLAN2(O, 128, 1, MDL_PH_REDUCE_BINOMIAL, MDL_PH_BCAST_BINOMIAL);
    PLAN2(O, 128, 4, MDL_PH_REDUCE_BINOMIAL, MDL_PH_BCAST_BINARY);
    PLAN2(O, 128, 20000, MDL_PH_REDUCE_BINOMIAL, MDL_PH_BCAST_CHAIN);
    PLAN2(O, 128, 40000, MDL_PH_REDUCE_BINOMIAL, MDL_PH_BCAST_BINARY);
    PLAN2(O, 128, 100000, MDL_PH_REDUCE_BINOMIAL, MDL_PH_BCAST_KNOMIAL);
    PLAN2(O, 512, 1024, MDL_PH_REDUCE_BINOMIAL, MDL_PH_BCAST_KNOMIAL);
    PLAN2(O, 32768, 4, MDL_PH_REDUCE_BINOMIAL, MDL_PH_BCAST_KNOMIAL);
    /* SMPI's segments: the binomial reduce's 1 KiB from 2 KiB up while the
     * ranks outnumber 0.6016 x KiB + 1.35, the NTS broadcasts' 8 KiB */
    static const struct {
        unsigned P;
        uint64_t b, reduce_seg, bcast_seg;
    } segs[] = {{128, 1024, 0, 8192},   {128, 2048, 1024, 8192},  {128, 20000, 1024, 8192},
                {128, 65536, 1024, 0},  {256, 2048, 1024, 0},     {512, 1024, 0, 0}};
    for (size_t i = 0; i < sizeof(segs) / sizeof(segs[0]); i++) {
        struct mdl_plan pl;
        mdl_host_plan(O, segs[i].P, segs[i].b, &pl);
        assert_int_equal(pl.n, 2);
        assert_int_equal(pl.ph[0].seg, segs[i].reduce_seg);
        assert_int_equal(pl.ph[1].seg, segs[i].bcast_seg);
    }
    /* the ring on whole elements a rank, the remainder by the selector */
    plan_is(O, 3, 65540, 2, (const unsigned[]){MDL_PH_RING, MDL_PH_RD},
            (const uint64_t[]){65532, 8}, __LINE__);
    PLAN1(O, 4, 65536, MDL_PH_RAB);
    PLAN1(O, 2, 131072, MDL_PH_RING);
    /* the classic rule; MPICH's (two-level: doubling between the leaders) */
    unsigned alg;
    assert_int_equal(op_model_alg_parse("ompi-classic", &alg), OP_OK);
    assert_int_equal(alg, OP_MODEL_ALG_OMPI_CLASSIC);
    PLAN1(alg, 64, 4096, MDL_PH_RD);
    PLAN1(alg, 64, 16384, MDL_PH_RING);
    PLAN1(OP_MODEL_ALG_MPICH, 64, 4, MDL_PH_RD);
    PLAN1(OP_MODEL_ALG_MPICH, 64, 1 << 20, MDL_PH_RD);
}

/* SMPI's `ompi` at 128 and 256 ranks, 4 B: a binomial reduce to rank 0
 * (each step reducing one message), then a binary tree (128: 7 levels, a
 * parent sending to two children at once through its link but for the last
 * level's one) or 4-nomial (256) broadcast; one rack. */
static void test_ompi_reduce_then_broadcast(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    assert_int_equal(op_model_preset("25G", &p), OP_OK);
    p.rack_nodes = 128;
    uint64_t b = 4;
    double step = p.host_msg_s + p.nic_msg_s + 2 * mdl_host_link_lat(&p) +
                  (double)(b + MDL_HDR_BYTES) / p.link_bw;
    struct op_model_scenario sc = {.mode = OP_MODEL_HOST, .alg = OP_MODEL_ALG_OMPI, .bytes = b};
    double wire1 = (double)(b + MDL_HDR_BYTES) / p.link_bw;
    NEAR(sim1(&p, 128, 1, sc, NULL),
         14 * step + 7 * (double)b * p.host_byte_s + 6 * (p.nic_msg_s + wire1));
    /* 256 ranks: 8 reduce steps, then a 4-nomial broadcast of 4 levels, a
     * parent sending to 3 children at once through its link */
    p.rack_nodes = 256;
    double wire = (double)(b + MDL_HDR_BYTES) / p.link_bw;
    double level = p.host_msg_s + 3 * p.nic_msg_s + 2 * mdl_host_link_lat(&p) + 3 * wire;
    NEAR(sim1(&p, 256, 1, sc, NULL), 8 * (step + (double)b * p.host_byte_s) + 4 * level);
    /* 64 ranks: recursive doubling, 6 steps */
    NEAR(sim1(&p, 64, 1, sc, NULL), 6 * (step + (double)b * p.host_byte_s));
}

static void test_two_levels_add_spine_hops(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    costly_switch(&p);
    p.rack_nodes = 4;
    p.spine_bw = p.link_bw * 4;
    uint64_t bytes = 64;
    double pkt = (double)(bytes + MDL_HDR_BYTES);
    double sw = p.sw_chunk_s + bytes * p.sw_byte_s;
    /* 3 racks of 4: the TOR takes 4 children, the SPINE 3 TORs */
    double want = op_model_one_switch_closed(&p, 4, bytes) + 2 * (p.wire_lat + p.switch_lat) +
                  2 * pkt / p.spine_bw + 3 * sw;
    struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = bytes};
    NEAR(sim1(&p, 12, 1, sc, NULL), want);
}

/* A namespace topology (offpath topo): the processes share 2 cores, the
 * frames cross rate-limited links through a switch process on the path
 * that spends fwd_frame_s on each. Every other cost zero but a leader's
 * packet and the host's message. */
static void topology(struct op_model_platform *p)
{
    assert_int_equal(op_model_preset("here", p), OP_OK);
    p->rack_nodes = 4;
    p->link_bw = 125e6;
    p->spine_bw = 500e6;
    p->wire_lat = 3e-6;
    p->fwd_frame_s = 5e-6;
    p->frame_data = 1448;
    p->max_data = 1408;
    p->sw_chunk_s = p->sw_byte_s = p->sw_wake_s = p->wake_s = p->ctx_s = p->runq_s = 0;
    p->crowd_f = p->host_crowd_f = p->check_byte_s = p->leader_byte_s = p->host_wake_s = 0;
    p->leader_pkt_s = 2e-6;
    p->host_msg_s = 7e-6;
    p->host_byte_s = 1e-9;
    p->host_hot_bytes = 0; /* the MPI's TCP: its own costs */
}

/* INC under one TOR: the sum of the hops, the switch's work being a frame
 * cost for each child's chunk. */
static void test_topology_inc_is_sum_of_hops(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    topology(&p);
    struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = 64};
    NEAR(sim1(&p, 2, 1, sc, NULL), op_model_one_switch_closed(&p, 2, 64) + 2 * p.fwd_frame_s);
}

/* On this machine's loopback the INC datagrams' bytes are the CPU copies
 * at their ends (leader_pkt_s, sw_chunk_s: calibrate fits them on the CPU
 * spent), not a wire's time as well: the loopback's bandwidth does not
 * move a call, a leader's per-byte cost does. */
static void test_loopback_inc_has_no_wire_time(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    assert_int_equal(op_model_preset("here", &p), OP_OK);
    struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = 65536};
    double fast = sim1(&p, 2, 1, sc, NULL);
    p.link_bw = 1e6;
    NEAR(sim1(&p, 2, 1, sc, NULL), fast);
    p.leader_byte_s *= 4;
    assert_true(sim1(&p, 2, 1, sc, NULL) > fast);
}

/* The host path's bytes on this machine's loopback are the CPUs' copies at
 * either end, on the cores every rank shares, not a link's time: with only
 * the per-byte cost, a ring of P ranks (2(P-1) steps of B/P bytes, each
 * rank sending and taking one a step) takes 2 x 2(P-1) x B x host_byte_s
 * over the 2 cores, whatever the loopback's bandwidth; at 8 ranks past the
 * 8 steps the model simulates, the rest at the same rate (the allgather
 * half seals and checks as many bytes as the reduce-scatter half). */
static void test_loopback_host_bytes_share_the_cores(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    assert_int_equal(op_model_preset("here", &p), OP_OK);
    p.host_msg_s = p.leader_pkt_s = p.host_wake_s = p.wire_lat = p.host_crowd_f = 0;
    p.crowd_f = 0.5; /* the INC processes': none of the host path's */
    p.host_hot_bytes = 0;
    p.host_byte_s = 1e-9;
    struct op_model_scenario sc = {.mode = OP_MODEL_HOST, .alg = OP_MODEL_ALG_RING,
                                   .bytes = 1048576};
    for (unsigned ranks = 2; ranks <= 8; ranks *= 2) {
        double want = 2.0 * 2 * (ranks - 1) * (double)sc.bytes * p.host_byte_s / p.shared_cores;
        NEAR(sim1(&p, ranks, 1, sc, NULL), want);
        /* more ranks than cores: every byte host_crowd_f more, 2 ranks none */
        struct op_model_platform crowded = p;
        crowded.host_crowd_f = 0.25;
        NEAR(sim1(&crowded, ranks, 1, sc, NULL), want * (ranks > p.shared_cores ? 1.25 : 1));
        struct op_model_platform slow = p;
        slow.link_bw = 1e6;
        NEAR(sim1(&slow, ranks, 1, sc, NULL), want);
    }
}

/* Leaders that poll from a call's start (spin_s, src/inc's spin_ns) take
 * a result that comes while they poll without a wake-up, and their polling
 * is CPU: with only the leaders' wake-up costing, a call of one chunk
 * takes wake_s less than when they sleep at once, and its CPU is the two
 * leaders' polls; a poll that ends before the result costs its length and
 * the wake-up too. */
static void test_spinning_leaders_skip_the_wakeup(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    only_wakeups(&p, 10e-6, 0);
    struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = 4};
    struct op_model_result sleeps, polls, partly;
    p.spin_s = 0;
    sim1(&p, 2, 1, sc, &sleeps);
    p.spin_s = 1;
    sim1(&p, 2, 1, sc, &polls);
    p.spin_s = polls.latency_s / 2;
    sim1(&p, 2, 1, sc, &partly);
    NEAR(sleeps.latency_s, op_model_one_switch_closed(&p, 2, 4) + p.wake_s);
    NEAR(sleeps.cpu_s, 2 * p.wake_s);
    NEAR(polls.latency_s, sleeps.latency_s - p.wake_s);
    NEAR(polls.cpu_s, 2 * polls.latency_s);
    NEAR(partly.latency_s, sleeps.latency_s);
    NEAR(partly.cpu_s, 2 * p.wake_s + 2 * p.spin_s);
}

/* A polling leader yields the core between polls: on crowded cores (8
 * leaders and a switch on 2) it takes its result at its turn and displaces
 * no one, where a leader that slept pays ctx_s on its wake-up. With only
 * ctx_s costing, a call of one chunk whose leaders poll through it costs
 * the switch's one crowded wake-up; sleeping leaders add theirs. */
static void test_polled_results_displace_no_one(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    only_wakeups(&p, 0, 0);
    p.ctx_s = 5e-6;
    struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = 4};
    struct op_model_result polls, sleeps;
    p.spin_s = 1;
    sim1(&p, 8, 1, sc, &polls);
    p.spin_s = 0;
    sim1(&p, 8, 1, sc, &sleeps);
    NEAR(polls.latency_s, op_model_one_switch_closed(&p, 8, 4) + p.ctx_s);
    NEAR(polls.cpu_s - polls.switch_cpu_s, 8 * polls.latency_s); /* their polls alone */
    NEAR(polls.switch_cpu_s, p.ctx_s);
    /* the results wake the 8 at once: all but the first 2 find the cores full */
    NEAR(sleeps.cpu_s - sleeps.switch_cpu_s, 6 * p.ctx_s);
}

/* A frame that wakes its receiver too late (late_loss) is recovered by the
 * leaders' timer, as a late result is: a call of one chunk takes the
 * closed form when no wake-up came late, and more than it and than a
 * timeout (src/inc's floor, no round trip being 3 x longer) with a
 * retransmission when one did; the draws decide which, the same seed the
 * same way. */
static void test_topology_late_wakeups_cost_timeouts(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    topology(&p);
    p.late_loss = 0.2;
    double clean = op_model_one_switch_closed(&p, 2, 64) + 2 * p.fwd_frame_s;
    unsigned on_time = 0, late = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = 64, .seed = seed};
        struct op_model_result r, again;
        double t = sim1(&p, 2, 1, sc, &r);
        if (r.retransmissions == 0) {
            NEAR(t, clean);
            on_time++;
        } else {
            assert_true(t > p.rto_min_s && t > clean);
            late++;
        }
        sim1(&p, 2, 1, sc, &again);
        assert_true(again.latency_s == t);
    }
    assert_true(on_time > 0 && late > 0);
}

/* The MPI's TCP between two hosts of a rack (recursive doubling: one
 * exchange): the message's CPU at each end, and the TOR's work on its
 * frames and their ACKs (one every second frame) overlapping the link's
 * time: it arrives after the longer of the two (the last frame goes
 * after the switch's work on it). */
static void test_topology_tcp_overlaps_frames_and_link(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    topology(&p);
    for (int fast = 0; fast < 2; fast++) {
        p.fwd_frame_s = fast ? 1e-6 : 20e-6; /* the link's time a frame: 12.1 us */
        uint64_t bytes = 14480, frames = 10;
        double xfer = p.leader_pkt_s + (double)bytes * p.host_byte_s;
        double fwd = (double)(frames + 5) * p.fwd_frame_s;
        double wire = (double)(bytes + frames * 66) / p.link_bw;
        double last = (1448.0 + 66) / p.link_bw; /* leaves after the switch's work */
        double want = p.host_msg_s + xfer + mdl_host_link_lat(&p) * 2 + fmax(fwd + last, wire) +
                      xfer;
        struct op_model_scenario sc = {.mode = OP_MODEL_HOST, .alg = OP_MODEL_ALG_RD,
                                       .bytes = bytes};
        NEAR(sim1(&p, 2, 1, sc, NULL), want);
    }
}

/* This machine's host path: a call whose vector stays in the caches costs
 * host_hot_f of the per-byte cost: 2 nodes exchange once (recursive
 * doubling), each sending and taking the whole vector on its own core. */
static void test_host_hot_vectors_cost_less_a_byte(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p, cold;
    assert_int_equal(op_model_preset("here", &p), OP_OK);
    cold = p;
    cold.host_hot_bytes = 0;
    for (uint64_t bytes = 1024; bytes <= 16384; bytes *= 16) {
        struct op_model_scenario sc = {.mode = OP_MODEL_HOST, .alg = OP_MODEL_ALG_OFFPATH,
                                       .bytes = bytes};
        double hot_t = sim1(&p, 2, 1, sc, NULL), cold_t = sim1(&cold, 2, 1, sc, NULL);
        NEAR(cold_t - hot_t, 2 * (double)bytes * p.host_byte_s * (1 - p.host_hot_f));
    }
    /* past the threshold nothing changes */
    struct op_model_scenario big = {.mode = OP_MODEL_HOST, .alg = OP_MODEL_ALG_OFFPATH,
                                    .bytes = 4 * (uint64_t)p.host_hot_bytes};
    assert_true(sim1(&p, 2, 1, big, NULL) == sim1(&cold, 2, 1, big, NULL));
}

static void test_window_streams_large_messages(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    costly_switch(&p);
    p.window = 8;
    struct op_model_result r;
    struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = 256 * 64};
    double t64 = sim1(&p, 4, 1, sc, &r);
    assert_int_equal(r.chunks, 64);
    assert_int_equal(r.sim_steps, 16);
    assert_int_equal(r.slots, 8);
    assert_int_equal(r.slot_bytes, 2 * 8 * 256);
    /* steady state: each further chunk costs the same */
    sc.bytes = 256 * 128;
    double t128 = sim1(&p, 4, 1, sc, NULL);
    sc.bytes = 256 * 192;
    double t192 = sim1(&p, 4, 1, sc, NULL);
    NEAR(t192 - t128, t128 - t64);
    /* the switch serves 4 children a chunk: the rate is at least its work */
    assert_true((t128 - t64) / 64 >= 0.999 * 4 * (p.sw_chunk_s + 256 * p.sw_byte_s));
}

static void test_ring_closed_form(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    assert_int_equal(op_model_preset("100G", &p), OP_OK);
    p.host_msg_s = p.nic_msg_s = p.host_byte_s = 0;
    double step_lat = 2 * mdl_host_link_lat(&p) + MDL_HDR_BYTES / p.link_bw;
    /* 4 nodes: every step simulated; 16: 8 steps, the rest extrapolated */
    for (unsigned n = 4; n <= 16; n *= 4) {
        uint64_t bytes = 1 << 20;
        struct op_model_scenario sc = {.mode = OP_MODEL_HOST, .alg = OP_MODEL_ALG_RING,
                                       .bytes = bytes};
        NEAR(sim1(&p, n, 1, sc, NULL), op_model_ring_closed(n, bytes, p.link_bw, step_lat));
    }
    NEAR(op_model_ring_closed(4, 1000, 1000, 1), 2.0 * 3 / 4 + 6);
}

static void test_recursive_doubling(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    assert_int_equal(op_model_preset("25G", &p), OP_OK);
    uint64_t bytes = 64;
    double step = p.host_msg_s + p.nic_msg_s + 2 * mdl_host_link_lat(&p) +
                  (double)(bytes + MDL_HDR_BYTES) / p.link_bw + bytes * p.host_byte_s;
    struct op_model_scenario sc = {.mode = OP_MODEL_HOST, .alg = OP_MODEL_ALG_RD, .bytes = bytes};
    NEAR(sim1(&p, 8, 1, sc, NULL), 3 * step);
    /* 12 nodes: 4 fold into their partners first and get the result last;
     * nodes 8-11 run ahead and their third-step messages are there before
     * the folded ranks get to step 3, sharing a link with step 2's (at most
     * one more wire time) */
    double fold = p.host_msg_s + p.nic_msg_s + 2 * mdl_host_link_lat(&p) +
                  (double)(bytes + MDL_HDR_BYTES) / p.link_bw;
    double want = fold + bytes * p.host_byte_s + 2 * step + p.host_msg_s + p.nic_msg_s +
                  bytes * p.host_byte_s + fold;
    double got = sim1(&p, 12, 1, sc, NULL);
    assert_true(got >= want - 1e-12 && got <= want + (double)(bytes + MDL_HDR_BYTES) / p.link_bw + 1e-12);
    /* hierarchical: the node's tree around the same exchange */
    sc.alg = OP_MODEL_ALG_HIER;
    NEAR(sim1(&p, 8, 16, sc, NULL), 3 * step + op_model_intra(&p, 16, true, bytes));
    /* SMPI's mpich: the same two levels, doubling between leaders at any size */
    sc.alg = OP_MODEL_ALG_MPICH;
    NEAR(sim1(&p, 8, 16, sc, NULL), 3 * step + op_model_intra(&p, 16, true, bytes));
}

static void test_flat_ranks_share_the_nic(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    assert_int_equal(op_model_preset("25G", &p), OP_OK);
    struct op_model_scenario sc = {.mode = OP_MODEL_HOST, .alg = OP_MODEL_ALG_RD, .bytes = 256};
    /* 4 nodes x 8 ranks: 3 steps inside the node, 2 between nodes with 8
     * messages each through one NIC */
    double inter = p.host_msg_s + 8 * p.nic_msg_s + 2 * mdl_host_link_lat(&p) +
                   8.0 * (256 + MDL_HDR_BYTES) / p.link_bw + 256 * p.host_byte_s;
    double intra = 2 * (p.shm_level_s + 256 * p.shm_byte_s) + p.shm_xsock_s + 256 * p.shm_byte_s;
    NEAR(sim1(&p, 4, 8, sc, NULL), intra + 2 * inter);
}

static void test_socket_mode(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    costly_switch(&p);
    struct op_model_scenario sc = {.mode = OP_MODEL_SOCKET, .bytes = 64};
    struct op_model_result r;
    double t = sim1(&p, 4, 8, sc, &r);
    /* 8 leaders (two a node, sharing its link both ways) and 4 ranks each,
     * no socket crossing: Node mode with 8 nodes of 4 ranks, plus the
     * second packet on each shared link */
    assert_true(r.intra_s == op_model_intra(&p, 4, false, 64));
    sc.mode = OP_MODEL_NODE;
    struct op_model_platform q = p;
    q.sockets = 1;
    NEAR(t, sim1(&q, 8, 4, sc, NULL) + 2 * (64.0 + MDL_HDR_BYTES) / p.link_bw);
    /* above socket_max_bytes Socket mode runs as Node mode */
    sc.bytes = p.socket_max_bytes * 2;
    double node = sim1(&p, 4, 8, sc, NULL);
    sc.mode = OP_MODEL_SOCKET;
    NEAR(sim1(&p, 4, 8, sc, NULL), node);
}

/* A rack of 4 with a window of 8 slots, and a call there without loss. */
static double lossless_rack(struct op_model_platform *p, unsigned nodes, uint64_t bytes)
{
    costly_switch(p);
    p->rack_nodes = 4;
    p->window = 8;
    return sim1(p, nodes, 1, (struct op_model_scenario){.mode = OP_MODEL_NODE, .bytes = bytes},
                NULL);
}

static void test_loss_recovers(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = 256 * 16, .loss = 0.05,
                                   .seed = 3};
    struct op_model_result a, b;
    double clean = lossless_rack(&p, 8, 256 * 16);
    double lossy = sim1(&p, 8, 1, sc, &a);
    assert_true(a.retransmissions > 0);
    assert_true(lossy > clean);
    sim1(&p, 8, 1, sc, &b);
    assert_true(a.latency_s == b.latency_s); /* the same draws, the same run */
    assert_int_equal(a.retransmissions, b.retransmissions);
    assert_int_equal(a.fast_retransmits, b.fast_retransmits);
    /* heavier loss on a short call: every draw ends (a timer check that a
     * double's rounding made early once re-armed itself forever) */
    for (uint64_t seed = 1; seed <= 8; seed++) {
        sc = (struct op_model_scenario){.mode = OP_MODEL_NODE, .bytes = 4096, .loss = 0.05,
                                        .seed = seed};
        assert_true(sim1(&p, 4, 8, sc, &a) > 0 && a.retransmissions > 0);
    }
}

/* src/inc's RACK: a chunk lost inside a stream is re-sent as soon as a
 * later-sent chunk's result comes, no timeout waited; only a loss with no
 * later result to show it (the tail) waits for the timer. */
static void test_loss_inside_stream_costs_no_timeout(void **state)
{
    (void)state;
    if (skip_without_simgrid())
        return;
    struct op_model_platform p;
    uint64_t bytes = 256 * 64; /* 64 chunks */
    double clean = lossless_rack(&p, 4, bytes);
    unsigned by_order = 0, timed = 0;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        struct op_model_scenario sc = {.mode = OP_MODEL_NODE, .bytes = bytes, .loss = 0.01,
                                       .seed = seed};
        struct op_model_result r;
        double t = sim1(&p, 4, 1, sc, &r);
        assert_true(r.fast_retransmits <= r.retransmissions);
        if (r.retransmissions > 0 && r.fast_retransmits == r.retransmissions) {
            assert_true(t > clean && t < clean + p.rto_min_s);
            by_order++;
        } else if (r.fast_retransmits < r.retransmissions) {
            /* a timeout after a result, then the chunk's own round trip */
            assert_true(t > p.rto_min_s + op_model_one_switch_closed(&p, 4, 256));
            timed++;
        }
    }
    assert_true(by_order > 0 && timed > 0);
}

static struct mdl_runs runs_of(const double *v, const double *q, unsigned n)
{
    struct mdl_runs r = {.n = 0};
    for (unsigned i = 0; i < n; i++)
        mdl_runs_add(&r, v[i], q[i]);
    return r;
}

/* validate's figure of a cell: the quiet runs (others took at most a tenth
 * of the cores), else the least disturbed half; their mean less the lowest
 * and highest from 5 on, else their median; unsettled when the runs it
 * averages reach beyond the tolerance either side of it. */
static void test_measured_figure_from_quiet_runs(void **state)
{
    (void)state;
    double us;
    struct mdl_spread sp;
    const double calm[7] = {0, 0.02, 0.05, 0.1, 0, 0, 0.01};
    struct mdl_runs r = runs_of((const double[]){14, 10, 11, 12, 13, 30, 9}, calm, 7);
    mdl_runs_figure(&r, &us, &sp, false);
    NEAR(us, (10 + 11 + 12 + 13 + 14) / 5.0);
    assert_true(sp.lo == 10 && sp.hi == 14 && sp.kept == 7 && sp.runs == 7 && sp.quiet == 7);
    mdl_runs_figure(&r, &us, &sp, true);
    assert_true(us == 12);
    assert_false(mdl_runs_unsettled(&r, 0.25));
    /* three quiet runs: only they count, whatever the disturbed ones gave */
    const double some[7] = {0.05, 0.6, 0.4, 0.08, 0.3, 0.2, 0.0};
    r = runs_of((const double[]){20, 80, 60, 22, 50, 40, 21}, some, 7);
    mdl_runs_figure(&r, &us, &sp, false);
    assert_true(us == 21 && sp.lo == 20 && sp.hi == 22 && sp.kept == 3 && sp.quiet == 3);
    /* none quiet: the least disturbed half (4 of 7) */
    const double busy[7] = {0.5, 0.9, 0.3, 0.2, 0.8, 0.4, 0.7};
    r = runs_of((const double[]){11, 99, 13, 12, 98, 14, 97}, busy, 7);
    mdl_runs_figure(&r, &us, &sp, false);
    assert_true(sp.kept == 4 && sp.quiet == 0 && sp.lo == 11 && sp.hi == 14 && us == 13);
    /* two modes in the middle runs: more than 25 % either side */
    r = runs_of((const double[]){10, 10, 10, 20, 20, 20, 20}, calm, 7);
    mdl_runs_figure(&r, &us, &sp, false);
    NEAR(us, 16);
    assert_true(mdl_runs_unsettled(&r, 0.25));
    assert_false(mdl_runs_unsettled(&r, 0.5));
}

static void test_invalid(void **state)
{
    (void)state;
    struct op_model_platform p;
    struct op_model_result r;
    assert_int_equal(op_model_preset("10M", &p), OP_ERR_INVAL);
    assert_int_equal(op_model_preset("25G", &p), OP_OK);
    struct op_model_scenario sc = {.mode = OP_MODEL_MODE_COUNT_, .bytes = 4};
    assert_int_equal(op_model_simulate(&p, 4, 1, &sc, 1, &r), OP_ERR_INVAL);
    sc.mode = OP_MODEL_NODE;
    sc.loss = 1.0;
    assert_int_equal(op_model_simulate(&p, 4, 1, &sc, 1, &r), OP_ERR_INVAL);
    sc.loss = 0;
    assert_int_equal(op_model_simulate(&p, 0, 1, &sc, 1, &r), OP_ERR_INVAL);
    p.link_bw = 0;
    assert_int_equal(op_model_simulate(&p, 4, 1, &sc, 1, &r), OP_ERR_INVAL);
}

static void test_closed_forms(void **state)
{
    (void)state;
    struct op_model_platform p;
    assert_int_equal(op_model_preset("seed", &p), OP_OK);
    NEAR(op_model_intra(&p, 1, true, 64), 0);
    NEAR(op_model_intra(&p, 8, false, 0), 6 * p.shm_level_s);
    NEAR(op_model_intra(&p, 8, true, 0), 4 * p.shm_level_s + 2 * p.shm_xsock_s);
    NEAR(op_model_intra(&p, 5, false, 10), 6 * (p.shm_level_s + 10 * p.shm_byte_s));
    assert_int_equal(op_model_slots(&p, 4), 1);
    p.window = 32;
    p.max_data = 1024;
    assert_int_equal(op_model_slots(&p, 1024 * 5 + 1), 6);
    assert_int_equal(op_model_slots(&p, 1 << 26), 32);
}

static void parse_fails(const char *text, const char *why_has)
{
    struct op_model_platform p;
    char why[128] = "";
    assert_int_not_equal(op_model_platform_parse(text, &p, why, sizeof(why)), OP_OK);
    if (strstr(why, why_has) == NULL)
        fail_msg("'%s': reason '%s' lacks '%s'", text, why, why_has);
}

static void test_platform_file(void **state)
{
    (void)state;
    struct op_model_platform p, q;
    char why[128];
    assert_int_equal(op_model_platform_parse("preset seed\n# comment\nwindow 8 # slots\n"
                                             "wire_lat 2e-6\n\nrack_nodes 4\n", &p, why, sizeof(why)),
                     OP_OK);
    assert_int_equal(op_model_preset("seed", &q), OP_OK);
    assert_int_equal(p.window, 8);
    assert_int_equal(p.rack_nodes, 4);
    assert_true(p.wire_lat == 2e-6);
    assert_true(p.shm_level_s == q.shm_level_s);
    /* what print writes, parse reads back the same */
    char buf[4096];
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    op_model_platform_print(&p, f);
    fclose(f);
    assert_int_equal(op_model_platform_parse(buf, &q, why, sizeof(why)), OP_OK);
    assert_true(q.wire_lat == p.wire_lat && q.window == p.window && q.sw_byte_s == p.sw_byte_s);
    parse_fails("colour blue\n", "line 1: unknown key");
    parse_fails("window 8\npreset seed\n", "line 2: preset must come first");
    parse_fails("preset 10M\n", "unknown preset");
    parse_fails("wire_lat\n", "a key without a value");
    parse_fails("wire_lat 1 2\n", "more than one value");
    parse_fails("wire_lat -1\n", "bad value");
    parse_fails("wire_lat 1x\n", "bad value");
    parse_fails("wire_lat nan\n", "bad value");
    parse_fails("window 70000\n", "bad value");
    parse_fails("sockets -2\n", "bad value");
    parse_fails("link_bw 0\n", "zero");
    char longline[400];
    memset(longline, 'a', sizeof(longline) - 1);
    longline[sizeof(longline) - 1] = '\0';
    parse_fails(longline, "too long");
}

static void seed_fails(const char *text, const char *why_has)
{
    struct mdl_cell c[4];
    char why[128] = "";
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_int_equal(mdl_seed_parse(f, c, 4, why, sizeof(why)), 0);
    fclose(f);
    if (strstr(why, why_has) == NULL)
        fail_msg("reason '%s' lacks '%s'", why, why_has);
}

static void test_seed_tables(void **state)
{
    (void)state;
    const char *ok = "# source\nnodes,bytes,mode,ppn,us\n4,256,socket,64,16.5\n9,4,host,8,9.9\n";
    struct mdl_cell c[4];
    char why[128];
    FILE *f = fmemopen((void *)ok, strlen(ok), "r");
    assert_int_equal(mdl_seed_parse(f, c, 4, why, sizeof(why)), 2);
    fclose(f);
    assert_int_equal(c[0].nodes, 4);
    assert_int_equal(c[0].bytes, 256);
    assert_int_equal(c[0].mode, OP_MODEL_SOCKET);
    assert_int_equal(c[0].ppn, 64);
    assert_true(c[0].meas_us == 16.5);
    assert_int_equal(c[1].mode, OP_MODEL_HOST);
    seed_fails("4,256,socket,64,16.5\n", "line 1: header");
    seed_fails("nodes,bytes,mode,ppn,us\n4,256,sock,64,16.5\n", "line 2: mode");
    seed_fails("nodes,bytes,mode,ppn,us\n4,256,node,64\n", "line 2: expected");
    seed_fails("nodes,bytes,mode,ppn,us\n4,256,node,64,1x\n", "line 2: expected");
    seed_fails("nodes,bytes,mode,ppn,us\n1,256,node,64,1\n", "out of range");
    seed_fails("nodes,bytes,mode,ppn,us\n4,256,node,64,-1\n", "out of range");
    seed_fails("nodes,bytes,mode,ppn,us\n", "no rows");
    seed_fails("nodes,bytes,mode,ppn,us\n4,4,node,8,1\n4,4,node,8,1\n4,4,node,8,1\n"
               "4,4,node,8,1\n4,4,node,8,1\n", "too many rows");
    /* the repository's copy: all 189 cells */
    struct mdl_cell all[256];
    f = fopen(OP_MODEL_TABLES, "r");
    assert_non_null(f);
    assert_int_equal(mdl_seed_parse(f, all, 256, why, sizeof(why)), 189);
    fclose(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_switch_is_sum_of_hops),
        cmocka_unit_test(test_cpu_is_sum_of_packet_costs),
        cmocka_unit_test(test_shared_cores_batch_wakeups),
        cmocka_unit_test(test_shared_cores_wake_host_ranks),
        cmocka_unit_test(test_shared_cores_checks_between_calls),
        cmocka_unit_test(test_osu_rows_check_nothing),
        cmocka_unit_test(test_offpath_host_rule),
        cmocka_unit_test(test_ompi_selector_plans),
        cmocka_unit_test(test_ompi_reduce_then_broadcast),
        cmocka_unit_test(test_two_levels_add_spine_hops),
        cmocka_unit_test(test_window_streams_large_messages),
        cmocka_unit_test(test_ring_closed_form),
        cmocka_unit_test(test_recursive_doubling),
        cmocka_unit_test(test_flat_ranks_share_the_nic),
        cmocka_unit_test(test_socket_mode),
        cmocka_unit_test(test_loss_recovers),
        cmocka_unit_test(test_loss_inside_stream_costs_no_timeout),
        cmocka_unit_test(test_measured_figure_from_quiet_runs),
        cmocka_unit_test(test_host_hot_vectors_cost_less_a_byte),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_closed_forms),
        cmocka_unit_test(test_platform_file),
        cmocka_unit_test(test_seed_tables),
        cmocka_unit_test(test_topology_inc_is_sum_of_hops),
        cmocka_unit_test(test_topology_tcp_overlaps_frames_and_link),
        cmocka_unit_test(test_topology_late_wakeups_cost_timeouts),
        cmocka_unit_test(test_loopback_inc_has_no_wire_time),
        cmocka_unit_test(test_loopback_host_bytes_share_the_cores),
        cmocka_unit_test(test_spinning_leaders_skip_the_wakeup),
        cmocka_unit_test(test_polled_results_displace_no_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
