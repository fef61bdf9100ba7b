/* Placed receives (op_io_recv_placed): the udp backend reads a GRO
 * datagram into iovecs laid out as the caller foresees its packets, each
 * payload straight to where it belongs, and hands out as ext what fell as
 * foreseen and the rest whole; nothing outside the room is ever written.
 * On loopback (127.0.0.41 and .42, ports the kernel picks), every wait
 * bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "offpath/io.h"
#include "udp_pair.h"

#define IP_A 0x7f000029u /* 127.0.0.41 */
#define IP_B 0x7f00002au
#define WAIT_NS (2 * OP_NS_PER_S)
#define HDR 12u
#define TRL 4u
#define GUARD 4096u
#define ROOM_MAX (64u * 1024u)
#define MARK 0x5a

struct pair {
    struct op_io *a, *b;
    struct op_pktbuf tx, rx;
    uint8_t *mem; /* GUARD, the room, GUARD */
};

static int setup_pair(void **state)
{
    struct pair *p = calloc(1, sizeof *p);
    const struct op_addr a = op_addr_ipv4(IP_A), b = op_addr_ipv4(IP_B);
    if (p == NULL || !udp_pair_open(&a, &b, 64, &p->a, &p->b, &p->tx, &p->rx) ||
        (p->mem = malloc(2 * GUARD + ROOM_MAX)) == NULL)
        return -1;
    memset(p->mem, MARK, 2 * GUARD + ROOM_MAX);
    *state = p;
    return 0;
}

static int teardown_pair(void **state)
{
    struct pair *p = *state;
    udp_pair_close(p->a, p->b, &p->tx, &p->rx);
    free(p->mem);
    free(p);
    return 0;
}

/* Packet i: HDR bytes of headers, `payload` bytes, TRL of trailer, byte j
 * being (i * 13 + j). */
static void fill(struct pair *p, uint32_t i, uint32_t payload)
{
    struct op_pkt *pkt = &p->tx.pkts[i];
    pkt->len = HDR + payload + TRL;
    pkt->ext = NULL;
    for (uint32_t j = 0; j < pkt->len; j++)
        pkt->data[j] = (uint8_t)(i * 13 + j);
    pkt->flow = (struct op_flow){.dst = op_io_local_addr(p->b), .dst_port = op_io_local_port(p->b)};
}

/* Sends packets of these payload sizes as one GSO datagram. */
static void send_datagram(struct pair *p, const uint32_t *payloads, int n)
{
    for (int i = 0; i < n; i++)
        fill(p, (uint32_t)i, payloads[i]);
    uint64_t d0 = io_counter(p->a, OP_IO_C_tx_datagrams);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, n), n);
    assert_int_equal(io_counter(p->a, OP_IO_C_tx_datagrams) - d0, 1);
}

static int recv_placed(struct pair *p, struct op_io *io, const struct op_io_place *pl)
{
    uint64_t deadline = op_now_ns() + WAIT_NS;
    int k;
    for (int i = 0; i < p->rx.n; i++) {
        p->rx.pkts[i].data = p->rx.mem + (size_t)i * OP_IO_BUF_SIZE;
        p->rx.pkts[i].ext = NULL;
    }
    while ((k = op_io_recv_placed(io, p->rx.pkts, p->rx.n, pl)) == 0 && op_now_ns() < deadline)
        op_io_wait(io, deadline);
    return k;
}

/* Received packet k is packet i with `payload` bytes, its bytes right
 * wherever they lie; placed: its payload at `at`. */
static void expect(const struct op_pkt *got, uint32_t i, uint32_t payload, const uint8_t *at)
{
    uint8_t flat[OP_IO_BUF_SIZE];
    assert_int_equal(op_pkt_flatten(got, flat, sizeof flat), HDR + payload + TRL);
    for (uint32_t j = 0; j < HDR + payload + TRL; j++)
        if (flat[j] != (uint8_t)(i * 13 + j))
            fail_msg("packet %u byte %u: %u", i, j, flat[j]);
    if (at == NULL) {
        assert_null(got->ext);
        return;
    }
    assert_ptr_equal(got->ext, at);
    assert_int_equal(got->ext_len, payload);
    assert_int_equal(got->ext_at, HDR);
    assert_int_equal(got->len, HDR + TRL);
}

/* Nothing of mem outside [room, room + len) was written. */
static void outside_untouched(const struct pair *p, size_t len)
{
    for (size_t k = 0; k < 2 * GUARD + ROOM_MAX; k++)
        if ((k < GUARD || k >= GUARD + len) && p->mem[k] != MARK)
            fail_msg("byte %zu outside the room written", k);
}

static struct op_io_place place_of(struct pair *p, size_t room, uint32_t payload)
{
    return (struct op_io_place){.at = p->mem + GUARD, .room = room, .hdr = HDR,
                                .payload = payload, .trl = TRL};
}

/* Five packets of 1000 bytes and a last of 300, all foreseen: each
 * payload where it belongs, headers and trailer lent in data, in order. */
static void test_placed_where_foreseen(void **state)
{
    struct pair *p = *state;
    const uint32_t sizes[] = {1000, 1000, 1000, 1000, 1000, 300};
    send_datagram(p, sizes, 6);
    const struct op_io_place pl = place_of(p, 5300, 1000);
    assert_int_equal(recv_placed(p, p->b, &pl), 6);
    for (uint32_t i = 0; i < 6; i++)
        expect(&p->rx.pkts[i], i, sizes[i], p->mem + GUARD + i * 1000);
    const struct op_addr src = op_io_local_addr(p->a);
    assert_true(op_addr_eq(&p->rx.pkts[5].flow.src, &src));
    outside_untouched(p, 5300);
}

/* The room ends inside the third packet: two placed, the rest whole and
 * right, nothing written past the room. */
static void test_placed_within_room(void **state)
{
    struct pair *p = *state;
    const uint32_t sizes[] = {1000, 1000, 1000, 1000, 1000};
    send_datagram(p, sizes, 5);
    const struct op_io_place pl = place_of(p, 2500, 1000);
    assert_int_equal(recv_placed(p, p->b, &pl), 5);
    for (uint32_t i = 0; i < 5; i++)
        expect(&p->rx.pkts[i], i, 1000, i < 2 ? p->mem + GUARD + i * 1000 : NULL);
    outside_untouched(p, 2500);
}

/* Packets of another size than foreseen come whole and right, in order,
 * though the read scattered them over the room; a second datagram read
 * while the first's packets are out waits for them. */
static void test_placed_other_size_whole(void **state)
{
    struct pair *p = *state;
    const uint32_t sizes[] = {800, 800, 800, 800};
    send_datagram(p, sizes, 4);
    const struct op_io_place pl = place_of(p, 10000, 1000);
    assert_int_equal(recv_placed(p, p->b, &pl), 4);
    for (uint32_t i = 0; i < 4; i++)
        expect(&p->rx.pkts[i], i, 800, NULL);
    outside_untouched(p, 10000);
    send_datagram(p, sizes, 4); /* an empty-handed place: read as any */
    assert_int_equal(recv_placed(p, p->b, NULL), 4);
    for (uint32_t i = 0; i < 4; i++)
        expect(&p->rx.pkts[i], i, 800, NULL);
}

/* A place with no room reads the next datagram alone, even where a
 * busy socket reads several at once; the one after it is then placed.
 * Through a fault layer as through the socket. */
static void test_placed_no_room_then_placed(void **state)
{
    struct pair *p = *state;
    struct op_io *f = NULL;
    const struct op_fault_cfg none = {0};
    assert_int_equal(op_io_fault_wrap(p->b, &none, &f), OP_OK);
    p->b = f; /* closed with the pair */
    const uint32_t first[] = {1016, 1016, 1016}, rest[] = {1000, 1000, 1000};
    for (int busy = 0; busy < 2; busy++) { /* two reads in a row found something */
        send_datagram(p, first, 3);
        assert_int_equal(recv_placed(p, p->b, NULL), 3);
    }
    send_datagram(p, first, 3);
    send_datagram(p, first, 3);
    assert_int_equal(recv_placed(p, p->b, NULL), 6); /* busy: both at once */
    send_datagram(p, first, 3);
    send_datagram(p, rest, 3);
    const struct op_io_place nothing = {.room = 0};
    assert_int_equal(recv_placed(p, p->b, &nothing), 3);
    for (uint32_t i = 0; i < 3; i++)
        expect(&p->rx.pkts[i], i, 1016, NULL);
    const struct op_io_place pl = place_of(p, 3000, 1000);
    assert_int_equal(recv_placed(p, p->b, &pl), 3);
    for (uint32_t i = 0; i < 3; i++)
        expect(&p->rx.pkts[i], i, 1000, p->mem + GUARD + i * 1000);
    outside_untouched(p, 3000);
}

/* Without batching (no GRO) nothing is placed: packets come whole. */
static void test_unbatched_not_placed(void **state)
{
    struct pair *p = *state;
    op_io_udp_batching(p->b, false);
    fill(p, 0, 1000);
    assert_int_equal(op_io_send(p->a, p->tx.pkts, 1), 1);
    const struct op_io_place pl = place_of(p, 3000, 1000);
    assert_int_equal(recv_placed(p, p->b, &pl), 1);
    expect(&p->rx.pkts[0], 0, 1000, NULL);
    outside_untouched(p, 0);
}

#define PAIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup_pair, teardown_pair)

int main(void)
{
    const struct CMUnitTest tests[] = {
        PAIR_TEST(test_placed_where_foreseen),
        PAIR_TEST(test_placed_within_room),
        PAIR_TEST(test_placed_other_size_whole),
        PAIR_TEST(test_placed_no_room_then_placed),
        PAIR_TEST(test_unbatched_not_placed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
