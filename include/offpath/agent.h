/* offpath agent: collectives done by worker threads beside (or instead of)
 * the host, the DPA threads' and the DPU daemon's role in DOCA.
 *
 * All-to-all (op_a2a): every rank's send buffer holds one chunk for each
 * rank; chunk q goes to rank q, into its receive buffer at this rank's
 * place. W worker threads move the data with RC RDMA WRITE WITH IMMEDIATE
 * of offpath's RoCEv2 (src/rdma) into the peers' registered receive
 * buffers, never through the host's calls; the immediate is the peer's
 * completion signal. Worker w of a rank owns the queue pairs to the ranks
 * q with q % W == w (each its own UDP socket, device and loop), so the
 * pairs are spread over the threads and every QP has one thread.
 *
 * Setup is two exchanges the caller does (MPI_Allgather and MPI_Alltoall in
 * `offpath dpa_all_to_all`): every rank's endpoint to all, and each pair's
 * QP number and PSN to the peer of the pair. docs/agent.md. */
#ifndef OFFPATH_AGENT_H
#define OFFPATH_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "offpath/channel.h"
#include "offpath/common.h"
#include "offpath/wire/agent.h" /* the messages, the endpoint and QP exchanged */

struct op_a2a_config {
    uint32_t ranks, rank;
    uint32_t workers; /* 1..OP_A2A_MAX_WORKERS; more than ranks is capped to ranks */
    uint32_t ip;      /* this rank's address, host order (127.0.0.1 on one machine) */
    size_t chunk;     /* bytes to each rank: the buffers hold ranks * chunk */
    uint32_t mtu;     /* path MTU: 256..4096 (0: 1024) */
    /* every worker a thread, worker 0 too: a call started moves on while
     * the caller does something else (op_a2a_start); otherwise worker 0 is
     * the caller's thread inside op_a2a_wait (one wake-up less a call) */
    bool progress;
    /* with pinned, the worker threads run on CPU `cpu` (a DPA's own core,
     * away from the cores the ranks compute on) */
    bool pinned;
    int cpu;
    struct op_log *log;
};

/* What every rank publishes (same bytes on every machine: fixed-width
 * fields, host order, for an MPI_BYTE gather among like machines). */
struct op_a2a;

OP_API op_status_t op_a2a_create(const struct op_a2a_config *cfg, struct op_a2a **out);
OP_API void op_a2a_destroy(struct op_a2a *a); /* stops the workers */
OP_API void op_a2a_endpoint(const struct op_a2a *a, struct op_a2a_endpoint *out);
/* out[q]: this rank's QP to rank q (zeros for q == rank). */
OP_API void op_a2a_qp_infos(const struct op_a2a *a, struct op_a2a_qp_info *out);
/* eps[q]: rank q's endpoint; theirs[q]: rank q's QP to this rank. Refuses
 * (OP_ERR_INVAL, logged) a peer with another chunk size or worker count. */
OP_API op_status_t op_a2a_connect(struct op_a2a *a, const struct op_a2a_endpoint *eps,
                                  const struct op_a2a_qp_info *theirs);
/* ranks * chunk bytes each, registered with every worker's device; the
 * receive buffer shown is the last call's (calls alternate between two, so
 * a peer already in the next call never writes into it). */
OP_API void *op_a2a_sendbuf(struct op_a2a *a);
OP_API void *op_a2a_recvbuf(struct op_a2a *a);
OP_API uint32_t op_a2a_workers(const struct op_a2a *a);
/* One all-to-all: returns when this rank's chunks were all delivered and
 * every peer's chunk is in the receive buffer, or at deadline_ns
 * (OP_ERR_TIMEOUT), or on a QP error (OP_ERR_IO, its cause logged). Calls
 * need no barrier between them: see op_a2a_recvbuf. */
OP_API op_status_t op_a2a_run(struct op_a2a *a, uint64_t deadline_ns);
/* op_a2a_run in halves, for a call that overlaps the caller's work (with
 * cfg.progress): start returns at once; done says whether the workers have
 * finished (always false without cfg.progress); wait ends the call and is
 * op_a2a_run's result. One call at a time. */
OP_API void op_a2a_start(struct op_a2a *a, uint64_t deadline_ns);
OP_API bool op_a2a_done(struct op_a2a *a);
OP_API op_status_t op_a2a_wait(struct op_a2a *a);

/* ---- Allreduce offloaded to daemons (DOCA's allreduce application): the
 * daemon's engine. Pure: its clients' vectors and the other daemons'
 * partial results in, partials and results out through emit; the daemon
 * moves the bytes (the secure channel to clients, RDMA between daemons).
 *
 * Reduction order, the same on every daemon (so floats come out equal
 * everywhere): a daemon's partial is its clients' vectors in client order,
 * ((v0 op v1) op v2) ...; the result is the daemons' partials in daemon
 * order, ((P0 op P1) op P2) .... Operations are numbered 0, 1, 2 ... and at
 * most `window` (DOCA's batch size) are in flight: an operation's slot is
 * its number modulo the window. Vectors are kept until their operation
 * completes: (clients + daemons) x count elements a slot. */
#define OP_AR_COUNTERS(X)                                                                          \
    X(client_vectors)  /* accepted from this daemon's clients */                                   \
    X(peer_partials)   /* accepted from the other daemons */                                       \
    X(partials_sent)   /* this daemon's partial, once an operation */                              \
    X(results)         /* operations completed */                                                  \
    X(bad_source)      /* a client or daemon number out of range, or the daemon itself */          \
    X(bad_size)        /* a vector not count elements long */                                     \
    X(out_of_window)   /* an operation beyond the window, or one already completed */              \
    X(duplicate)       /* a second vector from one source for one operation */

enum op_ar_counter {
#define OP_AR_ENUM_(n) OP_AR_C_##n,
    OP_AR_COUNTERS(OP_AR_ENUM_)
#undef OP_AR_ENUM_
        OP_AR_C_COUNT_
};
OP_API const char *op_ar_counter_name(unsigned c);

struct op_ar_config {
    uint32_t daemons, self; /* daemons in all, and this one's number */
    uint32_t clients;       /* this daemon's clients (at least 1) */
    uint64_t count;         /* elements a vector (DOCA's -s) */
    unsigned type, op;      /* enum op_red_type, enum op_red_op */
    uint32_t window;        /* operations in flight at most (DOCA's -b) */
};

enum op_ar_out_kind {
    OP_AR_PARTIAL, /* to every other daemon */
    OP_AR_RESULT,  /* to every client of this daemon */
};
struct op_ar_out {
    enum op_ar_out_kind kind;
    uint64_t id;
    const void *data; /* count elements, valid during the call */
    size_t bytes;
};
typedef void (*op_ar_emit_fn)(void *ctx, const struct op_ar_out *out);

struct op_ar;
OP_API op_status_t op_ar_create(const struct op_ar_config *cfg, op_ar_emit_fn emit, void *ctx,
                                struct op_ar **out);
OP_API void op_ar_destroy(struct op_ar *ar);
/* Client c's vector for operation id (count elements, host order). A bad
 * one is refused (OP_ERR_MALFORMED or OP_ERR_INVAL) and counted, and
 * changes nothing. May emit a partial, and then a result. */
OP_API op_status_t op_ar_client(struct op_ar *ar, uint32_t client, uint64_t id, const void *vec,
                                size_t bytes);
/* Daemon d's partial for operation id; the same checks. May emit a result. */
OP_API op_status_t op_ar_peer(struct op_ar *ar, uint32_t daemon, uint64_t id, const void *partial,
                              size_t bytes);
/* Operations completed in order from 0: every one below is done. */
OP_API uint64_t op_ar_done_below(const struct op_ar *ar);
OP_API const uint64_t *op_ar_counters(const struct op_ar *ar);
OP_API struct op_counter_set op_ar_counter_set(const struct op_ar *ar);

/* DOCA's configuration handshake: "-s %zu -d %s -b %zu -i %zu" (vector
 * size, datatype name, batch size, batches). Peers refuse a mismatch. */
OP_API int op_ar_handshake_format(uint64_t size, const char *dtype, uint64_t batch,
                                  uint64_t batches, char *buf, size_t cap);
/* OP_OK when theirs is well formed and equal to mine; otherwise
 * OP_ERR_MALFORMED or OP_ERR_INVAL with the field named in why. */
OP_API op_status_t op_ar_handshake_check(const char *mine, const char *theirs, char *why,
                                         size_t why_len);

/* ---- `offpath allreduce` (DOCA's allreduce application), offloaded mode:
 * daemons (the DPU's role) reduce for their clients and exchange partials
 * with RDMA writes (op_a2a); clients reach their daemon over the secure
 * channel (offpath/channel.h), submit and go on computing.
 *
 * Keys: the job's daemons share one key pair (they authenticate each other
 * with it) and its clients another; a daemon takes --key (the daemons'
 * secret) and --peer (the clients' public key), a client the other way
 * round. docs/agent.md. */

enum op_agent_type { OP_AGENT_BYTE, OP_AGENT_INT, OP_AGENT_FLOAT, OP_AGENT_DOUBLE };

struct op_agent_job {
    uint64_t size;               /* elements a vector (-s) */
    enum op_agent_type type;     /* -d */
    unsigned op;                 /* enum op_red_op: SUM or PROD (-o) */
    uint64_t batch, batches;     /* -b, -i */
};
OP_API const char *op_agent_type_name(enum op_agent_type t); /* "float" */
OP_API unsigned op_agent_red_type(enum op_agent_type t);      /* enum op_red_type */

/* The largest vector a channel message carries, and what a job may ask. */
OP_API bool op_agent_job_ok(const struct op_agent_job *job);

#define OP_AGENT_MAX_DAEMONS 64
#define OP_AGENT_MAX_CLIENTS 64 /* a daemon's */
/* Where a daemon is, whom it serves and whom it trusts: the settings both
 * daemons (allreduce, all-to-all) take. */
struct op_agent_daemon_net {
    uint32_t ip;          /* this daemon's address (host order) */
    uint16_t port;        /* -t: clients connect here; daemons at port + 1 */
    uint32_t clients;     /* -c */
    uint32_t n_daemons;   /* -a: every daemon in one order, this one among them */
    uint32_t daemon_ip[OP_AGENT_MAX_DAEMONS];
    uint16_t daemon_port[OP_AGENT_MAX_DAEMONS];
    struct op_chan_keypair key;               /* the daemons' */
    uint8_t clients_pub[OP_CHAN_KEY_BYTES];   /* the clients' */
    uint64_t timeout_ns;  /* longest wait for a peer at any point */
    struct op_log *log;
};
struct op_agent_daemon_config {
    struct op_agent_job job;
    struct op_agent_daemon_net net;
};
/* Runs a daemon until every client said goodbye (OP_OK) or something
 * failed (logged). */
OP_API op_status_t op_agent_daemon_run(const struct op_agent_daemon_config *cfg);

struct op_agent_client_config {
    struct op_agent_job job;
    /* offloaded: its daemon; non-offloaded (mesh): every client, this one
     * among them at ip:port, one order on all (the reduction order) */
    bool mesh;
    struct op_chan_addr daemon;
    uint32_t ip;
    uint16_t port;
    uint32_t n_clients;
    uint32_t client_ip[OP_AGENT_MAX_CLIENTS];
    uint16_t client_port[OP_AGENT_MAX_CLIENTS];
    struct op_chan_keypair key;             /* the clients' */
    uint8_t peer_pub[OP_CHAN_KEY_BYTES];    /* the daemons' (mesh: the clients') */
    uint64_t timeout_ns;
    /* offloaded, with io_pinned: the CPU the client's sending and
     * receiving threads run on (the channel's encryption and socket work),
     * away from the core that computes; otherwise where the process runs */
    bool io_pinned;
    int io_cpu;
    struct op_log *log;
};
struct op_agent_client_result {
    uint32_t rank, clients, daemons;  /* as the daemon assigned */
    double batch_min_s, batch_max_s, batch_avg_s, total_s;
    double compute_s, network_s;      /* per batch: the compute loop, and pure network time */
    double overlap_pct;               /* DOCA's formula */
    /* where a measured batch's time went, on average: in submit, in the
     * compute loop (longer than compute_s when something else takes the
     * core), and waiting for the results */
    double submit_s, compute_in_batch_s, wait_s;
    uint64_t results, wrong;          /* operations received, elements off the reference */
};
OP_API op_status_t op_agent_client_run(const struct op_agent_client_config *cfg,
                                       struct op_agent_client_result *out);

/* ---- All-to-all offloaded to daemons (`offpath dpa_all_to_all -d`): each
 * daemon (the DPU's role) hosts its clients' ranks of the all-to-all as
 * op_a2a ranks, and the daemons move the chunks to each other by RDMA
 * writes into registered receive buffers; a client hands its send buffer
 * over the secure channel and gets its receive buffer back. Daemon j of n
 * serves ranks j * c .. j * c + c - 1 of an all-to-all of n * c ranks.
 *
 * A daemon serves sessions one after another: a session starts when its c
 * clients have greeted it with the same chunk size and worker count (one
 * refused is told why and counted), links its ranks with the other
 * daemons', runs the clients' calls, and ends when every client has said
 * goodbye or is gone (its ranks' resources freed, logged and counted). */
#define OP_A2A_DAEMON_COUNTERS(X)                                                                  \
    X(sessions)       /* sessions served to their end */                                          \
    X(calls)          /* a client's all-to-all calls completed */                                 \
    X(failed_calls)   /* calls that did not complete (the client told why) */                     \
    X(refused)        /* clients turned away at their greeting */                                 \
    X(malformed)      /* requests refused: malformed or not the session's size */                 \
    X(clients_gone)   /* clients that vanished without a goodbye */

enum op_a2a_daemon_counter {
#define OP_A2A_D_ENUM_(n) OP_A2A_D_##n,
    OP_A2A_DAEMON_COUNTERS(OP_A2A_D_ENUM_)
#undef OP_A2A_D_ENUM_
        OP_A2A_D_COUNT_
};
OP_API const char *op_a2a_daemon_counter_name(unsigned c);

struct op_a2a_daemon_config {
    struct op_agent_daemon_net net; /* net.clients: ranks this daemon serves */
    uint64_t sessions;              /* return after this many (0: never) */
};
/* Serves sessions; returns OP_OK after cfg->sessions of them, or the error
 * that stopped it (a listening socket that cannot be opened). counters:
 * OP_A2A_D_COUNT_ values, may be NULL. */
OP_API op_status_t op_a2a_daemon_run(const struct op_a2a_daemon_config *cfg, uint64_t *counters);

struct op_a2a_client_config {
    struct op_chan_addr daemon;
    struct op_chan_keypair key;          /* the clients' */
    uint8_t peer_pub[OP_CHAN_KEY_BYTES]; /* the daemons' */
    uint32_t ranks, rank, workers;       /* workers: the daemon's, for this rank */
    uint64_t chunk;                      /* ranks * chunk fits a channel message */
    uint64_t timeout_ns;                 /* longest wait for the daemon */
    struct op_log *log;
};
struct op_a2a_client;
/* Greets the daemon, which answers once every rank it serves has greeted
 * it and its ranks are linked with the other daemons'. */
OP_API op_status_t op_a2a_client_open(const struct op_a2a_client_config *cfg,
                                      struct op_a2a_client **out);
/* ranks * chunk bytes each: the send buffer is the request itself (no copy
 * on submit); the receive buffer holds the last call's result. */
OP_API void *op_a2a_client_sendbuf(struct op_a2a_client *c);
OP_API const void *op_a2a_client_recvbuf(const struct op_a2a_client *c);
/* Submits the send buffer (one channel message) and returns. */
OP_API op_status_t op_a2a_client_start(struct op_a2a_client *c);
/* The result of the last start into the receive buffer; OP_ERR_TIMEOUT or
 * the daemon's refusal (logged with its reason) otherwise. */
OP_API op_status_t op_a2a_client_wait(struct op_a2a_client *c);
/* Goodbye (when the last call succeeded), and everything freed. */
OP_API void op_a2a_client_close(struct op_a2a_client *c);

/* `offpath dpa_all_to_all` (DOCA's dpa_all_to_all, an MPI program): its
 * settings, parsed by src/cli (a2a_args.c, linked into the MPI program of
 * src/mpi, built once per MPI). */
#define OP_A2A_BENCH_MAX_LIST 16
struct op_a2a_bench_config {
    /* -m: bytes of each rank's send buffer (DOCA's msgsize), each a
     * multiple of 4; 0: ranks * 4, DOCA's default */
    uint64_t msgsize[OP_A2A_BENCH_MAX_LIST];
    int n_msgsize;
    /* -t: worker threads a rank runs; 0: min(ranks, 8), DOCA's count */
    uint32_t threads[OP_A2A_BENCH_MAX_LIST];
    int n_threads;
    uint32_t iters, warmup; /* timed runs of each (size, threads), and untimed before */
    uint32_t ip;            /* --ip: the address the workers bind (host order) */
    /* print the send and receive matrices, as DOCA does: AUTO when a row
     * has at most 64 values */
    enum { OP_A2A_MATRIX_AUTO, OP_A2A_MATRIX_ALWAYS, OP_A2A_MATRIX_NEVER } matrices;
    bool json;              /* one JSON line per measurement too */
    bool help;
    /* -d: the agent daemons the all-to-all is offloaded to (none: the
     * workers run in each rank); rank r is served by daemon
     * r / (ranks / n_daemons), over the secure channel with --key (the
     * ranks' secret) and --peer (the daemons' public key) */
    uint32_t n_daemons;
    uint32_t daemon_ip[OP_AGENT_MAX_DAEMONS];
    uint16_t daemon_port[OP_AGENT_MAX_DAEMONS];
    const char *key, *peer;
    uint32_t timeout_s; /* --timeout: longest wait for a daemon (default 30) */
};

/* OP_OK, or OP_ERR_INVAL with a message naming the flag in err. Checks
 * what needs the number of ranks later (op_a2a_bench_sizes_ok). */
op_status_t op_a2a_bench_parse(int argc, char **argv, struct op_a2a_bench_config *cfg, char *err,
                               size_t err_len);
void op_a2a_bench_usage(FILE *out);

#endif
