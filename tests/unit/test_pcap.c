/* Unit tests of captures: the pcap format's pure parts (src/wire/pcap.c), the
 * writer and merge (src/io/pcap.c) and the capture layer around a mock
 * backend (src/io/capture.c). Expected bytes come from the pcap format's
 * description (libpcap's pcap-savefile(5), nanosecond magic) and RFC 791
 * offsets, not from the code under test. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "offpath/io.h"
#include "../../src/io/io_internal.h" /* a mock backend */
#include "offpath/wire.h"

#define TS_NS 1795492992858888027ull /* 2026-11-24 04:03:12.858888027 UTC */
#define HOST_A 0x7f290002u           /* 127.41.0.2 */
#define HOST_B 0x7f2a0001u           /* 127.42.0.1 */
#define ETH 14
#define PKT_MAX 256


/* Tests read an io's counters one at a time. */
static uint64_t io_counter(const struct op_io *io, enum op_io_counter c)
{
    uint64_t v[OP_IO_C_COUNT_];
    op_io_counters(io, v);
    return v[c];
}

static const struct op_flow flow_ab = {
    .src.v4 = HOST_A, .dst.v4 = HOST_B, .src_port = 0xc123, .dst_port = OP_ROCE_UDP_PORT};

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A UD SEND-only RoCEv2 packet of len bytes (ICRC included) for flow. */
static size_t roce_packet(const struct op_flow *flow, uint8_t fill, uint8_t *out, size_t len)
{
    memset(out, fill, len);
    out[0] = 0x64; /* UD SEND only */
    out[1] = 0;    /* pad 0, TVer 0 */
    out[2] = out[3] = 0xff;
    return op_icrc_seal(flow, out, len - OP_ICRC_LEN, len);
}

/* ---- a scratch directory per test */

struct scratch {
    char dir[64];
    char path[4][128];
};

static int setup_dir(void **state)
{
    struct scratch *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -1;
    strcpy(s->dir, "/tmp/offpath-pcap-XXXXXX");
    if (mkdtemp(s->dir) == NULL)
        return -1;
    for (int i = 0; i < 4; i++)
        snprintf(s->path[i], sizeof s->path[i], "%s/f%d.pcap", s->dir, i);
    *state = s;
    return 0;
}

static int teardown_dir(void **state)
{
    struct scratch *s = *state;
    for (int i = 0; i < 4; i++)
        unlink(s->path[i]);
    rmdir(s->dir);
    free(s);
    return 0;
}

/* The whole file into a new buffer. */
static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *buf = malloc(1 << 20);
    assert_non_null(buf);
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

static void spit(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* ---- the format */

static void test_file_header_bytes(void **state)
{
    (void)state;
    static const uint8_t want[OP_PCAP_FILE_HDR_LEN] = {
        0x4d, 0x3c, 0xb2, 0xa1, /* nanosecond magic, little-endian */
        2, 0, 4, 0,             /* version 2.4 */
        0, 0, 0, 0, 0, 0, 0, 0, /* thiszone, sigfigs */
        0xff, 0xff, 0, 0,       /* snaplen 65535 */
        1, 0, 0, 0,             /* LINKTYPE_ETHERNET */
    };
    uint8_t h[OP_PCAP_FILE_HDR_LEN];
    op_pcap_file_header(h);
    assert_memory_equal(h, want, sizeof want);
    assert_true(op_pcap_file_header_ok(h));
    h[0] = 0xd4; /* the microsecond magic: another format */
    h[1] = 0xc3;
    assert_false(op_pcap_file_header_ok(h));
}

static void test_packet_is_a_roce_frame_with_valid_icrc(void **state)
{
    (void)state;
    uint8_t frame[OP_PCAP_PKT_HDR_MAX + PKT_MAX];
    size_t len = roce_packet(&flow_ab, 0x5a, frame + OP_PCAP_PKT_HDR_LEN, 64);
    assert_int_equal(op_pcap_packet_headers(frame, TS_NS, &flow_ab, len), OP_PCAP_PKT_HDR_LEN);

    assert_int_equal(le32(frame), TS_NS / 1000000000u);
    assert_int_equal(le32(frame + 4), TS_NS % 1000000000u);
    assert_int_equal(le32(frame + 8), OP_UDP_FRAME_HDR_LEN + len); /* captured */
    assert_int_equal(le32(frame + 12), OP_UDP_FRAME_HDR_LEN + len); /* on the wire */

    const uint8_t *eth = frame + OP_PCAP_REC_HDR_LEN, *ip = eth + ETH;
    static const uint8_t mac_a[6] = {0x02, 0x00, 0x7f, 0x29, 0x00, 0x02};
    static const uint8_t mac_b[6] = {0x02, 0x00, 0x7f, 0x2a, 0x00, 0x01};
    assert_memory_equal(eth, mac_b, 6);
    assert_memory_equal(eth + 6, mac_a, 6);
    assert_int_equal(ip[4] << 8 | ip[5], 0);      /* Identification: the ICRC's */
    assert_int_equal(ip[6] << 8 | ip[7], 0x4000); /* DF */
    assert_int_equal(ip[8], 64);                  /* TTL */

    struct op_flow f;
    uint8_t mac[6];
    size_t off, plen;
    assert_int_equal(op_udp_frame_parse(eth, OP_UDP_FRAME_HDR_LEN + len, &f, mac, &off, &plen),
                     OP_FRAME_OK); /* checks the IPv4 header checksum too */
    assert_memory_equal(&f, &flow_ab, sizeof f);
    assert_int_equal(off, OP_UDP_FRAME_HDR_LEN);
    assert_int_equal(plen, len);
    uint32_t icrc;
    assert_int_equal(op_icrc_ip_frame(ip, 20 + 8 + len, &icrc), OP_OK);
    assert_int_equal(icrc, le32(eth + OP_UDP_FRAME_HDR_LEN + len - OP_ICRC_LEN));
}

/* An IPv6 flow's record: the IPv6 frame, MACs from the addresses' last
 * bytes, the ICRC the engine sealed read back from the captured packet. */
static void test_ipv6_packet(void **state)
{
    (void)state;
    const struct op_flow flow = {.src = op_addr_ipv6((const uint8_t[16]){0xfd, [15] = 1}),
                                 .dst = op_addr_ipv6((const uint8_t[16]){0xfd, [15] = 2}),
                                 .src_port = 0xc000, .dst_port = OP_ROCE_UDP_PORT};
    uint8_t frame[OP_PCAP_PKT_HDR_MAX + PKT_MAX];
    size_t len = roce_packet(&flow, 0x5a, frame + OP_PCAP_PKT_HDR_MAX, 64);
    assert_int_equal(op_pcap_packet_headers(frame, TS_NS, &flow, len), OP_PCAP_PKT_HDR_MAX);
    assert_int_equal(le32(frame + 8), OP_UDP6_FRAME_HDR_LEN + len);
    const uint8_t *eth = frame + OP_PCAP_REC_HDR_LEN;
    assert_memory_equal(eth, ((const uint8_t[6]){0x02, 0x00, 0, 0, 0, 2}), 6);
    struct op_flow f;
    uint8_t mac[6];
    size_t off, plen;
    assert_int_equal(op_udp_frame_parse(eth, OP_UDP6_FRAME_HDR_LEN + len, &f, mac, &off, &plen),
                     OP_FRAME_OK);
    assert_true(op_flow_eq(&f, &flow));
    uint32_t icrc;
    assert_int_equal(op_icrc_ip_frame(eth + ETH, 40 + 8 + len, &icrc), OP_OK);
    assert_int_equal(icrc, le32(eth + OP_UDP6_FRAME_HDR_LEN + len - OP_ICRC_LEN));
}

static void test_packet_too_long_for_ipv4(void **state)
{
    (void)state;
    uint8_t h[OP_PCAP_PKT_HDR_MAX];
    assert_int_equal(op_pcap_packet_headers(h, TS_NS, &flow_ab, 0xffff - 28 + 1), 0);
    assert_int_equal(op_pcap_packet_headers(h, TS_NS, &flow_ab, 0xffff - 28), OP_PCAP_PKT_HDR_LEN);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void test_record_parse(void **state)
{
    (void)state;
    uint8_t r[OP_PCAP_REC_HDR_LEN];
    uint64_t ts = 0;
    uint32_t cap = 0;
    put32(r, 7);
    put32(r + 4, 999999999);
    put32(r + 8, 100);
    put32(r + 12, 100);
    assert_int_equal(op_pcap_record_parse(r, &ts, &cap), OP_OK);
    assert_int_equal(ts, 7999999999ull);
    assert_int_equal(cap, 100);
    put32(r + 4, 1000000000); /* a whole second of nanoseconds */
    assert_int_equal(op_pcap_record_parse(r, &ts, &cap), OP_ERR_MALFORMED);
    put32(r + 4, 0);
    put32(r + 8, 101); /* more captured than was on the wire */
    assert_int_equal(op_pcap_record_parse(r, &ts, &cap), OP_ERR_MALFORMED);
    put32(r + 8, OP_PCAP_SNAPLEN + 1);
    put32(r + 12, OP_PCAP_SNAPLEN + 1);
    assert_int_equal(op_pcap_record_parse(r, &ts, &cap), OP_ERR_MALFORMED);
}

/* ---- the writer */

/* Record i of a file: its time, frame and frame length; false past the end. */
static bool record_at(const uint8_t *file, size_t len, int i, uint64_t *ts,
                      const uint8_t **frame, uint32_t *flen)
{
    size_t off = OP_PCAP_FILE_HDR_LEN;
    for (int k = 0;; k++) {
        if (off + OP_PCAP_REC_HDR_LEN > len)
            return false;
        assert_int_equal(op_pcap_record_parse(file + off, ts, flen), OP_OK);
        assert_true(off + OP_PCAP_REC_HDR_LEN + *flen <= len);
        *frame = file + off + OP_PCAP_REC_HDR_LEN;
        if (k == i)
            return true;
        off += OP_PCAP_REC_HDR_LEN + *flen;
    }
}

static void test_writer_round_trip(void **state)
{
    struct scratch *s = *state;
    struct op_pcap *w = NULL;
    uint8_t pkt[3][PKT_MAX];
    size_t lens[3] = {28, 100, 200};
    assert_int_equal(op_pcap_open(s->path[0], &w), OP_OK);
    for (int i = 0; i < 3; i++) {
        roce_packet(&flow_ab, (uint8_t)i, pkt[i], lens[i]);
        op_pcap_write(w, TS_NS + (uint64_t)i, &flow_ab, pkt[i], lens[i]);
    }
    assert_int_equal(op_pcap_count(w), 3);
    assert_int_equal(op_pcap_close(w), OP_OK);

    size_t len;
    uint8_t *file = slurp(s->path[0], &len);
    assert_int_equal(len, OP_PCAP_FILE_HDR_LEN + 3 * OP_PCAP_PKT_HDR_LEN + 28 + 100 + 200);
    assert_true(op_pcap_file_header_ok(file));
    for (int i = 0; i < 3; i++) {
        uint64_t ts;
        const uint8_t *frame;
        uint32_t flen;
        assert_true(record_at(file, len, i, &ts, &frame, &flen));
        assert_int_equal(ts, TS_NS + (uint64_t)i);
        assert_int_equal(flen, OP_UDP_FRAME_HDR_LEN + lens[i]);
        assert_memory_equal(frame + OP_UDP_FRAME_HDR_LEN, pkt[i], lens[i]);
    }
    free(file);
}

static void test_open_unwritable_says_why(void **state)
{
    struct scratch *s = *state;
    struct op_pcap *w = NULL;
    char path[160];
    snprintf(path, sizeof path, "%s/no/such/dir.pcap", s->dir);
    assert_int_equal(op_pcap_open(path, &w), op_status_from_errno(ENOENT));
    assert_int_equal(op_pcap_open(s->dir, &w), op_status_from_errno(EISDIR)); /* a directory */
}

/* A full disk: the first failure sticks, later writes do nothing and close
 * reports it. */
static void test_write_failure_sticks(void **state)
{
    (void)state;
    struct op_pcap *w = NULL;
    static uint8_t big[OP_IO_BUF_SIZE];
    if (access("/dev/full", W_OK) != 0)
        skip();
    assert_int_equal(op_pcap_open("/dev/full", &w), OP_OK);
    for (int i = 0; i < 300; i++) /* 2.7 MB: past the stdio buffer */
        op_pcap_write(w, TS_NS, &flow_ab, big, sizeof big);
    assert_true(op_pcap_count(w) < 300);
    assert_int_equal(op_pcap_close(w), op_status_from_errno(ENOSPC));
}

/* ---- merge */

static void write_capture(const char *path, const uint64_t *ts, int n)
{
    struct op_pcap *w = NULL;
    uint8_t pkt[PKT_MAX];
    assert_int_equal(op_pcap_open(path, &w), OP_OK);
    for (int i = 0; i < n; i++) {
        roce_packet(&flow_ab, (uint8_t)ts[i], pkt, 40);
        op_pcap_write(w, ts[i], &flow_ab, pkt, 40);
    }
    assert_int_equal(op_pcap_close(w), OP_OK);
}

static void test_merge_in_time_order(void **state)
{
    struct scratch *s = *state;
    static const uint64_t a[] = {1, 4, 5}, b[] = {2, 3, 6}, none[1] = {0};
    write_capture(s->path[0], a, 3);
    write_capture(s->path[1], b, 3);
    write_capture(s->path[2], none, 0);
    struct op_pcap *w = NULL;
    const char *in[] = {s->path[0], s->path[1], s->path[2]};
    assert_int_equal(op_pcap_open(s->path[3], &w), OP_OK);
    assert_int_equal(op_pcap_merge(w, in, 3), OP_OK);
    assert_int_equal(op_pcap_count(w), 6);
    assert_int_equal(op_pcap_close(w), OP_OK);

    size_t len;
    uint8_t *file = slurp(s->path[3], &len);
    for (int i = 0; i < 6; i++) {
        uint64_t ts;
        const uint8_t *frame;
        uint32_t flen;
        assert_true(record_at(file, len, i, &ts, &frame, &flen));
        assert_int_equal(ts, (uint64_t)i + 1);
        assert_int_equal(frame[OP_UDP_FRAME_HDR_LEN + 5], i + 1); /* the packet's own bytes */
    }
    uint64_t ts;
    const uint8_t *frame;
    uint32_t flen;
    assert_false(record_at(file, len, 6, &ts, &frame, &flen));
    free(file);
}

static void expect_merge_fails(const char *in, const char *out, int err)
{
    struct op_pcap *w = NULL;
    assert_int_equal(op_pcap_open(out, &w), OP_OK);
    assert_int_equal(op_pcap_merge(w, &in, 1), op_status_from_errno(err));
    assert_int_equal(op_pcap_close(w), op_status_from_errno(err));
}

static void test_merge_missing_input(void **state)
{
    struct scratch *s = *state;
    expect_merge_fails(s->path[0], s->path[3], ENOENT);
}

static void test_merge_refuses_other_files(void **state)
{
    struct scratch *s = *state;
    spit(s->path[0], "not a capture at all, longer than a header", 42);
    expect_merge_fails(s->path[0], s->path[3], EBADMSG);

    static const uint64_t ts[] = {1, 2};
    write_capture(s->path[1], ts, 2);
    size_t len;
    uint8_t *file = slurp(s->path[1], &len);
    spit(s->path[1], file, len - 3); /* cut inside the last packet */
    free(file);
    expect_merge_fails(s->path[1], s->path[3], EBADMSG);
}

/* ---- the capture layer */

struct mock_io {
    struct op_io io;
    int accept;  /* send takes at most this many */
    bool closed;
    uint8_t rx[2][PKT_MAX];
    size_t rx_len;
};

static int mock_recv(struct op_io *io, struct op_pkt *pkts, int max)
{
    struct mock_io *m = (struct mock_io *)io;
    static const struct op_flow from_b = {
        .src.v4 = HOST_B, .dst.v4 = HOST_A, .src_port = OP_ROCE_UDP_PORT, .dst_port = 0xc123};
    int n = max < 2 ? max : 2;
    for (int i = 0; i < n; i++) {
        pkts[i].flow = from_b;
        pkts[i].len = (uint32_t)m->rx_len;
        memcpy(pkts[i].data, m->rx[i], m->rx_len);
    }
    io->c[OP_IO_C_rx_pkts] += (uint64_t)n;
    return n;
}

static int mock_send(struct op_io *io, const struct op_pkt *pkts, int n)
{
    struct mock_io *m = (struct mock_io *)io;
    (void)pkts;
    int r = n < m->accept ? n : m->accept;
    io->c[OP_IO_C_tx_pkts] += (uint64_t)r;
    io->c[OP_IO_C_tx_drops] += (uint64_t)(n - r);
    return r;
}

static int mock_fd(const struct op_io *io) { (void)io; return 42; }
static uint64_t mock_deadline(const struct op_io *io) { (void)io; return 1234; }
static void mock_poll(struct op_io *io, uint64_t now) { (void)io; (void)now; }
static void mock_close(struct op_io *io) { ((struct mock_io *)io)->closed = true; }

static const struct op_io_ops mock_ops = {
    .name = "mock", .recv = mock_recv, .send = mock_send, .fd = mock_fd,
    .deadline = mock_deadline, .poll = mock_poll, .close = mock_close,
};

static void check_frame(const uint8_t *frame, uint32_t flen, const struct op_flow *want)
{
    struct op_flow f;
    uint8_t mac[6];
    size_t off, plen;
    uint32_t icrc;
    assert_int_equal(op_udp_frame_parse(frame, flen, &f, mac, &off, &plen), OP_FRAME_OK);
    assert_memory_equal(&f, want, sizeof f);
    assert_int_equal(op_icrc_ip_frame(frame + ETH, flen - ETH, &icrc), OP_OK);
    assert_int_equal(icrc, le32(frame + flen - OP_ICRC_LEN));
}

/* Both ways, one frame per packet; of a short send only what inner took,
 * with inner's address as the source (the engine may leave it 0). */
static void test_capture_layer(void **state)
{
    struct scratch *s = *state;
    struct mock_io m = {.io = {.ops = &mock_ops, .local.v4 = HOST_A, .local_port = 0xc123,
                               .link_mtu = 1500},
                        .accept = 2, .rx_len = 60};
    const struct op_flow from_b = {
        .src.v4 = HOST_B, .dst.v4 = HOST_A, .src_port = OP_ROCE_UDP_PORT, .dst_port = 0xc123};
    roce_packet(&from_b, 1, m.rx[0], m.rx_len);
    roce_packet(&from_b, 2, m.rx[1], m.rx_len);
    struct op_pcap *w = NULL;
    struct op_io *io = NULL;
    struct op_pktbuf b;
    assert_int_equal(op_pktbuf_init(&b, 3), OP_OK);
    assert_int_equal(op_pcap_open(s->path[0], &w), OP_OK);
    assert_int_equal(op_io_pcap_wrap(&m.io, w, &io), OP_OK);
    assert_int_equal(op_io_local_ip(io), HOST_A);
    assert_int_equal(op_io_link_mtu(io), 1500);
    assert_int_equal(op_io_fd(io), 42);
    assert_int_equal(op_io_deadline(io), 1234);

    assert_int_equal(op_io_recv(io, b.pkts, 3), 2);
    for (int i = 0; i < 3; i++) {
        b.pkts[i].flow = flow_ab;
        b.pkts[i].flow.src.v4 = 0;
        b.pkts[i].len = (uint32_t)roce_packet(&flow_ab, (uint8_t)(10 + i), b.pkts[i].data, 80);
    }
    assert_int_equal(op_io_send(io, b.pkts, 3), 2);
    assert_int_equal(io_counter(io, OP_IO_C_rx_pkts), 2);
    assert_int_equal(io_counter(io, OP_IO_C_tx_pkts), 2);
    assert_int_equal(io_counter(io, OP_IO_C_tx_drops), 1);
    assert_int_equal(op_pcap_count(w), 4);
    op_io_close(io);
    assert_true(m.closed);
    assert_int_equal(op_pcap_close(w), OP_OK);

    size_t len;
    uint8_t *file = slurp(s->path[0], &len);
    const struct op_flow *want[4] = {&from_b, &from_b, &flow_ab, &flow_ab};
    for (int i = 0; i < 4; i++) {
        uint64_t ts;
        const uint8_t *frame;
        uint32_t flen;
        assert_true(record_at(file, len, i, &ts, &frame, &flen));
        check_frame(frame, flen, want[i]);
    }
    uint64_t ts;
    const uint8_t *frame;
    uint32_t flen;
    assert_false(record_at(file, len, 4, &ts, &frame, &flen));
    free(file);
    op_pktbuf_free(&b);
}

static void test_capture_wrap_checks_arguments(void **state)
{
    (void)state;
    struct mock_io m = {.io = {.ops = &mock_ops}};
    struct op_io *io = NULL;
    assert_int_equal(op_io_pcap_wrap(NULL, (struct op_pcap *)&m, &io), OP_ERR_INVAL);
    assert_int_equal(op_io_pcap_wrap(&m.io, NULL, &io), OP_ERR_INVAL);
    assert_int_equal(op_io_pcap_wrap(&m.io, (struct op_pcap *)&m, NULL), OP_ERR_INVAL);
    assert_null(io);
}

#define DIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup_dir, teardown_dir)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_header_bytes),
        cmocka_unit_test(test_packet_is_a_roce_frame_with_valid_icrc),
        cmocka_unit_test(test_packet_too_long_for_ipv4),
        cmocka_unit_test(test_ipv6_packet),
        cmocka_unit_test(test_record_parse),
        DIR_TEST(test_writer_round_trip),
        DIR_TEST(test_open_unwritable_says_why),
        cmocka_unit_test(test_write_failure_sticks),
        DIR_TEST(test_merge_in_time_order),
        DIR_TEST(test_merge_missing_input),
        DIR_TEST(test_merge_refuses_other_files),
        DIR_TEST(test_capture_layer),
        cmocka_unit_test(test_capture_wrap_checks_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
