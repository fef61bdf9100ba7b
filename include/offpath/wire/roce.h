/* offpath wire: RoCEv2 transport headers (BTH, RETH, AETH, DETH, ImmDt) and the ICRC
 * (offpath/wire.h includes every part; docs/wire.md). */
#ifndef OFFPATH_WIRE_ROCE_H
#define OFFPATH_WIRE_ROCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/wire/addr.h"

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
/* Where the BTH's congestion bits sit, for those who mark a packet in
 * place (an ICRC-masked byte: marking keeps it valid). */
#define OP_BTH_FECN_BYTE 4
#define OP_BTH_FECN_BIT 0x80u
#define OP_BTH_BECN_BIT 0x40u

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

/* ICRC over the IP pseudo-frame of the flow's family (IPv4 as Linux sends
 * from an unconnected DF socket; IPv6 with no extension header) plus the
 * RoCEv2 bytes (BTH .. pad, without the ICRC itself). */
OP_API uint32_t op_icrc_flow(const struct op_flow *flow, const uint8_t *roce, size_t len);
/* The same for the bytes roce[0..at) ext[0..ext_len) roce[at..len) (a
 * payload sent from where it lies, op_pkt's ext; at past the BTH). */
OP_API uint32_t op_icrc_flow_ext(const struct op_flow *flow, const uint8_t *roce, size_t len,
                                 size_t at, const uint8_t *ext, size_t ext_len);
/* ICRC of a captured packet starting at its IP header (IPv4, or IPv6 with UDP
 * next): len covers IP header .. end of the ICRC; the ICRC field is excluded. */
OP_API op_status_t op_icrc_ip_frame(const uint8_t *ip, size_t len, uint32_t *icrc);
/* Append the ICRC (little-endian) after len bytes; returns the new length or 0
 * if cap is too small. */
OP_API size_t op_icrc_seal(const struct op_flow *flow, uint8_t *roce, size_t len, size_t cap);
/* Check the trailing ICRC of a RoCEv2 UDP payload of len bytes. */
OP_API bool op_icrc_check(const struct op_flow *flow, const uint8_t *roce, size_t len);

/* The CRC register after the pseudo-headers (the 8 ones standing for the
 * LRH, the masked IP and UDP headers) of packets of one flow, for the last
 * OP_ICRC_MEMO_LENS packet lengths, kept by a caller that sends or takes
 * many such packets (a QP: its data packets and its ACKs): the same results
 * as op_icrc_flow and op_icrc_check, with that part computed once. Zero it
 * before its first use; any flow and length may come, a new one replaces
 * the oldest. */
#define OP_ICRC_MEMO_LENS 2
struct op_icrc_memo {
    struct op_flow flow;
    size_t len[OP_ICRC_MEMO_LENS]; /* 0: unused (no packet is that short) */
    uint32_t reg[OP_ICRC_MEMO_LENS];
    unsigned next; /* the slot a new length takes */
};
OP_API uint32_t op_icrc_flow_memo(struct op_icrc_memo *m, const struct op_flow *flow,
                                  const uint8_t *roce, size_t len);
OP_API bool op_icrc_check_memo(struct op_icrc_memo *m, const struct op_flow *flow,
                               const uint8_t *roce, size_t len);
/* The CRC (zlib's form: op_crc32 goes on from it) after the pseudo-headers
 * and the first k bytes of a len-byte RoCEv2 packet of the flow, 5 <= k <=
 * OP_BTH_LEN (BTH byte 4, masked, inside): op_crc32(head, roce + k, len - k) is
 * op_icrc_flow_memo's result. A sender of packets alike up to their PSN
 * (BTH bytes 8..11) keeps the head of k = 8 and goes on from there. */
OP_API uint32_t op_icrc_flow_memo_head(struct op_icrc_memo *m, const struct op_flow *flow,
                                       const uint8_t *roce, size_t len, size_t k);
/* op_icrc_flow_ext with the memo: the bytes roce[0..at) ext[0..ext_len)
 * roce[at..len), at past the BTH (else the ext is ignored, as there). */
OP_API uint32_t op_icrc_flow_ext_memo(struct op_icrc_memo *m, const struct op_flow *flow,
                                      const uint8_t *roce, size_t len, size_t at,
                                      const uint8_t *ext, size_t ext_len);
/* The check of a packet received in those pieces, its ICRC the last 4
 * bytes of roce[at..len). */
OP_API bool op_icrc_check_ext_memo(struct op_icrc_memo *m, const struct op_flow *flow,
                                   const uint8_t *roce, size_t len, size_t at,
                                   const uint8_t *ext, size_t ext_len);

#endif
