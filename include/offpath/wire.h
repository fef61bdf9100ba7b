/* offpath wire formats: RoCEv2 transport headers with the ICRC, the INC
 * (in-network compute) header and control payload and the hostar header
 * carried in RoCEv2 UD sends, and the rescue messages.
 * Pure functions over byte buffers: no sockets, no clocks, no allocation.
 * Every decoder bounds-checks and returns an error instead of reading past the
 * buffer. docs/wire.md shows every byte. */
#ifndef OFFPATH_WIRE_H
#define OFFPATH_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

#define OP_ROCE_UDP_PORT 4791
#define OP_BTH_LEN 12
#define OP_RETH_LEN 16
#define OP_AETH_LEN 4
#define OP_DETH_LEN 8
#define OP_IMMDT_LEN 4
#define OP_ICRC_LEN 4

enum op_roce_opcode {
    OP_RC_SEND_FIRST = 0x00,
    OP_RC_SEND_MIDDLE = 0x01,
    OP_RC_SEND_LAST = 0x02,
    OP_RC_SEND_LAST_IMM = 0x03,
    OP_RC_SEND_ONLY = 0x04,
    OP_RC_SEND_ONLY_IMM = 0x05,
    OP_RC_WRITE_FIRST = 0x06,
    OP_RC_WRITE_MIDDLE = 0x07,
    OP_RC_WRITE_LAST = 0x08,
    OP_RC_WRITE_LAST_IMM = 0x09,
    OP_RC_WRITE_ONLY = 0x0a,
    OP_RC_WRITE_ONLY_IMM = 0x0b,
    OP_RC_READ_REQUEST = 0x0c,
    OP_RC_READ_RESP_FIRST = 0x0d,
    OP_RC_READ_RESP_MIDDLE = 0x0e,
    OP_RC_READ_RESP_LAST = 0x0f,
    OP_RC_READ_RESP_ONLY = 0x10,
    OP_RC_ACK = 0x11,
    OP_RC_ATOMIC_ACK = 0x12,
    OP_RC_CMP_SWAP = 0x13,
    OP_RC_FETCH_ADD = 0x14,
    OP_UC_BASE = 0x20,
    OP_UD_SEND_ONLY = 0x64,
    OP_UD_SEND_ONLY_IMM = 0x65,
    OP_CNP = 0x81,
};

/* Base Transport Header, fields in host order. */
struct op_bth {
    uint8_t opcode;
    bool se, migreq;
    uint8_t padcnt; /* 0..3 */
    uint8_t tver;   /* 0..15 */
    uint16_t pkey;
    bool fecn, becn;
    uint32_t dest_qp; /* 24 bits */
    bool ackreq;
    uint32_t psn; /* 24 bits */
};

struct op_reth {
    uint64_t va;
    uint32_t rkey;
    uint32_t dma_len;
};

struct op_aeth {
    uint8_t syndrome;
    uint32_t msn; /* 24 bits */
};

struct op_deth {
    uint32_t qkey;
    uint32_t src_qp; /* 24 bits */
};

/* Encoders write exactly the header's length into out (caller sizes it). */
OP_API void op_bth_encode(const struct op_bth *h, uint8_t out[OP_BTH_LEN]);
OP_API op_status_t op_bth_decode(const uint8_t *buf, size_t len, struct op_bth *h);
OP_API void op_reth_encode(const struct op_reth *h, uint8_t out[OP_RETH_LEN]);
OP_API op_status_t op_reth_decode(const uint8_t *buf, size_t len, struct op_reth *h);
OP_API void op_aeth_encode(const struct op_aeth *h, uint8_t out[OP_AETH_LEN]);
OP_API op_status_t op_aeth_decode(const uint8_t *buf, size_t len, struct op_aeth *h);
OP_API void op_deth_encode(const struct op_deth *h, uint8_t out[OP_DETH_LEN]);
OP_API op_status_t op_deth_decode(const uint8_t *buf, size_t len, struct op_deth *h);
OP_API void op_immdt_encode(uint32_t imm, uint8_t out[OP_IMMDT_LEN]);
OP_API op_status_t op_immdt_decode(const uint8_t *buf, size_t len, uint32_t *imm);

/* zlib-compatible CRC-32 (reflected 0xEDB88320); crc starts at 0. */
OP_API uint32_t op_crc32(uint32_t crc, const void *data, size_t len);

/* The IPv4/UDP envelope of a RoCEv2 packet sent from an ordinary unconnected
 * UDP socket with DF set (Identification 0). Addresses and ports host order. */
struct op_flow {
    uint32_t src_ip, dst_ip;
    uint16_t src_port, dst_port;
};

/* ICRC over the IPv4 pseudo-frame built from flow plus the RoCEv2 bytes
 * (BTH .. pad, without the ICRC itself). */
OP_API uint32_t op_icrc_flow(const struct op_flow *flow, const uint8_t *roce, size_t len);
/* ICRC of a captured frame starting at its IPv4 header: ip points to the IPv4
 * header, len covers IP header .. end of the ICRC; the ICRC field is excluded. */
OP_API op_status_t op_icrc_ipv4_frame(const uint8_t *ip, size_t len, uint32_t *icrc);
/* Append the ICRC (little-endian) after len bytes; returns the new length or 0
 * if cap is too small. */
OP_API size_t op_icrc_seal(const struct op_flow *flow, uint8_t *roce, size_t len, size_t cap);
/* Check the trailing ICRC of a RoCEv2 UDP payload of len bytes. */
OP_API bool op_icrc_check(const struct op_flow *flow, const uint8_t *roce, size_t len);

/* Ethernet + IPv4 + UDP around a RoCEv2 payload, for backends that move
 * whole frames (AF_XDP). Built as Linux sends from an unconnected DF socket
 * (ID 0, DF, TTL 64; no UDP checksum, as RoCEv2 allows): the ICRC stays
 * valid. No VLAN tags, no IPv4 options on the way out. */
#define OP_ETH_HDR_LEN 14
#define OP_UDP_FRAME_HDR_LEN 42 /* Ethernet + IPv4 + UDP */
struct op_frame_l2 {
    uint8_t src_mac[6], dst_mac[6];
    uint8_t tos;
};
/* Writes the headers for payload_len bytes that the caller puts (or has put)
 * at frame + OP_UDP_FRAME_HDR_LEN; returns the frame's length, 0 if cap or
 * IPv4's 64 KiB is too small. */
OP_API size_t op_udp_frame_build(uint8_t *frame, size_t cap, const struct op_flow *flow,
                                 const struct op_frame_l2 *l2, size_t payload_len);
/* The same headers alone, into OP_UDP_FRAME_HDR_LEN bytes, for a writer that
 * keeps the payload where it is (a capture); 0 if IPv4's 64 KiB is too small. */
OP_API size_t op_udp_frame_headers(uint8_t *frame, const struct op_flow *flow,
                                   const struct op_frame_l2 *l2, size_t payload_len);
/* Why a frame is not a UDP/IPv4 datagram we take: the verdicts' names are
 * the backends' drop counters. */
enum op_frame_verdict {
    OP_FRAME_OK,
    OP_FRAME_SHORT,     /* ends inside a header */
    OP_FRAME_NOT_IPV4,  /* another EtherType (ARP, IPv6, a VLAN tag) */
    OP_FRAME_BAD_IPV4,  /* version, header length, checksum, total length */
    OP_FRAME_FRAGMENT,
    OP_FRAME_NOT_UDP,
    OP_FRAME_BAD_UDP,   /* UDP length disagrees with IPv4's */
    OP_FRAME_VERDICTS_
};
/* On OP_FRAME_OK: the flow (host order), the sender's MAC and where the UDP
 * payload lies; Ethernet padding after the IPv4 packet is ignored. Nothing
 * is written otherwise. */
OP_API unsigned op_udp_frame_parse(const uint8_t *frame, size_t len, struct op_flow *flow,
                                   uint8_t src_mac[6], size_t *payload_off, size_t *payload_len);
OP_API const char *op_frame_verdict_str(unsigned v);

/* ARP (RFC 826) and ICMP echo (RFC 792) for a kernel-bypass server that
 * answers for its own IPv4 address (host order) and MAC: each rewrites a
 * request frame into its reply in place and returns the reply's length, or
 * returns 0 and leaves the frame alone when it is no such request for ip. */
OP_API size_t op_arp_reply_in_place(uint8_t *frame, size_t len, uint32_t ip, const uint8_t mac[6]);
OP_API size_t op_icmp_echo_reply_in_place(uint8_t *frame, size_t len, uint32_t ip,
                                          const uint8_t mac[6]);

/* IPv6 (RFC 8200) for the same servers: UDP datagrams to their address,
 * and the neighbour advertisements (RFC 4861) and echo replies (RFC 4443)
 * a host owes. No extension header is followed (a fragment, or any other,
 * is not a datagram we take). Addresses in network order. The verdicts
 * are op_udp_frame_parse's (NOT_IPV4: another EtherType; BAD_IPV4: a bad
 * IPv6 header; BAD_UDP also for a zero UDP checksum, which IPv6 does not
 * allow; its value is not checked, as offloads leave it partial). */
#define OP_UDP6_FRAME_HDR_LEN 62 /* Ethernet + IPv6 + UDP */
struct op_flow6 {
    uint8_t src[16], dst[16];
    uint16_t src_port, dst_port; /* host order */
};
OP_API unsigned op_udp6_frame_parse(const uint8_t *frame, size_t len, struct op_flow6 *flow,
                                    uint8_t src_mac[6], size_t *payload_off, size_t *payload_len);
/* The headers (hop limit 64, the UDP checksum computed) for payload_len
 * bytes already at frame + OP_UDP6_FRAME_HDR_LEN; the frame's length. */
OP_API size_t op_udp6_frame_headers(uint8_t *frame, const struct op_flow6 *flow,
                                    const struct op_frame_l2 *l2, size_t payload_len);
/* A neighbour solicitation for ip6 (hop limit 255, checksum right) turned
 * into the solicited advertisement with our MAC (to all nodes for
 * duplicate address detection); the reply may be longer than the request,
 * so cap is the frame buffer's size. 0 and the frame untouched otherwise. */
OP_API size_t op_ndp_advert_in_place(uint8_t *frame, size_t len, size_t cap,
                                     const uint8_t ip6[16], const uint8_t mac[6]);
OP_API size_t op_icmp6_echo_reply_in_place(uint8_t *frame, size_t len, const uint8_t ip6[16],
                                           const uint8_t mac[6]);

/* The pcap file format with nanosecond timestamps (magic 0xa1b23c4d, written
 * little-endian, link type Ethernet), as dumpcap writes it for DPDK ports:
 * each record one RoCEv2 packet in the frame op_udp_frame_headers builds, so
 * the IPv4 header is the one the ICRC was computed over (Identification 0)
 * and Wireshark checks it. The MACs are made up (op_pcap_mac_of). */
#define OP_PCAP_FILE_HDR_LEN 24
#define OP_PCAP_REC_HDR_LEN 16
#define OP_PCAP_PKT_HDR_LEN (OP_PCAP_REC_HDR_LEN + OP_UDP_FRAME_HDR_LEN)
#define OP_PCAP_SNAPLEN 65535 /* every IPv4 packet whole */
OP_API void op_pcap_file_header(uint8_t out[OP_PCAP_FILE_HDR_LEN]);
/* Is this the header op_pcap_file_header writes? (What merging reads back.) */
OP_API bool op_pcap_file_header_ok(const uint8_t in[OP_PCAP_FILE_HDR_LEN]);
/* The record header and Ethernet/IPv4/UDP headers of one packet of
 * payload_len bytes taken at ts_ns (CLOCK_REALTIME); the payload follows
 * them in the file. Returns OP_PCAP_PKT_HDR_LEN, 0 if the payload is too long. */
OP_API size_t op_pcap_packet_headers(uint8_t out[OP_PCAP_PKT_HDR_LEN], uint64_t ts_ns,
                                     const struct op_flow *flow, size_t payload_len);
/* A record header: its time and captured length; OP_ERR_MALFORMED when the
 * nanoseconds are 1e9 or more or the length is above OP_PCAP_SNAPLEN. */
OP_API op_status_t op_pcap_record_parse(const uint8_t in[OP_PCAP_REC_HDR_LEN], uint64_t *ts_ns,
                                        uint32_t *caplen);
/* A locally administered MAC for an IPv4 address (02:00 then its 4 bytes):
 * loopback has no MACs, and these tell the hosts apart in a capture. */
OP_API void op_pcap_mac_of(uint32_t ip, uint8_t mac[6]);

/* Reduction operations and element types as coded on the wire (op_code,
 * oper_and_type). The numbering is the bit position in the capability maps. */
enum op_red_op {
    OP_RED_SUM = 0,
    OP_RED_PROD,
    OP_RED_MIN,
    OP_RED_MAX,
    OP_RED_LAND,
    OP_RED_LOR,
    OP_RED_LXOR,
    OP_RED_BAND,
    OP_RED_BOR,
    OP_RED_BXOR,
    OP_RED_OP_COUNT_
};

enum op_red_type {
    OP_RED_INT8 = 0,
    OP_RED_INT16,
    OP_RED_INT32,
    OP_RED_INT64,
    OP_RED_UINT8,
    OP_RED_UINT16,
    OP_RED_UINT32,
    OP_RED_UINT64,
    OP_RED_FLOAT32,
    OP_RED_FLOAT64,
    OP_RED_TYPE_COUNT_
};

OP_API size_t op_red_type_size(unsigned type); /* 0 for an unknown type */
OP_API const char *op_red_type_name(unsigned type); /* "int8" .. "float64", NULL if unknown */
OP_API const char *op_red_op_name(unsigned op);     /* "sum" .. "bxor", NULL if unknown */
OP_API int op_red_type_parse(const char *name);     /* -1 if unknown */
OP_API int op_red_op_parse(const char *name);       /* -1 if unknown */
/* Bitwise ops on floating point make no sense (MPI forbids them too). */
OP_API bool op_red_valid(unsigned op, unsigned type);

/* ------------------------------------------------------------------------
 * INC: in-network compute packets. Carried as RoCEv2 UD SEND_ONLY
 * (BTH + DETH) to QP OP_INC_QPN with Q_Key OP_INC_QKEY; the INC header
 * follows the DETH, then the payload (elements in network byte order, or the
 * control payload), then the ICRC. */
#define OP_INC_TAG 0x11223344u   /* the seed's tag, first word of the header */
#define OP_INC_VERSION 1
#define OP_INC_QKEY 0x494e4321u  /* "INC!" */
#define OP_INC_QPN 0x00c0deu
#define OP_INC_HDR_LEN 36
#define OP_INC_CTRL_LEN 72
/* BTH + DETH + INC header: the fixed prefix of every INC packet. */
#define OP_INC_PREFIX_LEN (OP_BTH_LEN + OP_DETH_LEN + OP_INC_HDR_LEN)
#define OP_INC_MAX_DATA 4096 /* largest data payload one packet carries */
#define OP_INC_MAX_PKT (OP_INC_PREFIX_LEN + OP_INC_MAX_DATA + OP_ICRC_LEN)

enum op_inc_kind {
    OP_INC_KIND_DATA = 1, /* a contribution, a partial result, or a result */
    OP_INC_KIND_CTRL = 2, /* control payload follows */
};

enum op_inc_flag {
    OP_INC_F_RESULT = 0x01, /* data travelling down: the finished result */
    OP_INC_F_RETX = 0x02,   /* sender retransmits after a timeout */
};

/* Reasons a switch gives when it refuses or drops (fail_cause, reason). */
enum op_inc_reason {
    OP_INC_R_NONE = 0,
    OP_INC_R_NO_GROUP = 1,    /* no free group id */
    OP_INC_R_NO_SLOT = 2,     /* no slot memory for the group's window */
    OP_INC_R_UNSUPPORTED = 3, /* op, type, size or member count not supported */
    OP_INC_R_BAD_TOKEN = 4,
    OP_INC_R_NOT_MEMBER = 5,
    OP_INC_R_MALFORMED = 6,
    OP_INC_R_EXPIRED = 7, /* lease ran out */
    OP_INC_R_CONFLICT = 8, /* inconsistent membership or parameters */
    OP_INC_R_COUNT_
};
OP_API const char *op_inc_reason_str(unsigned reason);

/* Control message types (low nibble of query_notify_hop; high nibble counts
 * the switches the message passed). */
enum op_inc_ctrl_type {
    OP_INC_CTRL_QUERY = 1,
    OP_INC_CTRL_NOTIFY = 2,
    OP_INC_CTRL_REFUSE = 3,
    OP_INC_CTRL_KILL = 4,
};

/* The INC header, host order. group_id is the seed's comm_id, op the op_code,
 * dtype the oper_and_type, count the pkt_para_num, req_id the seed's 8-bit
 * round counter (always seq & 0xff here). */
struct op_inc_hdr {
    uint8_t version;
    uint8_t kind;
    uint8_t flags;
    uint8_t reason;
    uint16_t group_id;
    uint8_t op;
    uint8_t dtype;
    uint32_t src_rank;
    uint64_t token;
    uint32_t seq;
    uint16_t slot;
    uint16_t count;
    uint8_t req_id;
};

/* The control payload: every field of the seed's control packet, plus ours. */
struct op_inc_ctrl {
    uint8_t sup_mpi_type;
    uint8_t fail_cause;     /* enum op_inc_reason */
    uint8_t master_num;     /* 1 Node mode, 2 Socket mode */
    uint8_t query_notify_hop;
    uint8_t sup_comm_type;  /* bit 0: allreduce */
    uint16_t sup_allreduce_op; /* bit per enum op_red_op */
    uint16_t sup_data_type;    /* bit per enum op_red_type */
    uint16_t sup_max_data_size; /* bytes of data one packet may carry */
    uint16_t global_group_size;
    uint16_t local_group_size;
    uint32_t true_comm_id;
    uint32_t ava_grp_num;   /* free groups on the SPINE the query crossed */
    uint32_t dst_rank;
    uint32_t tor1_ip, spine_ip, tor2_ip;
    uint32_t job_id;
    uint32_t c_id;
    uint32_t world_rank;
    /* offpath additions */
    uint32_t dst_ip;        /* host that the message is for (the master, or a member) */
    uint32_t src_ip;        /* host that sent the query */
    uint16_t window;        /* slots per group: smallest over the tree */
    uint16_t max_children;  /* contributors one switch aggregates: smallest over the tree */
    uint32_t lease_ms;      /* group freed after this long without traffic */
};

OP_API void op_inc_hdr_encode(const struct op_inc_hdr *h, uint8_t out[OP_INC_HDR_LEN]);
OP_API op_status_t op_inc_hdr_decode(const uint8_t *buf, size_t len, struct op_inc_hdr *h);
OP_API void op_inc_ctrl_encode(const struct op_inc_ctrl *c, uint8_t out[OP_INC_CTRL_LEN]);
OP_API op_status_t op_inc_ctrl_decode(const uint8_t *buf, size_t len, struct op_inc_ctrl *c);

/* A decoded INC packet: views into the caller's buffer. A control packet is
 * valid only with a valid control payload, so op_inc_decode decodes it, and
 * every receiver reads ctrl instead of decoding the payload again. */
struct op_inc_pkt {
    struct op_bth bth;
    struct op_deth deth;
    struct op_inc_hdr hdr;
    const uint8_t *payload; /* data elements (network order) or control payload */
    size_t payload_len;
    struct op_inc_ctrl ctrl; /* hdr.kind == OP_INC_KIND_CTRL: the payload decoded; else zero */
};

/* Is this RoCEv2 UDP payload an INC packet? Checks opcode, QP and Q_Key only;
 * cheap enough to classify every packet a switch receives. */
OP_API bool op_inc_is_inc(const uint8_t *roce, size_t len);
/* Decode a whole INC packet (ICRC present but not checked here: that needs
 * the flow). Data packets must carry exactly count elements of dtype; control
 * packets exactly OP_INC_CTRL_LEN bytes. */
OP_API op_status_t op_inc_decode(const uint8_t *roce, size_t len, struct op_inc_pkt *pkt);
/* Build BTH + DETH + INC header + payload into out (no ICRC). psn goes into
 * the BTH. Returns bytes written, 0 if cap is too small. */
OP_API size_t op_inc_encode(const struct op_inc_hdr *h, uint32_t psn, const void *payload,
                            size_t payload_len, uint8_t *out, size_t cap);

/* ------------------------------------------------------------------------
 * hostar (offpath/hostar.h): the host allreduce's packets, leader to leader.
 * RoCEv2 UD SEND_ONLY (BTH + DETH) to QP OP_HAR_QPN with Q_Key OP_HAR_QKEY,
 * as INC packets but to a QP of their own (op_inc_is_inc never takes them),
 * then the hostar header, the payload, the pad and the ICRC. */
#define OP_HAR_QPN 0x00a11au     /* destination and source QP */
#define OP_HAR_QKEY 0x48415221u  /* "HAR!" */
#define OP_HAR_VERSION 1
#define OP_HAR_HDR_LEN 48
#define OP_HAR_PREFIX_LEN (OP_BTH_LEN + OP_DETH_LEN + OP_HAR_HDR_LEN)
#define OP_HAR_MAX_DATA 4096
#define OP_HAR_MAX_PKT (OP_HAR_PREFIX_LEN + OP_HAR_MAX_DATA + OP_ICRC_LEN)

enum op_har_kind {
    OP_HAR_KIND_DATA = 1, /* count elements of the vector at offset, for step */
    OP_HAR_KIND_ACK = 2,  /* only the ack fields: no data went the other way in time */
};

enum op_har_flag {
    OP_HAR_F_ACK = 0x01, /* ack and sack are valid (always on an ACK) */
};

/* The hostar header, host order. tsn numbers the packets src sends dst, over
 * the whole life of the session (across calls), as an RC queue pair's PSN;
 * ack and sack acknowledge the stream dst -> src, riding on data when there
 * is some. */
struct op_har_hdr {
    uint8_t version, kind, op, dtype;
    uint32_t session; /* the communicator: same on every leader */
    uint16_t src, dst; /* leader ranks */
    uint32_t tsn;
    uint32_t call;    /* data: the allreduce's number on this session (from 1) */
    uint16_t step;    /* data: the algorithm's step that sent it */
    uint16_t count;   /* data: elements in the payload */
    uint32_t offset;  /* data: element offset of the payload in the vector */
    uint32_t total;   /* data: elements of the whole vector */
    uint8_t flags;    /* enum op_har_flag */
    uint32_t ack;     /* every number below it arrived */
    uint64_t sack;    /* bit i: number ack + i arrived */
};

struct op_har_pkt {
    struct op_bth bth;
    struct op_har_hdr hdr;
    const uint8_t *payload; /* data: elements in network order */
    size_t payload_len;
};

/* Decode a whole packet (ICRC present, not checked: that needs the flow).
 * OP_ERR_TRUNCATED or OP_ERR_MALFORMED as docs/wire.md section 11 lists. */
OP_API op_status_t op_har_decode(const uint8_t *roce, size_t len, struct op_har_pkt *out);
/* Write BTH + DETH + header for a payload of payload_len bytes, and the zero
 * pad after where the payload goes (at out + OP_HAR_PREFIX_LEN, the caller's
 * to fill). Returns the length without the ICRC, or 0 if cap is too small. */
OP_API size_t op_har_frame(const struct op_har_hdr *h, size_t payload_len, uint8_t *out,
                           size_t cap);
/* The session a packet names, for a driver with several engines on one
 * socket; false if it is no hostar packet. Checks the envelope and the PSN,
 * not the rest of the header. */
OP_API bool op_har_session_of(const uint8_t *roce, size_t len, uint32_t *session);
/* Put an ack (OP_HAR_F_ACK, ack, sack) on a packet op_har_frame wrote, so a
 * retransmission carries the newest ack; its ICRC is to be sealed again. */
OP_API void op_har_stamp_ack(uint8_t *roce, uint32_t ack, uint64_t sack);

/* ---- rescue messages (offpath/rescue.h): leaders of a group telling each
 * other where they stand on a switch call, and handing over a saved result.
 * Plain UDP, big-endian: magic "OPRS", version, type, state, 0, job, comm,
 * nonce, seq (8), completed (8), offset, total, len, then len bytes. */
/* Where a leader stands on one group. */
enum op_rsc_state {
    OP_RSC_IDLE,       /* between calls: completed calls 1..completed */
    OP_RSC_IN_CALL,    /* in call seq, waiting on the switch */
    OP_RSC_GAVE_UP,    /* gave call seq up: redoes it once every leader has */
    OP_RSC_UNKNOWN,    /* no such group here (not created yet) */
    OP_RSC_STATES_
};

enum op_rsc_type {
    OP_RSC_STATUS_REQ = 1, /* where do you stand? (carries the asker's state) */
    OP_RSC_STATUS = 2,
    OP_RSC_FETCH_REQ = 3,  /* the result of call seq from offset */
    OP_RSC_DATA = 4,       /* len bytes of it at offset (len 0: not held) */
};

#define OP_RSC_HDR_LEN 48
#define OP_RSC_MAX_DATA 8192
#define OP_RSC_MAX_MSG (OP_RSC_HDR_LEN + OP_RSC_MAX_DATA)

struct op_rsc_msg {
    uint8_t type, state;
    uint32_t job, comm, nonce;
    uint64_t seq, completed;
    uint32_t offset, total, len;
    const uint8_t *data; /* decode: points into the buffer */
};

/* Returns the bytes written (0 if cap is too small or a field is invalid). */
OP_API size_t op_rsc_encode(const struct op_rsc_msg *m, uint8_t *out, size_t cap);
/* OP_ERR_TRUNCATED or OP_ERR_MALFORMED with the reason counted by the caller. */
OP_API op_status_t op_rsc_decode(const uint8_t *buf, size_t len, struct op_rsc_msg *out);

/* ---- DNS messages (RFC 1035 section 4), the bytes only: header, names
 * with compression, questions and resource records. The responder
 * (offpath/dns.h) builds on these. Names come out uncompressed in wire form
 * (length-prefixed labels, root last), case kept. */
#define OP_DNS_HDR_LEN 12
#define OP_DNS_NAME_MAX 255 /* octets of a wire-form name, root included */
#define OP_DNS_LABEL_MAX 63

struct op_dns_hdr {
    uint16_t id, flags, qdcount, ancount, nscount, arcount;
};

/* Why a DNS message was refused; each is a counter of the responder. */
enum op_dns_werr {
    OP_DNS_W_OK,
    OP_DNS_W_TRUNCATED,   /* the message ends inside a field or a name */
    OP_DNS_W_LABEL_TYPE,  /* a label length byte 0x40..0xbf: an oversized label or an unknown type */
    OP_DNS_W_PTR_FORWARD, /* a compression pointer to itself or further on */
    OP_DNS_W_PTR_LOOP,    /* a pointer back into the name being read: it would loop */
    OP_DNS_W_NAME_LONG,   /* more than 255 octets once decompressed */
    OP_DNS_W_RDATA_LEN,   /* RDLENGTH runs past the end of the message */
    OP_DNS_W_ERRS_
};
OP_API const char *op_dns_werr_str(int e);

OP_API op_status_t op_dns_hdr_decode(const uint8_t *msg, size_t len, struct op_dns_hdr *h);
OP_API void op_dns_hdr_encode(const struct op_dns_hdr *h, uint8_t out[OP_DNS_HDR_LEN]);
/* The name at *off of msg: every pointer must point before the place the
 * current run of labels started, so decoding always ends. On OP_DNS_W_OK,
 * name holds name_len octets and *off is past the name in the message. */
OP_API int op_dns_name_decode(const uint8_t *msg, size_t len, size_t *off,
                              uint8_t name[OP_DNS_NAME_MAX], size_t *name_len);

struct op_dns_rr {
    uint8_t name[OP_DNS_NAME_MAX];
    size_t name_len;
    uint16_t type, cls;
    uint32_t ttl;
    uint16_t rdlen;
    size_t rdata_off; /* where the RDATA starts in the message */
};
/* A question (no TTL, no RDATA) or a whole resource record at *off. */
OP_API int op_dns_question_decode(const uint8_t *msg, size_t len, size_t *off,
                                  struct op_dns_rr *q);
OP_API int op_dns_rr_decode(const uint8_t *msg, size_t len, size_t *off, struct op_dns_rr *rr);


/* A bounded output buffer for encoders: an append that would pass cap
 * fails and writes nothing, so a caller can try a record and fall back
 * (DNS truncation) with the buffer as it was. */
struct op_wbuf {
    uint8_t *buf;
    size_t len, cap;
};
OP_API bool op_wbuf_put(struct op_wbuf *w, const void *p, size_t n);
/* v's low n bytes (1..8), big-endian */
OP_API bool op_wbuf_put_be(struct op_wbuf *w, uint64_t v, size_t n);

#endif
