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

#include <unistd.h>

#include "../../src/agent/agent_proto.h"
#include "offpath/agent.h"
#include "offpath/wire.h"

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

static void setup_with(struct job *j, uint32_t ranks, uint32_t workers, size_t chunk,
                       bool progress)
{
    memset(j, 0, sizeof(*j));
    j->ranks = ranks;
    j->chunk = chunk;
    struct op_a2a_endpoint eps[MAX_RANKS];
    for (uint32_t r = 0; r < ranks; r++) {
        struct op_a2a_config c = {.ranks = ranks, .rank = r, .workers = workers,
                                  .ip = LOOPBACK, .chunk = chunk, .progress = progress};
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

static void setup(struct job *j, uint32_t ranks, uint32_t workers, size_t chunk)
{
    setup_with(j, ranks, workers, chunk, false);
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

/* cfg.progress: every worker a thread, so one thread can start every
 * rank's call, go on with something else, see them done and end them. */
static void test_started_calls_move_on_their_own(void **state)
{
    (void)state;
    for (uint32_t workers = 1; workers <= 2; workers++) {
        struct job j;
        setup_with(&j, 4, workers, 2000, true);
        for (uint32_t call = 0; call < 3; call++) {
            fill(&j, call);
            for (uint32_t r = 0; r < 4; r++)
                op_a2a_start(j.a[r], op_now_ns() + 10 * OP_NS_PER_S);
            uint64_t t0 = op_now_ns();
            uint32_t done = 0;
            while (done < 4 && op_now_ns() - t0 < 10 * OP_NS_PER_S) {
                done = 0;
                for (uint32_t r = 0; r < 4; r++)
                    done += op_a2a_done(j.a[r]);
            }
            assert_int_equal(done, 4);
            for (uint32_t r = 0; r < 4; r++)
                j.st[r] = op_a2a_wait(j.a[r]);
            check(&j, call);
        }
        teardown(&j);
    }
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

/* ---- the offloaded Allreduce's daemon engine (op_ar) */

#define AR_MAX_DAEMONS 4
#define AR_COUNT 5

/* A cluster of daemons in this process: what one emits is delivered to
 * the others at once (partials) or recorded (results, per daemon). */
struct ar_net {
    struct op_ar *d[AR_MAX_DAEMONS];
    uint32_t daemons;
    int results[AR_MAX_DAEMONS];
    uint64_t last_id[AR_MAX_DAEMONS];
    float got[AR_MAX_DAEMONS][AR_COUNT];
    uint32_t holding; /* 1 + a daemon whose partials are held back, 0: none */
    struct op_ar_out held[8];
    float held_data[8][AR_COUNT];
    int n_held;
};

struct ar_who {
    struct ar_net *net;
    uint32_t self;
};

static void ar_emit(void *ctx, const struct op_ar_out *o)
{
    struct ar_who *w = ctx;
    struct ar_net *n = w->net;
    if (o->kind == OP_AR_RESULT) {
        n->results[w->self]++;
        n->last_id[w->self] = o->id;
        memcpy(n->got[w->self], o->data, o->bytes);
        return;
    }
    if (n->holding == w->self + 1) { /* delivered later, by the test */
        n->held[n->n_held] = *o;
        memcpy(n->held_data[n->n_held], o->data, o->bytes);
        n->held[n->n_held].data = n->held_data[n->n_held];
        n->n_held++;
        return;
    }
    for (uint32_t d = 0; d < n->daemons; d++)
        if (d != w->self)
            assert_int_equal(op_ar_peer(n->d[d], w->self, o->id, o->data, o->bytes), OP_OK);
}

static void ar_setup(struct ar_net *n, struct ar_who *who, uint32_t daemons, uint32_t clients,
                     uint32_t window)
{
    memset(n, 0, sizeof(*n));
    n->daemons = daemons;
    for (uint32_t d = 0; d < daemons; d++) {
        who[d] = (struct ar_who){n, d};
        struct op_ar_config c = {.daemons = daemons, .self = d, .clients = clients,
                                 .count = AR_COUNT, .type = OP_RED_FLOAT32, .op = OP_RED_SUM,
                                 .window = window};
        assert_int_equal(op_ar_create(&c, ar_emit, &who[d], &n->d[d]), OP_OK);
    }
}

static void ar_teardown(struct ar_net *n)
{
    for (uint32_t d = 0; d < n->daemons; d++)
        op_ar_destroy(n->d[d]);
}

/* Values whose float sum depends on the order: 1e8 and small ones. */
static float ar_value(uint32_t d, uint32_t c, uint64_t id, int i)
{
    return (d + c + id + (uint64_t)i) % 3 == 0 ? 1e8f : (float)(d * 7 + c * 3 + i) * 0.37f + 1;
}

/* The documented order: clients in order within a daemon, then daemons in order. */
static void ar_reference(uint32_t daemons, uint32_t clients, uint64_t id, float *out)
{
    for (int i = 0; i < AR_COUNT; i++) {
        float total = 0;
        for (uint32_t d = 0; d < daemons; d++) {
            float partial = ar_value(d, 0, id, i);
            for (uint32_t c = 1; c < clients; c++)
                partial += ar_value(d, c, id, i);
            total = d == 0 ? partial : total + partial;
        }
        out[i] = total;
    }
}

static void ar_submit(struct ar_net *n, uint32_t d, uint32_t c, uint64_t id, op_status_t want)
{
    float v[AR_COUNT];
    for (int i = 0; i < AR_COUNT; i++)
        v[i] = ar_value(d, c, id, i);
    assert_int_equal(op_ar_client(n->d[d], c, id, v, sizeof v), want);
}

/* 3 daemons x 2 clients, clients in scrambled orders, two windows' worth
 * of operations: every daemon's result equals the reference bit for bit. */
static void test_ar_results_in_the_documented_order(void **state)
{
    (void)state;
    struct ar_net n;
    struct ar_who who[AR_MAX_DAEMONS];
    ar_setup(&n, who, 3, 2, 4);
    for (uint64_t id = 0; id < 8; id++) {
        for (uint32_t k = 0; k < 6; k++) { /* daemon and client order varies with id */
            uint32_t d = (uint32_t)((k + id) % 3), c = (uint32_t)((k / 3 + id) % 2);
            ar_submit(&n, d, c, id, OP_OK);
        }
        float want[AR_COUNT];
        ar_reference(3, 2, id, want);
        for (uint32_t d = 0; d < 3; d++) {
            assert_int_equal(n.results[d], (int)id + 1);
            assert_int_equal(n.last_id[d], id);
            assert_memory_equal(n.got[d], want, sizeof want);
        }
    }
    for (uint32_t d = 0; d < 3; d++) {
        const uint64_t *c = op_ar_counters(n.d[d]);
        assert_int_equal(c[OP_AR_C_client_vectors], 16);
        assert_int_equal(c[OP_AR_C_peer_partials], 16);
        assert_int_equal(c[OP_AR_C_partials_sent], 8);
        assert_int_equal(c[OP_AR_C_results], 8);
        assert_int_equal(op_ar_done_below(n.d[d]), 8);
    }
    ar_teardown(&n);
}

/* A peer's partial before this daemon's clients, operations completing out
 * of order, the window's edge, late and repeated vectors. */
static void test_ar_window_and_bad_input(void **state)
{
    (void)state;
    struct ar_net n;
    struct ar_who who[AR_MAX_DAEMONS];
    ar_setup(&n, who, 2, 1, 2);
    n.holding = 1 + 0; /* daemon 0's partials wait */
    ar_submit(&n, 0, 0, 1, OP_OK);            /* op 1 before op 0 */
    ar_submit(&n, 0, 0, 2, OP_ERR_MALFORMED); /* beyond the window [0, 2) */
    ar_submit(&n, 0, 0, 1, OP_ERR_MALFORMED); /* a second vector for op 1 */
    ar_submit(&n, 1, 0, 1, OP_OK);            /* its partial completes op 1 at daemon 0 */
    assert_int_equal(n.results[0], 1);
    assert_int_equal(n.last_id[0], 1);
    assert_int_equal(n.results[1], 0); /* daemon 0's partial is held */
    assert_int_equal(op_ar_done_below(n.d[0]), 0); /* op 0 still open */
    ar_submit(&n, 0, 0, 1, OP_ERR_MALFORMED); /* op 1 is done: its slot is not reclaimed */
    ar_submit(&n, 0, 0, 3, OP_ERR_MALFORMED); /* op 3's slot is op 1's: beyond the window */
    ar_submit(&n, 1, 0, 0, OP_OK);            /* a peer's partial before this daemon's own */
    ar_submit(&n, 0, 0, 0, OP_OK);
    assert_int_equal(n.results[0], 2);
    assert_int_equal(op_ar_done_below(n.d[0]), 2);
    n.holding = 0;
    for (int i = 0; i < n.n_held; i++) /* daemon 0's partials reach daemon 1 late */
        assert_int_equal(op_ar_peer(n.d[1], 0, n.held[i].id, n.held[i].data, n.held[i].bytes),
                         OP_OK);
    assert_int_equal(n.results[1], 2);
    assert_int_equal(op_ar_done_below(n.d[1]), 2);
    float want[AR_COUNT];
    ar_reference(2, 1, 0, want);
    assert_memory_equal(n.got[0], want, sizeof want);
    assert_memory_equal(n.got[1], want, sizeof want);
    float v[AR_COUNT] = {0};
    assert_int_equal(op_ar_client(n.d[0], 1, 2, v, sizeof v), OP_ERR_INVAL); /* no client 1 */
    assert_int_equal(op_ar_client(n.d[0], 0, 2, v, sizeof v - 4), OP_ERR_MALFORMED);
    assert_int_equal(op_ar_peer(n.d[0], 0, 2, v, sizeof v), OP_ERR_INVAL); /* itself */
    assert_int_equal(op_ar_peer(n.d[0], 5, 2, v, sizeof v), OP_ERR_INVAL);
    const uint64_t *c0 = op_ar_counters(n.d[0]), *c1 = op_ar_counters(n.d[1]);
    assert_int_equal(c0[OP_AR_C_out_of_window], 3);
    assert_int_equal(c0[OP_AR_C_duplicate], 1);
    assert_int_equal(c0[OP_AR_C_bad_source], 3);
    assert_int_equal(c0[OP_AR_C_bad_size], 1);
    assert_int_equal(c1[OP_AR_C_out_of_window] + c1[OP_AR_C_duplicate], 0);
    assert_int_equal(c0[OP_AR_C_results] + c1[OP_AR_C_results], 4);
    struct op_ar_config bad = {.daemons = 2, .self = 2, .clients = 1, .count = 1, .window = 1};
    struct op_ar *x;
    assert_int_equal(op_ar_create(&bad, ar_emit, NULL, &x), OP_ERR_INVAL);
    ar_teardown(&n);
}

static void test_ar_handshake(void **state)
{
    (void)state;
    char mine[OP_AR_HANDSHAKE_MAX], why[200];
    op_ar_handshake_format(65535, "float", 128, 16, mine, sizeof mine);
    assert_string_equal(mine, "-s 65535 -d float -b 128 -i 16");
    assert_int_equal(op_ar_handshake_check(mine, "-s 65535 -d float -b 128 -i 16", why, sizeof why),
                     OP_OK);
    assert_int_equal(op_ar_handshake_check(mine, "-s 1024 -d float -b 128 -i 16", why, sizeof why),
                     OP_ERR_INVAL);
    assert_string_equal(why, "vector size (-s): 65535 here, 1024 there");
    assert_int_equal(op_ar_handshake_check(mine, "-s 65535 -d int -b 128 -i 16", why, sizeof why),
                     OP_ERR_INVAL);
    assert_string_equal(why, "datatype (-d): float here, int there");
    assert_int_equal(op_ar_handshake_check(mine, "-s 65535 -d float -b 128 -i 17", why, sizeof why),
                     OP_ERR_INVAL);
    assert_string_equal(why, "batches (-i): 16 here, 17 there");
    static const char *const bad[] = {
        "", "-s", "-s 1 -d float -b 1", "-s 1 -d float -b 1 -i 1 ", "-s 1 -d float -b 1 -i 1 -x 2",
        "-s 0 -d float -b 1 -i 1", "-s x -d float -b 1 -i 1", "-d float -s 1 -b 1 -i 1",
        "-s 1  -d float -b 1 -i 1", "-s 1 -d averyveryverylongtypename -b 1 -i 1",
        "-s 99999999999999999999 -d float -b 1 -i 1", "-s 65535 -d float -b 0128 -i 16",
        "-s +65535 -d float -b 128 -i 16",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(op_ar_handshake_check(mine, bad[i], why, sizeof why), OP_ERR_MALFORMED);
}

/* ---- the all-to-all daemon's faults: one daemon, two ranks a session */

struct fault_env {
    struct op_a2a_daemon_config d;
    struct op_chan_keypair clients;
    uint64_t counters[OP_A2A_D_COUNT_];
    op_status_t st;
};

static void *daemon_main(void *arg)
{
    struct fault_env *e = arg;
    e->st = op_a2a_daemon_run(&e->d, e->counters);
    return NULL;
}

static struct op_channel *raw_client(const struct fault_env *e)
{
    struct op_channel_config cc = {.addr = {.kind = OP_CHAN_TCP, .host = "127.0.0.1",
                                            .port = e->d.net.port},
                                   .local = e->clients, .max_msg = 4096,
                                   .timeout_ns = 3 * OP_NS_PER_S};
    memcpy(cc.peer_pub, e->d.net.key.pub, OP_CHAN_KEY_BYTES);
    struct op_channel *ch;
    char why[256];
    assert_int_equal(op_channel_open(&cc, &ch, why), OP_OK);
    return ch;
}

/* A greeting (rank of 2, 8-byte chunks); the welcome expected, or a
 * refusal whose reason holds `refused`. */
static struct op_channel *greeted(const struct fault_env *e, uint32_t rank, uint32_t ranks,
                                  const char *refused)
{
    struct op_channel *ch = raw_client(e);
    struct op_agent_a2a_hello h = {.rank = rank, .ranks = ranks, .workers = 1, .chunk = 8};
    uint8_t buf[64];
    const uint8_t *msg;
    size_t len;
    assert_int_equal(op_channel_send(ch, buf, op_agent_a2a_hello_encode(&h, buf), 0), OP_OK);
    assert_int_equal(op_channel_recv(ch, &msg, &len), OP_OK);
    if (refused == NULL) {
        assert_int_equal(msg[0], OP_AGENT_MSG_WELCOME);
        return ch;
    }
    char text[300] = "";
    memcpy(text, msg + 1, len - 1 < sizeof text - 1 ? len - 1 : sizeof text - 1);
    assert_int_equal(msg[0], OP_AGENT_MSG_REFUSED);
    if (strstr(text, refused) == NULL)
        fail_msg("refusal \"%s\" does not say \"%s\"", text, refused);
    op_channel_close(ch);
    return NULL;
}

static struct op_a2a_client *proper_client(const struct fault_env *e, uint32_t rank)
{
    struct op_a2a_client_config c = {.daemon = {.kind = OP_CHAN_TCP, .host = "127.0.0.1",
                                                .port = e->d.net.port},
                                     .key = e->clients, .ranks = 2, .rank = rank, .workers = 1,
                                     .chunk = 8, .timeout_ns = 3 * OP_NS_PER_S};
    memcpy(c.peer_pub, e->d.net.key.pub, OP_CHAN_KEY_BYTES);
    struct op_a2a_client *cl;
    assert_int_equal(op_a2a_client_open(&c, &cl), OP_OK);
    return cl;
}

/* Session 1: a greeting for another job size refused; a rank's malformed
 * request refused with the reason (its peer's call then fails, told why).
 * Session 2: a rank vanishes after its welcome (its resources freed,
 * counted). Session 3: the daemon still serves: a full call, every byte. */
static void test_a2a_daemon_refuses_counts_and_goes_on(void **state)
{
    (void)state;
    struct fault_env e = {.d = {.net = {.ip = LOOPBACK, .clients = 2, .n_daemons = 1,
                                        .timeout_ns = OP_NS_PER_S},
                                .sessions = 3}};
    e.d.net.port = e.d.net.daemon_port[0] = (uint16_t)(21000 + getpid() % 20000);
    e.d.net.daemon_ip[0] = LOOPBACK;
    assert_int_equal(op_chan_keypair_generate(&e.d.net.key), OP_OK);
    assert_int_equal(op_chan_keypair_generate(&e.clients), OP_OK);
    memcpy(e.d.net.clients_pub, e.clients.pub, OP_CHAN_KEY_BYTES);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, daemon_main, &e), 0);

    greeted(&e, 0, 3, "ranks: 3 there, 2 here");
    struct op_a2a_client *a = proper_client(&e, 0);
    struct op_channel *b = greeted(&e, 1, 2, NULL);
    uint8_t bad[OP_AGENT_ID_HDR + 4] = {OP_AGENT_MSG_VECTOR};
    assert_int_equal(op_channel_send(b, bad, sizeof bad, 0), OP_OK);
    const uint8_t *msg;
    size_t len;
    assert_int_equal(op_channel_recv(b, &msg, &len), OP_OK);
    assert_int_equal(msg[0], OP_AGENT_MSG_REFUSED);
    op_channel_close(b);
    assert_int_equal(op_a2a_client_start(a), OP_OK);
    assert_int_equal(op_a2a_client_wait(a), OP_ERR_REFUSED); /* its peer never came */
    op_a2a_client_close(a);

    a = proper_client(&e, 0);
    op_channel_close(greeted(&e, 1, 2, NULL)); /* gone without a goodbye */
    op_a2a_client_close(a);

    a = proper_client(&e, 0);
    struct op_a2a_client *c = proper_client(&e, 1);
    struct op_a2a_client *cl[2] = {a, c};
    for (uint32_t r = 0; r < 2; r++)
        for (int i = 0; i < 16; i++)
            ((uint8_t *)op_a2a_client_sendbuf(cl[r]))[i] = byte_of(r, (uint32_t)i / 8, i % 8, 0);
    for (uint32_t r = 0; r < 2; r++)
        assert_int_equal(op_a2a_client_start(cl[r]), OP_OK);
    for (uint32_t r = 0; r < 2; r++) {
        assert_int_equal(op_a2a_client_wait(cl[r]), OP_OK);
        const uint8_t *got = op_a2a_client_recvbuf(cl[r]);
        for (int i = 0; i < 16; i++)
            assert_int_equal(got[i], byte_of((uint32_t)i / 8, r, i % 8, 0));
    }
    op_a2a_client_close(a);
    op_a2a_client_close(c);
    pthread_join(t, NULL);
    assert_int_equal(e.st, OP_OK);
    assert_int_equal(e.counters[OP_A2A_D_sessions], 3);
    assert_int_equal(e.counters[OP_A2A_D_refused], 1);
    assert_int_equal(e.counters[OP_A2A_D_malformed], 1);
    assert_int_equal(e.counters[OP_A2A_D_failed_calls], 1);
    assert_int_equal(e.counters[OP_A2A_D_clients_gone], 1);
    assert_int_equal(e.counters[OP_A2A_D_calls], 2);
}

/* ---- the allreduce daemon: a malformed request refused, told, counted */

struct ar_daemon_env {
    struct op_agent_daemon_config d;
    op_status_t st;
};

static void *ar_daemon_main(void *arg)
{
    struct ar_daemon_env *e = arg;
    e->st = op_agent_daemon_run(&e->d);
    return NULL;
}

static void test_ar_daemon_refuses_a_malformed_request(void **state)
{
    (void)state;
    char *logged = NULL;
    size_t logged_len = 0;
    struct op_log log;
    op_log_init(&log, "ar_daemon", OP_LOG_INFO);
    log.stream = open_memstream(&logged, &logged_len);
    struct fault_env e = {.d = {.net = {.ip = LOOPBACK, .clients = 1, .n_daemons = 1,
                                        .timeout_ns = 2 * OP_NS_PER_S}}};
    e.d.net.port = e.d.net.daemon_port[0] = (uint16_t)(41000 + getpid() % 20000);
    e.d.net.daemon_ip[0] = LOOPBACK;
    assert_int_equal(op_chan_keypair_generate(&e.d.net.key), OP_OK);
    assert_int_equal(op_chan_keypair_generate(&e.clients), OP_OK);
    memcpy(e.d.net.clients_pub, e.clients.pub, OP_CHAN_KEY_BYTES);
    struct ar_daemon_env ad = {.d = {.job = {.size = 4, .type = OP_AGENT_INT, .op = OP_RED_SUM,
                                             .batch = 2, .batches = 1},
                                     .net = e.d.net}};
    ad.d.net.log = &log;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, ar_daemon_main, &ad), 0);
    struct op_channel *ch = raw_client(&e);
    uint8_t hello[1 + OP_AR_HANDSHAKE_MAX] = {OP_AGENT_MSG_HELLO}, bad[OP_AGENT_ID_HDR + 15] = {OP_AGENT_MSG_VECTOR};
    agent_handshake_text(&ad.d.job, (char *)hello + 1);
    const uint8_t *msg;
    size_t len;
    assert_int_equal(op_channel_send(ch, hello, 1 + strlen((char *)hello + 1), 0), OP_OK);
    assert_int_equal(op_channel_recv(ch, &msg, &len), OP_OK);
    assert_int_equal(msg[0], OP_AGENT_MSG_WELCOME);
    assert_int_equal(op_channel_send(ch, bad, sizeof bad, 0), OP_OK); /* 15 bytes: not 4 ints */
    assert_int_equal(op_channel_recv(ch, &msg, &len), OP_OK);
    assert_int_equal(msg[0], OP_AGENT_MSG_REFUSED);
    char why[300] = "";
    memcpy(why, msg + 1, len - 1 < sizeof why - 1 ? len - 1 : sizeof why - 1);
    assert_non_null(strstr(why, "client 0 sent a malformed request"));
    op_channel_close(ch);
    pthread_join(t, NULL);
    assert_int_equal(ad.st, OP_ERR_MALFORMED);
    fclose(log.stream);
    assert_non_null(strstr(logged, "malformed=1 clients_gone=0"));
    free(logged);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_chunks),
        cmocka_unit_test(test_chunks_of_many_packets),
        cmocka_unit_test(test_one_worker_many_ranks),
        cmocka_unit_test(test_a_single_rank_copies_to_itself),
        cmocka_unit_test(test_calls_back_to_back),
        cmocka_unit_test(test_started_calls_move_on_their_own),
        cmocka_unit_test(test_absent_rank_times_out),
        cmocka_unit_test(test_mismatched_peer_refused),
        cmocka_unit_test(test_ar_results_in_the_documented_order),
        cmocka_unit_test(test_ar_window_and_bad_input),
        cmocka_unit_test(test_ar_handshake),
        cmocka_unit_test(test_a2a_daemon_refuses_counts_and_goes_on),
        cmocka_unit_test(test_ar_daemon_refuses_a_malformed_request),
    };
    return cmocka_run_group_tests_name("agent", tests, NULL, NULL);
}
