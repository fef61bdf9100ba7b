/* hostar: leader engines on an in-memory network with loss, duplication and
 * reordering, every op x type against references computed here in each
 * algorithm's order (bit for bit, on every leader); hostile packets; a dead
 * peer; the packet codec; and the blocking driver over real UDP sockets. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "offpath/hostar.h"
#include "offpath/reduce.h"

#define NET_MAX 16
#define HOP_NS (10 * OP_NS_PER_US)
#define MAX_EVENTS 20000000u

/* ---- the network: packets in flight with their arrival times */
struct flight {
    uint64_t at, order;
    struct op_pkt pkt;
};

struct net {
    struct op_har_eng *eng[NET_MAX];
    struct op_har_peer addr[NET_MAX];
    int n;
    struct flight *f;
    size_t nf, cap;
    uint64_t now, order, events;
    double drop, dup;
    uint64_t jitter_ns;
    int dead; /* this leader's packets vanish both ways; -1 none */
    int drop_acks_from; /* this leader's acks vanish; -1 none */
    struct op_rng rng;
    struct op_pktbuf txbuf;
    struct op_txq q;
    uint64_t lost;
};

static void put(struct net *s, const struct op_pkt *p, uint64_t at)
{
    if (s->nf == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->f = realloc(s->f, s->cap * sizeof(*s->f));
        assert_non_null(s->f);
    }
    struct flight *fl = &s->f[s->nf++];
    fl->at = at;
    fl->order = s->order++;
    fl->pkt = *p;
    fl->pkt.data = malloc(p->len ? p->len : 1);
    assert_non_null(fl->pkt.data);
    memcpy(fl->pkt.data, p->data, p->len);
}

static bool is_dead(const struct net *s, uint32_t ip)
{
    return s->dead >= 0 && s->addr[s->dead].ip == ip;
}

static bool drops_ack(const struct net *s, const struct op_pkt *p)
{
    return s->drop_acks_from >= 0 && p->flow.src.v4 == s->addr[s->drop_acks_from].ip &&
           p->data[OP_BTH_LEN + OP_DETH_LEN + 1] == OP_HAR_KIND_ACK;
}

static void net_flush(void *ctx, struct op_txq *q)
{
    struct net *s = ctx;
    for (int i = 0; i < q->n; i++) {
        const struct op_pkt *p = &q->pkts[i];
        if (is_dead(s, p->flow.src.v4) || is_dead(s, p->flow.dst.v4) || drops_ack(s, p) ||
            op_rng_unit(&s->rng) < s->drop) {
            s->lost++;
            continue;
        }
        int copies = op_rng_unit(&s->rng) < s->dup ? 2 : 1;
        for (int c = 0; c < copies; c++)
            put(s, p, s->now + HOP_NS + (s->jitter_ns ? op_rng_next(&s->rng) % s->jitter_ns : 0));
    }
    q->n = 0;
}

static void make_engine(struct net *s, int r, const struct op_har_config *base)
{
    struct op_har_config cfg = *base;
    cfg.rank = (uint32_t)r;
    cfg.n = (uint32_t)s->n;
    cfg.peers = s->addr;
    op_har_eng_destroy(s->eng[r]);
    s->eng[r] = NULL;
    assert_int_equal(op_har_eng_create(&cfg, &s->eng[r]), OP_OK);
}

static void net_init(struct net *s, int n, const struct op_har_config *base, uint64_t seed)
{
    memset(s, 0, sizeof(*s));
    s->n = n;
    s->dead = s->drop_acks_from = -1;
    op_rng_seed(&s->rng, seed);
    for (int r = 0; r < n; r++)
        s->addr[r] = (struct op_har_peer){.ip = 0x7f500001u + (uint32_t)r * 256, .port = 4791};
    for (int r = 0; r < n; r++)
        make_engine(s, r, base);
    assert_int_equal(op_pktbuf_init(&s->txbuf, 8), OP_OK);
    s->q = (struct op_txq){.pkts = s->txbuf.pkts, .cap = s->txbuf.n, .flush = net_flush, .ctx = s};
}

static void net_free(struct net *s)
{
    for (int r = 0; r < s->n; r++)
        op_har_eng_destroy(s->eng[r]);
    for (size_t i = 0; i < s->nf; i++)
        free(s->f[i].pkt.data);
    free(s->f);
    op_pktbuf_free(&s->txbuf);
}

static void base_config(struct op_har_config *cfg, uint16_t max_data, uint64_t ring_bytes)
{
    op_har_config_default(cfg);
    cfg->session = 0x5eed;
    cfg->max_data = max_data;
    cfg->ring_bytes = ring_bytes;
    cfg->deadline_ns = 5 * OP_NS_PER_S;
}

static void deliver(struct net *s, const struct op_pkt *p)
{
    for (int r = 0; r < s->n; r++)
        if (s->addr[r].ip == p->flow.dst.v4)
            op_har_eng_input(s->eng[r], p, s->now, &s->q);
}

static size_t earliest(const struct net *s)
{
    size_t best = 0;
    for (size_t i = 1; i < s->nf; i++)
        if (s->f[i].at < s->f[best].at ||
            (s->f[i].at == s->f[best].at && s->f[i].order < s->f[best].order))
            best = i;
    return best;
}

static uint64_t next_timer(const struct net *s)
{
    uint64_t t = UINT64_MAX;
    for (int r = 0; r < s->n; r++) {
        uint64_t x = op_har_eng_next_timer(s->eng[r]);
        t = x < t ? x : t;
    }
    return t;
}

static bool running(const struct net *s)
{
    for (int r = 0; r < s->n; r++)
        if (op_har_eng_status(s->eng[r]) == OP_INPROGRESS)
            return true;
    return false;
}

/* One event: the earliest packet or timer, if it comes by `until`. False
 * when none does. */
static bool step(struct net *s, uint64_t until)
{
    uint64_t tp = s->nf ? s->f[earliest(s)].at : UINT64_MAX, tt = next_timer(s);
    if ((tp < tt ? tp : tt) > until)
        return false;
    s->events++;
    if (tp <= tt) {
        size_t i = earliest(s);
        struct flight fl = s->f[i];
        s->f[i] = s->f[--s->nf];
        s->now = fl.at;
        deliver(s, &fl.pkt);
        free(fl.pkt.data);
    } else {
        s->now = tt;
    }
    for (int r = 0; r < s->n; r++)
        if (op_har_eng_next_timer(s->eng[r]) <= s->now)
            op_har_eng_timer(s->eng[r], s->now, &s->q);
    net_flush(s, &s->q);
    return true;
}

/* Until every call ended; false on a hang (nothing left to happen). */
static bool net_run(struct net *s)
{
    net_flush(s, &s->q);
    while (running(s))
        if (s->events > MAX_EVENTS || !step(s, UINT64_MAX - 1))
            return false;
    return true;
}

/* Run for a while of virtual time (leaders that have not started wait). */
static void net_run_for(struct net *s, uint64_t ns)
{
    uint64_t end = s->now + ns;
    net_flush(s, &s->q);
    while (step(s, end))
        ;
    s->now = end;
}

static uint64_t total(const struct net *s, unsigned c)
{
    uint64_t t = 0;
    for (int r = 0; r < s->n; r++)
        t += op_har_eng_counters(s->eng[r])[c];
    return t;
}

/* ---- inputs and references */
static bool logical(unsigned op)
{
    return op == OP_RED_LAND || op == OP_RED_LOR || op == OP_RED_LXOR;
}

static void fill(unsigned type, unsigned op, int rank, uint32_t call, size_t count, uint8_t *buf)
{
    struct op_rng g;
    op_rng_seed(&g, (uint64_t)rank << 40 ^ (uint64_t)call << 20 ^ count ^ type << 8 ^ op);
    size_t es = op_red_type_size(type);
    for (size_t i = 0; i < count; i++) {
        uint64_t x = op_rng_next(&g);
        bool zero = logical(op) && x % 4 == 0;
        if (type == OP_RED_FLOAT32) {
            float v = zero ? 0.0f : (float)(int32_t)x / 65536.0f;
            memcpy(buf + i * es, &v, 4);
        } else if (type == OP_RED_FLOAT64) {
            double v = zero ? 0.0 : (double)(int64_t)x / 1e9;
            memcpy(buf + i * es, &v, 8);
        } else {
            x = zero ? 0 : x;
            memcpy(buf + i * es, &x, es); /* little-endian host: the low bytes */
        }
    }
}

/* dst = a op b (a the left operand) on n elements; dst may be a or b. */
static void op_ab(unsigned type, unsigned op, uint8_t *dst, const uint8_t *a, const uint8_t *b,
                  size_t n)
{
    size_t bytes = n * op_red_type_size(type);
    uint8_t *t = malloc(bytes + 1);
    assert_non_null(t);
    memcpy(t, a, bytes);
    op_reduce(op, type, t, b, n);
    memcpy(dst, t, bytes);
    free(t);
}

/* Recursive doubling's order: folded pairs (lower first), then pairs at
 * distance 1, 2, 4 of the remaining leaders, lower rank first. */
static void ref_rd(int n, unsigned type, unsigned op, size_t count, uint8_t **v, uint8_t *out)
{
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    int rem = n - p, real[NET_MAX];
    for (int r = 1; r < 2 * rem; r += 2)
        op_ab(type, op, v[r], v[r - 1], v[r], count);
    for (int i = 0; i < p; i++)
        real[i] = i < rem ? 2 * i + 1 : i + rem;
    for (int d = 1; d < p; d *= 2)
        for (int i = 0; i < p; i++)
            if ((i & d) == 0) {
                uint8_t *a = v[real[i]], *b = v[real[i | d]];
                op_ab(type, op, a, a, b, count);
                memcpy(b, a, count * op_red_type_size(type));
            }
    memcpy(out, v[real[0]], count * op_red_type_size(type));
}

/* The ring's order: block b starts at leader b; each next leader puts its
 * own value on the left of what it received. */
static void ref_ring(int n, unsigned type, unsigned op, size_t count, uint8_t **v, uint8_t *out)
{
    size_t es = op_red_type_size(type);
    for (int b = 0; b < n; b++) {
        size_t lo = (size_t)b * count / (size_t)n, len = (size_t)(b + 1) * count / (size_t)n - lo;
        memcpy(out + lo * es, v[b] + lo * es, len * es);
        for (int j = 1; j < n; j++)
            op_ab(type, op, out + lo * es, v[(b + j) % n] + lo * es, out + lo * es, len);
    }
}

struct call {
    unsigned type, op;
    size_t count;
    bool ring, in_place;
    uint32_t id;
};

/* Start the call on leaders [from, to). */
static void start(struct net *s, const struct call *c, uint8_t **send, uint8_t **recv, int from,
                  int to)
{
    for (int r = from; r < to; r++)
        assert_int_equal(op_har_eng_allreduce(s->eng[r], send[r], c->in_place ? send[r] : recv[r],
                                              c->count, c->type, c->op, s->now, &s->q),
                         OP_OK);
}

/* Every leader's counters, to see why a call failed. */
static void dump(const struct net *s)
{
    for (int r = 0; r < s->n; r++) {
        const uint64_t *c = op_har_eng_counters(s->eng[r]);
        fprintf(stderr, "leader %d status %d:", r, op_har_eng_status(s->eng[r]));
        for (unsigned i = 0; i < OP_HAR_C_COUNT_; i++)
            if (c[i] != 0)
                fprintf(stderr, " %s %llu", op_har_counter_name(i), (unsigned long long)c[i]);
        fprintf(stderr, "\n");
    }
}

static void check_results(struct net *s, const struct call *c, uint8_t **recv, uint8_t **send)
{
    size_t bytes = c->count * op_red_type_size(c->type);
    uint8_t *ref = malloc(bytes + 1), *v[NET_MAX];
    assert_non_null(ref);
    for (int r = 0; r < s->n; r++) {
        v[r] = malloc(bytes + 1);
        assert_non_null(v[r]);
        fill(c->type, c->op, r, c->id, c->count, v[r]);
    }
    (c->ring ? ref_ring : ref_rd)(s->n, c->type, c->op, c->count, v, ref);
    for (int r = 0; r < s->n; r++) {
        if (op_har_eng_status(s->eng[r]) != OP_OK)
            dump(s);
        assert_int_equal(op_har_eng_status(s->eng[r]), OP_OK);
        if (memcmp(c->in_place ? send[r] : recv[r], ref, bytes) != 0)
            fail_msg("%d leaders, leader %d: %s %s count %zu (%s) differs from the reference",
                     s->n, r, op_red_op_name(c->op), op_red_type_name(c->type), c->count,
                     c->ring ? "ring" : "recursive doubling");
        free(v[r]);
    }
    free(ref);
}

/* One allreduce on every leader (started late on leaders >= late_from),
 * checked bit for bit. */
static void run_call(struct net *s, struct call *c, int late_from)
{
    size_t bytes = c->count * op_red_type_size(c->type) + 1;
    uint8_t *send[NET_MAX], *recv[NET_MAX];
    c->id++;
    for (int r = 0; r < s->n; r++) {
        send[r] = malloc(bytes);
        recv[r] = malloc(bytes);
        assert_non_null(send[r]);
        assert_non_null(recv[r]);
        fill(c->type, c->op, r, c->id, c->count, send[r]);
    }
    start(s, c, send, recv, 0, late_from);
    if (late_from < s->n) {
        net_run_for(s, 300 * OP_NS_PER_US);
        start(s, c, send, recv, late_from, s->n);
    }
    assert_true(net_run(s));
    check_results(s, c, recv, send);
    for (int r = 0; r < s->n; r++) {
        free(send[r]);
        free(recv[r]);
    }
}

/* ---- tests */
static void every_op_and_type(int n, uint64_t ring_bytes, uint64_t seed)
{
    struct net s;
    struct op_har_config cfg;
    base_config(&cfg, 64, ring_bytes); /* 64-byte packets: several chunks per step */
    net_init(&s, n, &cfg, seed);
    s.jitter_ns = 30 * OP_NS_PER_US; /* reordering */
    const size_t counts[] = {1, 7, 61};
    struct call c = {0};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
        for (c.type = 0; c.type < OP_RED_TYPE_COUNT_; c.type++)
            for (c.op = 0; c.op < OP_RED_OP_COUNT_; c.op++) {
                if (!op_red_valid(c.op, c.type))
                    continue;
                c.count = counts[i];
                c.ring = ring_bytes == 0 && c.count >= (size_t)n;
                c.in_place = (c.op + c.type) % 2 == 0;
                run_call(&s, &c, n);
            }
    assert_int_equal(total(&s, OP_HAR_C_drop_mismatch), 0);
    assert_int_equal(total(&s, OP_HAR_C_drop_foreign), 0);
    net_free(&s);
}

static void test_recursive_doubling_every_op_type(void **state)
{
    (void)state;
    const int ns[] = {2, 3, 5, 8, 13};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
        every_op_and_type(ns[i], UINT64_MAX, 10 + i);
}

static void test_ring_every_op_type(void **state)
{
    (void)state;
    const int ns[] = {2, 3, 5, 8, 13};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
        every_op_and_type(ns[i], 0, 20 + i);
}

/* 5% loss, 2% duplication and reordering on every packet, several calls in
 * a row (late packets of one call meet the next); adds what was resent and
 * what came twice to *retx and *dups. */
static void lossy(int n, uint64_t ring_bytes, size_t count, unsigned type, unsigned op,
                  uint64_t *retx, uint64_t *dups)
{
    struct net s;
    struct op_har_config cfg;
    base_config(&cfg, 4096, ring_bytes);
    net_init(&s, n, &cfg, 1000 + (uint64_t)n);
    s.drop = 0.05;
    s.dup = 0.02;
    s.jitter_ns = 50 * OP_NS_PER_US;
    struct call c = {.type = type, .op = op, .count = count};
    c.ring = ring_bytes == 0 && count >= (size_t)n;
    for (int i = 0; i < 6; i++)
        run_call(&s, &c, i % 2 ? n / 2 : n);
    assert_true(s.lost > 0);
    *retx += total(&s, OP_HAR_C_retransmissions);
    *dups += total(&s, OP_HAR_C_duplicates);
    net_free(&s);
}

static void test_loss_duplication_reordering(void **state)
{
    (void)state;
    uint64_t retx = 0, dups = 0;
    lossy(5, 0, 100003, OP_RED_FLOAT64, OP_RED_SUM, &retx, &dups); /* ring, ~20 KiB blocks */
    lossy(8, 0, 65536, OP_RED_INT32, OP_RED_BXOR, &retx, &dups);
    lossy(13, UINT64_MAX, 3001, OP_RED_FLOAT32, OP_RED_PROD, &retx, &dups); /* folded */
    lossy(3, UINT64_MAX, 1, OP_RED_INT8, OP_RED_MIN, &retx, &dups);
    assert_true(retx > 0 && dups > 0);
}

/* Leaders that start late get the others' packets first: kept, then used. */
static void test_early_packets_are_kept(void **state)
{
    (void)state;
    for (int ring = 0; ring < 2; ring++) {
        struct net s;
        struct op_har_config cfg;
        base_config(&cfg, 256, ring ? 0 : UINT64_MAX);
        net_init(&s, 6, &cfg, 77);
        struct call c = {.type = OP_RED_FLOAT64, .op = OP_RED_SUM, .count = 500, .ring = ring};
        run_call(&s, &c, 6);
        run_call(&s, &c, 3);
        run_call(&s, &c, 1);
        assert_true(total(&s, OP_HAR_C_held) > 0);
        assert_int_equal(total(&s, OP_HAR_C_hold_full), 0);
        net_free(&s);
    }
}

/* A kept-packet store of one: what does not fit is refused, sent again, and
 * the result is still exact. */
static void test_small_hold_store(void **state)
{
    (void)state;
    struct net s;
    struct op_har_config cfg;
    base_config(&cfg, 64, UINT64_MAX);
    cfg.hold_max = 1;
    net_init(&s, 5, &cfg, 5);
    struct call c = {.type = OP_RED_INT64, .op = OP_RED_SUM, .count = 200};
    run_call(&s, &c, 2);
    run_call(&s, &c, 4);
    assert_true(total(&s, OP_HAR_C_hold_full) > 0);
    net_free(&s);
}

static void make_pkt(struct net *s, int from, int to, struct op_har_hdr *h, const void *payload,
                     size_t len, uint8_t *buf, struct op_pkt *p)
{
    h->version = OP_HAR_VERSION;
    h->session = 0x5eed;
    h->src = (uint16_t)from;
    h->dst = (uint16_t)to;
    size_t n = op_har_frame(h, len, buf, OP_IO_BUF_SIZE);
    assert_true(n > 0);
    memcpy(buf + OP_HAR_PREFIX_LEN, payload, len);
    p->flow = (struct op_flow){.src.v4 = s->addr[from].ip, .src_port = s->addr[from].port,
                               .dst.v4 = s->addr[to].ip, .dst_port = s->addr[to].port};
    p->data = buf;
    p->len = (uint32_t)op_icrc_seal(&p->flow, buf, n, OP_IO_BUF_SIZE);
}

/* Garbage, other sessions, wrong sources, bad ICRCs, pieces that fit no step,
 * calls far ahead, acks of what was never sent: each dropped and counted,
 * none taken as received, and the allreduces around them stay exact. */
static void test_hostile_packets_ignored_and_counted(void **state)
{
    (void)state;
    struct net s;
    struct op_har_config cfg;
    base_config(&cfg, 64, UINT64_MAX);
    net_init(&s, 3, &cfg, 9);
    struct call c = {.type = OP_RED_INT32, .op = OP_RED_SUM, .count = 40};
    run_call(&s, &c, 3); /* leader 0 sent leader 1 its 3 chunks: tsn 0..2 */
    uint8_t buf[OP_IO_BUF_SIZE], pay[20] = {0};
    struct op_pkt p;
    struct op_har_hdr h = {.kind = OP_HAR_KIND_DATA, .op = OP_RED_SUM, .dtype = OP_RED_INT32,
                           .tsn = 3, .call = 2, .step = 1, .count = 4, .total = 40};
    struct op_har_eng *e = s.eng[1];
    const uint64_t *k = op_har_eng_counters(e);
    make_pkt(&s, 0, 1, &h, pay, 16, buf, &p);
    p.len -= 1;
    op_har_eng_input(e, &p, s.now, &s.q);
    assert_int_equal(k[OP_HAR_C_drop_truncated], 1);
    p.len += 2; /* a trailing byte */
    op_har_eng_input(e, &p, s.now, &s.q);
    assert_int_equal(k[OP_HAR_C_drop_malformed], 1);
    make_pkt(&s, 0, 1, &h, pay, 16, buf, &p);
    buf[OP_HAR_PREFIX_LEN] ^= 1; /* changed after the ICRC */
    op_har_eng_input(e, &p, s.now, &s.q);
    assert_int_equal(k[OP_HAR_C_drop_icrc], 1);
    make_pkt(&s, 0, 1, &h, pay, 16, buf, &p);
    p.flow.src_port++; /* not where leader 0 is */
    op_har_eng_input(e, &p, s.now, &s.q);
    make_pkt(&s, 0, 1, &h, pay, 16, buf, &p);
    buf[OP_BTH_LEN + OP_DETH_LEN + 7] ^= 0x44; /* another session, sealed again */
    p.len = (uint32_t)op_icrc_seal(&p.flow, buf, p.len - OP_ICRC_LEN, OP_IO_BUF_SIZE);
    op_har_eng_input(e, &p, s.now, &s.q);
    assert_int_equal(k[OP_HAR_C_drop_foreign], 2);
    h.call = 9;
    make_pkt(&s, 0, 1, &h, pay, 16, buf, &p);
    op_har_eng_input(e, &p, s.now, &s.q);
    assert_int_equal(k[OP_HAR_C_future], 1);
    h.call = 2;
    h.tsn = 1000;
    make_pkt(&s, 0, 1, &h, pay, 16, buf, &p);
    op_har_eng_input(e, &p, s.now, &s.q);
    assert_int_equal(k[OP_HAR_C_drop_window], 1);
    struct op_har_hdr ack = {.kind = OP_HAR_KIND_ACK, .flags = OP_HAR_F_ACK, .ack = 1000};
    make_pkt(&s, 2, 1, &ack, pay, 0, buf, &p);
    op_har_eng_input(e, &p, s.now, &s.q);
    assert_int_equal(k[OP_HAR_C_drop_mismatch], 1);
    /* call 2 runs on leader 1 alone first: a piece of it that fits no step
     * (5 elements where the fold's chunks have 16) is refused, not taken as
     * sequence number 3, so leader 0's real packet 3 still counts */
    int32_t v[3][40];
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 40; i++)
            v[r][i] = r * 100 + i;
    assert_int_equal(op_har_eng_allreduce(e, v[1], v[1], 40, OP_RED_INT32, OP_RED_SUM, s.now,
                                          &s.q),
                     OP_OK);
    h.tsn = 3;
    h.step = 0;
    h.count = 5;
    make_pkt(&s, 0, 1, &h, pay, 20, buf, &p);
    op_har_eng_input(e, &p, s.now, &s.q);
    assert_int_equal(k[OP_HAR_C_drop_mismatch], 2);
    for (int r = 0; r < 3; r += 2)
        assert_int_equal(op_har_eng_allreduce(s.eng[r], v[r], v[r], 40, OP_RED_INT32, OP_RED_SUM,
                                              s.now, &s.q),
                         OP_OK);
    assert_true(net_run(&s));
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 40; i++)
            assert_int_equal(v[r][i], 300 + 3 * i);
    c.id = 2;
    run_call(&s, &c, 3);
    assert_int_equal(k[OP_HAR_C_drop_mismatch], 2);
    net_free(&s);
}

/* A peer that never answers: every call ends at its deadline, no hang, and
 * the session is not used again. */
static void test_dead_peer_deadline(void **state)
{
    (void)state;
    for (int ring = 0; ring < 2; ring++) {
        struct net s;
        struct op_har_config cfg;
        base_config(&cfg, 4096, ring ? 0 : UINT64_MAX);
        cfg.deadline_ns = 200 * OP_NS_PER_MS;
        net_init(&s, 4, &cfg, 3);
        s.dead = 2;
        int32_t buf[4][16] = {{0}};
        uint64_t t0 = s.now;
        for (int r = 0; r < 4; r++)
            if (r != 2)
                assert_int_equal(op_har_eng_allreduce(s.eng[r], buf[r], buf[r], 16, OP_RED_INT32,
                                                      OP_RED_SUM, s.now, &s.q),
                                 OP_OK);
        assert_true(net_run(&s));
        for (int r = 0; r < 4; r++) {
            if (r == 2)
                continue;
            assert_int_equal(op_har_eng_status(s.eng[r]), OP_ERR_TIMEOUT);
            assert_int_equal(op_har_eng_allreduce(s.eng[r], buf[r], buf[r], 16, OP_RED_INT32,
                                                  OP_RED_SUM, s.now, &s.q),
                             OP_ERR_STATE);
        }
        assert_int_equal(total(&s, OP_HAR_C_deadlines), 3);
        assert_true(s.now - t0 <= 200 * OP_NS_PER_MS); /* ended at the deadline, not later */
        net_free(&s);
    }
}

/* Its acks lost, a leader that has its result keeps resending what it sent
 * (the peer might still need it); the first ack that gets through ends that,
 * and with none it gives up one deadline after the call. */
static void test_unacked_data_resent_after_the_call(void **state)
{
    (void)state;
    struct net s;
    struct op_har_config cfg;
    base_config(&cfg, 4096, UINT64_MAX);
    cfg.deadline_ns = 100 * OP_NS_PER_MS;
    net_init(&s, 2, &cfg, 4);
    struct call c = {.type = OP_RED_INT32, .op = OP_RED_SUM, .count = 10};
    const uint64_t *k = op_har_eng_counters(s.eng[0]);
    s.drop_acks_from = 1;
    run_call(&s, &c, 2);
    assert_false(op_har_eng_quiet(s.eng[0]));
    net_run_for(&s, 20 * OP_NS_PER_MS);
    assert_true(k[OP_HAR_C_retransmissions] > 0);
    s.drop_acks_from = -1;
    net_run_for(&s, 50 * OP_NS_PER_MS);
    assert_true(op_har_eng_quiet(s.eng[0]));
    assert_int_equal(k[OP_HAR_C_abandoned], 0);
    s.drop_acks_from = 1;
    run_call(&s, &c, 2);
    net_run_for(&s, 300 * OP_NS_PER_MS);
    assert_true(op_har_eng_quiet(s.eng[0]));
    assert_int_equal(k[OP_HAR_C_abandoned], 1);
    s.drop_acks_from = -1;
    run_call(&s, &c, 2); /* the streams are still in step */
    net_free(&s);
}

/* Field by field: the struct has padding. */
static bool same_hdr(const struct op_har_hdr *a, const struct op_har_hdr *b)
{
    return a->version == b->version && a->kind == b->kind && a->op == b->op &&
           a->dtype == b->dtype && a->session == b->session && a->src == b->src &&
           a->dst == b->dst && a->tsn == b->tsn && a->call == b->call && a->step == b->step &&
           a->count == b->count && a->offset == b->offset && a->total == b->total &&
           a->flags == b->flags && a->ack == b->ack && a->sack == b->sack;
}

static void test_codec(void **state)
{
    (void)state;
    uint8_t buf[OP_IO_BUF_SIZE], pay[3] = {1, 2, 3};
    struct op_har_hdr h = {.version = 1, .kind = OP_HAR_KIND_DATA, .op = OP_RED_BXOR,
                           .dtype = OP_RED_UINT8, .session = 7, .src = 1, .dst = 2, .tsn = 5,
                           .call = 3, .step = 4, .count = 3, .offset = 10, .total = 13};
    size_t n = op_har_frame(&h, 3, buf, sizeof(buf));
    assert_int_equal(n, OP_HAR_PREFIX_LEN + 3 + 1);
    memcpy(buf + OP_HAR_PREFIX_LEN, pay, 3);
    struct op_flow f = {.src.v4 = 1, .dst.v4 = 2, .src_port = 3, .dst_port = 4};
    n = op_icrc_seal(&f, buf, n, sizeof(buf));
    struct op_har_pkt k;
    assert_int_equal(op_har_decode(buf, n, &k), OP_OK);
    assert_true(same_hdr(&k.hdr, &h));
    assert_int_equal(k.payload_len, 3);
    assert_true(op_icrc_check(&f, buf, n));
    uint32_t session;
    assert_true(op_har_session_of(buf, n, &session) && session == 7);
    /* each rule of docs/wire.md section 11 */
    const struct { size_t at; uint8_t x; } bad[] = {
        {0, 0x01},                       /* opcode */
        {7, 0x01},                       /* destination QP */
        {12, 0x01},                      /* Q_Key */
        {20, 0x02},                      /* version */
        {21, 0x07},                      /* kind */
        {22, 0x10},                      /* op */
        {23, OP_RED_UINT8 ^ OP_RED_FLOAT32}, /* bitwise op on a float */
        {43, 0x03},                      /* count 0 */
        {51, 0x0f},                      /* total below offset + count */
        {OP_HAR_PREFIX_LEN + 3, 0x01},   /* pad not zero */
        {11, 0x01},                      /* PSN is not the tsn */
        {52, 0x02},                      /* unknown flag */
        {53, 0x01},                      /* reserved */
        {59, 0x01},                      /* an ack without the ACK flag */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        buf[bad[i].at] ^= bad[i].x;
        assert_int_equal(op_har_decode(buf, n, &k), OP_ERR_MALFORMED);
        buf[bad[i].at] ^= bad[i].x;
    }
    assert_int_equal(op_har_decode(buf, n - 1, &k), OP_ERR_TRUNCATED);
    assert_int_equal(op_har_decode(buf, 20, &k), OP_ERR_TRUNCATED);
    struct op_har_hdr ack = {.version = 1, .kind = OP_HAR_KIND_ACK, .flags = OP_HAR_F_ACK,
                             .ack = 9, .sack = 5};
    n = op_icrc_seal(&f, buf, op_har_frame(&ack, 0, buf, sizeof(buf)), sizeof(buf));
    assert_int_equal(n, OP_HAR_PREFIX_LEN + OP_ICRC_LEN);
    assert_int_equal(op_har_decode(buf, n, &k), OP_OK);
    assert_true(same_hdr(&k.hdr, &ack));
    buf[OP_BTH_LEN + OP_DETH_LEN + 16] = 1; /* an ack with a call */
    assert_int_equal(op_har_decode(buf, n, &k), OP_ERR_MALFORMED);
    assert_int_equal(op_har_frame(&h, 3, buf, 40), 0);
}

static void test_bad_configs(void **state)
{
    (void)state;
    struct op_har_peer peers[2] = {{1, 2}, {3, 4}};
    struct op_har_config cfg;
    struct op_har_eng *e;
    base_config(&cfg, 4096, 0);
    cfg.peers = peers;
    cfg.n = 2;
    assert_int_equal(op_har_eng_create(&cfg, &e), OP_OK);
    assert_int_equal(op_har_eng_allreduce(e, peers, peers, 1, OP_RED_FLOAT32, OP_RED_BAND, 0,
                                          NULL),
                     OP_ERR_INVAL);
    op_har_eng_destroy(e);
    struct op_har_config bad[6];
    for (int i = 0; i < 6; i++)
        bad[i] = cfg;
    bad[0].n = 1;
    bad[1].rank = 2;
    bad[2].max_data = 100;
    bad[3].window = 64;
    bad[4].peers = NULL;
    bad[5].deadline_ns = 0;
    for (int i = 0; i < 6; i++)
        assert_int_equal(op_har_eng_create(&bad[i], &e), OP_ERR_INVAL);
}

/* ---- the blocking driver over real sockets, one thread per leader */
struct udp_leader {
    struct op_har_port *port;
    struct op_har_client *client;
    int rank, n;
    int wrong;
    op_status_t st;
    uint64_t start_ns, end_ns;
};

static void *udp_leader_main(void *arg)
{
    struct udp_leader *l = arg;
    static const size_t counts[] = {1, 100, 5000, 70000, 3};
    for (int it = 0; it < 10 && l->st == OP_OK; it++) {
        size_t count = counts[it % 5];
        int64_t *v = malloc(count * sizeof(*v));
        for (size_t i = 0; i < count; i++)
            v[i] = (int64_t)(i * 3 + (size_t)l->rank * 1000 + (size_t)it);
        l->st = op_har_allreduce(l->client, v, v, count, OP_RED_INT64, OP_RED_SUM);
        for (size_t i = 0; i < count && l->st == OP_OK; i++) {
            int64_t want = (int64_t)l->n * (int64_t)(i * 3 + (size_t)it) +
                           1000 * l->n * (l->n - 1) / 2;
            l->wrong += v[i] != want;
        }
        free(v);
    }
    return NULL;
}

static void test_udp_driver_with_loss(void **state)
{
    (void)state;
    enum { N = 3 };
    struct op_har_peer peers[N];
    struct udp_leader l[N];
    uint16_t port = (uint16_t)(20000 + getpid() % 20000);
    struct op_fault_cfg fault = {.drop = 0.05, .dup = 0.02};
    for (int r = 0; r < N; r++) {
        peers[r] = (struct op_har_peer){.ip = 0x7f4d0001u + (uint32_t)r * 256, .port = port};
        fault.seed = (uint64_t)r + 1;
        l[r] = (struct udp_leader){.rank = r, .n = N, .st = OP_OK};
        assert_int_equal(op_har_port_open(peers[r].ip, port, true, &fault, &l[r].port), OP_OK);
    }
    struct op_har_config cfg;
    base_config(&cfg, 4096, 16384);
    cfg.peers = peers;
    cfg.n = N;
    for (int r = 0; r < N; r++) {
        cfg.rank = (uint32_t)r;
        assert_int_equal(op_har_attach(l[r].port, &cfg, &l[r].client), OP_OK);
    }
    pthread_t t[N];
    for (int r = 0; r < N; r++)
        assert_int_equal(pthread_create(&t[r], NULL, udp_leader_main, &l[r]), 0);
    for (int r = 0; r < N; r++)
        pthread_join(t[r], NULL);
    uint64_t retx = 0, c[OP_HAR_C_COUNT_];
    for (int r = 0; r < N; r++) {
        assert_int_equal(l[r].st, OP_OK);
        assert_int_equal(l[r].wrong, 0);
        op_har_client_counters(l[r].client, c);
        retx += c[OP_HAR_C_retransmissions];
        op_har_client_free(l[r].client);
        op_har_port_close(l[r].port);
    }
    assert_true(retx > 0);
}

static void *one_call(void *arg)
{
    struct udp_leader *l = arg;
    int64_t v = l->rank + 1;
    l->start_ns = op_now_ns();
    l->st = op_har_allreduce(l->client, &v, &v, 1, OP_RED_INT64, OP_RED_SUM);
    l->end_ns = op_now_ns();
    l->wrong = v != 3;
    return NULL;
}

/* Leader 0's packets are held 20 ms on their way out: its own call ends
 * (leader 1's data came at once) with its data still in the queue, and only
 * its port's thread, not a call, can get it to leader 1. */
static void test_udp_thread_sends_after_the_call(void **state)
{
    (void)state;
    struct op_har_peer peers[2];
    struct udp_leader l[2];
    uint16_t port = (uint16_t)(20000 + (getpid() + 7) % 20000);
    struct op_fault_cfg slow = {.delay_us = 20000};
    struct op_har_config cfg;
    base_config(&cfg, 4096, 65536);
    cfg.peers = peers;
    cfg.n = 2;
    for (int r = 0; r < 2; r++)
        peers[r] = (struct op_har_peer){.ip = 0x7f4e0001u + (uint32_t)r * 256, .port = port};
    for (int r = 0; r < 2; r++) {
        l[r] = (struct udp_leader){.rank = r, .n = 2, .st = OP_OK};
        assert_int_equal(op_har_port_open(peers[r].ip, port, true, r ? NULL : &slow, &l[r].port), OP_OK);
        cfg.rank = (uint32_t)r;
        assert_int_equal(op_har_attach(l[r].port, &cfg, &l[r].client), OP_OK);
    }
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, one_call, &l[1]), 0);
    one_call(&l[0]);
    pthread_join(t, NULL);
    assert_true(l[0].end_ns < l[1].end_ns && l[1].end_ns - l[0].start_ns >= 20 * OP_NS_PER_MS);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(l[r].st, OP_OK);
        assert_int_equal(l[r].wrong, 0);
        op_har_client_free(l[r].client);
        op_har_port_close(l[r].port);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_recursive_doubling_every_op_type),
        cmocka_unit_test(test_ring_every_op_type),
        cmocka_unit_test(test_loss_duplication_reordering),
        cmocka_unit_test(test_early_packets_are_kept),
        cmocka_unit_test(test_small_hold_store),
        cmocka_unit_test(test_hostile_packets_ignored_and_counted),
        cmocka_unit_test(test_dead_peer_deadline),
        cmocka_unit_test(test_unacked_data_resent_after_the_call),
        cmocka_unit_test(test_udp_driver_with_loss),
        cmocka_unit_test(test_udp_thread_sends_after_the_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
