/* Unit tests of the wire module: RoCEv2 headers, CRC-32 and ICRC (with the
 * scapy test vectors), reduction-type helpers, INC header, control payload and
 * whole INC packets, including every malformed case docs/wire.md lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "offpath/wire.h"

/* White-box: the two CRC-32 engines behind op_crc32. */
#include "../../src/wire/crc32_internal.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- CRC-32 ---------------------------------------------------------- */

/* Bit-at-a-time reference, independent of the tables. */
static uint32_t crc32_ref(uint32_t crc, const uint8_t *p, size_t len)
{
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void test_crc32_check_value(void **state)
{
    (void)state;
    assert_int_equal(op_crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(op_crc32(0, "", 0), 0);
    assert_int_equal(op_crc32(0x12345678u, NULL, 0), 0x12345678u);
    /* Chained calls equal one call. */
    uint32_t c = op_crc32(0, "1234", 4);
    assert_int_equal(op_crc32(c, "56789", 5), 0xCBF43926u);
}

static uint8_t crc_buf[4096 + 64];

static void fill_crc_buf(void)
{
    for (size_t i = 0; i < sizeof crc_buf; i++)
        crc_buf[i] = (uint8_t)(i * 131u + 7u + (i >> 8));
}

static void test_crc32_matches_reference(void **state)
{
    (void)state;
    fill_crc_buf();
    for (size_t off = 0; off < 16; off += 3)
        for (size_t len = 0; len <= 1100; len++)
            assert_int_equal(op_crc32(0, crc_buf + off, len), crc32_ref(0, crc_buf + off, len));
    assert_int_equal(op_crc32(0, crc_buf + 5, 4096), crc32_ref(0, crc_buf + 5, 4096));
    uint32_t part = op_crc32(0, crc_buf + 1, 333);
    assert_int_equal(op_crc32(part, crc_buf + 334, 500), crc32_ref(0, crc_buf + 1, 833));
}

/* Each engine on its own, so both are checked whichever op_crc32 picks here. */
static void test_crc32_engines(void **state)
{
    (void)state;
    fill_crc_buf();
    for (size_t off = 0; off < 16; off++) {
        for (size_t len = 0; len <= 2048; len += 1 + (len > 200) * 15) {
            uint32_t want = ~crc32_ref(0x5a5a5a5au, crc_buf + off, len);
            assert_int_equal(wire_crc32_slice8(~0x5a5a5a5au, crc_buf + off, len), want);
            if (len >= WIRE_CRC32_CLMUL_MIN && len % 16 == 0 && wire_crc32_has_clmul())
                assert_int_equal(wire_crc32_clmul(~0x5a5a5a5au, crc_buf + off, len), want);
        }
    }
    for (size_t off = 0; off < 16 && wire_crc32_has_vclmul(); off += 5)
        for (size_t len = WIRE_CRC32_VCLMUL_MIN; len <= 4096; len += 16)
            assert_int_equal(wire_crc32_vclmul(~0x5a5a5a5au, crc_buf + off, len),
                             ~crc32_ref(0x5a5a5a5au, crc_buf + off, len));
    /* 12 bytes then whole blocks: every engine size (short, 4 lanes, 512-bit) */
    for (size_t off = 0; off < 16 && wire_crc32_has_clmul(); off += 7)
        for (size_t len = 16; len <= 4112; len += 16 + (len > 300) * 240)
            for (uint32_t reg = 0; reg < 3; reg++) {
                uint32_t r0 = reg * 0x9e3779b9u;
                assert_int_equal(wire_crc32_clmul_lead12(r0, crc_buf + off, crc_buf + off + 12,
                                                         len),
                                 ~crc32_ref(~r0, crc_buf + off, 12 + len));
            }
    if (!wire_crc32_has_clmul())
        print_message("no PCLMULQDQ here: only the slicing-by-8 engine was tested\n");
    else if (!wire_crc32_has_vclmul())
        print_message("no AVX-512 VPCLMULQDQ here: its engine was not tested\n");
}

/* ---- RoCEv2 transport headers --------------------------------------- */

static void test_bth_bytes_and_round_trip(void **state)
{
    (void)state;
    const struct op_bth h = {
        .opcode = OP_RC_WRITE_ONLY, .se = true, .migreq = false, .padcnt = 3, .tver = 0x5,
        .pkey = 0xabcd, .fecn = true, .becn = false, .dest_qp = 0x123456, .ackreq = true,
        .psn = 0xfedcba,
    };
    const uint8_t want[OP_BTH_LEN] = {0x0a, 0xb5, 0xab, 0xcd, 0x80, 0x12,
                                      0x34, 0x56, 0x80, 0xfe, 0xdc, 0xba};
    uint8_t b[OP_BTH_LEN];
    op_bth_encode(&h, b);
    assert_memory_equal(b, want, sizeof want);
    struct op_bth d;
    assert_int_equal(op_bth_decode(b, sizeof b, &d), OP_OK);
    assert_int_equal(d.opcode, h.opcode);
    assert_true(d.se && !d.migreq && d.fecn && !d.becn && d.ackreq);
    assert_int_equal(d.padcnt, 3);
    assert_int_equal(d.tver, 5);
    assert_int_equal(d.pkey, 0xabcd);
    assert_int_equal(d.dest_qp, 0x123456);
    assert_int_equal(d.psn, 0xfedcba);
}

static void test_bth_masks_and_flags(void **state)
{
    (void)state;
    const struct op_bth h = {
        .opcode = 0x81, .migreq = true, .becn = true, .padcnt = 0xff, .tver = 0xff,
        .dest_qp = 0xff00000du, .psn = 0xaa000001u,
    };
    uint8_t b[OP_BTH_LEN];
    op_bth_encode(&h, b);
    assert_int_equal(b[1], 0x40 | 0x30 | 0x0f);
    assert_int_equal(b[4], 0x40);
    struct op_bth d;
    assert_int_equal(op_bth_decode(b, sizeof b, &d), OP_OK);
    assert_true(d.migreq && d.becn && !d.se && !d.fecn && !d.ackreq);
    assert_int_equal(d.dest_qp, 0x00000d);
    assert_int_equal(d.psn, 0x000001);
    /* Reserved bits are ignored on decode. */
    b[4] |= 0x3f;
    b[8] |= 0x7f;
    assert_int_equal(op_bth_decode(b, sizeof b, &d), OP_OK);
    assert_false(d.ackreq);
}

static void test_bth_truncated(void **state)
{
    (void)state;
    uint8_t b[OP_BTH_LEN] = {0x64};
    struct op_bth d = {.opcode = 0x42};
    for (size_t len = 0; len < OP_BTH_LEN; len++)
        assert_int_equal(op_bth_decode(b, len, &d), OP_ERR_TRUNCATED);
    assert_int_equal(d.opcode, 0x42); /* untouched on failure */
    assert_int_equal(op_bth_decode(NULL, 0, &d), OP_ERR_TRUNCATED);
}

static void test_reth(void **state)
{
    (void)state;
    const struct op_reth h = {.va = 0x0102030405060708ull, .rkey = 0x0a0b0c0d, .dma_len = 4096};
    const uint8_t want[OP_RETH_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0x10, 0};
    uint8_t b[OP_RETH_LEN];
    op_reth_encode(&h, b);
    assert_memory_equal(b, want, sizeof want);
    struct op_reth d;
    assert_int_equal(op_reth_decode(b, sizeof b, &d), OP_OK);
    assert_memory_equal(&d, &h, sizeof h);
    for (size_t len = 0; len < OP_RETH_LEN; len++)
        assert_int_equal(op_reth_decode(b, len, &d), OP_ERR_TRUNCATED);
}

static void test_aeth(void **state)
{
    (void)state;
    const struct op_aeth h = {.syndrome = 0x60, .msn = 0x1abcdef};
    uint8_t b[OP_AETH_LEN];
    op_aeth_encode(&h, b);
    const uint8_t want[OP_AETH_LEN] = {0x60, 0xab, 0xcd, 0xef};
    assert_memory_equal(b, want, sizeof want);
    struct op_aeth d;
    assert_int_equal(op_aeth_decode(b, sizeof b, &d), OP_OK);
    assert_int_equal(d.syndrome, 0x60);
    assert_int_equal(d.msn, 0xabcdef);
    for (size_t len = 0; len < OP_AETH_LEN; len++)
        assert_int_equal(op_aeth_decode(b, len, &d), OP_ERR_TRUNCATED);
}

static void test_deth(void **state)
{
    (void)state;
    const struct op_deth h = {.qkey = 0x80010000u, .src_qp = 0xff123456u};
    uint8_t b[OP_DETH_LEN];
    op_deth_encode(&h, b);
    const uint8_t want[OP_DETH_LEN] = {0x80, 0x01, 0, 0, 0, 0x12, 0x34, 0x56};
    assert_memory_equal(b, want, sizeof want);
    struct op_deth d;
    b[4] = 0x99; /* reserved: ignored */
    assert_int_equal(op_deth_decode(b, sizeof b, &d), OP_OK);
    assert_int_equal(d.qkey, 0x80010000u);
    assert_int_equal(d.src_qp, 0x123456);
    for (size_t len = 0; len < OP_DETH_LEN; len++)
        assert_int_equal(op_deth_decode(b, len, &d), OP_ERR_TRUNCATED);
}

static void test_immdt(void **state)
{
    (void)state;
    uint8_t b[OP_IMMDT_LEN];
    op_immdt_encode(0xdeadbeefu, b);
    const uint8_t want[OP_IMMDT_LEN] = {0xde, 0xad, 0xbe, 0xef};
    assert_memory_equal(b, want, sizeof want);
    uint32_t v = 7;
    assert_int_equal(op_immdt_decode(b, sizeof b, &v), OP_OK);
    assert_int_equal(v, 0xdeadbeefu);
    v = 7;
    for (size_t len = 0; len < OP_IMMDT_LEN; len++)
        assert_int_equal(op_immdt_decode(b, len, &v), OP_ERR_TRUNCATED);
    assert_int_equal(v, 7);
}

/* ---- ICRC ------------------------------------------------------------ */

/* scapy test/contrib/roce.uts "RoCE layer": a UC_SEND_ONLY packet from the
 * IPv4 header on (IP checksum 0xb4d5 and UDP checksum 0xaca2 as scapy
 * asserts, which confirms these bytes), ICRC 0x78f353f3 as scapy reads it. */
static const uint8_t uc_frame[] = {
    0x45, 0x01, 0x00, 0x40, 0x04, 0x78, 0x40, 0x00, 0x40, 0x11, 0xb4, 0xd5, 0xc0, 0xa8,
    0x00, 0x07, 0xc0, 0xa8, 0x00, 0x07, /* IPv4 */
    0xc0, 0x00, 0x12, 0xb7, 0x00, 0x2c, 0xac, 0xa2, /* UDP 49152 -> 4791 */
    0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10, /* BTH */
    0x46, 0x30, 0x81, 0x8b, 0xe2, 0x89, 0x35, 0xd9, 0x0e, 0x9a, 0x95, 0x50, 0x54, 0x01,
    0xbe, 0x88, 0x5e, 0x50, 0x00, 0x00, /* payload + pad */
    0x78, 0xf3, 0x53, 0xf3, /* ICRC */
};

/* scapy test/contrib/roce.uts "RoCE CNP captured on ConnectX-4 Lx", from the
 * IPv4 header on (the 14-byte Ethernet header removed). */
static const uint8_t cnp_frame[] = {
    0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00,
    0x11, 0x01, 0x0a, 0x00, 0x12, 0x01, /* IPv4 */
    0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, /* UDP */
    0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, /* BTH */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, /* CNP padding */
    0x82, 0xfd, 0x00, 0x2a, /* ICRC */
};

static void le32_put(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void assert_frame_icrc(const uint8_t *frame, size_t len)
{
    uint32_t icrc = 0;
    assert_int_equal(op_icrc_ip_frame(frame, len, &icrc), OP_OK);
    uint8_t wire[4];
    le32_put(wire, icrc);
    assert_memory_equal(wire, frame + len - 4, 4);
}

static void test_icrc_scapy_vectors(void **state)
{
    (void)state;
    uint32_t icrc = 0;
    assert_int_equal(op_icrc_ip_frame(uc_frame, sizeof uc_frame, &icrc), OP_OK);
    assert_int_equal(icrc, 0xf353f378u); /* on the wire: 78 f3 53 f3 */
    assert_frame_icrc(uc_frame, sizeof uc_frame);
    assert_frame_icrc(cnp_frame, sizeof cnp_frame);
}

static void test_icrc_frame_variant_fields(void **state)
{
    (void)state;
    uint8_t f[sizeof uc_frame];
    memcpy(f, uc_frame, sizeof f);
    f[1] = 0x03;   /* TOS/ECN: a switch marks congestion */
    f[8] = 0x3f;   /* TTL */
    f[10] ^= 0x55; /* checksum */
    f[26] = 0;     /* UDP checksum */
    f[27] = 0;
    f[20 + 8 + 4] = 0xc0; /* BTH FECN/BECN */
    assert_frame_icrc(f, sizeof f);
    /* Ethernet padding after the IPv4 total length is not part of the packet. */
    uint8_t padded[sizeof uc_frame + 6] = {0};
    memcpy(padded, uc_frame, sizeof uc_frame);
    uint32_t icrc = 0;
    assert_int_equal(op_icrc_ip_frame(padded, sizeof padded, &icrc), OP_OK);
    assert_int_equal(icrc, 0xf353f378u);
    /* Any invariant byte changes the ICRC. */
    size_t hashed = 0;
    for (size_t i = 0; i < sizeof uc_frame - 4; i++) {
        if (i == 1 || i == 8 || i == 10 || i == 11 || i == 26 || i == 27 || i == 32)
            continue;
        memcpy(f, uc_frame, sizeof f);
        f[i] ^= 0x01;
        if (op_icrc_ip_frame(f, sizeof f, &icrc) != OP_OK)
            continue; /* version, lengths, protocol, fragment bits: rejected */
        assert_int_not_equal(icrc, 0xf353f378u);
        hashed++;
    }
    assert_true(hashed >= sizeof uc_frame - 4 - 7 - 9);
}

static void test_icrc_frame_rejects(void **state)
{
    (void)state;
    uint8_t f[sizeof uc_frame];
    uint32_t icrc = 0x1234;
    for (size_t len = 0; len < sizeof uc_frame; len++) {
        op_status_t st = op_icrc_ip_frame(uc_frame, len, &icrc);
        assert_true(st == OP_ERR_TRUNCATED || st == OP_ERR_MALFORMED);
    }
    assert_int_equal(icrc, 0x1234);
    const struct {
        size_t at;
        uint8_t val;
    } bad[] = {
        {0, 0x65},  /* IPv6 version nibble */
        {0, 0x44},  /* IHL below 5 */
        {0, 0x4f},  /* IHL past the end */
        {9, 6},     /* TCP */
        {6, 0x20},  /* more fragments */
        {7, 0x01},  /* fragment offset */
        {3, 0x30},  /* total length too short for BTH + ICRC */
        {25, 0x2d}, /* UDP length disagrees */
    };
    for (size_t i = 0; i < COUNT_OF(bad); i++) {
        memcpy(f, uc_frame, sizeof f);
        f[bad[i].at] = bad[i].val;
        assert_int_not_equal(op_icrc_ip_frame(f, sizeof f, &icrc), OP_OK);
    }
    memcpy(f, uc_frame, sizeof f);
    f[3] = 0x41; /* total length past the buffer */
    assert_int_equal(op_icrc_ip_frame(f, sizeof f, &icrc), OP_ERR_TRUNCATED);
}

/* An IPv4 header with options is hashed whole. */
static void test_icrc_frame_ip_options(void **state)
{
    (void)state;
    uint8_t f[sizeof uc_frame + 4];
    memcpy(f, uc_frame, 20);
    memcpy(f + 24, uc_frame + 20, sizeof uc_frame - 20);
    f[0] = 0x46;
    f[3] = 0x44;
    memset(f + 20, 0x01, 4); /* four NOP options */
    uint32_t a = 0, b = 0;
    assert_int_equal(op_icrc_ip_frame(f, sizeof f, &a), OP_OK);
    f[21] = 0x00;
    assert_int_equal(op_icrc_ip_frame(f, sizeof f, &b), OP_OK);
    assert_int_not_equal(a, b);
}

static const struct op_flow test_flow = {
    .src.v4 = 0x7f000002u, .dst.v4 = 0x7f000064u, .src_port = 0xc123, .dst_port = 4791,
};

/* op_icrc_flow equals the ICRC of the frame Linux would send for that flow
 * (Identification 0, DF, any TOS and TTL). */
static void test_icrc_flow_matches_frame(void **state)
{
    (void)state;
    uint8_t roce[OP_BTH_LEN + 24];
    for (size_t i = 0; i < sizeof roce; i++)
        roce[i] = (uint8_t)(i * 7u + 1u);
    uint8_t f[20 + 8 + sizeof roce + 4] = {0x45, 0x00, 0x00, (uint8_t)sizeof f, 0, 0, 0x40, 0,
                                           64,   17,   0x12, 0x34, 127,  0,    0, 2,
                                           127,  0,    0,    100};
    const uint8_t udp[8] = {0xc1, 0x23, 0x12, 0xb7, 0, (uint8_t)(sizeof f - 20), 0, 0};
    memcpy(f + 20, udp, sizeof udp);
    memcpy(f + 28, roce, sizeof roce);
    uint32_t want = 0;
    assert_int_equal(op_icrc_ip_frame(f, sizeof f, &want), OP_OK);
    assert_int_equal(op_icrc_flow(&test_flow, roce, sizeof roce), want);
}

/* The memo (op_icrc_flow_memo, op_icrc_check_memo) gives the full
 * computation's results byte for byte: every length from empty (shorter
 * than a BTH) to past the inline tail, flows of both families changing
 * under it, lengths alternating (two slots) and a third one evicting, a
 * sealed packet accepted and every single-byte corruption outside the
 * masked BTH byte refused alike, short and NULL buffers refused; the
 * head of the first k bytes continued over the rest is the same ICRC. */
static void test_icrc_memo_matches_full(void **state)
{
    (void)state;
    uint8_t v6a[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    struct op_flow flows[4] = {test_flow, test_flow, test_flow};
    flows[1].src_port = 4791; /* one field off */
    flows[2].dst.v4 = 0x7f000065u;
    flows[3] = (struct op_flow){.src = op_addr_ipv6(v6a), .dst = op_addr_ipv6(v6a),
                                .src_port = 0xc000, .dst_port = 4791};
    uint8_t roce[OP_BTH_LEN + 200 + OP_ICRC_LEN];
    for (size_t i = 0; i < sizeof roce; i++)
        roce[i] = (uint8_t)(i * 13u + 5u);
    struct op_icrc_memo m;
    memset(&m, 0, sizeof m);
    for (size_t len = 0; len <= OP_BTH_LEN + 200; len++)
        for (int k = 0; k < 12; k++) {
            const struct op_flow *f = &flows[(len + (size_t)k / 3) % 4];
            size_t n = k % 3 == 0 ? len : k % 3 == 1 ? 28 : 16; /* a third length evicts */
            assert_int_equal(op_icrc_flow_memo(&m, f, roce, n), op_icrc_flow(f, roce, n));
        }
    /* the head (op_icrc_flow_memo_head) goes on to the same ICRC from any
     * point in the BTH past its masked byte, either family, any length */
    for (size_t len = OP_BTH_LEN; len <= OP_BTH_LEN + 200; len += 7)
        for (size_t k = 5; k <= OP_BTH_LEN; k++) { /* past the masked byte 4 */
            const struct op_flow *f = &flows[(len + k) % 4];
            uint32_t head = op_icrc_flow_memo_head(&m, f, roce, len, k);
            assert_int_equal(op_crc32(head, roce + k, len - k), op_icrc_flow(f, roce, len));
        }
    uint8_t pkt[OP_BTH_LEN + 16 + 4 + OP_ICRC_LEN];
    memcpy(pkt, roce, sizeof pkt);
    for (int fi = 0; fi < 4; fi++) {
        size_t n = op_icrc_seal(&flows[fi], pkt, sizeof pkt - OP_ICRC_LEN, sizeof pkt);
        assert_int_equal(n, sizeof pkt);
        assert_true(op_icrc_check_memo(&m, &flows[fi], pkt, n));
        assert_false(op_icrc_check_memo(&m, &flows[(fi + 1) % 4], pkt, n));
        for (size_t i = 0; i < n; i++)
            for (int bit = 0; bit < 8; bit += 7) {
                pkt[i] ^= (uint8_t)(1u << bit);
                bool full = op_icrc_check(&flows[fi], pkt, n);
                assert_int_equal(op_icrc_check_memo(&m, &flows[fi], pkt, n), full);
                assert_int_equal(full, i == 4); /* the BTH's masked byte alone */
                pkt[i] ^= (uint8_t)(1u << bit);
            }
    }
    for (size_t n = 0; n < OP_BTH_LEN + OP_ICRC_LEN; n++)
        assert_false(op_icrc_check_memo(&m, &flows[0], pkt, n));
    assert_false(op_icrc_check_memo(&m, &flows[0], NULL, sizeof pkt));
}

/* The masked message the ICRC covers, spelled out (IBTA A17.3.3): 8 ones,
 * IPv4 (ihl bytes) with TOS, TTL and checksum ones, UDP with checksum ones,
 * BTH with byte 4 ones, the rest. */
static size_t icrc_message(uint8_t *m, const uint8_t *ip, size_t ihl, size_t len)
{
    memset(m, 0xff, 8);
    memcpy(m + 8, ip, ihl + 8 + len);
    m[8 + 1] = m[8 + 8] = m[8 + 10] = m[8 + 11] = 0xff;
    m[8 + ihl + 6] = m[8 + ihl + 7] = 0xff;
    m[8 + ihl + 8 + 4] = 0xff;
    return 8 + ihl + 8 + len;
}

/* The agent's messages: big-endian bytes, round trips, and every wrong
 * type, length or field refused with the output untouched. */
static void test_agent_messages(void **state)
{
    (void)state;
    uint8_t b[OP_AGENT_PAIR_LEN + 1];
    const struct op_agent_welcome w = {.rank = 5, .clients = 8, .daemons = 2, .per_daemon = 4};
    assert_int_equal(op_agent_welcome_encode(&w, b), OP_AGENT_WELCOME_LEN);
    static const uint8_t want[OP_AGENT_WELCOME_LEN] = {'W', 0, 0, 0, 5, 0, 0, 0, 8,
                                                       0,   0, 0, 2, 0, 0, 0, 4};
    assert_memory_equal(b, want, sizeof want);
    struct op_agent_welcome got = {0}, before = {.rank = 99};
    assert_int_equal(op_agent_welcome_decode(b, OP_AGENT_WELCOME_LEN, &got), OP_OK);
    assert_memory_equal(&got, &w, sizeof w);
    got = before;
    assert_int_equal(op_agent_welcome_decode(b, OP_AGENT_WELCOME_LEN - 1, &got),
                     OP_ERR_TRUNCATED);
    assert_int_equal(op_agent_welcome_decode(b, OP_AGENT_WELCOME_LEN + 1, &got),
                     OP_ERR_MALFORMED);
    b[8] = 5; /* clients 5 < rank 5 + 1 and not daemons x per_daemon */
    assert_int_equal(op_agent_welcome_decode(b, OP_AGENT_WELCOME_LEN, &got), OP_ERR_MALFORMED);
    b[0] = 'S';
    assert_int_equal(op_agent_welcome_decode(b, OP_AGENT_WELCOME_LEN, &got), OP_ERR_MALFORMED);
    assert_int_equal(got.rank, 99);

    uint64_t id = 0;
    const uint8_t *data = NULL;
    assert_int_equal(op_agent_id_encode(OP_AGENT_MSG_VECTOR, 0x0102030405060708ull, b), 9);
    assert_int_equal(b[1], 1);
    assert_int_equal(b[8], 8);
    assert_int_equal(op_agent_id_decode(b, 9 + 4, OP_AGENT_MSG_VECTOR, 4, &id, &data), OP_OK);
    assert_true(id == 0x0102030405060708ull && data == b + 9);
    assert_int_equal(op_agent_id_decode(b, 9 + 4, OP_AGENT_MSG_VECTOR, 5, &id, &data),
                     OP_ERR_TRUNCATED);
    assert_int_equal(op_agent_id_decode(b, 9 + 4, OP_AGENT_MSG_VECTOR, 3, &id, &data),
                     OP_ERR_MALFORMED);
    assert_int_equal(op_agent_id_decode(b, 9 + 4, OP_AGENT_MSG_RESULT, 4, &id, &data),
                     OP_ERR_MALFORMED);

    char text[OP_AR_HANDSHAKE_MAX];
    uint32_t rank = 0;
    size_t n = op_agent_mesh_encode(7, "-s 4 -d int", b, sizeof b);
    assert_int_equal(n, 5 + 11);
    assert_int_equal(op_agent_mesh_decode(b, n, &rank, text), OP_OK);
    assert_true(rank == 7 && strcmp(text, "-s 4 -d int") == 0);
    assert_int_equal(op_agent_mesh_decode(b, 5, &rank, text), OP_ERR_TRUNCATED);
    b[7] = 0; /* a NUL inside the text */
    assert_int_equal(op_agent_mesh_decode(b, n, &rank, text), OP_ERR_MALFORMED);
    assert_int_equal(op_agent_mesh_encode(7, "-s 4", b, 8), 0);
    assert_int_equal(op_agent_mesh_encode(7, "", b, sizeof b), 0);

    struct op_agent_a2a_hello h = {.rank = 1, .ranks = 4, .workers = 2, .chunk = 64}, hg;
    assert_int_equal(op_agent_a2a_hello_encode(&h, b), OP_AGENT_A2A_HELLO_LEN);
    assert_int_equal(op_agent_a2a_hello_decode(b, OP_AGENT_A2A_HELLO_LEN, &hg), OP_OK);
    assert_true(hg.rank == 1 && hg.ranks == 4 && hg.workers == 2 && hg.chunk == 64);
    h.workers = OP_A2A_MAX_WORKERS + 1;
    op_agent_a2a_hello_encode(&h, b);
    assert_int_equal(op_agent_a2a_hello_decode(b, OP_AGENT_A2A_HELLO_LEN, &hg), OP_ERR_MALFORMED);

    struct op_agent_pair p = {.index = 3, .ep = {.ip = 0x7f000001u, .workers = 2,
                                                 .recv_addr = 1ull << 40, .chunk = 4096},
                              .qp = {.qpn = 0x11, .psn = 0x22}}, pg;
    p.ep.port[1] = 4791;
    p.ep.rkey[63] = 0xdeadbeefu;
    assert_int_equal(op_agent_pair_encode(&p, b), OP_AGENT_PAIR_LEN);
    assert_int_equal(op_agent_pair_decode(b, OP_AGENT_PAIR_LEN, &pg), OP_OK);
    assert_memory_equal(&pg, &p, sizeof p);
    assert_int_equal(op_agent_pair_decode(b, OP_AGENT_PAIR_LEN - 1, &pg), OP_ERR_TRUNCATED);
    b[12] = 0; /* workers 0 */
    assert_int_equal(op_agent_pair_decode(b, OP_AGENT_PAIR_LEN, &pg), OP_ERR_MALFORMED);
}

/* The channel's frame header: the length big-endian, the batch bit on top. */
static void test_chan_frame_hdr(void **state)
{
    (void)state;
    uint8_t b[4];
    op_chan_frame_hdr_encode((struct op_chan_frame_hdr){.len = 0x010203, .batch = true}, b);
    assert_memory_equal(b, ((const uint8_t[4]){0x80, 0x01, 0x02, 0x03}), 4);
    struct op_chan_frame_hdr h = {.len = 7};
    assert_int_equal(op_chan_frame_hdr_decode(b, 3, &h), OP_ERR_TRUNCATED);
    assert_int_equal(h.len, 7);
    assert_int_equal(op_chan_frame_hdr_decode(b, 4, &h), OP_OK);
    assert_true(h.batch && h.len == 0x010203);
    op_chan_frame_hdr_encode((struct op_chan_frame_hdr){.len = 300}, b);
    assert_int_equal(op_chan_frame_hdr_decode(b, 4, &h), OP_OK);
    assert_true(!h.batch && h.len == 300 && b[2] == 1 && b[3] == 44);
}

/* secure_channel's run header: its bytes, the round trip, and every
 * malformed form refused with the output untouched. */
static void test_sc_meta(void **state)
{
    (void)state;
    const struct op_sc_meta m = {.msg_size = 10000, .num_msgs = 0x0102030405ull};
    uint8_t b[OP_SC_META_LEN + 1];
    op_sc_meta_encode(&m, b);
    static const uint8_t want[OP_SC_META_LEN] = {'O', 'P', 'S', 'C', 0, 0, 0x27, 0x10,
                                                 0, 0, 0, 1, 2,   3,   4,   5};
    assert_memory_equal(b, want, sizeof want);
    struct op_sc_meta got = {0}, before = {.msg_size = 7, .num_msgs = 7};
    assert_int_equal(op_sc_meta_decode(b, OP_SC_META_LEN, &got), OP_OK);
    assert_int_equal(got.msg_size, 10000);
    assert_int_equal(got.num_msgs, 0x0102030405ull);
    for (size_t len = 0; len < OP_SC_META_LEN; len++) {
        got = before;
        assert_int_equal(op_sc_meta_decode(b, len, &got), OP_ERR_TRUNCATED);
        assert_int_equal(got.msg_size, 7);
    }
    b[OP_SC_META_LEN] = 0;
    assert_int_equal(op_sc_meta_decode(b, OP_SC_META_LEN + 1, &got), OP_ERR_MALFORMED);
    b[3] = 'D';
    got = before;
    assert_int_equal(op_sc_meta_decode(b, OP_SC_META_LEN, &got), OP_ERR_MALFORMED);
    assert_int_equal(got.num_msgs, 7);
    assert_int_equal(op_sc_meta_decode(NULL, 0, &got), OP_ERR_TRUNCATED);
}

/* One address type for both families: text both ways, equality by
 * family, the reversed flow; malformed text refused. */
static void test_addr(void **state)
{
    (void)state;
    struct op_addr a, b;
    char text[OP_ADDR_STRLEN];
    assert_true(op_addr_parse("10.0.0.1", &a));
    assert_int_equal(a.family, OP_AF_IPV4);
    assert_int_equal(a.v4, 0x0a000001u);
    assert_true(op_addr_format(&a, text, sizeof text));
    assert_string_equal(text, "10.0.0.1");
    assert_true(op_addr_parse("FD00:0:0::1", &b));
    assert_int_equal(b.family, OP_AF_IPV6);
    assert_int_equal(b.v6[0], 0xfd);
    assert_int_equal(b.v6[15], 1);
    assert_true(op_addr_format(&b, text, sizeof text));
    assert_string_equal(text, "fd00::1"); /* RFC 5952 */
    assert_false(op_addr_format(&b, text, 4));
    assert_string_equal(text, "");
    assert_false(op_addr_eq(&a, &b));
    struct op_addr v4_bytes = op_addr_ipv6((const uint8_t[16]){[0] = 1});
    struct op_addr v4 = op_addr_ipv4(1);
    assert_false(op_addr_eq(&v4_bytes, &v4)); /* same bytes, other family */
    assert_true(op_addr_eq(&a, &(struct op_addr){.v4 = 0x0a000001u}));
    assert_true(op_addr_is_any(&(struct op_addr){.family = OP_AF_IPV6}));
    assert_false(op_addr_is_any(&b));
    static const char *const bad[] = {"", "1.2.3", "256.1.1.1", "host", "fd00::1/64",
                                      " 10.0.0.1", "10.0.0.1:80", "fd00::1::2", "::ffff:"};
    for (size_t i = 0; i < COUNT_OF(bad); i++)
        assert_false(op_addr_parse(bad[i], &a));
    assert_false(op_addr_parse(NULL, &a));
    const struct op_flow f = {.src = b, .dst = op_addr_ipv6((const uint8_t[16]){[15] = 2}),
                              .src_port = 1, .dst_port = 2};
    struct op_flow r = op_flow_reverse(&f);
    assert_true(op_addr_eq(&r.dst, &b) && r.src_port == 2 && r.dst_port == 1);
    assert_false(op_flow_eq(&r, &f));
    struct op_flow rr = op_flow_reverse(&r);
    assert_true(op_flow_eq(&rr, &f));
}

/* ADDR:PORT and [ADDR6]:PORT both ways; everything else refused. */
static void test_endpoint(void **state)
{
    (void)state;
    struct op_endpoint e;
    char text[OP_ENDPOINT_STRLEN];
    assert_true(op_endpoint_parse("127.0.0.1:53", &e));
    assert_int_equal(e.addr.v4, 0x7f000001u);
    assert_int_equal(e.port, 53);
    assert_true(op_endpoint_format(&e, text, sizeof text));
    assert_string_equal(text, "127.0.0.1:53");
    assert_true(op_endpoint_parse("[fd00::5]:65535", &e));
    assert_true(op_addr_is_ipv6(&e.addr));
    assert_int_equal(e.port, 65535);
    assert_true(op_endpoint_format(&e, text, sizeof text));
    assert_string_equal(text, "[fd00::5]:65535");
    assert_false(op_endpoint_format(&e, text, 8));
    static const char *const bad[] = {
        "127.0.0.1",     "127.0.0.1:0",  "127.0.0.1:65536", "fd00::5:53",   "[fd00::5]",
        "[fd00::5]53",   "[10.0.0.1]:5", "[]:53",           ":53",          "host:53",
        "127.0.0.1:5x",  "[fd00::5:53",  "",                "1.2.3.4:-1",   "[fd00::5]:",
    };
    for (size_t i = 0; i < COUNT_OF(bad); i++)
        if (op_endpoint_parse(bad[i], &e))
            fail_msg("'%s' was taken", bad[i]);
    assert_false(op_endpoint_parse(NULL, &e));
}

/* RoCEv2 over IPv6 (IBTA A17.3.3, as Linux's rxe masks it): 8 ones, the
 * IPv6 header with traffic class, flow label and hop limit ones, UDP with
 * its checksum ones, BTH byte 4 ones, the rest; against the bitwise
 * reference over the message spelled out, for every length up to 200, and
 * the same ICRC read back from the frame op_udp_frame_build makes. */
static void test_icrc_ipv6(void **state)
{
    (void)state;
    static const uint8_t src[16] = {0xfd, 0, 0, 0, 0, 0, 0, 1, [15] = 0x11};
    static const uint8_t dst[16] = {0xfd, 0, 0, 0, 0, 0, 0, 1, [15] = 0x22};
    const struct op_flow flow = {.src = op_addr_ipv6(src), .dst = op_addr_ipv6(dst),
                                 .src_port = 0xc123, .dst_port = OP_ROCE_UDP_PORT};
    for (size_t len = OP_BTH_LEN; len <= 200; len++) {
        uint8_t roce[200 + 4], m[8 + 40 + 8 + 204], frame[62 + 204];
        for (size_t i = 0; i < len; i++)
            roce[i] = (uint8_t)(i * 13u + len);
        size_t ulen = 8 + len + 4;
        memset(m, 0xff, 8);
        const uint8_t ip[8] = {0x6f, 0xff, 0xff, 0xff, (uint8_t)(ulen >> 8), (uint8_t)ulen, 17,
                               0xff};
        memcpy(m + 8, ip, 8);
        memcpy(m + 16, src, 16);
        memcpy(m + 32, dst, 16);
        const uint8_t udp[8] = {0xc1, 0x23, 0x12, 0xb7, (uint8_t)(ulen >> 8), (uint8_t)ulen,
                                0xff, 0xff};
        memcpy(m + 48, udp, 8);
        memcpy(m + 56, roce, len);
        m[56 + 4] = 0xff;
        uint32_t want = crc32_ref(0, m, 56 + len);
        assert_int_equal(op_icrc_flow(&flow, roce, len), want);
        assert_int_equal(op_icrc_seal(&flow, roce, len, sizeof roce), len + 4);
        assert_true(op_icrc_check(&flow, roce, len + 4));
        /* on the wire, with a traffic class and the UDP checksum set */
        memcpy(frame + 62, roce, len + 4);
        const struct op_frame_l2 l2 = {.tos = 0x68};
        size_t n = op_udp_frame_build(frame, sizeof frame, &flow, &l2, len + 4);
        assert_int_equal(n, 62 + len + 4);
        assert_frame_icrc(frame + 14, n - 14);
        frame[14 + 7] = 3; /* a router on the way took hops off */
        assert_frame_icrc(frame + 14, n - 14);
        struct op_flow other = flow;
        other.src.v6[15] ^= 1;
        assert_false(op_icrc_check(&other, roce, len + 4));
    }
    uint8_t frame[62 + 16] = {0};
    struct op_flow v6 = flow;
    assert_int_equal(op_udp_frame_build(frame, sizeof frame, &v6, &(struct op_frame_l2){0}, 16),
                     sizeof frame);
    uint32_t icrc;
    frame[14 + 6] = 6; /* TCP next: not a RoCEv2 packet */
    assert_int_not_equal(op_icrc_ip_frame(frame + 14, sizeof frame - 14, &icrc), OP_OK);
    frame[14 + 6] = 17;
    assert_int_equal(op_icrc_ip_frame(frame + 14, sizeof frame - 15, &icrc), OP_ERR_TRUNCATED);
}

/* Every length (every remainder the folding engine leaves, with and
 * without IPv4 options) against the bitwise reference. */
static void test_icrc_every_length_matches_reference(void **state)
{
    (void)state;
    static uint8_t f[60 + 8 + 400 + 4], m[8 + sizeof f];
    for (size_t ihl = 20; ihl <= 24; ihl += 4) {
        for (size_t len = OP_BTH_LEN; len <= 400; len++) {
            size_t total = ihl + 8 + len + OP_ICRC_LEN;
            memset(f, 0, sizeof f);
            f[0] = (uint8_t)(0x40 | ihl / 4);
            f[1] = 0x2a;
            f[2] = (uint8_t)(total >> 8);
            f[3] = (uint8_t)total;
            f[6] = 0x40; /* DF, Identification 0 */
            f[8] = 64;
            f[9] = 17;
            f[12] = 127, f[15] = 2, f[16] = 127, f[19] = 100;
            memset(f + 20, 0x01, ihl - 20); /* NOP options */
            uint8_t *udp = f + ihl, *roce = udp + 8;
            udp[0] = 0xc1, udp[1] = 0x23, udp[2] = 0x12, udp[3] = 0xb7;
            udp[4] = (uint8_t)((total - ihl) >> 8), udp[5] = (uint8_t)(total - ihl);
            for (size_t i = 0; i < len; i++)
                roce[i] = (uint8_t)(i * 13u + len);
            uint32_t want = crc32_ref(0, m, icrc_message(m, f, ihl, len)), got = 0;
            assert_int_equal(op_icrc_ip_frame(f, total, &got), OP_OK);
            assert_int_equal(got, want);
            if (ihl == 20)
                assert_int_equal(op_icrc_flow(&test_flow, roce, len), want);
        }
    }
}

static void test_icrc_seal_check(void **state)
{
    (void)state;
    uint8_t pkt[OP_BTH_LEN + 40 + OP_ICRC_LEN];
    for (size_t i = 0; i < sizeof pkt; i++)
        pkt[i] = (uint8_t)(i ^ 0x5a);
    size_t len = sizeof pkt - OP_ICRC_LEN;
    assert_int_equal(op_icrc_seal(&test_flow, pkt, len, sizeof pkt - 1), 0);
    assert_int_equal(op_icrc_seal(&test_flow, pkt, len, sizeof pkt), sizeof pkt);
    uint32_t crc = op_icrc_flow(&test_flow, pkt, len);
    uint8_t wire[4];
    le32_put(wire, crc);
    assert_memory_equal(pkt + len, wire, 4);
    assert_true(op_icrc_check(&test_flow, pkt, sizeof pkt));
    for (size_t i = 0; i < sizeof pkt; i++) {
        for (unsigned bitno = 0; bitno < 8; bitno++) {
            pkt[i] ^= (uint8_t)(1u << bitno);
            assert_int_equal(op_icrc_check(&test_flow, pkt, sizeof pkt), i == 4);
            pkt[i] ^= (uint8_t)(1u << bitno);
        }
    }
    struct op_flow other = test_flow;
    other.src_port++;
    assert_false(op_icrc_check(&other, pkt, sizeof pkt));
    other = test_flow;
    other.dst.v4 ^= 1;
    assert_false(op_icrc_check(&other, pkt, sizeof pkt));
    assert_false(op_icrc_check(&test_flow, pkt, sizeof pkt - 1));
    assert_false(op_icrc_check(&test_flow, pkt, OP_BTH_LEN + OP_ICRC_LEN - 1));
    assert_false(op_icrc_check(&test_flow, NULL, 0));
}

/* ---- reduction types ------------------------------------------------ */

static void test_red_types(void **state)
{
    (void)state;
    static const char *const names[] = {"int8",   "int16",  "int32",  "int64",   "uint8",
                                        "uint16", "uint32", "uint64", "float32", "float64"};
    static const size_t sizes[] = {1, 2, 4, 8, 1, 2, 4, 8, 4, 8};
    assert_int_equal(COUNT_OF(names), OP_RED_TYPE_COUNT_);
    for (unsigned t = 0; t < OP_RED_TYPE_COUNT_; t++) {
        assert_string_equal(op_red_type_name(t), names[t]);
        assert_int_equal(op_red_type_size(t), sizes[t]);
        assert_int_equal(op_red_type_parse(names[t]), (int)t);
    }
    assert_null(op_red_type_name(OP_RED_TYPE_COUNT_));
    assert_int_equal(op_red_type_size(OP_RED_TYPE_COUNT_), 0);
    assert_int_equal(op_red_type_size(~0u), 0);
    assert_int_equal(op_red_type_parse("int"), -1);
    assert_int_equal(op_red_type_parse("Int8"), -1);
    assert_int_equal(op_red_type_parse("float32 "), -1);
    assert_int_equal(op_red_type_parse(""), -1);
    assert_int_equal(op_red_type_parse(NULL), -1);
}

static void test_red_ops(void **state)
{
    (void)state;
    static const char *const names[] = {"sum",  "prod", "min",  "max", "land",
                                        "lor",  "lxor", "band", "bor", "bxor"};
    assert_int_equal(COUNT_OF(names), OP_RED_OP_COUNT_);
    for (unsigned o = 0; o < OP_RED_OP_COUNT_; o++) {
        assert_string_equal(op_red_op_name(o), names[o]);
        assert_int_equal(op_red_op_parse(names[o]), (int)o);
    }
    assert_null(op_red_op_name(OP_RED_OP_COUNT_));
    assert_int_equal(op_red_op_parse("add"), -1);
    assert_int_equal(op_red_op_parse(NULL), -1);
}

static void test_red_valid(void **state)
{
    (void)state;
    for (unsigned o = 0; o < OP_RED_OP_COUNT_; o++) {
        for (unsigned t = 0; t < OP_RED_TYPE_COUNT_; t++) {
            bool bitwise = o == OP_RED_BAND || o == OP_RED_BOR || o == OP_RED_BXOR;
            bool fp = t == OP_RED_FLOAT32 || t == OP_RED_FLOAT64;
            assert_int_equal(op_red_valid(o, t), !(bitwise && fp));
        }
    }
    assert_false(op_red_valid(OP_RED_OP_COUNT_, OP_RED_INT32));
    assert_false(op_red_valid(OP_RED_SUM, OP_RED_TYPE_COUNT_));
}

/* ---- INC header ----------------------------------------------------- */

static struct op_inc_hdr sample_hdr(uint8_t kind)
{
    struct op_inc_hdr h = {
        .version = OP_INC_VERSION, .kind = kind, .flags = OP_INC_F_RESULT | OP_INC_F_RETX,
        .reason = OP_INC_R_CONFLICT, .group_id = 0xa1b2, .op = OP_RED_MAX,
        .dtype = OP_RED_INT32, .src_rank = 0x01020304, .token = 0x1122334455667788ull,
        .seq = 0xcafe12ab, .slot = 0x0304, .count = 3, .req_id = 0xab,
    };
    if (kind == OP_INC_KIND_CTRL)
        h.count = 0;
    return h;
}

static void assert_hdr_equal(const struct op_inc_hdr *a, const struct op_inc_hdr *b)
{
    assert_int_equal(a->version, b->version);
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->flags, b->flags);
    assert_int_equal(a->reason, b->reason);
    assert_int_equal(a->group_id, b->group_id);
    assert_int_equal(a->op, b->op);
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->src_rank, b->src_rank);
    assert_true(a->token == b->token);
    assert_int_equal(a->seq, b->seq);
    assert_int_equal(a->slot, b->slot);
    assert_int_equal(a->count, b->count);
    assert_int_equal(a->req_id, b->req_id);
}

static void test_inc_hdr_bytes(void **state)
{
    (void)state;
    const struct op_inc_hdr h = sample_hdr(OP_INC_KIND_DATA);
    const uint8_t want[OP_INC_HDR_LEN] = {
        0x11, 0x22, 0x33, 0x44, 0x01, 0x01, 0x03, 0x08, 0xa1, 0xb2, 0x03, 0x02,
        0x01, 0x02, 0x03, 0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
        0xca, 0xfe, 0x12, 0xab, 0x03, 0x04, 0x00, 0x03, 0xab, 0x00, 0x00, 0x00,
    };
    uint8_t b[OP_INC_HDR_LEN];
    op_inc_hdr_encode(&h, b);
    assert_memory_equal(b, want, sizeof want);
    struct op_inc_hdr d;
    assert_int_equal(op_inc_hdr_decode(b, sizeof b, &d), OP_OK);
    assert_hdr_equal(&d, &h);
    /* req_id is always derived from seq on encode. */
    struct op_inc_hdr h2 = h;
    h2.req_id = 0;
    op_inc_hdr_encode(&h2, b);
    assert_int_equal(b[32], 0xab);
}

static void test_inc_hdr_truncated(void **state)
{
    (void)state;
    const struct op_inc_hdr h = sample_hdr(OP_INC_KIND_CTRL);
    uint8_t b[OP_INC_HDR_LEN];
    op_inc_hdr_encode(&h, b);
    struct op_inc_hdr d = {.slot = 77};
    for (size_t len = 0; len < OP_INC_HDR_LEN; len++)
        assert_int_equal(op_inc_hdr_decode(b, len, &d), OP_ERR_TRUNCATED);
    assert_int_equal(d.slot, 77);
    assert_int_equal(op_inc_hdr_decode(b, sizeof b, &d), OP_OK);
    assert_hdr_equal(&d, &h);
}

static void test_inc_hdr_malformed(void **state)
{
    (void)state;
    const struct {
        size_t at;
        uint8_t val;
    } bad[] = {
        {0, 0x12},                  /* tag */
        {3, 0x45},                  /* tag */
        {4, 0},                     /* version */
        {4, 2},                     /* version */
        {5, 0},                     /* kind */
        {5, 3},                     /* kind */
        {6, 0x08},                  /* unknown flag */
        {6, 0x80},                  /* unknown flag */
        {7, OP_INC_R_COUNT_},       /* reason */
        {7, 0xff},                  /* reason */
        {32, 0xac},                 /* req_id != seq & 0xff */
        {33, 1},                    /* reserved */
        {34, 0x80},                 /* reserved */
        {35, 1},                    /* reserved */
    };
    const struct op_inc_hdr h = sample_hdr(OP_INC_KIND_DATA);
    for (size_t i = 0; i < COUNT_OF(bad); i++) {
        uint8_t b[OP_INC_HDR_LEN];
        op_inc_hdr_encode(&h, b);
        b[bad[i].at] = bad[i].val;
        struct op_inc_hdr d;
        assert_int_equal(op_inc_hdr_decode(b, sizeof b, &d), OP_ERR_MALFORMED);
    }
}

/* ---- INC control payload --------------------------------------------- */

static struct op_inc_ctrl sample_ctrl(void)
{
    return (struct op_inc_ctrl){
        .sup_mpi_type = 0x11, .fail_cause = OP_INC_R_NO_SLOT, .master_num = 2,
        .query_notify_hop = 0x32, .sup_comm_type = 1, .sup_allreduce_op = 0x03ff,
        .sup_data_type = 0x02ff, .sup_max_data_size = 4096, .global_group_size = 0x1234,
        .local_group_size = 0x0506, .true_comm_id = 0xa0a1a2a3, .ava_grp_num = 0xb0b1b2b3,
        .dst_rank = 0xc0c1c2c3, .tor1_ip = 0x0a000001, .spine_ip = 0x0a000002,
        .tor2_ip = 0x0a000003, .job_id = 0xd0d1d2d3, .c_id = 0xe0e1e2e3,
        .world_rank = 0xf0f1f2f3, .dst_ip = 0x7f000001, .src_ip = 0x7f000002,
        .window = 0x0102, .max_children = 0x0304, .lease_ms = 0x05060708,
    };
}

static void test_inc_ctrl_bytes(void **state)
{
    (void)state;
    const struct op_inc_ctrl c = sample_ctrl();
    const uint8_t want[OP_INC_CTRL_LEN] = {
        0x11, 0x02, 0x02, 0x32, 0x01, 0x00, 0x03, 0xff, 0x02, 0xff, 0x10, 0x00,
        0x12, 0x34, 0x05, 0x06, 0xa0, 0xa1, 0xa2, 0xa3, 0xb0, 0xb1, 0xb2, 0xb3,
        0xc0, 0xc1, 0xc2, 0xc3, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
        0x0a, 0x00, 0x00, 0x03, 0xd0, 0xd1, 0xd2, 0xd3, 0xe0, 0xe1, 0xe2, 0xe3,
        0xf0, 0xf1, 0xf2, 0xf3, 0x7f, 0x00, 0x00, 0x01, 0x7f, 0x00, 0x00, 0x02,
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x00, 0x00, 0x00, 0x00,
    };
    uint8_t b[OP_INC_CTRL_LEN];
    op_inc_ctrl_encode(&c, b);
    assert_memory_equal(b, want, sizeof want);
    struct op_inc_ctrl d;
    memset(&d, 0xee, sizeof d);
    assert_int_equal(op_inc_ctrl_decode(b, sizeof b, &d), OP_OK);
    uint8_t again[OP_INC_CTRL_LEN];
    op_inc_ctrl_encode(&d, again);
    assert_memory_equal(again, want, sizeof want);
    assert_int_equal(d.lease_ms, c.lease_ms);
    assert_int_equal(d.window, c.window);
    assert_int_equal(d.src_ip, c.src_ip);
    assert_int_equal(d.world_rank, c.world_rank);
}

static void test_inc_ctrl_types(void **state)
{
    (void)state;
    struct op_inc_ctrl c = sample_ctrl();
    uint8_t b[OP_INC_CTRL_LEN];
    struct op_inc_ctrl d;
    for (unsigned hop = 0; hop < 16; hop++) {
        for (unsigned type = 0; type < 16; type++) {
            c.query_notify_hop = (uint8_t)(hop << 4 | type);
            op_inc_ctrl_encode(&c, b);
            op_status_t want = type >= 1 && type <= 4 ? OP_OK : OP_ERR_MALFORMED;
            assert_int_equal(op_inc_ctrl_decode(b, sizeof b, &d), want);
        }
    }
}

static void test_inc_ctrl_malformed(void **state)
{
    (void)state;
    const struct {
        size_t at;
        uint8_t val;
    } bad[] = {
        {1, OP_INC_R_COUNT_}, /* fail_cause */
        {1, 0xff},            /* fail_cause */
        {2, 0},               /* master_num */
        {2, 3},               /* master_num */
        {3, 0x30},            /* control type 0 */
        {3, 0x05},            /* control type 5 */
        {5, 1},               /* reserved */
        {68, 1},              /* reserved */
        {69, 1},              /* reserved */
        {70, 1},              /* reserved */
        {71, 0x80},           /* reserved */
    };
    const struct op_inc_ctrl c = sample_ctrl();
    for (size_t i = 0; i < COUNT_OF(bad); i++) {
        uint8_t b[OP_INC_CTRL_LEN];
        op_inc_ctrl_encode(&c, b);
        b[bad[i].at] = bad[i].val;
        struct op_inc_ctrl d;
        assert_int_equal(op_inc_ctrl_decode(b, sizeof b, &d), OP_ERR_MALFORMED);
    }
    uint8_t b[OP_INC_CTRL_LEN];
    op_inc_ctrl_encode(&c, b);
    struct op_inc_ctrl d = {.window = 9};
    for (size_t len = 0; len < OP_INC_CTRL_LEN; len++)
        assert_int_equal(op_inc_ctrl_decode(b, len, &d), OP_ERR_TRUNCATED);
    assert_int_equal(d.window, 9);
}

static void test_inc_reason_str(void **state)
{
    (void)state;
    static const char *const names[] = {
        "none",        "no free group", "no free slot", "unsupported", "bad token",
        "not a member", "malformed",    "lease expired", "conflict",
    };
    assert_int_equal(COUNT_OF(names), OP_INC_R_COUNT_);
    for (unsigned r = 0; r < OP_INC_R_COUNT_; r++)
        assert_string_equal(op_inc_reason_str(r), names[r]);
    assert_non_null(op_inc_reason_str(OP_INC_R_COUNT_));
    assert_non_null(op_inc_reason_str(~0u));
}

/* ---- whole INC packets ----------------------------------------------- */

#define PSN 0x00abcdefu

/* A data packet of count elements of dtype; returns its length with ICRC. */
static size_t make_data(uint8_t *out, size_t cap, unsigned dtype, uint16_t count)
{
    struct op_inc_hdr h = sample_hdr(OP_INC_KIND_DATA);
    h.dtype = (uint8_t)dtype;
    h.count = count;
    uint8_t payload[OP_INC_MAX_DATA];
    size_t n = count * op_red_type_size(dtype);
    for (size_t i = 0; i < n; i++)
        payload[i] = (uint8_t)(i * 13u + 5u);
    size_t len = op_inc_encode(&h, PSN, payload, n, out, cap);
    assert_int_not_equal(len, 0);
    len = op_icrc_seal(&test_flow, out, len, cap);
    assert_int_not_equal(len, 0);
    return len;
}

static size_t make_ctrl(uint8_t *out, size_t cap)
{
    const struct op_inc_hdr h = sample_hdr(OP_INC_KIND_CTRL);
    const struct op_inc_ctrl c = sample_ctrl();
    uint8_t payload[OP_INC_CTRL_LEN];
    op_inc_ctrl_encode(&c, payload);
    size_t len = op_inc_encode(&h, PSN, payload, sizeof payload, out, cap);
    assert_int_equal(len, OP_INC_PREFIX_LEN + OP_INC_CTRL_LEN);
    return op_icrc_seal(&test_flow, out, len, cap);
}

static void test_inc_pkt_data_round_trip(void **state)
{
    (void)state;
    uint8_t pkt[OP_INC_MAX_PKT];
    /* 3 x int32: 36 + 12 bytes, no pad. */
    size_t len = make_data(pkt, sizeof pkt, OP_RED_INT32, 3);
    assert_int_equal(len, OP_INC_PREFIX_LEN + 12 + OP_ICRC_LEN);
    const uint8_t bth_deth[20] = {0x64, 0x00, 0xff, 0xff, 0x00, 0x00, 0xc0, 0xde, 0x00, 0xab,
                                  0xcd, 0xef, 0x49, 0x4e, 0x43, 0x21, 0x00, 0x00, 0xc0, 0xde};
    assert_memory_equal(pkt, bth_deth, sizeof bth_deth);
    assert_true(op_inc_is_inc(pkt, len));
    assert_true(op_icrc_check(&test_flow, pkt, len));
    struct op_inc_pkt d;
    assert_int_equal(op_inc_decode(pkt, len, &d), OP_OK);
    struct op_inc_hdr h = sample_hdr(OP_INC_KIND_DATA);
    assert_hdr_equal(&d.hdr, &h);
    assert_int_equal(d.bth.psn, PSN);
    assert_int_equal(d.bth.padcnt, 0);
    assert_int_equal(d.deth.qkey, OP_INC_QKEY);
    assert_int_equal(d.deth.src_qp, OP_INC_QPN);
    assert_ptr_equal(d.payload, pkt + OP_INC_PREFIX_LEN);
    assert_int_equal(d.payload_len, 12);
}

static void test_inc_pkt_pad(void **state)
{
    (void)state;
    uint8_t pkt[OP_INC_MAX_PKT];
    for (uint16_t count = 1; count <= 9; count++) {
        size_t len = make_data(pkt, sizeof pkt, OP_RED_UINT8, count);
        size_t pad = (4 - (OP_INC_HDR_LEN + count) % 4) % 4;
        assert_int_equal(len, OP_INC_PREFIX_LEN + count + pad + OP_ICRC_LEN);
        assert_int_equal((pkt[1] >> 4) & 3, pad);
        for (size_t i = 0; i < pad; i++)
            assert_int_equal(pkt[OP_INC_PREFIX_LEN + count + i], 0);
        struct op_inc_pkt d;
        assert_int_equal(op_inc_decode(pkt, len, &d), OP_OK);
        assert_int_equal(d.payload_len, count);
        if (pad > 0) {
            pkt[OP_INC_PREFIX_LEN + count] = 1; /* pad must be zero */
            assert_int_equal(op_inc_decode(pkt, len, &d), OP_ERR_MALFORMED);
        }
    }
    /* The largest data payload, OP_INC_MAX_DATA bytes; one element more is refused. */
    size_t len = make_data(pkt, sizeof pkt, OP_RED_FLOAT64, OP_INC_MAX_DATA / 8);
    assert_int_equal(len, OP_INC_MAX_PKT);
    struct op_inc_pkt d;
    assert_int_equal(op_inc_decode(pkt, len, &d), OP_OK);
}

static void test_inc_pkt_ctrl_round_trip(void **state)
{
    (void)state;
    uint8_t pkt[OP_INC_MAX_PKT];
    size_t len = make_ctrl(pkt, sizeof pkt);
    assert_int_equal(len, OP_INC_PREFIX_LEN + OP_INC_CTRL_LEN + OP_ICRC_LEN);
    assert_int_equal((pkt[1] >> 4) & 3, 0);
    struct op_inc_pkt d;
    assert_int_equal(op_inc_decode(pkt, len, &d), OP_OK);
    assert_int_equal(d.hdr.kind, OP_INC_KIND_CTRL);
    assert_int_equal(d.payload_len, OP_INC_CTRL_LEN);
    struct op_inc_ctrl c;
    assert_int_equal(op_inc_ctrl_decode(d.payload, d.payload_len, &c), OP_OK);
    assert_int_equal(c.lease_ms, sample_ctrl().lease_ms);
    /* The packet carries the payload decoded: receivers need not decode it again. */
    uint8_t again[OP_INC_CTRL_LEN];
    op_inc_ctrl_encode(&d.ctrl, again);
    assert_memory_equal(again, d.payload, OP_INC_CTRL_LEN);
    /* Control packets ignore op and dtype. */
    pkt[OP_BTH_LEN + OP_DETH_LEN + 10] = 0xee;
    pkt[OP_BTH_LEN + OP_DETH_LEN + 11] = 0xee;
    assert_int_equal(op_inc_decode(pkt, len, &d), OP_OK);
}

static void test_inc_pkt_truncated(void **state)
{
    (void)state;
    uint8_t pkt[OP_INC_MAX_PKT];
    struct op_inc_pkt d = {.payload_len = 99};
    size_t len = make_data(pkt, sizeof pkt, OP_RED_INT16, 5); /* 10 bytes, pad 2 */
    for (size_t n = 0; n < len; n++)
        assert_int_equal(op_inc_decode(pkt, n, &d), OP_ERR_TRUNCATED);
    len = make_ctrl(pkt, sizeof pkt);
    for (size_t n = 0; n < len; n++)
        assert_int_equal(op_inc_decode(pkt, n, &d), OP_ERR_TRUNCATED);
    assert_int_equal(d.payload_len, 99);
    assert_int_equal(op_inc_decode(NULL, 0, &d), OP_ERR_TRUNCATED);
}

static void test_inc_pkt_trailing(void **state)
{
    (void)state;
    uint8_t pkt[OP_INC_MAX_PKT];
    struct op_inc_pkt d;
    size_t len = make_data(pkt, sizeof pkt, OP_RED_INT64, 2);
    for (size_t extra = 1; extra <= 8; extra++)
        assert_int_equal(op_inc_decode(pkt, len + extra, &d), OP_ERR_MALFORMED);
    len = make_ctrl(pkt, sizeof pkt);
    for (size_t extra = 1; extra <= 8; extra++)
        assert_int_equal(op_inc_decode(pkt, len + extra, &d), OP_ERR_MALFORMED);
}

struct patch {
    size_t at;
    uint8_t val;
};

static void assert_patches(const uint8_t *good, size_t len, const struct patch *p, size_t n,
                           op_status_t want)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t pkt[OP_INC_MAX_PKT];
        memcpy(pkt, good, len);
        pkt[p[i].at] = p[i].val;
        struct op_inc_pkt d;
        assert_int_equal(op_inc_decode(pkt, len, &d), want);
    }
}

static void assert_patches_malformed(const uint8_t *good, size_t len, const struct patch *p,
                                     size_t n)
{
    assert_patches(good, len, p, n, OP_ERR_MALFORMED);
}

#define HDR(off) (OP_BTH_LEN + OP_DETH_LEN + (off))

static void test_inc_pkt_malformed_envelope(void **state)
{
    (void)state;
    uint8_t pkt[OP_INC_MAX_PKT];
    size_t len = make_data(pkt, sizeof pkt, OP_RED_INT32, 3);
    const struct patch bad[] = {
        {0, OP_UD_SEND_ONLY_IMM}, /* opcode */
        {0, OP_RC_SEND_ONLY},     /* opcode */
        {1, 0x01},                /* tver */
        {1, 0x80},                /* solicited event */
        {1, 0x40},                /* MigReq */
        {1, 0x10},                /* pad count 1 for a 48-byte header + payload */
        {2, 0x7f},                /* P_Key */
        {5, 0x01},                /* dest QP */
        {7, 0xdf},                /* dest QP */
        {8, 0x80},                /* AckReq */
        {8, 0x01},                /* reserved */
        {12, 0x48},               /* Q_Key */
        {15, 0x20},               /* Q_Key */
        {16, 0x01},               /* DETH reserved */
        {19, 0xdf},               /* source QP */
        {HDR(0), 0},              /* INC tag */
        {HDR(4), 2},              /* version */
        {HDR(5), 0},              /* kind */
        {HDR(5), 3},              /* kind */
        {HDR(6), 0x10},           /* flags */
        {HDR(7), OP_INC_R_COUNT_}, /* reason */
        {HDR(32), 0},             /* req_id */
        {HDR(33), 1},             /* reserved */
        {HDR(35), 1},             /* reserved */
    };
    assert_patches_malformed(pkt, len, bad, COUNT_OF(bad));
    struct op_inc_pkt d;
    assert_int_equal(op_inc_decode(pkt, len, &d), OP_OK);
    /* BTH byte 4 (FECN, BECN, reserved) is variant: ignored, and masked by
     * the ICRC. */
    pkt[4] = 0xc0;
    assert_int_equal(op_inc_decode(pkt, len, &d), OP_OK);
    assert_true(d.bth.fecn && d.bth.becn);
    assert_true(op_icrc_check(&test_flow, pkt, len));
}

static void test_inc_pkt_malformed_data(void **state)
{
    (void)state;
    uint8_t pkt[OP_INC_MAX_PKT];
    size_t len = make_data(pkt, sizeof pkt, OP_RED_INT32, 4); /* 16 bytes */
    const struct patch bad[] = {
        {HDR(10), OP_RED_OP_COUNT_},   /* op */
        {HDR(10), 0xff},               /* op */
        {HDR(11), OP_RED_TYPE_COUNT_}, /* dtype */
        {HDR(11), OP_RED_INT8},        /* 4 bytes, not 16: trailing bytes */
        {HDR(11), OP_RED_INT16},       /* 8 bytes, not 16 */
        {HDR(31), 0},                  /* count 0 */
        {HDR(31), 3},                  /* 12 bytes, not 16 */
    };
    assert_patches_malformed(pkt, len, bad, COUNT_OF(bad));
    /* A header announcing more than the packet holds: truncated. */
    const struct patch longer[] = {
        {HDR(11), OP_RED_INT64}, /* 4 x int64 is 32 bytes, not 16 */
        {HDR(31), 5},            /* 20 bytes, not 16 */
        {HDR(30), 1},            /* 260 elements */
    };
    assert_patches(pkt, len, longer, COUNT_OF(longer), OP_ERR_TRUNCATED);
    /* A float32 payload of the same length, then bitwise ops on it. */
    struct op_inc_pkt d;
    pkt[HDR(11)] = OP_RED_FLOAT32;
    assert_int_equal(op_inc_decode(pkt, len, &d), OP_OK);
    const struct patch fbad[] = {
        {HDR(10), OP_RED_BAND}, {HDR(10), OP_RED_BOR}, {HDR(10), OP_RED_BXOR},
    };
    assert_patches_malformed(pkt, len, fbad, COUNT_OF(fbad));
    /* One element past OP_INC_MAX_DATA. */
    struct op_inc_hdr h = sample_hdr(OP_INC_KIND_DATA);
    h.dtype = OP_RED_INT32;
    h.count = OP_INC_MAX_DATA / 4 + 1;
    static uint8_t big[OP_INC_MAX_PKT + 16], payload[OP_INC_MAX_DATA + 4];
    len = op_inc_encode(&h, PSN, payload, sizeof payload, big, sizeof big);
    assert_int_equal(len, OP_INC_PREFIX_LEN + sizeof payload);
    len = op_icrc_seal(&test_flow, big, len, sizeof big);
    assert_int_equal(op_inc_decode(big, len, &d), OP_ERR_MALFORMED);
}

static void test_inc_pkt_malformed_ctrl(void **state)
{
    (void)state;
    uint8_t pkt[OP_INC_MAX_PKT];
    size_t len = make_ctrl(pkt, sizeof pkt);
    const size_t pl = OP_INC_PREFIX_LEN;
    const struct patch bad[] = {
        {HDR(31), 1},  /* count must be 0 */
        {HDR(30), 1},  /* count must be 0 */
        {pl + 1, 0xff}, /* fail_cause */
        {pl + 2, 0},   /* master_num */
        {pl + 3, 0x00}, /* control type */
        {pl + 3, 0x0f}, /* control type */
        {pl + 5, 1},   /* reserved */
        {pl + 70, 1},  /* reserved */
    };
    assert_patches_malformed(pkt, len, bad, COUNT_OF(bad));
    /* A control packet whose payload is not 72 bytes. */
    struct op_inc_hdr h = sample_hdr(OP_INC_KIND_CTRL);
    uint8_t payload[OP_INC_CTRL_LEN + 4];
    const struct op_inc_ctrl c = sample_ctrl();
    op_inc_ctrl_encode(&c, payload);
    memset(payload + OP_INC_CTRL_LEN, 0, 4);
    struct op_inc_pkt d;
    len = op_inc_encode(&h, PSN, payload, sizeof payload, pkt, sizeof pkt);
    len = op_icrc_seal(&test_flow, pkt, len, sizeof pkt);
    assert_int_equal(op_inc_decode(pkt, len, &d), OP_ERR_MALFORMED);
    len = op_inc_encode(&h, PSN, payload, OP_INC_CTRL_LEN - 4, pkt, sizeof pkt);
    len = op_icrc_seal(&test_flow, pkt, len, sizeof pkt);
    assert_int_equal(op_inc_decode(pkt, len, &d), OP_ERR_TRUNCATED);
}

static void test_inc_is_inc(void **state)
{
    (void)state;
    uint8_t pkt[OP_INC_MAX_PKT];
    size_t len = make_ctrl(pkt, sizeof pkt);
    assert_true(op_inc_is_inc(pkt, len));
    assert_true(op_inc_is_inc(pkt, OP_INC_PREFIX_LEN));
    assert_false(op_inc_is_inc(pkt, OP_INC_PREFIX_LEN - 1));
    assert_false(op_inc_is_inc(NULL, 0));
    const size_t at[] = {0, 5, 6, 7, 12, 13, 14, 15};
    for (size_t i = 0; i < COUNT_OF(at); i++) {
        pkt[at[i]] ^= 0x01;
        assert_false(op_inc_is_inc(pkt, len));
        pkt[at[i]] ^= 0x01;
    }
    assert_true(op_inc_is_inc(pkt, len));
}

static void test_inc_encode_cap(void **state)
{
    (void)state;
    uint8_t pkt[OP_INC_MAX_PKT];
    const struct op_inc_hdr h = sample_hdr(OP_INC_KIND_DATA);
    const uint8_t payload[13] = {1};
    size_t need = OP_INC_PREFIX_LEN + 13 + 3;
    assert_int_equal(op_inc_encode(&h, 0, payload, 13, pkt, need - 1), 0);
    assert_int_equal(op_inc_encode(&h, 0, payload, 13, pkt, 0), 0);
    assert_int_equal(op_inc_encode(&h, 0, payload, 13, NULL, sizeof pkt), 0);
    assert_int_equal(op_inc_encode(&h, 0, payload, 13, pkt, need), need);
    assert_int_equal(op_inc_encode(&h, 0, NULL, 0, pkt, sizeof pkt), OP_INC_PREFIX_LEN);
    /* The PSN is masked to 24 bits. */
    assert_int_equal(op_inc_encode(&h, 0xff123456u, payload, 13, pkt, need), need);
    assert_int_equal(pkt[9], 0x12);
    assert_int_equal(pkt[11], 0x56);
}

/* The bounded writer: an append that does not fit writes nothing. */
static void test_wbuf(void **state)
{
    (void)state;
    uint8_t buf[6] = {0};
    struct op_wbuf w = {.buf = buf, .cap = sizeof buf};
    assert_true(op_wbuf_put_be(&w, 0x0102, 2));
    assert_true(op_wbuf_put(&w, "abc", 3));
    assert_false(op_wbuf_put_be(&w, 0x0304, 2)); /* 7 > 6: nothing written */
    assert_int_equal(w.len, 5);
    assert_true(op_wbuf_put_be(&w, 0xff, 1));
    assert_false(op_wbuf_put(&w, "x", 1));
    assert_false(op_wbuf_put_be(&w, 1, 0));
    assert_false(op_wbuf_put_be(&w, 1, 9));
    assert_memory_equal(buf, "\x01\x02" "abc" "\xff", 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wbuf),
        cmocka_unit_test(test_crc32_check_value),
        cmocka_unit_test(test_crc32_matches_reference),
        cmocka_unit_test(test_crc32_engines),
        cmocka_unit_test(test_bth_bytes_and_round_trip),
        cmocka_unit_test(test_bth_masks_and_flags),
        cmocka_unit_test(test_bth_truncated),
        cmocka_unit_test(test_reth),
        cmocka_unit_test(test_aeth),
        cmocka_unit_test(test_deth),
        cmocka_unit_test(test_immdt),
        cmocka_unit_test(test_icrc_scapy_vectors),
        cmocka_unit_test(test_icrc_frame_variant_fields),
        cmocka_unit_test(test_icrc_frame_rejects),
        cmocka_unit_test(test_icrc_frame_ip_options),
        cmocka_unit_test(test_icrc_flow_matches_frame),
        cmocka_unit_test(test_icrc_memo_matches_full),
        cmocka_unit_test(test_icrc_every_length_matches_reference),
        cmocka_unit_test(test_icrc_ipv6),
        cmocka_unit_test(test_addr),
        cmocka_unit_test(test_endpoint),
        cmocka_unit_test(test_sc_meta),
        cmocka_unit_test(test_chan_frame_hdr),
        cmocka_unit_test(test_agent_messages),
        cmocka_unit_test(test_icrc_seal_check),
        cmocka_unit_test(test_red_types),
        cmocka_unit_test(test_red_ops),
        cmocka_unit_test(test_red_valid),
        cmocka_unit_test(test_inc_hdr_bytes),
        cmocka_unit_test(test_inc_hdr_truncated),
        cmocka_unit_test(test_inc_hdr_malformed),
        cmocka_unit_test(test_inc_ctrl_bytes),
        cmocka_unit_test(test_inc_ctrl_types),
        cmocka_unit_test(test_inc_ctrl_malformed),
        cmocka_unit_test(test_inc_reason_str),
        cmocka_unit_test(test_inc_pkt_data_round_trip),
        cmocka_unit_test(test_inc_pkt_pad),
        cmocka_unit_test(test_inc_pkt_ctrl_round_trip),
        cmocka_unit_test(test_inc_pkt_truncated),
        cmocka_unit_test(test_inc_pkt_trailing),
        cmocka_unit_test(test_inc_pkt_malformed_envelope),
        cmocka_unit_test(test_inc_pkt_malformed_data),
        cmocka_unit_test(test_inc_pkt_malformed_ctrl),
        cmocka_unit_test(test_inc_is_inc),
        cmocka_unit_test(test_inc_encode_cap),
    };
    return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
