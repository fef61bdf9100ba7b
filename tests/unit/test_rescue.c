/* The leaders' rescue agreement: the message codec with malformed input, the
 * decision table, and two services on loopback answering each other
 * (status, cancel of a waiting call, a result fetched in chunks, a closed
 * group still answering). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "offpath/rescue.h"

#define IP_A 0x7f2d0001u /* 127.45.0.1 */
#define IP_B 0x7f2d0002u
#define PORT 47111

static size_t sample(uint8_t *buf, struct op_rsc_msg *m)
{
    static const uint8_t data[5] = {1, 2, 3, 4, 5};
    *m = (struct op_rsc_msg){.type = OP_RSC_DATA, .state = OP_RSC_IDLE, .job = 7, .comm = 9,
                             .nonce = 11, .seq = 1ull << 40, .completed = 3, .offset = 2,
                             .total = 10, .len = 5, .data = data};
    return op_rsc_encode(m, buf, OP_RSC_MAX_MSG);
}

static void test_codec_round_trip(void **state)
{
    (void)state;
    uint8_t buf[OP_RSC_MAX_MSG];
    struct op_rsc_msg m, d;
    size_t n = sample(buf, &m);
    assert_int_equal(n, OP_RSC_HDR_LEN + 5);
    assert_int_equal(op_rsc_decode(buf, n, &d), OP_OK);
    assert_int_equal(d.type, m.type);
    assert_int_equal(d.job, 7);
    assert_int_equal(d.comm, 9);
    assert_int_equal(d.nonce, 11);
    assert_true(d.seq == 1ull << 40);
    assert_int_equal(d.completed, 3);
    assert_int_equal(d.offset, 2);
    assert_int_equal(d.total, 10);
    assert_int_equal(d.len, 5);
    assert_memory_equal(d.data, m.data, 5);
    /* too small a buffer, bytes on a request, an invalid state: not encoded */
    assert_int_equal(op_rsc_encode(&m, buf, n - 1), 0);
    m.type = OP_RSC_STATUS_REQ;
    assert_int_equal(op_rsc_encode(&m, buf, sizeof(buf)), OP_RSC_HDR_LEN); /* len ignored */
    m.state = OP_RSC_STATES_;
    assert_int_equal(op_rsc_encode(&m, buf, sizeof(buf)), 0);
}

static void expect_refused(const uint8_t *buf, size_t n, op_status_t want)
{
    struct op_rsc_msg d = {.job = 42};
    assert_int_equal(op_rsc_decode(buf, n, &d), want);
    assert_int_equal(d.job, 42); /* a refused message leaves the output alone */
}

static void test_codec_malformed(void **state)
{
    (void)state;
    uint8_t good[OP_RSC_MAX_MSG], buf[OP_RSC_MAX_MSG + 8];
    struct op_rsc_msg m;
    size_t n = sample(good, &m);
    for (size_t cut = 0; cut < n; cut++) /* every truncation */
        expect_refused(good, cut, OP_ERR_TRUNCATED);
    expect_refused(NULL, 0, OP_ERR_TRUNCATED);
    struct {
        size_t at;
        uint8_t value;
    } bad[] = {
        {0, 'X'},  /* magic */
        {4, 2},    /* version */
        {5, 0},    /* type */
        {5, 9},    /* type */
        {6, 4},    /* state */
        {7, 1},    /* reserved */
        {43, 6},   /* total 6 < offset 2 + len 5 */
        {47, 6},   /* len 6: one byte more than present */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(buf, good, n);
        buf[bad[i].at] = bad[i].value;
        struct op_rsc_msg d;
        assert_int_not_equal(op_rsc_decode(buf, n, &d), OP_OK);
    }
    memcpy(buf, good, n); /* trailing bytes */
    buf[n] = 0;
    expect_refused(buf, n + 1, OP_ERR_MALFORMED);
    memcpy(buf, good, n); /* a request carrying bytes */
    buf[5] = OP_RSC_FETCH_REQ;
    expect_refused(buf, n, OP_ERR_MALFORMED);
    memcpy(buf, good, n); /* more than OP_RSC_MAX_DATA */
    buf[44] = 0xff;
    buf[45] = 0xff;
    expect_refused(buf, n, OP_ERR_MALFORMED);
}

static struct op_rsc_peer peer(uint8_t state, uint64_t seq, uint64_t completed)
{
    return (struct op_rsc_peer){.answered = true, .state = state, .seq = seq,
                                .completed = completed, .in_call_ms = 150};
}

static void test_decide(void **state)
{
    (void)state;
    const struct op_rsc_peer silent = {0};
    int from = -1;
    /* a peer completed call 5 (it went on to 6): take its result */
    struct op_rsc_peer p1[] = {peer(OP_RSC_IN_CALL, 5, 4), peer(OP_RSC_IN_CALL, 6, 5)};
    assert_int_equal(op_rsc_decide(p1, 2, 5, false, 100, &from), OP_RSC_FETCH);
    assert_int_equal(from, 1);
    assert_int_equal(op_rsc_decide(p1, 2, 5, true, 100, &from), OP_RSC_FETCH); /* also after giving up */
    /* one peer silent (stopped) or behind: it is late, wait */
    struct op_rsc_peer p2[] = {peer(OP_RSC_IN_CALL, 5, 4), silent};
    assert_int_equal(op_rsc_decide(p2, 2, 5, false, 100, &from), OP_RSC_WAIT_PEER);
    struct op_rsc_peer p3[] = {peer(OP_RSC_IDLE, 4, 4), peer(OP_RSC_GAVE_UP, 4, 3)};
    assert_int_equal(op_rsc_decide(p3, 2, 5, false, 100, &from), OP_RSC_WAIT_PEER);
    struct op_rsc_peer p3b[] = {peer(OP_RSC_UNKNOWN, 0, 0)};
    assert_int_equal(op_rsc_decide(p3b, 1, 5, false, 100, &from), OP_RSC_WAIT_PEER);
    /* everyone is in the call and nobody got it: the switch is not answering */
    struct op_rsc_peer p4[] = {peer(OP_RSC_IN_CALL, 5, 4), peer(OP_RSC_IN_CALL, 5, 4)};
    assert_int_equal(op_rsc_decide(p4, 2, 5, false, 100, &from), OP_RSC_GIVE_UP);
    /* ... unless one of them has not waited that long: maybe it has not sent yet */
    p4[1].in_call_ms = 20;
    assert_int_equal(op_rsc_decide(p4, 2, 5, false, 100, &from), OP_RSC_WAIT_PEER);
    /* someone gave up already: so do we, even with a peer still late */
    struct op_rsc_peer p5[] = {peer(OP_RSC_GAVE_UP, 5, 4), silent};
    assert_int_equal(op_rsc_decide(p5, 2, 5, false, 100, &from), OP_RSC_GIVE_UP);
    assert_int_equal(op_rsc_decide(p5, 2, 5, true, 100, &from), OP_RSC_HOLD);
    /* redo only once every one of them gave this very call up */
    struct op_rsc_peer p6[] = {peer(OP_RSC_GAVE_UP, 5, 4), peer(OP_RSC_GAVE_UP, 5, 4)};
    assert_int_equal(op_rsc_decide(p6, 2, 5, true, 100, &from), OP_RSC_REDO);
    struct op_rsc_peer p7[] = {peer(OP_RSC_GAVE_UP, 5, 4), peer(OP_RSC_GAVE_UP, 4, 3)};
    assert_int_equal(op_rsc_decide(p7, 2, 5, true, 100, &from), OP_RSC_HOLD);
    assert_int_equal(op_rsc_decide(NULL, 0, 5, true, 100, &from), OP_RSC_REDO); /* alone */
    assert_string_equal(op_rsc_verdict_name(OP_RSC_REDO), "redo");
}

struct two {
    struct op_rsc_svc *a, *b;
    struct op_rsc_entry *ea, *eb;
};

static void open_two(struct two *t)
{
    assert_int_equal(op_rsc_svc_open(IP_A, PORT, &t->a), OP_OK);
    assert_int_equal(op_rsc_svc_open(IP_B, PORT, &t->b), OP_OK);
    t->ea = op_rsc_entry_open(t->a, 1, 77);
    t->eb = op_rsc_entry_open(t->b, 1, 77);
    assert_non_null(t->ea);
    assert_non_null(t->eb);
}

static void close_two(struct two *t)
{
    op_rsc_entry_close(t->a, t->ea);
    op_rsc_entry_close(t->b, t->eb);
    op_rsc_svc_close(t->a);
    op_rsc_svc_close(t->b);
}

static void test_services_status_cancel_fetch(void **state)
{
    (void)state;
    struct two t;
    open_two(&t);
    const size_t bytes = 3 * OP_RSC_MAX_DATA + 100; /* several chunks */
    uint8_t *result = malloc(bytes), *got = calloc(1, bytes);
    assert_non_null(result);
    assert_non_null(got);
    for (size_t i = 0; i < bytes; i++)
        result[i] = (uint8_t)(i * 7 + 3);
    /* B completed call 1 and waits in call 2; A is still in call 1 */
    op_rsc_call_begin(t.b, t.eb, 1);
    assert_int_equal(op_rsc_call_done(t.b, t.eb, 1, result, bytes, false), OP_OK);
    op_rsc_call_begin(t.b, t.eb, 2);
    op_rsc_call_begin(t.a, t.ea, 1);
    uint32_t peers_of_a[] = {IP_B};
    struct op_rsc_peer p;
    op_rsc_poll(t.a, t.ea, peers_of_a, 1, PORT, OP_NS_PER_S, &p);
    assert_true(p.answered);
    assert_int_equal(p.state, OP_RSC_IN_CALL);
    assert_int_equal(p.seq, 2);
    assert_int_equal(p.completed, 1);
    assert_int_equal(p.total, bytes);
    int from;
    assert_int_equal(op_rsc_decide(&p, 1, 1, false, 100, &from), OP_RSC_FETCH);
    assert_int_equal(op_rsc_fetch(t.a, t.ea, IP_B, PORT, 1, got, bytes, op_now_ns() + OP_NS_PER_S),
                     OP_OK);
    assert_memory_equal(got, result, bytes);
    /* a call B does not hold, or of another size: refused, not guessed */
    assert_int_equal(op_rsc_fetch(t.a, t.ea, IP_B, PORT, 2, got, bytes, op_now_ns() + OP_NS_PER_S),
                     OP_ERR_STATE);
    assert_int_equal(op_rsc_fetch(t.a, t.ea, IP_B, PORT, 1, got, 10, op_now_ns() + OP_NS_PER_S),
                     OP_ERR_STATE);
    /* A gives call 2 up: B, waiting in call 2, is told to stop */
    op_rsc_call_done(t.a, t.ea, 1, got, bytes, false);
    op_rsc_call_begin(t.a, t.ea, 2);
    assert_false(atomic_load(op_rsc_cancel_flag(t.eb)));
    op_rsc_give_up(t.a, t.ea);
    op_rsc_poll(t.a, t.ea, peers_of_a, 1, PORT, OP_NS_PER_S, &p);
    assert_true(atomic_load(op_rsc_cancel_flag(t.eb)));
    /* B gave it up with A, without its own thread: a switch result it gets
     * now is refused, the settled one is taken */
    assert_true(op_rsc_gave_up(t.b, t.eb));
    assert_int_equal(op_rsc_call_done(t.b, t.eb, 2, result, 8, false), OP_ERR_STATE);
    assert_int_equal(op_rsc_call_done(t.b, t.eb, 2, result, 8, true), OP_OK);
    assert_false(op_rsc_gave_up(t.b, t.eb));
    uint64_t k[OP_RSC_C_COUNT_];
    op_rsc_svc_counters(t.b, k);
    assert_int_equal(k[OP_RSC_C_cancels], 1);
    assert_true(k[OP_RSC_C_requests] >= 5);
    /* a closed group still hands out its last result */
    op_rsc_entry_close(t.b, t.eb);
    t.eb = NULL;
    memset(got, 0, bytes);
    assert_int_equal(op_rsc_fetch(t.a, t.ea, IP_B, PORT, 2, got, 8, op_now_ns() + OP_NS_PER_S),
                     OP_OK);
    assert_memory_equal(got, result, 8);
    free(result);
    free(got);
    close_two(&t);
}

/* A node's socket leaders share its one address (a namespace topology, a
 * real cluster) and differ by port: each answer is taken as its sender's,
 * by address and port, and a fetch reads the peer it names. */
static void test_peers_sharing_an_address(void **state)
{
    (void)state;
    struct op_rsc_svc *a, *b0, *b1;
    assert_int_equal(op_rsc_svc_open(IP_A, PORT, &a), OP_OK);
    assert_int_equal(op_rsc_svc_open(IP_B, PORT, &b0), OP_OK);
    assert_int_equal(op_rsc_svc_open(IP_B, PORT + 3, &b1), OP_OK);
    struct op_rsc_entry *ea = op_rsc_entry_open(a, 1, 9), *e0 = op_rsc_entry_open(b0, 1, 9),
                        *e1 = op_rsc_entry_open(b1, 1, 9);
    uint64_t r0 = 0x1111, r1 = 0x2222, got = 0;
    op_rsc_call_begin(b0, e0, 1);
    assert_int_equal(op_rsc_call_done(b0, e0, 1, &r0, sizeof(r0), false), OP_OK);
    op_rsc_call_begin(b1, e1, 1);
    assert_int_equal(op_rsc_call_done(b1, e1, 1, &r1, sizeof(r1), false), OP_OK);
    op_rsc_call_begin(b1, e1, 2); /* b1 went on to call 2, b0 did not */
    op_rsc_call_begin(a, ea, 1);
    const uint32_t ips[] = {IP_B, IP_B};
    const uint16_t ports[] = {PORT + 3, PORT};
    /* ends when both answered: the bound only matters on a loaded machine */
    const struct op_rsc_ask q = {.ips = ips, .ports = ports, .n = 2, .wait_ns = 5 * OP_NS_PER_S};
    struct op_rsc_asker k;
    struct op_rsc_peer p[2];
    assert_int_equal(op_rsc_asker_open(a, &k), OP_OK);
    op_rsc_ask_start(a, &k, ea, &q, p);
    while (!op_rsc_ask_step(a, &k, &q, p))
        usleep(1000);
    op_rsc_asker_close(&k);
    assert_true(p[0].answered && p[1].answered);
    assert_int_equal(p[0].seq, 2); /* b1's */
    assert_int_equal(p[0].state, OP_RSC_IN_CALL);
    assert_int_equal(p[1].seq, 1); /* b0's */
    assert_int_equal(op_rsc_fetch(a, ea, IP_B, PORT + 3, 1, &got, sizeof(got),
                                  op_now_ns() + OP_NS_PER_S), OP_OK);
    assert_int_equal(got, r1);
    assert_int_equal(op_rsc_fetch(a, ea, IP_B, PORT, 1, &got, sizeof(got),
                                  op_now_ns() + OP_NS_PER_S), OP_OK);
    assert_int_equal(got, r0);
    op_rsc_entry_close(a, ea);
    op_rsc_entry_close(b0, e0);
    op_rsc_entry_close(b1, e1);
    op_rsc_svc_close(a);
    op_rsc_svc_close(b0);
    op_rsc_svc_close(b1);
}

static void test_silent_and_unknown_peers(void **state)
{
    (void)state;
    struct op_rsc_svc *a;
    assert_int_equal(op_rsc_svc_open(IP_A, PORT, &a), OP_OK);
    struct op_rsc_entry *e = op_rsc_entry_open(a, 1, 5);
    struct op_rsc_svc *b;
    assert_int_equal(op_rsc_svc_open(IP_B, PORT, &b), OP_OK); /* no entry for group 5 */
    uint32_t peers[] = {IP_B, 0x7f2d0003u /* nobody */};
    struct op_rsc_peer p[2];
    uint64_t t0 = op_now_ns();
    op_rsc_poll(a, e, peers, 2, PORT, 100 * OP_NS_PER_MS, p);
    assert_true(op_now_ns() - t0 >= 100 * OP_NS_PER_MS); /* waited for the silent one */
    assert_true(p[0].answered);
    assert_int_equal(p[0].state, OP_RSC_UNKNOWN);
    assert_false(p[1].answered);
    uint8_t buf[8];
    assert_int_equal(op_rsc_fetch(a, e, 0x7f2d0003u, PORT, 1, buf, 8, op_now_ns() + 50 * OP_NS_PER_MS),
                     OP_ERR_TIMEOUT);
    op_rsc_entry_close(a, e);
    op_rsc_svc_close(a);
    /* garbage, and an answer posing as a request, are counted, not answered */
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(PORT),
                             .sin_addr.s_addr = htonl(IP_B)};
    struct op_rsc_msg m;
    uint8_t msg[OP_RSC_MAX_MSG];
    size_t n = sample(msg, &m); /* a DATA message */
    uint64_t before[OP_RSC_C_COUNT_], k[OP_RSC_C_COUNT_] = {0};
    usleep(50000); /* a's last resends are served */
    op_rsc_svc_counters(b, before);
    assert_true(sendto(fd, "hello", 5, 0, (struct sockaddr *)&to, sizeof(to)) == 5);
    assert_true(sendto(fd, msg, n, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)n);
    for (int i = 0; i < 200 && k[OP_RSC_C_malformed] < 2; i++) {
        usleep(5000);
        op_rsc_svc_counters(b, k);
    }
    assert_int_equal(k[OP_RSC_C_malformed], 2);
    assert_int_equal(k[OP_RSC_C_requests], before[OP_RSC_C_requests]); /* none answered */
    close(fd);
    op_rsc_svc_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_round_trip),
        cmocka_unit_test(test_codec_malformed),
        cmocka_unit_test(test_decide),
        cmocka_unit_test(test_services_status_cancel_fetch),
        cmocka_unit_test(test_silent_and_unknown_peers),
        cmocka_unit_test(test_peers_sharing_an_address),
    };
    return cmocka_run_group_tests_name("rescue", tests, NULL, NULL);
}
