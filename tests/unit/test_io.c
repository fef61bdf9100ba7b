/* Contract tests for src/io: the udp backend over loopback (127.0.0.21 and
 * 127.0.0.22, ports chosen by the kernel), the fault wrapper, waiting and
 * packet buffers. Every wait is bounded by a deadline. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "offpath/io.h"
#include "udp_pair.h"
#include "../../src/io/io_internal.h" /* a mock backend */

#define IP_A 0x7f000015u /* 127.0.0.21 */
#define IP_B 0x7f000016u /* 127.0.0.22 */
#define IP_NOBODY 0x7f000017u /* 127.0.0.23: nothing bound there */
#define MAX_IDX 4096

struct pair {
    struct op_io *a, *b;
    bool v6; /* both on ::1 */
    struct op_pktbuf tx, rx;
    int seen[MAX_IDX];
};


static int setup_pair(void **state)
{
    struct pair *p = calloc(1, sizeof *p);
    const struct op_addr a = op_addr_ipv4(IP_A), b = op_addr_ipv4(IP_B);
    if (p == NULL || !udp_pair_open(&a, &b, 256, &p->a, &p->b, &p->tx, &p->rx))
        return -1;
    *state = p;
    return 0;
}

static const uint8_t LOOP6[16] = {[15] = 1};

/* The same pair over IPv6 loopback (two ports on ::1). */
static int setup_pair6(void **state)
{
    struct pair *p = calloc(1, sizeof *p);
    const struct op_addr lo = op_addr_ipv6(LOOP6);

    if (p == NULL || !udp_pair_open(&lo, &lo, 256, &p->a, &p->b, &p->tx, &p->rx))
        return -1;
    p->v6 = true;
    *state = p;
    return 0;
}

/* A third endpoint of the pair's family, where nobody else is. */
static struct op_io *open_third(const struct pair *p)
{
    struct op_io *c = NULL;
    const struct op_addr at = p->v6 ? op_addr_ipv6(LOOP6) : op_addr_ipv4(IP_NOBODY);
    assert_int_equal(op_io_udp_open_addr(&at, 0, &c), OP_OK);
    return c;
}

static int teardown_pair(void **state)
{
    struct pair *p = *state;

    udp_pair_close(p->a, p->b, &p->tx, &p->rx);
    free(p);
    return 0;
}

/* Packet i: 4-byte index, 4-byte length, then bytes (i + j) & 0xff. */
static uint32_t payload_len(uint32_t i)
{
    return 8 + (i * 37) % 1400;
}

static void fill_len(struct op_pkt *pkt, uint32_t i, uint32_t len, struct op_addr dst,
                     uint16_t dst_port)
{
    pkt->len = len;
    memcpy(pkt->data, &i, 4);
    memcpy(pkt->data + 4, &len, 4);
    for (uint32_t j = 8; j < len; j++)
        pkt->data[j] = (uint8_t)(i + j);
    pkt->flow = (struct op_flow){.dst = dst, .dst_port = dst_port};
}

static void fill(struct op_pkt *pkt, uint32_t i, struct op_addr dst, uint16_t dst_port)
{
    fill_len(pkt, i, payload_len(i), dst, dst_port);
}

/* The index of a well-formed packet, or -1. */
static int check_payload(const uint8_t *data, uint32_t len)
{
    uint32_t i, stored;

    if (len < 8)
        return -1;
    memcpy(&i, data, 4);
    memcpy(&stored, data + 4, 4);
    if (i >= MAX_IDX || len != stored)
        return -1;
    for (uint32_t j = 8; j < len; j++)
        if (data[j] != (uint8_t)(i + j))
            return -1;
    return (int)i;
}

static void fill_burst(struct pair *p, int n, const struct op_io *to)
{
    for (int i = 0; i < n; i++)
        fill(&p->tx.pkts[i], (uint32_t)i, op_io_local_addr(to), op_io_local_port(to));
}

/* Receives on io until want packets came or timeout_ms passed; counts each
 * index in p->seen and checks the flow against from -> io. */
static int drain(struct pair *p, struct op_io *io, const struct op_io *from, int want,
                 unsigned timeout_ms)
{
    uint64_t deadline = op_now_ns() + timeout_ms * OP_NS_PER_MS;
    int got = 0;

    while (got < want) {
        int r = op_io_recv(io, p->rx.pkts, p->rx.n);
        assert_true(r >= 0);
        for (int k = 0; k < r; k++) {
            const struct op_pkt *pkt = &p->rx.pkts[k];
            int idx = check_payload(pkt->data, pkt->len);
            assert_true(idx >= 0);
            p->seen[idx]++;
            struct op_addr src = op_io_local_addr(from), dst = op_io_local_addr(io);
            assert_true(op_addr_eq(&pkt->flow.src, &src));
            assert_int_equal(pkt->flow.src_port, op_io_local_port(from));
            assert_true(op_addr_eq(&pkt->flow.dst, &dst));
            assert_int_equal(pkt->flow.dst_port, op_io_local_port(io));
        }
        got += r;
        if (r == 0 && op_io_wait(io, deadline) == 0 && op_now_ns() >= deadline)
            break;
    }
    return got;
}

static void test_udp_open(void **state)
{
    struct pair *p = *state;
    struct op_io *dup = NULL;
    uint64_t st[OP_FAULT_C_COUNT_] = {1, 1, 1};
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;

    assert_string_equal(p->a->ops->name, "udp");
    assert_int_equal(op_io_local_ip(p->a), IP_A);
    assert_int_equal(op_io_local_ip(p->b), IP_B);
    assert_int_not_equal(op_io_local_port(p->a), 0);
    assert_true(op_io_fd(p->a) >= 0);
    assert_int_equal(getsockname(op_io_fd(p->a), (struct sockaddr *)&sa, &len), 0);
    assert_int_equal(ntohs(sa.sin_port), op_io_local_port(p->a));
    assert_int_equal(ntohl(sa.sin_addr.s_addr), IP_A);
    assert_true(op_io_deadline(p->a) == UINT64_MAX);
    op_io_poll(p->a, op_now_ns());
    op_io_fault_counters(p->a, st);
    assert_true(st[OP_FAULT_C_dropped] == 0 && st[OP_FAULT_C_duplicated] == 0 && st[OP_FAULT_C_delayed] == 0);
    /* SO_REUSEADDR is off: the same address cannot be bound twice */
    assert_int_equal(op_io_udp_open(IP_A, op_io_local_port(p->a), &dup),
                     op_status_from_errno(EADDRINUSE));
    assert_null(dup);
    assert_int_equal(op_io_recv(p->a, p->rx.pkts, p->rx.n), 0);
    op_io_close(NULL);
}

static void test_udp_burst(void **state)
{
    struct pair *p = *state;

    fill_burst(p, OP_IO_BURST, p->b);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, OP_IO_BURST), OP_IO_BURST);
    assert_int_equal(drain(p, p->b, p->a, OP_IO_BURST, 2000), OP_IO_BURST);
    for (int i = 0; i < OP_IO_BURST; i++)
        assert_int_equal(p->seen[i], 1);
    assert_int_equal(io_counter(p->a, OP_IO_C_tx_pkts), OP_IO_BURST);
    assert_int_equal(io_counter(p->a, OP_IO_C_tx_drops), 0);
    assert_int_equal(io_counter(p->b, OP_IO_C_rx_pkts), OP_IO_BURST);
    /* nothing more arrives */
    assert_int_equal(drain(p, p->b, p->a, 1, 20), 0);
}

/* More than one sendmmsg batch per call, and a receiver asking for few. */
static void test_udp_multi_batch(void **state)
{
    struct pair *p = *state;
    int got = 0;

    fill_burst(p, 200, p->a);
    assert_int_equal(op_io_send(p->b, p->tx.pkts, 200), 200);
    uint64_t deadline = op_now_ns() + 2 * OP_NS_PER_S;
    while (got < 200 && op_now_ns() < deadline) {
        int r = op_io_recv(p->a, p->rx.pkts, 7);
        assert_true(r >= 0 && r <= 7);
        for (int k = 0; k < r; k++)
            p->seen[check_payload(p->rx.pkts[k].data, p->rx.pkts[k].len)]++;
        got += r;
        if (r == 0)
            op_io_wait(p->a, deadline);
    }
    assert_int_equal(got, 200);
    for (int i = 0; i < 200; i++)
        assert_int_equal(p->seen[i], 1);
}

/* A destination nobody listens on, and one the kernel refuses (port 0),
 * must not stop the packets around them. */
static void test_udp_bad_destination(void **state)
{
    struct pair *p = *state;

    for (int round = 0; round < 3; round++) {
        fill(&p->tx.pkts[0], 0, op_addr_ipv4(IP_NOBODY), op_io_local_port(p->a));
        fill(&p->tx.pkts[1], 1, op_io_local_addr(p->b), op_io_local_port(p->b));
        fill(&p->tx.pkts[2], 2, op_io_local_addr(p->b), 0); /* EINVAL */
        fill(&p->tx.pkts[3], 3, op_io_local_addr(p->b), op_io_local_port(p->b));
        fill(&p->tx.pkts[4], 4, op_addr_ipv4(IP_NOBODY), op_io_local_port(p->a));
        uint64_t t0 = op_now_ns();
        assert_int_equal(op_io_send(p->a, p->tx.pkts, 5), 4);
        assert_true(op_now_ns() - t0 < 100 * OP_NS_PER_MS);
        assert_int_equal(drain(p, p->b, p->a, 2, 2000), 2);
        assert_int_equal(io_counter(p->a, OP_IO_C_tx_drops), (uint64_t)round + 1);
    }
    assert_int_equal(p->seen[1], 3);
    assert_int_equal(p->seen[3], 3);
    assert_int_equal(p->seen[0] + p->seen[2] + p->seen[4], 0);
    assert_int_equal(op_io_recv(p->a, p->rx.pkts, p->rx.n), 0); /* no error surfaces */
}

/* Runs of equal-size packets to one destination leave as GSO batches,
 * interleaved with another destination and short packets that end a batch;
 * a receiver reading 5 at a time gets every packet once, each flow in order,
 * whether it reads batches whole (GRO) or the kernel cuts them. */
static void batched_flows(struct pair *p, bool sender_batches, bool receiver_batches)
{
    struct op_io *c = open_third(p);
    op_io_udp_batching(p->a, sender_batches);
    op_io_udp_batching(p->b, receiver_batches);
    const int n = 240;
    for (int i = 0; i < n; i++) {
        const struct op_io *to = (i / 3) % 4 == 3 ? c : p->b;
        fill_len(&p->tx.pkts[i], (uint32_t)i, i % 17 == 16 ? 100 : 4148, op_io_local_addr(to),
                 op_io_local_port(to));
    }
    uint64_t d0 = io_counter(p->a, OP_IO_C_tx_datagrams);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, n), n);
    uint64_t datagrams = io_counter(p->a, OP_IO_C_tx_datagrams) - d0;
    assert_true(sender_batches ? datagrams < (uint64_t)n / 4 : datagrams == (uint64_t)n);
    struct op_io *rx[2] = {p->b, c};
    for (int r = 0; r < 2; r++) {
        int last = -1, got = 0;
        uint64_t deadline = op_now_ns() + 2 * OP_NS_PER_S;
        while (op_now_ns() < deadline) {
            int k = op_io_recv(rx[r], p->rx.pkts, 5);
            assert_true(k >= 0 && k <= 5);
            for (int j = 0; j < k; j++) {
                int idx = check_payload(p->rx.pkts[j].data, p->rx.pkts[j].len);
                assert_true(idx > last); /* in order, each once */
                assert_int_equal(p->rx.pkts[j].flow.src_port, op_io_local_port(p->a));
                last = idx;
                got++;
            }
            if (k == 0 && op_io_wait(rx[r], op_now_ns() + 50 * OP_NS_PER_MS) == 0)
                break;
        }
        assert_int_equal(got, r == 0 ? n * 3 / 4 : n / 4);
    }
    op_io_close(c);
}

static void test_udp_batches_whole(void **state) { batched_flows(*state, true, true); }
static void test_udp_batches_cut_by_kernel(void **state) { batched_flows(*state, true, false); }
static void test_udp_unbatched(void **state) { batched_flows(*state, false, true); }

/* Packets already read come out before the socket is read again: of a
 * datagram of three packets one is taken, a fourth packet arrives, and asking
 * for many gives the two held (a latency loop must not pay a read before it
 * can use what it holds), then the fourth. */
static int recv_some(struct pair *p, int max)
{
    uint64_t deadline = op_now_ns() + 2 * OP_NS_PER_S;
    int k;
    while ((k = op_io_recv(p->b, p->rx.pkts, max)) == 0 && op_now_ns() < deadline)
        op_io_wait(p->b, deadline);
    return k;
}

static void test_udp_held_packets_first(void **state)
{
    struct pair *p = *state;
    op_io_udp_batching(p->a, true);
    op_io_udp_batching(p->b, true);
    for (int i = 0; i < 3; i++)
        fill_len(&p->tx.pkts[i], i, i < 2 ? 200 : 120, op_io_local_addr(p->b),
                 op_io_local_port(p->b));
    uint64_t d0 = io_counter(p->a, OP_IO_C_tx_datagrams);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 3), 3);
    assert_int_equal(io_counter(p->a, OP_IO_C_tx_datagrams) - d0, 1); /* one GSO datagram */
    assert_int_equal(recv_some(p, 1), 1);
    assert_int_equal(check_payload(p->rx.pkts[0].data, p->rx.pkts[0].len), 0);
    fill_len(&p->tx.pkts[0], 3, 200, op_io_local_addr(p->b), op_io_local_port(p->b));
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 1), 1);
    assert_int_equal(recv_some(p, p->rx.n), 2);
    for (int idx = 1; idx <= 2; idx++)
        assert_int_equal(check_payload(p->rx.pkts[idx - 1].data, p->rx.pkts[idx - 1].len), idx);
    assert_int_equal(recv_some(p, p->rx.n), 1);
    assert_int_equal(check_payload(p->rx.pkts[0].data, p->rx.pkts[0].len), 3);
    assert_int_equal(io_counter(p->b, OP_IO_C_rx_pkts), 4);
}

/* Two packets to one destination leave as two plain datagrams (a GSO send
 * of two costs more than it saves, see gather_batch), three as one. */
static void test_udp_pair_not_batched(void **state)
{
    struct pair *p = *state;
    op_io_udp_batching(p->a, true);
    op_io_udp_batching(p->b, true);
    for (int i = 0; i < 2; i++)
        fill_len(&p->tx.pkts[i], i, i == 0 ? 200 : 120, op_io_local_addr(p->b),
                 op_io_local_port(p->b));
    uint64_t d0 = io_counter(p->a, OP_IO_C_tx_datagrams);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 2), 2);
    assert_int_equal(io_counter(p->a, OP_IO_C_tx_datagrams) - d0, 2);
    for (int idx = 0; idx < 2; idx++) {
        assert_int_equal(recv_some(p, p->rx.n), 1);
        assert_int_equal(check_payload(p->rx.pkts[0].data, p->rx.pkts[0].len), idx);
    }
}

/* A datagram larger than OP_IO_BUF_SIZE is dropped, not returned cut short. */
static void test_udp_truncated(void **state)
{
    struct pair *p = *state;
    static uint8_t big[OP_IO_BUF_SIZE + 100];
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_port = htons(op_io_local_port(p->b)),
                             .sin_addr.s_addr = htonl(IP_B)};
    int fd = socket(AF_INET, SOCK_DGRAM, 0);

    assert_true(fd >= 0);
    assert_int_equal(sendto(fd, big, sizeof big, 0, (struct sockaddr *)&to, sizeof to),
                     (ssize_t)sizeof big);
    close(fd);
    fill(&p->tx.pkts[0], 9, op_io_local_addr(p->b), op_io_local_port(p->b));
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 1), 1);
    assert_int_equal(drain(p, p->b, p->a, 2, 100), 1);
    assert_int_equal(p->seen[9], 1);
}

/* Bound to 0.0.0.0, the local address of each datagram is still reported. */
static void test_udp_wildcard(void **state)
{
    struct pair *p = *state;
    struct op_io *any;

    assert_int_equal(op_io_udp_open(0, 0, &any), OP_OK);
    fill(&p->tx.pkts[0], 5, op_addr_ipv4(0x7f000018u), op_io_local_port(any));
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 1), 1);
    uint64_t deadline = op_now_ns() + 2 * OP_NS_PER_S;
    int r = 0;
    while (r == 0 && op_io_wait(any, deadline) == 1)
        r = op_io_recv(any, p->rx.pkts, p->rx.n);
    assert_int_equal(r, 1);
    assert_int_equal(p->rx.pkts[0].flow.dst.v4, 0x7f000018u);
    assert_int_equal(p->rx.pkts[0].flow.dst_port, op_io_local_port(any));
    assert_int_equal(p->rx.pkts[0].flow.src.v4, IP_A);
    op_io_close(any);
}

/* Bound to ::, the local address of each datagram is still reported (IPv6
 * pktinfo); an IPv4 flow through an IPv6 socket is dropped and counted,
 * and the packets around it still go. */
static void test_udp6_wildcard_and_families(void **state)
{
    struct pair *p = *state;
    struct op_io *any;
    const struct op_addr wild = {.family = OP_AF_IPV6}, lo = op_addr_ipv6(LOOP6);

    assert_int_equal(op_io_udp_open_addr(&wild, 0, &any), OP_OK);
    assert_int_equal(op_io_local_ip(any), 0);
    fill(&p->tx.pkts[0], 5, lo, op_io_local_port(any));
    fill(&p->tx.pkts[1], 6, op_addr_ipv4(IP_B), op_io_local_port(any));
    fill(&p->tx.pkts[2], 7, lo, op_io_local_port(any));
    uint64_t drops = io_counter(p->a, OP_IO_C_tx_drops);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 3), 2);
    assert_int_equal(io_counter(p->a, OP_IO_C_tx_drops) - drops, 1);
    uint64_t deadline = op_now_ns() + 2 * OP_NS_PER_S;
    for (int got = 0; got < 2 && op_io_wait(any, deadline) == 1;) {
        int r = op_io_recv(any, p->rx.pkts, p->rx.n);
        for (int k = 0; k < r; k++, got++) {
            const struct op_flow *fl = &p->rx.pkts[k].flow;
            assert_true(op_addr_eq(&fl->dst, &lo)); /* the datagram's own, not :: */
            assert_int_equal(fl->src_port, op_io_local_port(p->a));
            p->seen[check_payload(p->rx.pkts[k].data, p->rx.pkts[k].len)]++;
        }
    }
    assert_int_equal(p->seen[5] + p->seen[7], 2);
    assert_int_equal(p->seen[6], 0);
    op_io_close(any);
}

static struct op_io *wrap_a(struct pair *p, double drop, double dup, uint32_t delay_us)
{
    struct op_fault_cfg cfg = {.drop = drop, .dup = dup, .delay_us = delay_us, .seed = 42};
    struct op_io *f = NULL;

    assert_int_equal(op_io_fault_wrap(p->a, &cfg, &f), OP_OK);
    assert_string_equal(f->ops->name, "fault");
    assert_int_equal(op_io_local_ip(f), IP_A);
    assert_int_equal(op_io_local_port(f), op_io_local_port(p->a));
    assert_int_equal(op_io_fd(f), op_io_fd(p->a));
    p->a = f; /* the wrapper owns the socket now; teardown closes both */
    return f;
}

static void test_fault_drop_all(void **state)
{
    struct pair *p = *state;
    struct op_io *f = wrap_a(p, 1.0, 0.0, 0);
    uint64_t st[OP_FAULT_C_COUNT_];

    fill_burst(p, OP_IO_BURST, p->b);
    assert_int_equal(op_io_send(f, p->tx.pkts, OP_IO_BURST), OP_IO_BURST);
    assert_int_equal(drain(p, p->b, f, 1, 50), 0);
    op_io_fault_counters(f, st);
    assert_int_equal(st[OP_FAULT_C_dropped], OP_IO_BURST);
    assert_int_equal(st[OP_FAULT_C_duplicated], 0);
    assert_int_equal(io_counter(f, OP_IO_C_tx_pkts), 0);
}

static void test_fault_dup_all(void **state)
{
    struct pair *p = *state;
    struct op_io *f = wrap_a(p, 0.0, 1.0, 0);
    uint64_t st[OP_FAULT_C_COUNT_];

    fill_burst(p, OP_IO_BURST, p->b);
    assert_int_equal(op_io_send(f, p->tx.pkts, OP_IO_BURST), OP_IO_BURST);
    assert_int_equal(drain(p, p->b, f, 2 * OP_IO_BURST, 2000), 2 * OP_IO_BURST);
    for (int i = 0; i < OP_IO_BURST; i++)
        assert_int_equal(p->seen[i], 2);
    op_io_fault_counters(f, st);
    assert_int_equal(st[OP_FAULT_C_duplicated], OP_IO_BURST);
    assert_int_equal(st[OP_FAULT_C_dropped], 0);
    assert_int_equal(io_counter(f, OP_IO_C_tx_pkts), 2 * OP_IO_BURST);
    /* the reverse direction goes through recv of the wrapper */
    fill(&p->tx.pkts[0], 77, op_addr_ipv4(IP_A), op_io_local_port(f));
    assert_int_equal(op_io_send(p->b, p->tx.pkts, 1), 1);
    assert_int_equal(drain(p, f, p->b, 1, 2000), 1);
    assert_int_equal(io_counter(f, OP_IO_C_rx_pkts), 1);
}

/* 2000 packets at 30% loss: mean 600, sd 20.5; the band is +-7 sd. */
static void test_fault_drop_rate(void **state)
{
    struct pair *p = *state;
    struct op_io *f = wrap_a(p, 0.3, 0.0, 0);
    uint64_t st[OP_FAULT_C_COUNT_];
    int got = 0;

    for (int round = 0; round < 2000 / 100; round++) {
        for (int i = 0; i < 100; i++)
            fill(&p->tx.pkts[i], (uint32_t)(round * 100 + i), op_addr_ipv4(IP_B), op_io_local_port(p->b));
        assert_int_equal(op_io_send(f, p->tx.pkts, 100), 100);
        op_io_fault_counters(f, st);
        got += drain(p, p->b, f, round * 100 + 100 - (int)st[OP_FAULT_C_dropped] - got, 2000);
    }
    op_io_fault_counters(f, st);
    assert_in_range(st[OP_FAULT_C_dropped], 450, 750);
    assert_int_equal(got, 2000 - (int)st[OP_FAULT_C_dropped]);
    for (int i = 0; i < 2000; i++)
        assert_true(p->seen[i] <= 1);
}

static void test_fault_delay(void **state)
{
    struct pair *p = *state;
    struct op_io *f = wrap_a(p, 0.0, 0.0, 2000);
    uint64_t st[OP_FAULT_C_COUNT_];

    fill_burst(p, 8, p->b);
    uint64_t t0 = op_now_ns();
    assert_int_equal(op_io_send(f, p->tx.pkts, 8), 8);
    uint64_t t1 = op_now_ns();
    uint64_t due = op_io_deadline(f);
    assert_true(due >= t0 + 2 * OP_NS_PER_MS && due <= t1 + 2 * OP_NS_PER_MS);
    /* held: nothing on the wire even once the delay has passed without poll */
    assert_int_equal(op_io_wait(p->b, due + OP_NS_PER_MS), 0);
    assert_int_equal(op_io_recv(p->b, p->rx.pkts, p->rx.n), 0);
    op_io_poll(f, due - 1);
    assert_true(op_io_deadline(f) == due);
    assert_int_equal(io_counter(f, OP_IO_C_tx_pkts), 0);
    op_io_poll(f, op_now_ns());
    assert_true(op_io_deadline(f) == UINT64_MAX);
    assert_int_equal(io_counter(f, OP_IO_C_tx_pkts), 8);
    assert_int_equal(drain(p, p->b, f, 8, 2000), 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(p->seen[i], 1);
    op_io_fault_counters(f, st);
    assert_int_equal(st[OP_FAULT_C_delayed], 8);
}

static void test_fault_delay_dup(void **state)
{
    struct pair *p = *state;
    struct op_io *f = wrap_a(p, 0.0, 1.0, 1000);
    uint64_t st[OP_FAULT_C_COUNT_];

    fill_burst(p, 100, p->b);
    assert_int_equal(op_io_send(f, p->tx.pkts, 100), 100);
    uint64_t deadline = op_now_ns() + 2 * OP_NS_PER_S;
    int got = 0;
    while (got < 200 && op_now_ns() < deadline) {
        uint64_t due = op_io_deadline(f);
        op_io_wait(p->b, due < deadline ? due : deadline);
        op_io_poll(f, op_now_ns());
        got += drain(p, p->b, f, 200 - got, 0);
    }
    assert_int_equal(got, 200);
    assert_int_equal(op_io_recv(p->b, p->rx.pkts, 0), 0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(p->seen[i], 2);
    op_io_fault_counters(f, st);
    assert_int_equal(st[OP_FAULT_C_delayed], 200);
    assert_int_equal(st[OP_FAULT_C_duplicated], 100);
}

static void test_fault_invalid(void **state)
{
    struct pair *p = *state;
    struct op_io *f = NULL;
    struct op_fault_cfg bad[] = {{.drop = 1.5}, {.drop = -0.1}, {.dup = 2}, {.drop = NAN}};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(op_io_fault_wrap(p->a, &bad[i], &f), OP_ERR_INVAL);
    assert_null(f);
    assert_int_equal(op_io_fault_wrap(NULL, &bad[0], &f), OP_ERR_INVAL);
}

/* A backend that records what it is given (no network), to check the
 * wrapper's queue: overflow and the arena ring wrapping around. */
struct capture {
    struct op_io io;
    int n, bad;
    uint32_t idx[8192];
};

static int cap_send(struct op_io *io, const struct op_pkt *pkts, int n)
{
    struct capture *c = (struct capture *)io;

    for (int i = 0; i < n; i++) {
        int idx = check_payload(pkts[i].data, pkts[i].len);
        if (idx < 0 || c->n == 8192)
            c->bad++;
        else
            c->idx[c->n++] = (uint32_t)idx;
    }
    return n;
}
static int cap_recv(struct op_io *io, struct op_pkt *pkts, int max)
{
    (void)io, (void)pkts, (void)max;
    return 0;
}
static int cap_fd(const struct op_io *io)
{
    (void)io;
    return -1;
}
static uint64_t cap_deadline(const struct op_io *io)
{
    (void)io;
    return UINT64_MAX;
}
static void cap_poll(struct op_io *io, uint64_t now)
{
    (void)io, (void)now;
}
static void cap_close(struct op_io *io)
{
    free(io);
}
static const struct op_io_ops cap_ops = {.name = "capture", .recv = cap_recv,
                                         .send = cap_send, .fd = cap_fd,
                                         .deadline = cap_deadline, .poll = cap_poll,
                                         .close = cap_close};

static struct op_io *capture_wrapped(uint32_t delay_us, struct capture **cap)
{
    struct op_fault_cfg cfg = {.delay_us = delay_us, .seed = 1};
    struct op_io *f;

    *cap = calloc(1, sizeof **cap);
    assert_non_null(*cap);
    (*cap)->io.ops = &cap_ops;
    assert_int_equal(op_io_fault_wrap(&(*cap)->io, &cfg, &f), OP_OK);
    return f;
}

static void test_fault_queue_overflow(void **state)
{
    struct pair *p = *state;
    struct capture *cap;
    struct op_io *f = capture_wrapped(10 * 1000 * 1000, &cap);
    struct op_pkt *many = calloc(5000, sizeof *many);
    uint64_t st[OP_FAULT_C_COUNT_];

    assert_non_null(many);
    fill_len(&p->tx.pkts[0], 0, 8, op_addr_ipv4(IP_B), 1);
    for (int i = 0; i < 5000; i++)
        many[i] = p->tx.pkts[0];
    assert_int_equal(op_io_send(f, many, 5000), 4096);
    op_io_fault_counters(f, st);
    assert_int_equal(st[OP_FAULT_C_delayed], 4096);
    assert_int_equal(st[OP_FAULT_C_dropped], 5000 - 4096);
    assert_int_equal(io_counter(f, OP_IO_C_tx_drops), 5000 - 4096);
    op_io_poll(f, op_io_deadline(f));
    assert_int_equal(cap->n, 4096);
    assert_int_equal(cap->bad, 0);
    free(many);
    op_io_close(f);
}

/* Jumbo packets fill the 8 MiB arena: hold A, hold B, release A, then C must
 * wrap around into the space A left; everything comes out intact, in order. */
static int send_jumbo(struct op_io *f, struct op_pktbuf *buf, uint32_t first, int n)
{
    for (int i = 0; i < n; i++)
        fill_len(&buf->pkts[i], first + (uint32_t)i, 9000, op_addr_ipv4(IP_B), 1);
    return op_io_send(f, buf->pkts, n);
}

static void test_fault_arena_wrap(void **state)
{
    struct capture *cap;
    struct op_io *f = capture_wrapped(1000 * 1000, &cap);
    struct op_pktbuf buf;
    uint64_t st[OP_FAULT_C_COUNT_];

    (void)state;
    assert_int_equal(op_pktbuf_init(&buf, 500), OP_OK);
    assert_int_equal(send_jumbo(f, &buf, 0, 500), 500);   /* A: 4.5 MB */
    assert_int_equal(send_jumbo(f, &buf, 500, 300), 300); /* B: up to 7.2 MB */
    op_io_poll(f, op_io_deadline(f)); /* releases A only */
    assert_int_equal(cap->n, 500);
    /* C: 132 at the end, the rest from 0 */
    assert_int_equal(send_jumbo(f, &buf, 800, 400), 400);
    op_io_fault_counters(f, st);
    assert_int_equal(st[OP_FAULT_C_dropped], 0);
    assert_int_equal(st[OP_FAULT_C_delayed], 1200);
    /* D: 231 fit before B's data (the ring keeps a gap so full != empty) */
    assert_int_equal(send_jumbo(f, &buf, 1200, 300), 231);
    op_io_fault_counters(f, st);
    assert_int_equal(st[OP_FAULT_C_dropped], 300 - 231);
    op_io_poll(f, UINT64_MAX - 1);
    assert_int_equal(cap->bad, 0);
    assert_int_equal(cap->n, 1431);
    for (int i = 0; i < 1431; i++)
        assert_int_equal(cap->idx[i], i);
    assert_true(op_io_deadline(f) == UINT64_MAX);
    op_pktbuf_free(&buf);
    op_io_close(f);
}

static void test_wait(void **state)
{
    struct pair *p = *state;

    uint64_t t0 = op_now_ns();
    assert_int_equal(op_io_wait(p->b, t0 - 1), 0); /* past: a zero-timeout check */
    assert_int_equal(op_io_wait(p->b, 0), 0);
    assert_true(op_now_ns() - t0 < 50 * OP_NS_PER_MS);
    t0 = op_now_ns();
    assert_int_equal(op_io_wait(p->b, t0 + 3 * OP_NS_PER_MS + 300 * OP_NS_PER_US), 0);
    uint64_t waited = op_now_ns() - t0;
    assert_true(waited >= 3 * OP_NS_PER_MS + 300 * OP_NS_PER_US);
    assert_true(waited < 500 * OP_NS_PER_MS);

    fill(&p->tx.pkts[0], 1, op_addr_ipv4(IP_B), op_io_local_port(p->b));
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 1), 1);
    assert_int_equal(op_io_wait(p->b, op_now_ns() + OP_NS_PER_S), 1);
    assert_int_equal(op_io_wait(p->b, UINT64_MAX), 1); /* readable: returns at once */
    assert_int_equal(op_io_wait(p->b, 0), 1);
    assert_int_equal(drain(p, p->b, p->a, 1, 1000), 1);
}

static void test_pktbuf(void **state)
{
    struct op_pktbuf b;

    (void)state;
    assert_int_equal(op_pktbuf_init(&b, 0), OP_ERR_INVAL);
    assert_int_equal(op_pktbuf_init(&b, -3), OP_ERR_INVAL);
    assert_int_equal(op_pktbuf_init(&b, 5), OP_OK);
    assert_int_equal(b.n, 5);
    for (int i = 0; i < 5; i++) {
        assert_ptr_equal(b.pkts[i].data, b.mem + (size_t)i * OP_IO_BUF_SIZE);
        assert_int_equal(b.pkts[i].len, 0);
        memset(b.pkts[i].data, 0xab, OP_IO_BUF_SIZE); /* ASan checks the bounds */
    }
    op_pktbuf_free(&b);
    assert_null(b.mem);
    op_pktbuf_free(&b);
    op_pktbuf_free(NULL);
}

/* Each counter list names every entry once, and nothing past its end. */
static void test_counter_names(void **state)
{
    (void)state;
    assert_string_equal(op_io_counter_name(OP_IO_C_tx_datagrams), "tx_datagrams");
    assert_null(op_io_counter_name(OP_IO_C_COUNT_));
    assert_string_equal(op_fault_counter_name(OP_FAULT_C_dropped), "dropped");
    assert_string_equal(op_fault_counter_name(OP_FAULT_C_delayed), "delayed");
    assert_null(op_fault_counter_name(OP_FAULT_C_COUNT_));
    uint64_t c[OP_FAULT_C_COUNT_] = {7, 7, 7};
    op_io_fault_counters(NULL, c); /* no fault layer: nothing injected */
    for (unsigned i = 0; i < OP_FAULT_C_COUNT_; i++)
        assert_int_equal(c[i], 0);
}

/* The AF_XDP sizes are checked before any socket (so without root). */
static void test_xdp_sizes_refused(void **state)
{
    (void)state;
    struct op_io *io = NULL;
    uint32_t bad[] = {0, 32, 63, 3000, 16383, (1u << 20) * 2};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(op_io_xdp_open_sized("lo", IP_A, 5300, bad[i], NULL, &io), OP_ERR_INVAL);
    assert_null(io);
}

/* The bounded wait on plain descriptors: the deadline holds, readiness
 * returns at once, either of two wakes it, writability, bad counts refused. */
static void test_wait_fds(void **state)
{
    (void)state;
    int a[2], b[2];
    assert_int_equal(pipe(a), 0);
    assert_int_equal(pipe(b), 0);
    uint64_t t0 = op_now_ns();
    assert_int_equal(op_io_wait_fd(a[0], OP_IO_IN, t0 + 3 * OP_NS_PER_MS), 0);
    assert_true(op_now_ns() - t0 >= 3 * OP_NS_PER_MS);
    assert_int_equal(op_io_wait_fd(a[0], OP_IO_IN, 0), 0); /* past: a check */
    assert_int_equal(op_io_wait_fd(a[1], OP_IO_OUT, UINT64_MAX), 1);
    const int both[2] = {a[0], b[0]};
    assert_int_equal(write(b[1], "x", 1), 1);
    assert_int_equal(op_io_wait_fds(both, 2, OP_IO_IN, op_io_deadline_in_ms(1000)), 1);
    assert_int_equal(write(a[1], "x", 1), 1);
    assert_int_equal(op_io_wait_fds(both, 2, OP_IO_IN, UINT64_MAX), 2);
    assert_int_equal(op_io_wait_fds(both, -1, OP_IO_IN, 0), -EINVAL);
    assert_int_equal(op_io_wait_fds(both, OP_IO_WAIT_MAX_FDS + 1, OP_IO_IN, 0), -EINVAL);
    assert_int_equal(op_io_deadline_in_ms(-1), UINT64_MAX);
    for (int i = 0; i < 2; i++) {
        close(a[i]);
        close(b[i]);
    }
}

/* A waitset: each slot's own events, unused slots, a hang-up, the deadline. */
static void test_waitset(void **state)
{
    (void)state;
    int a[2], b[2];
    struct op_io_waitset *ws;
    assert_int_equal(pipe(a), 0);
    assert_int_equal(pipe(b), 0);
    assert_int_equal(op_io_waitset_new(4, &ws), OP_OK);
    op_io_waitset_set(ws, 0, a[0], OP_IO_IN);
    op_io_waitset_set(ws, 1, b[1], OP_IO_OUT);
    op_io_waitset_set(ws, 3, b[0], OP_IO_IN);
    op_io_waitset_set(ws, 9, a[1], OP_IO_IN); /* past the set: ignored */
    assert_int_equal(op_io_waitset_wait(ws, op_io_deadline_in_ms(1000)), 1);
    assert_int_equal(op_io_waitset_ready(ws, 0), 0);
    assert_int_equal(op_io_waitset_ready(ws, 1), OP_IO_OUT);
    assert_int_equal(op_io_waitset_ready(ws, 2), 0); /* unused */
    op_io_waitset_set(ws, 1, -1, 0);
    uint64_t t0 = op_now_ns();
    assert_int_equal(op_io_waitset_wait(ws, t0 + 2 * OP_NS_PER_MS), 0);
    assert_true(op_now_ns() - t0 >= 2 * OP_NS_PER_MS);
    assert_int_equal(write(a[1], "x", 1), 1);
    close(b[1]); /* slot 3's writer gone: a hang-up */
    assert_int_equal(op_io_waitset_wait(ws, UINT64_MAX), 2);
    assert_int_equal(op_io_waitset_ready(ws, 0), OP_IO_IN);
    assert_true(op_io_waitset_ready(ws, 3) & OP_IO_ERR);
    op_io_waitset_free(ws);
    close(a[0]);
    close(a[1]);
    close(b[0]);
}

/* Endpoints to socket addresses of their family and back. */
static void test_sockaddr(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    struct op_endpoint e, back;
    assert_true(op_endpoint_parse("10.1.2.3:4791", &e));
    assert_int_equal(op_io_sockaddr(&e, &ss), sizeof(struct sockaddr_in));
    const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
    assert_int_equal(in->sin_family, AF_INET);
    assert_int_equal(ntohs(in->sin_port), 4791);
    assert_int_equal(ntohl(in->sin_addr.s_addr), 0x0a010203u);
    assert_true(op_io_endpoint_of((const struct sockaddr *)&ss, &back));
    assert_true(op_addr_eq(&back.addr, &e.addr) && back.port == 4791);
    assert_true(op_endpoint_parse("[::1]:53", &e));
    assert_int_equal(op_io_sockaddr(&e, &ss), sizeof(struct sockaddr_in6));
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_true(op_io_endpoint_of((const struct sockaddr *)&ss, &back));
    assert_true(op_addr_eq(&back.addr, &e.addr) && back.port == 53);
    ss.ss_family = AF_UNIX;
    assert_false(op_io_endpoint_of((const struct sockaddr *)&ss, &back));
}

#define PAIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup_pair, teardown_pair)
#define PAIR6_TEST(f) cmocka_unit_test_setup_teardown(f, setup_pair6, teardown_pair)

int main(void)
{
    const struct CMUnitTest tests[] = {
        PAIR_TEST(test_udp_open),          PAIR_TEST(test_udp_burst),
        PAIR_TEST(test_udp_batches_whole), PAIR_TEST(test_udp_batches_cut_by_kernel),
        PAIR_TEST(test_udp_unbatched),
        PAIR_TEST(test_udp_multi_batch),   PAIR_TEST(test_udp_bad_destination),
        PAIR_TEST(test_udp_held_packets_first),
        PAIR_TEST(test_udp_pair_not_batched),
        PAIR_TEST(test_udp_truncated),     PAIR_TEST(test_udp_wildcard),
        PAIR_TEST(test_fault_drop_all),    PAIR_TEST(test_fault_dup_all),
        PAIR_TEST(test_fault_drop_rate),   PAIR_TEST(test_fault_delay),
        PAIR_TEST(test_fault_delay_dup),   PAIR_TEST(test_fault_invalid),
        PAIR_TEST(test_fault_queue_overflow), PAIR_TEST(test_fault_arena_wrap),
        PAIR_TEST(test_wait),              cmocka_unit_test(test_pktbuf),
        PAIR6_TEST(test_udp_burst),        PAIR6_TEST(test_udp_multi_batch),
        PAIR6_TEST(test_udp_batches_whole), PAIR6_TEST(test_udp_batches_cut_by_kernel),
        PAIR6_TEST(test_udp_unbatched),    PAIR6_TEST(test_udp_held_packets_first),
        PAIR6_TEST(test_udp_pair_not_batched),
        PAIR6_TEST(test_udp6_wildcard_and_families),
        cmocka_unit_test(test_wait_fds),   cmocka_unit_test(test_sockaddr),
        cmocka_unit_test(test_waitset),
        cmocka_unit_test(test_counter_names), cmocka_unit_test(test_xdp_sizes_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
