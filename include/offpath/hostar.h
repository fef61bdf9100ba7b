/* offpath host allreduce (hostar): allreduce among n leaders host to host
 * over UDP, with no switch. The baseline that isolates the switch: same
 * leaders, same io layer, same RoCEv2 UD framing and packet size as the INC
 * path; only who reduces differs.
 *
 * Algorithms: recursive doubling (pairs of leaders exchange whole vectors,
 * log2 rounds; a non-power-of-two n first folds the surplus leaders into
 * their neighbours) below ring_bytes, and ring reduce-scatter + allgather
 * (each byte crosses each link 2(n-1)/n times) from there. Every element of
 * the result is computed once in a fixed order and copied, so floats are
 * bitwise identical on every leader and from run to run.
 *
 * Reliability: each ordered pair of leaders is a reliable stream (sequence
 * numbers, cumulative + selective acks, retransmission with backoff, fast
 * retransmit on three later packets acknowledged); data that arrives before
 * it can be used (a faster partner, the next call) is kept and acknowledged.
 * Every call has a deadline (OP_ERR_TIMEOUT, never a hang).
 *
 * Two layers, as inc.h: op_har_eng_* is a pure state machine (packets and
 * time in, packets out); op_har_port / op_har_allreduce drive engines over a
 * UDP socket. The packets' codec is wire's (offpath/wire.h, op_har_*);
 * docs/wire.md section 11 shows the packets. */
#ifndef OFFPATH_HOSTAR_H
#define OFFPATH_HOSTAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/io.h"
#include "offpath/wire.h"

#define OP_HAR_MAX_WINDOW 63     /* the receiver's bitmap covers 64 sequence numbers */

/* ---- engine */
struct op_har_peer {
    uint32_t ip;   /* host order */
    uint16_t port;
};

struct op_har_config {
    uint32_t rank, n;                /* this leader, and how many (2..65535) */
    const struct op_har_peer *peers; /* n addresses, peers[rank] is this leader's; copied */
    uint32_t session;                /* names the communicator on the wire */
    uint16_t max_data;   /* payload bytes per packet: 8..4096, a multiple of 8 */
    uint16_t window;     /* packets in flight to one peer, 1..OP_HAR_MAX_WINDOW */
    uint64_t ring_bytes; /* messages of at least this many bytes take the ring */
    uint32_t hold_max;   /* packets kept that arrived before they could be used */
    uint64_t rto_ns;     /* retransmission timeout until a round trip was measured */
    uint64_t rto_min_ns, rto_max_ns;
    uint64_t ack_delay_ns; /* an ack waits at most this long for company; 0: at once */
    uint64_t deadline_ns; /* bound on each allreduce */
};

OP_API void op_har_config_default(struct op_har_config *cfg);

#define OP_HAR_COUNTERS(X)                                                                         \
    X(allreduces)                                                                                  \
    X(ring_calls)                                                                                  \
    X(rd_calls)                                                                                    \
    X(tx_data)                                                                                     \
    X(tx_acks)                                                                                     \
    X(rx_data)                                                                                     \
    X(rx_acks)                                                                                     \
    X(retransmissions)                                                                             \
    X(fast_retransmits)                                                                            \
    X(timeouts)                                                                                    \
    X(deadlines)                                                                                   \
    X(duplicates)                                                                                  \
    X(held)                                                                                        \
    X(hold_full)                                                                                   \
    X(stale)                                                                                       \
    X(future)                                                                                      \
    X(drop_truncated)                                                                              \
    X(drop_malformed)                                                                              \
    X(drop_icrc)                                                                                   \
    X(drop_foreign)                                                                                \
    X(drop_mismatch)                                                                               \
    X(drop_window)                                                                                 \
    X(abandoned)

enum op_har_counter {
#define OP_HAR_ENUM_(n) OP_HAR_C_##n,
    OP_HAR_COUNTERS(OP_HAR_ENUM_)
#undef OP_HAR_ENUM_
        OP_HAR_C_COUNT_
};
OP_API const char *op_har_counter_name(unsigned c);

struct op_har_eng;

OP_API op_status_t op_har_eng_create(const struct op_har_config *cfg, struct op_har_eng **out);
OP_API void op_har_eng_destroy(struct op_har_eng *e);
/* Start an allreduce (sendbuf may equal recvbuf; both stay valid until the
 * status is no longer OP_INPROGRESS). Every leader calls with the same count,
 * type and op, in the same order. */
OP_API op_status_t op_har_eng_allreduce(struct op_har_eng *e, const void *sendbuf, void *recvbuf,
                                        size_t count, unsigned type, unsigned op, uint64_t now,
                                        struct op_txq *out);
OP_API void op_har_eng_input(struct op_har_eng *e, const struct op_pkt *pkt, uint64_t now,
                             struct op_txq *out);
/* Acks due, retransmissions, the deadline: call when next_timer has come
 * (and after each batch of input: acks for the batch go out together). */
OP_API void op_har_eng_timer(struct op_har_eng *e, uint64_t now, struct op_txq *out);
OP_API uint64_t op_har_eng_next_timer(const struct op_har_eng *e);
/* OP_INPROGRESS while the current call runs, then its result. */
OP_API op_status_t op_har_eng_status(const struct op_har_eng *e);
/* Nothing sent is waiting for its ack. */
OP_API bool op_har_eng_quiet(const struct op_har_eng *e);
OP_API const uint64_t *op_har_eng_counters(const struct op_har_eng *e);

/* ---- blocking driver over UDP */
/* One UDP socket that all the hostar sessions of a process share. A thread
 * of its own runs the engines' timers between calls, so a leader that has
 * its result still retransmits what a slower peer lost, whatever the
 * application does next (it never receives for a caller). */
struct op_har_port;
struct op_har_client;

/* fault: NULL, or loss/duplication/delay injected on everything it sends;
 * udp_batching: op_io_udp_batching on its socket. */
OP_API op_status_t op_har_port_open(uint32_t ip, uint16_t udp_port, bool udp_batching,
                                    const struct op_fault_cfg *fault, struct op_har_port **out);
OP_API void op_har_port_close(struct op_har_port *p); /* after freeing its clients */
/* Packets that named no session of this port (foreign, may be NULL), and
 * what the fault layer injected (zero without one; may be NULL). */
OP_API void op_har_port_stats(struct op_har_port *p, uint64_t *foreign,
                              uint64_t fault[OP_FAULT_C_COUNT_]);
OP_API op_status_t op_har_attach(struct op_har_port *p, const struct op_har_config *cfg,
                                 struct op_har_client **out);
OP_API op_status_t op_har_allreduce(struct op_har_client *c, const void *sendbuf, void *recvbuf,
                                    size_t count, unsigned type, unsigned op);
/* Copy the engine's counters (OP_HAR_C_COUNT_ values). */
OP_API void op_har_client_counters(struct op_har_client *c, uint64_t *out);
OP_API void op_har_client_free(struct op_har_client *c);

#endif
