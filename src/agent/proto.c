/* What the agent's parts share (agent_proto.h); the messages' codecs are
 * src/wire's (offpath/wire/agent.h). */
#include <string.h>

#include "agent_proto.h"
#include "offpath/reduce.h"
#include "offpath/wire.h"

size_t agent_elem_size(enum op_agent_type t)
{
    static const size_t sizes[] = {1, 4, 4, 8};
    return sizes[t];
}

const char *op_agent_type_name(enum op_agent_type t)
{
    static const char *const names[] = {"byte", "int", "float", "double"};
    return t <= OP_AGENT_DOUBLE ? names[t] : "?";
}

unsigned op_agent_red_type(enum op_agent_type t)
{
    static const unsigned types[] = {OP_RED_UINT8, OP_RED_INT32, OP_RED_FLOAT32, OP_RED_FLOAT64};
    return types[t];
}

/* Small values (products of many stay exact in every type): 1..3, and for
 * PROD mostly 1. */
void agent_fill(const struct op_agent_job *job, uint32_t rank, uint64_t id, void *vec)
{
    for (uint64_t i = 0; i < job->size; i++) {
        uint64_t h = (rank * 2654435761u) ^ (id * 40503u) ^ (i * 2246822519u);
        int v = job->op == OP_RED_PROD ? ((h >> 7) % 8 == 0 ? 2 : 1) : (int)((h >> 5) % 3) + 1;
        switch (job->type) {
        case OP_AGENT_BYTE: ((uint8_t *)vec)[i] = (uint8_t)v; break;
        case OP_AGENT_INT: ((int32_t *)vec)[i] = v; break;
        case OP_AGENT_FLOAT: ((float *)vec)[i] = (float)v; break;
        case OP_AGENT_DOUBLE: ((double *)vec)[i] = v; break;
        }
    }
}

bool op_agent_job_ok(const struct op_agent_job *job)
{
    return job->size > 0 && job->type <= OP_AGENT_DOUBLE &&
           (job->op == OP_RED_SUM || job->op == OP_RED_PROD) && job->batch > 0 &&
           job->batch <= 1024 && job->batches > 0 && job->batches <= 1000000 &&
           job->size <= (OP_CHAN_LIMIT_MAX_MSG - OP_AGENT_ID_HDR) / agent_elem_size(job->type);
}

void agent_sync_init(pthread_mutex_t *mu, pthread_cond_t *cond)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* op_now_ns's clock */
    pthread_mutex_init(mu, NULL);
    pthread_cond_init(cond, &ca);
    pthread_condattr_destroy(&ca);
}

struct timespec agent_abstime(uint64_t deadline_ns)
{
    return (struct timespec){.tv_sec = (time_t)(deadline_ns / OP_NS_PER_S),
                             .tv_nsec = (long)(deadline_ns % OP_NS_PER_S)};
}

void agent_pin(pthread_t t, int cpu, struct op_log *log)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(t, sizeof set, &set) != 0)
        OP_WARN(log, "cannot move a thread to CPU %d", cpu);
}

void agent_handshake_text(const struct op_agent_job *job, char text[OP_AR_HANDSHAKE_MAX])
{
    op_ar_handshake_format(job->size, op_agent_type_name(job->type), job->batch, job->batches,
                           text, OP_AR_HANDSHAKE_MAX);
}

void agent_refuse(struct op_channel *ch, const char *why)
{
    uint8_t reply[1 + 256] = {OP_AGENT_MSG_REFUSED};
    size_t n = strnlen(why, sizeof reply - 1);
    memcpy(reply + 1, why, n);
    (void)op_channel_send(ch, reply, 1 + n, 0);
    op_channel_close(ch);
}
