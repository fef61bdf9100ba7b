/* offpath software RoCEv2: verbs-like queue pairs (RC, UC, UD) over plain
 * memory, as a pure engine. A device owns memory regions, completion queues
 * and queue pairs; a driver hands it received RoCEv2 UDP payloads and the
 * time (op_rdma_dev_input), calls op_rdma_dev_timer when
 * op_rdma_dev_next_timer says so, and sends what the engine puts on its
 * struct op_txq. No sockets, no clock, no global state (docs/rdma.md).
 * A device and everything it owns belong to one thread at a time.
 *
 * Names and numbers follow libibverbs where there is one (wc statuses keep
 * verbs' values, so "status 12" still means RETRY_EXC_ERR), with two
 * differences: one WR per post call (no chained lists), and a work request
 * with a bad lkey or a queue that is full is refused by the post call. */
#ifndef OFFPATH_RDMA_H
#define OFFPATH_RDMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/io.h"
#include "offpath/wire.h"

#define OP_RDMA_MAX_SGE 4
#define OP_RDMA_DEFAULT_WINDOW 128 /* PSNs a requester keeps outstanding (rxe) */
#define OP_RDMA_ACKREQ_EVERY 64    /* AckReq at least this often (rxe) */
#define OP_RDMA_ACK_DELAY_NS 100000 /* an executed request nobody asked an ACK for waits at most
                                       this, or a quarter of the QP's own timeout if shorter */
#define OP_RDMA_UD_GRH_LEN 40      /* verbs put a GRH before every UD receive */
#define OP_RDMA_ATOMIC_DEPTH 16    /* a responder remembers this many atomic results
                                      (max_dest_rd_atomic); a requester keeps at most
                                      this many atomics in flight */

struct op_rdma_dev;
struct op_rdma_mr;
struct op_rdma_cq;
struct op_rdma_qp;
struct op_rdma_srq;

/* ---- device */
struct op_rdma_dev_config {
    uint32_t ip;   /* this endpoint: the source of every packet (host order) */
    uint16_t port; /* its UDP port (OP_ROCE_UDP_PORT on a real fabric) */
    uint64_t seed; /* memory keys and nothing else: keys are random, not sequential */
    struct op_log *log; /* errors with their cause; NULL: silent */
};

OP_API op_status_t op_rdma_dev_create(const struct op_rdma_dev_config *cfg,
                                      struct op_rdma_dev **out);
/* Frees every QP, CQ and MR of the device too. */
OP_API void op_rdma_dev_destroy(struct op_rdma_dev *dev);

/* A received RoCEv2 UDP payload (pkt->flow: src is the sender). Malformed
 * packets are dropped and counted, never trusted. */
OP_API void op_rdma_dev_input(struct op_rdma_dev *dev, const struct op_pkt *pkt, uint64_t now,
                              struct op_txq *out);
/* Retransmission and RNR timers of every QP due at now. */
OP_API void op_rdma_dev_timer(struct op_rdma_dev *dev, uint64_t now, struct op_txq *out);
/* The earliest deadline of any QP; UINT64_MAX if none. */
OP_API uint64_t op_rdma_dev_next_timer(const struct op_rdma_dev *dev);
/* The three above as the loop's engine contract (offpath/loop.h), the
 * engine being the device: op_loop_add(loop, &op_rdma_dev_ops, dev). */
struct op_engine_ops;
OP_API extern const struct op_engine_ops op_rdma_dev_ops;
/* Where the payloads of the packets coming next belong when a QP is in the
 * middle of a WRITE (the last one that took a packet of one): the rest of
 * the message in its region (op_io_place; the engine contract's rx_place).
 * The device takes what a placed receive hands out whatever it turns out
 * to be: a payload that belongs elsewhere is moved there, one not taken
 * is dropped, and only bytes of the WRITE not yet received are ever
 * overwritten. false: none. */
OP_API bool op_rdma_dev_rx_place(struct op_rdma_dev *dev, struct op_io_place *out);

#define OP_RDMA_DEV_COUNTERS(X)                                                                    \
    X(pkts_in)                                                                                     \
    X(drop_truncated) /* shorter than a BTH and an ICRC */                                         \
    X(drop_no_qp)     /* destination QP does not exist */
enum op_rdma_dev_counter {
#define OP_RDMA_DEV_ENUM_(n) OP_RDMA_DEV_C_##n,
    OP_RDMA_DEV_COUNTERS(OP_RDMA_DEV_ENUM_)
#undef OP_RDMA_DEV_ENUM_
        OP_RDMA_DEV_C_COUNT_
};
OP_API const char *op_rdma_dev_counter_name(unsigned c);
OP_API const uint64_t *op_rdma_dev_counters(const struct op_rdma_dev *dev);

/* ---- memory regions */
enum op_rdma_access {
    OP_RDMA_ACCESS_LOCAL_WRITE = 1,
    OP_RDMA_ACCESS_REMOTE_WRITE = 2,
    OP_RDMA_ACCESS_REMOTE_READ = 4,
    OP_RDMA_ACCESS_REMOTE_ATOMIC = 8, /* needs LOCAL_WRITE, as verbs */
};

/* Remote addresses are virtual addresses, as in verbs: the region covers
 * [(uintptr_t)addr, (uintptr_t)addr + len). */
OP_API op_status_t op_rdma_reg_mr(struct op_rdma_dev *dev, void *addr, size_t len,
                                  unsigned access, struct op_rdma_mr **out);
OP_API void op_rdma_dereg_mr(struct op_rdma_mr *mr);
OP_API uint32_t op_rdma_mr_lkey(const struct op_rdma_mr *mr);
OP_API uint32_t op_rdma_mr_rkey(const struct op_rdma_mr *mr);

/* ---- completions */
enum op_rdma_wc_status { /* libibverbs' values */
    OP_RDMA_WC_SUCCESS = 0,
    OP_RDMA_WC_LOC_LEN_ERR = 1,
    OP_RDMA_WC_LOC_QP_OP_ERR = 2,
    OP_RDMA_WC_LOC_PROT_ERR = 4,
    OP_RDMA_WC_WR_FLUSH_ERR = 5,
    OP_RDMA_WC_BAD_RESP_ERR = 7,
    OP_RDMA_WC_LOC_ACCESS_ERR = 8,
    OP_RDMA_WC_REM_INV_REQ_ERR = 9,
    OP_RDMA_WC_REM_ACCESS_ERR = 10,
    OP_RDMA_WC_REM_OP_ERR = 11,
    OP_RDMA_WC_RETRY_EXC_ERR = 12,
    OP_RDMA_WC_RNR_RETRY_EXC_ERR = 13,
    OP_RDMA_WC_GENERAL_ERR = 21,
};
/* "SUCCESS", "RETRY_EXC_ERR", ... */
OP_API const char *op_rdma_wc_status_str(unsigned status);

enum op_rdma_wc_opcode {
    OP_RDMA_WC_SEND,
    OP_RDMA_WC_RDMA_WRITE,
    OP_RDMA_WC_RDMA_READ,
    OP_RDMA_WC_COMP_SWAP,
    OP_RDMA_WC_FETCH_ADD,
    OP_RDMA_WC_RECV = 128,
    OP_RDMA_WC_RECV_RDMA_WITH_IMM,
};

#define OP_RDMA_WC_WITH_IMM 1u

struct op_rdma_wc {
    uint64_t wr_id;
    unsigned status; /* enum op_rdma_wc_status */
    unsigned opcode; /* enum op_rdma_wc_opcode */
    uint32_t byte_len; /* receives: bytes placed (UD: plus the 40-byte GRH) */
    uint32_t imm_data;
    unsigned wc_flags;
    uint32_t qp_num;
    uint32_t src_qp;   /* UD receives: the sender's QP, address and port */
    uint32_t src_ip;
    uint16_t src_port;
    /* Errors: why, in words (e.g. "rkey 0x.. does not cover [va, va+len)");
     * NULL on success. Valid until the QP is destroyed. */
    const char *cause;
};

/* A CQ holds depth completions; beyond that they are lost and counted
 * (verbs reports a CQ overrun). */
OP_API op_status_t op_rdma_cq_create(struct op_rdma_dev *dev, uint32_t depth,
                                     struct op_rdma_cq **out);
OP_API void op_rdma_cq_destroy(struct op_rdma_cq *cq);
/* Up to max completions into wc; returns how many. */
OP_API int op_rdma_poll_cq(struct op_rdma_cq *cq, int max, struct op_rdma_wc *wc);
OP_API uint64_t op_rdma_cq_overruns(const struct op_rdma_cq *cq);

/* ---- shared receive queues (ibv_create_srq): receives any of its QPs
 * may take. A message takes one at its first packet and holds it to its
 * last; a QP's error does not flush the SRQ's receives (verbs). */
OP_API op_status_t op_rdma_srq_create(struct op_rdma_dev *dev, uint32_t max_wr,
                                      struct op_rdma_srq **out);
/* Its QPs must be destroyed first. */
OP_API void op_rdma_srq_destroy(struct op_rdma_srq *srq);
struct op_rdma_recv_wr;
OP_API op_status_t op_rdma_post_srq_recv(struct op_rdma_srq *srq,
                                         const struct op_rdma_recv_wr *wr);
/* Receives posted and not yet taken by a message. */
OP_API uint32_t op_rdma_srq_posted(const struct op_rdma_srq *srq);

/* ---- queue pairs */
enum op_rdma_qp_type { OP_RDMA_QPT_RC, OP_RDMA_QPT_UC, OP_RDMA_QPT_UD };
enum op_rdma_qp_state {
    OP_RDMA_QPS_RESET,
    OP_RDMA_QPS_INIT,
    OP_RDMA_QPS_RTR,
    OP_RDMA_QPS_RTS,
    OP_RDMA_QPS_ERR,
};
OP_API const char *op_rdma_qp_state_str(unsigned state);

struct op_rdma_qp_init_attr {
    enum op_rdma_qp_type type;
    struct op_rdma_cq *send_cq, *recv_cq;
    uint32_t max_send_wr, max_recv_wr; /* max_recv_wr: 0 with an SRQ */
    struct op_rdma_srq *srq; /* receives come from it (op_rdma_post_recv refuses); NULL: own */
    uint32_t max_inline_data; /* 0..OP_RDMA_MAX_INLINE bytes an INLINE WR may carry */
    bool sq_sig_all; /* every send WR completes visibly, signaled or not */
};

/* op_rdma_qp_modify reads the fields of the transition it makes. */
struct op_rdma_qp_attr {
    /* -> INIT */
    unsigned access; /* REMOTE_WRITE / REMOTE_READ this QP serves */
    uint32_t qkey;   /* UD: receives must carry it */
    /* -> RTR (RC, UC: the peer; UD needs none) */
    uint32_t path_mtu; /* bytes: 256, 512, 1024, 2048 or 4096 */
    uint32_t dest_qpn, rq_psn;
    uint32_t remote_ip;
    uint16_t remote_port;
    uint8_t min_rnr_timer; /* 0..31, IBTA encoding (12 = 0.64 ms) */
    uint32_t ack_every;    /* responder: also ACK after this many packets; 0: only on AckReq */
    /* -> RTS */
    uint32_t sq_psn;
    uint8_t timeout;   /* 4.096 us * 2^timeout per try; 0 = no timer (IBTA) */
    uint8_t retry_cnt; /* 0..7, 7 = retry forever (as rxe) */
    uint8_t rnr_retry; /* 0..7, 7 = retry forever */
    uint32_t max_outstanding; /* send window in PSNs; 0: OP_RDMA_DEFAULT_WINDOW */
    uint8_t max_rd_atomic;    /* RDMA READs and atomics in flight at most (verbs'); 0: no
                                 limit for READs, OP_RDMA_ATOMIC_DEPTH for atomics */
};

OP_API op_status_t op_rdma_qp_create(struct op_rdma_dev *dev,
                                     const struct op_rdma_qp_init_attr *attr,
                                     struct op_rdma_qp **out);
OP_API void op_rdma_qp_destroy(struct op_rdma_qp *qp);
/* RESET -> INIT -> RTR -> RTS in order; any state -> ERR (flushes every WR)
 * or -> RESET (drops them). OP_ERR_STATE or OP_ERR_INVAL otherwise. */
OP_API op_status_t op_rdma_qp_modify(struct op_rdma_qp *qp, enum op_rdma_qp_state to,
                                     const struct op_rdma_qp_attr *attr);
OP_API uint32_t op_rdma_qp_num(const struct op_rdma_qp *qp);
OP_API enum op_rdma_qp_state op_rdma_qp_state(const struct op_rdma_qp *qp);
/* The first error that moved the QP to ERR; "" if none. */
OP_API const char *op_rdma_qp_error(const struct op_rdma_qp *qp);

enum op_rdma_wr_opcode {
    OP_RDMA_WR_SEND,
    OP_RDMA_WR_SEND_WITH_IMM,
    OP_RDMA_WR_RDMA_WRITE,
    OP_RDMA_WR_RDMA_WRITE_WITH_IMM,
    OP_RDMA_WR_RDMA_READ,
    /* RC only; 8 bytes at an 8-byte aligned remote address; the sg list
     * (8 bytes, LOCAL_WRITE) receives the value the target held before */
    OP_RDMA_WR_ATOMIC_CMP_AND_SWP,
    OP_RDMA_WR_ATOMIC_FETCH_AND_ADD,
};

#define OP_RDMA_SEND_SIGNALED 1u
#define OP_RDMA_SEND_SOLICITED 2u
/* The sg list's bytes are copied by the post call (as verbs' INLINE: their
 * lkeys are not checked and the buffers may be reused at once); at most the
 * QP's max_inline_data bytes; SEND and WRITE only. */
#define OP_RDMA_SEND_INLINE 4u
#define OP_RDMA_MAX_INLINE 912 /* perftest's MAX_INLINE */

struct op_rdma_sge {
    uint64_t addr; /* a virtual address inside the region lkey names */
    uint32_t length;
    uint32_t lkey;
};

struct op_rdma_send_wr {
    uint64_t wr_id;
    enum op_rdma_wr_opcode opcode;
    unsigned send_flags;
    const struct op_rdma_sge *sg_list; /* copied by the post call */
    int num_sge;                       /* 0..OP_RDMA_MAX_SGE */
    uint32_t imm_data;
    struct {
        uint64_t remote_addr;
        uint32_t rkey;
    } rdma;
    struct { /* atomics */
        uint64_t remote_addr;
        uint64_t compare_add; /* CMP_AND_SWP: compared; FETCH_AND_ADD: added */
        uint64_t swap;        /* CMP_AND_SWP: stored when equal */
        uint32_t rkey;
    } atomic;
    struct { /* UD: the destination */
        uint32_t remote_ip;
        uint16_t remote_port;
        uint32_t remote_qpn, remote_qkey;
    } ud;
};

struct op_rdma_recv_wr {
    uint64_t wr_id;
    const struct op_rdma_sge *sg_list;
    int num_sge;
};

/* Queue a send WR and send what the window allows now. In ERR the WR
 * completes at once with WR_FLUSH_ERR, as verbs. */
OP_API op_status_t op_rdma_post_send(struct op_rdma_qp *qp, const struct op_rdma_send_wr *wr,
                                     uint64_t now, struct op_txq *out);
OP_API op_status_t op_rdma_post_recv(struct op_rdma_qp *qp, const struct op_rdma_recv_wr *wr);

#define OP_RDMA_QP_COUNTERS(X)                                                                     \
    X(pkts_in)                                                                                     \
    X(pkts_out)                                                                                    \
    X(bytes_out)        /* payload bytes sent */                                                   \
    X(retransmissions)  /* packets sent again */                                                   \
    X(timeouts)                                                                                    \
    X(probes)           /* early go-backs by the measured round trip (no retry used) */            \
    X(probes_undone)    /* probes an ACK proved needless: window restored, next probe later */  \
    X(acks_sent)                                                                                   \
    X(acks_recv)                                                                                   \
    X(nak_seq_sent)                                                                                \
    X(nak_rnr_sent)                                                                                \
    X(nak_inv_sent)                                                                                \
    X(nak_access_sent)                                                                             \
    X(nak_seq_recv)                                                                                \
    X(nak_rnr_recv)                                                                                \
    X(nak_inv_recv)                                                                                \
    X(nak_access_recv)                                                                             \
    X(nak_op_recv)                                                                                 \
    X(implicit_naks)    /* a response skipped an outstanding READ's data */                        \
    X(duplicates)       /* requests already executed: re-ACKed or READ replayed */                 \
    X(atomics_executed) /* responder: CMP_SWAP / FETCH_ADD applied to memory */                   \
    X(atomic_replays)   /* duplicate atomics answered from the result cache */                    \
    X(atomic_uncached)  /* duplicate atomics older than the cache: dropped, never re-executed */   \
    X(dup_responses)    /* ACKs and READ responses for what was already acknowledged */            \
    X(out_of_seq)       /* requests ahead of the expected PSN, dropped */                          \
    X(rnr_waits)                                                                                   \
    X(uc_lost_msgs)     /* UC messages dropped for a gap */                                        \
    X(drop_icrc)                                                                                   \
    X(drop_length)      /* headers, pad and payload do not add up */                               \
    X(drop_opcode)      /* opcode unknown or not one this QP type carries */                       \
    X(drop_state)       /* QP not in a state that takes this packet */                             \
    X(drop_source)      /* not from the connected peer */                                          \
    X(drop_pkey)                                                                                   \
    X(drop_qkey)                                                                                   \
    X(drop_psn)         /* responses with a PSN never sent */                                      \
    X(drop_no_recv)     /* UC, UD: a send with no receive posted */                                \
    X(drop_access)      /* UC: a write the region does not allow */                                \
    X(drop_too_long)    /* UC, UD: a send longer than the receive buffer */                        \
    X(placed)           /* WRITE payloads the receive put where they belong (no copy of ours) */   \
    X(placed_moved)     /* payloads a placed receive put elsewhere: moved, or dropped */   \
    X(tmpl_out)         /* packets built from the last one's headers (a ping-pong's WRITEs) */ \
    X(tmpl_in)          /* one-packet WRITEs taken as the guessed next one (no parse) */

enum op_rdma_qp_counter {
#define OP_RDMA_QP_ENUM_(n) OP_RDMA_QP_C_##n,
    OP_RDMA_QP_COUNTERS(OP_RDMA_QP_ENUM_)
#undef OP_RDMA_QP_ENUM_
        OP_RDMA_QP_C_COUNT_
};
OP_API const char *op_rdma_qp_counter_name(unsigned c);
OP_API const uint64_t *op_rdma_qp_counters(const struct op_rdma_qp *qp);

/* The IBTA tables: a try's timeout (0 = none) and an encoded RNR delay. */
OP_API uint64_t op_rdma_timeout_ns(uint8_t timeout);
OP_API uint64_t op_rdma_rnr_ns(uint8_t rnr_timer);

/* the parts with their own header under offpath/rdma/ */
#include "offpath/rdma/cm.h"

#endif
