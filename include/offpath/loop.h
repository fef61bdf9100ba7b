/* offpath loop: the engine contract and the one driver that runs engines
 * over an I/O backend.
 *
 * Every protocol engine (the switch, the INC leader, hostar, the RoCEv2
 * device, and the engines still to come: the secure channel, the offload
 * agent, DNS, the GPU work queue) is pure: packets and the time in, packets
 * to send and a next deadline out. It offers three entry points
 * (struct op_engine_ops, after Knot's layer API and UCX's ops tables); the
 * driver owns the socket, the packet buffers and the transmit queue, waits
 * until a packet or the earliest deadline, hands each packet to the engine
 * the demultiplexer names and runs the timers. docs/ARCHITECTURE.md. */
#ifndef OFFPATH_LOOP_H
#define OFFPATH_LOOP_H

#include <pthread.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/io.h"

struct op_engine_ops {
    const char *name;
    /* a received packet (the engine copies what it keeps: the buffer is reused) */
    void (*input)(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *out);
    /* deadlines that passed: retransmissions, leases, give-ups */
    void (*timer)(void *eng, uint64_t now, struct op_txq *out);
    /* the next time timer wants calling (op_now_ns clock); UINT64_MAX: none */
    uint64_t (*next_deadline)(const void *eng);
};

/* The engine a received packet is for (one of those added), or NULL: the
 * packet is not for anyone here (counted as unclaimed). */
typedef void *(*op_loop_demux_fn)(void *ctx, const struct op_pkt *pkt);
/* Sends the queue (and empties it); the default is op_io_send of all of it.
 * A driver that reorders (the switch groups a wake's results by
 * destination) gives its own. */
typedef void (*op_loop_flush_fn)(void *ctx, struct op_io *io, struct op_txq *q);

struct op_loop_config {
    struct op_io *io; /* not owned */
    int burst;        /* packets per receive and per transmit queue (0: OP_IO_BURST) */
    op_loop_demux_fn demux; /* NULL: every packet to the first engine added */
    void *demux_ctx;
    op_loop_flush_fn flush; /* NULL: op_io_send */
    void *flush_ctx;
    /* Several threads may drive one loop (a progress thread beside blocking
     * calls): engines run under this lock, which is released while waiting.
     * NULL: one thread. */
    pthread_mutex_t *lock;
};

struct op_loop_stats {
    uint64_t rounds;    /* waits */
    uint64_t rx;        /* packets handed to engines */
    uint64_t unclaimed; /* packets no engine wanted */
};

struct op_loop;

OP_API op_status_t op_loop_create(const struct op_loop_config *cfg, struct op_loop **out);
OP_API void op_loop_destroy(struct op_loop *l);
/* OP_ERR_NOSPACE past OP_LOOP_MAX_ENGINES. */
#define OP_LOOP_MAX_ENGINES 256
OP_API op_status_t op_loop_add(struct op_loop *l, const struct op_engine_ops *ops, void *eng);
OP_API void op_loop_remove(struct op_loop *l, const void *eng);
/* Where engines queue what they send outside input and timer (starting an
 * operation); op_loop_flush sends it. With a lock, hold it for both. */
OP_API struct op_txq *op_loop_txq(struct op_loop *l);
OP_API void op_loop_flush(struct op_loop *l);
/* One round: wait until a packet is readable, the earliest deadline of the
 * engines and the backend, or until (whichever first); hand every packet
 * read to its engine; run the timers that are due. Returns the packets
 * handed over, or -errno from the backend. */
OP_API int op_loop_run_once(struct op_loop *l, uint64_t until);
OP_API void op_loop_stats(const struct op_loop *l, struct op_loop_stats *out);
/* The earliest deadline of the engines and the backend (UINT64_MAX: none),
 * for a driver that sleeps elsewhere between rounds (hostar's timer thread);
 * op_loop_run_once(l, 0) then serves what is ready without waiting. */
OP_API uint64_t op_loop_next_deadline(const struct op_loop *l);

#endif
