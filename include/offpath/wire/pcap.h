/* offpath wire: the pcap capture file format (offpath/wire.h includes every part; docs/wire.md). */
#ifndef OFFPATH_WIRE_PCAP_H
#define OFFPATH_WIRE_PCAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/wire/frame.h"

/* The pcap file format with nanosecond timestamps (magic 0xa1b23c4d, written
 * little-endian, link type Ethernet), as dumpcap writes it for DPDK ports:
 * each record one RoCEv2 packet in the frame op_udp_frame_headers builds for
 * its flow's family, so the IP header is the one the ICRC was computed over
 * (IPv4 Identification 0) and Wireshark checks it. The MACs are made up
 * (op_pcap_mac_of; from an IPv6 address's last 4 bytes). */
#define OP_PCAP_FILE_HDR_LEN 24
#define OP_PCAP_REC_HDR_LEN 16
#define OP_PCAP_PKT_HDR_LEN (OP_PCAP_REC_HDR_LEN + OP_UDP_FRAME_HDR_LEN) /* IPv4 */
#define OP_PCAP_PKT_HDR_MAX (OP_PCAP_REC_HDR_LEN + OP_UDP6_FRAME_HDR_LEN)
#define OP_PCAP_SNAPLEN 65535 /* every IPv4 packet whole */
OP_API void op_pcap_file_header(uint8_t out[OP_PCAP_FILE_HDR_LEN]);
/* Is this the header op_pcap_file_header writes? (What merging reads back.) */
OP_API bool op_pcap_file_header_ok(const uint8_t in[OP_PCAP_FILE_HDR_LEN]);
/* The record header and Ethernet/IP/UDP headers of one packet of
 * payload_len bytes taken at ts_ns (CLOCK_REALTIME); the payload follows
 * them in the file. Returns their length (OP_PCAP_PKT_HDR_LEN for IPv4), 0
 * if the payload is too long. */
OP_API size_t op_pcap_packet_headers(uint8_t out[OP_PCAP_PKT_HDR_MAX], uint64_t ts_ns,
                                     const struct op_flow *flow, size_t payload_len);
/* The record header of a whole frame of frame_len bytes (a frame backend's
 * frames are written as they are); false above OP_PCAP_SNAPLEN. */
OP_API bool op_pcap_record_header(uint8_t out[OP_PCAP_REC_HDR_LEN], uint64_t ts_ns,
                                  size_t frame_len);
/* A record header: its time and captured length; OP_ERR_MALFORMED when the
 * nanoseconds are 1e9 or more or the length is above OP_PCAP_SNAPLEN. */
OP_API op_status_t op_pcap_record_parse(const uint8_t in[OP_PCAP_REC_HDR_LEN], uint64_t *ts_ns,
                                        uint32_t *caplen);
/* A locally administered MAC for an IPv4 address (02:00 then its 4 bytes):
 * loopback has no MACs, and these tell the hosts apart in a capture. */
OP_API void op_pcap_mac_of(uint32_t ip, uint8_t mac[6]);

#endif
