/* libFuzzer target for the wire module: every decoder on the same input, and
 * round-trip properties on whatever decodes. Any violated property aborts. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/wire.h"

/* White-box: op_crc32 must agree with its portable engine. */
#include "../../src/wire/crc32_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond)
        abort();
}

/* Each transport header re-encodes to the input bytes, reserved bits zeroed. */
static void fuzz_transport(const uint8_t *data, size_t size)
{
    struct op_bth bth;
    struct op_reth reth;
    struct op_aeth aeth;
    struct op_deth deth;
    uint32_t imm;
    uint8_t b[OP_RETH_LEN];
    if (op_bth_decode(data, size, &bth) == OP_OK) {
        op_bth_encode(&bth, b);
        require(memcmp(b, data, 4) == 0 && b[4] == (data[4] & 0xc0));
        require(memcmp(b + 5, data + 5, 3) == 0 && b[8] == (data[8] & 0x80));
        require(memcmp(b + 9, data + 9, 3) == 0);
    }
    if (op_reth_decode(data, size, &reth) == OP_OK) {
        op_reth_encode(&reth, b);
        require(memcmp(b, data, OP_RETH_LEN) == 0);
    }
    if (op_aeth_decode(data, size, &aeth) == OP_OK) {
        op_aeth_encode(&aeth, b);
        require(memcmp(b, data, OP_AETH_LEN) == 0);
    }
    if (op_deth_decode(data, size, &deth) == OP_OK) {
        op_deth_encode(&deth, b);
        require(memcmp(b, data, 4) == 0 && b[4] == 0 && memcmp(b + 5, data + 5, 3) == 0);
    }
    if (op_immdt_decode(data, size, &imm) == OP_OK) {
        op_immdt_encode(imm, b);
        require(memcmp(b, data, OP_IMMDT_LEN) == 0);
    }
}

static void fuzz_inc_parts(const uint8_t *data, size_t size)
{
    struct op_inc_hdr h;
    struct op_inc_ctrl c;
    if (op_inc_hdr_decode(data, size, &h) == OP_OK) {
        uint8_t b[OP_INC_HDR_LEN];
        op_inc_hdr_encode(&h, b);
        require(memcmp(b, data, sizeof b) == 0);
    }
    if (op_inc_ctrl_decode(data, size, &c) == OP_OK) {
        uint8_t b[OP_INC_CTRL_LEN];
        op_inc_ctrl_encode(&c, b);
        require(memcmp(b, data, sizeof b) == 0);
    }
}

/* A decoded INC packet re-encodes to the same bytes, the ICRC aside and BTH
 * byte 4 aside (FECN/BECN: variant, ignored by the decoder); so does the
 * control payload it carries decoded. */
static void fuzz_inc_packet(const uint8_t *data, size_t size)
{
    struct op_inc_pkt pkt;
    bool is_inc = op_inc_is_inc(data, size);
    if (op_inc_decode(data, size, &pkt) != OP_OK)
        return;
    require(is_inc);
    require(pkt.payload >= data && pkt.payload + pkt.payload_len <= data + size);
    static uint8_t out[OP_INC_MAX_PKT];
    size_t n = op_inc_encode(&pkt.hdr, pkt.bth.psn, pkt.payload, pkt.payload_len, out,
                             sizeof out);
    require(n == size - OP_ICRC_LEN);
    out[4] = data[4];
    require(memcmp(out, data, n) == 0);
    if (pkt.hdr.kind == OP_INC_KIND_CTRL) { /* the control payload it carries decoded */
        op_inc_ctrl_encode(&pkt.ctrl, out);
        require(memcmp(out, pkt.payload, OP_INC_CTRL_LEN) == 0);
    }
}

/* secure_channel's run header: what decodes encodes back to the input. */
static void fuzz_sc_meta(const uint8_t *data, size_t size)
{
    struct op_sc_meta m;
    uint8_t out[OP_SC_META_LEN];
    if (op_sc_meta_decode(data, size, &m) != OP_OK)
        return;
    op_sc_meta_encode(&m, out);
    require(size == OP_SC_META_LEN && memcmp(out, data, size) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_transport(data, size);
    fuzz_inc_parts(data, size);
    fuzz_inc_packet(data, size);
    require(op_crc32(0, data, size) == ~wire_crc32_slice8(~0u, data, size));
    uint32_t icrc;
    (void)op_icrc_ip_frame(data, size, &icrc);
    const struct op_flow flow = {.src.v4 = 0x7f000001u, .dst.v4 = 0x7f000002u,
                                 .src_port = 0xc000, .dst_port = OP_ROCE_UDP_PORT};
    const struct op_flow flow6 = {.src = op_addr_ipv6((const uint8_t[16]){0xfd, [15] = 1}),
                                  .dst = op_addr_ipv6((const uint8_t[16]){0xfd, [15] = 2}),
                                  .src_port = 0xc000, .dst_port = OP_ROCE_UDP_PORT};
    /* the memo agrees with the full computation, on a hit and a miss alike */
    struct op_icrc_memo memo = {.next = 0};
    for (int k = 0; k < 3; k++) {
        const struct op_flow *f = k == 1 ? &flow6 : &flow;
        require(op_icrc_check_memo(&memo, f, data, size) == op_icrc_check(f, data, size));
        require(op_icrc_flow_memo(&memo, f, data, size) == op_icrc_flow(f, data, size));
    }
    fuzz_sc_meta(data, size);
    return 0;
}
