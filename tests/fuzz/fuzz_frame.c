/* libFuzzer target for the frame parsers of the kernel-bypass paths: the
 * bytes as a received frame of either family (op_udp_frame_parse, and
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

/* The payload lies inside the frame, after the headers of the frame's
 * family; a refusal has a name and leaves the outputs as they were. */
static void fuzz_parse(const uint8_t *data, size_t size)
{
    struct op_flow flow, unset;
    memset(&unset, 0xa5, sizeof unset);
    flow = unset;
    uint8_t mac[6] = {0};
    size_t off = SIZE_MAX, len = SIZE_MAX;
    unsigned v = op_udp_frame_parse(data, size, &flow, mac, &off, &len);
    require(v < OP_FRAME_VERDICTS_);
    require(strcmp(op_frame_verdict_str(v), "unknown") != 0);
    if (v != OP_FRAME_OK) {
        require(memcmp(&flow, &unset, sizeof flow) == 0 && off == SIZE_MAX && len == SIZE_MAX);
        return;
    }
    require(flow.src.family == flow.dst.family);
    require(off >= op_udp_frame_hdr_len(flow.dst.family) && off <= size && len <= size - off);
    require(memcmp(mac, data + 6, 6) == 0);
}

/* The whole-frame view agrees with the UDP parse, and every offset it
 * gives lies inside the frame. */
static void fuzz_view(const uint8_t *data, size_t size)
{
    struct op_flow flow;
    uint8_t mac[6];
    size_t off = 0, len = 0;
    struct op_frame_info info;
    unsigned v = op_frame_parse(data, size, &info);
    require(v == info.udp && v == op_udp_frame_parse(data, size, &flow, mac, &off, &len));
    require(info.kind <= OP_FRAME_KIND_IPV6 && info.l3_off <= size && info.l4_off <= size);
    require(info.kind == OP_FRAME_KIND_OTHER || size >= OP_ETH_HDR_LEN);
    if (v == OP_FRAME_OK)
        require(info.payload_off == off && info.payload_len == len && op_flow_eq(&info.flow, &flow));
    /* a hop: refused untouched, or the TTL one less and the verdict kept */
    static uint8_t copy[4096];
    static const uint8_t hop_mac[6] = {2, 0, 0, 0, 0, 9};
    if (size > sizeof copy)
        return;
    /* a queue's CE mark: refused untouched, or the frame parses alike with CE */
    memcpy(copy, data, size);
    if (op_frame_mark_ce(copy, size)) {
        struct op_frame_info marked;
        require(op_frame_parse(copy, size, &marked) == v || info.kind == OP_FRAME_KIND_OTHER);
        require(info.kind == OP_FRAME_KIND_OTHER || marked.ecn == OP_ECN_CE);
    } else {
        require(memcmp(copy, data, size) == 0);
    }
    memcpy(copy, data, size);
    if (!op_frame_route(copy, size, &info, hop_mac, hop_mac)) {
        require(memcmp(copy, data, size) == 0);
        return;
    }
    struct op_frame_info after;
    require(op_frame_parse(copy, size, &after) == v && after.ttl + 1 == info.ttl);
}

/* Whatever we build parses back to the flow and payload we built it for,
 * in either family: the addresses are the input's first 4 or 16 bytes
 * each, then the ports, the TOS and the payload. */
static void fuzz_round_trip(const uint8_t *data, size_t size, unsigned family)
{
    static uint8_t frame[OP_UDP6_FRAME_HDR_LEN + 4096];
    size_t alen = family == OP_AF_IPV6 ? 16 : 4, lead = 2 * alen + 5;
    size_t hdr = op_udp_frame_hdr_len(family);
    if (size < lead || size - lead > sizeof frame - hdr)
        return;
    struct op_flow flow = {.src_port = (uint16_t)(data[2 * alen] << 8 | data[2 * alen + 1]),
                           .dst_port = (uint16_t)(data[2 * alen + 2] << 8 | data[2 * alen + 3])};
    if (family == OP_AF_IPV6) {
        flow.src = op_addr_ipv6(data);
        flow.dst = op_addr_ipv6(data + 16);
    } else {
        flow.src = op_addr_ipv4((uint32_t)data[0] << 24 | data[1] << 16 | data[2] << 8 | data[3]);
        flow.dst = op_addr_ipv4((uint32_t)data[4] << 24 | data[5] << 16 | data[6] << 8 | data[7]);
    }
    struct op_frame_l2 l2 = {.tos = data[lead - 1]};
    memcpy(l2.src_mac, data, 6);
    memcpy(l2.dst_mac, data + 6, 6);
    size_t payload_len = size - lead;
    memcpy(frame + hdr, data + lead, payload_len);
    size_t n = op_udp_frame_build(frame, sizeof frame, &flow, &l2, payload_len);
    require(n == hdr + payload_len);
    struct op_flow got;
    uint8_t mac[6];
    size_t off = 0, len = 0;
    require(op_udp_frame_parse(frame, n, &got, mac, &off, &len) == OP_FRAME_OK);
    require(op_flow_eq(&got, &flow) && memcmp(&got, &flow, sizeof got) == 0);
    require(memcmp(mac, l2.src_mac, 6) == 0);
    require(off == hdr && len == payload_len);
    require(memcmp(frame + off, data + lead, len) == 0);
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
        struct op_addr ours = kind % 2 ? op_addr_ipv6(ip6) : op_addr_ipv4(0xc6120001u);
        size_t r = op_frame_control_reply(frame, size, size + 64, &ours, mac);
        require(r <= size + 64 && (r != 0 || memcmp(frame, before, sizeof frame) == 0));
        memcpy(frame, before, sizeof frame);
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

/* A backend's name: parsed or refused with a reason, never past the text;
 * what parses names an interface that fits and 1-64 queues or none. */
static void fuzz_spec(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), why[96];
    require(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    struct op_io_spec sp;
    why[0] = '\0';
    if (op_io_spec_parse(text, &sp, why, sizeof why))
        require(strlen(sp.ifname) < sizeof sp.ifname && sp.queues <= 64);
    else
        require(why[0] != '\0');
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_spec(data, size);
    fuzz_parse(data, size);
    fuzz_view(data, size);
    fuzz_round_trip(data, size, OP_AF_IPV4);
    fuzz_round_trip(data, size, OP_AF_IPV6);
    fuzz_replies(data, size);
    fuzz_arp(data, size);
    return 0;
}
