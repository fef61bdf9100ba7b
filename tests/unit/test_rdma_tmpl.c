/* The ping-pong's templates (src/rdma/tmpl.c): a WRITE built from the last
 * one's headers is byte for byte the packet the wire codec builds (ICRC
 * included); a ping-pong under loss, duplication and reordering still
 * delivers every message exactly, with most packets taken as the guessed
 * next WRITE; a packet that only looks like the guess (a flipped bit, an
 * old PSN, another sender, a region gone) is refused as the general path
 * refuses it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rdmasim.h"

#define BUF 4096
#define MAXREC 64
#define PKT_MAX 512
#define LIMIT_NS (10 * OP_NS_PER_S)
#define SIGNAL_EVERY 4 /* rounds; ib_write_lat signals every 8th message */
#define PSN_A 0xfffff0u /* side 0's PSNs wrap during a test */

struct rec {
    struct op_flow flow;
    uint32_t len;
    uint8_t data[PKT_MAX];
};

struct tfx {
    struct rsim s;
    struct rsim_ep ep[2];
    uint8_t *mem[2]; /* per side: [0, BUF) what it sends, [BUF, 2 BUF) what it is sent */
    struct op_rdma_mr *mr[2];
    struct rec rec[MAXREC]; /* side 0's first WRITEs as sent */
    int nrec;
    uint8_t last_ack[OP_BTH_LEN + OP_AETH_LEN]; /* side 1's last ACK */
    size_t size;
    uint64_t want; /* the done check: side `to` holds message `want` */
    int to;
};

static struct tfx *hooked; /* the hook's way back to its fixture (one test at a time) */

static bool record(struct rsim *s, int from, const struct op_pkt *p)
{
    (void)s;
    struct tfx *f = hooked;
    if (from == 0 && (p->data[0] & 0x1fu) == OP_RC_WRITE_ONLY && f->nrec < MAXREC &&
        op_pkt_wire_len(p) <= PKT_MAX) {
        struct rec *r = &f->rec[f->nrec++];
        r->flow = p->flow;
        r->len = op_pkt_flatten(p, r->data, PKT_MAX);
    }
    if (from == 1 && p->data[0] == OP_RC_ACK)
        memcpy(f->last_ack, p->data, sizeof f->last_ack);
    return false;
}

static void tfx_init(struct tfx *f, enum op_rdma_qp_type type, uint64_t seed, size_t size)
{
    memset(f, 0, sizeof(*f));
    rsim_init(&f->s, seed);
    const struct rsim_qp_opts o = {.type = type, .mtu = 1024, .retry_cnt = 7, .rnr_retry = 7,
                                   .timeout = 8, .psn_a = PSN_A, .psn_b = 77};
    rsim_connect(&f->s, &o, &f->ep[0], &f->ep[1]);
    for (int i = 0; i < 2; i++) {
        f->mem[i] = calloc(2, BUF);
        assert_non_null(f->mem[i]);
        assert_int_equal(op_rdma_reg_mr(f->s.dev[i], f->mem[i], 2 * BUF,
                                        OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE,
                                        &f->mr[i]),
                         OP_OK);
    }
    f->size = size;
    hooked = f;
    f->s.hook = record;
}

static void tfx_free(struct tfx *f)
{
    rsim_free(&f->s);
    free(f->mem[0]);
    free(f->mem[1]);
    hooked = NULL;
}

static uint8_t msg_byte(uint64_t k, size_t j) { return (uint8_t)(k * 31 + j * 7 + 1); }

static bool arrived(void *arg)
{
    const struct tfx *f = arg;
    const uint8_t *t = f->mem[f->to] + BUF;
    for (size_t j = 0; j < f->size; j++)
        if (t[j] != msg_byte(f->want, j))
            return false;
    return true;
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

static uint64_t qc(const struct tfx *f, int side, unsigned c)
{
    return op_rdma_qp_counters(f->ep[side].qp)[c];
}

/* Side `from` WRITEs message k into its peer's target half, as
 * ib_write_lat does (every SIGNAL_EVERY-th round's signaled), and the peer sees it
 * whole; completions are reaped. */
static void write_msg(struct tfx *f, int from, uint64_t k)
{
    int to = 1 - from;
    for (size_t j = 0; j < f->size; j++)
        f->mem[from][j] = msg_byte(k, j);
    struct op_rdma_sge sg = {(uint64_t)(uintptr_t)f->mem[from], (uint32_t)f->size,
                             op_rdma_mr_lkey(f->mr[from])};
    struct op_rdma_send_wr wr = {
        .wr_id = k, .opcode = OP_RDMA_WR_RDMA_WRITE, .sg_list = &sg, .num_sge = 1,
        .send_flags = k / 2 % SIGNAL_EVERY == SIGNAL_EVERY - 1 ? OP_RDMA_SEND_SIGNALED : 0,
        .rdma = {(uint64_t)(uintptr_t)(f->mem[to] + BUF), op_rdma_mr_rkey(f->mr[to])}};
    assert_int_equal(op_rdma_post_send(f->ep[from].qp, &wr, f->s.now, &f->s.q), OP_OK);
    f->want = k;
    f->to = to;
    assert_true(rsim_run(&f->s, arrived, f, LIMIT_NS));
    struct op_rdma_wc wc[8];
    int n;
    while ((n = op_rdma_poll_cq(f->ep[from].scq, 8, wc)) > 0)
        for (int i = 0; i < n; i++)
            assert_int_equal(wc[i].status, OP_RDMA_WC_SUCCESS);
}

static void ping_pong(struct tfx *f, uint64_t rounds)
{
    for (uint64_t k = 0; k < rounds; k++) {
        write_msg(f, 0, 2 * k);
        write_msg(f, 1, 2 * k + 1);
    }
}

/* Side 0's k-th packet (its message 2k) as the wire codec builds it. */
static uint32_t reference(const struct tfx *f, enum op_rdma_qp_type type, uint64_t k,
                          bool ackreq, uint8_t *out)
{
    uint8_t pad = (uint8_t)((0u - f->size) & 3u);
    const struct op_bth bth = {
        .opcode = (uint8_t)(OP_RC_WRITE_ONLY | (type == OP_RDMA_QPT_UC ? OP_UC_BASE : 0)),
        .padcnt = pad, .pkey = 0xffff, .dest_qp = op_rdma_qp_num(f->ep[1].qp),
        .ackreq = ackreq, .psn = (uint32_t)(PSN_A + k) & 0xffffffu};
    const struct op_reth reth = {.va = (uint64_t)(uintptr_t)(f->mem[1] + BUF),
                                 .rkey = op_rdma_mr_rkey(f->mr[1]),
                                 .dma_len = (uint32_t)f->size};
    op_bth_encode(&bth, out);
    op_reth_encode(&reth, out + OP_BTH_LEN);
    size_t n = OP_BTH_LEN + OP_RETH_LEN;
    for (size_t j = 0; j < f->size; j++)
        out[n++] = msg_byte(2 * k, j);
    memset(out + n, 0, pad);
    const struct op_flow flow = {.src.v4 = RSIM_IP_A, .src_port = OP_ROCE_UDP_PORT,
                                 .dst.v4 = RSIM_IP_B, .dst_port = OP_ROCE_UDP_PORT};
    return (uint32_t)op_icrc_seal(&flow, out, n + pad, PKT_MAX);
}

static void check_identical(enum op_rdma_qp_type type, size_t size)
{
    struct tfx f;
    uint8_t ref[PKT_MAX];
    tfx_init(&f, type, 11 + size, size);
    ping_pong(&f, 20);
    assert_int_equal(f.nrec, 20);
    for (int k = 0; k < f.nrec; k++) {
        /* AckReq on RC's signaled messages only: the queue is never half full */
        bool ackreq = type == OP_RDMA_QPT_RC && k % SIGNAL_EVERY == SIGNAL_EVERY - 1;
        assert_int_equal((f.rec[k].data[8] & 0x80u) != 0, ackreq);
        uint32_t n = reference(&f, type, (uint64_t)k, ackreq, ref);
        assert_int_equal(f.rec[k].len, n);
        assert_memory_equal(f.rec[k].data, ref, n);
        assert_int_equal(f.rec[k].flow.dst.v4, RSIM_IP_B);
        assert_true(op_icrc_check(&f.rec[k].flow, f.rec[k].data, f.rec[k].len));
    }
    if (type == OP_RDMA_QPT_RC) { /* the delayed ACK's MSN counts every message taken */
        (void)rsim_run(&f.s, never, NULL, OP_NS_PER_S);
        struct op_aeth aeth;
        assert_int_equal(op_aeth_decode(f.last_ack + OP_BTH_LEN, OP_AETH_LEN, &aeth), OP_OK);
        assert_int_equal(aeth.msn, 20);
    }
    /* the first of each side goes the long way, then every one is a twin */
    assert_int_equal(qc(&f, 0, OP_RDMA_QP_C_tmpl_out), 19);
    assert_int_equal(qc(&f, 1, OP_RDMA_QP_C_tmpl_out), 19);
    assert_int_equal(qc(&f, 1, OP_RDMA_QP_C_tmpl_in), 19);
    assert_int_equal(qc(&f, 0, OP_RDMA_QP_C_tmpl_in), 19);
    tfx_free(&f);
}

static void test_template_packets_identical(void **state)
{
    (void)state;
    static const size_t sizes[] = {1, 2, 7, 64, 256};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        check_identical(OP_RDMA_QPT_RC, sizes[i]);
        check_identical(OP_RDMA_QPT_UC, sizes[i]);
    }
}

/* A ping-pong over a link that loses, duplicates and reorders both ways:
 * every message arrives whole and in turn (write_msg waits for each), the
 * last ones are what both regions hold once the link is quiet (no stale
 * copy landed after), and the guess took most of them. */
static void check_faults(enum op_rdma_qp_type type, uint64_t seed)
{
    struct tfx f;
    tfx_init(&f, type, seed, 8);
    bool rc = type == OP_RDMA_QPT_RC;
    for (int i = 0; i < 2; i++) /* UC loses a message for good: no loss there */
        f.s.link[i] = (struct rsim_link){.drop = rc ? 0.05 : 0, .dup = 0.1, .reorder = 0.2,
                                         .jitter_ns = 40 * OP_NS_PER_US};
    ping_pong(&f, 300);
    f.s.hook = NULL;
    (void)rsim_run(&f.s, never, NULL, OP_NS_PER_S); /* every copy and timer played out */
    for (int side = 0; side < 2; side++)
        for (size_t j = 0; j < f.size; j++)
            assert_int_equal(f.mem[side][BUF + j], msg_byte(side == 1 ? 598 : 599, j));
    assert_true(f.s.dropped[0] + f.s.dropped[1] > 0 || !rc);
    assert_true(qc(&f, 1, OP_RDMA_QP_C_tmpl_in) > 200);
    assert_true(qc(&f, 0, OP_RDMA_QP_C_tmpl_in) > 200);
    assert_true(qc(&f, 0, OP_RDMA_QP_C_tmpl_out) > 200);
    if (rc) {
        assert_true(qc(&f, 1, OP_RDMA_QP_C_duplicates) > 0);
        assert_true(qc(&f, 0, OP_RDMA_QP_C_retransmissions) > 0);
        assert_int_equal(op_rdma_qp_state(f.ep[0].qp), OP_RDMA_QPS_RTS);
        assert_int_equal(op_rdma_qp_state(f.ep[1].qp), OP_RDMA_QPS_RTS);
    }
    tfx_free(&f);
}

static void test_loss_dup_reorder_exact(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        check_faults(OP_RDMA_QPT_RC, seed);
        check_faults(OP_RDMA_QPT_UC, seed);
    }
}

/* The next WRITE as side 0 would send it (PSN next, payload of message
 * k), from `port`, into rec; its ICRC sealed for that flow. */
static void forge(const struct tfx *f, uint32_t psn, uint64_t k, uint16_t port, struct rec *r)
{
    *r = f->rec[f->nrec - 1];
    r->flow.src_port = port;
    r->data[9] = (uint8_t)(psn >> 16);
    r->data[10] = (uint8_t)(psn >> 8);
    r->data[11] = (uint8_t)psn;
    for (size_t j = 0; j < f->size; j++)
        r->data[OP_BTH_LEN + OP_RETH_LEN + j] = msg_byte(k, j);
    r->len = (uint32_t)op_icrc_seal(&r->flow, r->data, r->len - OP_ICRC_LEN, PKT_MAX);
}

static void deliver(struct tfx *f, struct rec *r)
{
    const struct op_pkt p = {.flow = r->flow, .len = r->len, .data = r->data};
    rsim_deliver(&f->s, &p);
}

static bool holds(const struct tfx *f, uint64_t k)
{
    for (size_t j = 0; j < f->size; j++)
        if (f->mem[1][BUF + j] != msg_byte(k, j))
            return false;
    return true;
}

static void check_lookalikes(enum op_rdma_qp_type type)
{
    struct tfx f;
    struct rec r;
    bool rc = type == OP_RDMA_QPT_RC;
    tfx_init(&f, type, 5, 6);
    ping_pong(&f, 3); /* side 1 holds message 4, expects PSN_A + 3 */
    uint32_t next = (PSN_A + 3) & 0xffffffu;
    uint64_t in = qc(&f, 1, OP_RDMA_QP_C_tmpl_in);
    /* a bit flipped after sealing: the ICRC refuses it */
    forge(&f, next, 100, OP_ROCE_UDP_PORT, &r);
    r.data[OP_BTH_LEN + OP_RETH_LEN] ^= 0x10;
    deliver(&f, &r);
    assert_int_equal(qc(&f, 1, OP_RDMA_QP_C_drop_icrc), 1);
    /* the last PSN again, other bytes: RC answers a duplicate, UC takes it
     * the general way (a new message after a gap), never the guess */
    forge(&f, (next - 1) & 0xffffffu, 101, OP_ROCE_UDP_PORT, &r);
    deliver(&f, &r);
    assert_int_equal(qc(&f, 1, OP_RDMA_QP_C_duplicates), rc ? 1 : 0);
    assert_true(holds(&f, rc ? 4 : 101));
    assert_int_equal(qc(&f, 1, OP_RDMA_QP_C_tmpl_in), in);
    if (!rc) { /* UC now expects `next` again: put message 4 back */
        forge(&f, (next - 1) & 0xffffffu, 4, OP_ROCE_UDP_PORT, &r);
        deliver(&f, &r);
    }
    /* another sender: refused */
    forge(&f, next, 102, OP_ROCE_UDP_PORT + 1, &r);
    deliver(&f, &r);
    assert_int_equal(qc(&f, 1, OP_RDMA_QP_C_drop_source), 1);
    assert_true(holds(&f, 4));
    assert_int_equal(qc(&f, 1, OP_RDMA_QP_C_tmpl_in), in);
    /* the real next one: the guess */
    forge(&f, next, 103, OP_ROCE_UDP_PORT, &r);
    deliver(&f, &r);
    assert_true(holds(&f, 103));
    assert_int_equal(qc(&f, 1, OP_RDMA_QP_C_tmpl_in), in + 1);
    /* its region deregistered: the general path refuses the next */
    op_rdma_dereg_mr(f.mr[1]);
    forge(&f, (next + 1) & 0xffffffu, 104, OP_ROCE_UDP_PORT, &r);
    deliver(&f, &r);
    assert_true(holds(&f, 103));
    assert_int_equal(qc(&f, 1, OP_RDMA_QP_C_tmpl_in), in + 1);
    assert_int_equal(qc(&f, 1, rc ? OP_RDMA_QP_C_nak_access_sent : OP_RDMA_QP_C_drop_access), 1);
    tfx_free(&f);
}

static void test_lookalikes_refused(void **state)
{
    (void)state;
    check_lookalikes(OP_RDMA_QPT_RC);
    check_lookalikes(OP_RDMA_QPT_UC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_template_packets_identical),
        cmocka_unit_test(test_loss_dup_reorder_exact),
        cmocka_unit_test(test_lookalikes_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
