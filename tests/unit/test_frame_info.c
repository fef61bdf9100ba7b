/* Unit tests of the whole-frame view (op_frame_parse), the neighbour
 * questions a frame backend asks (op_neigh_solicit_build) and the answers
 * it gives (op_frame_control_reply). Expected bytes come from RFC 826,
 * RFC 4861/4291/2464 offsets written out here, not from the code under test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "offpath/wire.h"

#define ETH 14
static const uint8_t mac_a[6] = {0x02, 0xaa, 0, 0, 0, 1};
static const uint8_t mac_b[6] = {0x02, 0xbb, 0, 0, 0, 2};
static const uint8_t ip6_a[16] = {0xfd, 0, 2, 4, [15] = 1};
static const uint8_t ip6_b[16] = {0xfd, 0, 2, 4, [13] = 0x12, [14] = 0x34, [15] = 0x56};

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }

/* RFC 1071 over the IPv6 pseudo-header and the ICMPv6 message: 0xffff when
 * the checksum is right. */
static uint16_t icmp6_sum(const uint8_t *ip, size_t plen)
{
    uint32_t sum = 58 + (uint32_t)plen;
    for (size_t i = 8; i < 40; i += 2)
        sum += get16(ip + i);
    for (size_t i = 0; i < plen; i += 2)
        sum += (uint32_t)ip[40 + i] << 8 | (i + 1 < plen ? ip[40 + i + 1] : 0);
    while (sum > 0xffff)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)sum;
}

static void test_arp_request_then_reply(void **state)
{
    (void)state;
    uint8_t f[128];
    struct op_addr a = op_addr_ipv4(0x0a4d0001u), b = op_addr_ipv4(0x0a4d0002u);
    assert_int_equal(op_neigh_solicit_build(f, 41, &a, mac_a, &b), 0); /* cap too small */
    size_t n = op_neigh_solicit_build(f, sizeof f, &a, mac_a, &b);
    assert_int_equal(n, 42);
    static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, zero[6] = {0};
    assert_memory_equal(f, bcast, 6);
    assert_memory_equal(f + 6, mac_a, 6);
    assert_int_equal(get16(f + 12), 0x0806);
    assert_int_equal(get16(f + ETH), 1);          /* htype Ethernet */
    assert_int_equal(get16(f + ETH + 2), 0x0800); /* ptype IPv4 */
    assert_int_equal(f[ETH + 4], 6);
    assert_int_equal(f[ETH + 5], 4);
    assert_int_equal(get16(f + ETH + 6), 1); /* request */
    assert_memory_equal(f + ETH + 8, mac_a, 6);
    assert_int_equal(get32(f + ETH + 14), a.v4);
    assert_memory_equal(f + ETH + 18, zero, 6);
    assert_int_equal(get32(f + ETH + 24), b.v4);

    struct op_frame_info info;
    assert_int_equal(op_frame_parse(f, n, &info), OP_FRAME_NOT_IP);
    assert_int_equal(info.kind, OP_FRAME_KIND_ARP);
    assert_int_equal(info.arp_op, 1);
    assert_int_equal(info.flow.src.v4, a.v4);
    assert_int_equal(info.flow.dst.v4, b.v4);
    assert_memory_equal(info.src_mac, mac_a, 6);

    /* not for a: untouched; for b: the reply, to a */
    assert_int_equal(op_frame_control_reply(f, n, sizeof f, &a, mac_a), 0);
    assert_int_equal(get16(f + ETH + 6), 1);
    assert_int_equal(op_frame_control_reply(f, n, sizeof f, &b, mac_b), 42);
    assert_int_equal(op_frame_parse(f, n, &info), OP_FRAME_NOT_IP);
    assert_int_equal(info.arp_op, 2);
    assert_int_equal(info.flow.src.v4, b.v4);
    assert_int_equal(info.flow.dst.v4, a.v4);
    assert_memory_equal(info.dst_mac, mac_a, 6);
    assert_memory_equal(info.src_mac, mac_b, 6);
    assert_memory_equal(f + ETH + 8, mac_b, 6);
    assert_memory_equal(f + ETH + 18, mac_a, 6);
}

static void test_ndp_solicit_then_advert(void **state)
{
    (void)state;
    uint8_t f[128];
    struct op_addr a = op_addr_ipv6(ip6_a), b = op_addr_ipv6(ip6_b);
    assert_int_equal(op_neigh_solicit_build(f, OP_NEIGH_SOLICIT_MAX - 1, &a, mac_a, &b), 0);
    size_t n = op_neigh_solicit_build(f, sizeof f, &a, mac_a, &b);
    assert_int_equal(n, OP_NEIGH_SOLICIT_MAX);
    static const uint8_t group_mac[6] = {0x33, 0x33, 0xff, 0x12, 0x34, 0x56};
    static const uint8_t group[16] = {0xff, 0x02, [11] = 1, 0xff, 0x12, 0x34, 0x56};
    const uint8_t *ip = f + ETH, *ns = ip + 40;
    assert_memory_equal(f, group_mac, 6);
    assert_memory_equal(f + 6, mac_a, 6);
    assert_int_equal(get16(f + 12), 0x86dd);
    assert_int_equal(ip[0] >> 4, 6);
    assert_int_equal(get16(ip + 4), 32);
    assert_int_equal(ip[6], 58);
    assert_int_equal(ip[7], 255);
    assert_memory_equal(ip + 8, ip6_a, 16);
    assert_memory_equal(ip + 24, group, 16);
    assert_int_equal(ns[0], 135);
    assert_int_equal(ns[1], 0);
    assert_int_equal(icmp6_sum(ip, 32), 0xffff);
    assert_memory_equal(ns + 8, ip6_b, 16);
    assert_int_equal(ns[24], 1); /* source link-layer address */
    assert_int_equal(ns[25], 1);
    assert_memory_equal(ns + 26, mac_a, 6);

    struct op_frame_info info;
    assert_int_equal(op_frame_parse(f, n, &info), OP_FRAME_NOT_UDP);
    assert_int_equal(info.kind, OP_FRAME_KIND_IPV6);
    assert_int_equal(info.ip_proto, 58);
    assert_int_equal(info.ttl, 255);
    assert_int_equal(info.l4_off, ETH + 40);
    assert_memory_equal(info.flow.src.v6, ip6_a, 16);
    assert_memory_equal(info.flow.dst.v6, group, 16);

    assert_int_equal(op_frame_control_reply(f, n, sizeof f, &a, mac_a), 0); /* asks for b */
    size_t r = op_frame_control_reply(f, n, sizeof f, &b, mac_b);
    assert_int_equal(r, ETH + 40 + 32);
    assert_int_equal(ns[0], 136); /* the solicited advertisement, to a */
    assert_memory_equal(f, mac_a, 6);
    assert_memory_equal(ip + 8, ip6_b, 16);
    assert_memory_equal(ip + 24, ip6_a, 16);
    assert_int_equal(icmp6_sum(ip, 32), 0xffff);
    assert_memory_equal(ns + 26, mac_b, 6);
}

static void test_solicit_refuses_mixed_families(void **state)
{
    (void)state;
    uint8_t f[128];
    struct op_addr v4 = op_addr_ipv4(0x0a000001u), v6 = op_addr_ipv6(ip6_a);
    assert_int_equal(op_neigh_solicit_build(f, sizeof f, &v4, mac_a, &v6), 0);
    assert_int_equal(op_neigh_solicit_build(f, sizeof f, &v6, mac_a, &v4), 0);
}

static void test_parse_udp_both_families(void **state)
{
    (void)state;
    uint8_t f[256];
    struct op_frame_l2 l2 = {.tos = 0};
    memcpy(l2.src_mac, mac_a, 6);
    memcpy(l2.dst_mac, mac_b, 6);
    struct op_flow flows[2] = {
        {.src = op_addr_ipv4(0x0a000001u), .dst = op_addr_ipv4(0x0a000002u), 1234, 4791},
        {.src = op_addr_ipv6(ip6_a), .dst = op_addr_ipv6(ip6_b), 1234, 4791},
    };
    for (int i = 0; i < 2; i++) {
        size_t n = op_udp_frame_build(f, sizeof f, &flows[i], &l2, 100);
        struct op_frame_info info;
        assert_int_equal(op_frame_parse(f, n, &info), OP_FRAME_OK);
        assert_int_equal(info.kind, i == 0 ? OP_FRAME_KIND_IPV4 : OP_FRAME_KIND_IPV6);
        assert_int_equal(info.ip_proto, 17);
        assert_int_equal(info.ttl, 64);
        assert_true(op_flow_eq(&info.flow, &flows[i]));
        assert_int_equal(info.payload_off, op_udp_frame_hdr_len(flows[i].dst.family));
        assert_int_equal(info.payload_len, 100);
        assert_int_equal(info.l4_off, info.payload_off - 8);
        assert_memory_equal(info.dst_mac, mac_b, 6);
        assert_memory_equal(info.src_mac, mac_a, 6);
    }
}

/* Frames that are not UDP for us still say what they are, as far as their
 * bytes go; nothing past len is read (ASan would see it). */
static void test_parse_partial_frames(void **state)
{
    (void)state;
    uint8_t f[256];
    struct op_flow fl = {.src = op_addr_ipv4(0x0a000001u), .dst = op_addr_ipv4(0x0a000002u),
                         1, 2};
    struct op_frame_l2 l2 = {.tos = 0};
    size_t n = op_udp_frame_build(f, sizeof f, &fl, &l2, 20);
    struct op_frame_info info;
    f[ETH + 9] = 1; /* ICMP now (the checksum no longer matters to the view) */
    assert_int_equal(op_frame_parse(f, n, &info), OP_FRAME_BAD_IP);
    assert_int_equal(info.kind, OP_FRAME_KIND_IPV4);
    assert_int_equal(info.ip_proto, 1);
    assert_int_equal(info.flow.dst.v4, 0x0a000002u);
    assert_int_equal(info.flow.dst_port, 0);
    for (size_t len = 0; len < ETH + 20; len++) {
        uint8_t *copy = test_malloc(len + 1);
        memcpy(copy, f, len);
        assert_int_not_equal(op_frame_parse(copy, len, &info), OP_FRAME_OK);
        assert_int_equal(info.kind, OP_FRAME_KIND_OTHER);
        assert_int_equal(info.ethertype, len >= ETH ? 0x0800 : 0);
        test_free(copy);
    }
    f[ETH] = 0x4f; /* 60 bytes of header in a 48-byte packet */
    assert_int_not_equal(op_frame_parse(f, n, &info), OP_FRAME_OK);
    assert_int_equal(info.kind, OP_FRAME_KIND_OTHER);
    f[12] = 0x81, f[13] = 0x00; /* a VLAN tag */
    assert_int_equal(op_frame_parse(f, n, &info), OP_FRAME_NOT_IP);
    assert_int_equal(info.kind, OP_FRAME_KIND_OTHER);
    assert_int_equal(info.ethertype, 0x8100);
    f[12] = 0x08, f[13] = 0x06; /* ARP too short for its body */
    assert_int_equal(op_frame_parse(f, ETH + 27, &info), OP_FRAME_NOT_IP);
    assert_int_equal(info.kind, OP_FRAME_KIND_OTHER);
}

/* RFC 1071 over an IPv4 header: 0xffff when its checksum is right. */
static uint16_t ipv4_sum(const uint8_t *ip)
{
    uint32_t sum = 0;
    for (size_t i = 0; i < 20; i += 2)
        sum += get16(ip + i);
    while (sum > 0xffff)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)sum;
}

/* Every TTL a router forwards, over headers of many contents: the header
 * checksum stays right (the incremental update against a full sum), the
 * TTL one less, the MACs the hop's, nothing else changed; TTL 1 and 0,
 * ARP, and a short frame are refused untouched. */
static void test_route_hop(void **state)
{
    (void)state;
    uint8_t f[128], before[128];
    struct op_frame_l2 l2 = {.tos = 0x6a};
    uint32_t seed = 7;
    for (unsigned ttl = 0; ttl < 256; ttl++) {
        seed = seed * 1103515245u + 12345u;
        struct op_flow fl = {.src = op_addr_ipv4(seed), .dst = op_addr_ipv4(seed ^ 0x5a5a5a5au),
                             .src_port = (uint16_t)seed, .dst_port = 4791};
        size_t n = op_udp_frame_build(f, sizeof f, &fl, &l2, 20 + ttl % 40);
        f[ETH + 8] = (uint8_t)ttl; /* then the checksum made right again */
        f[ETH + 10] = f[ETH + 11] = 0;
        uint16_t c = (uint16_t)~ipv4_sum(f + ETH);
        f[ETH + 10] = (uint8_t)(c >> 8), f[ETH + 11] = (uint8_t)c;
        struct op_frame_info info;
        (void)op_frame_parse(f, n, &info);
        memcpy(before, f, n);
        bool ok = op_frame_route(f, n, &info, mac_b, mac_a);
        if (ttl <= 1) {
            assert_false(ok);
            assert_memory_equal(f, before, n);
            continue;
        }
        assert_true(ok);
        assert_int_equal(f[ETH + 8], ttl - 1);
        assert_int_equal(ipv4_sum(f + ETH), 0xffff);
        assert_memory_equal(f, mac_a, 6);
        assert_memory_equal(f + 6, mac_b, 6);
        assert_memory_equal(f + ETH + 12, before + ETH + 12, n - ETH - 12);
        assert_int_equal(op_frame_parse(f, n, &info), OP_FRAME_OK);
    }
    struct op_flow fl6 = {.src = op_addr_ipv6(ip6_a), .dst = op_addr_ipv6(ip6_b), 1, 2};
    size_t n = op_udp_frame_build(f, sizeof f, &fl6, &l2, 10);
    struct op_frame_info info;
    (void)op_frame_parse(f, n, &info);
    assert_true(op_frame_route(f, n, &info, mac_b, mac_a));
    assert_int_equal(f[ETH + 7], 63);
    assert_int_equal(op_frame_parse(f, n, &info), OP_FRAME_OK); /* the UDP checksum is not the hop's */
    struct op_addr a = op_addr_ipv4(1), b = op_addr_ipv4(2);
    n = op_neigh_solicit_build(f, sizeof f, &a, mac_a, &b);
    (void)op_frame_parse(f, n, &info);
    memcpy(before, f, n);
    assert_false(op_frame_route(f, n, &info, mac_b, mac_a));
    assert_memory_equal(f, before, n);
}

/* CE marking: every TOS's ECN field over IPv4 headers of many contents (the
 * checksum stays right, the DSCP kept, only ECT becomes CE, CE stays CE);
 * IPv6's traffic class the same; ARP, not-ECT and short frames untouched. */
static void test_mark_ce(void **state)
{
    (void)state;
    uint8_t f[128], before[128];
    uint32_t seed = 11;
    for (unsigned tos = 0; tos < 256; tos++) {
        seed = seed * 1103515245u + 12345u;
        struct op_frame_l2 l2 = {.tos = (uint8_t)tos};
        struct op_flow fl = {.src = op_addr_ipv4(seed), .dst = op_addr_ipv4(~seed),
                             .src_port = (uint16_t)seed, .dst_port = 4791};
        size_t n = op_udp_frame_build(f, sizeof f, &fl, &l2, 20 + tos % 40);
        memcpy(before, f, n);
        struct op_frame_info info;
        (void)op_frame_parse(f, n, &info);
        assert_int_equal(info.ecn, tos & 3);
        bool marked = op_frame_mark_ce(f, n);
        assert_int_equal(marked, (tos & 3) != OP_ECN_NOT_ECT);
        assert_int_equal(f[ETH + 1], marked ? (tos | 3) : tos);
        assert_int_equal(ipv4_sum(f + ETH), 0xffff);
        assert_memory_equal(f + ETH + 12, before + ETH + 12, n - ETH - 12);
        assert_int_equal(op_frame_parse(f, n, &info), OP_FRAME_OK);
        assert_int_equal(info.ecn, marked ? OP_ECN_CE : OP_ECN_NOT_ECT);
        assert_false(op_frame_mark_ce(f, ETH + 19)); /* no whole header */
    }
    struct op_flow fl6 = {.src = op_addr_ipv6(ip6_a), .dst = op_addr_ipv6(ip6_b), 1, 2};
    struct op_frame_l2 l2 = {.tos = 0xb9}; /* DSCP 46, ECT(1) */
    size_t n = op_udp_frame_build(f, sizeof f, &fl6, &l2, 10);
    struct op_frame_info info;
    assert_int_equal(op_frame_parse(f, n, &info), OP_FRAME_OK);
    assert_int_equal(info.ecn, OP_ECN_ECT1);
    assert_true(op_frame_mark_ce(f, n));
    assert_int_equal(op_frame_parse(f, n, &info), OP_FRAME_OK); /* the class is not in the UDP sum */
    assert_int_equal(info.ecn, OP_ECN_CE);
    assert_int_equal((f[ETH] & 0xf) << 4 | f[ETH + 1] >> 4, 0xbb);
    l2.tos = 0xb8; /* not ECT */
    n = op_udp_frame_build(f, sizeof f, &fl6, &l2, 10);
    assert_false(op_frame_mark_ce(f, n));
    struct op_addr a = op_addr_ipv4(1), b = op_addr_ipv4(2);
    n = op_neigh_solicit_build(f, sizeof f, &a, mac_a, &b);
    memcpy(before, f, n);
    assert_false(op_frame_mark_ce(f, n));
    assert_memory_equal(f, before, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arp_request_then_reply),
        cmocka_unit_test(test_ndp_solicit_then_advert),
        cmocka_unit_test(test_solicit_refuses_mixed_families),
        cmocka_unit_test(test_parse_udp_both_families),
        cmocka_unit_test(test_parse_partial_frames),
        cmocka_unit_test(test_route_hop),
        cmocka_unit_test(test_mark_ce),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
