/* The pcap file format (nanosecond variant) around RoCEv2 packets. Fields are
 * written little-endian whatever the host, so a file's bytes depend only on
 * what was captured: readers learn the order from the magic. */
#include <string.h>

#include "offpath/wire.h"

#define PCAP_MAGIC_NS 0xa1b23c4du
#define PCAP_VERSION_MAJOR 2
#define PCAP_VERSION_MINOR 4
#define LINKTYPE_ETHERNET 1

static uint8_t *put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    return p + 2;
}

static uint8_t *put_le32(uint8_t *p, uint32_t v)
{
    return put_le16(put_le16(p, (uint16_t)v), (uint16_t)(v >> 16));
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void op_pcap_file_header(uint8_t out[OP_PCAP_FILE_HDR_LEN])
{
    uint8_t *p = put_le32(out, PCAP_MAGIC_NS);
    p = put_le16(p, PCAP_VERSION_MAJOR);
    p = put_le16(p, PCAP_VERSION_MINOR);
    p = put_le32(p, 0); /* thiszone: times are UTC */
    p = put_le32(p, 0); /* sigfigs */
    p = put_le32(p, OP_PCAP_SNAPLEN);
    put_le32(p, LINKTYPE_ETHERNET);
}

bool op_pcap_file_header_ok(const uint8_t in[OP_PCAP_FILE_HDR_LEN])
{
    uint8_t ours[OP_PCAP_FILE_HDR_LEN];
    op_pcap_file_header(ours);
    return memcmp(in, ours, sizeof ours) == 0;
}

void op_pcap_mac_of(uint32_t ip, uint8_t mac[6])
{
    mac[0] = 0x02; /* locally administered, unicast */
    mac[1] = 0x00;
    mac[2] = (uint8_t)(ip >> 24);
    mac[3] = (uint8_t)(ip >> 16);
    mac[4] = (uint8_t)(ip >> 8);
    mac[5] = (uint8_t)ip;
}

/* An IPv6 host's made-up MAC: from the last 4 bytes of its address. */
static void mac_of_addr(const struct op_addr *a, uint8_t mac[6])
{
    const uint8_t *t = a->v6 + 12;
    op_pcap_mac_of(op_addr_is_ipv6(a) ? (uint32_t)t[0] << 24 | t[1] << 16 | t[2] << 8 | t[3]
                                      : a->v4,
                   mac);
}

bool op_pcap_record_header(uint8_t out[OP_PCAP_REC_HDR_LEN], uint64_t ts_ns, size_t frame_len)
{
    if (frame_len > OP_PCAP_SNAPLEN)
        return false;
    uint8_t *p = put_le32(out, (uint32_t)(ts_ns / 1000000000u));
    p = put_le32(p, (uint32_t)(ts_ns % 1000000000u));
    p = put_le32(p, (uint32_t)frame_len); /* captured: all of it */
    put_le32(p, (uint32_t)frame_len);
    return true;
}

size_t op_pcap_packet_headers(uint8_t out[OP_PCAP_PKT_HDR_MAX], uint64_t ts_ns,
                              const struct op_flow *flow, size_t payload_len)
{
    struct op_frame_l2 l2 = {.tos = 0};
    mac_of_addr(&flow->src, l2.src_mac);
    mac_of_addr(&flow->dst, l2.dst_mac);
    size_t hdr = op_udp_frame_hdr_len(flow->dst.family);
    if (op_udp_frame_headers(out + OP_PCAP_REC_HDR_LEN, flow, &l2, payload_len) == 0)
        return 0;
    (void)op_pcap_record_header(out, ts_ns, hdr + payload_len); /* below the snap length */
    return OP_PCAP_REC_HDR_LEN + hdr;
}

op_status_t op_pcap_record_parse(const uint8_t in[OP_PCAP_REC_HDR_LEN], uint64_t *ts_ns,
                                 uint32_t *caplen)
{
    uint32_t sec = get_le32(in), nsec = get_le32(in + 4), cap = get_le32(in + 8);
    if (nsec >= 1000000000u || cap > OP_PCAP_SNAPLEN || cap > get_le32(in + 12))
        return OP_ERR_MALFORMED;
    *ts_ns = (uint64_t)sec * 1000000000u + nsec;
    *caplen = cap;
    return OP_OK;
}
