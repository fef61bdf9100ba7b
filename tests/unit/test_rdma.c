/* RoCEv2 QP engines, two devices on an in-memory link: every operation at
 * the MTU edges, deep queues, loss, duplication and reordering both ways,
 * RNR, protection errors, retry exhaustion, malformed packets, UC and UD. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rdmasim.h"

#define MIB (1024u * 1024u)
#define ALL_ACCESS                                                                                 \
    (OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE | OP_RDMA_ACCESS_REMOTE_READ)
#define LIMIT_NS (60 * OP_NS_PER_S)

struct buf {
    uint8_t *p;
    size_t len;
    struct op_rdma_mr *mr;
};

static void buf_new(struct op_rdma_dev *dev, size_t len, unsigned access, struct buf *b)
{
    b->len = len;
    b->p = calloc(1, len ? len : 1);
    assert_non_null(b->p);
    assert_int_equal(op_rdma_reg_mr(dev, b->p, len, access, &b->mr), OP_OK);
}

static void buf_free(struct buf *b)
{
    op_rdma_dereg_mr(b->mr);
    free(b->p);
}

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
    struct op_rng r;
    op_rng_seed(&r, seed);
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)op_rng_next(&r);
}

static uint64_t va(const struct buf *b, size_t off) { return (uint64_t)(uintptr_t)(b->p + off); }

static struct op_rdma_sge sge(const struct buf *b, size_t off, size_t len)
{
    return (struct op_rdma_sge){.addr = va(b, off), .length = (uint32_t)len,
                                .lkey = op_rdma_mr_lkey(b->mr)};
}

/* Post one signaled WR of len bytes from/to local[loff]; remote: rb[roff]. */
static op_status_t post(struct rsim *s, struct rsim_ep *e, enum op_rdma_wr_opcode op,
                        const struct buf *local, size_t loff, size_t len, const struct buf *rb,
                        size_t roff, uint64_t wr_id, uint32_t imm)
{
    struct op_rdma_sge sg = sge(local, loff, len);
    struct op_rdma_send_wr wr = {.wr_id = wr_id, .opcode = op, .send_flags = OP_RDMA_SEND_SIGNALED,
                                 .sg_list = &sg, .num_sge = 1, .imm_data = imm};
    if (rb != NULL) {
        wr.rdma.remote_addr = va(rb, roff);
        wr.rdma.rkey = op_rdma_mr_rkey(rb->mr);
    }
    return op_rdma_post_send(e->qp, &wr, s->now, &s->q);
}

static void post_recv(struct rsim_ep *e, const struct buf *b, size_t off, size_t len,
                      uint64_t wr_id)
{
    struct op_rdma_sge sg = sge(b, off, len);
    struct op_rdma_recv_wr wr = {.wr_id = wr_id, .sg_list = &sg, .num_sge = 1};
    assert_int_equal(op_rdma_post_recv(e->qp, &wr), OP_OK);
}

/* Completions gathered from some CQs until each has its count. */
struct coll {
    struct op_rdma_cq *cq;
    int want, n;
    struct op_rdma_wc *wc;
};

struct colls {
    struct coll *c;
    int n;
};

static bool colls_done(void *arg)
{
    struct colls *cs = arg;
    bool done = true;
    for (int i = 0; i < cs->n; i++) {
        struct coll *c = &cs->c[i];
        c->n += op_rdma_poll_cq(c->cq, c->want + 1 - c->n, c->wc + c->n);
        done = done && c->n >= c->want;
    }
    return done;
}

static void coll_init(struct coll *c, struct op_rdma_cq *cq, int want)
{
    c->cq = cq;
    c->want = want;
    c->n = 0;
    c->wc = calloc((size_t)want + 2, sizeof(*c->wc));
    assert_non_null(c->wc);
}

/* Wait for want_s completions on e's send CQ and want_r on peer's recv CQ. */
static void wait_for(struct rsim *s, struct rsim_ep *e, int want_s, struct rsim_ep *peer,
                     int want_r, struct coll out[2])
{
    coll_init(&out[0], e->scq, want_s);
    coll_init(&out[1], peer->rcq, want_r);
    struct colls cs = {out, 2};
    assert_true(rsim_run(s, colls_done, &cs, LIMIT_NS));
}

static void coll_free(struct coll c[2])
{
    free(c[0].wc);
    free(c[1].wc);
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

/* A hook that loses the nth packet side `from` sends (hook_ctx: a drop_nth). */
struct drop_nth {
    int from, nth, seen;
};

static bool drop_nth(struct rsim *s, int from, const struct op_pkt *p)
{
    struct drop_nth *d = s->hook_ctx;
    (void)p;
    return from == d->from && ++d->seen == d->nth;
}

/* Two connected QPs and three buffers: src on side a, rem (remotely
 * accessible) and rcv (receives) on side b. */
struct fx {
    struct rsim s;
    struct rsim_ep a, b;
    struct buf src, rem, rcv;
    struct coll c[2];
};

static void fx_init(struct fx *f, uint64_t seed, const struct rsim_qp_opts *o, size_t len,
                    unsigned rem_access)
{
    rsim_init(&f->s, seed);
    rsim_connect(&f->s, o, &f->a, &f->b);
    buf_new(f->s.dev[0], len, OP_RDMA_ACCESS_LOCAL_WRITE, &f->src);
    buf_new(f->s.dev[1], len, rem_access, &f->rem);
    buf_new(f->s.dev[1], len, OP_RDMA_ACCESS_LOCAL_WRITE, &f->rcv);
    fill(f->src.p, len, seed);
}

static void fx_free(struct fx *f)
{
    buf_free(&f->src);
    buf_free(&f->rem);
    buf_free(&f->rcv);
    rsim_free(&f->s);
}

static void expect_ok(const struct op_rdma_wc *wc, uint64_t wr_id)
{
    if (wc->status != OP_RDMA_WC_SUCCESS || wc->wr_id != wr_id)
        fail_msg("wr %llu: status %s (%s), wr_id %llu", (unsigned long long)wr_id,
                 op_rdma_wc_status_str(wc->status), wc->cause ? wc->cause : "",
                 (unsigned long long)wc->wr_id);
}

static uint64_t qc(const struct rsim_ep *e, unsigned c) { return op_rdma_qp_counters(e->qp)[c]; }

/* ---- every operation at the MTU edges */
static void one_size(struct rsim *s, struct rsim_ep *a, struct rsim_ep *b, struct buf *bufs,
                     size_t len)
{
    struct buf *src = &bufs[0], *rem = &bufs[1], *back = &bufs[2], *rcv = &bufs[3];
    struct coll c[2];
    fill(src->p, len, len);
    assert_int_equal(post(s, a, OP_RDMA_WR_RDMA_WRITE, src, 0, len, rem, 0, 1, 0), OP_OK);
    wait_for(s, a, 1, b, 0, c);
    expect_ok(&c[0].wc[0], 1);
    assert_int_equal(c[0].wc[0].opcode, OP_RDMA_WC_RDMA_WRITE);
    assert_memory_equal(rem->p, src->p, len);
    coll_free(c);

    memset(back->p, 0, len);
    assert_int_equal(post(s, a, OP_RDMA_WR_RDMA_READ, back, 0, len, rem, 0, 2, 0), OP_OK);
    wait_for(s, a, 1, b, 0, c);
    expect_ok(&c[0].wc[0], 2);
    assert_int_equal(c[0].wc[0].opcode, OP_RDMA_WC_RDMA_READ);
    assert_memory_equal(back->p, src->p, len);
    coll_free(c);

    post_recv(b, rcv, 0, len, 77);
    assert_int_equal(post(s, a, OP_RDMA_WR_SEND_WITH_IMM, src, 0, len, NULL, 0, 3, 0xabcd), OP_OK);
    wait_for(s, a, 1, b, 1, c);
    expect_ok(&c[0].wc[0], 3);
    expect_ok(&c[1].wc[0], 77);
    assert_int_equal(c[1].wc[0].byte_len, len);
    assert_int_equal(c[1].wc[0].imm_data, 0xabcd);
    assert_int_equal(c[1].wc[0].wc_flags, OP_RDMA_WC_WITH_IMM);
    assert_memory_equal(rcv->p, src->p, len);
    coll_free(c);

    post_recv(b, rcv, 0, 0, 78);
    fill(src->p, len, len + 1);
    assert_int_equal(post(s, a, OP_RDMA_WR_RDMA_WRITE_WITH_IMM, src, 0, len, rem, 0, 4, 9), OP_OK);
    wait_for(s, a, 1, b, 1, c);
    expect_ok(&c[1].wc[0], 78);
    assert_int_equal(c[1].wc[0].opcode, OP_RDMA_WC_RECV_RDMA_WITH_IMM);
    assert_int_equal(c[1].wc[0].byte_len, len);
    assert_int_equal(c[1].wc[0].imm_data, 9);
    assert_memory_equal(rem->p, src->p, len);
    coll_free(c);
}

static void test_sizes_at_each_mtu(void **state)
{
    (void)state;
    const uint32_t mtus[] = {256, 1024, 4096};
    for (size_t m = 0; m < 3; m++) {
        struct rsim s;
        struct rsim_ep a, b;
        struct buf bufs[4];
        rsim_init(&s, 1 + m);
        struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = mtus[m], .retry_cnt = 7};
        rsim_connect(&s, &o, &a, &b);
        buf_new(s.dev[0], MIB + 1, OP_RDMA_ACCESS_LOCAL_WRITE, &bufs[0]);
        buf_new(s.dev[1], MIB + 1, ALL_ACCESS, &bufs[1]);
        buf_new(s.dev[0], MIB + 1, OP_RDMA_ACCESS_LOCAL_WRITE, &bufs[2]);
        buf_new(s.dev[1], MIB + 1, OP_RDMA_ACCESS_LOCAL_WRITE, &bufs[3]);
        const size_t sizes[] = {0, 1, mtus[m] - 1, mtus[m], mtus[m] + 1, MIB};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            one_size(&s, &a, &b, bufs, sizes[i]);
        assert_int_equal(qc(&a, OP_RDMA_QP_C_retransmissions), 0);
        assert_int_equal(qc(&b, OP_RDMA_QP_C_duplicates), 0);
        for (int i = 0; i < 4; i++)
            buf_free(&bufs[i]);
        rsim_free(&s);
    }
}

/* ---- a mixed stream of WRs, checked byte for byte */
#define SLICE 20000u

struct workload {
    int n;
    uint32_t mtu;
    struct buf src, rem, back, rcv;
    enum op_rdma_wr_opcode *op;
    uint32_t *len;
    int n_recv;
};

static void workload_init(struct rsim *s, struct workload *w, int n, uint64_t seed)
{
    struct op_rng r;
    op_rng_seed(&r, seed);
    w->n = n;
    w->op = calloc((size_t)n, sizeof(*w->op));
    w->len = calloc((size_t)n, sizeof(*w->len));
    buf_new(s->dev[0], (size_t)n * SLICE, OP_RDMA_ACCESS_LOCAL_WRITE, &w->src);
    buf_new(s->dev[1], (size_t)n * SLICE, ALL_ACCESS, &w->rem);
    buf_new(s->dev[0], (size_t)n * SLICE, OP_RDMA_ACCESS_LOCAL_WRITE, &w->back);
    buf_new(s->dev[1], (size_t)n * SLICE, OP_RDMA_ACCESS_LOCAL_WRITE, &w->rcv);
    fill(w->src.p, w->src.len, seed + 1);
    fill(w->rem.p, w->rem.len, seed + 2);
    w->n_recv = 0;
    for (int i = 0; i < n; i++) {
        w->op[i] = (enum op_rdma_wr_opcode)(op_rng_next(&r) % 5);
        w->len[i] = (uint32_t)(op_rng_next(&r) % SLICE);
        w->n_recv += w->op[i] != OP_RDMA_WR_RDMA_WRITE && w->op[i] != OP_RDMA_WR_RDMA_READ;
    }
}

static void workload_free(struct workload *w)
{
    buf_free(&w->src);
    buf_free(&w->rem);
    buf_free(&w->back);
    buf_free(&w->rcv);
    free(w->op);
    free(w->len);
}

/* WR i uses slice i of every buffer; WRITEs go to the remote slice, READs
 * read it back (written by no WR: its original contents), SENDs land in
 * receive slices posted in order. */
static int workload_post(struct rsim *s, struct rsim_ep *a, struct rsim_ep *b,
                         struct workload *w, int from, int to)
{
    int recvs = 0;
    for (int i = from; i < to; i++) {
        size_t off = (size_t)i * SLICE;
        if (w->op[i] != OP_RDMA_WR_RDMA_WRITE && w->op[i] != OP_RDMA_WR_RDMA_READ) {
            post_recv(b, &w->rcv, off, SLICE, (uint64_t)i);
            recvs++;
        }
        const struct buf *local = w->op[i] == OP_RDMA_WR_RDMA_READ ? &w->back : &w->src;
        assert_int_equal(post(s, a, w->op[i], local, off, w->len[i], &w->rem, off, (uint64_t)i,
                              (uint32_t)i),
                         OP_OK);
    }
    return recvs;
}

static void workload_check(struct workload *w, const struct coll c[2], uint8_t *orig_rem)
{
    int r = 0;
    for (int i = 0; i < w->n; i++) {
        size_t off = (size_t)i * SLICE;
        expect_ok(&c[0].wc[i], (uint64_t)i);
        /* nothing outside a WRITE's range changed: the rest of its slice,
         * and the whole slice of any other WR */
        bool wrote = w->op[i] == OP_RDMA_WR_RDMA_WRITE || w->op[i] == OP_RDMA_WR_RDMA_WRITE_WITH_IMM;
        size_t kept = wrote ? w->len[i] : 0;
        assert_memory_equal(w->rem.p + off + kept, orig_rem + off + kept, SLICE - kept);
        switch (w->op[i]) {
        case OP_RDMA_WR_RDMA_READ:
            assert_memory_equal(w->back.p + off, orig_rem + off, w->len[i]);
            break;
        case OP_RDMA_WR_RDMA_WRITE:
        case OP_RDMA_WR_RDMA_WRITE_WITH_IMM:
            assert_memory_equal(w->rem.p + off, w->src.p + off, w->len[i]);
            break;
        default:
            assert_memory_equal(w->rcv.p + off, w->src.p + off, w->len[i]);
            break;
        }
        if (w->op[i] == OP_RDMA_WR_RDMA_WRITE || w->op[i] == OP_RDMA_WR_RDMA_READ)
            continue;
        /* receives complete once each, in order, with the right length */
        expect_ok(&c[1].wc[r], (uint64_t)i);
        assert_int_equal(c[1].wc[r].byte_len, w->len[i]);
        if (w->op[i] != OP_RDMA_WR_SEND)
            assert_int_equal(c[1].wc[r].imm_data, (uint32_t)i);
        r++;
    }
    assert_int_equal(c[1].n, w->n_recv); /* and nothing more */
}

static void run_workload(struct rsim *s, const struct rsim_qp_opts *o, int n, int batch,
                         uint64_t seed, struct rsim_ep *a, struct rsim_ep *b)
{
    struct workload w;
    struct coll c[2];
    rsim_connect(s, o, a, b);
    workload_init(s, &w, n, seed);
    w.mtu = o->mtu;
    uint8_t *orig = malloc(w.rem.len);
    assert_non_null(orig);
    memcpy(orig, w.rem.p, w.rem.len);
    coll_init(&c[0], a->scq, n);
    coll_init(&c[1], b->rcq, w.n_recv);
    struct colls cs = {c, 2};
    c[1].want = 0;
    for (int i = 0; i < n; i += batch) {
        int to = i + batch < n ? i + batch : n;
        c[1].want += workload_post(s, a, b, &w, i, to);
        /* keep the queues from overflowing: wait until this batch completed */
        c[0].want = to;
        assert_true(rsim_run(s, colls_done, &cs, LIMIT_NS));
    }
    assert_true(rsim_run(s, never, NULL, 10 * OP_NS_PER_MS) == false);
    c[1].n += op_rdma_poll_cq(b->rcq, 1, c[1].wc + c[1].n); /* no late extra */
    workload_check(&w, c, orig);
    free(orig);
    coll_free(c);
    workload_free(&w);
}

static void test_deep_queue_back_to_back(void **state)
{
    (void)state;
    struct rsim s;
    struct rsim_ep a, b;
    rsim_init(&s, 11);
    struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 1024, .depth = 512, .retry_cnt = 7};
    run_workload(&s, &o, 500, 500, 12, &a, &b);
    assert_int_equal(qc(&a, OP_RDMA_QP_C_retransmissions), 0);
    rsim_free(&s);
}

static void print_counters(const struct rsim_ep *a, const struct rsim_ep *b, uint64_t now)
{
    print_message("after %.1f ms:", (double)now / OP_NS_PER_MS);
    for (unsigned i = 0; i < OP_RDMA_QP_C_COUNT_; i++)
        if (qc(a, i) || qc(b, i))
            print_message(" %s %llu/%llu", op_rdma_qp_counter_name(i),
                          (unsigned long long)qc(a, i), (unsigned long long)qc(b, i));
    print_message("\n");
}

static void lossy_as(bool placed, double drop, double dup, double reorder, int n, uint32_t mtu,
                     uint32_t psn, uint64_t seed)
{
    struct rsim s;
    struct rsim_ep a, b;
    rsim_init(&s, seed);
    s.placed = placed;
    for (int i = 0; i < 2; i++)
        s.link[i] = (struct rsim_link){.drop = drop, .dup = dup, .reorder = reorder,
                                       .jitter_ns = 40 * OP_NS_PER_US};
    struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = mtu, .depth = 128, .retry_cnt = 7,
                             .rnr_retry = 7, .timeout = 10, .psn_a = psn, .psn_b = psn + 7};
    run_workload(&s, &o, n, 64, seed + 100, &a, &b);
    print_counters(&a, &b, s.now);
    assert_true(qc(&a, OP_RDMA_QP_C_retransmissions) > 0);
    assert_true(qc(&b, OP_RDMA_QP_C_duplicates) > 0);
    assert_int_equal(op_rdma_qp_state(a.qp), OP_RDMA_QPS_RTS);
    if (placed) { /* payloads were put where foreseen */
        assert_true(qc(&b, OP_RDMA_QP_C_placed) > 0);
    } else {
        assert_int_equal(qc(&b, OP_RDMA_QP_C_placed) + qc(&b, OP_RDMA_QP_C_placed_moved), 0);
    }
    rsim_free(&s);
}

static void lossy(double drop, double dup, double reorder, int n, uint32_t mtu, uint32_t psn,
                  uint64_t seed)
{
    lossy_as(false, drop, dup, reorder, n, mtu, psn, seed);
}

/* The same through placed receives: a duplicate, a packet ahead of its
 * turn or one of another message, read where the next one was foreseen,
 * writes only bytes of the open WRITE not yet received; it is moved where
 * it belongs or dropped, and every byte ends as without placement. */
static void test_loss_dup_reorder_placed(void **state)
{
    (void)state;
    lossy_as(true, 0.05, 0.02, 0.05, 300, 1024, 0, 41);
    lossy_as(true, 0.05, 0.02, 0.05, 150, 4096, 0x123456u, 42);
    lossy_as(true, 0, 0.05, 0.10, 150, 256, 0xffff00u, 43);
}

/* A placed datagram of a duplicate, the packet expected and the last one,
 * read while the rest of a 4-packet WRITE was foreseen: the duplicate's
 * payload lands where the expected one belongs and is dropped, the
 * expected one lands one packet further and is moved back, the last
 * comes whole (the room ended); every byte of the WRITE ends right and
 * none around it changed. */
struct held {
    struct op_pkt pkt[4];
    uint8_t data[4][512];
    int n;
};

/* The first 4 packets a sends are kept, and nothing of a's arrives. */
static bool hold_data(struct rsim *s, int from, const struct op_pkt *p)
{
    struct held *h = s->hook_ctx;
    if (from != 0 || h->n == 4)
        return from == 0;
    memcpy(h->data[h->n], p->data, p->len);
    h->pkt[h->n] = *p;
    h->pkt[h->n].data = h->data[h->n];
    h->n++;
    return true;
}

/* A 1024-byte WRITE to rem+512 in 4 packets of 256, sent and held; orig
 * keeps the region as it was. */
static uint8_t *held_write(struct fx *f, struct held *h, enum op_rdma_qp_type type, unsigned seed)
{
    const struct rsim_qp_opts o = {.type = type, .mtu = 256, .retry_cnt = 7};
    fx_init(f, seed, &o, 2048, ALL_ACCESS);
    uint8_t *orig = malloc(2048);
    assert_non_null(orig);
    memcpy(orig, f->rem.p, 2048);
    f->s.hook = hold_data;
    f->s.hook_ctx = h;
    assert_int_equal(post(&f->s, &f->a, OP_RDMA_WR_RDMA_WRITE, &f->src, 0, 1024, &f->rem, 512, 1, 0),
                     OP_OK);
    assert_false(rsim_run(&f->s, never, NULL, 1000)); /* sent, all held */
    assert_int_equal(h->n, 4);
    f->s.hook = NULL;
    return orig;
}

static void test_placed_misprediction_moved(void **state)
{
    (void)state;
    struct fx f;
    struct held h = {0};
    uint8_t *orig = held_write(&f, &h, OP_RDMA_QPT_RC, 45);
    rsim_deliver(&f.s, &h.pkt[0]);            /* FIRST (a RETH: never foreseen) */
    rsim_deliver_placed(&f.s, &h.pkt[1], 1);  /* MIDDLE where foreseen */
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_placed), 1);
    const struct op_pkt dgram[3] = {h.pkt[1], h.pkt[2], h.pkt[3]};
    rsim_deliver_placed(&f.s, dgram, 3);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_placed), 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_placed_moved), 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_duplicates), 1);
    wait_for(&f.s, &f.a, 1, &f.b, 0, f.c);
    expect_ok(&f.c[0].wc[0], 1);
    assert_memory_equal(f.rem.p + 512, f.src.p, 1024);
    assert_memory_equal(f.rem.p, orig, 512);
    assert_memory_equal(f.rem.p + 1536, orig + 1536, 512);
    coll_free(f.c);
    free(orig);
    fx_free(&f);
}

/* UC: a packet read where the one lost before it belonged would stay there
 * (nothing retransmits), so a UC WRITE's payloads are never placed: after
 * the loss the region keeps what it had, byte for byte. */
static void test_uc_never_placed(void **state)
{
    (void)state;
    struct fx f;
    struct held h = {0};
    uint8_t *orig = held_write(&f, &h, OP_RDMA_QPT_UC, 46);
    struct op_io_place pl;
    rsim_deliver(&f.s, &h.pkt[0]);
    assert_false(op_rdma_dev_rx_place(f.s.dev[1], &pl));
    const struct op_pkt rest[2] = {h.pkt[2], h.pkt[3]}; /* the second lost */
    rsim_deliver_placed(&f.s, rest, 2);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_placed), 0);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_placed_moved), 0);
    assert_memory_equal(f.rem.p + 512, f.src.p, 256);
    assert_memory_equal(f.rem.p, orig, 512);
    assert_memory_equal(f.rem.p + 768, orig + 768, 2048 - 768);
    free(orig);
    fx_free(&f);
}

static void test_loss_dup_reorder_both_ways(void **state)
{
    (void)state;
    lossy(0.05, 0.02, 0.05, 300, 1024, 0, 21);
    lossy(0.05, 0.02, 0.05, 150, 256, 0xffff00u, 22); /* PSNs wrap */
    lossy(0.05, 0.02, 0.05, 150, 4096, 0x123456u, 23);
    lossy(0.05, 0, 0, 150, 1024, 0, 24);
    lossy(0, 0, 0.05, 150, 1024, 0, 25);
}

static void test_heavy_loss(void **state)
{
    (void)state;
    lossy(0.30, 0.02, 0.05, 60, 1024, 0xfffff0u, 31);
}

/* ---- exactly once: a duplicate is acknowledged, never executed again */
struct capture {
    uint8_t data[OP_IO_BUF_SIZE];
    struct op_pkt pkt;
    bool have;
};

static bool capture_first(struct rsim *s, int from, const struct op_pkt *p)
{
    struct capture *c = s->hook_ctx;
    if (from == 0 && !c->have) {
        memcpy(c->data, p->data, p->len);
        c->pkt = *p;
        c->pkt.data = c->data;
        c->have = true;
    }
    return false;
}

static void test_duplicate_never_reapplied(void **state)
{
    (void)state;
    struct fx f;
    struct capture cap = {0};
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7};
    fx_init(&f, 41, &o, 100, ALL_ACCESS);
    f.s.hook = capture_first;
    f.s.hook_ctx = &cap;
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_WRITE, &f.src, 0, 100, &f.rem, 0, 1, 0), OP_OK);
    wait_for(&f.s, &f.a, 1, &f.b, 0, f.c);
    coll_free(f.c);
    memset(f.rem.p, 0x5a, 100); /* the application moved on */
    rsim_deliver(&f.s, &cap.pkt);
    for (int i = 0; i < 100; i++)
        assert_int_equal(f.rem.p[i], 0x5a);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_duplicates), 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_acks_sent), 2); /* the duplicate was re-ACKed */

    cap.have = false;
    post_recv(&f.b, &f.rcv, 0, 100, 5);
    post_recv(&f.b, &f.rcv, 0, 100, 6);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_SEND, &f.src, 0, 100, NULL, 0, 2, 0), OP_OK);
    wait_for(&f.s, &f.a, 1, &f.b, 1, f.c);
    rsim_deliver(&f.s, &cap.pkt);
    assert_false(rsim_run(&f.s, never, NULL, OP_NS_PER_MS));
    assert_int_equal(op_rdma_poll_cq(f.b.rcq, 4, f.c[1].wc), 0); /* receive 6 still posted */
    coll_free(f.c);
    fx_free(&f);
}

/* ---- RNR */
static void test_rnr_then_recv_posted(void **state)
{
    (void)state;
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 256, .retry_cnt = 7,
                                   .rnr_retry = 7, .min_rnr_timer = 14};
    fx_init(&f, 51, &o, 1000, ALL_ACCESS);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_SEND, &f.src, 0, 1000, NULL, 0, 1, 0), OP_OK);
    assert_false(rsim_run(&f.s, never, NULL, 10 * OP_NS_PER_MS));
    assert_true(qc(&f.b, OP_RDMA_QP_C_nak_rnr_sent) >= 5); /* one per 1.28 ms wait */
    assert_true(qc(&f.a, OP_RDMA_QP_C_rnr_waits) >= 5);
    assert_int_equal(op_rdma_poll_cq(f.a.scq, 1, NULL), 0);
    post_recv(&f.b, &f.rcv, 0, 1000, 9);
    wait_for(&f.s, &f.a, 1, &f.b, 1, f.c);
    expect_ok(&f.c[0].wc[0], 1);
    expect_ok(&f.c[1].wc[0], 9);
    assert_memory_equal(f.rcv.p, f.src.p, 1000);
    coll_free(f.c);
    fx_free(&f);
}

static void test_rnr_retry_exhausted(void **state)
{
    (void)state;
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7, .rnr_retry = 2};
    fx_init(&f, 52, &o, 10, ALL_ACCESS);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_SEND, &f.src, 0, 10, NULL, 0, 1, 0), OP_OK);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_SEND, &f.src, 0, 10, NULL, 0, 2, 0), OP_OK);
    wait_for(&f.s, &f.a, 2, &f.b, 0, f.c);
    assert_int_equal(f.c[0].wc[0].status, OP_RDMA_WC_RNR_RETRY_EXC_ERR);
    assert_non_null(strstr(f.c[0].wc[0].cause, "after 2 RNR retries"));
    assert_int_equal(f.c[0].wc[1].status, OP_RDMA_WC_WR_FLUSH_ERR);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_rnr_waits), 3);
    coll_free(f.c);
    fx_free(&f);
}

/* ---- protection: memory untouched, REM_ACCESS_ERR, the rest flushed */
enum prot_case { BAD_RKEY, OUT_OF_BOUNDS, NO_REMOTE_WRITE, NO_REMOTE_READ };

static void protection(enum prot_case pc)
{
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7};
    unsigned access = pc == NO_REMOTE_WRITE  ? OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_READ
                      : pc == NO_REMOTE_READ ? OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE
                                             : ALL_ACCESS;
    fx_init(&f, 61 + (uint64_t)pc, &o, 4096, access);
    post_recv(&f.b, &f.rcv, 0, 4096, 99);
    struct op_rdma_sge sg = sge(&f.src, 0, 2048);
    struct op_rdma_send_wr wr = {.wr_id = 1, .opcode = OP_RDMA_WR_RDMA_WRITE, .sg_list = &sg,
                                 .num_sge = 1, .rdma = {va(&f.rem, 0), op_rdma_mr_rkey(f.rem.mr)}};
    if (pc == BAD_RKEY)
        wr.rdma.rkey ^= 0x10000u;
    if (pc == OUT_OF_BOUNDS)
        wr.rdma.remote_addr = va(&f.rem, 2049);
    if (pc == NO_REMOTE_READ)
        wr.opcode = OP_RDMA_WR_RDMA_READ;
    assert_int_equal(op_rdma_post_send(f.a.qp, &wr, f.s.now, &f.s.q), OP_OK);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_WRITE, &f.src, 0, 100, &f.rem, 0, 2, 0), OP_OK);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_SEND, &f.src, 0, 100, NULL, 0, 3, 0), OP_OK);
    wait_for(&f.s, &f.a, 3, &f.b, 1, f.c);
    const struct op_rdma_wc *wc = f.c[0].wc;
    assert_int_equal(wc[0].status, OP_RDMA_WC_REM_ACCESS_ERR);
    assert_int_equal(wc[0].wr_id, 1);
    assert_non_null(strstr(wc[0].cause, "remote access error"));
    assert_int_equal(wc[1].status, OP_RDMA_WC_WR_FLUSH_ERR);
    assert_int_equal(wc[2].status, OP_RDMA_WC_WR_FLUSH_ERR);
    assert_int_equal(f.c[1].wc[0].status, OP_RDMA_WC_WR_FLUSH_ERR);
    assert_int_equal(op_rdma_qp_state(f.a.qp), OP_RDMA_QPS_ERR);
    assert_int_equal(op_rdma_qp_state(f.b.qp), OP_RDMA_QPS_ERR);
    assert_non_null(strstr(op_rdma_qp_error(f.b.qp), pc == BAD_RKEY        ? "names no memory region"
                                                     : pc == OUT_OF_BOUNDS ? "does not cover"
                                                     : pc == NO_REMOTE_READ ? "lacks REMOTE_READ"
                                                                            : "lacks REMOTE_WRITE"));
    for (int i = 0; i < 4096; i++)
        assert_int_equal(f.rem.p[i], 0);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_nak_access_sent), 1);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_nak_access_recv), 1);
    /* posting to a QP in ERR completes at once, flushed */
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_SEND, &f.src, 0, 1, NULL, 0, 4, 0), OP_OK);
    assert_int_equal(op_rdma_poll_cq(f.a.scq, 2, f.c[0].wc), 1);
    assert_int_equal(f.c[0].wc[0].status, OP_RDMA_WC_WR_FLUSH_ERR);
    coll_free(f.c);
    fx_free(&f);
}

static void test_protection_errors(void **state)
{
    (void)state;
    protection(BAD_RKEY);
    protection(OUT_OF_BOUNDS);
    protection(NO_REMOTE_WRITE);
    protection(NO_REMOTE_READ);
}

/* ---- a dead peer: RETRY_EXC_ERR after (retry_cnt + 1) timeouts */
static void dead_peer(uint8_t retry_cnt)
{
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .timeout = 14, .retry_cnt = retry_cnt};
    fx_init(&f, 71, &o, 64, ALL_ACCESS);
    f.s.link[1].dead = true;
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_WRITE, &f.src, 0, 64, &f.rem, 0, 1, 0), OP_OK);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_READ, &f.src, 0, 64, &f.rem, 0, 2, 0), OP_OK);
    wait_for(&f.s, &f.a, 2, &f.b, 0, f.c);
    uint64_t want = (uint64_t)(retry_cnt + 1) * op_rdma_timeout_ns(14);
    assert_true(f.s.now >= want && f.s.now < want + OP_NS_PER_MS);
    assert_int_equal(f.c[0].wc[0].status, OP_RDMA_WC_RETRY_EXC_ERR);
    assert_non_null(strstr(f.c[0].wc[0].cause, "no ACK for PSN 0x000000 after"));
    assert_int_equal(f.c[0].wc[1].status, OP_RDMA_WC_WR_FLUSH_ERR);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_timeouts), retry_cnt + 1);
    /* probes went first (at 4, 12, 28 and 60 ms, then while each probe
     * timeout stays below 67 ms) and used no retry: the QP still failed after
     * exactly (retry_cnt + 1) configured timeouts */
    assert_true(qc(&f.a, OP_RDMA_QP_C_probes) >= 4);
    print_message("cause: %s\n", f.c[0].wc[0].cause);
    coll_free(f.c);
    fx_free(&f);
}

static void test_retry_exhausted_dead_peer(void **state)
{
    (void)state;
    dead_peer(0);
    dead_peer(6);
}

/* ---- adaptive retransmission: a probe by the measured round trip */
/* n signaled one-packet WRs of op, each awaited: round trips to measure */
static void warm_up_with(struct fx *f, int n, enum op_rdma_wr_opcode op)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(post(&f->s, &f->a, op, &f->src, 0, 64, &f->rem, 0, (uint64_t)i, 0),
                         OP_OK);
        wait_for(&f->s, &f->a, 1, &f->b, 0, f->c);
        expect_ok(&f->c[0].wc[0], (uint64_t)i);
        coll_free(f->c);
    }
}

static void warm_up(struct fx *f, int n) { warm_up_with(f, n, OP_RDMA_WR_RDMA_WRITE); }

/* One lost packet from side `from` after a warm-up; the write completes,
 * by a probe, within a few ms of virtual time (the configured timer is
 * 67 ms). Returns the time it took. */
static uint64_t lose_one_after_warm_up(struct fx *f, int from)
{
    struct drop_nth d = {.from = from, .nth = 1};
    warm_up(f, 4);
    f->s.hook = drop_nth;
    f->s.hook_ctx = &d;
    uint64_t t0 = f->s.now;
    fill(f->src.p, 64, 99);
    assert_int_equal(post(&f->s, &f->a, OP_RDMA_WR_RDMA_WRITE, &f->src, 0, 64, &f->rem, 0, 9, 0),
                     OP_OK);
    wait_for(&f->s, &f->a, 1, &f->b, 0, f->c);
    expect_ok(&f->c[0].wc[0], 9);
    coll_free(f->c);
    assert_int_equal(d.seen > 0, true);
    assert_memory_equal(f->rem.p, f->src.p, 64);
    return f->s.now - t0;
}

/* the tail of a message is lost: nothing later can reveal it */
static void test_tail_loss_recovered_by_probe(void **state)
{
    (void)state;
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .timeout = 14, .retry_cnt = 7};
    fx_init(&f, 221, &o, 64, ALL_ACCESS);
    uint64_t took = lose_one_after_warm_up(&f, 0);
    assert_true(took >= OP_NS_PER_MS && took < 2 * OP_NS_PER_MS); /* the 1 ms floor */
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_probes), 1);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_probes_undone), 0); /* a real loss */
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_timeouts), 0);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_retransmissions), 1);
    fx_free(&f);
}

/* ---- a needless probe: the peer was late (its process off the CPU), not lossy */
struct held_acks {
    bool holding;
    int n;
    struct op_pkt p[8];
    uint8_t data[8][256];
};

/* Holds back what side b sends (its ACKs) while holding: delivered later. */
static bool hold_acks(struct rsim *s, int from, const struct op_pkt *p)
{
    struct held_acks *h = s->hook_ctx;
    if (from != 1 || !h->holding || h->n == 8 || p->len > sizeof h->data[0])
        return false;
    memcpy(h->data[h->n], p->data, p->len);
    h->p[h->n] = *p;
    h->p[h->n].data = h->data[h->n];
    h->n++;
    return true;
}

struct probe_wait {
    struct rsim_ep *e;
    uint64_t before;
};

static bool probed(void *arg)
{
    struct probe_wait *w = arg;
    return qc(w->e, OP_RDMA_QP_C_probes) > w->before;
}

/* An 8-packet write whose ACKs are held until a probe fired; returns how
 * long after the post it fired. */
static uint64_t write_until_probe(struct fx *f, struct held_acks *h, uint64_t wr_id)
{
    *h = (struct held_acks){.holding = true};
    uint64_t t0 = f->s.now;
    struct probe_wait w = {&f->a, qc(&f->a, OP_RDMA_QP_C_probes)};
    fill(f->src.p, 8192, (uint8_t)wr_id);
    assert_int_equal(post(&f->s, &f->a, OP_RDMA_WR_RDMA_WRITE, &f->src, 0, 8192, &f->rem, 0, wr_id,
                          0),
                     OP_OK);
    assert_true(rsim_run(&f->s, probed, &w, LIMIT_NS));
    return f->s.now - t0;
}

/* The ACKs of a write come late (held past the probe), then arrive: the
 * probe resent one packet only, the ACK covers PSNs not sent again, so the
 * probe is undone (window whole again, nothing more resent) and the next
 * probe waits twice as long (2 ms instead of the 1 ms floor). */
static void test_needless_probe_undone(void **state)
{
    (void)state;
    struct fx f;
    struct held_acks h;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .timeout = 14, .retry_cnt = 7};
    fx_init(&f, 271, &o, 8192, ALL_ACCESS);
    warm_up(&f, 4);
    f.s.hook = hold_acks;
    f.s.hook_ctx = &h;
    uint64_t first = write_until_probe(&f, &h, 9);
    assert_true(first >= OP_NS_PER_MS && first < 2 * OP_NS_PER_MS);
    h.holding = false;
    for (int i = 0; i < h.n; i++) /* the late ACKs, the first one first */
        rsim_deliver(&f.s, &h.p[i]);
    wait_for(&f.s, &f.a, 1, &f.b, 0, f.c);
    expect_ok(&f.c[0].wc[0], 9);
    coll_free(f.c);
    assert_memory_equal(f.rem.p, f.src.p, 8192);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_probes), 1);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_probes_undone), 1);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_retransmissions), 1); /* the oldest packet alone */
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_timeouts), 0);
    uint64_t second = write_until_probe(&f, &h, 10);
    assert_true(second >= 2 * OP_NS_PER_MS && second < 3 * OP_NS_PER_MS);
    h.holding = false;
    for (int i = 0; i < h.n; i++)
        rsim_deliver(&f.s, &h.p[i]);
    wait_for(&f.s, &f.a, 1, &f.b, 0, f.c);
    expect_ok(&f.c[0].wc[0], 10);
    coll_free(f.c);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_probes_undone), 2);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_retransmissions), 2);
    fx_free(&f);
}

/* READs alone time the round trip too (the response is the READ's ACK):
 * a lost response is asked for again by a probe at the 1 ms floor */
static void test_read_loss_recovered_by_probe(void **state)
{
    (void)state;
    struct fx f;
    struct drop_nth d = {.from = 1, .nth = 1};
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .timeout = 14, .retry_cnt = 7};
    fx_init(&f, 261, &o, 64, ALL_ACCESS);
    fill(f.rem.p, 64, 7);
    warm_up_with(&f, 4, OP_RDMA_WR_RDMA_READ);
    memset(f.src.p, 0, 64);
    f.s.hook = drop_nth;
    f.s.hook_ctx = &d;
    uint64_t t0 = f.s.now;
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_READ, &f.src, 0, 64, &f.rem, 0, 9, 0),
                     OP_OK);
    wait_for(&f.s, &f.a, 1, &f.b, 0, f.c);
    expect_ok(&f.c[0].wc[0], 9);
    coll_free(f.c);
    assert_true(f.s.now - t0 >= OP_NS_PER_MS && f.s.now - t0 < 2 * OP_NS_PER_MS);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_probes), 1);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_timeouts), 0);
    assert_memory_equal(f.src.p, f.rem.p, 64);
    fx_free(&f);
}

/* the ACK is lost and the QP may not retry at all (retry_cnt 0): the probe
 * uses no retry, the responder re-ACKs the duplicate, the QP stays up */
static void test_probe_uses_no_retry(void **state)
{
    (void)state;
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .timeout = 14, .retry_cnt = 0};
    fx_init(&f, 231, &o, 64, ALL_ACCESS);
    uint64_t took = lose_one_after_warm_up(&f, 1);
    assert_true(took < 2 * OP_NS_PER_MS);
    assert_int_equal(op_rdma_qp_state(f.a.qp), OP_RDMA_QPS_RTS);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_probes), 1);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_timeouts), 0);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_duplicates), 1);
    fx_free(&f);
}

/* QP 1's only packet is lost while QP 2, on the same devices, keeps the
 * peer answering: QP 1's silence looks like queueing, so its probe waits
 * until the peer has been quiet for a probe timeout. */
struct busy_peer {
    struct rsim *s;
    struct rsim_ep *busy, *quiet;
    const struct buf *src, *rem;
    uint64_t until, posted, quiet_done_at;
    uint32_t lost_qpn;
    bool lost;
};

static bool lose_first_to_qpn(struct rsim *s, int from, const struct op_pkt *p)
{
    struct busy_peer *b = s->hook_ctx;
    struct op_bth bth;
    if (from != 0 || b->lost || op_bth_decode(p->data, p->len, &bth) != OP_OK ||
        bth.dest_qp != b->lost_qpn)
        return false;
    b->lost = true;
    return true;
}

static bool quiet_qp_done_keeping_busy(void *arg)
{
    struct busy_peer *b = arg;
    struct op_rdma_wc wc;
    if (op_rdma_poll_cq(b->busy->scq, 1, &wc) == 1 || b->posted == 0) {
        if (b->s->now < b->until) {
            assert_int_equal(post(b->s, b->busy, OP_RDMA_WR_RDMA_WRITE, b->src, 64, 64, b->rem, 64,
                                  b->posted, 0),
                             OP_OK);
            b->posted++;
            b->s->q.flush(b->s->q.ctx, &b->s->q); /* on the wire before the next step */
        }
    }
    if (op_rdma_poll_cq(b->quiet->scq, 1, &wc) == 1) {
        expect_ok(&wc, 7);
        b->quiet_done_at = b->s->now;
    }
    return b->quiet_done_at != 0;
}

static void test_probe_waits_while_peer_answers_other_qps(void **state)
{
    (void)state;
    struct fx f;
    struct rsim_ep a2, b2;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .timeout = 14, .retry_cnt = 7};
    fx_init(&f, 241, &o, 128, ALL_ACCESS);
    rsim_connect(&f.s, &o, &a2, &b2);
    warm_up(&f, 4);
    uint64_t t0 = f.s.now;
    struct busy_peer b = {.s = &f.s, .busy = &a2, .quiet = &f.a, .src = &f.src, .rem = &f.rem,
                          .until = t0 + 5 * OP_NS_PER_MS, .lost_qpn = op_rdma_qp_num(f.b.qp)};
    f.s.hook = lose_first_to_qpn;
    f.s.hook_ctx = &b;
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_WRITE, &f.src, 0, 64, &f.rem, 0, 7, 0),
                     OP_OK);
    assert_true(rsim_run(&f.s, quiet_qp_done_keeping_busy, &b, LIMIT_NS));
    assert_true(b.lost && b.posted > 100);
    /* not before QP 2 stopped, then within the next probe timeout or two */
    assert_true(b.quiet_done_at > b.until);
    assert_true(b.quiet_done_at < b.until + 3 * OP_NS_PER_MS);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_probes), 1);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_timeouts), 0);
    assert_int_equal(op_rdma_qp_counters(a2.qp)[OP_RDMA_QP_C_probes], 0);
    assert_memory_equal(f.rem.p, f.src.p, 64);
    fx_free(&f);
}

/* ---- max_rd_atomic: READs in flight at most that many, every one done */
struct reads_in_flight {
    int now, most;
};

static bool count_reads(struct rsim *s, int from, const struct op_pkt *p)
{
    struct reads_in_flight *r = s->hook_ctx;
    struct op_bth bth;
    if (op_bth_decode(p->data, p->len, &bth) != OP_OK)
        return false;
    if (from == 0 && bth.opcode == OP_RC_READ_REQUEST && ++r->now > r->most)
        r->most = r->now;
    if (from == 1 && bth.opcode == OP_RC_READ_RESP_ONLY)
        r->now--;
    return false;
}

static int reads_at_most(uint8_t max_rd_atomic)
{
    struct fx f;
    struct reads_in_flight r = {0};
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7,
                                   .max_rd_atomic = max_rd_atomic};
    fx_init(&f, 271, &o, 6 * 64, ALL_ACCESS);
    fill(f.rem.p, 6 * 64, 5);
    f.s.hook = count_reads;
    f.s.hook_ctx = &r;
    for (int i = 0; i < 6; i++)
        assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_READ, &f.src, (size_t)i * 64, 64,
                              &f.rem, (size_t)i * 64, (uint64_t)i, 0),
                         OP_OK);
    wait_for(&f.s, &f.a, 6, &f.b, 0, f.c);
    for (int i = 0; i < 6; i++)
        expect_ok(&f.c[0].wc[i], (uint64_t)i);
    coll_free(f.c);
    assert_memory_equal(f.src.p, f.rem.p, 6 * 64);
    fx_free(&f);
    return r.most;
}

static void test_max_rd_atomic_bounds_reads_in_flight(void **state)
{
    (void)state;
    assert_int_equal(reads_at_most(2), 2);
    assert_int_equal(reads_at_most(0), 6); /* no limit: all six at once */
}

/* ---- INLINE: the bytes are taken at post, keys unchecked, limits kept */
static op_status_t post_inline(struct fx *f, enum op_rdma_wr_opcode op, const struct op_rdma_sge *sg,
                               int n, uint64_t wr_id)
{
    struct op_rdma_send_wr wr = {.wr_id = wr_id, .opcode = op,
                                 .send_flags = OP_RDMA_SEND_SIGNALED | OP_RDMA_SEND_INLINE,
                                 .sg_list = sg, .num_sge = n,
                                 .rdma = {va(&f->rem, 0), op_rdma_mr_rkey(f->rem.mr)}};
    return op_rdma_post_send(f->a.qp, &wr, f->s.now, &f->s.q);
}

static void test_inline_copied_at_post(void **state)
{
    (void)state;
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7, .max_inline = 256};
    fx_init(&f, 251, &o, 4096, ALL_ACCESS);
    uint8_t want[300], stack[200];
    memcpy(want, f.src.p, 300);
    memcpy(stack, f.src.p + 100, sizeof stack);
    /* two pieces, one not in any region (verbs does not check an inline
     * WR's keys), and the first packet lost so the resend needs the copy */
    struct op_rdma_sge sg[2] = {{va(&f.src, 0), 100, 0xdeadbeef},
                                {(uint64_t)(uintptr_t)stack, 156, 0}};
    struct drop_nth d = {.from = 0, .nth = 1};
    f.s.hook = drop_nth;
    f.s.hook_ctx = &d;
    assert_int_equal(post_inline(&f, OP_RDMA_WR_RDMA_WRITE, sg, 2, 1), OP_OK);
    memset(f.src.p, 0xee, 300); /* the buffers are the caller's again at once */
    memset(stack, 0xee, sizeof stack);
    wait_for(&f.s, &f.a, 1, &f.b, 0, f.c);
    expect_ok(&f.c[0].wc[0], 1);
    assert_int_equal(f.c[0].wc[0].byte_len, 256);
    coll_free(f.c);
    assert_memory_equal(f.rem.p, want, 256);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_retransmissions), 1);
    /* over the limit, a READ, or a QP without inline room: refused */
    struct op_rdma_sge big = {va(&f.src, 0), 257, op_rdma_mr_lkey(f.src.mr)};
    assert_int_equal(post_inline(&f, OP_RDMA_WR_RDMA_WRITE, &big, 1, 2), OP_ERR_INVAL);
    assert_int_equal(post_inline(&f, OP_RDMA_WR_RDMA_READ, sg, 1, 3), OP_ERR_INVAL);
    fx_free(&f);
    const struct rsim_qp_opts none = {.type = OP_RDMA_QPT_RC, .retry_cnt = 7};
    fx_init(&f, 252, &none, 64, ALL_ACCESS);
    struct op_rdma_sge one = {va(&f.src, 0), 1, op_rdma_mr_lkey(f.src.mr)};
    assert_int_equal(post_inline(&f, OP_RDMA_WR_RDMA_WRITE, &one, 1, 4), OP_ERR_INVAL);
    assert_int_equal(post_inline(&f, OP_RDMA_WR_RDMA_WRITE, NULL, 0, 5), OP_OK); /* empty */
    fx_free(&f);
}

/* ---- malformed input: dropped, counted, nothing changes */
static void reseal(struct op_pkt *p)
{
    p->len = (uint32_t)op_icrc_seal(&p->flow, p->data, p->len - OP_ICRC_LEN, OP_IO_BUF_SIZE);
}

static void deliver_variant(struct rsim *s, const struct capture *cap, void (*mutate)(struct op_pkt *))
{
    uint8_t data[OP_IO_BUF_SIZE] = {0};
    struct op_pkt p = cap->pkt;
    memcpy(data, cap->data, p.len);
    p.data = data;
    mutate(&p);
    rsim_deliver(s, &p);
}

static void m_short(struct op_pkt *p) { p->len = 10; }
static void m_cut_reth(struct op_pkt *p) { p->len = OP_BTH_LEN + 6 + OP_ICRC_LEN; }
static void m_flip(struct op_pkt *p) { p->data[p->len - 8] ^= 1; }
static void m_qpn(struct op_pkt *p) { p->data[7] ^= 0x40; reseal(p); }
static void m_uc_opcode(struct op_pkt *p) { p->data[0] |= OP_UC_BASE; reseal(p); }
static void m_ud_opcode(struct op_pkt *p) { p->data[0] = OP_UD_SEND_ONLY; reseal(p); }
static void m_pkey(struct op_pkt *p) { p->data[2] = 0x7f; reseal(p); }
static void m_source(struct op_pkt *p) { p->flow.src.v4 = 0x7f000009u; reseal(p); }
static void m_tver(struct op_pkt *p) { p->data[1] |= 1; reseal(p); }
static void m_long(struct op_pkt *p) { p->len += 1024 * 4; reseal(p); }
static void m_pad(struct op_pkt *p) { p->data[1] |= 0x30; p->len = OP_BTH_LEN + OP_RETH_LEN + 2 + OP_ICRC_LEN; reseal(p); }

/* Random bytes at the QP, half of them sealed with a valid ICRC: never a
 * crash (ASan, UBSan), whatever the engine makes of them. */
static void random_packets(struct rsim *s, const struct capture *cap)
{
    struct op_rng r;
    op_rng_seed(&r, 5);
    for (int i = 0; i < 2000; i++) {
        uint8_t data[OP_IO_BUF_SIZE];
        struct op_pkt p = cap->pkt;
        p.data = data;
        p.len = (uint32_t)(op_rng_next(&r) % 1200);
        for (uint32_t k = 0; k < p.len; k++)
            data[k] = (uint8_t)op_rng_next(&r);
        if (p.len > 8)
            memcpy(data + 5, cap->data + 5, 3); /* to the right QP */
        if (i % 2 && p.len > OP_ICRC_LEN + OP_BTH_LEN)
            reseal(&p);
        rsim_deliver(s, &p);
    }
}

static void test_malformed_dropped_and_counted(void **state)
{
    (void)state;
    struct fx f;
    struct capture cap = {0};
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 1024, .retry_cnt = 7};
    fx_init(&f, 81, &o, 4096, ALL_ACCESS);
    f.s.hook = capture_first;
    f.s.hook_ctx = &cap;
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_WRITE, &f.src, 0, 512, &f.rem, 0, 1, 0), OP_OK);
    wait_for(&f.s, &f.a, 1, &f.b, 0, f.c);
    coll_free(f.c);
    memset(f.rem.p, 0, 4096);
    const uint64_t dup0 = qc(&f.b, OP_RDMA_QP_C_duplicates);
    void (*const mutations[])(struct op_pkt *) = {m_short, m_cut_reth, m_flip, m_qpn,
                                                  m_uc_opcode, m_ud_opcode, m_pkey, m_source,
                                                  m_tver, m_long, m_pad};
    for (size_t i = 0; i < sizeof mutations / sizeof mutations[0]; i++)
        deliver_variant(&f.s, &cap, mutations[i]);
    const uint64_t *dc = op_rdma_dev_counters(f.s.dev[1]);
    assert_int_equal(dc[OP_RDMA_DEV_C_drop_truncated], 1);
    assert_int_equal(dc[OP_RDMA_DEV_C_drop_no_qp], 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_drop_length), 3);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_drop_icrc), 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_drop_opcode), 3);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_drop_pkey), 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_drop_source), 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_duplicates), dup0);
    for (int i = 0; i < 4096; i++)
        assert_int_equal(f.rem.p[i], 0);
    random_packets(&f.s, &cap);
    /* still works */
    if (op_rdma_qp_state(f.b.qp) == OP_RDMA_QPS_RTS) {
        assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_WRITE, &f.src, 0, 3000, &f.rem, 0, 2, 0),
                         OP_OK);
        wait_for(&f.s, &f.a, 1, &f.b, 0, f.c);
        coll_free(f.c);
    }
    fx_free(&f);
}

/* ---- UC: a lost packet loses its message, nothing is sent again */
static void test_uc_loses_message(void **state)
{
    (void)state;
    struct fx f;
    struct drop_nth d = {.from = 0, .nth = 2};
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_UC, .mtu = 256};
    fx_init(&f, 91, &o, 3000, ALL_ACCESS);
    f.s.hook = drop_nth;
    f.s.hook_ctx = &d;
    for (int i = 0; i < 3; i++)
        post_recv(&f.b, &f.rcv, (size_t)i * 1000, 1000, (uint64_t)i);
    for (int i = 0; i < 3; i++)
        assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_WRITE_WITH_IMM, &f.src, (size_t)i * 1000,
                              600, &f.rem, (size_t)i * 1000, (uint64_t)i, (uint32_t)i),
                         OP_OK);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_SEND, &f.src, 0, 700, NULL, 0, 3, 0), OP_OK);
    wait_for(&f.s, &f.a, 4, &f.b, 3, f.c);
    for (int i = 0; i < 4; i++)
        expect_ok(&f.c[0].wc[i], (uint64_t)i);
    /* message 0 lost its second packet: receives 0 and 1 went to messages 1 and 2 */
    assert_int_equal(f.c[1].wc[0].imm_data, 1);
    assert_int_equal(f.c[1].wc[1].imm_data, 2);
    assert_int_equal(f.c[1].wc[2].byte_len, 700);
    assert_memory_equal(f.rcv.p + 2000, f.src.p, 700);
    assert_memory_equal(f.rem.p + 1000, f.src.p + 1000, 600);
    assert_memory_equal(f.rem.p + 2000, f.src.p + 2000, 600);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_uc_lost_msgs), 1);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_retransmissions), 0);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_acks_sent), 0);
    assert_false(rsim_run(&f.s, never, NULL, OP_NS_PER_S));
    assert_int_equal(f.s.sent[0], 12); /* 3 x 3 packets + 3, nothing more */
    assert_int_equal(f.s.sent[1], 0);
    coll_free(f.c);
    fx_free(&f);
}

/* ---- UD: a GRH before the payload, the Q_Key checked */
static void test_ud_send_qkey(void **state)
{
    (void)state;
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_UD, .mtu = 1024};
    fx_init(&f, 101, &o, 2000, ALL_ACCESS);
    post_recv(&f.b, &f.rcv, 0, 1064, 1);
    struct op_rdma_sge sg = sge(&f.src, 0, 1000);
    struct op_rdma_send_wr wr = {.wr_id = 7, .opcode = OP_RDMA_WR_SEND_WITH_IMM,
                                 .send_flags = OP_RDMA_SEND_SIGNALED, .sg_list = &sg,
                                 .num_sge = 1, .imm_data = 42,
                                 .ud = {RSIM_IP_B, OP_ROCE_UDP_PORT, op_rdma_qp_num(f.b.qp),
                                        0x11111111u}};
    assert_int_equal(op_rdma_post_send(f.a.qp, &wr, f.s.now, &f.s.q), OP_OK);
    wr.ud.remote_qkey = 0x22222222u;
    assert_int_equal(op_rdma_post_send(f.a.qp, &wr, f.s.now, &f.s.q), OP_OK);
    wait_for(&f.s, &f.a, 2, &f.b, 1, f.c);
    assert_false(rsim_run(&f.s, never, NULL, OP_NS_PER_MS));
    const struct op_rdma_wc *wc = &f.c[1].wc[0];
    expect_ok(wc, 1);
    assert_int_equal(wc->byte_len, OP_RDMA_UD_GRH_LEN + 1000);
    assert_int_equal(wc->src_qp, op_rdma_qp_num(f.a.qp));
    assert_int_equal(wc->src_ip, RSIM_IP_A);
    assert_int_equal(wc->imm_data, 42);
    assert_int_equal(f.rcv.p[20], 0x45); /* the IPv4 header in the GRH's last 20 bytes */
    assert_memory_equal(f.rcv.p + OP_RDMA_UD_GRH_LEN, f.src.p, 1000);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_drop_qkey), 1);
    assert_int_equal(op_rdma_poll_cq(f.b.rcq, 1, f.c[1].wc), 0);
    sg.length = 1025; /* more than one MTU */
    assert_int_equal(op_rdma_post_send(f.a.qp, &wr, f.s.now, &f.s.q), OP_ERR_INVAL);
    coll_free(f.c);
    fx_free(&f);
}

/* ---- the state machine and the post calls' checks */
static void test_states_keys_and_checks(void **state)
{
    (void)state;
    struct rsim s;
    rsim_init(&s, 111);
    struct op_rdma_cq *cq;
    struct op_rdma_qp *qp;
    struct buf b1, b2;
    assert_int_equal(op_rdma_cq_create(s.dev[0], 8, &cq), OP_OK);
    const struct op_rdma_qp_init_attr ia = {.type = OP_RDMA_QPT_RC, .send_cq = cq, .recv_cq = cq,
                                            .max_send_wr = 4, .max_recv_wr = 4};
    assert_int_equal(op_rdma_qp_create(s.dev[0], &ia, &qp), OP_OK);
    buf_new(s.dev[0], 64, OP_RDMA_ACCESS_LOCAL_WRITE, &b1);
    buf_new(s.dev[0], 64, ALL_ACCESS, &b2);
    /* keys: distinct, random above the slot bits */
    assert_int_not_equal(op_rdma_mr_lkey(b1.mr), op_rdma_mr_rkey(b1.mr));
    assert_int_not_equal(op_rdma_mr_lkey(b1.mr) >> 16, op_rdma_mr_lkey(b2.mr) >> 16);
    assert_int_not_equal(op_rdma_mr_lkey(b2.mr) - op_rdma_mr_lkey(b1.mr), 1);
    struct op_rdma_mr *bad;
    assert_int_equal(op_rdma_reg_mr(s.dev[0], b1.p, 8, OP_RDMA_ACCESS_REMOTE_WRITE, &bad),
                     OP_ERR_INVAL);

    struct op_rdma_qp_attr at = {.path_mtu = 1000, .timeout = 14, .retry_cnt = 7};
    struct op_rdma_sge sg = sge(&b1, 0, 8);
    struct op_rdma_send_wr wr = {.opcode = OP_RDMA_WR_SEND, .sg_list = &sg, .num_sge = 1};
    assert_int_equal(op_rdma_post_send(qp, &wr, 0, &s.q), OP_ERR_STATE);
    assert_int_equal(op_rdma_qp_modify(qp, OP_RDMA_QPS_RTR, &at), OP_ERR_STATE);
    assert_int_equal(op_rdma_qp_modify(qp, OP_RDMA_QPS_INIT, &at), OP_OK);
    assert_int_equal(op_rdma_qp_modify(qp, OP_RDMA_QPS_RTS, &at), OP_ERR_STATE);
    assert_int_equal(op_rdma_qp_modify(qp, OP_RDMA_QPS_RTR, &at), OP_ERR_INVAL); /* MTU 1000 */
    at.path_mtu = 512;
    assert_int_equal(op_rdma_qp_modify(qp, OP_RDMA_QPS_RTR, &at), OP_OK);
    at.retry_cnt = 8;
    assert_int_equal(op_rdma_qp_modify(qp, OP_RDMA_QPS_RTS, &at), OP_ERR_INVAL);
    at.retry_cnt = 7;
    assert_int_equal(op_rdma_qp_modify(qp, OP_RDMA_QPS_RTS, &at), OP_OK);
    sg.lkey ^= 0x10000u;
    assert_int_equal(op_rdma_post_send(qp, &wr, 0, &s.q), OP_ERR_INVAL); /* bad lkey */
    sg = sge(&b1, 60, 8);
    assert_int_equal(op_rdma_post_send(qp, &wr, 0, &s.q), OP_ERR_INVAL); /* past the region */
    struct op_rdma_recv_wr rw = {.wr_id = 3, .sg_list = &sg, .num_sge = 1};
    sg = sge(&b1, 0, 8);
    assert_int_equal(op_rdma_post_recv(qp, &rw), OP_OK);
    assert_int_equal(op_rdma_qp_modify(qp, OP_RDMA_QPS_ERR, NULL), OP_OK);
    struct op_rdma_wc wc;
    assert_int_equal(op_rdma_poll_cq(cq, 1, &wc), 1);
    assert_int_equal(wc.status, OP_RDMA_WC_WR_FLUSH_ERR);
    assert_int_equal(wc.wr_id, 3);
    assert_string_equal(op_rdma_wc_status_str(12), "RETRY_EXC_ERR");
    assert_string_equal(op_rdma_wc_status_str(10), "REM_ACCESS_ERR");
    assert_string_equal(op_rdma_qp_state_str(OP_RDMA_QPS_RTS), "RTS");
    assert_int_equal(op_rdma_timeout_ns(14), 67108864);
    assert_int_equal(op_rdma_rnr_ns(12), 640 * OP_NS_PER_US);
    assert_string_equal(op_rdma_qp_counter_name(OP_RDMA_QP_C_retransmissions), "retransmissions");
    assert_int_equal(op_rdma_qp_modify(qp, OP_RDMA_QPS_RESET, NULL), OP_OK);
    assert_int_equal(op_rdma_qp_state(qp), OP_RDMA_QPS_RESET);
    buf_free(&b1);
    buf_free(&b2);
    rsim_free(&s);
}

/* ---- several SGEs on both sides */
static void test_scatter_gather(void **state)
{
    (void)state;
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 256, .retry_cnt = 7};
    fx_init(&f, 121, &o, 3000, ALL_ACCESS);
    const struct op_rdma_sge ssg[3] = {sge(&f.src, 0, 100), sge(&f.src, 1000, 300),
                                       sge(&f.src, 2000, 600)};
    const struct op_rdma_sge rsg[2] = {sge(&f.rcv, 0, 500), sge(&f.rcv, 1000, 1000)};
    struct op_rdma_recv_wr rw = {.wr_id = 1, .sg_list = rsg, .num_sge = 2};
    assert_int_equal(op_rdma_post_recv(f.b.qp, &rw), OP_OK);
    struct op_rdma_send_wr wr = {.wr_id = 2, .opcode = OP_RDMA_WR_SEND,
                                 .send_flags = OP_RDMA_SEND_SIGNALED, .sg_list = ssg, .num_sge = 3};
    assert_int_equal(op_rdma_post_send(f.a.qp, &wr, f.s.now, &f.s.q), OP_OK);
    wait_for(&f.s, &f.a, 1, &f.b, 1, f.c);
    assert_int_equal(f.c[1].wc[0].byte_len, 1000);
    assert_memory_equal(f.rcv.p, f.src.p, 100);
    assert_memory_equal(f.rcv.p + 100, f.src.p + 1000, 300);
    assert_memory_equal(f.rcv.p + 400, f.src.p + 2000, 100);
    assert_memory_equal(f.rcv.p + 1000, f.src.p + 2100, 500);
    coll_free(f.c);
    fx_free(&f);
}

/* ---- a SEND longer than the receive: LOC_LEN_ERR there, REM_INV_REQ_ERR here */
static void test_send_longer_than_recv(void **state)
{
    (void)state;
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 256, .retry_cnt = 7};
    fx_init(&f, 131, &o, 2000, ALL_ACCESS);
    post_recv(&f.b, &f.rcv, 0, 600, 1);
    post_recv(&f.b, &f.rcv, 600, 600, 2);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_SEND, &f.src, 0, 601, NULL, 0, 7, 0), OP_OK);
    wait_for(&f.s, &f.a, 1, &f.b, 2, f.c);
    assert_int_equal(f.c[0].wc[0].status, OP_RDMA_WC_REM_INV_REQ_ERR);
    assert_int_equal(f.c[1].wc[0].status, OP_RDMA_WC_LOC_LEN_ERR);
    assert_non_null(strstr(f.c[1].wc[0].cause, "longer than the 600-byte receive buffer"));
    assert_int_equal(f.c[1].wc[1].status, OP_RDMA_WC_WR_FLUSH_ERR);
    coll_free(f.c);
    fx_free(&f);
}

/* ---- a READ larger than the window goes out as several requests, each
 * answered by at most a window of packets */
static bool count_read_requests(struct rsim *s, int from, const struct op_pkt *p)
{
    int *n = s->hook_ctx;
    *n += from == 0 && p->data[0] == OP_RC_READ_REQUEST;
    return false;
}

static void test_read_larger_than_window(void **state)
{
    (void)state;
    struct fx f;
    int requests = 0;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 1024, .retry_cnt = 7,
                                   .window = 8};
    fx_init(&f, 141, &o, MIB, ALL_ACCESS);
    fill(f.rem.p, MIB, 3);
    f.s.hook = count_read_requests;
    f.s.hook_ctx = &requests;
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_READ, &f.src, 0, MIB - 100, &f.rem, 100, 1, 0),
                     OP_OK);
    wait_for(&f.s, &f.a, 1, &f.b, 0, f.c);
    expect_ok(&f.c[0].wc[0], 1);
    assert_memory_equal(f.src.p, f.rem.p + 100, MIB - 100);
    assert_true(requests >= 128 && requests <= 257); /* parts of 4 to 8 packets */
    print_message("READ of 1 MiB - 100 B in %d requests, window 8\n", requests);
    coll_free(f.c);
    fx_free(&f);
}

/* READs queued behind READs wait for room for half a window: each goes out
 * as one request (they were split 1 + rest as responses freed single PSNs). */
static void test_reads_behind_reads_whole(void **state)
{
    (void)state;
    struct fx f;
    int requests = 0;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 1024, .retry_cnt = 7,
                                   .window = 16};
    fx_init(&f, 142, &o, 10 * 8192, ALL_ACCESS);
    fill(f.rem.p, f.rem.len, 5);
    f.s.hook = count_read_requests;
    f.s.hook_ctx = &requests;
    for (int i = 0; i < 10; i++)
        assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_READ, &f.src, (size_t)i * 8192, 8192,
                              &f.rem, (size_t)i * 8192, (uint64_t)i, 0),
                         OP_OK);
    wait_for(&f.s, &f.a, 10, &f.b, 0, f.c);
    for (int i = 0; i < 10; i++)
        expect_ok(&f.c[0].wc[i], (uint64_t)i);
    assert_memory_equal(f.src.p, f.rem.p, f.rem.len);
    assert_int_equal(requests, 10);
    coll_free(f.c);
    fx_free(&f);
}

/* Under random loss the window shrinks (go-back-N resends all in flight):
 * far fewer packets resent than sent, and every byte right. */
static void test_window_adapts_to_loss(void **state)
{
    (void)state;
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 1024, .retry_cnt = 7,
                                   .timeout = 8, .depth = 256};
    const size_t msg = 16384;
    const int n = 200;
    fx_init(&f, 143, &o, (size_t)n * msg, ALL_ACCESS);
    f.s.link[0].drop = 0.05;
    f.s.link[1].drop = 0.05;
    for (int i = 0; i < n; i++)
        assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_WRITE, &f.src, (size_t)i * msg, msg,
                              &f.rem, (size_t)i * msg, (uint64_t)i, 0),
                         OP_OK);
    wait_for(&f.s, &f.a, n, &f.b, 0, f.c);
    for (int i = 0; i < n; i++)
        expect_ok(&f.c[0].wc[i], (uint64_t)i);
    assert_memory_equal(f.src.p, f.rem.p, f.rem.len);
    uint64_t data = (uint64_t)n * msg / 1024, resent = qc(&f.a, OP_RDMA_QP_C_retransmissions);
    print_message("5%% loss: %llu packets resent for %llu, %llu sequence NAKs\n",
                  (unsigned long long)resent, (unsigned long long)data,
                  (unsigned long long)qc(&f.a, OP_RDMA_QP_C_nak_seq_recv));
    assert_true(resent < data / 2); /* a fixed 128-PSN window resent ~6x data */
    coll_free(f.c);
    fx_free(&f);
}

/* ---- a region deregistered in the middle of a WRITE is refused, not used */
static bool drop_after_first(struct rsim *s, int from, const struct op_pkt *p)
{
    int *n = s->hook_ctx;
    (void)p;
    return from == 0 && ++*n > 1 && *n <= 3;
}

static void test_dereg_during_write(void **state)
{
    (void)state;
    struct fx f;
    int n = 0;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 256, .retry_cnt = 7,
                                   .timeout = 8};
    fx_init(&f, 151, &o, 768, ALL_ACCESS);
    f.s.hook = drop_after_first;
    f.s.hook_ctx = &n;
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_WRITE, &f.src, 0, 768, &f.rem, 0, 1, 0), OP_OK);
    assert_false(rsim_run(&f.s, never, NULL, 100 * OP_NS_PER_US)); /* FIRST landed */
    op_rdma_dereg_mr(f.rem.mr);
    f.rem.mr = NULL;
    wait_for(&f.s, &f.a, 1, &f.b, 0, f.c);
    assert_int_equal(f.c[0].wc[0].status, OP_RDMA_WC_REM_ACCESS_ERR);
    assert_non_null(strstr(op_rdma_qp_error(f.b.qp), "names no memory region"));
    coll_free(f.c);
    fx_free(&f);
}

/* ---- unsignaled WRs complete silently; ACKs coalesce every ack_every */
static void test_unsignaled_and_ack_every(void **state)
{
    (void)state;
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 256, .retry_cnt = 7,
                                   .ack_every = 4};
    fx_init(&f, 161, &o, 4096, ALL_ACCESS);
    struct op_rdma_sge sg = sge(&f.src, 0, 2560); /* 10 packets */
    struct op_rdma_send_wr wr = {.wr_id = 1, .opcode = OP_RDMA_WR_RDMA_WRITE, .sg_list = &sg,
                                 .num_sge = 1, .rdma = {va(&f.rem, 0), op_rdma_mr_rkey(f.rem.mr)}};
    assert_int_equal(op_rdma_post_send(f.a.qp, &wr, f.s.now, &f.s.q), OP_OK);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_WRITE, &f.src, 0, 1, &f.rem, 3000, 2, 0),
                     OP_OK);
    wait_for(&f.s, &f.a, 1, &f.b, 0, f.c);
    expect_ok(&f.c[0].wc[0], 2); /* only the signaled one */
    assert_false(rsim_run(&f.s, never, NULL, OP_NS_PER_MS));
    assert_int_equal(op_rdma_poll_cq(f.a.scq, 1, f.c[0].wc), 0);
    assert_memory_equal(f.rem.p, f.src.p, 2560);
    /* packets 4 and 8 by count, 11 by AckReq: the unsignaled message's last
     * packet does not ask, the signaled one behind it covers it */
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_acks_sent), 3);
    coll_free(f.c);
    fx_free(&f);
}

static op_status_t post_unsignaled_write(struct fx *f, size_t len, uint64_t wr_id)
{
    struct op_rdma_sge sg = sge(&f->src, 0, len);
    struct op_rdma_send_wr wr = {.wr_id = wr_id, .opcode = OP_RDMA_WR_RDMA_WRITE, .sg_list = &sg,
                                 .num_sge = 1,
                                 .rdma = {va(&f->rem, 0), op_rdma_mr_rkey(f->rem.mr)}};
    return op_rdma_post_send(f->a.qp, &wr, f->s.now, &f->s.q);
}

struct ack_watch {
    uint64_t first_ack_at; /* virtual time the responder's first ACK left */
    int ackreqs;           /* requests that asked for one */
};

static bool watch_acks(struct rsim *s, int from, const struct op_pkt *p)
{
    struct ack_watch *w = s->hook_ctx;
    struct op_bth bth;
    if (op_bth_decode(p->data, p->len, &bth) != OP_OK)
        return false;
    if (from == 1 && bth.opcode == OP_RC_ACK && w->first_ack_at == 0)
        w->first_ack_at = s->now;
    if (from == 0 && bth.ackreq)
        w->ackreqs++;
    return false;
}

/* Three 100-byte unsignaled writes on a fresh fixture, its ACKs watched,
 * run for `for_ns` of virtual time. */
static void three_unsignaled_writes(struct fx *f, uint64_t seed, const struct rsim_qp_opts *o,
                                    struct ack_watch *w, uint64_t for_ns)
{
    fx_init(f, seed, o, 4096, ALL_ACCESS);
    f->s.hook = watch_acks;
    f->s.hook_ctx = w;
    for (uint64_t i = 0; i < 3; i++)
        assert_int_equal(post_unsignaled_write(f, 100, i), OP_OK);
    assert_false(rsim_run(&f->s, never, NULL, for_ns));
}

/* ---- nobody asked: the responder ACKs within OP_RDMA_ACK_DELAY_NS, once
 * for all, and the requester's queue drains without a single resend */
static void test_delayed_ack_covers_unsignaled_tail(void **state)
{
    (void)state;
    struct fx f;
    struct ack_watch w = {0};
    struct op_rdma_wc wc;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 256, .retry_cnt = 7};
    three_unsignaled_writes(&f, 181, &o, &w, 10 * OP_NS_PER_MS);
    assert_int_equal(w.ackreqs, 0);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_acks_sent), 1);
    assert_true(w.first_ack_at >= OP_RDMA_ACK_DELAY_NS);
    assert_true(w.first_ack_at < 2 * OP_RDMA_ACK_DELAY_NS);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_retransmissions), 0);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_timeouts), 0);
    assert_int_equal(op_rdma_poll_cq(f.a.scq, 1, &wc), 0); /* silent, as asked */
    assert_memory_equal(f.rem.p, f.src.p, 100);
    /* the queue is free again: a full queue's worth of posts goes in */
    for (uint64_t i = 0; i < 64; i++)
        assert_int_equal(post_unsignaled_write(&f, 100, i), OP_OK);
    fx_free(&f);
}

/* ---- a short timer (-u 2: 16.4 us per try) brings the delayed ACK forward
 * to a quarter of it, so the requester never resends what was executed */
static void test_delayed_ack_inside_short_timeout(void **state)
{
    (void)state;
    struct fx f;
    struct ack_watch w = {0};
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 256, .retry_cnt = 1,
                                   .timeout = 2};
    three_unsignaled_writes(&f, 211, &o, &w, OP_NS_PER_MS);
    uint64_t quarter = op_rdma_timeout_ns(2) / 4;
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_acks_sent), 1);
    assert_true(w.first_ack_at >= quarter && w.first_ack_at < OP_RDMA_ACK_DELAY_NS / 4);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_retransmissions), 0);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_timeouts), 0);
    assert_int_equal(op_rdma_qp_state(f.a.qp), OP_RDMA_QPS_RTS);
    assert_memory_equal(f.rem.p, f.src.p, 100);
    fx_free(&f);
}

/* ---- a send queue half full asks at once: its slots come back with ACKs */
static void test_half_full_queue_asks_for_ack(void **state)
{
    (void)state;
    struct fx f;
    struct ack_watch w = {0};
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 256, .retry_cnt = 7,
                                   .depth = 4};
    fx_init(&f, 191, &o, 4096, ALL_ACCESS);
    f.s.hook = watch_acks;
    f.s.hook_ctx = &w;
    assert_int_equal(post_unsignaled_write(&f, 10, 1), OP_OK);
    assert_int_equal(post_unsignaled_write(&f, 10, 2), OP_OK); /* 2 of 4: asks */
    assert_false(rsim_run(&f.s, never, NULL, 50 * OP_NS_PER_US));
    assert_int_equal(w.ackreqs, 1);
    assert_true(w.first_ack_at > 0 && w.first_ack_at < OP_RDMA_ACK_DELAY_NS);
    fx_free(&f);
}

/* ---- the delayed ACK of an unsignaled message is lost: the resend asks
 * for an ACK (a responder answers a duplicate only then), so the tail
 * never runs out of retries */
static void test_lost_unsignaled_message_resent_with_ackreq(void **state)
{
    (void)state;
    struct fx f;
    struct op_rdma_wc wc;
    struct drop_nth d = {.from = 1, .nth = 1}; /* the first ACK */
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 256, .retry_cnt = 1,
                                   .timeout = 8};
    fx_init(&f, 201, &o, 4096, ALL_ACCESS);
    f.s.hook = drop_nth;
    f.s.hook_ctx = &d;
    assert_int_equal(post_unsignaled_write(&f, 200, 1), OP_OK); /* one packet */
    assert_false(rsim_run(&f.s, never, NULL, 20 * OP_NS_PER_MS));
    assert_int_equal(op_rdma_qp_state(f.a.qp), OP_RDMA_QPS_RTS);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_timeouts), 1);
    assert_int_equal(qc(&f.a, OP_RDMA_QP_C_retransmissions), 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_duplicates), 1);
    assert_memory_equal(f.rem.p, f.src.p, 200);
    assert_int_equal(op_rdma_poll_cq(f.a.scq, 1, &wc), 0);
    fx_free(&f);
}

/* ---- UC drops what RC would NAK, and stays up */
static void test_uc_errors_drop_quietly(void **state)
{
    (void)state;
    struct fx f;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_UC, .mtu = 256};
    fx_init(&f, 171, &o, 1000, OP_RDMA_ACCESS_LOCAL_WRITE);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_WRITE, &f.src, 0, 500, &f.rem, 0, 1, 0),
                     OP_OK);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_SEND, &f.src, 0, 500, NULL, 0, 2, 0), OP_OK);
    assert_false(rsim_run(&f.s, never, NULL, OP_NS_PER_MS)); /* arrived: no receive posted */
    post_recv(&f.b, &f.rcv, 0, 100, 3);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_SEND, &f.src, 0, 500, NULL, 0, 4, 0), OP_OK);
    assert_int_equal(post(&f.s, &f.a, OP_RDMA_WR_RDMA_READ, &f.src, 0, 5, &f.rem, 0, 5, 0),
                     OP_ERR_INVAL); /* no READ on UC */
    wait_for(&f.s, &f.a, 3, &f.b, 0, f.c);
    assert_false(rsim_run(&f.s, never, NULL, OP_NS_PER_MS));
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_drop_access), 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_drop_no_recv), 1);
    assert_int_equal(qc(&f.b, OP_RDMA_QP_C_drop_too_long), 1);
    assert_int_equal(op_rdma_poll_cq(f.b.rcq, 1, f.c[1].wc), 0); /* receive 3 still posted */
    assert_int_equal(op_rdma_qp_state(f.b.qp), OP_RDMA_QPS_RTS);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(f.rem.p[i], 0);
    coll_free(f.c);
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_at_each_mtu),
        cmocka_unit_test(test_deep_queue_back_to_back),
        cmocka_unit_test(test_loss_dup_reorder_both_ways),
        cmocka_unit_test(test_loss_dup_reorder_placed),
        cmocka_unit_test(test_placed_misprediction_moved),
        cmocka_unit_test(test_uc_never_placed),
        cmocka_unit_test(test_heavy_loss),
        cmocka_unit_test(test_reads_behind_reads_whole),
        cmocka_unit_test(test_window_adapts_to_loss),
        cmocka_unit_test(test_duplicate_never_reapplied),
        cmocka_unit_test(test_rnr_then_recv_posted),
        cmocka_unit_test(test_rnr_retry_exhausted),
        cmocka_unit_test(test_protection_errors),
        cmocka_unit_test(test_retry_exhausted_dead_peer),
        cmocka_unit_test(test_tail_loss_recovered_by_probe),
        cmocka_unit_test(test_needless_probe_undone),
        cmocka_unit_test(test_probe_uses_no_retry),
        cmocka_unit_test(test_read_loss_recovered_by_probe),
        cmocka_unit_test(test_probe_waits_while_peer_answers_other_qps),
        cmocka_unit_test(test_inline_copied_at_post),
        cmocka_unit_test(test_max_rd_atomic_bounds_reads_in_flight),
        cmocka_unit_test(test_malformed_dropped_and_counted),
        cmocka_unit_test(test_uc_loses_message),
        cmocka_unit_test(test_ud_send_qkey),
        cmocka_unit_test(test_states_keys_and_checks),
        cmocka_unit_test(test_scatter_gather),
        cmocka_unit_test(test_send_longer_than_recv),
        cmocka_unit_test(test_read_larger_than_window),
        cmocka_unit_test(test_dereg_during_write),
        cmocka_unit_test(test_unsignaled_and_ack_every),
        cmocka_unit_test(test_delayed_ack_covers_unsignaled_tail),
        cmocka_unit_test(test_delayed_ack_inside_short_timeout),
        cmocka_unit_test(test_half_full_queue_asks_for_ack),
        cmocka_unit_test(test_lost_unsignaled_message_resent_with_ackreq),
        cmocka_unit_test(test_uc_errors_drop_quietly),
    };
    return cmocka_run_group_tests_name("rdma", tests, NULL, NULL);
}
