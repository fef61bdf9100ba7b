/* offpath wire: hostar: the host allreduce's packets (offpath/wire.h includes every part;
 * docs/wire.md). */
#ifndef OFFPATH_WIRE_HAR_H
#define OFFPATH_WIRE_HAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/wire/roce.h"

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

#endif
