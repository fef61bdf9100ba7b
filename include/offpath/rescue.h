/* offpath rescue: how the leaders of a group agree on a switch call that some
 * of them could not finish, whatever call each of them has reached.
 *
 * A leader whose call N ended at its deadline asks every other leader where
 * it stands: which calls it completed, whether it is in call N, gave N up, or
 * has not reached it. The answers decide (op_rsc_decide):
 *  - a peer completed N through the switch: take its saved result (fetch);
 *  - a peer has not reached N, or does not answer (stopped, descheduled):
 *    the peer is late, the switch may be fine: wait on the switch again;
 *  - every peer has been in call N for at least the patience (a deadline),
 *    or one gave it up: nobody will get N from the switch: give it up too,
 *    and once every leader has given it up, all redo N without the switch
 *    (the MPI's own allreduce among the leaders). A peer in the call for
 *    less may simply not have been scheduled to send yet: it is waited for.
 * The answers come from a thread of each leader's process (op_rsc_svc), so a
 * leader that went on to other work (a barrier, a computation, MPI_Finalize)
 * still hands out the result it holds and learns that a peer gave up a call
 * it is waiting in (its cancel flag). No MPI call is made here: the MPI
 * library does the redo. Messages are plain UDP on the leaders' addresses. */
#ifndef OFFPATH_RESCUE_H
#define OFFPATH_RESCUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/wire.h"

/* What one peer said (answered false: silence within the wait). */
struct op_rsc_peer {
    bool answered;
    uint8_t state;
    uint64_t seq, completed;
    uint32_t total;      /* bytes of the result it holds */
    uint32_t in_call_ms; /* how long it has been in (or given up) call seq */
};

enum op_rsc_verdict {
    OP_RSC_FETCH,     /* *from completed the call: take its result */
    OP_RSC_WAIT_PEER, /* a peer is late: wait on the switch again */
    OP_RSC_GIVE_UP,   /* nobody will get the call from the switch */
    OP_RSC_HOLD,      /* gave up: wait until every leader has */
    OP_RSC_REDO,      /* every leader gave the call up: redo it without the switch */
};
/* Pure: the decision of a leader at call seq from its peers' answers. */
OP_API enum op_rsc_verdict op_rsc_decide(const struct op_rsc_peer *peers, int n, uint64_t seq,
                                         bool gave_up, uint32_t patience_ms, int *from);
OP_API const char *op_rsc_verdict_name(enum op_rsc_verdict v);

/* ---- the service of one process: a thread answering peers, and the asking side */
struct op_rsc_svc;
struct op_rsc_entry; /* one group of this process */

#define OP_RSC_COUNTERS(X)                                                                         \
    X(requests)     /* requests answered */                                                        \
    X(malformed)    /* datagrams refused by the decoder */                                        \
    X(cancels)      /* calls stopped because a peer gave them up */                                \
    X(fetch_chunks) /* result chunks received */                                                  \
    X(resends)      /* requests sent again after silence */

enum op_rsc_counter {
#define OP_RSC_ENUM_(n) OP_RSC_C_##n,
    OP_RSC_COUNTERS(OP_RSC_ENUM_)
#undef OP_RSC_ENUM_
        OP_RSC_C_COUNT_
};

/* Binds ip:port (host order) and starts the thread. */
OP_API op_status_t op_rsc_svc_open(uint32_t ip, uint16_t port, struct op_rsc_svc **out);
OP_API void op_rsc_svc_close(struct op_rsc_svc *s); /* after closing its entries */
OP_API void op_rsc_svc_counters(struct op_rsc_svc *s, uint64_t out[OP_RSC_C_COUNT_]);

OP_API struct op_rsc_entry *op_rsc_entry_open(struct op_rsc_svc *s, uint32_t job, uint32_t comm);
/* The group is freed here; its last result is still handed out for a while
 * (the last few closed entries are kept), as a late peer may need it. */
OP_API void op_rsc_entry_close(struct op_rsc_svc *s, struct op_rsc_entry *e);

OP_API void op_rsc_call_begin(struct op_rsc_svc *s, struct op_rsc_entry *e, uint64_t seq);
OP_API void op_rsc_give_up(struct op_rsc_svc *s, struct op_rsc_entry *e);
/* Call seq completed with this result (kept for peers that miss it).
 * OP_ERR_STATE, and nothing kept, if the leader gave the call up (itself or
 * through the thread) and the result came from the switch anyway: the
 * others were told, so the call is settled with them (settled: it was). */
OP_API op_status_t op_rsc_call_done(struct op_rsc_svc *s, struct op_rsc_entry *e, uint64_t seq,
                                    const void *result, size_t bytes, bool settled);
OP_API bool op_rsc_gave_up(struct op_rsc_svc *s, struct op_rsc_entry *e);
/* Set by the thread when a peer gave up the call this group is in (the
 * group has then given it up too). */
OP_API atomic_bool *op_rsc_cancel_flag(struct op_rsc_entry *e);

/* Asking, in steps that never block (a nonblocking MPI call settles from
 * inside MPI_Test): an asker is a socket of its own on the service's
 * address, so groups settling at once never read each other's answers. */
struct op_rsc_ask {
    const uint32_t *ips; /* the peers */
    const uint16_t *ports; /* each peer's service port (peers sharing an
                            * address: a node's socket leaders); NULL: port */
    int n;
    uint16_t port;   /* their services' when ports is NULL */
    uint64_t wait_ns; /* how long a silent peer is waited for */
};
struct op_rsc_asker {
    int fd;
    uint32_t nonce;
    unsigned rounds;
    int missing;
    uint64_t sent_ns, end_ns;
    struct op_rsc_msg q; /* the request in flight */
    uint32_t ip;         /* fetch: from whom, what, where to */
    uint16_t port;
    uint8_t *buf;
    size_t bytes, got;
    uint8_t rx[OP_RSC_MAX_MSG + 1];
};
OP_API op_status_t op_rsc_asker_open(struct op_rsc_svc *s, struct op_rsc_asker *a);
OP_API void op_rsc_asker_close(struct op_rsc_asker *a);
/* Ask every peer where it stands on e's group, telling them where e stands;
 * op_rsc_ask_step reads answers (resending to the silent every 20 ms) and
 * is true when all answered or wait_ns passed. */
OP_API void op_rsc_ask_start(struct op_rsc_svc *s, struct op_rsc_asker *a, struct op_rsc_entry *e,
                             const struct op_rsc_ask *q, struct op_rsc_peer *out);
OP_API bool op_rsc_ask_step(struct op_rsc_svc *s, struct op_rsc_asker *a,
                            const struct op_rsc_ask *q, struct op_rsc_peer *out);
/* The result of call seq from the peer at ip; the step returns
 * OP_INPROGRESS until it has it all (OP_OK), the peer does not hold it
 * (OP_ERR_STATE) or the deadline passed (OP_ERR_TIMEOUT). */
OP_API void op_rsc_fetch_start(struct op_rsc_svc *s, struct op_rsc_asker *a, struct op_rsc_entry *e,
                               uint32_t ip, uint16_t port, uint64_t seq, void *buf, size_t bytes,
                               uint64_t deadline_ns);
OP_API op_status_t op_rsc_fetch_step(struct op_rsc_svc *s, struct op_rsc_asker *a);

/* The same, waiting: ask each peer (ip, port) where it stands on e's group,
 * telling them where e stands; waits until all answered or wait_ns passed. */
OP_API void op_rsc_poll(struct op_rsc_svc *s, struct op_rsc_entry *e, const uint32_t *peer_ips,
                        int n, uint16_t port, uint64_t wait_ns, struct op_rsc_peer *out);
/* The result of call seq from the peer at ip into buf (bytes long). */
OP_API op_status_t op_rsc_fetch(struct op_rsc_svc *s, struct op_rsc_entry *e, uint32_t ip,
                                uint16_t port, uint64_t seq, void *buf, size_t bytes,
                                uint64_t deadline_ns);

#endif
