/* Copies cut between the udp backend, the loop and the RoCEv2 engine:
 * packets lent out of GRO datagrams (op_io_recv_lent) and payloads sent
 * from where they lie (op_pkt's ext, gathered by sendmsg). The udp tests
 * run on loopback (127.0.0.31 and .32, ports the kernel picks), every wait
 * bounded; the RoCEv2 ones on the in-memory link of rdmasim. */
#include <netinet/in.h>
#include <netinet/udp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "offpath/io.h"
#include "udp_pair.h"
#include "offpath/loop.h"
#include "../../src/io/io_internal.h" /* a mock backend, io_pcap_write_pkt */
#include "rdmasim.h"

#define IP_A 0x7f00001fu /* 127.0.0.31 */
#define IP_B 0x7f000020u /* 127.0.0.32 */
#define IP_C 0x7f000021u
#define WAIT_NS (2 * OP_NS_PER_S)
#define MARK 0xa5

struct pair {
    struct op_io *a, *b;
    struct op_pktbuf tx, rx;
};

static int setup_pair(void **state)
{
    struct pair *p = calloc(1, sizeof *p);
    const struct op_addr a = op_addr_ipv4(IP_A), b = op_addr_ipv4(IP_B);
    if (p == NULL || !udp_pair_open(&a, &b, 128, &p->a, &p->b, &p->tx, &p->rx))
        return -1;
    memset(p->rx.mem, MARK, (size_t)p->rx.n * OP_IO_BUF_SIZE);
    *state = p;
    return 0;
}

static int teardown_pair(void **state)
{
    struct pair *p = *state;
    udp_pair_close(p->a, p->b, &p->tx, &p->rx);
    free(p);
    return 0;
}

/* Packet i of len bytes: its index, then bytes (i * 7 + j). */
static void fill(struct op_pkt *pkt, uint32_t i, uint32_t len, const struct op_io *to)
{
    pkt->len = len;
    pkt->ext = NULL;
    memcpy(pkt->data, &i, 4);
    for (uint32_t j = 4; j < len; j++)
        pkt->data[j] = (uint8_t)(i * 7 + j);
    pkt->flow = (struct op_flow){.dst = op_io_local_addr(to), .dst_port = op_io_local_port(to)};
}

static void expect_packet(const uint8_t *data, uint32_t len, uint32_t i, uint32_t want_len)
{
    uint32_t got;
    assert_int_equal(len, want_len);
    memcpy(&got, data, 4);
    assert_int_equal(got, i);
    for (uint32_t j = 4; j < len; j++)
        if (data[j] != (uint8_t)(i * 7 + j))
            fail_msg("packet %u byte %u: %u", i, j, data[j]);
}

/* Whether data lies in the caller's buffers (not lent). */
static bool in_own_buffers(const struct pair *p, const uint8_t *data)
{
    return data >= p->rx.mem && data < p->rx.mem + (size_t)p->rx.n * OP_IO_BUF_SIZE;
}

/* The caller's buffers were not written: lent packets came out in place. */
static void own_buffers_untouched(const struct pair *p)
{
    for (size_t k = 0; k < (size_t)p->rx.n * OP_IO_BUF_SIZE; k++)
        if (p->rx.mem[k] != MARK)
            fail_msg("own buffer byte %zu written", k);
}

/* As the loop does: the caller's buffers back in every slot. */
static void restore(struct pair *p)
{
    for (int i = 0; i < p->rx.n; i++)
        p->rx.pkts[i].data = p->rx.mem + (size_t)i * OP_IO_BUF_SIZE;
}

static int recv_lent(struct pair *p, struct op_io *io, int max)
{
    uint64_t deadline = op_now_ns() + WAIT_NS;
    int k;
    restore(p);
    while ((k = op_io_recv_lent(io, p->rx.pkts, max)) == 0 && op_now_ns() < deadline)
        op_io_wait(io, deadline);
    return k;
}

/* One GSO datagram of 7 packets of 1000 bytes and a last one of 300 comes
 * out 3 at a time, each pointing into the backend's buffer, in order,
 * with the sender's flow; the caller's buffers stay as they were. */
static void test_gro_segments_lent(void **state)
{
    struct pair *p = *state;
    for (uint32_t i = 0; i < 8; i++)
        fill(&p->tx.pkts[i], i, i < 7 ? 1000 : 300, p->b);
    uint64_t d0 = io_counter(p->a, OP_IO_C_tx_datagrams);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 8), 8);
    assert_int_equal(io_counter(p->a, OP_IO_C_tx_datagrams) - d0, 1);
    uint32_t next = 0;
    while (next < 8) {
        int k = recv_lent(p, p->b, 3);
        assert_int_equal(k, next < 6 ? 3 : 2);
        for (int j = 0; j < k; j++, next++) {
            const struct op_pkt *q = &p->rx.pkts[j];
            assert_false(in_own_buffers(p, q->data));
            assert_null(q->ext);
            expect_packet(q->data, q->len, next, next < 7 ? 1000 : 300);
            assert_int_equal(q->flow.src.v4, IP_A);
            assert_int_equal(q->flow.src_port, op_io_local_port(p->a));
            assert_int_equal(q->flow.dst_port, op_io_local_port(p->b));
        }
    }
    own_buffers_untouched(p);
    assert_int_equal(io_counter(p->b, OP_IO_C_rx_pkts), 8);
}

/* A lent packet stays as it was while the rest of its datagram is handed
 * out: the backend reads the socket again only once all are out. */
static void test_lent_valid_until_datagram_done(void **state)
{
    struct pair *p = *state;
    for (uint32_t i = 0; i < 4; i++)
        fill(&p->tx.pkts[i], i, 500, p->b);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 4), 4);
    assert_int_equal(recv_lent(p, p->b, 1), 1);
    const uint8_t *first = p->rx.pkts[0].data;
    for (uint32_t i = 0; i < 4; i++)
        fill(&p->tx.pkts[i], 100 + i, 500, p->b);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 4), 4); /* queued in the socket */
    struct op_pkt keep = p->rx.pkts[0];
    p->rx.pkts[0].data = NULL; /* the slot is the caller's to reuse */
    assert_int_equal(op_io_recv_lent(p->b, p->rx.pkts + 1, 3), 3);
    expect_packet(first, keep.len, 0, 500);
    for (int j = 0; j < 3; j++)
        expect_packet(p->rx.pkts[1 + j].data, p->rx.pkts[1 + j].len, (uint32_t)j + 1, 500);
    assert_int_equal(recv_lent(p, p->b, 8), 4);
    for (int j = 0; j < 4; j++)
        expect_packet(p->rx.pkts[j].data, p->rx.pkts[j].len, 100 + (uint32_t)j, 500);
}

/* Datagrams the buffers cannot hold are dropped whole, lent or not: one
 * larger than OP_IO_BUF_SIZE, and a GSO datagram whose segments are; the
 * packet after them comes out. */
static void test_truncated_dropped(void **state)
{
    struct pair *p = *state;
    static uint8_t big[3 * (OP_IO_BUF_SIZE + 100)];
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(op_io_local_port(p->b)),
                             .sin_addr.s_addr = htonl(IP_B)};
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(sendto(fd, big, OP_IO_BUF_SIZE + 100, 0, (struct sockaddr *)&to, sizeof to),
                     OP_IO_BUF_SIZE + 100);
    struct iovec iov = {.iov_base = big, .iov_len = sizeof big};
    struct msghdr mh = {.msg_name = &to, .msg_namelen = sizeof to, .msg_iov = &iov,
                        .msg_iovlen = 1};
    uint8_t ctrl[OP_IO_GSO_CTRL] __attribute__((aligned(8)));
    op_io_udp_gso(&mh, ctrl, OP_IO_BUF_SIZE + 100);
    assert_int_equal(sendmsg(fd, &mh, 0), (ssize_t)sizeof big);
    close(fd);
    fill(&p->tx.pkts[0], 9, 64, p->b);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 1), 1);
    int k = 0;
    uint64_t deadline = op_now_ns() + WAIT_NS;
    while (k == 0 && op_now_ns() < deadline)
        k = recv_lent(p, p->b, p->rx.n);
    assert_int_equal(k, 1);
    expect_packet(p->rx.pkts[0].data, p->rx.pkts[0].len, 9, 64);
    assert_int_equal(io_counter(p->b, OP_IO_C_rx_pkts), 1);
}

/* Without batching nothing is lent: packets are read into the caller's
 * buffers, as op_io_recv does. */
static void test_unbatched_reads_into_own_buffers(void **state)
{
    struct pair *p = *state;
    op_io_udp_batching(p->b, false);
    for (uint32_t i = 0; i < 5; i++)
        fill(&p->tx.pkts[i], i, 700, p->b);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 5), 5);
    uint32_t next = 0;
    while (next < 5) {
        int k = recv_lent(p, p->b, p->rx.n);
        assert_true(k > 0);
        for (int j = 0; j < k; j++, next++) {
            assert_ptr_equal(p->rx.pkts[j].data, p->rx.mem + (size_t)j * OP_IO_BUF_SIZE);
            expect_packet(p->rx.pkts[j].data, p->rx.pkts[j].len, next, 700);
        }
    }
}

/* Lent packets sent on through a fault layer (a relay): 30 % lost, every
 * survivor twice, held 2 ms. The held copies are the bytes as they were
 * sent, though the lent buffer holds the next datagram's packets by the
 * time they leave. */
static void test_fault_over_lent(void **state)
{
    struct pair *p = *state;
    struct op_io *c = NULL, *relay = NULL;
    assert_int_equal(op_io_udp_open(IP_C, 0, &c), OP_OK);
    const struct op_fault_cfg cfg = {.drop = 0.3, .dup = 1.0, .delay_us = 2000, .seed = 5};
    assert_int_equal(op_io_fault_wrap(p->b, &cfg, &relay), OP_OK);
    p->b = relay; /* teardown closes the wrapper and the socket in it */
    const uint32_t n = 64;
    for (uint32_t round = 0; round < 2; round++) {
        for (uint32_t i = 0; i < n / 2; i++)
            fill(&p->tx.pkts[i], round * n / 2 + i, 1200, relay);
        assert_int_equal(op_io_send(p->a, p->tx.pkts, (int)n / 2), (int)n / 2);
        for (uint32_t got = 0; got < n / 2;) {
            int k = recv_lent(p, relay, p->rx.n);
            assert_true(k > 0);
            for (int j = 0; j < k; j++) {
                assert_false(in_own_buffers(p, p->rx.pkts[j].data));
                p->rx.pkts[j].flow = (struct op_flow){.dst = op_io_local_addr(c),
                                                      .dst_port = op_io_local_port(c)};
            }
            assert_int_equal(op_io_send(relay, p->rx.pkts, k), k);
            got += (uint32_t)k;
        }
    }
    uint64_t st[OP_FAULT_C_COUNT_];
    op_io_fault_counters(relay, st);
    assert_true(st[OP_FAULT_C_dropped] > 0 && st[OP_FAULT_C_dropped] < n);
    uint32_t want = 2 * (n - (uint32_t)st[OP_FAULT_C_dropped]), got = 0;
    int seen[64] = {0};
    uint64_t deadline = op_now_ns() + WAIT_NS;
    struct op_pktbuf in;
    assert_int_equal(op_pktbuf_init(&in, OP_IO_BURST), OP_OK);
    while (got < want && op_now_ns() < deadline) {
        op_io_poll(relay, op_now_ns());
        int k = op_io_recv(c, in.pkts, in.n);
        for (int j = 0; j < k; j++) {
            uint32_t idx;
            memcpy(&idx, in.pkts[j].data, 4);
            assert_true(idx < n);
            expect_packet(in.pkts[j].data, in.pkts[j].len, idx, 1200);
            seen[idx]++;
        }
        got += (uint32_t)(k > 0 ? k : 0);
        if (k == 0)
            op_io_wait(c, op_now_ns() + OP_NS_PER_MS);
    }
    assert_int_equal(got, want);
    for (uint32_t i = 0; i < n; i++)
        assert_true(seen[i] == 0 || seen[i] == 2);
    op_pktbuf_free(&in);
    op_io_close(c);
}

/* ---- payloads sent from where they lie */

/* Packet i as a 16-byte header, ext_len bytes of src spliced in at 16, and
 * a 4-byte trailer: the wire bytes are those fill() writes. */
static void fill_ext(struct op_pkt *pkt, uint32_t i, uint32_t ext_len, uint8_t *src,
                     const struct op_io *to)
{
    uint8_t flat[OP_IO_BUF_SIZE];
    struct op_pkt f = {.data = flat};
    fill(&f, i, 16 + ext_len + 4, to);
    memcpy(src, flat + 16, ext_len);
    memcpy(pkt->data, flat, 16);
    memcpy(pkt->data + 16, flat + 16 + ext_len, 4);
    *pkt = (struct op_pkt){.flow = f.flow, .len = 20, .data = pkt->data, .ext = src,
                           .ext_len = ext_len, .ext_at = 16};
}

/* Ten packets with ext of one size leave as one GSO datagram, then one
 * alone and two of other sizes: the receiver gets the bytes flattened. */
static void test_ext_sent_gathered(void **state)
{
    struct pair *p = *state;
    static uint8_t mr[13][2000];
    for (uint32_t i = 0; i < 13; i++)
        fill_ext(&p->tx.pkts[i], i, i < 10 ? 1000 : 1500 + i, mr[i], p->b);
    assert_int_equal(op_pkt_wire_len(&p->tx.pkts[0]), 1020);
    uint64_t d0 = io_counter(p->a, OP_IO_C_tx_datagrams);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 10), 10);
    assert_int_equal(io_counter(p->a, OP_IO_C_tx_datagrams) - d0, 1);
    assert_int_equal(op_io_send(p->a, p->tx.pkts + 10, 1), 1);
    assert_int_equal(op_io_send(p->a, p->tx.pkts + 11, 2), 2);
    for (uint32_t next = 0; next < 13;) {
        int k = recv_lent(p, p->b, p->rx.n);
        assert_true(k > 0);
        for (int j = 0; j < k; j++, next++)
            expect_packet(p->rx.pkts[j].data, p->rx.pkts[j].len, next,
                          next < 10 ? 1020 : 1520 + next);
    }
}

/* A backend that copies every packet it is given (ext not taken): what
 * op_io_send hands it is flat. */
struct flat_mock {
    struct op_io io;
    uint8_t got[8][OP_IO_BUF_SIZE];
    uint32_t len[8];
    int n;
};

static int mock_recv(struct op_io *io, struct op_pkt *pkts, int max)
{
    (void)io, (void)pkts, (void)max;
    return 0;
}
static int mock_send(struct op_io *io, const struct op_pkt *pkts, int n)
{
    struct flat_mock *m = (struct flat_mock *)io;
    for (int i = 0; i < n && m->n < 8; i++, m->n++) {
        assert_null(pkts[i].ext);
        memcpy(m->got[m->n], pkts[i].data, pkts[i].len);
        m->len[m->n] = pkts[i].len;
    }
    return n;
}
static int mock_fd(const struct op_io *io)
{
    (void)io;
    return -1;
}
static uint64_t mock_deadline(const struct op_io *io)
{
    (void)io;
    return UINT64_MAX;
}
static void mock_poll(struct op_io *io, uint64_t now)
{
    (void)io, (void)now;
}
static void mock_close(struct op_io *io) { (void)io; }
static const struct op_io_ops mock_ops = {.name = "flat", .recv = mock_recv, .send = mock_send,
                                          .fd = mock_fd, .deadline = mock_deadline,
                                          .poll = mock_poll, .close = mock_close};

static void test_ext_flattened_elsewhere(void **state)
{
    struct pair *p = *state;
    struct flat_mock *m = calloc(1, sizeof *m);
    static uint8_t mr[3][600];
    assert_non_null(m);
    m->io.ops = &mock_ops;
    assert_false(op_io_takes_ext(&m->io));
    assert_true(op_io_takes_ext(p->a));
    fill_ext(&p->tx.pkts[0], 0, 600, mr[0], p->b);
    fill(&p->tx.pkts[1], 1, 300, p->b);
    fill_ext(&p->tx.pkts[2], 2, 0, mr[2], p->b); /* nothing spliced: data alone */
    assert_int_equal(op_io_send(&m->io, p->tx.pkts, 3), 3);
    assert_int_equal(m->n, 3);
    expect_packet(m->got[0], m->len[0], 0, 620);
    expect_packet(m->got[1], m->len[1], 1, 300);
    expect_packet(m->got[2], m->len[2], 2, 20);
    op_io_close(&m->io); /* frees the flattening buffers; the mock is ours */
    free(m);
}

/* Held by a delay, a packet with ext is copied at once: a payload changed
 * before the release does not change what leaves. */
static void test_ext_held_by_fault_is_copied(void **state)
{
    struct pair *p = *state;
    struct op_io *f = NULL;
    const struct op_fault_cfg cfg = {.delay_us = 1000, .seed = 2};
    static uint8_t mr[4][1024];
    assert_int_equal(op_io_fault_wrap(p->a, &cfg, &f), OP_OK);
    p->a = f;
    assert_true(op_io_takes_ext(f));
    for (uint32_t i = 0; i < 4; i++)
        fill_ext(&p->tx.pkts[i], i, 1024, mr[i], p->b);
    assert_int_equal(op_io_send(f, p->tx.pkts, 4), 4);
    memset(mr, 0, sizeof mr);
    uint32_t next = 0;
    uint64_t deadline = op_now_ns() + WAIT_NS;
    while (next < 4 && op_now_ns() < deadline) {
        op_io_poll(f, op_now_ns());
        restore(p);
        int k = op_io_recv_lent(p->b, p->rx.pkts, p->rx.n);
        for (int j = 0; j < k; j++, next++)
            expect_packet(p->rx.pkts[j].data, p->rx.pkts[j].len, next, 1044);
        if (k == 0)
            op_io_wait(p->b, op_now_ns() + OP_NS_PER_MS);
    }
    assert_int_equal(next, 4);
}

/* A capture of a packet with ext is the capture of its flat bytes. */
static void test_ext_captured_flat(void **state)
{
    (void)state;
    char pa[] = "/tmp/op-lent-a-XXXXXX", pb[] = "/tmp/op-lent-b-XXXXXX";
    int fa = mkstemp(pa), fb = mkstemp(pb);
    assert_true(fa >= 0 && fb >= 0);
    close(fa);
    close(fb);
    struct op_pcap *wa = NULL, *wb = NULL;
    assert_int_equal(op_pcap_open(pa, &wa), OP_OK);
    assert_int_equal(op_pcap_open(pb, &wb), OP_OK);
    static uint8_t buf[OP_IO_BUF_SIZE], flat[OP_IO_BUF_SIZE], mr[3000];
    struct op_pkt q = {.data = buf};
    struct op_io *to = NULL;
    assert_int_equal(op_io_udp_open(IP_C, 0, &to), OP_OK);
    fill_ext(&q, 3, sizeof mr, mr, to);
    q.flow.src = op_addr_ipv4(IP_A);
    uint32_t n = op_pkt_flatten(&q, flat, sizeof flat);
    assert_int_equal(n, 3020);
    assert_int_equal(op_pkt_flatten(&q, flat, 3019), 0);
    io_pcap_write_pkt(wa, 1000, &q.flow, &q);
    op_pcap_write(wb, 1000, &q.flow, flat, n);
    assert_int_equal(op_pcap_close(wa), OP_OK);
    assert_int_equal(op_pcap_close(wb), OP_OK);
    FILE *a = fopen(pa, "rb"), *b = fopen(pb, "rb");
    assert_true(a != NULL && b != NULL);
    static uint8_t ca[8192], cb[8192];
    size_t la = fread(ca, 1, sizeof ca, a), lb = fread(cb, 1, sizeof cb, b);
    assert_true(la > n);
    assert_int_equal(la, lb);
    assert_memory_equal(ca, cb, la);
    fclose(a);
    fclose(b);
    unlink(pa);
    unlink(pb);
    op_io_close(to);
}

/* The ICRC over header, spliced payload and trailer is the flat packet's. */
static void test_icrc_ext_matches_flat(void **state)
{
    (void)state;
    static uint8_t flat[OP_IO_BUF_SIZE];
    struct op_flow fl = {.src = op_addr_ipv4(IP_A), .dst = op_addr_ipv4(IP_B),
                         .src_port = 49152, .dst_port = OP_ROCE_UDP_PORT};
    const uint8_t six[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 7};
    struct op_flow fl6 = {.src = op_addr_ipv6(six), .dst = op_addr_ipv6(six), .src_port = 1,
                          .dst_port = OP_ROCE_UDP_PORT};
    for (size_t i = 0; i < sizeof flat; i++)
        flat[i] = (uint8_t)(i * 13 + 1);
    const size_t cases[][3] = {{12, 4096, 2}, {28, 1000, 3}, {12, 1, 0}, {40, 4000, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t at = cases[c][0], ext_len = cases[c][1], tail = cases[c][2];
        uint8_t hdr[64];
        memcpy(hdr, flat, at);
        memcpy(hdr + at, flat + at + ext_len, tail);
        for (int v6 = 0; v6 < 2; v6++) {
            const struct op_flow *f = v6 ? &fl6 : &fl;
            uint32_t want = op_icrc_flow(f, flat, at + ext_len + tail);
            assert_int_equal(op_icrc_flow_ext(f, hdr, at + tail, at, flat + at, ext_len), want);
            struct op_icrc_memo m = {0};
            for (int again = 0; again < 2; again++) /* computed, then from the memo */
                assert_int_equal(
                    op_icrc_flow_ext_memo(&m, f, hdr, at + tail, at, flat + at, ext_len), want);
            /* received in those pieces: the check holds, and fails for any bit */
            for (size_t i = 0; i < 4; i++)
                hdr[at + tail + i] = (uint8_t)(want >> (8 * i));
            assert_true(op_icrc_check_ext_memo(&m, f, hdr, at + tail + 4, at, flat + at, ext_len));
            for (size_t bit = 0; bit < 8 * (at + tail + ext_len); bit += 997) {
                uint8_t *b = bit / 8 < at ? hdr + bit / 8
                             : bit / 8 < at + ext_len ? flat + bit / 8
                                                      : hdr + bit / 8 - ext_len;
                *b ^= (uint8_t)(1u << bit % 8);
                assert_int_equal(
                    op_icrc_check_ext_memo(&m, f, hdr, at + tail + 4, at, flat + at, ext_len),
                    bit / 8 == 4); /* the BTH's masked byte alone */
                *b ^= (uint8_t)(1u << bit % 8);
            }
        }
    }
}

/* ---- the RoCEv2 engine into a queue that takes ext */

struct ext_seen {
    uint64_t with_ext, without, bad_icrc;
};

/* Every packet as it leaves: its wire bytes' ICRC must hold. */
static bool look_at(struct rsim *s, int from, const struct op_pkt *p)
{
    struct ext_seen *e = s->hook_ctx;
    static uint8_t flat[OP_IO_BUF_SIZE];
    uint32_t n = op_pkt_flatten(p, flat, sizeof flat);
    (void)from;
    e->with_ext += p->ext != NULL;
    e->without += p->ext == NULL;
    e->bad_icrc += !op_icrc_check(&p->flow, flat, n);
    return false;
}

struct done_ctx {
    struct op_rdma_cq *cq;
    int want, n;
    struct op_rdma_wc wc[8];
};

static bool cq_done(void *arg)
{
    struct done_ctx *d = arg;
    d->n += op_rdma_poll_cq(d->cq, 8 - d->n, d->wc + d->n);
    return d->n >= d->want;
}

/* WRITEs and a READ of 64 KiB (4 KiB MTU) and a small WRITE over a link
 * that loses, duplicates and reorders: payloads of 512 bytes and more go
 * out as ext from the MRs (resent from them too), smaller ones copied;
 * every packet's ICRC holds and the memory ends as it should. */
static void test_rdma_payload_from_mr(void **state)
{
    (void)state;
    struct rsim s;
    struct rsim_ep a, b;
    struct ext_seen seen = {0};
    const size_t len = 64 * 1024;
    rsim_init(&s, 11);
    s.q.ext_ok = true;
    s.hook = look_at;
    s.hook_ctx = &seen;
    s.link[0] = (struct rsim_link){.drop = 0.05, .dup = 0.05, .reorder = 0.1,
                                   .jitter_ns = 20 * OP_NS_PER_US};
    s.link[1] = s.link[0];
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 4096, .retry_cnt = 7};
    rsim_connect(&s, &o, &a, &b);
    uint8_t *src = malloc(len), *rem = calloc(1, len), *back = calloc(1, len);
    assert_true(src != NULL && rem != NULL && back != NULL);
    for (size_t i = 0; i < len; i++)
        src[i] = (uint8_t)(i * 31 + 7);
    struct op_rdma_mr *msrc, *mrem, *mback;
    const unsigned all = OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE |
                         OP_RDMA_ACCESS_REMOTE_READ;
    assert_int_equal(op_rdma_reg_mr(s.dev[0], src, len, OP_RDMA_ACCESS_LOCAL_WRITE, &msrc), OP_OK);
    assert_int_equal(op_rdma_reg_mr(s.dev[1], rem, len, all, &mrem), OP_OK);
    assert_int_equal(op_rdma_reg_mr(s.dev[0], back, len, OP_RDMA_ACCESS_LOCAL_WRITE, &mback),
                     OP_OK);
    const struct {
        enum op_rdma_wr_opcode op;
        struct op_rdma_mr *mr;
        uint8_t *buf;
        size_t off, n;
    } wrs[] = {{OP_RDMA_WR_RDMA_WRITE, msrc, src, 0, len},
               {OP_RDMA_WR_RDMA_WRITE, msrc, src, 5, 100},
               {OP_RDMA_WR_RDMA_READ, mback, back, 0, len}};
    for (size_t w = 0; w < 3; w++) {
        struct op_rdma_sge sg = {.addr = (uint64_t)(uintptr_t)(wrs[w].buf + wrs[w].off),
                                 .length = (uint32_t)wrs[w].n, .lkey = op_rdma_mr_lkey(wrs[w].mr)};
        struct op_rdma_send_wr wr = {.wr_id = w, .opcode = wrs[w].op,
                                     .send_flags = OP_RDMA_SEND_SIGNALED, .sg_list = &sg,
                                     .num_sge = 1};
        wr.rdma.remote_addr = (uint64_t)(uintptr_t)(rem + wrs[w].off);
        wr.rdma.rkey = op_rdma_mr_rkey(mrem);
        if (w == 1)
            memset(src + 5, 0x3c, 100); /* the small WRITE's bytes */
        assert_int_equal(op_rdma_post_send(a.qp, &wr, s.now, &s.q), OP_OK);
        struct done_ctx d = {.cq = a.scq, .want = 1};
        assert_true(rsim_run(&s, cq_done, &d, 60 * OP_NS_PER_S));
        assert_int_equal(d.wc[0].status, OP_RDMA_WC_SUCCESS);
        assert_int_equal(d.wc[0].wr_id, w);
    }
    assert_memory_equal(rem, src, len);
    assert_memory_equal(back, src, len);
    assert_true(seen.with_ext >= 32); /* 16 WRITE and 16 READ response packets at least */
    assert_true(seen.without > 0);    /* ACKs, the READ request, the small WRITE */
    assert_int_equal(seen.bad_icrc, 0);
    op_rdma_dereg_mr(msrc);
    op_rdma_dereg_mr(mrem);
    op_rdma_dereg_mr(mback);
    free(src);
    free(rem);
    free(back);
    rsim_free(&s);
}

/* A plain queue (a test's link, as every engine test uses) gets no ext. */
static void test_rdma_plain_queue_has_no_ext(void **state)
{
    (void)state;
    struct rsim s;
    struct rsim_ep a, b;
    struct ext_seen seen = {0};
    rsim_init(&s, 3);
    s.hook = look_at;
    s.hook_ctx = &seen;
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 4096, .retry_cnt = 7};
    rsim_connect(&s, &o, &a, &b);
    static uint8_t src[16384], rem[16384];
    struct op_rdma_mr *ms, *mr;
    assert_int_equal(op_rdma_reg_mr(s.dev[0], src, sizeof src, OP_RDMA_ACCESS_LOCAL_WRITE, &ms),
                     OP_OK);
    assert_int_equal(op_rdma_reg_mr(s.dev[1], rem, sizeof rem,
                                    OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE, &mr),
                     OP_OK);
    memset(src, 0x5a, sizeof src);
    struct op_rdma_sge sg = {.addr = (uint64_t)(uintptr_t)src, .length = sizeof src,
                             .lkey = op_rdma_mr_lkey(ms)};
    struct op_rdma_send_wr wr = {.opcode = OP_RDMA_WR_RDMA_WRITE,
                                 .send_flags = OP_RDMA_SEND_SIGNALED, .sg_list = &sg, .num_sge = 1};
    wr.rdma.remote_addr = (uint64_t)(uintptr_t)rem;
    wr.rdma.rkey = op_rdma_mr_rkey(mr);
    assert_int_equal(op_rdma_post_send(a.qp, &wr, s.now, &s.q), OP_OK);
    struct done_ctx d = {.cq = a.scq, .want = 1};
    assert_true(rsim_run(&s, cq_done, &d, 10 * OP_NS_PER_S));
    assert_memory_equal(rem, src, sizeof src);
    assert_int_equal(seen.with_ext, 0);
    assert_int_equal(seen.bad_icrc, 0);
    op_rdma_dereg_mr(ms);
    op_rdma_dereg_mr(mr);
    rsim_free(&s);
}

/* The loop's queue takes ext over a udp socket and a fault or capture
 * layer, not over a backend that copies, nor with a flush hook of the
 * driver's; it reads lent packets and gives its own buffers back. */
static void flush_hook(void *ctx, struct op_io *io, struct op_txq *q)
{
    (void)ctx;
    op_io_send(io, q->pkts, q->n);
}

struct count_eng {
    int n;
    uint32_t idx[64];
    const uint8_t *where[64];
};

static void count_input(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    struct count_eng *e = eng;
    (void)now, (void)out;
    if (e->n < 64) {
        memcpy(&e->idx[e->n], pkt->data, 4);
        e->where[e->n++] = pkt->data;
    }
}

static const struct op_engine_ops count_ops = {.name = "count", .input = count_input};

static void test_loop_queue_and_lent_input(void **state)
{
    struct pair *p = *state;
    struct op_loop *l = NULL;
    struct flat_mock *m = calloc(1, sizeof *m);
    assert_non_null(m);
    m->io.ops = &mock_ops;
    assert_int_equal(op_loop_create(&(struct op_loop_config){.io = &m->io}, &l), OP_OK);
    assert_false(op_loop_txq(l)->ext_ok);
    op_loop_destroy(l);
    assert_int_equal(op_loop_create(&(struct op_loop_config){.io = p->b, .flush = flush_hook},
                                    &l),
                     OP_OK);
    assert_false(op_loop_txq(l)->ext_ok);
    op_loop_destroy(l);
    struct count_eng e = {0};
    assert_int_equal(op_loop_create(&(struct op_loop_config){.io = p->b, .burst = 4}, &l), OP_OK);
    assert_true(op_loop_txq(l)->ext_ok);
    assert_int_equal(op_loop_add(l, &count_ops, &e), OP_OK);
    for (uint32_t i = 0; i < 10; i++)
        fill(&p->tx.pkts[i], i, 800, p->b);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 10), 10);
    uint64_t deadline = op_now_ns() + WAIT_NS;
    while (e.n < 10 && op_now_ns() < deadline)
        assert_true(op_loop_run_once(l, op_now_ns() + 10 * OP_NS_PER_MS) >= 0);
    assert_int_equal(e.n, 10);
    for (int i = 0; i < 10; i++)
        assert_int_equal(e.idx[i], (uint32_t)i);
    assert_true(e.where[0] != e.where[4]); /* lent: each where it lies, not one slot reused */
    op_loop_destroy(l);
    op_io_close(&m->io);
    free(m);
}

/* A RoCEv2-like packet (a BTH's 12 bytes, 4 of payload, the ICRC) from io
 * `from` to p->b, sealed with its real flow. */
static void send_sealed(struct pair *p, struct op_io *from, uint8_t tag)
{
    struct op_pkt *pkt = &p->tx.pkts[0];
    memset(pkt->data, tag, 16);
    pkt->flow = (struct op_flow){.src = op_io_local_addr(from), .src_port = op_io_local_port(from),
                                 .dst = op_io_local_addr(p->b), .dst_port = op_io_local_port(p->b)};
    pkt->len = (uint32_t)op_icrc_seal(&pkt->flow, pkt->data, 16, OP_IO_BUF_SIZE);
    pkt->ext = NULL;
    assert_int_equal(pkt->len, 20);
    assert_int_equal(op_io_send(from, pkt, 1), 1);
}

/* What b reads next: one packet of tag's bytes, its flow's source as
 * want_src, and whether its ICRC holds for the flow it came with. */
static bool recv_sealed(struct pair *p, uint8_t tag, const struct op_io *want_src)
{
    assert_int_equal(recv_lent(p, p->b, 1), 1);
    const struct op_pkt *got = &p->rx.pkts[0];
    assert_int_equal(got->len, 20);
    assert_int_equal(got->data[0], tag);
    const struct op_addr src = op_io_local_addr(want_src);
    assert_true(op_addr_eq(&got->flow.src, &src));
    assert_int_equal(got->flow.src_port, op_io_local_port(want_src));
    assert_int_equal(got->flow.dst_port, op_io_local_port(p->b));
    return op_icrc_check(&got->flow, got->data, got->len);
}

/* With a sender assumed, every datagram is taken as from it, read with or
 * without GRO: the peer's check out, a third socket's fails its ICRC (the
 * ICRC covers the sender's address and port); NULL reads senders again. */
static void test_assumed_sender(void **state)
{
    struct pair *p = *state;
    struct op_io *c = NULL;
    const struct op_addr ac = op_addr_ipv4(IP_C);
    assert_int_equal(op_io_udp_open_addr(&ac, 0, &c), OP_OK);
    const struct op_endpoint a = {.addr = op_io_local_addr(p->a), .port = op_io_local_port(p->a)};
    for (int batching = 0; batching < 2; batching++) {
        op_io_udp_batching(p->b, batching);
        op_io_udp_assume_sender(p->b, &a);
        send_sealed(p, p->a, 1);
        assert_true(recv_sealed(p, 1, p->a));
        send_sealed(p, c, 2);
        assert_false(recv_sealed(p, 2, p->a));
        op_io_udp_assume_sender(p->b, NULL);
        send_sealed(p, c, 3);
        assert_true(recv_sealed(p, 3, c));
    }
    const struct op_endpoint v6 = {.addr = op_addr_ipv6((const uint8_t[16]){[15] = 1}), .port = 9};
    op_io_udp_assume_sender(p->b, &v6); /* the other family: read senders */
    send_sealed(p, c, 4);
    assert_true(recv_sealed(p, 4, c));
    op_io_close(c);
}

#define PAIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup_pair, teardown_pair)

int main(void)
{
    const struct CMUnitTest tests[] = {
        PAIR_TEST(test_gro_segments_lent),
        PAIR_TEST(test_lent_valid_until_datagram_done),
        PAIR_TEST(test_truncated_dropped),
        PAIR_TEST(test_unbatched_reads_into_own_buffers),
        PAIR_TEST(test_fault_over_lent),
        PAIR_TEST(test_ext_sent_gathered),
        PAIR_TEST(test_ext_flattened_elsewhere),
        PAIR_TEST(test_ext_held_by_fault_is_copied),
        cmocka_unit_test(test_ext_captured_flat),
        cmocka_unit_test(test_icrc_ext_matches_flat),
        cmocka_unit_test(test_rdma_payload_from_mr),
        cmocka_unit_test(test_rdma_plain_queue_has_no_ext),
        PAIR_TEST(test_loop_queue_and_lent_input),
        PAIR_TEST(test_assumed_sender),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
