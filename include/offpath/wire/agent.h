/* offpath wire: the offload agent's messages (offpath/agent.h): what
 * clients and their daemon say over the secure channel, and what daemons
 * say to each other while they set up their RDMA. One message a channel
 * message: a type byte, then fixed big-endian fields (docs/wire.md section
 * 14). Decoders refuse a wrong type or length, and fields out of range. */
#ifndef OFFPATH_WIRE_AGENT_H
#define OFFPATH_WIRE_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

#define OP_A2A_MAX_WORKERS 64
#define OP_A2A_MAX_RANKS 4096
/* DOCA's configuration handshake text, NUL included */
#define OP_AR_HANDSHAKE_MAX 96

enum op_agent_msg {
    OP_AGENT_MSG_HELLO = 'H',   /* client: DOCA's handshake text */
    OP_AGENT_MSG_WELCOME = 'W', /* daemon: rank, clients, daemons, clients a daemon */
    OP_AGENT_MSG_REFUSED = 'R', /* daemon: why, text */
    OP_AGENT_MSG_VECTOR = 'V',  /* client: operation id, then the vector */
    OP_AGENT_MSG_RESULT = 'S',  /* daemon: operation id, then the result */
    OP_AGENT_MSG_BYE = 'B',     /* client: no more operations */
    OP_AGENT_MSG_PAIR = 'P',    /* daemon to daemon: index, endpoint, the pair's QP */
    OP_AGENT_MSG_MESH = 'M',    /* non-offloaded client to client: rank, handshake text */
    OP_AGENT_MSG_A2A = 'A',     /* all-to-all client: rank, ranks, workers, chunk bytes */
};

#define OP_AGENT_ID_HDR 9 /* type + u64 id */
#define OP_AGENT_WELCOME_LEN 17
#define OP_AGENT_A2A_HELLO_LEN 21
#define OP_AGENT_MESH_MAX (5 + OP_AR_HANDSHAKE_MAX - 1)
#define OP_AGENT_PAIR_LEN (1 + 4 + 4 + 4 + 8 + 8 + OP_A2A_MAX_WORKERS * (2 + 4) + 8)

/* Decoded only when clients > 0, rank < clients, daemons > 0 and
 * daemons * per_daemon == clients. */
struct op_agent_welcome {
    uint32_t rank, clients, daemons, per_daemon;
};

/* An all-to-all client's greeting: what its session must be. Decoded only
 * when ranks is 1..OP_A2A_MAX_RANKS, rank < ranks, workers
 * 1..OP_A2A_MAX_WORKERS and chunk > 0 (the agent checks that ranks chunks
 * fit a channel message). */
struct op_agent_a2a_hello {
    uint32_t rank, ranks, workers;
    uint64_t chunk;
};

/* A rank's all-to-all endpoint, as every other rank must know it. */
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

/* Daemon to daemon: rank `index`'s endpoint and the pair's QP. Decoded
 * only when workers is 1..OP_A2A_MAX_WORKERS. */
struct op_agent_pair {
    uint32_t index;
    struct op_a2a_endpoint ep;
    struct op_a2a_qp_info qp;
};

/* Encoders write the whole message and return its length (the MESH one 0
 * when cap is too small); decoders return OP_OK, OP_ERR_TRUNCATED (a
 * shorter message) or OP_ERR_MALFORMED (another type, a longer message, a
 * field out of range), and write nothing then. */
OP_API size_t op_agent_welcome_encode(const struct op_agent_welcome *w,
                                      uint8_t out[OP_AGENT_WELCOME_LEN]);
OP_API op_status_t op_agent_welcome_decode(const uint8_t *msg, size_t len,
                                           struct op_agent_welcome *w);
/* VECTOR and RESULT: the type and id; `bytes` data bytes follow. */
OP_API size_t op_agent_id_encode(enum op_agent_msg type, uint64_t id,
                                 uint8_t out[OP_AGENT_ID_HDR]);
OP_API op_status_t op_agent_id_decode(const uint8_t *msg, size_t len, enum op_agent_msg type,
                                      size_t bytes, uint64_t *id, const uint8_t **data);
/* MESH: rank, then the handshake text (1..OP_AR_HANDSHAKE_MAX - 1 bytes, no
 * NUL inside); the decoded text is NUL-terminated. */
OP_API size_t op_agent_mesh_encode(uint32_t rank, const char *text, uint8_t *out, size_t cap);
OP_API op_status_t op_agent_mesh_decode(const uint8_t *msg, size_t len, uint32_t *rank,
                                        char text[OP_AR_HANDSHAKE_MAX]);
OP_API size_t op_agent_a2a_hello_encode(const struct op_agent_a2a_hello *h,
                                        uint8_t out[OP_AGENT_A2A_HELLO_LEN]);
OP_API op_status_t op_agent_a2a_hello_decode(const uint8_t *msg, size_t len,
                                             struct op_agent_a2a_hello *h);
OP_API size_t op_agent_pair_encode(const struct op_agent_pair *p, uint8_t out[OP_AGENT_PAIR_LEN]);
OP_API op_status_t op_agent_pair_decode(const uint8_t *msg, size_t len, struct op_agent_pair *p);

#endif
