/* Internal to src/model: the platform file, the actors' shared plumbing. */
#ifndef OFFPATH_MODEL_INTERNAL_H
#define OFFPATH_MODEL_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "offpath/model.h"

/* BTH + DETH + INC header + ICRC on each INC packet; Ethernet/IP/UDP too. */
#define MDL_HDR_BYTES 92u

op_status_t mdl_platform_check(const struct op_model_platform *p);
void mdl_platform_write(const struct op_model_platform *p, unsigned nodes, FILE *f);
double mdl_host_link_lat(const struct op_model_platform *p);
unsigned mdl_racks(const struct op_model_platform *p, unsigned nodes);
uint64_t mdl_chunks(const struct op_model_platform *p, uint64_t bytes);
uint64_t mdl_chunk_bytes(const struct op_model_platform *p, uint64_t bytes);

/* The SimGrid host of a node ("n3"), a TOR ("tor1") or the SPINE
 * (idx < 0): all one host when the platform shares its cores. */
const char *mdl_host_of(const struct op_model_platform *p, char kind, int idx, char *buf,
                        size_t len);
/* A cost in seconds of CPU: work that shares the cores of a shared host,
 * else time the actor spends. */
void mdl_cpu(const struct op_model_platform *p, double seconds);

/* What one simulation needs; lives in the child process. */
struct mdl_run {
    const struct op_model_platform *p;
    unsigned nodes, ppn;
    const struct op_model_scenario *sc;
    struct op_model_result *res;
    unsigned run_id; /* names this run's mailboxes apart from earlier runs' */
};

/* Run inside an initialised SimGrid engine whose platform is loaded. */
void mdl_inc_simulate(struct mdl_run *r);
void mdl_host_simulate(struct mdl_run *r);

/* One cell of the seed's tables and the model's prediction of it. */
struct mdl_cell {
    unsigned nodes, ppn, mode;
    uint64_t bytes;
    double meas_us, pred_us;
};
/* Reads the tables' CSV ('#' comments, a header line, nodes,bytes,mode,ppn,us
 * rows); 0 and why (line and reason) on a malformed line. */
size_t mdl_seed_parse(FILE *f, struct mdl_cell *cells, size_t max, char *why, size_t why_len);

/* Actor payloads travel as one word: kind, sender, sequence or step. */
enum { MDL_CONTRIB = 1, MDL_RESULT = 2, MDL_TICK = 3, MDL_BUNDLE = 4 };
static inline void *mdl_msg(unsigned kind, unsigned from, uint32_t seq)
{
    return (void *)(uintptr_t)(((uint64_t)kind << 60) | ((uint64_t)(from & 0xfffffffu) << 32) | seq);
}
static inline unsigned mdl_kind(void *m) { return (unsigned)((uintptr_t)m >> 60); }
static inline unsigned mdl_from(void *m) { return (unsigned)(((uintptr_t)m >> 32) & 0xfffffffu); }
static inline uint32_t mdl_seq(void *m) { return (uint32_t)(uintptr_t)m; }

/* Sends in flight, kept to be reaped: SimGrid keeps detached comms in a list
 * it searches linearly, which made 4096 leaders' windows quadratic. */
#define MDL_OUTQ 64
struct mdl_outq {
    void *c[MDL_OUTQ]; /* sg_comm_t */
    unsigned n;
};
void mdl_send(struct mdl_outq *q, void *mailbox, void *msg, long bytes);
void mdl_outq_drain(struct mdl_outq *q);

/* xorshift64*: each actor draws its own losses. */
static inline double mdl_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

#endif
