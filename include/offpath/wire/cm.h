/* InfiniBand communication management over RoCEv2 (IBTA chapter 12, annex
 * A17): the CM MADs REQ, REP, RTU and REJ that rdma_cm exchanges to connect
 * a QP, and SIDR_REQ / SIDR_REP (12.11) that resolve a UD peer's QPN and
 * Q_Key from a service ID, carried as UD SEND_ONLY packets to the GSI QP (QP 1, Q_Key
 * 0x80010000) on UDP 4791. Decoding goes through the checked cursor and
 * names what is wrong (op_cm_err); the field layouts are the IBTA's (a
 * capture dissects in tshark as InfiniBand CM). Kept apart from wire.h so
 * each protocol has its own header. */
#ifndef OFFPATH_WIRE_CM_H
#define OFFPATH_WIRE_CM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/wire.h"

#define OP_CM_MAD_LEN 256
#define OP_CM_PKT_LEN (OP_BTH_LEN + OP_DETH_LEN + OP_CM_MAD_LEN + OP_ICRC_LEN)
#define OP_CM_GSI_QPN 1
#define OP_CM_GSI_QKEY 0x80010000u
#define OP_CM_PRIVATE_MAX 224 /* RTU's; REQ 92, REP 196, REJ 148, SIDR_REQ 216, SIDR_REP 136 */
#define OP_CM_SERVICE_RDMA_TCP 0x0000000001060000ull /* rdma_cm's RDMA_PS_TCP, | port */
#define OP_CM_SERVICE_RDMA_UDP 0x0000000001110000ull /* RDMA_PS_UDP (UD QPs), | port */
#define OP_CM_SIDR_INFO_LEN 72 /* SIDR_REP's additional information (ClassPortInfo) */

enum op_cm_attr {
    OP_CM_REQ = 0x0010,
    OP_CM_MRA = 0x0011,
    OP_CM_REJ = 0x0012,
    OP_CM_REP = 0x0013,
    OP_CM_RTU = 0x0014,
    OP_CM_SIDR_REQ = 0x0017, /* tshark: ServiceIDResReq */
    OP_CM_SIDR_REP = 0x0018, /* ServiceIDResReqResp */
};

/* SIDR_REP's status (IBTA table 111; rdma_cm's ib_cm_sidr_status) */
enum op_cm_sidr_status {
    OP_CM_SIDR_OK = 0,              /* the QPN and Q_Key are valid */
    OP_CM_SIDR_UNSUPPORTED = 1,     /* service ID not supported: no one listens for it */
    OP_CM_SIDR_REJECT = 2,          /* the service provider rejected the request */
    OP_CM_SIDR_NO_QP = 3,           /* no QP available */
    OP_CM_SIDR_REDIRECT = 4,        /* (not sent: no ClassPortInfo to redirect to) */
    OP_CM_SIDR_BAD_VERSION = 5,     /* the requested version is not supported */
};

/* Why a packet is not a CM message we take (a counter each in the CM). */
#define OP_CM_ERRS(X)                                                                              \
    X(ok)                                                                                          \
    X(length)    /* not exactly BTH + DETH + 256-byte MAD + ICRC */                                \
    X(bth)       /* not UD SEND_ONLY to QP 1 with the default P_Key, or TVer not 0 */              \
    X(deth)      /* not the GSI Q_Key from QP 1 */                                                 \
    X(icrc)                                                                                        \
    X(version)   /* MAD base version not 1, or CM class version not 2 */                           \
    X(mgmt_class) /* not the CM class (0x07) */                                                    \
    X(method)    /* not Send (0x03) */                                                             \
    X(attribute) /* not REQ, REP, RTU, REJ, SIDR_REQ or SIDR_REP */                            \
    X(sidr)      /* SIDR_REP: a status past 5 or additional information past its 72 bytes */
enum op_cm_err {
#define OP_CM_ERR_ENUM_(n) OP_CM_E_##n,
    OP_CM_ERRS(OP_CM_ERR_ENUM_)
#undef OP_CM_ERR_ENUM_
        OP_CM_E_COUNT_
};
OP_API const char *op_cm_err_str(unsigned e);

/* One CM message; attr says which fields it carries (the rest are 0). */
struct op_cm_msg {
    uint16_t attr;
    uint64_t tid; /* the REQ's transaction ID; REP, RTU and REJ repeat it */
    uint32_t local_comm_id, remote_comm_id; /* REQ: remote 0; SIDR: local is the request ID */
    uint64_t service_id;                    /* REQ, SIDR_REQ, SIDR_REP */
    uint64_t ca_guid;                       /* REQ, REP */
    uint32_t qkey;                          /* REQ, REP, SIDR_REP */
    uint32_t qpn, psn;                      /* REQ, REP: 24 bits; SIDR_REP: qpn */
    uint8_t status;                         /* SIDR_REP: enum op_cm_sidr_status */
    uint8_t responder_resources, initiator_depth; /* REQ, REP */
    uint8_t transport;       /* REQ: 0 RC, 1 UC (2 bits) */
    uint8_t cm_resp_timeout; /* REQ: 5 bits, both timeouts */
    uint8_t retry_count;     /* REQ: 3 bits */
    uint8_t rnr_retry;       /* REQ, REP: 3 bits */
    uint16_t pkey;           /* REQ, SIDR_REQ */
    uint8_t path_mtu;        /* REQ: IB encoding, 1 = 256 .. 5 = 4096 */
    uint8_t max_cm_retries;  /* REQ: 4 bits */
    bool srq;                /* REQ, REP */
    uint8_t local_gid[16], remote_gid[16]; /* REQ's primary path (RoCEv2: ::ffff:IPv4) */
    uint8_t traffic_class, hop_limit;      /* REQ */
    uint8_t ack_timeout;      /* REQ: the primary path's local ACK timeout, 5 bits */
    uint8_t target_ack_delay; /* REP: 5 bits */
    uint16_t reason;          /* REJ */
    uint8_t private_data[OP_CM_PRIVATE_MAX]; /* as much as attr's MAD holds; zero padded */
};

OP_API size_t op_cm_private_len(uint16_t attr);
/* The 256-byte MAD; decode needs exactly that many bytes. */
OP_API void op_cm_mad_encode(const struct op_cm_msg *m, uint8_t out[OP_CM_MAD_LEN]);
OP_API op_status_t op_cm_mad_decode(const uint8_t *buf, size_t len, struct op_cm_msg *m,
                                    enum op_cm_err *why);
/* The whole RoCEv2 payload (BTH, DETH, MAD, ICRC over flow): returns its
 * length, 0 if cap is short. */
OP_API size_t op_cm_packet_encode(const struct op_flow *flow, uint32_t psn,
                                  const struct op_cm_msg *m, uint8_t *out, size_t cap);
OP_API op_status_t op_cm_packet_decode(const struct op_flow *flow, const uint8_t *roce,
                                       size_t len, struct op_cm_msg *m, enum op_cm_err *why);

#endif
