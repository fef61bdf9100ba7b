/* What clients and their daemon say over the secure channel, and what
 * daemons say to each other while they set up their RDMA. One message a
 * channel message: a type byte, then fixed little-endian fields. */
#ifndef OFFPATH_AGENT_PROTO_H
#define OFFPATH_AGENT_PROTO_H

#include <pthread.h>
#include <time.h>

#include "offpath/agent.h"

enum agent_msg {
    AGENT_HELLO = 'H',   /* client: DOCA's handshake text */
    AGENT_WELCOME = 'W', /* daemon: rank, clients, daemons, clients a daemon */
    AGENT_REFUSED = 'R', /* daemon: why, text */
    AGENT_VECTOR = 'V',  /* client: operation id, then the vector */
    AGENT_RESULT = 'S',  /* daemon: operation id, then the result */
    AGENT_BYE = 'B',     /* client: no more operations */
    AGENT_PAIR = 'P',    /* daemon to daemon: index, endpoint, the pair's QP */
    AGENT_MESH = 'M',    /* non-offloaded client to client: its rank, DOCA's handshake text */
    AGENT_A2A = 'A',     /* all-to-all client: its rank, ranks, chunk bytes, workers */
};

#define AGENT_ID_HDR 9 /* type + u64 id */

struct agent_welcome {
    uint32_t rank, clients, daemons, per_daemon;
};

struct agent_pair {
    uint32_t index;
    struct op_a2a_endpoint ep;
    struct op_a2a_qp_info qp;
};

/* An all-to-all client's greeting: what its session must be. */
struct agent_a2a_hello {
    uint32_t rank, ranks, workers;
    uint64_t chunk;
};
#define AGENT_A2A_HELLO_LEN 21

size_t agent_put_welcome(uint8_t *buf, const struct agent_welcome *w);
bool agent_get_welcome(const uint8_t *msg, size_t len, struct agent_welcome *w);
size_t agent_put_id(uint8_t *buf, enum agent_msg type, uint64_t id);
/* A VECTOR or RESULT of `bytes` data bytes: its id and data. */
bool agent_get_id(const uint8_t *msg, size_t len, enum agent_msg type, size_t bytes, uint64_t *id,
                  const uint8_t **data);
/* MESH: rank, then the handshake text (at most OP_AR_HANDSHAKE_MAX - 1). */
size_t agent_put_mesh(uint8_t *buf, uint32_t rank, const char *text);
bool agent_get_mesh(const uint8_t *msg, size_t len, uint32_t *rank, char text[OP_AR_HANDSHAKE_MAX]);
size_t agent_put_a2a_hello(uint8_t *buf, const struct agent_a2a_hello *h);
/* Also false for fields out of range: no rank, a chunk of 0 or one whose
 * ranks * chunk does not fit a channel message, workers not 1..64. */
bool agent_get_a2a_hello(const uint8_t *msg, size_t len, struct agent_a2a_hello *h);
size_t agent_put_pair(uint8_t *buf, const struct agent_pair *p);
bool agent_get_pair(const uint8_t *msg, size_t len, struct agent_pair *p);

/* DOCA's handshake text of a job. */
void agent_handshake_text(const struct op_agent_job *job, char text[OP_AR_HANDSHAKE_MAX]);
/* Tells the peer why it is refused (REFUSED, the reason) and closes. */
void agent_refuse(struct op_channel *ch, const char *why);

/* The value client `rank` contributes to operation id at element i: known
 * to every client, so each checks its results against a reference. */
void agent_fill(const struct op_agent_job *job, uint32_t rank, uint64_t id, void *vec);
size_t agent_elem_size(enum op_agent_type t);

/* A mutex and a condition whose timed waits take op_now_ns deadlines
 * (agent_abstime). */
void agent_sync_init(pthread_mutex_t *mu, pthread_cond_t *cond);
struct timespec agent_abstime(uint64_t deadline_ns);
/* Thread t onto CPU cpu (a core the host does not compute on); logged
 * when it cannot be. */
void agent_pin(pthread_t t, int cpu, struct op_log *log);

#endif
