/* Internal to the inc module: the leader engine's state. */
#ifndef OFFPATH_INC_ENGINE_INTERNAL_H
#define OFFPATH_INC_ENGINE_INTERNAL_H

#include "offpath/inc.h"

#define ENG_MAX_SPINES 32
#define ENG_RTT_SAMPLES 16

enum eng_state {
    ST_IDLE,        /* not in a group */
    ST_JOIN,        /* queries out; the master also collects them */
    ST_JOIN_NOTIFY, /* master: notify sent, waiting for its own copy */
    ST_READY,       /* in a group, no operation running */
    ST_REDUCE,
    ST_LEAVE,
    ST_BROKEN, /* a deadline expired or the group was killed: unusable */
};

/* What the master heard through one SPINE. */
struct spine_seen {
    uint32_t ip;
    uint32_t ava;
    uint16_t n;
    uint64_t *ranks; /* bitmap */
};

struct chunk {
    uint32_t seq;
    uint64_t sent_ns;
    bool done;
    bool resent; /* no round-trip sample from it (Karn) */
};

struct op_inc_eng {
    struct op_inc_config cfg;
    enum eng_state state;
    op_status_t result;
    uint8_t reason;
    uint64_t deadline_ns, retx_at_ns, rto_ns;
    uint64_t last_tick_ns; /* the driver's previous timer call: a gap is a stall of ours */
    bool interrupted;      /* the allreduce stopped at its deadline or was cancelled: resumable */
    uint64_t rtt_ns[ENG_RTT_SAMPLES]; /* the latest round trips, for their minimum */
    unsigned n_rtt;
    /* join */
    struct op_inc_ctrl caps_seen; /* master: AND of all queries */
    struct spine_seen spines[ENG_MAX_SPINES];
    int n_spines;
    uint64_t choose_at_ns;
    struct op_inc_ctrl notify;
    struct op_inc_caps caps;
    uint64_t token;
    /* allreduce */
    const uint8_t *send;
    uint8_t *recv;
    size_t count, esize, per_chunk;
    unsigned type, op;
    uint32_t next_seq, base_seq, n_chunks, lo, hi;
    struct chunk *ring;
    /* loss by order (RACK, RFC 8985): the latest send time among chunks
     * whose result came, and when a result last came */
    uint64_t rack_sent_ns, progress_ns;
    /* the window's reaction to congestion (reduce.c): chunks in flight, the
     * marked fraction's moving average (ECN_ONE = all), the results seen
     * and marked since the window was last judged */
    uint32_t cwnd, alpha, seen, marked;
    bool leaving;         /* the current allreduce is leave's barrier */
    int32_t barrier[2];
    uint64_t c[OP_INC_C_COUNT_];
    uint8_t scratch[OP_INC_MAX_DATA];
};

/* engine.c */
void eng_send_ctrl(struct op_inc_eng *e, struct op_txq *out, uint16_t group_id, uint64_t token,
                   const struct op_inc_ctrl *c);
void eng_send(struct op_inc_eng *e, struct op_txq *out, const struct op_inc_hdr *h,
              const void *payload, size_t len);
void eng_begin(struct op_inc_eng *e, enum eng_state st, uint64_t now);
void eng_finish(struct op_inc_eng *e, enum eng_state st, op_status_t result);
void eng_backoff(struct op_inc_eng *e, uint64_t now);
uint64_t eng_base_rto(const struct op_inc_eng *e);
uint64_t eng_min_rtt(const struct op_inc_eng *e); /* of the latest samples; 0 before one */
void eng_rtt_sample(struct op_inc_eng *e, uint64_t rtt);

void eng_window_reset(struct op_inc_eng *e);

/* join.c */
void eng_ctrl_input(struct op_inc_eng *e, const struct op_inc_hdr *h, const struct op_inc_ctrl *c,
                    uint64_t now, struct op_txq *out);
void eng_ctrl_timer(struct op_inc_eng *e, uint64_t now, struct op_txq *out);
void eng_join_free(struct op_inc_eng *e);
void eng_reduce_done(struct op_inc_eng *e, uint64_t now, struct op_txq *out);

/* reduce.c */
void eng_data_input(struct op_inc_eng *e, const struct op_inc_pkt *ip, uint64_t now,
                    struct op_txq *out);
void eng_data_timer(struct op_inc_eng *e, uint64_t now, struct op_txq *out);

#endif
