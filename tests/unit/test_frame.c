/* Unit tests of the AF_XDP backend's pure parts: Ethernet + IPv4 + UDP
 * framing around a RoCEv2 payload (src/wire/frame.c) and the MAC look-up in
 * the text of /proc/net/arp (src/io/neigh.c). Header checks here are written
 * from RFC 791/768 byte offsets, not from the code under test. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "offpath/io.h"
#include "offpath/wire.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Byte offsets in a frame (Ethernet header, then IPv4 without options). */
#define ETH 14
#define IP_VIHL (ETH + 0)
#define IP_TOS (ETH + 1)
#define IP_TOTAL (ETH + 2)
#define IP_ID (ETH + 4)
#define IP_FRAG (ETH + 6)
#define IP_TTL (ETH + 8)
#define IP_PROTO (ETH + 9)
#define IP_CSUM (ETH + 10)
#define IP_SRC (ETH + 12)
#define IP_DST (ETH + 16)
#define UDP (ETH + 20)
#define HDRS (UDP + 8)
#define FRAME_MAX 2048

static const struct op_flow flow = {
    .src.v4 = 0x0a4d0001u, .dst.v4 = 0x0a4d0002u, .src_port = 0xc123, .dst_port = 4791,
};
static const struct op_frame_l2 l2 = {
    .src_mac = {0x8a, 0x1f, 0x22, 0x03, 0x9c, 0x01},
    .dst_mac = {0x8a, 0x1f, 0x22, 0x03, 0x9c, 0x02},
    .tos = 0x6a, /* DSCP 26, ECT(0): must be copied, not defaulted */
};

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* RFC 1071, byte-wise, independent of the code under test: the ones'
 * complement sum of a header with a correct checksum is 0xffff. */
static uint16_t ones_sum(const uint8_t *h, size_t len)
{
    uint32_t sum = 0;
    for (size_t i = 0; i < len; i += 2)
        sum += (uint32_t)h[i] << 8 | h[i + 1];
    while (sum > 0xffffu)
        sum = (sum & 0xffffu) + (sum >> 16);
    return (uint16_t)sum;
}

static size_t ihl_of(const uint8_t *f) { return (size_t)(f[IP_VIHL] & 0xfu) * 4; }

/* After an edit the checksum is made right again, so that the verdict comes
 * from the field edited and not from the checksum. */
static void fix_ip_csum(uint8_t *f)
{
    size_t ihl = ihl_of(f) < 20 ? 20 : ihl_of(f);
    put16(f + IP_CSUM, 0);
    put16(f + IP_CSUM, (uint16_t)~ones_sum(f + ETH, ihl));
}

static void edit8(uint8_t *f, size_t at, uint8_t v)
{
    f[at] = v;
    fix_ip_csum(f);
}

static void edit16(uint8_t *f, size_t at, uint16_t v)
{
    put16(f + at, v);
    fix_ip_csum(f);
}

static void fill_payload(uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(i * 29u + 3u);
}

/* A good frame with payload_len bytes of pattern, zeros after it up to cap;
 * returns its length. */
static size_t good_frame(uint8_t *f, size_t cap, size_t payload_len)
{
    memset(f, 0, cap);
    fill_payload(f + HDRS, payload_len);
    size_t n = op_udp_frame_build(f, cap, &flow, &l2, payload_len);
    assert_int_equal(n, HDRS + payload_len);
    return n;
}

/* The parse outputs, pre-filled with a sentinel so that a refusal can be
 * seen to write nothing. */
struct parsed {
    struct op_flow flow;
    uint8_t mac[6];
    size_t off, len;
};

static const struct parsed sentinel = {
    .flow = {.src.v4 = 0xdeadbeefu, .dst.v4 = 0xfeedfaceu, .src_port = 0xabcd, .dst_port = 0xdcba},
    .mac = {0xee, 0xee, 0xee, 0xee, 0xee, 0xee},
    .off = 0x5a5a5a,
    .len = 0xa5a5a5,
};

static unsigned parse(const uint8_t *f, size_t len, struct parsed *out)
{
    *out = sentinel;
    return op_udp_frame_parse(f, len, &out->flow, out->mac, &out->off, &out->len);
}

static void assert_unwritten(const struct parsed *p)
{
    assert_memory_equal(&p->flow, &sentinel.flow, sizeof p->flow);
    assert_memory_equal(p->mac, sentinel.mac, 6);
    assert_int_equal(p->off, sentinel.off);
    assert_int_equal(p->len, sentinel.len);
}

/* what names the case in the failure message of a table-driven test. */
static void assert_refused_as(const uint8_t *f, size_t len, unsigned verdict, const char *what)
{
    struct parsed p;
    unsigned got = parse(f, len, &p);
    if (got != verdict)
        print_message("%s: %s, not %s\n", what, op_frame_verdict_str(got),
                      op_frame_verdict_str(verdict));
    assert_int_equal(got, verdict);
    assert_unwritten(&p);
}

static void assert_refused(const uint8_t *f, size_t len, unsigned verdict)
{
    assert_refused_as(f, len, verdict, "frame");
}

static void assert_parsed(const uint8_t *f, size_t len, size_t off, size_t payload_len)
{
    struct parsed p;
    assert_int_equal(parse(f, len, &p), OP_FRAME_OK);
    assert_int_equal(p.flow.src.v4, flow.src.v4);
    assert_int_equal(p.flow.dst.v4, flow.dst.v4);
    assert_int_equal(p.flow.src_port, flow.src_port);
    assert_int_equal(p.flow.dst_port, flow.dst_port);
    assert_memory_equal(p.mac, l2.src_mac, 6);
    assert_int_equal(p.off, off);
    assert_int_equal(p.len, payload_len);
}

/* ---- build ------------------------------------------------------------ */

static void assert_headers(const uint8_t *f, size_t payload_len)
{
    assert_memory_equal(f, l2.dst_mac, 6);
    assert_memory_equal(f + 6, l2.src_mac, 6);
    assert_int_equal(get16(f + 12), 0x0800);
    assert_int_equal(f[IP_VIHL], 0x45);
    assert_int_equal(f[IP_TOS], l2.tos);
    assert_int_equal(get16(f + IP_TOTAL), 20 + 8 + payload_len);
    assert_int_equal(get16(f + IP_ID), 0);
    assert_int_equal(get16(f + IP_FRAG), 0x4000); /* DF, no MF, offset 0 */
    assert_int_equal(f[IP_TTL], 64);
    assert_int_equal(f[IP_PROTO], 17);
    assert_int_equal(ones_sum(f + ETH, 20), 0xffff);
    assert_int_equal(get32(f + IP_SRC), flow.src.v4);
    assert_int_equal(get32(f + IP_DST), flow.dst.v4);
    assert_int_equal(get16(f + UDP), flow.src_port);
    assert_int_equal(get16(f + UDP + 2), flow.dst_port);
    assert_int_equal(get16(f + UDP + 4), 8 + payload_len);
    assert_int_equal(get16(f + UDP + 6), 0);
}

static void test_frame_build_parse_round_trip(void **state)
{
    (void)state;
    static const size_t lens[] = {0, 1, 2, 1000};
    uint8_t f[FRAME_MAX], want[FRAME_MAX] = {0}; /* len 0 compares one byte: both zero */
    for (size_t i = 0; i < COUNT_OF(lens); i++) {
        size_t n = good_frame(f, sizeof f, lens[i]);
        assert_int_equal(n, OP_UDP_FRAME_HDR_LEN + lens[i]);
        assert_headers(f, lens[i]);
        assert_parsed(f, n, OP_UDP_FRAME_HDR_LEN, lens[i]);
        fill_payload(want, lens[i]); /* the payload the caller put is left alone */
        assert_memory_equal(f + HDRS, want, lens[i] > 0 ? lens[i] : 1);
    }
}

/* A RoCEv2 packet sealed for the flow keeps a valid ICRC once framed: the
 * frame is what the ICRC was computed over. */
static void test_frame_icrc_valid_on_wire(void **state)
{
    (void)state;
    uint8_t f[FRAME_MAX];
    uint8_t *roce = f + HDRS;
    const struct op_bth bth = {.opcode = OP_RC_SEND_ONLY, .pkey = 0xffff, .dest_qp = 0x000123,
                               .ackreq = true, .psn = 0x00abcd};
    op_bth_encode(&bth, roce);
    fill_payload(roce + OP_BTH_LEN, 64);
    size_t roce_len = op_icrc_seal(&flow, roce, OP_BTH_LEN + 64, sizeof f - HDRS);
    assert_int_equal(roce_len, OP_BTH_LEN + 64 + OP_ICRC_LEN);
    size_t n = op_udp_frame_build(f, sizeof f, &flow, &l2, roce_len);
    assert_int_equal(n, HDRS + roce_len);
    uint32_t icrc = 0;
    assert_int_equal(op_icrc_ip_frame(f + ETH, n - ETH, &icrc), OP_OK);
    const uint8_t *wire = f + n - OP_ICRC_LEN; /* little-endian on the wire */
    assert_int_equal(icrc, (uint32_t)wire[0] | (uint32_t)wire[1] << 8 |
                               (uint32_t)wire[2] << 16 | (uint32_t)wire[3] << 24);
    struct parsed p;
    assert_int_equal(parse(f, n, &p), OP_FRAME_OK);
    assert_true(op_icrc_check(&p.flow, f + p.off, p.len));
}

static void test_frame_build_refuses_small_cap(void **state)
{
    (void)state;
    uint8_t f[FRAME_MAX];
    for (size_t cap = 0; cap < OP_UDP_FRAME_HDR_LEN; cap++)
        assert_int_equal(op_udp_frame_build(f, cap, &flow, &l2, 0), 0);
    assert_int_equal(op_udp_frame_build(f, OP_UDP_FRAME_HDR_LEN, &flow, &l2, 0), 42);
    assert_int_equal(op_udp_frame_build(f, 100, &flow, &l2, 59), 0);
    assert_int_equal(op_udp_frame_build(f, 100, &flow, &l2, 58), 100);
    assert_int_equal(op_udp_frame_build(f, sizeof f, &flow, &l2, SIZE_MAX), 0);
}

/* IPv4's total length is 16 bits: the cap is not the only limit. */
static void test_frame_build_refuses_past_64k(void **state)
{
    (void)state;
    size_t biggest = 0xffff - 20 - 8;
    size_t cap = HDRS + biggest + 1;
    uint8_t *f = calloc(1, cap);
    assert_non_null(f);
    assert_int_equal(op_udp_frame_build(f, cap, &flow, &l2, biggest + 1), 0);
    assert_int_equal(op_udp_frame_build(f, cap, &flow, &l2, biggest), HDRS + biggest);
    assert_int_equal(get16(f + IP_TOTAL), 0xffff);
    assert_parsed(f, HDRS + biggest, HDRS, biggest);
    free(f);
}

/* ---- parse: refusals -------------------------------------------------- */

/* A frame that ends before the IPv4 header does is SHORT; one that ends
 * later falls short of the IPv4 total length, which is BAD_IPV4 (the UDP
 * header cannot be cut while the total length is consistent). */
static void test_frame_parse_truncated(void **state)
{
    (void)state;
    uint8_t f[FRAME_MAX];
    size_t n = good_frame(f, sizeof f, 16);
    for (size_t len = 0; len < n; len++)
        assert_refused(f, len, len < ETH + 20 ? OP_FRAME_SHORT : OP_FRAME_BAD_IP);
    assert_refused(NULL, 0, OP_FRAME_SHORT);
}

static void test_frame_parse_not_ip(void **state)
{
    (void)state;
    static const uint16_t types[] = {0x0806 /* ARP */, 0x8100 /* VLAN */, 0x88a8 /* QinQ */,
                                     0x0000};
    uint8_t f[FRAME_MAX];
    for (size_t i = 0; i < COUNT_OF(types); i++) {
        size_t n = good_frame(f, sizeof f, 8);
        put16(f + 12, types[i]);
        assert_refused(f, n, OP_FRAME_NOT_IP);
    }
    /* an IPv4 packet labelled IPv6 is read as IPv6, and is no IPv6 header */
    size_t n = good_frame(f, sizeof f, 64);
    put16(f + 12, 0x86dd);
    assert_refused(f, n, OP_FRAME_BAD_IP);
}

/* One header edit on a good frame and the verdict it must give. */
struct header_case {
    const char *what;
    size_t at;
    uint16_t val;
    bool wide;
    unsigned verdict;
};

static void check_header_cases(const struct header_case *c, size_t count)
{
    uint8_t f[FRAME_MAX];
    for (size_t i = 0; i < count; i++) {
        size_t n = good_frame(f, sizeof f, 8);
        if (c[i].wide)
            edit16(f, c[i].at, c[i].val);
        else
            edit8(f, c[i].at, (uint8_t)c[i].val);
        assert_refused_as(f, n, c[i].verdict, c[i].what);
    }
}

static void test_frame_parse_bad_ipv4(void **state)
{
    (void)state;
    static const struct header_case cases[] = {
        {"version 6", IP_VIHL, 0x65, false, OP_FRAME_BAD_IP},
        {"IHL 4", IP_VIHL, 0x44, false, OP_FRAME_BAD_IP},
        {"IHL 0", IP_VIHL, 0x40, false, OP_FRAME_BAD_IP},
        {"total length past the frame", IP_TOTAL, 20 + 8 + 8 + 1, true, OP_FRAME_BAD_IP},
        {"total length below IP + UDP", IP_TOTAL, 20 + 7, true, OP_FRAME_BAD_IP},
        {"IHL 15 past the frame", IP_VIHL, 0x4f, false, OP_FRAME_SHORT},
    };
    check_header_cases(cases, COUNT_OF(cases));
    uint8_t f[FRAME_MAX];
    size_t n = good_frame(f, sizeof f, 8);
    f[IP_CSUM + 1] ^= 0x01;
    assert_refused(f, n, OP_FRAME_BAD_IP);
}

static void test_frame_parse_fragment(void **state)
{
    (void)state;
    static const struct header_case cases[] = {
        {"MF", IP_FRAG, 0x2000, true, OP_FRAME_FRAGMENT},
        {"offset with DF", IP_FRAG, 0x4001, true, OP_FRAME_FRAGMENT},
        {"last fragment", IP_FRAG, 0x00b9, true, OP_FRAME_FRAGMENT},
        {"MF and offset", IP_FRAG, 0x3fff, true, OP_FRAME_FRAGMENT},
    };
    check_header_cases(cases, COUNT_OF(cases));
}

static void test_frame_parse_not_udp(void **state)
{
    (void)state;
    static const struct header_case cases[] = {
        {"TCP", IP_PROTO, 6, false, OP_FRAME_NOT_UDP},
        {"ICMP", IP_PROTO, 1, false, OP_FRAME_NOT_UDP},
        {"UDP-Lite", IP_PROTO, 136, false, OP_FRAME_NOT_UDP},
    };
    check_header_cases(cases, COUNT_OF(cases));
}

/* The UDP header is not covered by the IP checksum: no fix-up needed. */
static void test_frame_parse_bad_udp(void **state)
{
    (void)state;
    static const uint16_t lens[] = {8 + 8 - 1, 8 + 8 + 1, 7, 0, 0xffff};
    uint8_t f[FRAME_MAX];
    for (size_t i = 0; i < COUNT_OF(lens); i++) {
        size_t n = good_frame(f, sizeof f, 8);
        put16(f + UDP + 4, lens[i]);
        assert_refused(f, n, OP_FRAME_BAD_UDP);
    }
}

/* ---- parse: accepted variations --------------------------------------- */

/* Frames shorter than 60 bytes are padded on the wire; the padding is not
 * payload. */
static void test_frame_parse_ethernet_padding(void **state)
{
    (void)state;
    uint8_t f[60];
    size_t n = good_frame(f, sizeof f, 2);
    assert_int_equal(n, 44);
    memset(f + n, 0xcc, sizeof f - n);
    assert_parsed(f, sizeof f, HDRS, 2);
}

/* Nothing sends options on this path, but a host's stack may: the payload
 * moves by the options' length. */
static void test_frame_parse_ip_options(void **state)
{
    (void)state;
    uint8_t f[FRAME_MAX];
    size_t n = good_frame(f, sizeof f, 10);
    memmove(f + UDP + 4, f + UDP, n - UDP);
    memset(f + UDP, 0x01, 4); /* four NOPs */
    f[IP_VIHL] = 0x46;
    edit16(f, IP_TOTAL, (uint16_t)(get16(f + IP_TOTAL) + 4));
    assert_int_equal(ones_sum(f + ETH, 24), 0xffff);
    assert_parsed(f, n + 4, HDRS + 4, 10);
    f[UDP] = 0x00; /* an option changed without fixing the checksum */
    assert_refused(f, n + 4, OP_FRAME_BAD_IP);
}

/* Only the DF bit and the variant fields differ from what we build. */
static void test_frame_parse_tolerates_variant_fields(void **state)
{
    (void)state;
    uint8_t f[FRAME_MAX];
    size_t n = good_frame(f, sizeof f, 8);
    edit16(f, IP_FRAG, 0);
    edit16(f, IP_ID, 0x1234);
    edit8(f, IP_TTL, 1);
    edit8(f, IP_TOS, 0x03);
    put16(f + UDP + 6, 0xbeef);
    assert_parsed(f, n, HDRS, 8);
}

static void test_frame_verdict_str(void **state)
{
    (void)state;
    for (unsigned v = 0; v < OP_FRAME_VERDICTS_; v++) {
        const char *s = op_frame_verdict_str(v);
        assert_non_null(s);
        assert_true(s[0] != '\0');
        assert_string_not_equal(s, "unknown");
        for (unsigned w = 0; w < v; w++)
            assert_string_not_equal(s, op_frame_verdict_str(w)); /* counters' names */
    }
    assert_string_equal(op_frame_verdict_str(OP_FRAME_VERDICTS_), "unknown");
    assert_string_equal(op_frame_verdict_str(OP_FRAME_VERDICTS_ + 1), "unknown");
    assert_string_equal(op_frame_verdict_str(UINT_MAX), "unknown");
}

/* ---- /proc/net/arp ---------------------------------------------------- */

#define ARP_HEADER \
    "IP address       HW type     Flags       HW address            Mask     Device\n"

static const char arp_table[] =
    ARP_HEADER
    "192.168.1.1      0x1         0x2         52:54:00:12:35:02     *        eth0\n"
    "10.77.0.3        0x1         0x0         00:00:00:00:00:00     *        xa\n"
    "10.77.0.2        0x1         0x2         8a:1f:22:03:9c:01     *        xa\n"
    "10.77.0.2        0x1         0x2         aa:bb:cc:dd:ee:ff     *        xb\n"
    "10.77.0.4        0x1         0x6         02:00:00:00:00:04     *        xa\n";

static const uint8_t mac_xa[6] = {0x8a, 0x1f, 0x22, 0x03, 0x9c, 0x01};

static bool lookup(const char *table, uint32_t ip, const char *dev, uint8_t mac[6])
{
    memset(mac, 0xee, 6);
    return op_arp_table_lookup(table, ip, dev, mac);
}

static void test_arp_finds_complete_entry(void **state)
{
    (void)state;
    uint8_t mac[6];
    assert_true(lookup(arp_table, 0x0a4d0002u, "xa", mac));
    assert_memory_equal(mac, mac_xa, 6);
    static const uint8_t mac_xb[6] = {0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
    assert_true(lookup(arp_table, 0x0a4d0002u, "xb", mac));
    assert_memory_equal(mac, mac_xb, 6);
    /* Flags 0x6: complete and permanent (a static entry). */
    static const uint8_t mac_4[6] = {0x02, 0, 0, 0, 0, 0x04};
    assert_true(lookup(arp_table, 0x0a4d0004u, "xa", mac));
    assert_memory_equal(mac, mac_4, 6);
}

static void test_arp_refuses_other_device(void **state)
{
    (void)state;
    uint8_t mac[6];
    assert_false(lookup(arp_table, 0x0a4d0002u, "eth0", mac));
    assert_false(lookup(arp_table, 0x0a4d0002u, "x", mac)); /* a prefix is not the name */
    assert_false(lookup(arp_table, 0x0a4d0002u, "xa0", mac));
    assert_false(lookup(arp_table, 0xc0a80101u, "xa", mac));
    assert_false(lookup(arp_table, 0x0a4d0009u, "xa", mac)); /* no entry */
}

/* Flags 0x0: resolution asked, no answer yet; the zero MAC is not a MAC. */
static void test_arp_refuses_incomplete(void **state)
{
    (void)state;
    uint8_t mac[6];
    assert_false(lookup(arp_table, 0x0a4d0003u, "xa", mac));
}

static void test_arp_refuses_malformed_lines(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "10.77.0.2\n",
        "10.77.0.2        0x1         0x2         8a:1f:22:03:9c:01     *\n",
        "10.77.0.2        0x1         0x2         zz:1f:22:03:9c:01     *        xa\n",
        "10.77.0.2        0x1         0x2         8a:1f:22:03:9c        *        xa\n",
        "10.77.0.2        0x1         0x2         8a:1f:22:03:9c:01:07  *        xa\n",
        "10.77.0.2        0x1         0x2         8a:1f:22:03:9c:01x    *        xa\n",
        "10.77.0.300      0x1         0x2         8a:1f:22:03:9c:01     *        xa\n",
        "10.77.300.2      0x1         0x2         8a:1f:22:03:9c:01     *        xa\n",
        "10.77.0          0x1         0x2         8a:1f:22:03:9c:01     *        xa\n",
        "10.77.0.2        0x1         zz          8a:1f:22:03:9c:01     *        xa\n",
        /* what sscanf's %u and %x would have taken */
        "10.77.0.2junk    0x1         0x2         8a:1f:22:03:9c:01     *        xa\n",
        "+10.77.0.2       0x1         0x2         8a:1f:22:03:9c:01     *        xa\n",
        "10.77.0.2        0x1         0x2         -1:1f:22:03:9c:01     *        xa\n",
        "10.77.0.2        0x1         0x2         0x:1f:22:03:9c:01     *        xa\n",
        "10.77.0.2        0x1         0x2         a:b:c:d:e:f           *        xa\n",
        "10.77.0.2        0x1         0x2         8a:1f:22:03:9c:01     *        xa extra\n",
        "10.77.0.2        0x1         2           8a:1f:22:03:9c:01     *        xa\n",
        "\n",
        "   \n",
    };
    uint8_t mac[6];
    for (size_t i = 0; i < COUNT_OF(lines); i++) {
        bool found = lookup(lines[i], 0x0a4d0002u, "xa", mac);
        if (found)
            print_message("taken: %s", lines[i]);
        assert_false(found);
    }
}

/* A line with an octet of 300 is not 10.77.0.44 (300 mod 256) either. */
static void test_arp_octet_does_not_wrap(void **state)
{
    (void)state;
    uint8_t mac[6];
    assert_false(lookup("10.77.0.300 0x1 0x2 8a:1f:22:03:9c:01 * xa\n", 0x0a4d002cu, "xa", mac));
}

static void test_arp_no_trailing_newline(void **state)
{
    (void)state;
    uint8_t mac[6];
    assert_true(lookup(ARP_HEADER "10.77.0.2 0x1 0x2 8a:1f:22:03:9c:01 * xa", 0x0a4d0002u, "xa",
                       mac));
    assert_memory_equal(mac, mac_xa, 6);
    assert_true(lookup("10.77.0.2 0x1 0x2 8a:1f:22:03:9c:01 * xa", 0x0a4d0002u, "xa", mac));
}

static void test_arp_empty(void **state)
{
    (void)state;
    uint8_t mac[6];
    assert_false(lookup("", 0x0a4d0002u, "xa", mac));
    assert_false(lookup(ARP_HEADER, 0x0a4d0002u, "xa", mac));
    assert_false(lookup("\n\n\n", 0x0a4d0002u, "xa", mac));
}

/* A line that does not fit the parser's line buffer is skipped whole, even
 * when it would match, and the lines after it are still read. */
static void test_arp_long_line_skipped(void **state)
{
    (void)state;
    static const char entry[] = "10.77.0.2 0x1 0x2 8a:1f:22:03:9c:01 * xa";
    char text[1024];
    size_t pad = 300 - strlen(entry);
    memcpy(text, entry, strlen(entry));
    memset(text + strlen(entry), ' ', pad);
    strcpy(text + 300, "\n10.77.0.4 0x1 0x2 02:00:00:00:00:04 * xa\n");
    uint8_t mac[6];
    assert_false(lookup(text, 0x0a4d0002u, "xa", mac));
    assert_true(lookup(text, 0x0a4d0004u, "xa", mac));
    text[300] = '\0'; /* the long line, last and unterminated */
    assert_false(lookup(text, 0x0a4d0002u, "xa", mac));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_build_parse_round_trip),
        cmocka_unit_test(test_frame_icrc_valid_on_wire),
        cmocka_unit_test(test_frame_build_refuses_small_cap),
        cmocka_unit_test(test_frame_build_refuses_past_64k),
        cmocka_unit_test(test_frame_parse_truncated),
        cmocka_unit_test(test_frame_parse_not_ip),
        cmocka_unit_test(test_frame_parse_bad_ipv4),
        cmocka_unit_test(test_frame_parse_fragment),
        cmocka_unit_test(test_frame_parse_not_udp),
        cmocka_unit_test(test_frame_parse_bad_udp),
        cmocka_unit_test(test_frame_parse_ethernet_padding),
        cmocka_unit_test(test_frame_parse_ip_options),
        cmocka_unit_test(test_frame_parse_tolerates_variant_fields),
        cmocka_unit_test(test_frame_verdict_str),
        cmocka_unit_test(test_arp_finds_complete_entry),
        cmocka_unit_test(test_arp_refuses_other_device),
        cmocka_unit_test(test_arp_refuses_incomplete),
        cmocka_unit_test(test_arp_refuses_malformed_lines),
        cmocka_unit_test(test_arp_octet_does_not_wrap),
        cmocka_unit_test(test_arp_no_trailing_newline),
        cmocka_unit_test(test_arp_empty),
        cmocka_unit_test(test_arp_long_line_skipped),
    };
    return cmocka_run_group_tests_name("frame", tests, NULL, NULL);
}
