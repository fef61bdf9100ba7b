/* What the agent's daemons and clients share besides their messages (whose
 * codecs are offpath/wire/agent.h's). */
#ifndef OFFPATH_AGENT_PROTO_H
#define OFFPATH_AGENT_PROTO_H

#include <pthread.h>
#include <time.h>

#include "offpath/agent.h"
#include "offpath/wire.h"

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
