/* Internal to the hostar module: the engine's state, shared by the per-peer
 * reliable streams (xport.c), the algorithms' schedules (sched.c) and the
 * call logic (engine.c). The packet codec is wire's (src/wire/har_pkt.c). */
#ifndef OFFPATH_HOSTAR_INTERNAL_H
#define OFFPATH_HOSTAR_INTERNAL_H

#include "offpath/hostar.h"

#define HAR_RTT_SAMPLES 16

/* One packet, kept while it may have to be sent again or used later. */
struct har_buf {
    struct har_buf *next; /* free list */
    uint32_t len;
    uint8_t data[OP_HAR_MAX_PKT];
};

struct har_slot {
    struct har_buf *b; /* NULL once acknowledged */
    uint64_t sent_ns;  /* last transmission */
    uint8_t sends;
    bool fast; /* already fast-retransmitted */
};

/* This leader's two streams with one peer, made on first use. Sequence
 * numbers run over the session's whole life, so a packet of an earlier call
 * is recognised as old by number alone. */
struct har_peer {
    uint32_t rank;
    /* out: [base, sent) in flight, [sent, next) waiting for the window */
    struct har_slot *q;
    uint32_t qcap; /* a power of two */
    uint32_t base, sent, next;
    bool active; /* listed in eng.active */
    /* in: every number below cum arrived; bit i of seen: cum + i arrived */
    uint32_t cum;
    uint64_t seen;
    bool ack_due;
    bool ack_listed;  /* in eng.acks */
    uint32_t unacked; /* packets arrived since the ack was due */
};

enum har_action { HAR_REDUCE_MINE_FIRST = 1, HAR_REDUCE_THEIRS_FIRST, HAR_COPY };

/* One step of this leader's schedule: send a range of the vector to `to`,
 * and take a range from `from`. A send's chunk i may go once the recv of
 * step send_after has its chunk i (the value it carries is then final for
 * the step); a recv's chunk i may be applied once recv_after has its chunk i
 * (so an in-place reduce never runs ahead of the value it builds on). */
struct har_step {
    uint16_t g; /* the algorithm's step number, on the wire */
    int32_t to, from;
    uint32_t send_off, send_len, recv_off, recv_len;
    uint8_t action;
    int32_t send_after, recv_after; /* local step index, -1 none */
    uint32_t done_base;             /* its chunks' first entry in call.done */
};

struct har_call {
    uint32_t id;
    unsigned op, type;
    size_t esize;
    uint32_t count, per_chunk;
    uint8_t *buf;
    struct har_step *steps;
    uint32_t n_steps, steps_cap;
    int32_t *by_g; /* g -> local step, -1 */
    uint32_t n_g, by_g_cap;
    uint8_t *done; /* per recv chunk */
    uint32_t done_cap;
    uint32_t left; /* recv chunks still missing */
};

enum har_state { HAR_IDLE, HAR_RUN, HAR_BROKEN };

struct op_har_eng {
    struct op_har_config cfg;
    struct op_har_peer *addr;
    enum har_state state;
    op_status_t result;
    uint64_t deadline_ns, linger_until, ack_at;
    uint64_t rto_ns;
    uint64_t rtt_ns[HAR_RTT_SAMPLES];
    unsigned n_rtt;
    uint32_t last_call;
    struct har_call call;
    struct har_peer **peer;  /* n, NULL until used */
    uint32_t *active, n_active; /* peers with packets not yet acknowledged */
    uint32_t *acks, n_acks;     /* peers owed an ack */
    struct har_buf **held;   /* packets that came before they could be used */
    uint32_t n_held;
    struct har_buf *pool;    /* free buffers */
    uint32_t n_pool;
    bool nomem;
    uint64_t c[OP_HAR_C_COUNT_];
    uint8_t scratch[OP_HAR_MAX_DATA];
};

/* xport.c */
enum har_rx { HAR_RX_NEW, HAR_RX_DUP, HAR_RX_BEYOND };
struct har_buf *har_buf_get(struct op_har_eng *e);
void har_buf_put(struct op_har_eng *e, struct har_buf *b);
struct har_peer *har_peer_get(struct op_har_eng *e, uint32_t rank);
bool har_xp_send(struct op_har_eng *e, uint32_t to, struct op_har_hdr *h, const void *elems,
                 uint64_t now, struct op_txq *out);
enum har_rx har_xp_check(const struct har_peer *p, uint32_t tsn);
void har_xp_accept(struct op_har_eng *e, struct har_peer *p, uint32_t tsn, uint64_t now);
bool har_xp_on_ack(struct op_har_eng *e, struct har_peer *p, uint32_t cum, uint64_t sack,
                   uint64_t now, struct op_txq *out);
void har_xp_flush_acks(struct op_har_eng *e, struct op_txq *out);
void har_xp_retransmit(struct op_har_eng *e, uint64_t now, struct op_txq *out);
uint64_t har_xp_next_retx(const struct op_har_eng *e);
bool har_xp_quiet(const struct op_har_eng *e);
uint32_t har_xp_abandon(struct op_har_eng *e);
void har_xp_free(struct op_har_eng *e);
uint64_t har_base_rto(const struct op_har_eng *e);

/* sched.c */
bool har_use_ring(const struct op_har_config *cfg, size_t count, size_t esize);
op_status_t har_sched_build(struct har_call *k, uint32_t rank, uint32_t n, bool ring);
uint32_t har_chunks(const struct har_call *k, uint32_t len);
uint32_t har_chunk_len(const struct har_call *k, uint32_t len, uint32_t c);
void har_sched_free(struct har_call *k);

#endif
