/* offpath software RoCEv2, connection management (part of offpath/rdma.h,
 * which includes it; including this alone is the same). */
#ifndef OFFPATH_RDMA_CM_H
#define OFFPATH_RDMA_CM_H

#include <stdint.h>

#include "offpath/rdma.h"

/* ---- connection management: rdma_cm's REQ / REP / RTU exchange (IBTA
 * chapter 12) as CM MADs to the GSI QP (QP 1) on the device's own address
 * and port (offpath/wire/cm.h). The CM is part of the device (created on
 * it, fed and timed by op_rdma_dev_input / _timer) and connects nothing
 * itself: each connection says what its side is (QPN, PSN, MTU, ...) and
 * learns the peer's; the caller then moves its QPs to RTR and RTS. */
struct op_rdma_cm;
#define OP_RDMA_CM_PRIVATE_MAX 92 /* what a REQ carries (SIDR_REQ 216, SIDR_REP 136) */
#define OP_RDMA_CM_UD 3           /* op_rdma_cm_side.transport of a UD QP */
struct op_rdma_cm_side {
    uint32_t qpn, psn;
    uint32_t mtu; /* bytes: 256 .. 4096 */
    uint8_t responder_resources, initiator_depth; /* verbs' max_dest_rd_atomic, max_rd_atomic */
    uint8_t retry_count, rnr_retry, timeout;      /* REQ only (the active side's) */
    /* REQ: the transport service type, 0 RC or 1 UC (the REQ's 2 bits); a
     * passive side REJects a REQ for another type than it listens with
     * (reason 9, invalid transport service type), taking no slot.
     * OP_RDMA_CM_UD: a UD QP, resolved by SIDR_REQ / SIDR_REP instead (no
     * REQ, REP or RTU): the active side learns the passive's qpn and qkey;
     * the passive side learns only the private data and the address (psn,
     * mtu and the rest are 0), as a SIDR_REQ carries no QPN. */
    uint8_t transport;
    uint32_t qkey; /* UD: what a SIDR_REP says */
    uint8_t private_data[OP_RDMA_CM_PRIVATE_MAX]; /* as rdma_cm's conn_param (zero padded) */
};
enum op_rdma_cm_state {
    OP_RDMA_CM_IDLE,
    OP_RDMA_CM_REQ_SENT,
    OP_RDMA_CM_REP_SENT,
    OP_RDMA_CM_ESTABLISHED,
    OP_RDMA_CM_FAILED,
};
struct op_rdma_cm_config {
    uint32_t nconn;       /* connections (one per QP) */
    uint64_t retry_ns;    /* a REQ or REP is sent again after this without an answer */
    uint32_t max_retries; /* then the connection fails, with a cause */
    /* rdma_cm's port: REQs carry service ID RDMA_PS_TCP | port (SIDR_REQs
     * RDMA_PS_UDP | port), and a passive side REJects one for another port
     * (reason 8, invalid service ID; a SIDR_REP with status 1, service ID
     * not supported), as rdma_cm refuses a connection no one listens for.
     * A REQ with no listener of its type left is REJected with reason 1 (no
     * QP available), a SIDR_REQ answered with status 3. 0: the device's
     * UDP port. */
    uint16_t service_port;
};
OP_API op_status_t op_rdma_cm_create(struct op_rdma_dev *dev, const struct op_rdma_cm_config *cfg,
                                     struct op_rdma_cm **out);
OP_API void op_rdma_cm_destroy(struct op_rdma_cm *cm);
/* The device's CM; NULL if none. */
OP_API const struct op_rdma_cm *op_rdma_dev_cm(const struct op_rdma_dev *dev);
/* Active: connection i sends its REQ to the peer's CM. */
OP_API op_status_t op_rdma_cm_connect(struct op_rdma_cm *cm, uint32_t i,
                                      const struct op_rdma_cm_side *mine, uint32_t peer_ip,
                                      uint16_t peer_port, uint64_t now, struct op_txq *out);
/* Passive: connection i answers the i-th new REQ to arrive with mine. */
OP_API op_status_t op_rdma_cm_listen(struct op_rdma_cm *cm, uint32_t i,
                                     const struct op_rdma_cm_side *mine);
OP_API enum op_rdma_cm_state op_rdma_cm_state(const struct op_rdma_cm *cm, uint32_t i);
/* A connection's peer once known (established, or a passive side's once
 * it answered the REQ: it may then bring its QP up before the RTU, as a
 * first packet on the QP stands for a lost RTU in the IBTA's rules): what
 * it said, and its address and port. */
OP_API op_status_t op_rdma_cm_peer(const struct op_rdma_cm *cm, uint32_t i,
                                   struct op_rdma_cm_side *peer, uint32_t *ip, uint16_t *port);
/* Why a connection failed; "" if it did not. */
OP_API const char *op_rdma_cm_error(const struct op_rdma_cm *cm, uint32_t i);

#define OP_RDMA_CM_COUNTERS(X)                                                                     \
    X(cm_pkts_in)                                                                                  \
    X(cm_pkts_out)                                                                                 \
    X(cm_resent)      /* REQs and REPs sent again for want of an answer */                        \
    X(cm_duplicates)  /* REQs and REPs seen before: answered again */                             \
    X(cm_unknown)     /* REP, RTU, REJ or SIDR_REP for no connection of ours, (SIDR_)REQ  \
                         with no slot or for another service (port) */                            \
    X(cm_malformed)   /* not a CM message we take (op_cm_err says why; op_rdma_cm_drops) */     \
    X(cm_rej_sent)    /* REJs, and SIDR_REPs that refuse */                                       \
    X(cm_rej_recv)    /* the same, received */
enum op_rdma_cm_counter {
#define OP_RDMA_CM_ENUM_(n) OP_RDMA_CM_C_##n,
    OP_RDMA_CM_COUNTERS(OP_RDMA_CM_ENUM_)
#undef OP_RDMA_CM_ENUM_
        OP_RDMA_CM_C_COUNT_
};
OP_API const char *op_rdma_cm_counter_name(unsigned c);
OP_API const uint64_t *op_rdma_cm_counters(const struct op_rdma_cm *cm);
/* By enum op_cm_err: why malformed packets were dropped. */
OP_API const uint64_t *op_rdma_cm_drops(const struct op_rdma_cm *cm);

/* ---- a listener in front of several CMs: a server of several clients
 * has one UDP 4791 and a device (with its CM) per client, each on a port
 * of its own. A new REQ for the listener's service (RDMA_PS_TCP | port)
 * takes the next client, whose CM gets it and answers from its own port
 * (the active side then talks to that port); the same REQ again (same
 * address, port and local communication ID) is that client's already. A
 * REQ for another service is REJected (reason 8, invalid service ID), one
 * past the last client (reason 1, no QP available); a SIDR_REQ gets a
 * SIDR_REP with status 1 or 3 alike (a UD client resolves its QPs at its
 * connection's port). Pure: the caller reads and sends. */
struct op_rdma_cm_listener;
enum op_rdma_cm_verdict {
    OP_RDMA_CM_NEW_CLIENT,  /* *client: its index, in the order they came */
    OP_RDMA_CM_SAME_CLIENT, /* a REQ resent by client *client: its own CM answers it */
    OP_RDMA_CM_REFUSED,     /* reply holds the REJ or SIDR_REP to send */
    OP_RDMA_CM_DROPPED,     /* not a REQ (counted; op_rdma_cm_listener_drops says why) */
};
OP_API op_status_t op_rdma_cm_listener_create(uint16_t service_port, uint32_t clients,
                                              struct op_rdma_cm_listener **out);
OP_API void op_rdma_cm_listener_destroy(struct op_rdma_cm_listener *l);
/* pkt->flow.dst may be 0.0.0.0 (a socket on every address): the REQ's
 * primary path (remote GID) says which address it was sent to and is
 * written there first, so that the ICRC can be checked. */
OP_API enum op_rdma_cm_verdict op_rdma_cm_listener_input(struct op_rdma_cm_listener *l,
                                                         struct op_pkt *pkt, struct op_pkt *reply,
                                                         uint32_t *client);
/* By enum op_rdma_cm_counter (cm_pkts_in, cm_duplicates, cm_unknown, ...). */
OP_API const uint64_t *op_rdma_cm_listener_counters(const struct op_rdma_cm_listener *l);
OP_API const uint64_t *op_rdma_cm_listener_drops(const struct op_rdma_cm_listener *l);

#endif
