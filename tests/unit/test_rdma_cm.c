/* The connection manager: CM MADs encoded and decoded (every attribute,
 * every reason to refuse one), and the REQ / REP / RTU exchange between two
 * devices on the in-memory link: clean, under loss, duplication and
 * reordering, with no slot left (REJ), with a dead peer (a cause); and UD's
 * SIDR_REQ / SIDR_REP the same ways. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "offpath/wire/cm.h"
#include "rdmasim.h"

#define LIMIT_NS (60 * OP_NS_PER_S)

static const struct op_flow FLOW = {.src.v4 = RSIM_IP_A, .dst.v4 = RSIM_IP_B,
                                    .src_port = OP_ROCE_UDP_PORT, .dst_port = OP_ROCE_UDP_PORT};

static struct op_cm_msg sample(uint16_t attr)
{
    struct op_cm_msg m;
    memset(&m, 0, sizeof m); /* padding too: decoded messages are compared whole */
    m.attr = attr;
    m.tid = 0x1122334455667788ull;
    m.local_comm_id = 0xa1b2c3d4;
    m.remote_comm_id = attr == OP_CM_REQ ? 0 : 0x01020304;
    if (attr == OP_CM_REQ || attr == OP_CM_REP) {
        m.ca_guid = 0x0102030405060708ull;
        m.qkey = 0;
        m.qpn = 0x000123;
        m.psn = 0xabcdef;
        m.responder_resources = 16;
        m.initiator_depth = 8;
        m.rnr_retry = 7;
        m.srq = attr == OP_CM_REP;
    }
    if (attr == OP_CM_REQ) {
        m.service_id = OP_CM_SERVICE_RDMA_TCP | 4791;
        m.cm_resp_timeout = 20;
        m.retry_count = 7;
        m.pkey = 0xffff;
        m.path_mtu = 5;
        m.max_cm_retries = 15;
        m.local_gid[10] = m.local_gid[11] = 0xff;
        m.local_gid[15] = 1;
        m.remote_gid[15] = 2;
        m.hop_limit = 64;
        m.ack_timeout = 14;
    }
    if (attr == OP_CM_REP)
        m.target_ack_delay = 15;
    if (attr == OP_CM_REJ)
        m.reason = 28;
    if (attr == OP_CM_SIDR_REQ || attr == OP_CM_SIDR_REP) {
        m.remote_comm_id = 0;
        m.service_id = OP_CM_SERVICE_RDMA_UDP | 18515;
    }
    if (attr == OP_CM_SIDR_REQ)
        m.pkey = 0xffff;
    if (attr == OP_CM_SIDR_REP) {
        m.status = OP_CM_SIDR_OK;
        m.qpn = 0x000456;
        m.qkey = 0x11111111;
    }
    for (size_t i = 0; i < op_cm_private_len(attr); i++)
        m.private_data[i] = (uint8_t)(i * 3 + attr);
    return m;
}

static void test_mads_round_trip(void **state)
{
    (void)state;
    const uint16_t attrs[] = {OP_CM_REQ, OP_CM_REP, OP_CM_RTU, OP_CM_REJ, OP_CM_SIDR_REQ,
                              OP_CM_SIDR_REP};
    for (size_t a = 0; a < 6; a++) {
        struct op_cm_msg m = sample(attrs[a]), d;
        memset(&d, 0xa5, sizeof d);
        uint8_t pkt[OP_CM_PKT_LEN + 8];
        enum op_cm_err why;
        assert_int_equal(op_cm_packet_encode(&FLOW, 5, &m, pkt, sizeof pkt), OP_CM_PKT_LEN);
        assert_int_equal(op_cm_packet_decode(&FLOW, pkt, OP_CM_PKT_LEN, &d, &why), OP_OK);
        assert_int_equal(why, OP_CM_E_ok);
        assert_memory_equal(&d, &m, sizeof m);
    }
    /* the REQ's fields where the IBTA puts them (MAD offset 24 + field) */
    struct op_cm_msg m = sample(OP_CM_REQ);
    uint8_t mad[OP_CM_MAD_LEN];
    op_cm_mad_encode(&m, mad);
    const uint8_t hdr[] = {1, 0x07, 2, 0x03};
    assert_memory_equal(mad, hdr, 4);
    assert_int_equal(mad[16] << 8 | mad[17], OP_CM_REQ);
    assert_int_equal(mad[24 + 32] << 16 | mad[24 + 33] << 8 | mad[24 + 34], 0x123); /* QPN */
    assert_int_equal(mad[24 + 44] << 16 | mad[24 + 45] << 8 | mad[24 + 46], 0xabcdef); /* PSN */
    assert_int_equal(mad[24 + 50] >> 4, 5);      /* path MTU */
    assert_int_equal(mad[24 + 56 + 15], 1);      /* primary local GID */
    assert_int_equal(mad[24 + 140], m.private_data[0]);
    /* SIDR_REQ: request ID, P_Key, service ID, then private data (12.6.10) */
    m = sample(OP_CM_SIDR_REQ);
    op_cm_mad_encode(&m, mad);
    assert_int_equal(mad[16] << 8 | mad[17], 0x0017);
    assert_int_equal((uint32_t)mad[24] << 24 | (uint32_t)mad[25] << 16 | mad[26] << 8 | mad[27],
                     0xa1b2c3d4u);
    assert_int_equal(mad[28] << 8 | mad[29], 0xffff);
    assert_int_equal(mad[24 + 14] << 8 | mad[24 + 15], 18515); /* the service ID's port */
    assert_int_equal(mad[24 + 13], 0x11);                     /* RDMA_PS_UDP */
    assert_int_equal(mad[24 + 16], m.private_data[0]);
    assert_int_equal(mad[255], m.private_data[215]);
    /* SIDR_REP: request ID, status, info length, QPN, service ID, Q_Key,
     * 72 bytes of additional information, private data (12.6.11) */
    m = sample(OP_CM_SIDR_REP);
    op_cm_mad_encode(&m, mad);
    assert_int_equal(mad[16] << 8 | mad[17], 0x0018);
    assert_int_equal(mad[24 + 4], OP_CM_SIDR_OK);
    assert_int_equal(mad[24 + 5], 0);
    assert_int_equal(mad[24 + 8] << 16 | mad[24 + 9] << 8 | mad[24 + 10], 0x456);
    assert_int_equal(mad[24 + 18] << 8 | mad[24 + 19], 18515);
    assert_int_equal(mad[24 + 20], 0x11);
    assert_int_equal(mad[24 + 23], 0x11);
    assert_int_equal(mad[24 + 96], m.private_data[0]);
    assert_int_equal(mad[255], m.private_data[135]);
}

static void expect_refused(const uint8_t *pkt, size_t len, enum op_cm_err want)
{
    struct op_cm_msg d;
    enum op_cm_err why = OP_CM_E_ok;
    assert_int_not_equal(op_cm_packet_decode(&FLOW, pkt, len, &d, &why), OP_OK);
    if (why != want)
        fail_msg("refused for %s, expected %s", op_cm_err_str(why), op_cm_err_str(want));
}

/* Change one MAD byte and seal again: only that field is wrong. */
static void mutate(const uint8_t *good, size_t at, uint8_t v, enum op_cm_err want)
{
    uint8_t pkt[OP_CM_PKT_LEN];
    memcpy(pkt, good, sizeof pkt);
    pkt[at] = v;
    (void)op_icrc_seal(&FLOW, pkt, OP_CM_PKT_LEN - OP_ICRC_LEN, sizeof pkt);
    expect_refused(pkt, sizeof pkt, want);
}

static void test_malformed_refused_with_reason(void **state)
{
    (void)state;
    struct op_cm_msg m = sample(OP_CM_REP);
    uint8_t good[OP_CM_PKT_LEN + 4];
    assert_int_equal(op_cm_packet_encode(&FLOW, 1, &m, good, sizeof good), OP_CM_PKT_LEN);
    expect_refused(good, OP_CM_PKT_LEN - 1, OP_CM_E_length);
    expect_refused(good, 20, OP_CM_E_length);
    good[OP_CM_PKT_LEN] = 0;
    expect_refused(good, OP_CM_PKT_LEN + 1, OP_CM_E_length);
    size_t mad = OP_BTH_LEN + OP_DETH_LEN;
    mutate(good, 0, 0x04, OP_CM_E_bth);         /* RC SEND_ONLY */
    mutate(good, 7, 0x02, OP_CM_E_bth);         /* QP 2 */
    mutate(good, OP_BTH_LEN + 3, 0x11, OP_CM_E_deth); /* Q_Key */
    mutate(good, mad + 0, 2, OP_CM_E_version);
    mutate(good, mad + 1, 0x81, OP_CM_E_mgmt_class);
    mutate(good, mad + 2, 1, OP_CM_E_version);
    mutate(good, mad + 3, 0x81, OP_CM_E_method);
    mutate(good, mad + 17, 0x11, OP_CM_E_attribute); /* MRA: not taken */
    mutate(good, mad + 17, 0x20, OP_CM_E_attribute);
    uint8_t bad[OP_CM_PKT_LEN];
    memcpy(bad, good, sizeof bad);
    bad[mad + 100] ^= 1; /* not resealed */
    expect_refused(bad, sizeof bad, OP_CM_E_icrc);
    struct op_cm_msg d;
    enum op_cm_err why;
    assert_int_not_equal(op_cm_mad_decode(good + mad, OP_CM_MAD_LEN - 1, &d, &why), OP_OK);
    assert_int_equal(why, OP_CM_E_length);
    /* SIDR_REP: a status the IBTA does not define, additional information
     * longer than its field; 4 (redirect) and 72 bytes are taken */
    m = sample(OP_CM_SIDR_REP);
    assert_int_equal(op_cm_packet_encode(&FLOW, 1, &m, good, sizeof good), OP_CM_PKT_LEN);
    mutate(good, mad + 24 + 4, 6, OP_CM_E_sidr);
    mutate(good, mad + 24 + 4, 0xff, OP_CM_E_sidr);
    mutate(good, mad + 24 + 5, 73, OP_CM_E_sidr);
    good[mad + 24 + 4] = OP_CM_SIDR_REDIRECT;
    good[mad + 24 + 5] = 72;
    (void)op_icrc_seal(&FLOW, good, OP_CM_PKT_LEN - OP_ICRC_LEN, sizeof good);
    assert_int_equal(op_cm_packet_decode(&FLOW, good, OP_CM_PKT_LEN, &d, &why), OP_OK);
    assert_int_equal(d.status, OP_CM_SIDR_REDIRECT);
    mutate(good, mad + 17, 0x19, OP_CM_E_attribute); /* LAP: not taken */
    expect_refused(good, OP_CM_PKT_LEN - 3, OP_CM_E_length);
    m = sample(OP_CM_SIDR_REQ);
    assert_int_equal(op_cm_packet_encode(&FLOW, 1, &m, good, sizeof good), OP_CM_PKT_LEN);
    mutate(good, mad + 3, 0x81, OP_CM_E_method); /* a GetResp is not a SIDR_REQ */
    expect_refused(good, OP_CM_PKT_LEN + 1, OP_CM_E_length);
}

/* ---- the exchange */
struct cmfx {
    struct rsim s;
    struct op_rdma_cm *cm[2];
};

static struct op_rdma_cm_side side(uint32_t qpn, uint8_t tag)
{
    struct op_rdma_cm_side s = {.qpn = qpn, .psn = 0x100000u + qpn, .mtu = 1024,
                                .responder_resources = 16, .initiator_depth = 16,
                                .retry_count = 7, .rnr_retry = 7, .timeout = 14};
    for (int i = 0; i < OP_RDMA_CM_PRIVATE_MAX; i++)
        s.private_data[i] = (uint8_t)(tag + i);
    return s;
}

static void cmfx_init(struct cmfx *f, uint64_t seed, uint32_t n_active, uint32_t n_passive)
{
    rsim_init(&f->s, seed);
    const struct op_rdma_cm_config a = {.nconn = n_active, .retry_ns = OP_NS_PER_MS,
                                        .max_retries = 30};
    const struct op_rdma_cm_config b = {.nconn = n_passive, .retry_ns = OP_NS_PER_MS,
                                        .max_retries = 30};
    assert_int_equal(op_rdma_cm_create(f->s.dev[0], &a, &f->cm[0]), OP_OK);
    assert_int_equal(op_rdma_cm_create(f->s.dev[1], &b, &f->cm[1]), OP_OK);
    for (uint32_t i = 0; i < n_passive; i++) {
        struct op_rdma_cm_side s = side(0x40 + i, 0x80);
        assert_int_equal(op_rdma_cm_listen(f->cm[1], i, &s), OP_OK);
    }
    for (uint32_t i = 0; i < n_active; i++) {
        struct op_rdma_cm_side s = side(0x20 + i, (uint8_t)i);
        assert_int_equal(op_rdma_cm_connect(f->cm[0], i, &s, RSIM_IP_B, OP_ROCE_UDP_PORT,
                                            f->s.now, &f->s.q),
                         OP_OK);
    }
}

struct settled {
    struct cmfx *f;
    uint32_t n[2];
};

static bool all_settled(void *arg)
{
    struct settled *w = arg;
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; i < w->n[k]; i++) {
            enum op_rdma_cm_state st = op_rdma_cm_state(w->f->cm[k], i);
            if (st != OP_RDMA_CM_ESTABLISHED && st != OP_RDMA_CM_FAILED)
                return false;
        }
    return true;
}

/* Losses and duplicates were seen and repaired by resends or answers again. */
static void assert_repaired(const struct cmfx *f)
{
    const uint64_t *a = op_rdma_cm_counters(f->cm[0]), *b = op_rdma_cm_counters(f->cm[1]);
    assert_true(a[OP_RDMA_CM_C_cm_resent] + b[OP_RDMA_CM_C_cm_resent] +
                    a[OP_RDMA_CM_C_cm_duplicates] + b[OP_RDMA_CM_C_cm_duplicates] >
                0);
}

/* Four active connections (and n_passive passive ones) settle over links
 * with these faults. */
static void settle_faulty(struct cmfx *f, double drop, double dup, double reorder,
                          uint32_t n_passive)
{
    for (int i = 0; i < 2; i++)
        f->s.link[i] = (struct rsim_link){.drop = drop, .dup = dup, .reorder = reorder,
                                          .jitter_ns = 2 * OP_NS_PER_MS};
    struct settled w = {f, {4, n_passive}};
    assert_true(rsim_run(&f->s, all_settled, &w, LIMIT_NS));
}

/* cm[0]'s connection i is up, with the peer at B: what it said in p; the
 * index of the listener that answered (QPN 0x40 + j), none seen before. */
static uint32_t active_established(struct cmfx *f, uint32_t i, struct op_rdma_cm_side *p,
                                   bool seen[4])
{
    uint32_t ip;
    uint16_t port;
    assert_int_equal(op_rdma_cm_state(f->cm[0], i), OP_RDMA_CM_ESTABLISHED);
    assert_int_equal(op_rdma_cm_peer(f->cm[0], i, p, &ip, &port), OP_OK);
    assert_int_equal(ip, RSIM_IP_B);
    uint32_t j = p->qpn - 0x40;
    assert_true(j < 4 && !seen[j]);
    seen[j] = true;
    assert_int_equal(p->private_data[0], 0x80);
    return j;
}

static void exchange(double drop, double dup, double reorder, uint64_t seed)
{
    struct cmfx f;
    cmfx_init(&f, seed, 4, 4);
    settle_faulty(&f, drop, dup, reorder, 4);
    bool seen[4] = {0};
    for (uint32_t i = 0; i < 4; i++) {
        struct op_rdma_cm_side p, q;
        uint32_t ip;
        uint16_t port;
        uint32_t j = active_established(&f, i, &p, seen); /* the slot that took our REQ */
        assert_int_equal(p.mtu, 1024);
        assert_int_equal(p.psn, 0x100040u + j);
        /* and the passive side learned exactly us */
        assert_int_equal(op_rdma_cm_peer(f.cm[1], j, &q, &ip, &port), OP_OK);
        assert_int_equal(q.qpn, 0x20 + i);
        assert_int_equal(q.psn, 0x100020u + i);
        assert_int_equal(q.timeout, 14);
        assert_int_equal(q.retry_count, 7);
        assert_int_equal(q.private_data[5], (uint8_t)(i + 5));
        assert_int_equal(ip, RSIM_IP_A);
    }
    if (drop > 0 || dup > 0)
        assert_repaired(&f);
    rsim_free(&f.s);
}

static void test_exchange(void **state)
{
    (void)state;
    exchange(0, 0, 0, 1);
    exchange(0.3, 0.2, 0.3, 2);
    exchange(0.5, 0, 0, 3);
}

static void test_no_slot_is_rejected(void **state)
{
    (void)state;
    struct cmfx f;
    cmfx_init(&f, 4, 3, 2);
    struct settled w = {&f, {3, 2}};
    assert_true(rsim_run(&f.s, all_settled, &w, LIMIT_NS));
    int failed = 0;
    for (uint32_t i = 0; i < 3; i++)
        if (op_rdma_cm_state(f.cm[0], i) == OP_RDMA_CM_FAILED) {
            failed++;
            assert_non_null(strstr(op_rdma_cm_error(f.cm[0], i), "REJ reason 1"));
        }
    assert_int_equal(failed, 1);
    assert_int_equal(op_rdma_cm_counters(f.cm[1])[OP_RDMA_CM_C_cm_rej_sent], 1);
    rsim_free(&f.s);
}

static void test_dead_peer_gives_a_cause(void **state)
{
    (void)state;
    struct cmfx f;
    cmfx_init(&f, 5, 1, 1);
    f.s.link[0].dead = true;
    struct settled w = {&f, {1, 0}};
    assert_true(rsim_run(&f.s, all_settled, &w, LIMIT_NS));
    assert_int_equal(op_rdma_cm_state(f.cm[0], 0), OP_RDMA_CM_FAILED);
    const char *cause = op_rdma_cm_error(f.cm[0], 0);
    assert_non_null(strstr(cause, "no REP from 127.0.0.2:4791 after 31 tries"));
    assert_int_equal(op_rdma_cm_counters(f.cm[0])[OP_RDMA_CM_C_cm_resent], 30);
    rsim_free(&f.s);
}

static bool passive_answered(void *arg)
{
    return op_rdma_cm_state(arg, 0) == OP_RDMA_CM_REP_SENT;
}

/* The passive side knows its peer once it answered the REQ (it may bring
 * its QP up before the RTU); the active side only once the REP is in. */
static void test_peer_known_from_the_req(void **state)
{
    (void)state;
    struct cmfx f;
    struct op_rdma_cm_side p;
    uint32_t ip;
    uint16_t port;
    cmfx_init(&f, 7, 1, 1);
    assert_int_equal(op_rdma_cm_peer(f.cm[1], 0, &p, &ip, &port), OP_ERR_STATE);
    f.s.link[1].dead = true; /* the REP never arrives */
    assert_true(rsim_run(&f.s, passive_answered, f.cm[1], LIMIT_NS));
    assert_int_equal(op_rdma_cm_peer(f.cm[1], 0, &p, &ip, &port), OP_OK);
    assert_int_equal(p.qpn, 0x20);
    assert_int_equal(p.psn, 0x100020u);
    assert_int_equal(ip, RSIM_IP_A);
    assert_int_equal(op_rdma_cm_state(f.cm[0], 0), OP_RDMA_CM_REQ_SENT);
    assert_int_equal(op_rdma_cm_peer(f.cm[0], 0, &p, &ip, &port), OP_ERR_STATE);
    rsim_free(&f.s);
}

/* Connection conn of cm[0] asks cm[1] (listening on its slot 0) with side
 * s: the REQ is REJected with this reason text, the listener keeps
 * listening, having sent rej_sent REJs so far. */
static void expect_rejected(struct cmfx *f, int conn, struct op_rdma_cm_side *s,
                            const char *reason, uint64_t rej_sent)
{
    assert_int_equal(op_rdma_cm_connect(f->cm[0], conn, s, RSIM_IP_B, OP_ROCE_UDP_PORT,
                                        f->s.now, &f->s.q),
                     OP_OK);
    struct settled w = {f, {1, 0}};
    assert_true(rsim_run(&f->s, all_settled, &w, LIMIT_NS));
    assert_int_equal(op_rdma_cm_state(f->cm[0], conn), OP_RDMA_CM_FAILED);
    assert_non_null(strstr(op_rdma_cm_error(f->cm[0], conn), reason));
    assert_int_equal(op_rdma_cm_state(f->cm[1], 0), OP_RDMA_CM_IDLE); /* still listening */
    assert_int_equal(op_rdma_cm_counters(f->cm[1])[OP_RDMA_CM_C_cm_rej_sent], rej_sent);
}

/* A REQ for another service (rdma_cm's port) is REJected with reason 8
 * and takes no listening slot. */
static void test_other_service_is_rejected(void **state)
{
    (void)state;
    struct cmfx f;
    rsim_init(&f.s, 8);
    const struct op_rdma_cm_config a = {.nconn = 1, .retry_ns = OP_NS_PER_MS, .max_retries = 30,
                                        .service_port = 18515};
    const struct op_rdma_cm_config b = {.nconn = 1, .retry_ns = OP_NS_PER_MS, .max_retries = 30,
                                        .service_port = 18516};
    assert_int_equal(op_rdma_cm_create(f.s.dev[0], &a, &f.cm[0]), OP_OK);
    assert_int_equal(op_rdma_cm_create(f.s.dev[1], &b, &f.cm[1]), OP_OK);
    struct op_rdma_cm_side s = side(0x40, 0x80);
    assert_int_equal(op_rdma_cm_listen(f.cm[1], 0, &s), OP_OK);
    s = side(0x20, 0);
    expect_rejected(&f, 0, &s, "REJ reason 8: invalid service ID", 1);
    assert_int_equal(op_rdma_cm_counters(f.cm[1])[OP_RDMA_CM_C_cm_unknown], 1);
    rsim_free(&f.s);
}

/* A UC REQ (transport 1) is served by a UC listener, which sees the type;
 * an RC listener REJects it with reason 9 and keeps listening, and the RC
 * REQ that follows on the same connection slot is served. */
static void test_transport_type_is_matched(void **state)
{
    (void)state;
    struct cmfx f;
    rsim_init(&f.s, 8);
    const struct op_rdma_cm_config cc = {.nconn = 2, .retry_ns = OP_NS_PER_MS, .max_retries = 30};
    assert_int_equal(op_rdma_cm_create(f.s.dev[0], &cc, &f.cm[0]), OP_OK);
    assert_int_equal(op_rdma_cm_create(f.s.dev[1], &cc, &f.cm[1]), OP_OK);
    struct op_rdma_cm_side s = side(0x40, 0x80);
    assert_int_equal(op_rdma_cm_listen(f.cm[1], 0, &s), OP_OK); /* RC */
    s = side(0x20, 0);
    s.transport = 1;
    expect_rejected(&f, 0, &s, "REJ reason 9: invalid transport service type", 1);
    s = side(0x21, 0); /* RC, as the listener */
    assert_int_equal(op_rdma_cm_connect(f.cm[0], 1, &s, RSIM_IP_B, OP_ROCE_UDP_PORT, f.s.now,
                                        &f.s.q),
                     OP_OK);
    struct settled w2 = {&f, {2, 1}};
    assert_true(rsim_run(&f.s, all_settled, &w2, LIMIT_NS));
    assert_int_equal(op_rdma_cm_state(f.cm[0], 1), OP_RDMA_CM_ESTABLISHED);
    struct op_rdma_cm_side peer;
    uint32_t ip;
    uint16_t port;
    assert_int_equal(op_rdma_cm_peer(f.cm[1], 0, &peer, &ip, &port), OP_OK);
    assert_int_equal(peer.qpn, 0x21);
    assert_int_equal(peer.transport, 0);
    rsim_free(&f.s);
    /* UC to UC: connected, the listener sees transport 1 */
    rsim_init(&f.s, 9);
    assert_int_equal(op_rdma_cm_create(f.s.dev[0], &cc, &f.cm[0]), OP_OK);
    assert_int_equal(op_rdma_cm_create(f.s.dev[1], &cc, &f.cm[1]), OP_OK);
    s = side(0x40, 0x80);
    s.transport = 1;
    assert_int_equal(op_rdma_cm_listen(f.cm[1], 0, &s), OP_OK);
    s = side(0x22, 0);
    s.transport = 1;
    assert_int_equal(op_rdma_cm_connect(f.cm[0], 0, &s, RSIM_IP_B, OP_ROCE_UDP_PORT, f.s.now,
                                        &f.s.q),
                     OP_OK);
    struct settled w = {&f, {1, 0}};
    assert_true(rsim_run(&f.s, all_settled, &w, LIMIT_NS));
    assert_int_equal(op_rdma_cm_state(f.cm[0], 0), OP_RDMA_CM_ESTABLISHED);
    assert_int_equal(op_rdma_cm_peer(f.cm[1], 0, &peer, &ip, &port), OP_OK);
    assert_int_equal(peer.qpn, 0x22);
    assert_int_equal(peer.transport, 1);
    rsim_free(&f.s);
}

/* ---- UD: SIDR_REQ / SIDR_REP */
static struct op_rdma_cm_side ud_side(uint32_t qpn, uint8_t tag)
{
    struct op_rdma_cm_side s = side(qpn, tag);
    s.transport = OP_RDMA_CM_UD;
    s.qkey = 0x11110000u + qpn;
    return s;
}

/* cm[0]: n_active UD connections asking for port; cm[1] on 18515: an RC
 * listener on slot 0 (a SIDR_REQ never takes it), n_ud UD ones after it. */
static void sidr_init(struct cmfx *f, uint64_t seed, uint32_t n_active, uint32_t n_ud,
                      uint16_t port)
{
    rsim_init(&f->s, seed);
    const struct op_rdma_cm_config a = {.nconn = n_active, .retry_ns = OP_NS_PER_MS,
                                        .max_retries = 30, .service_port = port};
    const struct op_rdma_cm_config b = {.nconn = n_ud + 1, .retry_ns = OP_NS_PER_MS,
                                        .max_retries = 30, .service_port = 18515};
    assert_int_equal(op_rdma_cm_create(f->s.dev[0], &a, &f->cm[0]), OP_OK);
    assert_int_equal(op_rdma_cm_create(f->s.dev[1], &b, &f->cm[1]), OP_OK);
    struct op_rdma_cm_side s = side(0x3f, 0x70);
    assert_int_equal(op_rdma_cm_listen(f->cm[1], 0, &s), OP_OK);
    for (uint32_t i = 0; i < n_ud; i++) {
        s = ud_side(0x40 + i, 0x80);
        assert_int_equal(op_rdma_cm_listen(f->cm[1], 1 + i, &s), OP_OK);
    }
    for (uint32_t i = 0; i < n_active; i++) {
        s = ud_side(0x20 + i, (uint8_t)i);
        assert_int_equal(op_rdma_cm_connect(f->cm[0], i, &s, RSIM_IP_B, OP_ROCE_UDP_PORT,
                                            f->s.now, &f->s.q),
                         OP_OK);
    }
}

static void sidr_exchange(double drop, double dup, double reorder, uint64_t seed)
{
    struct cmfx f;
    sidr_init(&f, seed, 4, 4, 18515);
    settle_faulty(&f, drop, dup, reorder, 0);
    bool seen[4] = {0};
    for (uint32_t i = 0; i < 4; i++) {
        struct op_rdma_cm_side p, q;
        uint32_t ip;
        uint16_t port;
        uint32_t j = active_established(&f, i, &p, seen); /* the UD listener that answered */
        assert_int_equal(p.transport, OP_RDMA_CM_UD);
        assert_int_equal(p.qkey, 0x11110000u + p.qpn);
        /* the listener learned the requester's private data and address */
        assert_int_equal(op_rdma_cm_state(f.cm[1], 1 + j), OP_RDMA_CM_ESTABLISHED);
        assert_int_equal(op_rdma_cm_peer(f.cm[1], 1 + j, &q, &ip, &port), OP_OK);
        assert_int_equal(q.qpn, 0); /* a SIDR_REQ names no QP */
        assert_int_equal(q.private_data[5], (uint8_t)(i + 5));
        assert_int_equal(q.transport, OP_RDMA_CM_UD);
        assert_int_equal(ip, RSIM_IP_A);
    }
    assert_int_equal(op_rdma_cm_state(f.cm[1], 0), OP_RDMA_CM_IDLE);
    assert_int_equal(op_rdma_cm_counters(f.cm[1])[OP_RDMA_CM_C_cm_rej_sent], 0);
    if (drop > 0 || dup > 0)
        assert_repaired(&f);
    rsim_free(&f.s);
}

static void test_sidr_exchange(void **state)
{
    (void)state;
    static const double faults[][3] = {{0, 0, 0}, {0.3, 0.2, 0.3}, {0.5, 0, 0}};
    for (uint64_t k = 0; k < 3; k++)
        sidr_exchange(faults[k][0], faults[k][1], faults[k][2], 11 + k);
}

/* A lost SIDR_REP: the requester asks again and the listener, which took
 * its slot at the first SIDR_REQ, answers the same (no second slot). */
static void test_sidr_lost_reply_answered_again(void **state)
{
    (void)state;
    struct cmfx f;
    sidr_init(&f, 14, 1, 2, 18515);
    f.s.link[1].drop = 1.0; /* every SIDR_REP for 5 ms */
    struct settled w = {&f, {1, 0}};
    assert_false(rsim_run(&f.s, all_settled, &w, 5 * OP_NS_PER_MS));
    f.s.link[1].drop = 0;
    assert_true(rsim_run(&f.s, all_settled, &w, LIMIT_NS));
    struct op_rdma_cm_side p;
    uint32_t ip;
    uint16_t port;
    assert_int_equal(op_rdma_cm_peer(f.cm[0], 0, &p, &ip, &port), OP_OK);
    assert_int_equal(p.qpn, 0x40);
    assert_true(op_rdma_cm_counters(f.cm[1])[OP_RDMA_CM_C_cm_duplicates] >= 3);
    assert_int_equal(op_rdma_cm_state(f.cm[1], 2), OP_RDMA_CM_IDLE); /* the second: free */
    rsim_free(&f.s);
}

/* The requester i of cm[0] failed with this in its cause. */
static void expect_failed(struct cmfx *f, uint32_t i, const char *cause)
{
    assert_int_equal(op_rdma_cm_state(f->cm[0], i), OP_RDMA_CM_FAILED);
    if (strstr(op_rdma_cm_error(f->cm[0], i), cause) == NULL)
        fail_msg("cause '%s', expected '%s'", op_rdma_cm_error(f->cm[0], i), cause);
}

/* Another port: status 1; more requesters than UD listeners: status 3 for
 * the last; an RC REQ to UD listeners only: REJ 9; no answer: a cause. */
static void test_sidr_refusals(void **state)
{
    (void)state;
    struct cmfx f;
    sidr_init(&f, 15, 1, 1, 18516);
    struct settled w = {&f, {1, 0}};
    assert_true(rsim_run(&f.s, all_settled, &w, LIMIT_NS));
    expect_failed(&f, 0, "the peer refused the SIDR_REQ (status 1: service ID not supported");
    assert_int_equal(op_rdma_cm_state(f.cm[1], 1), OP_RDMA_CM_IDLE);
    assert_int_equal(op_rdma_cm_counters(f.cm[1])[OP_RDMA_CM_C_cm_rej_sent], 1);
    assert_int_equal(op_rdma_cm_counters(f.cm[0])[OP_RDMA_CM_C_cm_rej_recv], 1);
    rsim_free(&f.s);

    sidr_init(&f, 16, 3, 2, 18515);
    struct settled w3 = {&f, {3, 0}};
    assert_true(rsim_run(&f.s, all_settled, &w3, LIMIT_NS));
    int failed = 0;
    for (uint32_t i = 0; i < 3; i++)
        if (op_rdma_cm_state(f.cm[0], i) == OP_RDMA_CM_FAILED) {
            expect_failed(&f, i, "status 3: no QP available");
            failed++;
        }
    assert_int_equal(failed, 1);
    assert_int_equal(op_rdma_cm_state(f.cm[1], 0), OP_RDMA_CM_IDLE); /* the RC listener */
    rsim_free(&f.s);

    /* an RC REQ to UD listeners only */
    rsim_init(&f.s, 17);
    const struct op_rdma_cm_config one = {.nconn = 1, .retry_ns = OP_NS_PER_MS, .max_retries = 30};
    assert_int_equal(op_rdma_cm_create(f.s.dev[0], &one, &f.cm[0]), OP_OK);
    assert_int_equal(op_rdma_cm_create(f.s.dev[1], &one, &f.cm[1]), OP_OK);
    struct op_rdma_cm_side s = ud_side(0x40, 0x80);
    assert_int_equal(op_rdma_cm_listen(f.cm[1], 0, &s), OP_OK);
    s = side(0x20, 0);
    expect_rejected(&f, 0, &s, "REJ reason 9: invalid transport service type", 1);
    rsim_free(&f.s);

    sidr_init(&f, 18, 1, 1, 18515);
    f.s.link[0].dead = true;
    assert_true(rsim_run(&f.s, all_settled, &w, LIMIT_NS));
    expect_failed(&f, 0, "no SIDR_REP from 127.0.0.2:4791 after 31 tries");
    rsim_free(&f.s);
}

/* ---- the listener in front of several clients' CMs */
static uint8_t lbuf[8][OP_IO_BUF_SIZE];

/* Message m from ip:port to B:4791 (dst: what the receiving socket knows,
 * 0 for one on every address), in packet slot k. */
static struct op_pkt cm_from(int k, const struct op_cm_msg *m, uint32_t ip, uint16_t port,
                             uint32_t dst)
{
    struct op_pkt p = {.flow = {.src.v4 = ip, .src_port = port, .dst.v4 = RSIM_IP_B,
                                .dst_port = OP_ROCE_UDP_PORT},
                       .data = lbuf[k]};
    p.len = (uint32_t)op_cm_packet_encode(&p.flow, 1, m, p.data, OP_IO_BUF_SIZE);
    p.flow.dst.v4 = dst;
    return p;
}

static struct op_cm_msg req_to_b(uint32_t comm_id, uint16_t port)
{
    struct op_cm_msg m = sample(OP_CM_REQ);
    m.local_comm_id = comm_id;
    m.service_id = OP_CM_SERVICE_RDMA_TCP | port;
    memset(m.remote_gid, 0, 16);
    m.remote_gid[10] = m.remote_gid[11] = 0xff;
    m.remote_gid[12] = 127;
    m.remote_gid[15] = 2; /* RSIM_IP_B */
    return m;
}

/* The reply a refused packet got: decoded, sent back to where it came from. */
static struct op_cm_msg refusal(const struct op_pkt *req, const struct op_pkt *reply)
{
    struct op_cm_msg d;
    enum op_cm_err why;
    assert_int_equal(reply->flow.dst.v4, req->flow.src.v4);
    assert_int_equal(reply->flow.dst_port, req->flow.src_port);
    assert_int_equal(reply->flow.src.v4, RSIM_IP_B);
    assert_int_equal(op_cm_packet_decode(&reply->flow, reply->data, reply->len, &d, &why), OP_OK);
    return d;
}

static void test_listener_dispatches_clients(void **state)
{
    (void)state;
    struct op_rdma_cm_listener *l;
    assert_int_equal(op_rdma_cm_listener_create(18515, 2, &l), OP_OK);
    struct op_pkt reply = {.data = lbuf[7]};
    uint32_t client = 99;
    struct op_cm_msg m = req_to_b(0x11, 18515);
    struct op_pkt a = cm_from(0, &m, RSIM_IP_A, 4791, RSIM_IP_B);
    assert_int_equal(op_rdma_cm_listener_input(l, &a, &reply, &client), OP_RDMA_CM_NEW_CLIENT);
    assert_int_equal(client, 0);
    assert_int_equal(op_rdma_cm_listener_input(l, &a, &reply, &client), OP_RDMA_CM_SAME_CLIENT);
    assert_int_equal(client, 0);
    /* the same communication ID from another address is another client; on a
     * socket of every address the REQ's primary path names ours */
    struct op_pkt b = cm_from(1, &m, RSIM_IP_A + 1, 4791, 0);
    assert_int_equal(op_rdma_cm_listener_input(l, &b, &reply, &client), OP_RDMA_CM_NEW_CLIENT);
    assert_int_equal(client, 1);
    assert_int_equal(b.flow.dst.v4, RSIM_IP_B);
    /* full: REJ reason 1, to the third client's communication ID */
    struct op_cm_msg m3 = req_to_b(0x33, 18515);
    struct op_pkt c = cm_from(2, &m3, RSIM_IP_A + 2, 4791, RSIM_IP_B);
    assert_int_equal(op_rdma_cm_listener_input(l, &c, &reply, &client), OP_RDMA_CM_REFUSED);
    struct op_cm_msg d = refusal(&c, &reply);
    assert_int_equal(d.attr, OP_CM_REJ);
    assert_int_equal(d.reason, 1);
    assert_int_equal(d.remote_comm_id, 0x33);
    assert_int_equal(d.tid, m3.tid);
    /* another port: REJ reason 8 */
    struct op_cm_msg m4 = req_to_b(0x44, 18516);
    struct op_pkt e = cm_from(3, &m4, RSIM_IP_A + 3, 4791, RSIM_IP_B);
    assert_int_equal(op_rdma_cm_listener_input(l, &e, &reply, &client), OP_RDMA_CM_REFUSED);
    d = refusal(&e, &reply);
    assert_int_equal(d.attr, OP_CM_REJ);
    assert_int_equal(d.reason, 8);
    /* SIDR_REQs: for our UD service status 3 (its QPs resolve at the
     * client's port), for another status 1 */
    struct op_cm_msg sq = sample(OP_CM_SIDR_REQ);
    sq.service_id = OP_CM_SERVICE_RDMA_UDP | 18515;
    struct op_pkt f = cm_from(4, &sq, RSIM_IP_A, 4791, RSIM_IP_B);
    assert_int_equal(op_rdma_cm_listener_input(l, &f, &reply, &client), OP_RDMA_CM_REFUSED);
    d = refusal(&f, &reply);
    assert_int_equal(d.attr, OP_CM_SIDR_REP);
    assert_int_equal(d.status, OP_CM_SIDR_NO_QP);
    assert_int_equal(d.local_comm_id, sq.local_comm_id);
    sq.service_id = OP_CM_SERVICE_RDMA_UDP | 1;
    f = cm_from(4, &sq, RSIM_IP_A, 4791, RSIM_IP_B);
    assert_int_equal(op_rdma_cm_listener_input(l, &f, &reply, &client), OP_RDMA_CM_REFUSED);
    assert_int_equal(refusal(&f, &reply).status, OP_CM_SIDR_UNSUPPORTED);
    /* answers, garbage, a wrong ICRC: dropped and counted */
    struct op_cm_msg rep = sample(OP_CM_REP);
    struct op_pkt g = cm_from(5, &rep, RSIM_IP_A, 4791, RSIM_IP_B);
    assert_int_equal(op_rdma_cm_listener_input(l, &g, &reply, &client), OP_RDMA_CM_DROPPED);
    g.len = 40;
    assert_int_equal(op_rdma_cm_listener_input(l, &g, &reply, &client), OP_RDMA_CM_DROPPED);
    struct op_pkt h = cm_from(6, &m3, RSIM_IP_A, 4791, RSIM_IP_B);
    h.data[100] ^= 1; /* not resealed */
    assert_int_equal(op_rdma_cm_listener_input(l, &h, &reply, &client), OP_RDMA_CM_DROPPED);
    const uint64_t *cn = op_rdma_cm_listener_counters(l), *dr = op_rdma_cm_listener_drops(l);
    assert_int_equal(cn[OP_RDMA_CM_C_cm_pkts_in], 10);
    assert_int_equal(cn[OP_RDMA_CM_C_cm_duplicates], 1);
    assert_int_equal(cn[OP_RDMA_CM_C_cm_rej_sent], 4);
    assert_int_equal(cn[OP_RDMA_CM_C_cm_malformed], 2);
    assert_int_equal(dr[OP_CM_E_length], 1);
    assert_int_equal(dr[OP_CM_E_icrc], 1);
    op_rdma_cm_listener_destroy(l);
    assert_int_equal(op_rdma_cm_listener_create(18515, 0, &l), OP_ERR_INVAL);
}

/* Garbage to QP 1 is counted by its reason; data QPs are unaffected. */
static void test_garbage_to_qp1_counted(void **state)
{
    (void)state;
    struct cmfx f;
    cmfx_init(&f, 6, 1, 1);
    uint8_t buf[OP_CM_PKT_LEN];
    struct op_cm_msg m = sample(OP_CM_RTU);
    struct op_flow fl = {.src.v4 = RSIM_IP_A, .dst.v4 = RSIM_IP_B, .src_port = 4791,
                         .dst_port = 4791};
    assert_int_equal(op_cm_packet_encode(&fl, 1, &m, buf, sizeof buf), OP_CM_PKT_LEN);
    struct op_pkt p = {.flow = fl, .data = buf, .len = OP_CM_PKT_LEN};
    rsim_deliver(&f.s, &p); /* an RTU for no connection */
    buf[OP_BTH_LEN + OP_DETH_LEN + 1] = 0x04;
    (void)op_icrc_seal(&fl, buf, OP_CM_PKT_LEN - OP_ICRC_LEN, sizeof buf);
    rsim_deliver(&f.s, &p);
    p.len = 40;
    rsim_deliver(&f.s, &p);
    const uint64_t *c = op_rdma_cm_counters(f.cm[1]), *d = op_rdma_cm_drops(f.cm[1]);
    assert_int_equal(c[OP_RDMA_CM_C_cm_unknown], 1);
    assert_int_equal(d[OP_CM_E_mgmt_class], 1);
    assert_int_equal(d[OP_CM_E_length], 1);
    assert_int_equal(c[OP_RDMA_CM_C_cm_malformed], 2);
    rsim_free(&f.s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mads_round_trip),
        cmocka_unit_test(test_malformed_refused_with_reason),
        cmocka_unit_test(test_exchange),
        cmocka_unit_test(test_no_slot_is_rejected),
        cmocka_unit_test(test_dead_peer_gives_a_cause),
        cmocka_unit_test(test_peer_known_from_the_req),
        cmocka_unit_test(test_other_service_is_rejected),
        cmocka_unit_test(test_transport_type_is_matched),
        cmocka_unit_test(test_sidr_exchange),
        cmocka_unit_test(test_sidr_lost_reply_answered_again),
        cmocka_unit_test(test_sidr_refusals),
        cmocka_unit_test(test_listener_dispatches_clients),
        cmocka_unit_test(test_garbage_to_qp1_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
