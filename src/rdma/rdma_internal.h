/* Internal to the rdma module: device, region, CQ and QP state shared by the
 * packet codec (pkt.c), the requester (req.c), the responder (resp.c), the
 * queue and state logic (qp.c), regions (mr.c) and the device (dev.c). */
#ifndef OFFPATH_RDMA_INTERNAL_H
#define OFFPATH_RDMA_INTERNAL_H

#include "offpath/rdma.h"
#include "offpath/wire/atomic.h"
#include "offpath/wire/cm.h"

#define RDMA_PSN_MASK 0xffffffu
#define RDMA_PKEY 0xffffu
#define RDMA_QPN_BASE 0x11u    /* as rxe: the first QPNs are special */
#define RDMA_MR_SLOT_BITS 16   /* low bits of a key index the table; the rest is random */
#define RDMA_MAX_MRS (1u << RDMA_MR_SLOT_BITS)
#define RDMA_MAX_QPS 0x10000u
#define RDMA_CAUSE_LEN 160
#define RDMA_MAX_MSG_PKTS (1u << 22)
#define RDMA_AETH_ACK 0x1f     /* ACK, "no credit limit" */
#define RDMA_AETH_RNR 0x20
#define RDMA_AETH_NAK_SEQ 0x60
#define RDMA_AETH_NAK_INV 0x61
#define RDMA_AETH_NAK_ACCESS 0x62
#define RDMA_AETH_NAK_OP 0x63

struct op_rdma_mr {
    struct op_rdma_dev *dev;
    uint8_t *addr;
    uint64_t va;
    size_t len;
    unsigned access;
    uint32_t lkey, rkey;
};

struct op_rdma_cq {
    struct op_rdma_dev *dev;
    struct op_rdma_wc *ring; /* mask + 1 entries, depth of them used */
    uint32_t depth, mask, head, n;
    uint64_t overruns;
};

struct rdma_sgl {
    struct op_rdma_sge sg[OP_RDMA_MAX_SGE];
    uint8_t n;
};

/* A queue of receives: a QP's own, or an SRQ's. */
struct rdma_rq {
    struct rdma_rwqe *wqe;
    uint32_t cap, head, tail;
};

struct op_rdma_srq {
    struct op_rdma_dev *dev;
    struct rdma_rq q;
};

/* A send WR as the requester keeps it until it completes. */
struct rdma_swqe {
    uint64_t wr_id;
    enum op_rdma_wr_opcode opcode;
    bool signaled;
    uint32_t imm;
    uint64_t raddr;
    uint32_t rkey;
    uint32_t len;
    struct rdma_sgl sgl;
    uint64_t swap_add, compare; /* atomics */
    uint32_t ud_ip, ud_qpn, ud_qkey;
    uint16_t ud_port;
    bool started;     /* first_psn assigned */
    uint32_t first_psn, npkts;
};

struct rdma_rwqe {
    uint64_t wr_id;
    struct rdma_sgl sgl;
    uint32_t len;
};

/* The requester's side of one QP. WRs [head, cur) were sent at least in
 * part, [cur, tail) wait; packets [0, cur_pkt) of cur are out. PSNs before una are
 * acknowledged, [una, next_psn) are in flight, hi_psn is the first never sent. */
struct rdma_req {
    struct rdma_swqe *sq; /* mask + 1 slots, at most cap of them in use */
    uint8_t *inline_mem; /* as many slots of max_inline_data bytes: INLINE WRs' copies */
    uint32_t cap, mask, head, cur, tail;
    uint32_t cur_pkt;
    uint32_t una, next_psn, hi_psn;
    uint32_t since_ackreq;
    uint32_t window, window_max; /* PSNs in flight: now, and at most */
    uint32_t grow_from;          /* una when the window last grew or shrank */
    uint64_t rto_ns, rto_at, rnr_at;
    uint64_t progress_at; /* una last moved (or the first send) */
    /* adaptive retransmission (probe.c) */
    uint64_t srtt_ns, rttvar_ns; /* 0: nothing measured yet */
    bool sampling;               /* sample_psn, sent at sample_at, is being timed */
    uint32_t sample_psn;
    uint64_t sample_at, probe_at;
    uint64_t last_response_at;   /* this QP's last ACK, NAK or READ response */
    unsigned probes_in_row;      /* probes since una last moved: each doubles the next */
    uint64_t probe_floor_ns;     /* no probe sooner: doubled by each needless one */
    uint32_t undo_window;        /* before the probe: the window, and where sending was */
    uint32_t undo_cur, undo_cur_pkt, undo_next_psn;
    bool undo_armed;             /* a probe's go-back is not settled yet */
    uint8_t retries, rnr_retries; /* tries left; 7 = forever */
    bool rewound; /* went back to una once already: ignore further NAKs for it */
};

/* An executed atomic's result, kept to answer its duplicates (IBTA
 * 9.7.5.1.4: a responder never executes an atomic twice). */
struct rdma_atomic_result {
    uint32_t psn;
    bool valid;
    uint64_t orig;
};

/* The responder's side: expected PSN, the message in progress. */
struct rdma_resp {
    struct rdma_rq rq;      /* unused with an SRQ */
    struct rdma_rwqe open;  /* the receive the open message (or a refused one) took */
    bool has_open;
    uint32_t epsn, msn;
    bool nak_sent;        /* one sequence NAK per gap */
    uint8_t in_msg;       /* 0, or RDMA_H_SEND / RDMA_H_WRITE: a message is open */
    uint32_t off;         /* bytes of the open message placed */
    uint32_t wrkey;       /* open WRITE: its RETH */
    uint64_t wva;
    uint32_t wlen;
    uint32_t unacked;
    uint64_t ack_at; /* the delayed ACK of unacked packets is due; 0: none */
    struct rdma_atomic_result atomics[OP_RDMA_ATOMIC_DEPTH]; /* a ring, oldest overwritten */
    uint32_t atomic_next;
};

/* The last data packet a QP built the long way, kept to build the next one
 * like it (a ping-pong's WRITEs differ in PSN, AckReq and payload only):
 * its BTH and RETH bytes, and the ICRC over everything before the PSN
 * (pseudo-headers, BTH bytes 0..7), which such packets share (tmpl.c). */
#define RDMA_TMPL_FIXED 8 /* BTH bytes before AckReq and the PSN */
struct rdma_tx_tmpl {
    bool valid;
    uint8_t opcode, se;
    uint32_t dest_qp, dst_ip, len;
    uint16_t dst_port;
    struct op_reth reth;
    uint32_t head; /* the ICRC's CRC after the fixed bytes */
    uint8_t hdr[OP_BTH_LEN + OP_RETH_LEN];
};

/* The responder's guess at its next packet after a one-packet WRITE went
 * the long way: the same WRITE again at the next PSN (tmpl.c). The bytes
 * go where the last ones went while the region stays registered. */
struct rdma_rx_tmpl {
    bool valid;
    uint32_t len;     /* the whole packet, ICRC included */
    uint32_t mr_gen;  /* the device's region generation it was checked in */
    uint8_t *to;      /* where its payload goes */
    uint8_t hdr[OP_BTH_LEN + OP_RETH_LEN]; /* AckReq and PSN zeroed */
};

struct op_rdma_qp {
    struct op_rdma_dev *dev;
    struct op_rdma_qp_init_attr init;
    enum op_rdma_qp_state state;
    uint32_t qpn;
    struct op_rdma_qp_attr attr;
    struct rdma_req req;
    struct rdma_resp resp;
    uint64_t c[OP_RDMA_QP_C_COUNT_];
    char cause[RDMA_CAUSE_LEN];
    /* the ICRC's pseudo-header part of the last packet sent and taken:
     * an RC or UC QP's packets share their flow, and often their length */
    struct op_icrc_memo icrc_tx, icrc_rx;
    struct rdma_tx_tmpl tx_tmpl;
    struct rdma_rx_tmpl rx_tmpl;
};

struct op_rdma_dev {
    struct op_rdma_dev_config cfg;
    struct op_rng rng;
    struct op_rdma_mr **mrs; /* by key slot */
    uint32_t n_mrs_cap;
    struct op_rdma_qp **qps; /* by qpn - RDMA_QPN_BASE */
    uint32_t n_qps;
    struct op_rdma_cq **cqs;
    uint32_t n_cqs;
    struct op_rdma_srq **srqs;
    uint32_t n_srqs;
    uint64_t c[OP_RDMA_DEV_C_COUNT_];
    uint64_t last_response_at; /* any QP's last ACK or READ response (probe.c) */
    struct op_rdma_cm *cm;     /* takes what comes to QP 1; NULL: such packets are dropped */
    uint32_t place_qpn;        /* the last QP that took a packet of a WRITE it is in; 0: none */
    uint8_t *flat;             /* OP_IO_BUF_SIZE: a placed packet put back in one piece */
    uint32_t mr_gen;           /* bumped when a region goes: rx_tmpl's pointers may be stale */
};

/* A parsed packet: headers in host order, payload as a view. */
struct rdma_pkt {
    const struct op_pkt *raw;
    struct op_bth bth;
    struct op_reth reth;
    struct op_aeth aeth;
    struct op_deth deth;
    struct op_atomic_eth atomic;
    uint64_t orig; /* ATOMIC_ACK */
    uint32_t imm;
    uint8_t op;    /* opcode without the transport bits (RC numbering) */
    unsigned hdr;  /* RDMA_H_* of op */
    const uint8_t *payload;
    uint32_t len;
};

enum rdma_hdr_flags {
    RDMA_H_RETH = 1u << 0,
    RDMA_H_AETH = 1u << 1,
    RDMA_H_IMM = 1u << 2,
    RDMA_H_DETH = 1u << 3,
    RDMA_H_FIRST = 1u << 4, /* opens a message (FIRST or ONLY) */
    RDMA_H_LAST = 1u << 5,  /* ends one (LAST or ONLY) */
    RDMA_H_SEND = 1u << 6,
    RDMA_H_WRITE = 1u << 7,
    RDMA_H_READ_REQ = 1u << 8,
    RDMA_H_READ_RESP = 1u << 9,
    RDMA_H_ACK = 1u << 10,
    RDMA_H_ATOMIC = 1u << 11,     /* CMP_SWAP, FETCH_ADD: AtomicETH */
    RDMA_H_ATOMIC_ACK = 1u << 12, /* ATOMIC_ACK: AtomicAckETH after the AETH */
};

/* What a packet to send carries besides the BTH. */
struct rdma_out {
    uint8_t opcode; /* full opcode, transport bits included */
    uint32_t dest_qp, psn;
    bool ackreq, se;
    const struct op_reth *reth;
    const struct op_aeth *aeth;
    const struct op_deth *deth;
    const uint32_t *imm;
    const struct op_atomic_eth *atomic;
    const uint64_t *atomic_orig; /* AtomicAckETH */
    const struct rdma_sgl *sgl; /* payload gathered from here, */
    uint32_t off, len;          /* bytes [off, off+len) of the message */
    const uint8_t *data;        /* or from here when sgl is NULL */
    uint32_t dst_ip;
    uint16_t dst_port;
};

/* PSNs are 24 bits: compare by signed difference. */
static inline int32_t psn_diff(uint32_t a, uint32_t b)
{
    return (int32_t)((a - b) << 8) >> 8;
}
static inline uint32_t psn_add(uint32_t a, uint32_t n)
{
    return (a + n) & RDMA_PSN_MASK;
}
/* Rings index by a mask, not a division (several per message on the
 * latency path): their size is the power of two at or above what is asked. */
static inline uint32_t rdma_ring_size(uint32_t n)
{
    uint32_t s = 1;
    while (s < n)
        s <<= 1;
    return s;
}
static inline struct rdma_swqe *rdma_swqe_at(const struct rdma_req *r, uint32_t i)
{
    return &r->sq[i & r->mask];
}
static inline uint32_t rdma_npkts(uint32_t len, uint32_t mtu)
{
    return len == 0 ? 1 : (len + mtu - 1) / mtu;
}

/* pkt.c */
/* Besides the counters: a packet with ext whose headers or trailer are
 * not where a placed receive puts them (in data, before and after ext);
 * the caller flattens it and parses again. */
#define RDMA_PARSE_FLATTEN (OP_RDMA_QP_C_COUNT_ + 1)
unsigned rdma_parse(struct op_rdma_qp *qp, const struct op_pkt *raw, const struct op_bth *bth,
                    struct rdma_pkt *p);
void rdma_emit(struct op_rdma_qp *qp, const struct rdma_out *o, struct op_txq *out);
void rdma_send_aeth(struct op_rdma_qp *qp, uint8_t syndrome, uint32_t psn, struct op_txq *out);

/* tmpl.c: the ping-pong's packets built and taken from templates */
/* Builds o's packet headers into pkt from the template when o is alike:
 * where the payload goes (NULL: not alike, nothing written); the caller
 * adds the payload and seals it with rdma_tmpl_icrc. */
uint8_t *rdma_tmpl_put(struct op_rdma_qp *qp, const struct rdma_out *o, struct op_pkt *pkt);
/* The ICRC of a packet rdma_tmpl_put began (n bytes): from the template's
 * shared head on */
uint32_t rdma_tmpl_icrc(const struct op_rdma_qp *qp, const struct op_pkt *pkt, size_t n);
/* After o's packet (n bytes, no ICRC yet) was built the long way. */
void rdma_tmpl_keep(struct op_rdma_qp *qp, const struct rdma_out *o, const struct op_pkt *pkt,
                    size_t n);
/* A one-packet WRITE executed the long way; its payload went to `to`. */
void rdma_rx_tmpl_keep(struct op_rdma_qp *qp, const struct rdma_pkt *p, uint8_t *to);
/* The packet is the guessed next WRITE, checked and executed (true), or
 * nothing was done (false: the long way takes it). */
bool rdma_rx_fast(struct op_rdma_qp *qp, const struct op_pkt *pkt, uint64_t now,
                  struct op_txq *out);
void rdma_tmpl_reset(struct op_rdma_qp *qp);
/* resp.c: an executed request's PSN moves the responder on (RC) */
void rdma_resp_advance(struct op_rdma_qp *qp, uint32_t psn, bool ackreq, uint64_t now,
                       struct op_txq *out);

/* mr.c */
void rdma_sgl_put(const struct rdma_sgl *sgl, uint32_t off, const void *in, uint32_t len);
void rdma_sgl_get(const struct rdma_sgl *sgl, uint32_t off, void *out, uint32_t len);
/* Where bytes [off, off+len) of the message lie when one entry holds them
 * all; NULL when they span entries. */
const uint8_t *rdma_sgl_span(const struct rdma_sgl *sgl, uint32_t off, uint32_t len);
/* Checks an sge list against the regions (write: LOCAL_WRITE needed) and
 * copies it into out; false if a key or a range is wrong. */
bool rdma_sgl_load(struct op_rdma_dev *dev, const struct op_rdma_sge *sg, int n, bool write,
                   struct rdma_sgl *out, uint32_t *len);
/* The region an rkey names if it covers [va, va+len) with access; NULL and a
 * cause otherwise. */
struct op_rdma_mr *rdma_rkey_check(struct op_rdma_qp *qp, uint32_t rkey, uint64_t va,
                                   uint32_t len, unsigned access, char *cause, size_t cap);
void rdma_mr_free_all(struct op_rdma_dev *dev);

/* srq.c: the receive a message lands in, from the QP's queue or its SRQ,
 * held from its first packet to its last; NULL if none is posted. */
struct rdma_rwqe *rdma_recv_take(struct op_rdma_qp *qp);
bool rdma_recv_ready(const struct op_rdma_qp *qp);
void rdma_rq_push(struct rdma_rq *q, const struct rdma_rwqe *w);
void rdma_srq_free_all(struct op_rdma_dev *dev);

/* cm.c: what the device hands its CM */
void rdma_cm_input(struct op_rdma_cm *cm, const struct op_pkt *pkt, uint64_t now,
                   struct op_txq *out);
void rdma_cm_timer(struct op_rdma_cm *cm, uint64_t now, struct op_txq *out);
uint64_t rdma_cm_deadline(const struct op_rdma_cm *cm);

/* cq (dev.c) */
void rdma_cq_push(struct op_rdma_cq *cq, const struct op_rdma_wc *wc);

/* qp.c */
void rdma_qp_fail(struct op_rdma_qp *qp, const char *fmt, ...) OP_PRINTF(2, 3);
void rdma_complete_send(struct op_rdma_qp *qp, const struct rdma_swqe *w, unsigned status,
                        const char *cause);
void rdma_complete_recv(struct op_rdma_qp *qp, const struct op_rdma_wc *wc);
uint32_t rdma_mtu(const struct op_rdma_qp *qp);

/* probe.c */
void rdma_probe_sent(struct rdma_req *r, uint32_t psn, bool answered, bool resend, uint64_t now);
void rdma_probe_acked(struct rdma_req *r, uint64_t now);
uint64_t rdma_probe_timeout(const struct rdma_req *r);
void rdma_probe_arm(struct rdma_req *r, bool outstanding, uint64_t now);
uint64_t rdma_probe_defer(const struct rdma_req *r, uint64_t dev_last_response_at, uint64_t now);
void rdma_probe_fired(struct rdma_req *r);
void rdma_probe_needless(struct rdma_req *r);

/* req.c */
void rdma_req_init(struct op_rdma_qp *qp);
void rdma_req_progress(struct op_rdma_qp *qp, uint64_t now, struct op_txq *out);
void rdma_req_input(struct op_rdma_qp *qp, const struct rdma_pkt *p, uint64_t now,
                    struct op_txq *out);
void rdma_req_timer(struct op_rdma_qp *qp, uint64_t now, struct op_txq *out);
uint64_t rdma_req_deadline(const struct op_rdma_qp *qp);
/* resp.c: the delayed ACK */
void rdma_resp_timer(struct op_rdma_qp *qp, uint64_t now, struct op_txq *out);
uint64_t rdma_resp_deadline(const struct op_rdma_qp *qp);
void rdma_req_flush(struct op_rdma_qp *qp, unsigned status, const char *cause);

/* atomic.c */
static inline bool rdma_wr_is_atomic(enum op_rdma_wr_opcode op)
{
    return op == OP_RDMA_WR_ATOMIC_CMP_AND_SWP || op == OP_RDMA_WR_ATOMIC_FETCH_AND_ADD;
}
/* WRs whose answer carries data (READ, atomics): an ACK cannot complete them. */
static inline bool rdma_wr_needs_response(enum op_rdma_wr_opcode op)
{
    return op == OP_RDMA_WR_RDMA_READ || rdma_wr_is_atomic(op);
}
void rdma_atomic_request(const struct rdma_swqe *w, struct op_atomic_eth *eth,
                         struct rdma_out *o);
/* Requester: an ATOMIC_ACK for w, the WR holding its PSN; false if it does
 * not answer w. */
void rdma_atomic_response(struct op_rdma_qp *qp, struct rdma_swqe *w, const struct rdma_pkt *p);
/* Responder: execute an in-order atomic (true) or refuse it with a cause
 * and whether the NAK is an access error (else invalid request). */
bool rdma_atomic_execute(struct op_rdma_qp *qp, const struct rdma_pkt *p, char *cause,
                         bool *access_error, struct op_txq *out);
void rdma_atomic_replay(struct op_rdma_qp *qp, const struct rdma_pkt *p, struct op_txq *out);

/* resp.c */
bool rdma_resp_place(struct op_rdma_qp *qp, struct op_io_place *out);
void rdma_resp_input(struct op_rdma_qp *qp, const struct rdma_pkt *p, uint64_t now,
                     struct op_txq *out);
void rdma_ud_input(struct op_rdma_qp *qp, const struct rdma_pkt *p);
void rdma_resp_flush(struct op_rdma_qp *qp);

#endif
