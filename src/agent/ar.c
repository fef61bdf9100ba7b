/* The offloaded Allreduce's daemon engine (offpath/agent.h): vectors in,
 * partials and results out, in one documented reduction order. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/agent.h"
#include "offpath/reduce.h"

static const char *const counter_names[] = {OP_AR_COUNTERS(OP_COUNTER_NAME)};

const char *op_ar_counter_name(unsigned c)
{
    return op_counter_name(counter_names, OP_AR_C_COUNT_, c);
}

/* One operation in flight: the vectors of its clients and the daemons'
 * partials (this daemon's own among them once computed). */
struct slot {
    bool busy;
    uint64_t id;
    uint32_t clients_in, daemons_in;
    bool *client_in, *daemon_in;
    uint8_t *vectors;  /* clients x bytes */
    uint8_t *partials; /* daemons x bytes */
};

struct op_ar {
    struct op_ar_config cfg;
    size_t bytes; /* a vector's */
    op_ar_emit_fn emit;
    void *ctx;
    struct slot *slots;
    /* operations done at or above done_below, by id % window: a late
     * vector for one of them must not claim its freed slot again */
    bool *completed;
    uint8_t *result;
    uint64_t done_below;
    uint64_t c[OP_AR_C_COUNT_];
};

static size_t type_size(unsigned type)
{
    static const size_t sizes[] = {1, 2, 4, 8, 1, 2, 4, 8, 4, 8};
    return type < OP_RED_TYPE_COUNT_ ? sizes[type] : 0;
}

static bool config_ok(const struct op_ar_config *c)
{
    return c->daemons > 0 && c->self < c->daemons && c->clients > 0 && c->count > 0 &&
           c->window > 0 && c->type < OP_RED_TYPE_COUNT_ && c->op < OP_RED_OP_COUNT_ &&
           c->count <= SIZE_MAX / 8 / (c->clients + c->daemons);
}

static op_status_t slot_alloc(struct slot *s, const struct op_ar_config *c, size_t bytes)
{
    s->client_in = calloc(c->clients, sizeof(bool));
    s->daemon_in = calloc(c->daemons, sizeof(bool));
    s->vectors = malloc(c->clients * bytes);
    s->partials = malloc(c->daemons * bytes);
    return s->client_in && s->daemon_in && s->vectors && s->partials ? OP_OK : OP_ERR_NOMEM;
}

op_status_t op_ar_create(const struct op_ar_config *cfg, op_ar_emit_fn emit, void *ctx,
                         struct op_ar **out)
{
    if (!config_ok(cfg) || emit == NULL)
        return OP_ERR_INVAL;
    struct op_ar *ar = calloc(1, sizeof(*ar));
    if (ar == NULL)
        return OP_ERR_NOMEM;
    ar->cfg = *cfg;
    ar->bytes = cfg->count * type_size(cfg->type);
    ar->emit = emit;
    ar->ctx = ctx;
    ar->slots = calloc(cfg->window, sizeof(*ar->slots));
    ar->result = malloc(ar->bytes);
    ar->completed = calloc(cfg->window, sizeof(bool));
    op_status_t st = ar->slots && ar->result && ar->completed ? OP_OK : OP_ERR_NOMEM;
    for (uint32_t i = 0; st == OP_OK && i < cfg->window; i++)
        st = slot_alloc(&ar->slots[i], cfg, ar->bytes);
    if (st != OP_OK) {
        op_ar_destroy(ar);
        return st;
    }
    *out = ar;
    return OP_OK;
}

void op_ar_destroy(struct op_ar *ar)
{
    if (ar == NULL)
        return;
    for (uint32_t i = 0; ar->slots != NULL && i < ar->cfg.window; i++) {
        free(ar->slots[i].client_in);
        free(ar->slots[i].daemon_in);
        free(ar->slots[i].vectors);
        free(ar->slots[i].partials);
    }
    free(ar->slots);
    free(ar->completed);
    free(ar->result);
    free(ar);
}

/* The slot of operation id, claimed for it if free; NULL (counted) for an
 * operation already completed or beyond the window. */
static struct slot *slot_of(struct op_ar *ar, uint64_t id)
{
    struct slot *s = &ar->slots[id % ar->cfg.window];
    if (id >= ar->done_below && id - ar->done_below < ar->cfg.window &&
        !ar->completed[id % ar->cfg.window]) {
        if (s->busy && s->id == id)
            return s;
        if (!s->busy) {
            s->busy = true;
            s->id = id;
            return s;
        }
    }
    ar->c[OP_AR_C_out_of_window]++;
    return NULL;
}

/* Folds n vectors of s in order into out: ((v0 op v1) op v2) ... */
static void fold(const struct op_ar *ar, uint8_t *out, const uint8_t *vectors, uint32_t n)
{
    memcpy(out, vectors, ar->bytes);
    for (uint32_t i = 1; i < n; i++)
        op_reduce(ar->cfg.op, ar->cfg.type, out, vectors + i * ar->bytes, ar->cfg.count);
}

static void emit(struct op_ar *ar, enum op_ar_out_kind kind, uint64_t id, const void *data)
{
    struct op_ar_out o = {.kind = kind, .id = id, .data = data, .bytes = ar->bytes};
    ar->emit(ar->ctx, &o);
}

static void release(struct op_ar *ar, struct slot *s)
{
    s->busy = false;
    s->clients_in = s->daemons_in = 0;
    memset(s->client_in, 0, ar->cfg.clients * sizeof(bool));
    memset(s->daemon_in, 0, ar->cfg.daemons * sizeof(bool));
    ar->completed[s->id % ar->cfg.window] = true;
    while (ar->completed[ar->done_below % ar->cfg.window]) {
        ar->completed[ar->done_below % ar->cfg.window] = false;
        ar->done_below++;
    }
}

static void try_complete(struct op_ar *ar, struct slot *s)
{
    if (s->daemons_in < ar->cfg.daemons)
        return;
    fold(ar, ar->result, s->partials, ar->cfg.daemons);
    ar->c[OP_AR_C_results]++;
    uint64_t id = s->id;
    release(ar, s);
    emit(ar, OP_AR_RESULT, id, ar->result);
}

static void take_partial(struct op_ar *ar, struct slot *s, uint32_t d, const void *partial)
{
    memcpy(s->partials + d * ar->bytes, partial, ar->bytes);
    s->daemon_in[d] = true;
    s->daemons_in++;
}

static op_status_t check_source(struct op_ar *ar, uint32_t who, uint32_t limit, size_t bytes)
{
    if (who >= limit) {
        ar->c[OP_AR_C_bad_source]++;
        return OP_ERR_INVAL;
    }
    if (bytes != ar->bytes) {
        ar->c[OP_AR_C_bad_size]++;
        return OP_ERR_MALFORMED;
    }
    return OP_OK;
}

op_status_t op_ar_client(struct op_ar *ar, uint32_t client, uint64_t id, const void *vec,
                         size_t bytes)
{
    op_status_t st = check_source(ar, client, ar->cfg.clients, bytes);
    if (st != OP_OK)
        return st;
    struct slot *s = slot_of(ar, id);
    if (s == NULL)
        return OP_ERR_MALFORMED;
    if (s->client_in[client]) {
        ar->c[OP_AR_C_duplicate]++;
        return OP_ERR_MALFORMED;
    }
    memcpy(s->vectors + client * ar->bytes, vec, bytes);
    s->client_in[client] = true;
    ar->c[OP_AR_C_client_vectors]++;
    if (++s->clients_in < ar->cfg.clients)
        return OP_OK;
    uint8_t *mine = s->partials + ar->cfg.self * ar->bytes;
    fold(ar, mine, s->vectors, ar->cfg.clients);
    s->daemon_in[ar->cfg.self] = true;
    s->daemons_in++;
    ar->c[OP_AR_C_partials_sent] += ar->cfg.daemons > 1;
    if (ar->cfg.daemons > 1)
        emit(ar, OP_AR_PARTIAL, id, mine);
    try_complete(ar, s);
    return OP_OK;
}

op_status_t op_ar_peer(struct op_ar *ar, uint32_t daemon, uint64_t id, const void *partial,
                       size_t bytes)
{
    op_status_t st = check_source(ar, daemon, ar->cfg.daemons, bytes);
    if (st == OP_OK && daemon == ar->cfg.self) {
        ar->c[OP_AR_C_bad_source]++;
        st = OP_ERR_INVAL;
    }
    if (st != OP_OK)
        return st;
    struct slot *s = slot_of(ar, id);
    if (s == NULL)
        return OP_ERR_MALFORMED;
    if (s->daemon_in[daemon]) {
        ar->c[OP_AR_C_duplicate]++;
        return OP_ERR_MALFORMED;
    }
    take_partial(ar, s, daemon, partial);
    ar->c[OP_AR_C_peer_partials]++;
    try_complete(ar, s);
    return OP_OK;
}

uint64_t op_ar_done_below(const struct op_ar *ar) { return ar->done_below; }

const uint64_t *op_ar_counters(const struct op_ar *ar) { return ar->c; }

struct op_counter_set op_ar_counter_set(const struct op_ar *ar)
{
    return (struct op_counter_set){.names = counter_names, .vals = ar->c, .n = OP_AR_C_COUNT_};
}
