/* The agent's messages (agent_proto.h): fixed layouts, checked lengths. */
#include <string.h>

#include "agent_proto.h"
#include "offpath/reduce.h"
#include "offpath/wire.h"

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

size_t agent_put_welcome(uint8_t *buf, const struct agent_welcome *w)
{
    buf[0] = AGENT_WELCOME;
    put32(buf + 1, w->rank);
    put32(buf + 5, w->clients);
    put32(buf + 9, w->daemons);
    put32(buf + 13, w->per_daemon);
    return 17;
}

bool agent_get_welcome(const uint8_t *msg, size_t len, struct agent_welcome *w)
{
    if (len != 17 || msg[0] != AGENT_WELCOME)
        return false;
    *w = (struct agent_welcome){get32(msg + 1), get32(msg + 5), get32(msg + 9), get32(msg + 13)};
    return w->clients > 0 && w->rank < w->clients && w->daemons > 0 && w->per_daemon > 0 &&
           (uint64_t)w->daemons * w->per_daemon == w->clients;
}

size_t agent_put_id(uint8_t *buf, enum agent_msg type, uint64_t id)
{
    buf[0] = (uint8_t)type;
    put64(buf + 1, id);
    return AGENT_ID_HDR;
}

bool agent_get_id(const uint8_t *msg, size_t len, enum agent_msg type, size_t bytes, uint64_t *id,
                  const uint8_t **data)
{
    if (len != AGENT_ID_HDR + bytes || msg[0] != (uint8_t)type)
        return false;
    *id = get64(msg + 1);
    *data = msg + AGENT_ID_HDR;
    return true;
}

size_t agent_put_mesh(uint8_t *buf, uint32_t rank, const char *text)
{
    size_t n = strnlen(text, OP_AR_HANDSHAKE_MAX - 1);
    buf[0] = AGENT_MESH;
    put32(buf + 1, rank);
    memcpy(buf + 5, text, n);
    return 5 + n;
}

bool agent_get_mesh(const uint8_t *msg, size_t len, uint32_t *rank, char text[OP_AR_HANDSHAKE_MAX])
{
    if (len < 6 || len - 5 >= OP_AR_HANDSHAKE_MAX || msg[0] != AGENT_MESH ||
        memchr(msg + 5, '\0', len - 5) != NULL)
        return false;
    *rank = get32(msg + 1);
    memcpy(text, msg + 5, len - 5);
    text[len - 5] = '\0';
    return true;
}

size_t agent_put_a2a_hello(uint8_t *buf, const struct agent_a2a_hello *h)
{
    buf[0] = AGENT_A2A;
    put32(buf + 1, h->rank);
    put32(buf + 5, h->ranks);
    put32(buf + 9, h->workers);
    put64(buf + 13, h->chunk);
    return AGENT_A2A_HELLO_LEN;
}

bool agent_get_a2a_hello(const uint8_t *msg, size_t len, struct agent_a2a_hello *h)
{
    if (len != AGENT_A2A_HELLO_LEN || msg[0] != AGENT_A2A)
        return false;
    *h = (struct agent_a2a_hello){.rank = get32(msg + 1), .ranks = get32(msg + 5),
                                  .workers = get32(msg + 9), .chunk = get64(msg + 13)};
    return h->ranks > 0 && h->ranks <= OP_A2A_MAX_RANKS && h->rank < h->ranks &&
           h->workers >= 1 && h->workers <= OP_A2A_MAX_WORKERS && h->chunk > 0 &&
           h->chunk <= (OP_CHAN_LIMIT_MAX_MSG - AGENT_ID_HDR) / h->ranks;
}

#define PAIR_LEN (1 + 4 + 4 + 4 + 8 + 8 + OP_A2A_MAX_WORKERS * (2 + 4) + 8)

size_t agent_put_pair(uint8_t *buf, const struct agent_pair *p)
{
    uint8_t *q = buf;
    *q++ = AGENT_PAIR;
    put32(q, p->index), q += 4;
    put32(q, p->ep.ip), q += 4;
    put32(q, p->ep.workers), q += 4;
    put64(q, p->ep.recv_addr), q += 8;
    put64(q, p->ep.chunk), q += 8;
    for (int i = 0; i < OP_A2A_MAX_WORKERS; i++) {
        q[0] = (uint8_t)p->ep.port[i];
        q[1] = (uint8_t)(p->ep.port[i] >> 8);
        put32(q + 2, p->ep.rkey[i]);
        q += 6;
    }
    put32(q, p->qp.qpn), q += 4;
    put32(q, p->qp.psn), q += 4;
    return (size_t)(q - buf);
}

bool agent_get_pair(const uint8_t *msg, size_t len, struct agent_pair *p)
{
    if (len != PAIR_LEN || msg[0] != AGENT_PAIR)
        return false;
    const uint8_t *q = msg + 1;
    memset(p, 0, sizeof(*p));
    p->index = get32(q), q += 4;
    p->ep.ip = get32(q), q += 4;
    p->ep.workers = get32(q), q += 4;
    p->ep.recv_addr = get64(q), q += 8;
    p->ep.chunk = get64(q), q += 8;
    for (int i = 0; i < OP_A2A_MAX_WORKERS; i++) {
        p->ep.port[i] = (uint16_t)(q[0] | q[1] << 8);
        p->ep.rkey[i] = get32(q + 2);
        q += 6;
    }
    p->qp.qpn = get32(q), q += 4;
    p->qp.psn = get32(q);
    return p->ep.workers >= 1 && p->ep.workers <= OP_A2A_MAX_WORKERS;
}

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
           job->size <= (OP_CHAN_LIMIT_MAX_MSG - AGENT_ID_HDR) / agent_elem_size(job->type);
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
    uint8_t reply[1 + 256] = {AGENT_REFUSED};
    size_t n = strnlen(why, sizeof reply - 1);
    memcpy(reply + 1, why, n);
    (void)op_channel_send(ch, reply, 1 + n, 0);
    op_channel_close(ch);
}
