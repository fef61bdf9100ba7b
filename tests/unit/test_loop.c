/* The engine contract (offpath/loop.h): a toy protocol's two engines run by
 * the one driver over the udp backend and over the fault backend (loss,
 * duplication): every request answered exactly once, retransmissions by the
 * engine's own deadline, packets nobody claims counted. The engines still
 * to come (channel, agent, DNS, GPU queue) pass this same test first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../../src/io/io_internal.h" /* a polled mock backend */
#include "offpath/loop.h"

#define IP_C 0x7f2e0001u /* 127.46.0.1: the asking side */
#define IP_S 0x7f2e0002u /* 127.46.0.2: the answering side */
#define PORT 47211
#define N_REQ 500
#define WINDOW 32
#define RTO_NS (5 * OP_NS_PER_MS)

enum { REQ = 1, ACK = 2 };

/* Sends N_REQ numbered requests, WINDOW at a time, and resends those not
 * acknowledged within RTO_NS. */
struct asker {
    uint8_t id;
    uint32_t next, acked;
    uint64_t sent_ns[N_REQ];
    bool done[N_REQ];
    uint64_t resent, dup_acks;
};

/* Acknowledges every request it gets, duplicates too. */
struct answerer {
    uint64_t requests;
};

static void put(struct op_txq *q, uint32_t src, uint32_t dst, uint8_t id, uint8_t type,
                uint32_t seq)
{
    struct op_pkt *p = op_txq_next(q);
    p->flow = (struct op_flow){.src.v4 = src, .src_port = PORT, .dst.v4 = dst, .dst_port = PORT};
    p->data[0] = id;
    p->data[1] = type;
    memcpy(p->data + 4, &seq, 4);
    p->len = 8;
    op_txq_commit(q);
}

static uint32_t seq_of(const struct op_pkt *p)
{
    uint32_t seq;
    memcpy(&seq, p->data + 4, 4);
    return seq;
}

static void asker_send(struct asker *a, uint32_t i, uint64_t now, struct op_txq *out)
{
    put(out, IP_C, IP_S, a->id, REQ, i);
    a->sent_ns[i] = now;
}

static void asker_fill(struct asker *a, uint64_t now, struct op_txq *out)
{
    while (a->next < N_REQ && a->next - a->acked < WINDOW) {
        asker_send(a, a->next, now, out);
        a->next++;
    }
}

static void asker_input(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    struct asker *a = eng;
    uint32_t seq = seq_of(pkt);
    if (pkt->len != 8 || pkt->data[1] != ACK || seq >= N_REQ)
        return;
    if (a->done[seq]) {
        a->dup_acks++;
        return;
    }
    a->done[seq] = true;
    while (a->acked < N_REQ && a->done[a->acked])
        a->acked++;
    asker_fill(a, now, out);
}

static void asker_timer(void *eng, uint64_t now, struct op_txq *out)
{
    struct asker *a = eng;
    for (uint32_t i = a->acked; i < a->next; i++)
        if (!a->done[i] && now - a->sent_ns[i] >= RTO_NS) {
            asker_send(a, i, now, out);
            a->resent++;
        }
}

static uint64_t asker_deadline(const void *eng)
{
    const struct asker *a = eng;
    uint64_t t = UINT64_MAX;
    for (uint32_t i = a->acked; i < a->next; i++)
        if (!a->done[i] && a->sent_ns[i] + RTO_NS < t)
            t = a->sent_ns[i] + RTO_NS;
    return t;
}

static void answerer_input(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    (void)now;
    struct answerer *s = eng;
    if (pkt->len == 8 && pkt->data[1] == REQ) {
        s->requests++;
        put(out, IP_S, pkt->flow.src.v4, pkt->data[0], ACK, seq_of(pkt));
    }
}

static void no_timer(void *eng, uint64_t now, struct op_txq *out)
{
    (void)eng;
    (void)now;
    (void)out;
}

static uint64_t no_deadline(const void *eng)
{
    (void)eng;
    return UINT64_MAX;
}

static const struct op_engine_ops asker_ops = {
    .name = "asker",
    .input = asker_input,
    .timer = asker_timer,
    .next_deadline = asker_deadline,
};
static const struct op_engine_ops answerer_ops = {
    .name = "answerer",
    .input = answerer_input,
    .timer = no_timer,
    .next_deadline = no_deadline,
};

static struct op_io *open_io(uint32_t ip, const struct op_fault_cfg *fault)
{
    struct op_io *io;
    assert_int_equal(op_io_udp_open(ip, PORT, &io), OP_OK);
    if (fault != NULL)
        assert_int_equal(op_io_fault_wrap(io, fault, &io), OP_OK);
    return io;
}

/* The asker's side demultiplexes by the engine id in the first byte. */
static void *by_id(void *ctx, const struct op_pkt *pkt)
{
    struct asker **askers = ctx;
    for (int i = 0; askers[i] != NULL; i++)
        if (pkt->len > 0 && pkt->data[0] == askers[i]->id)
            return askers[i];
    return NULL;
}

/* How a run drives the two loops. */
struct variant {
    const struct op_fault_cfg *fault;
    pthread_mutex_t *lock;
    bool many;  /* one op_loop_run_many over both, not a round each */
    bool wakes; /* the answerer as the switch runs: capped bursts, output
                 * held to the round's end through a flush hook, a larger
                 * queue, busy polling */
};

/* The switch's kind of flush hook: sees the whole round's output. */
struct hook {
    uint64_t calls, pkts;
};

static void counting_flush(void *ctx, struct op_io *io, struct op_txq *q)
{
    struct hook *h = ctx;
    h->calls++;
    h->pkts += (uint64_t)q->n;
    op_io_send(io, q->pkts, q->n);
}

static void drive(const struct variant *v, struct op_loop *sl, struct op_loop *cl)
{
    if (v->many) {
        struct op_loop *both[2] = {sl, cl};
        assert_true(op_loop_run_many(both, 2, op_now_ns() + OP_NS_PER_MS) >= 0);
        return;
    }
    assert_true(op_loop_run_once(sl, op_now_ns() + OP_NS_PER_MS) >= 0);
    assert_true(op_loop_run_once(cl, op_now_ns() + OP_NS_PER_MS) >= 0);
}

static void exchange(const struct variant *v)
{
    struct op_io *cio = open_io(IP_C, v->fault), *sio = open_io(IP_S, v->fault);
    struct asker *a = calloc(2, sizeof(*a)), *askers[3] = {&a[0], &a[1], NULL};
    struct answerer s = {0};
    struct hook h = {0};
    a[0].id = 7;
    a[1].id = 9;
    struct op_loop *cl, *sl;
    struct op_loop_config cc = {.io = cio, .demux = by_id, .demux_ctx = askers, .lock = v->lock};
    struct op_loop_config sc = {.io = sio};
    if (v->wakes)
        sc = (struct op_loop_config){.io = sio, .burst = 8, .tx_queue = 64, .bursts_per_round = 2,
                                     .flush_per_round = true, .busy_poll = true,
                                     .flush = counting_flush, .flush_ctx = &h};
    assert_int_equal(op_loop_create(&cc, &cl), OP_OK);
    assert_int_equal(op_loop_create(&sc, &sl), OP_OK);
    for (int i = 0; i < 2; i++)
        assert_int_equal(op_loop_add(cl, &asker_ops, &a[i]), OP_OK);
    assert_int_equal(op_loop_add(sl, &answerer_ops, &s), OP_OK);
    for (int i = 0; i < 2; i++)
        asker_fill(&a[i], op_now_ns(), op_loop_txq(cl));
    op_loop_flush(cl);
    uint64_t give_up = op_now_ns() + 20 * OP_NS_PER_S;
    while ((a[0].acked < N_REQ || a[1].acked < N_REQ) && op_now_ns() < give_up)
        drive(v, sl, cl);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(a[i].acked, N_REQ); /* each answered, each counted once */
        for (int k = 0; k < N_REQ; k++)
            assert_true(a[i].done[k]);
    }
    assert_true(s.requests >= 2 * N_REQ);
    struct op_loop_stats st, sst;
    op_loop_stats(cl, &st);
    op_loop_stats(sl, &sst);
    assert_int_equal(st.unclaimed, 0);
    assert_true(st.rx >= 2 * N_REQ);
    if (v->fault != NULL) { /* lost requests came back by the engine's own deadline */
        assert_true(a[0].resent + a[1].resent > 0);
        assert_true(s.requests > 2 * N_REQ);
    }
    if (v->wakes) { /* every answer went through the hook, at most once a round */
        assert_int_equal(h.pkts, s.requests);
        assert_int_equal(h.calls, sst.flushes);
        assert_true(h.calls <= sst.rounds);
    }
    op_loop_destroy(cl);
    op_loop_destroy(sl);
    op_io_close(cio);
    op_io_close(sio);
    free(a);
}

static void test_contract_over_udp(void **state)
{
    (void)state;
    exchange(&(struct variant){0});
}

static void test_contract_over_fault_backend(void **state)
{
    (void)state;
    struct op_fault_cfg f = {.drop = 0.2, .dup = 0.1, .seed = 42};
    exchange(&(struct variant){.fault = &f});
}

static void test_contract_with_a_lock(void **state)
{
    (void)state;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    struct op_fault_cfg f = {.drop = 0.05, .seed = 7};
    exchange(&(struct variant){.fault = &f, .lock = &mu});
}

static void test_contract_many_loops_one_wait(void **state)
{
    (void)state;
    struct op_fault_cfg f = {.drop = 0.1, .dup = 0.05, .seed = 3};
    exchange(&(struct variant){.fault = &f, .many = true});
}

static void test_contract_switch_style_rounds(void **state)
{
    (void)state;
    struct op_fault_cfg f = {.drop = 0.1, .seed = 11};
    exchange(&(struct variant){.fault = &f, .wakes = true});
}

/* A packet for no engine here is counted, not handed to anyone. */
static void test_unclaimed_packets_counted(void **state)
{
    (void)state;
    struct op_io *cio = open_io(IP_C, NULL), *sio = open_io(IP_S, NULL);
    struct asker a = {.id = 7};
    struct asker *askers[2] = {&a, NULL};
    struct op_loop *cl, *sl;
    struct op_loop_config cc = {.io = cio, .demux = by_id, .demux_ctx = askers};
    struct op_loop_config sc = {.io = sio};
    assert_int_equal(op_loop_create(&cc, &cl), OP_OK);
    assert_int_equal(op_loop_create(&sc, &sl), OP_OK);
    assert_int_equal(op_loop_add(cl, &asker_ops, &a), OP_OK);
    put(op_loop_txq(sl), IP_S, IP_C, 99, ACK, 3); /* engine 99 is nobody */
    put(op_loop_txq(sl), IP_S, IP_C, 7, ACK, 3);
    op_loop_flush(sl);
    struct op_loop_stats st = {0};
    for (int i = 0; i < 200 && st.rx + st.unclaimed < 2; i++) {
        op_loop_run_once(cl, op_now_ns() + OP_NS_PER_MS);
        op_loop_stats(cl, &st);
    }
    assert_int_equal(st.unclaimed, 1);
    assert_int_equal(st.rx, 1);
    assert_true(a.done[3]);
    op_loop_remove(cl, &a); /* removed: its packets are nobody's */
    put(op_loop_txq(sl), IP_S, IP_C, 7, ACK, 4);
    op_loop_flush(sl);
    for (int i = 0; i < 200 && st.unclaimed < 2; i++) {
        op_loop_run_once(cl, op_now_ns() + OP_NS_PER_MS);
        op_loop_stats(cl, &st);
    }
    assert_int_equal(st.unclaimed, 2);
    assert_false(a.done[4]);
    struct op_loop_config bad = {.io = cio, .burst = -1}, frames_of_none = {.frames = true};
    struct op_loop *l;
    assert_int_equal(op_loop_create(&bad, &l), OP_ERR_INVAL);
    assert_int_equal(op_loop_create(&frames_of_none, &l), OP_ERR_INVAL);
    op_loop_destroy(cl);
    op_loop_destroy(sl);
    op_io_close(cio);
    op_io_close(sio);
}

/* A backend with no descriptor (as a DPDK queue): a packet appears after
 * some receive calls; nothing ever becomes readable to wait on. */
struct polled {
    struct op_io io;
    int calls, ready_at;
};

static int polled_recv(struct op_io *io, struct op_pkt *pkts, int max)
{
    struct polled *p = (struct polled *)io;
    if (max < 1 || ++p->calls != p->ready_at)
        return 0;
    pkts[0].len = 4;
    memset(pkts[0].data, 0, 4);
    pkts[0].flow = (struct op_flow){.src = op_addr_ipv4(IP_C), .dst = op_addr_ipv4(IP_S)};
    return 1;
}
static int polled_send(struct op_io *io, const struct op_pkt *pkts, int n)
{
    return (void)io, (void)pkts, n;
}
static int polled_fd(const struct op_io *io) { return (void)io, -1; }
static uint64_t polled_deadline(const struct op_io *io) { return (void)io, UINT64_MAX; }
static void polled_poll(struct op_io *io, uint64_t now) { (void)io, (void)now; }
static void polled_close(struct op_io *io) { (void)io; }
static const struct op_io_ops polled_ops = {
    .name = "polled", .recv = polled_recv, .send = polled_send, .fd = polled_fd,
    .deadline = polled_deadline, .poll = polled_poll, .close = polled_close};

static void count_input(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    (void)pkt, (void)now, (void)out;
    (*(int *)eng)++;
}
static const struct op_engine_ops counter_ops = {.name = "count", .input = count_input};

/* A round over a polled backend never sleeps towards until: it looks again
 * (and yields now and then), so a packet is taken on the call it appears. */
static void test_polled_backend_spins(void **state)
{
    (void)state;
    struct polled p = {.io.ops = &polled_ops, .ready_at = 5};
    struct op_loop_config c = {.io = &p.io};
    struct op_loop *l;
    int got = 0;
    assert_int_equal(op_loop_create(&c, &l), OP_OK);
    assert_int_equal(op_loop_add(l, &counter_ops, &got), OP_OK);
    uint64_t t0 = op_now_ns();
    for (int i = 0; i < 4; i++)
        assert_int_equal(op_loop_run_once(l, t0 + 10 * OP_NS_PER_S), 0);
    assert_int_equal(op_loop_run_once(l, t0 + 10 * OP_NS_PER_S), 1);
    assert_int_equal(got, 1);
    assert_true(op_now_ns() - t0 < 2 * OP_NS_PER_S); /* no wait of 10 s */
    struct op_loop_stats st;
    op_loop_stats(l, &st);
    assert_int_equal(st.rounds, 5);
    assert_int_equal(p.calls, 5);
    op_loop_destroy(l);
}

/* ---- whole frames: a host engine that answers ARP itself and reflects
 * UDP in place, over a mock frame backend */

struct mock_port {
    struct op_io io;
    uint8_t in[8][256], out[16][256];
    uint32_t in_len[8], out_len[16];
    int n_in, in_at, n_out;
    /* lending: in[] handed out in place; each must come back exactly once */
    int lent_out, sent_in_place, released;
    bool back[8];
};

static void port_take_back(struct mock_port *m, const struct op_frame *f)
{
    int i = (int)((const uint8_t(*)[256])f->lent - m->in);
    assert_true(i >= 0 && i < m->n_in);
    assert_false(m->back[i]);
    m->back[i] = true;
}

static int port_recv_lent(struct op_io *io, struct op_frame *f, int max)
{
    struct mock_port *m = (struct mock_port *)io;
    int k = 0;
    for (; k < max && k < 2 && m->in_at < m->n_in; k++, m->in_at++) {
        f[k] = (struct op_frame){.data = m->in[m->in_at], .len = m->in_len[m->in_at],
                                 .room = 256, .lent = m->in[m->in_at]};
        (void)op_frame_parse(f[k].data, f[k].len, &f[k].info);
        m->lent_out++;
    }
    return k;
}
static void port_release(struct op_io *io, struct op_frame *f, int n)
{
    struct mock_port *m = (struct mock_port *)io;
    for (int i = 0; i < n; i++)
        if (f[i].lent != NULL) {
            port_take_back(m, &f[i]);
            m->released++;
        }
}

static int port_recv_frames(struct op_io *io, struct op_frame *f, int max)
{
    struct mock_port *m = (struct mock_port *)io;
    int k = 0;
    for (; k < max && k < 2 && m->in_at < m->n_in; k++, m->in_at++) { /* bursts of 2 */
        memcpy(f[k].data, m->in[m->in_at], m->in_len[m->in_at]);
        f[k].len = m->in_len[m->in_at];
        (void)op_frame_parse(f[k].data, f[k].len, &f[k].info);
    }
    return k;
}
static int port_send_frames(struct op_io *io, const struct op_frame *f, int n)
{
    struct mock_port *m = (struct mock_port *)io;
    for (int i = 0; i < n; i++, m->n_out++) {
        if (f[i].lent != NULL) { /* sent from where it was received */
            assert_ptr_equal(f[i].data, f[i].lent);
            port_take_back(m, &f[i]);
            m->sent_in_place++;
        }
        memcpy(m->out[m->n_out], f[i].data, f[i].len);
        m->out_len[m->n_out] = f[i].len;
    }
    return n;
}
static const struct op_io_ops port_ops = {
    .name = "mock_port", .recv = io_payload_unsupported_recv,
    .send = io_payload_unsupported_send, .fd = polled_fd, .deadline = polled_deadline,
    .poll = polled_poll, .close = polled_close, .recv_frames = port_recv_frames,
    .send_frames = port_send_frames};
static const struct op_io_ops lending_port_ops = {
    .name = "mock_lending_port", .recv = io_payload_unsupported_recv,
    .send = io_payload_unsupported_send, .fd = polled_fd, .deadline = polled_deadline,
    .poll = polled_poll, .close = polled_close, .recv_frames = port_recv_frames,
    .send_frames = port_send_frames, .recv_frames_lent = port_recv_lent,
    .release_frames = port_release};

static const uint8_t host_mac[6] = {2, 0, 0, 0, 0, 0x0a}, peer_mac[6] = {2, 0, 0, 0, 0, 0x0b};

struct host {
    struct op_addr addr;
    int not_ours;
};

static void host_frames(void *eng, struct op_frame *f, int n, uint64_t now, struct op_frameq *out)
{
    struct host *h = eng;
    (void)now;
    for (int i = 0; i < n; i++) {
        if (f[i].info.udp == OP_FRAME_OK && op_addr_eq(&f[i].info.flow.dst, &h->addr)) {
            struct op_flow back = op_flow_reverse(&f[i].info.flow);
            struct op_frame_l2 l2 = {.tos = 0};
            memcpy(l2.src_mac, host_mac, 6);
            memcpy(l2.dst_mac, f[i].info.src_mac, 6);
            (void)op_udp_frame_headers(f[i].data, &back, &l2, f[i].info.payload_len);
            op_frameq_put(out, &f[i]); /* the frame itself leaves: no copy */
            continue;
        }
        struct op_frame *r = op_frameq_next(out);
        memcpy(r->data, f[i].data, f[i].len);
        r->len = (uint32_t)op_frame_control_reply(r->data, f[i].len, OP_IO_BUF_SIZE, &h->addr,
                                                  host_mac);
        if (r->len > 0)
            op_frameq_commit(out);
        else
            h->not_ours++;
    }
}
static const struct op_engine_ops host_ops = {.name = "host", .input_frames = host_frames};

static void inject_frame(struct mock_port *m, const struct op_flow *f, const char *payload)
{
    struct op_frame_l2 l2 = {.tos = 0};
    memcpy(l2.src_mac, peer_mac, 6);
    memcpy(l2.dst_mac, host_mac, 6);
    size_t len = strlen(payload);
    memcpy(m->in[m->n_in] + op_udp_frame_hdr_len(f->dst.family), payload, len);
    m->in_len[m->n_in] = (uint32_t)op_udp_frame_build(m->in[m->n_in], 256, f, &l2, len);
    m->n_in++;
}

static int lend_frames = 1;

/* state: NULL, or a port that lends its buffers (a DPDK queue's mbufs):
 * then the reflected UDP frames leave from where they came in, the one not
 * ours goes back unsent, and every lent frame comes back exactly once. */
static void test_frames_to_the_first_engine(void **state)
{
    bool lending = *state != NULL;
    struct mock_port m = {.io.ops = lending ? &lending_port_ops : &port_ops};
    struct host h = {.addr = op_addr_ipv4(IP_S)};
    struct op_addr peer = op_addr_ipv4(IP_C);
    struct op_flow to_us = {.src = peer, .dst = h.addr, .src_port = 7, .dst_port = 9};
    struct op_flow elsewhere = to_us;
    elsewhere.dst = op_addr_ipv4(0x7f2e0009u);
    inject_frame(&m, &to_us, "first");
    m.in_len[m.n_in] = (uint32_t)op_neigh_solicit_build(m.in[m.n_in], 256, &peer, peer_mac,
                                                        &h.addr);
    m.n_in++;
    inject_frame(&m, &elsewhere, "not ours");
    inject_frame(&m, &to_us, "second");
    struct op_loop *l;
    struct op_loop_config bad = {.io = &m.io}, c = {.io = &m.io, .frames = true};
    struct polled p = {.io.ops = &polled_ops};
    struct op_loop_config no_frames = {.io = &p.io, .frames = true};
    assert_int_equal(op_loop_create(&no_frames, &l), OP_ERR_INVAL); /* a payload backend */
    assert_int_equal(op_loop_create(&bad, &l), OP_OK);
    assert_null(op_loop_frameq(l));
    op_loop_destroy(l);
    assert_int_equal(op_loop_create(&c, &l), OP_OK);
    assert_non_null(op_loop_frameq(l));
    assert_int_equal(op_loop_add(l, &host_ops, &h), OP_OK);
    for (int i = 0; i < 10 && m.in_at < m.n_in; i++)
        (void)op_loop_run_once(l, op_now_ns() + OP_NS_PER_S);
    assert_int_equal(m.n_out, 3);
    assert_int_equal(h.not_ours, 1);
    static const char *const want[] = {"first", NULL, "second"};
    for (int i = 0; i < 3; i++) {
        struct op_frame_info in;
        unsigned v = op_frame_parse(m.out[i], m.out_len[i], &in);
        assert_memory_equal(in.dst_mac, peer_mac, 6);
        assert_memory_equal(in.src_mac, host_mac, 6);
        if (want[i] == NULL) { /* the ARP reply */
            assert_int_equal(in.kind, OP_FRAME_KIND_ARP);
            assert_int_equal(in.arp_op, 2);
            continue;
        }
        assert_int_equal(v, OP_FRAME_OK);
        assert_true(op_addr_eq(&in.flow.dst, &peer));
        assert_int_equal(in.flow.dst_port, 7);
        assert_int_equal(in.payload_len, strlen(want[i]));
        assert_memory_equal(m.out[i] + in.payload_off, want[i], in.payload_len);
    }
    struct op_loop_stats st;
    op_loop_stats(l, &st);
    assert_int_equal(st.rx, 4);
    op_loop_destroy(l);
    assert_int_equal(m.lent_out, lending ? 4 : 0);
    assert_int_equal(m.sent_in_place, lending ? 2 : 0); /* "first", "second" */
    assert_int_equal(m.released, lending ? 2 : 0);      /* the NS, "not ours" */
    for (int i = 0; lending && i < m.n_in; i++)
        assert_true(m.back[i]);
}

/* ---- a loop of watched descriptors only: a pipe's write end watched for
 * OUT until a callback turns it to IN, a read end unwatched by its own
 * callback, one added mid-round waited on from the next */

struct pipes {
    struct op_loop *l;
    int p[2], q[2];
    int out_calls, in_calls, late_calls;
};

static void on_late(void *ctx, int fd, unsigned ready)
{
    struct pipes *t = ctx;
    char c;
    assert_true(ready & OP_IO_IN);
    assert_int_equal(read(fd, &c, 1), 1);
    t->late_calls++;
}

static void on_pipe(void *ctx, int fd, unsigned ready)
{
    struct pipes *t = ctx;
    if (fd == t->p[1]) { /* writable: write once, then only wait for reading */
        assert_true(ready & OP_IO_OUT);
        assert_int_equal(write(fd, "x", 1), 1);
        t->out_calls++;
        assert_int_equal(op_loop_watch_set(t->l, fd, OP_IO_IN), OP_OK);
        assert_int_equal(op_loop_watch_events(t->l, t->q[0], OP_IO_IN, on_late, t), OP_OK);
        assert_int_equal(write(t->q[1], "y", 1), 1);
        return;
    }
    char c;
    assert_int_equal(read(fd, &c, 1), 1);
    t->in_calls++;
    op_loop_unwatch(t->l, fd); /* its own: not called again */
}

static void test_watch_only_loop(void **state)
{
    (void)state;
    struct pipes t = {0};
    assert_int_equal(pipe(t.p), 0);
    assert_int_equal(pipe(t.q), 0);
    struct op_loop_config c = {.io = NULL};
    assert_int_equal(op_loop_create(&c, &t.l), OP_OK);
    assert_int_equal(op_loop_watch_events(t.l, t.p[1], OP_IO_OUT, on_pipe, &t), OP_OK);
    assert_int_equal(op_loop_watch_events(t.l, t.p[0], OP_IO_IN, on_pipe, &t), OP_OK);
    assert_int_equal(op_loop_watch_set(t.l, 12345, OP_IO_IN), OP_ERR_INVAL);
    assert_int_equal(op_loop_watch_events(t.l, t.p[0], 0, on_pipe, &t), OP_ERR_INVAL);
    for (int i = 0; i < 6; i++)
        assert_int_equal(op_loop_run_once(t.l, op_now_ns() + 50 * OP_NS_PER_MS), 0);
    assert_int_equal(t.out_calls, 1);
    assert_int_equal(t.in_calls, 1);
    assert_int_equal(t.late_calls, 1);
    /* nothing is ready now: a round waits until its end and calls no one */
    uint64_t t0 = op_now_ns();
    assert_int_equal(op_loop_run_once(t.l, t0 + 30 * OP_NS_PER_MS), 0);
    assert_true(op_now_ns() - t0 >= 25 * OP_NS_PER_MS);
    assert_int_equal(t.out_calls + t.in_calls + t.late_calls, 3);
    op_loop_destroy(t.l);
    close(t.p[0]), close(t.p[1]), close(t.q[0]), close(t.q[1]);
}

struct woke {
    int calls, fd;
    uint64_t value;
};

static void on_event(void *ctx, int fd)
{
    struct woke *w = ctx;
    w->calls++;
    w->fd = fd;
    assert_int_equal(read(fd, &w->value, sizeof w->value), (ssize_t)sizeof w->value);
}

/* A watched fd wakes the wait (long before until) and its callback reads
 * it; a quiet one is not called. */
static void test_watched_fd(void **state)
{
    (void)state;
    struct op_io *io = open_io(IP_S, NULL);
    struct op_loop *l;
    struct op_loop_config c = {.io = io};
    assert_int_equal(op_loop_create(&c, &l), OP_OK);
    int ev = eventfd(0, EFD_NONBLOCK), quiet = eventfd(0, EFD_NONBLOCK);
    struct woke w = {0}, q = {0};
    assert_int_equal(op_loop_watch(l, ev, on_event, &w), OP_OK);
    assert_int_equal(op_loop_watch(l, quiet, on_event, &q), OP_OK);
    assert_int_equal(op_loop_watch(l, -1, on_event, &w), OP_ERR_INVAL);
    uint64_t one = 5;
    assert_int_equal(write(ev, &one, sizeof one), (ssize_t)sizeof one);
    uint64_t t0 = op_now_ns();
    assert_int_equal(op_loop_run_once(l, t0 + 5 * OP_NS_PER_S), 0);
    assert_true(op_now_ns() - t0 < OP_NS_PER_S);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.fd, ev);
    assert_int_equal(w.value, 5);
    assert_int_equal(q.calls, 0);
    op_loop_run_once(l, op_now_ns() + OP_NS_PER_MS); /* read: not called again */
    assert_int_equal(w.calls, 1);
    for (int i = 2; i < OP_LOOP_MAX_WATCHES; i++)
        assert_int_equal(op_loop_watch(l, quiet, on_event, &q), OP_OK);
    assert_int_equal(op_loop_watch(l, quiet, on_event, &q), OP_ERR_NOSPACE);
    close(ev);
    close(quiet);
    op_loop_destroy(l);
    op_io_close(io);
}

/* op_loop_poll hands packets over but keeps the answers queued until the
 * caller flushes (to leave with its own post); empty spins yield. */
static void test_poll_holds_answers(void **state)
{
    (void)state;
    struct op_io *cio = open_io(IP_C, NULL), *sio = open_io(IP_S, NULL);
    struct answerer s = {0};
    struct op_loop *sl;
    struct op_loop_config sc = {.io = sio};
    assert_int_equal(op_loop_create(&sc, &sl), OP_OK);
    assert_int_equal(op_loop_add(sl, &answerer_ops, &s), OP_OK);
    struct op_pktbuf b;
    assert_int_equal(op_pktbuf_init(&b, 4), OP_OK);
    struct op_txq q = {.pkts = b.pkts, .cap = b.n};
    for (uint32_t i = 0; i < 3; i++)
        put(&q, IP_C, IP_S, 7, REQ, i);
    assert_int_equal(op_io_send(cio, q.pkts, q.n), 3);
    int got = 0;
    for (int i = 0; i < 100000 && got < 3; i++)
        got += op_loop_poll(sl, 2); /* at most 2 a call */
    assert_int_equal(got, 3);
    assert_int_equal(s.requests, 3);
    assert_int_equal(op_loop_txq(sl)->n, 3);
    struct op_loop_stats st;
    op_loop_stats(sl, &st);
    assert_int_equal(st.flushes, 0);
    op_loop_flush(sl);
    op_loop_stats(sl, &st);
    assert_int_equal(st.flushes, 1);
    assert_int_equal(op_loop_txq(sl)->n, 0);
    uint64_t yields = st.yields;
    for (int i = 0; i < 2 * OP_LOOP_YIELD_EVERY; i++)
        assert_int_equal(op_loop_poll(sl, 64), 0);
    op_loop_stats(sl, &st);
    assert_int_equal(st.yields - yields, 2);
    got = 0;
    for (int i = 0; i < 1000 && got < 3; i++) /* the answers arrived */
        if (op_io_wait(cio, op_now_ns() + OP_NS_PER_MS) > 0)
            got += op_io_recv(cio, b.pkts, b.n);
    assert_int_equal(got, 3);
    op_pktbuf_free(&b);
    op_loop_destroy(sl);
    op_io_close(cio);
    op_io_close(sio);
}

static uint64_t yields_of(const struct op_loop *l)
{
    struct op_loop_stats st;
    op_loop_stats(l, &st);
    return st.yields;
}

/* yield_every: a spinning poller yields after that many empty polls in a
 * row, counted again from each poll that brought a packet. */
static void test_yield_every(void **state)
{
    (void)state;
    struct op_io *cio = open_io(IP_C, NULL), *sio = open_io(IP_S, NULL);
    struct op_loop *l;
    struct op_loop_config c = {.io = sio, .yield_every = -1};
    assert_int_equal(op_loop_create(&c, &l), OP_ERR_INVAL);
    c.yield_every = 5;
    assert_int_equal(op_loop_create(&c, &l), OP_OK);
    for (int i = 0; i < 12; i++)
        assert_int_equal(op_loop_poll(l, 8), 0);
    assert_int_equal(yields_of(l), 2); /* 2 empty polls towards the next */
    struct op_pktbuf b;
    assert_int_equal(op_pktbuf_init(&b, 1), OP_OK);
    struct op_txq q = {.pkts = b.pkts, .cap = b.n};
    put(&q, IP_C, IP_S, 7, REQ, 1);
    assert_int_equal(op_io_send(cio, q.pkts, q.n), 1);
    uint64_t before = 0, t0 = 0, t1 = 0;
    int got = 0;
    assert_true(op_loop_poll_time(l) != 0); /* the empty polls read it too */
    for (int i = 0; i < 100000 && got == 0; i++) {
        before = yields_of(l);
        t0 = op_now_ns();
        got = op_loop_poll(l, 8);
        t1 = op_now_ns();
    }
    assert_int_equal(got, 1);
    /* the clock the poll that brought the packet read, before its receive */
    assert_true(op_loop_poll_time(l) >= t0 && op_loop_poll_time(l) <= t1);
    assert_int_equal(yields_of(l), before);
    for (int i = 0; i < 4; i++)
        assert_int_equal(op_loop_poll(l, 8), 0);
    assert_int_equal(yields_of(l), before); /* the packet restarted the count */
    assert_int_equal(op_loop_poll(l, 8), 0);
    assert_int_equal(yields_of(l), before + 1);
    op_pktbuf_free(&b);
    op_loop_destroy(l);
    op_io_close(cio);
    op_io_close(sio);
}

/* op_loop_spin: reads back to back until one brings a packet (then at
 * once: no further read) or `reads` were made; each empty read counts
 * towards a yield as an empty poll does; the clock is read after the read
 * that brought the packet, which is handed over once. */
static void test_spin_reads(void **state)
{
    (void)state;
    struct polled p = {.io.ops = &polled_ops, .ready_at = 6};
    struct op_loop_config c = {.io = &p.io, .yield_every = 5};
    struct op_loop *l;
    int got = 0;
    assert_int_equal(op_loop_create(&c, &l), OP_OK);
    assert_int_equal(op_loop_add(l, &counter_ops, &got), OP_OK);
    assert_int_equal(op_loop_spin(l, 8, 4), 0);
    assert_int_equal(p.calls, 4);
    assert_int_equal(yields_of(l), 0); /* 4 empty reads towards 5 */
    uint64_t t0 = op_now_ns();
    assert_int_equal(op_loop_spin(l, 8, 4), 1);
    uint64_t t1 = op_now_ns();
    assert_int_equal(p.calls, 6); /* the 6th brought it: no 7th */
    assert_int_equal(got, 1);
    assert_int_equal(yields_of(l), 1); /* the 5th empty read yielded */
    assert_true(op_loop_poll_time(l) >= t0 && op_loop_poll_time(l) <= t1);
    assert_int_equal(op_loop_spin(l, 8, 1), 0);
    assert_int_equal(p.calls, 7);
    op_loop_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contract_over_udp),
        cmocka_unit_test(test_contract_over_fault_backend),
        cmocka_unit_test(test_contract_with_a_lock),
        cmocka_unit_test(test_unclaimed_packets_counted),
        cmocka_unit_test(test_contract_many_loops_one_wait),
        cmocka_unit_test(test_contract_switch_style_rounds),
        cmocka_unit_test(test_watched_fd),
        cmocka_unit_test(test_poll_holds_answers),
        cmocka_unit_test(test_yield_every),
        cmocka_unit_test(test_polled_backend_spins),
        cmocka_unit_test(test_spin_reads),
        cmocka_unit_test_prestate(test_frames_to_the_first_engine, NULL),
        cmocka_unit_test_prestate(test_frames_to_the_first_engine, &lend_frames),
        cmocka_unit_test(test_watch_only_loop),
    };
    return cmocka_run_group_tests_name("loop", tests, NULL, NULL);
}
