/* offpath wire: INC: in-network compute packets (offpath/wire.h includes every part;
 * docs/wire.md). */
#ifndef OFFPATH_WIRE_INC_H
#define OFFPATH_WIRE_INC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/wire/roce.h"
#include "offpath/wire/red.h"

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
/* Largest data payload one packet carries: a chunk that fills a jumbo frame
 * (MTU 9000). RoCE caps a UD SEND at its 4096-byte MTU, but only switches
 * and leaders read INC packets, and on the namespace topology 8 KiB chunks
 * took 15-25 % less time at 1 MiB than 4 KiB ones (per-frame costs:
 * docs/PERFORMANCE.md). Leaders ask for what their MTU allows. */
#define OP_INC_MAX_DATA 8192
#define OP_INC_MAX_PKT (OP_INC_PREFIX_LEN + OP_INC_MAX_DATA + OP_ICRC_LEN)

enum op_inc_kind {
    OP_INC_KIND_DATA = 1, /* a contribution, a partial result, or a result */
    OP_INC_KIND_CTRL = 2, /* control payload follows */
};

enum op_inc_flag {
    OP_INC_F_RESULT = 0x01, /* data travelling down: the finished result */
    OP_INC_F_RETX = 0x02,   /* sender retransmits after a timeout */
    /* a queue on the round's way marked it (CE, then FECN at the switch):
     * set on the partial going up and on the result coming down, which
     * tells the leaders to narrow their windows (docs/inc.md) */
    OP_INC_F_CONGESTED = 0x04,
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

#endif
