/* offpath INC client: the leader's side of the in-network Allreduce.
 *
 * Two layers:
 *  - op_inc_eng_*: a pure state machine (packets and time in, packets out),
 *    for callers with their own event loop and for tests;
 *  - op_inc_join / op_inc_allreduce / op_inc_leave: blocking calls over a UDP
 *    socket, each bounded by a deadline (never a hang).
 * The seed's roles: the master leader (MRR) collects every leader's query and
 * picks the SPINE with the most free groups; the others (NMRR) query it. */
#ifndef OFFPATH_INC_H
#define OFFPATH_INC_H

#include <stdbool.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/io.h"
#include "offpath/wire.h"

/* A small call's round trip through two switch levels here is 100-250 us. */
#define OP_INC_SPIN_NS_DEFAULT (300 * OP_NS_PER_US)

struct op_inc_config {
    uint32_t ip;          /* this leader's address (host order) */
    uint16_t port;        /* its UDP port: the fabric's RoCEv2 port, as its TOR's */
    uint32_t tor_ip;      /* the TOR it sits under */
    uint16_t tor_port;
    uint32_t rank;        /* leader rank in the group, 0..n_leaders-1 */
    uint16_t n_leaders;   /* global_group_size */
    uint32_t master_rank; /* the master leader (MRR) */
    uint32_t master_ip;
    uint32_t job_id, comm_id, c_id; /* name the communicator; same on every leader */
    uint32_t world_rank;
    uint8_t master_num;   /* 1 Node mode, 2 Socket mode */
    uint16_t want_window; /* 0: whatever the switches give */
    uint16_t want_data;   /* data bytes per packet; 0: whatever the switches give */
    uint64_t rto_ns;      /* retransmission timeout until a round trip was measured */
    uint64_t rto_min_ns;  /* floor of the measured timeout (3 x the latest minimum round trip) */
    uint64_t rto_max_ns;  /* backoff cap */
    uint64_t deadline_ns; /* bound on each join, allreduce and leave */
    bool udp_batching;    /* op_inc_join's own port (default on) */
    /* a blocking call polls its port without sleeping for this long before
     * it waits in poll, as MPI's own progress loops spin (yielding the core
     * between polls: more leaders than cores); a result that comes back
     * within it finds the leader awake (an idle vCPU here takes ~40 us to
     * wake). 0: wait in poll at once */
    uint64_t spin_ns;
    /* narrow the window of chunks in flight when results come back marked
     * congested (OP_INC_F_CONGESTED), DCTCP's way; off: always the whole
     * window the switches granted (default on) */
    bool ecn_react;
};

OP_API void op_inc_config_default(struct op_inc_config *cfg);

#define OP_INC_COUNTERS(X)                                                                         \
    X(queries_sent)                                                                                \
    X(notifies_sent)                                                                               \
    X(chunks_sent)                                                                                 \
    X(retransmissions)                                                                             \
    X(timeouts)                                                                                    \
    X(results)                                                                                     \
    X(duplicate_results)                                                                           \
    X(dropped)                                                                                     \
    X(allreduces)                                                                                  \
    X(stalls)                                                                                      \
    X(congested_results) /* results a queue on the way marked */                                  \
    X(window_cuts)       /* the chunks in flight narrowed for them */                             \
    X(fast_retransmits)  /* chunks re-sent when a later-sent chunk's result came first */

enum op_inc_counter {
#define OP_INC_ENUM_(n) OP_INC_C_##n,
    OP_INC_COUNTERS(OP_INC_ENUM_)
#undef OP_INC_ENUM_
        OP_INC_C_COUNT_
};
OP_API const char *op_inc_counter_name(unsigned c);

/* What the switches granted at join. */
struct op_inc_caps {
    uint16_t group_id;
    uint64_t token; /* proves membership to the switches */
    uint16_t ops, types; /* bitmaps by enum op_red_op / op_red_type */
    uint16_t window, max_data, max_children;
    uint32_t lease_ms;
    uint32_t spine_ip;
};

/* ---- engine */
struct op_inc_eng;

OP_API op_status_t op_inc_eng_create(const struct op_inc_config *cfg, struct op_inc_eng **out);
OP_API void op_inc_eng_destroy(struct op_inc_eng *e);
OP_API op_status_t op_inc_eng_join(struct op_inc_eng *e, uint64_t now, struct op_txq *out);
/* sendbuf may equal recvbuf (in place). Buffers must stay valid until done. */
OP_API op_status_t op_inc_eng_allreduce(struct op_inc_eng *e, const void *sendbuf, void *recvbuf,
                                        size_t count, unsigned type, unsigned op, uint64_t now,
                                        struct op_txq *out);
OP_API op_status_t op_inc_eng_leave(struct op_inc_eng *e, uint64_t now, struct op_txq *out);
OP_API void op_inc_eng_input(struct op_inc_eng *e, const struct op_pkt *pkt, uint64_t now,
                             struct op_txq *out);
OP_API void op_inc_eng_timer(struct op_inc_eng *e, uint64_t now, struct op_txq *out);
OP_API uint64_t op_inc_eng_next_timer(const struct op_inc_eng *e);
/* An allreduce that ended OP_ERR_TIMEOUT (its deadline, or op_inc_eng_cancel)
 * can be resumed: the same call, a fresh deadline, the outstanding chunks
 * sent again, what had arrived kept. The caller decides whether waiting
 * longer is right (a peer is late) or the switch is gone. OP_ERR_STATE if the
 * last operation was not such an allreduce. */
OP_API op_status_t op_inc_eng_resume(struct op_inc_eng *e, uint64_t now, struct op_txq *out);
/* The interrupted allreduce was completed without the engine (its result
 * taken from a peer that got it from the switch, so the group's slots have
 * moved past it): the engine is ready for the next call, whose chunks
 * follow the interrupted call's numbers as if it had ended here. */
OP_API void op_inc_eng_settled(struct op_inc_eng *e);
/* Stop the running allreduce now, as its deadline would (resumable); false
 * if no allreduce was running. */
OP_API bool op_inc_eng_cancel(struct op_inc_eng *e);
/* A gap this long between timer calls is the process not running, not the
 * network: the deadline does not count it. */
#define OP_INC_STALL_NS (1000 * OP_NS_PER_MS)
/* OP_INPROGRESS while the current operation runs, then its result. */
OP_API op_status_t op_inc_eng_status(const struct op_inc_eng *e);
OP_API uint8_t op_inc_eng_reason(const struct op_inc_eng *e); /* refusal reason */
OP_API const struct op_inc_caps *op_inc_eng_caps(const struct op_inc_eng *e);
OP_API const uint64_t *op_inc_eng_counters(const struct op_inc_eng *e);
/* Chunks the engine keeps in flight now: the granted window, or less after
 * congested results (ecn_react). */
OP_API uint32_t op_inc_eng_cwnd(const struct op_inc_eng *e);

/* ---- blocking client over UDP */
struct op_inc_client;
/* One UDP endpoint that all the groups of a process share. */
struct op_inc_port;

/* udp_batching: op_io_udp_batching on its socket */
OP_API op_status_t op_inc_port_open(uint32_t ip, uint16_t udp_port, bool udp_batching,
                                    struct op_inc_port **out);
OP_API void op_inc_port_close(struct op_inc_port *p); /* after freeing its clients */
OP_API op_status_t op_inc_join_on(struct op_inc_port *p, const struct op_inc_config *cfg,
                                  struct op_inc_client **out, uint8_t *reason);
/* op_inc_join: the same on a port of its own (cfg->ip, cfg->port). */

/* On OP_ERR_REFUSED, *reason (if not NULL) says why (enum op_inc_reason). */
OP_API op_status_t op_inc_join(const struct op_inc_config *cfg, struct op_inc_client **out,
                               uint8_t *reason);
OP_API op_status_t op_inc_allreduce(struct op_inc_client *c, const void *sendbuf, void *recvbuf,
                                    size_t count, unsigned type, unsigned op);
/* Resume c's interrupted allreduce (op_inc_eng_resume) and wait for it;
 * _start: without waiting (op_inc_client_status tells when it ends). */
OP_API op_status_t op_inc_resume(struct op_inc_client *c);
OP_API op_status_t op_inc_resume_start(struct op_inc_client *c);
/* op_inc_eng_settled on c's engine. */
OP_API void op_inc_client_settled(struct op_inc_client *c);
/* While set, the flag stops c's allreduce as its deadline would, the one
 * running or the next to start (another thread sets it: a peer has given
 * the call up), and is cleared when it did. NULL: none. */
OP_API void op_inc_client_watch(struct op_inc_client *c, atomic_bool *cancel);
/* The master frees the group on every switch; the others just let go. */
OP_API op_status_t op_inc_leave(struct op_inc_client *c);
OP_API void op_inc_client_free(struct op_inc_client *c);
OP_API struct op_inc_eng *op_inc_client_engine(struct op_inc_client *c);

/* ---- the same client without blocking (nonblocking MPI collectives): start
 * an allreduce, let any thread drive the port, ask whether it ended. A port's
 * functions may be called from several threads at once; one client runs one
 * operation at a time. */
OP_API op_status_t op_inc_allreduce_start(struct op_inc_client *c, const void *sendbuf,
                                          void *recvbuf, size_t count, unsigned type,
                                          unsigned op);
/* OP_INPROGRESS while the client's operation runs, then its result. */
OP_API op_status_t op_inc_client_status(struct op_inc_client *c);
/* Waits for packets until `until` (op_now_ns time) or the first timer of any
 * of the port's operations, then hands packets and expired timers on. */
OP_API void op_inc_port_progress(struct op_inc_port *p, uint64_t until);

#endif
