/* libFuzzer target for the frame parsers of the kernel-bypass paths: the
 * bytes as a received frame (op_udp_frame_parse, op_udp6_frame_parse, and
 * the in-place ARP, neighbour discovery and echo replies), the same bytes
 * wrapped in frames we build, and the bytes as the text of /proc/net/arp.
 * Any violated property aborts. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/io.h"
#include "offpath/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond)
        abort();
}

/* The payload lies inside the frame, after the headers; a refusal has a
 * name and leaves the outputs as they were. */
static void fuzz_parse(const uint8_t *data, size_t size)
{
    static const struct op_flow unset = {1, 2, 3, 4};
    struct op_flow flow = unset;
    uint8_t mac[6] = {0};
    size_t off = SIZE_MAX, len = SIZE_MAX;
    unsigned v = op_udp_frame_parse(data, size, &flow, mac, &off, &len);
    require(v < OP_FRAME_VERDICTS_);
    require(strcmp(op_frame_verdict_str(v), "unknown") != 0);
    if (v != OP_FRAME_OK) {
        require(memcmp(&flow, &unset, sizeof flow) == 0 && off == SIZE_MAX && len == SIZE_MAX);
        return;
    }
    require(off >= OP_UDP_FRAME_HDR_LEN && off <= size && len <= size - off);
    require(memcmp(mac, data + 6, 6) == 0);
}

/* Whatever we build parses back to the flow and payload we built it for. */
static void fuzz_round_trip(const uint8_t *data, size_t size)
{
    static uint8_t frame[OP_UDP_FRAME_HDR_LEN + 4096];
    if (size < 12 + 1 || size - 13 > sizeof frame - OP_UDP_FRAME_HDR_LEN)
        return;
    struct op_flow flow = {0, 0, (uint16_t)(data[8] << 8 | data[9]),
                           (uint16_t)(data[10] << 8 | data[11])};
    memcpy(&flow.src_ip, data, 4);
    memcpy(&flow.dst_ip, data + 4, 4);
    struct op_frame_l2 l2 = {.tos = data[12]};
    memcpy(l2.src_mac, data, 6);
    memcpy(l2.dst_mac, data + 6, 6);
    size_t payload_len = size - 13;
    memcpy(frame + OP_UDP_FRAME_HDR_LEN, data + 13, payload_len);
    size_t n = op_udp_frame_build(frame, sizeof frame, &flow, &l2, payload_len);
    require(n == OP_UDP_FRAME_HDR_LEN + payload_len);
    struct op_flow got;
    uint8_t mac[6];
    size_t off = 0, len = 0;
    require(op_udp_frame_parse(frame, n, &got, mac, &off, &len) == OP_FRAME_OK);
    require(memcmp(&got, &flow, sizeof got) == 0 && memcmp(mac, l2.src_mac, 6) == 0);
    require(off == OP_UDP_FRAME_HDR_LEN && len == payload_len);
    require(memcmp(frame + off, data + 13, len) == 0);
}

static void fuzz_parse6(const uint8_t *data, size_t size)
{
    struct op_flow6 flow, unset;
    memset(&unset, 0xa5, sizeof unset);
    flow = unset;
    uint8_t mac[6] = {0};
    size_t off = SIZE_MAX, len = SIZE_MAX;
    unsigned v = op_udp6_frame_parse(data, size, &flow, mac, &off, &len);
    require(v < OP_FRAME_VERDICTS_);
    if (v != OP_FRAME_OK) {
        require(memcmp(&flow, &unset, sizeof flow) == 0 && off == SIZE_MAX && len == SIZE_MAX);
        return;
    }
    require(off == OP_UDP6_FRAME_HDR_LEN && off <= size && len <= size - off);
    require(memcmp(mac, data + 6, 6) == 0);
}

static void fuzz_round_trip6(const uint8_t *data, size_t size)
{
    static uint8_t frame[OP_UDP6_FRAME_HDR_LEN + 4096];
    if (size < 36 + 1 || size - 37 > sizeof frame - OP_UDP6_FRAME_HDR_LEN)
        return;
    struct op_flow6 flow = {.src_port = (uint16_t)(data[32] << 8 | data[33]),
                            .dst_port = (uint16_t)(data[34] << 8 | data[35])};
    memcpy(flow.src, data, 16);
    memcpy(flow.dst, data + 16, 16);
    struct op_frame_l2 l2 = {.tos = data[36]};
    memcpy(l2.src_mac, data, 6);
    memcpy(l2.dst_mac, data + 6, 6);
    size_t payload_len = size - 37;
    memcpy(frame + OP_UDP6_FRAME_HDR_LEN, data + 37, payload_len);
    size_t n = op_udp6_frame_headers(frame, &flow, &l2, payload_len);
    require(n == OP_UDP6_FRAME_HDR_LEN + payload_len);
    struct op_flow6 got;
    uint8_t mac[6];
    size_t off = 0, len = 0;
    require(op_udp6_frame_parse(frame, n, &got, mac, &off, &len) == OP_FRAME_OK);
    require(memcmp(&got, &flow, sizeof got) == 0 && memcmp(mac, l2.src_mac, 6) == 0);
    require(off == OP_UDP6_FRAME_HDR_LEN && len == payload_len);
    require(memcmp(frame + off, data + 37, len) == 0);
}

/* A reply stays inside the buffer it was given, and a refusal leaves the
 * frame as it was. The addresses are the ones the seeds ask for. */
static void fuzz_replies(const uint8_t *data, size_t size)
{
    static const uint8_t ip6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};
    static const uint8_t mac[6] = {2, 0, 0, 0, 0, 1};
    static uint8_t frame[2048], before[2048];
    if (size > sizeof frame - 64)
        return;
    for (int kind = 0; kind < 4; kind++) {
        memcpy(frame, data, size);
        memcpy(before, frame, sizeof frame);
        size_t n = kind == 0   ? op_arp_reply_in_place(frame, size, 0xc6120001u, mac)
                   : kind == 1 ? op_icmp_echo_reply_in_place(frame, size, 0xc6120001u, mac)
                   : kind == 2 ? op_ndp_advert_in_place(frame, size, size + 64, ip6, mac)
                               : op_icmp6_echo_reply_in_place(frame, size, ip6, mac);
        require(n <= size + 64);
        if (n == 0)
            require(memcmp(frame, before, sizeof frame) == 0);
    }
}

/* The address and device of the seed tables, so that the fuzzer can reach
 * the match as well as the refusals. */
static void fuzz_arp(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    require(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    uint8_t mac[6];
    (void)op_arp_table_lookup(text, 0x0a4d0002u, "xa", mac);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_parse(data, size);
    fuzz_round_trip(data, size);
    fuzz_parse6(data, size);
    fuzz_round_trip6(data, size);
    fuzz_replies(data, size);
    fuzz_arp(data, size);
    return 0;
}
