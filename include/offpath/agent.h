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

#include "offpath/common.h"

#define OP_A2A_MAX_WORKERS 64
#define OP_A2A_MAX_RANKS 4096

struct op_a2a_config {
    uint32_t ranks, rank;
    uint32_t workers; /* 1..OP_A2A_MAX_WORKERS; more than ranks is capped to ranks */
    uint32_t ip;      /* this rank's address, host order (127.0.0.1 on one machine) */
    size_t chunk;     /* bytes to each rank: the buffers hold ranks * chunk */
    uint32_t mtu;     /* path MTU: 256..4096 (0: 1024) */
    struct op_log *log;
};

/* What every rank publishes (same bytes on every machine: fixed-width
 * fields, host order, for an MPI_BYTE gather among like machines). */
struct op_a2a_endpoint {
    uint32_t ip, workers;
    uint64_t recv_addr; /* the receive buffers' address in this rank (two halves) */
    uint64_t chunk;
    uint16_t port[OP_A2A_MAX_WORKERS]; /* worker w's UDP port */
    uint32_t rkey[OP_A2A_MAX_WORKERS]; /* the receive buffer as worker w's region */
};

/* The pair (me, peer)'s queue pair as the peer must know it. */
struct op_a2a_qp_info {
    uint32_t qpn, psn;
};

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
};

/* OP_OK, or OP_ERR_INVAL with a message naming the flag in err. Checks
 * what needs the number of ranks later (op_a2a_bench_sizes_ok). */
op_status_t op_a2a_bench_parse(int argc, char **argv, struct op_a2a_bench_config *cfg, char *err,
                               size_t err_len);
void op_a2a_bench_usage(FILE *out);

#endif
