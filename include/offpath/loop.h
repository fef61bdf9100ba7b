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

/* Where a frame engine puts what it sends: the next free frame to fill
 * (op_frameq_next, then op_frameq_commit with its len set), or a frame it
 * holds handed over whole (op_frameq_put: a frame lent by the backend
 * moves to the queue, f left empty; one in a buffer of the loop's is
 * exchanged for a free buffer of the queue's). A full queue is sent first. */
struct op_frameq {
    struct op_frame *frames;
    uint8_t **bufs; /* the queue's own buffer for each slot */
    int n, cap;
    void (*flush)(void *ctx, struct op_frameq *q);
    void *ctx;
};

/* Field by field, not the whole struct: a queued frame's info is not read
 * (sending needs its bytes), and a few stores a frame matter at millions
 * of frames a second. */
static inline struct op_frame *op_frameq_next(struct op_frameq *q)
{
    if (q->n == q->cap)
        q->flush(q->ctx, q);
    struct op_frame *slot = &q->frames[q->n];
    slot->data = q->bufs[q->n];
    slot->len = 0;
    slot->queue = 0;
    slot->room = OP_IO_BUF_SIZE;
    slot->lent = NULL;
    return slot;
}
static inline void op_frameq_commit(struct op_frameq *q) { q->n++; }
static inline void op_frameq_put(struct op_frameq *q, struct op_frame *f)
{
    if (q->n == q->cap)
        q->flush(q->ctx, q);
    struct op_frame *slot = &q->frames[q->n];
    slot->data = f->data;
    slot->len = f->len;
    slot->queue = f->queue;
    slot->room = f->room;
    slot->lent = f->lent;
    if (f->lent != NULL) { /* moved: f no longer holds it */
        f->lent = NULL;
        f->data = NULL;
    } else { /* exchanged: f gets the slot's free buffer */
        f->data = q->bufs[q->n];
        q->bufs[q->n] = slot->data;
    }
    q->n++;
}

struct op_engine_ops {
    const char *name;
    /* a received packet (the engine copies what it keeps: the buffer is
     * reused; it may be the backend's, lent: op_io_recv_lent) */
    void (*input)(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *out);
    /* deadlines that passed: retransmissions, leases, give-ups; NULL (with
     * next_deadline NULL): a stateless handler has none */
    void (*timer)(void *eng, uint64_t now, struct op_txq *out);
    /* the next time timer wants calling (op_now_ns clock); UINT64_MAX: none */
    uint64_t (*next_deadline)(const void *eng);
    /* The stateless burst-handler mode (Knot's: receive a burst, handle it,
     * send a burst): a whole burst at once instead of input per packet,
     * for the loop's only engine when there is no demultiplexer (a DNS
     * worker answers the burst under one look at its zones). */
    void (*input_burst)(void *eng, const struct op_pkt *pkts, int n, uint64_t now,
                        struct op_txq *out);
    /* Whole frames (a loop with frames set, over a frame backend): each
     * burst as received, every frame with op_frame_parse's view, for the
     * loop's first engine: a switch port forwarding, a host answering
     * ARP/NDP itself. What it sends goes on out (op_frameq_put hands a
     * received frame on without a copy). */
    void (*input_frames)(void *eng, struct op_frame *frames, int n, uint64_t now,
                         struct op_frameq *out);
    /* Where the payloads of the packets coming next most likely belong
     * (op_io_recv_placed), asked before each receive for the loop's first
     * engine when there is no demultiplexer; false: nowhere foreseen.
     * An engine that gives a place takes packets with ext (a payload
     * already where it belongs, or to be moved from where the read put
     * it) and lets the read write anywhere in the place's room. NULL: the
     * engine places nothing. */
    bool (*rx_place)(void *eng, struct op_io_place *out);
};

/* The engine a received packet is for (one of those added), or NULL: the
 * packet is not for anyone here (counted as unclaimed). */
typedef void *(*op_loop_demux_fn)(void *ctx, const struct op_pkt *pkt);
/* Sends the queue (and empties it); the default is op_io_send of all of it.
 * A driver that reorders (the switch groups a wake's results by
 * destination) gives its own. */
typedef void (*op_loop_flush_fn)(void *ctx, struct op_io *io, struct op_txq *q);
/* The same for frames: sends q's frames (taking back every lent one) and
 * empties it; the default is op_io_send_frames. A server that retries a
 * full device queue and counts what it could not send gives its own. */
typedef void (*op_loop_flush_frames_fn)(void *ctx, struct op_io *io, struct op_frameq *q);

struct op_loop_config {
    /* not owned; NULL: a loop of watched descriptors and engine timers only
     * (a TCP server's connections, a control socket) */
    struct op_io *io;
    int burst;        /* packets per receive (0: OP_IO_BURST) */
    int tx_queue;     /* packets the transmit queue holds before it flushes (0: burst) */
    /* Receive bursts per round: 0 reads until the backend has no more; a
     * cap lets timers and watched fds run under a flood. */
    int bursts_per_round;
    /* false: what the engines queue leaves after each burst (a peer waiting
     * on an answer is not held up by the next burst); true: once per round,
     * after the timers, so a flush hook that regroups sees the whole wake. */
    bool flush_per_round;
    /* Never sleep in a wait (a switch under load, a perftest endpoint): the
     * round returns at once, and every yield_every empty rounds the
     * thread yields, as a loop spinning on every core starves the kernel's
     * network work until a scheduler tick. */
    bool busy_poll;
    /* Empty rounds in a row between two yields of a spinning loop (busy_poll,
     * op_loop_poll); 0: OP_LOOP_YIELD_EVERY. A latency test compared with
     * a ping-pong that spins the same way takes that ping-pong's count, so
     * that neither gives its core away more often than the other. */
    int yield_every;
    /* Engines' deadlines are looked at every this many rounds (0, 1: each);
     * for engines whose next_deadline scans much (the RoCEv2 device's 16K
     * QPs), when rounds are microseconds apart. */
    int timer_every;
    op_loop_demux_fn demux; /* NULL: every packet to the first engine added */
    void *demux_ctx;
    op_loop_flush_fn flush; /* NULL: op_io_send */
    void *flush_ctx;
    /* Whole frames: the backend's frames go to the first engine's
     * input_frames, which answers on op_loop_frameq (the backend must have
     * frames: op_io_has_frames). */
    bool frames;
    op_loop_flush_frames_fn flush_frames; /* NULL: op_io_send_frames; ctx flush_ctx */
    /* How many the next burst may take (at most burst; 0: none now), asked
     * before each receive: what is not taken waits in the backend (a
     * device's RX ring), for a driver whose next stage has bounded room.
     * NULL: a full burst. */
    int (*rx_budget)(void *ctx);
    void *budget_ctx;
    /* Several threads may drive one loop (a progress thread beside blocking
     * calls): engines run under this lock, which is released while waiting.
     * NULL: one thread. */
    pthread_mutex_t *lock;
};

#define OP_LOOP_YIELD_EVERY 16

struct op_loop_stats {
    uint64_t rounds;    /* waits */
    uint64_t rx;        /* packets handed to engines */
    uint64_t unclaimed; /* packets no engine wanted */
    uint64_t flushes;   /* times the transmit queue went out */
    uint64_t yields;    /* busy_poll: times the thread gave its core away */
};

struct op_loop;

OP_API op_status_t op_loop_create(const struct op_loop_config *cfg, struct op_loop **out);
OP_API void op_loop_destroy(struct op_loop *l);
/* OP_ERR_NOSPACE past OP_LOOP_MAX_ENGINES. */
#define OP_LOOP_MAX_ENGINES 256
OP_API op_status_t op_loop_add(struct op_loop *l, const struct op_engine_ops *ops, void *eng);
OP_API void op_loop_remove(struct op_loop *l, const void *eng);
/* The engines added, 0 .. op_loop_engines - 1 (a demultiplexer looks
 * among them; order changes when one is removed). */
OP_API int op_loop_engines(const struct op_loop *l);
OP_API void *op_loop_engine(const struct op_loop *l, int i);
/* Where engines queue what they send outside input and timer (starting an
 * operation); op_loop_flush sends it. With a lock, hold it for both. */
OP_API struct op_txq *op_loop_txq(struct op_loop *l);
/* The same for frames (a loop with frames set; NULL otherwise): what an
 * engine sends from its timer or outside a round. op_loop_flush sends it. */
OP_API struct op_frameq *op_loop_frameq(struct op_loop *l);
OP_API void op_loop_flush(struct op_loop *l);
/* A file descriptor the loop waits on beside the backend (a signalfd, an
 * eventfd): fn runs, under the lock, first thing in a round where fd is
 * readable; it reads what woke it. At most OP_LOOP_MAX_WATCHES. */
#define OP_LOOP_MAX_WATCHES 65536
typedef void (*op_loop_fd_fn)(void *ctx, int fd);
OP_API op_status_t op_loop_watch(struct op_loop *l, int fd, op_loop_fd_fn fn, void *ctx);
/* The same for events (OP_IO_IN, OP_IO_OUT: a connection read, or written
 * while it has output): fn gets what is ready, OP_IO_ERR for an error or a
 * hang-up (the next call on fd says which). A callback may watch, change
 * (op_loop_watch_set) and unwatch descriptors, its own included: one added
 * is waited on from the next round, one removed is not called again. */
typedef void (*op_loop_ready_fn)(void *ctx, int fd, unsigned ready);
OP_API op_status_t op_loop_watch_events(struct op_loop *l, int fd, unsigned events,
                                        op_loop_ready_fn fn, void *ctx);
OP_API op_status_t op_loop_watch_set(struct op_loop *l, int fd, unsigned events);
OP_API void op_loop_unwatch(struct op_loop *l, int fd);

/* One round: wait until a packet is readable, a watched fd is, the earliest
 * deadline of the engines and the backend, or until (whichever first); then
 * op_loop_serve. Returns the packets handed over, or -errno. */
OP_API int op_loop_run_once(struct op_loop *l, uint64_t until);
/* The round without the wait: watched fds, receive bursts into the engines,
 * timers that are due, flush. */
OP_API int op_loop_serve(struct op_loop *l);
/* One wait over several loops (a load generator's K sockets, each its own
 * loop with its own engines): then each serves. Returns the packets handed
 * over in all, or the first -errno. */
OP_API int op_loop_run_many(struct op_loop *const *loops, int n, uint64_t until);
/* The wait of a round alone (queued output leaves first): for a driver
 * that then serves with op_loop_poll. 0, or -errno. */
OP_API int op_loop_wait(struct op_loop *l, uint64_t until);
/* For a driver that interleaves its own work with the engines' (perftest's
 * measurement loops): at most max packets in, no wait and no flush (what
 * the engines answered stays queued in op_loop_txq, to leave with what the
 * caller posts next), timers if due. Returns the packets handed over. A
 * caller spins on it, so it yields as a busy_poll round does. */
OP_API int op_loop_poll(struct op_loop *l, int max);
/* op_loop_poll for a waiter of one packet: up to `reads` reads of the
 * backend back to back, nothing between them but the yield count (each
 * read an empty round), as a plain recv loop spins; the clock, the hand
 * over and the timers come after the read that brought packets, or after
 * the last. A packet that comes during the spin waits for no clock read,
 * timer scan or caller's check. reads >= 1. */
OP_API int op_loop_spin(struct op_loop *l, int max, int reads);
/* The clock (op_now_ns) as the last op_loop_poll read it, before its
 * receive (op_loop_spin: after it): what it handed over came at about that
 * time, and a caller that answers at once needs no clock read of its own.
 * 0 before the first. */
OP_API uint64_t op_loop_poll_time(const struct op_loop *l);
OP_API void op_loop_stats(const struct op_loop *l, struct op_loop_stats *out);
/* The earliest deadline of the engines and the backend (UINT64_MAX: none),
 * for a driver that sleeps elsewhere between rounds (hostar's timer thread);
 * op_loop_serve then serves what is ready. */
OP_API uint64_t op_loop_next_deadline(const struct op_loop *l);

#endif
