/* The allreduce client's state (client.c: the measurement and the
 * offloaded client; client_mesh.c: the non-offloaded clients' mesh). */
#ifndef OFFPATH_AGENT_CLIENT_INTERNAL_H
#define OFFPATH_AGENT_CLIENT_INTERNAL_H

#include <pthread.h>

#include "agent_proto.h"

struct client;

/* Non-offloaded: another client, and the vectors it sent in this batch. */
struct peer_link {
    struct client *cl;
    uint32_t rank;
    struct op_channel *ch;
    pthread_t thread;
    bool started;
    uint8_t *in; /* batch slots by id % batch */
    uint64_t got;
};
#define MM_N 48 /* the compute step: one MM_N x MM_N double matrix product */

struct client {
    const struct op_agent_client_config *cfg;
    struct op_channel *ch;
    struct op_agent_welcome w;
    size_t bytes;
    uint8_t *vec, *ref, *tmp; /* a vector, the reference, a partial */
    /* Outside the timed part of a batch: its requests are prepared before
     * it and its results checked after it, so what is timed is what DOCA
     * times (submit, compute, wait), not this tool's checking. */
    uint8_t *out;      /* batch requests, OP_AGENT_ID_HDR + bytes each */
    uint8_t *in;       /* batch results by id % batch */
    uint64_t *in_id;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t got;
    /* offloaded: the sending thread, so that submit only hands it a batch
     * (the channel's encryption and socket writes are not the host's
     * compute core's, with cfg->io_cpu) */
    pthread_t sender;
    pthread_cond_t tx;
    uint64_t tx_n, tx_gen, tx_done; /* the batch's size; batches handed, and sent */
    bool tx_quit;
    op_status_t tx_st;
    uint64_t results, wrong, expected;
    op_status_t rx_st;
    struct peer_link peers[OP_AGENT_MAX_CLIENTS]; /* mesh: by rank (none at this one's) */
    int listener;
    double part[3]; /* the last batch's submit, compute and wait, seconds */
    double a[MM_N * MM_N], b[MM_N * MM_N], c[MM_N * MM_N];
};

/* The batch's n requests on ch (the offloaded client's sending thread, or
 * the mesh's submit to each peer). */
op_status_t client_send_batch(struct client *cl, struct op_channel *ch, uint64_t n);

/* client_mesh.c */
op_status_t mesh_open(struct client *cl);        /* every peer linked, their threads started */
void mesh_close(struct client *cl, bool join);   /* join: all went well */
op_status_t mesh_submit(struct client *cl, uint64_t n);
bool mesh_all_in(const struct client *cl, uint64_t count); /* lock held */
void mesh_reduce(struct client *cl, uint64_t first, uint64_t n);

#endif
