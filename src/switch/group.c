/* Switch engine: group table, slot memory, pending queries, leases. */
#include <stdlib.h>
#include <string.h>

#include "switch_internal.h"

bool sw_key_eq(const struct sw_key *a, const struct sw_key *b)
{
    return a->job_id == b->job_id && a->comm_id == b->comm_id && a->c_id == b->c_id;
}

struct sw_group *sw_group_find_key(const struct op_sw *sw, const struct sw_key *key)
{
    for (uint32_t i = 0; i < sw->n_groups; i++)
        if (sw_key_eq(&sw->live[i]->key, key))
            return sw->live[i];
    return NULL;
}

uint32_t sw_free_groups(const struct op_sw *sw)
{
    uint32_t span = sw->id_hi - sw->id_lo + 1;
    uint32_t cap = sw->cfg.max_groups < span ? sw->cfg.max_groups : span;
    return sw->n_groups >= cap ? 0 : cap - sw->n_groups;
}

int sw_alloc_id(struct op_sw *sw)
{
    if (sw_free_groups(sw) == 0)
        return -1;
    for (uint32_t i = 0; i <= sw->id_hi - sw->id_lo; i++) {
        uint32_t id = sw->next_id;
        sw->next_id = id == sw->id_hi ? sw->id_lo : id + 1;
        if (sw->by_id[id] == NULL)
            return (int)id;
    }
    return -1;
}

/* Slot memory of one group: bitmap, accumulator, result, previous result and
 * (for fixed-order float reduction) one buffer per child. */
static size_t slot_bytes(uint16_t words, uint16_t n_children, uint16_t max_data)
{
    return (size_t)words * 8 + (size_t)max_data * (3 + (size_t)n_children);
}

static void carve_slots(struct sw_group *g)
{
    uint8_t *p = g->mem;
    for (uint16_t i = 0; i < g->window; i++) {
        struct sw_slot *s = &g->slots[i];
        s->bitmap = (uint64_t *)(void *)p;
        p += (size_t)g->words * 8;
        s->acc = p;
        p += g->max_data;
        s->result = p;
        p += g->max_data;
        s->prev_result = p;
        p += g->max_data;
        s->contrib = p;
        p += (size_t)g->max_data * g->n_children;
        s->state = SLOT_EMPTY;
    }
}

static op_status_t alloc_slots(struct op_sw *sw, struct sw_group *g, uint8_t *reason)
{
    size_t per = slot_bytes(g->words, g->n_children, g->max_data);
    g->mem_size = per * g->window;
    if (sw->slot_mem_used + g->mem_size > sw->cfg.slot_memory) {
        *reason = OP_INC_R_NO_SLOT;
        return OP_ERR_NOMEM;
    }
    /* calloc: untouched slot pages cost nothing until a window reaches them. */
    g->mem = calloc(1, g->mem_size);
    g->slots = calloc(g->window, sizeof(*g->slots));
    if (g->mem == NULL || g->slots == NULL) {
        *reason = OP_INC_R_NO_SLOT;
        return OP_ERR_NOMEM;
    }
    carve_slots(g);
    sw->slot_mem_used += g->mem_size;
    return OP_OK;
}

static void group_release(struct sw_group *g)
{
    free(g->mem);
    free(g->slots);
    free(g->children);
    free(g);
}

op_status_t sw_group_create(struct op_sw *sw, uint16_t id, uint64_t token, const struct sw_key *key,
                            const struct sw_member *children, uint16_t n, uint16_t window,
                            uint16_t max_data, struct sw_group **out, uint8_t *reason)
{
    if (n == 0 || n > sw->cfg.max_children) {
        *reason = OP_INC_R_UNSUPPORTED;
        return OP_ERR_UNSUPPORTED;
    }
    struct sw_group *g = calloc(1, sizeof(*g));
    if (g == NULL || (g->children = malloc(n * sizeof(*children))) == NULL) {
        free(g);
        *reason = OP_INC_R_NO_SLOT;
        return OP_ERR_NOMEM;
    }
    memcpy(g->children, children, n * sizeof(*children));
    g->id = id;
    g->token = token;
    g->key = *key;
    g->n_children = n;
    g->window = window < sw->cfg.window ? window : sw->cfg.window;
    g->max_data = max_data < sw->cfg.max_data ? max_data : sw->cfg.max_data;
    g->max_data &= (uint16_t)~7u;
    g->words = (uint16_t)((n + 63) / 64);
    if (g->window == 0 || g->max_data == 0) {
        group_release(g);
        *reason = OP_INC_R_UNSUPPORTED;
        return OP_ERR_UNSUPPORTED;
    }
    op_status_t st = alloc_slots(sw, g, reason);
    if (st != OP_OK) {
        group_release(g);
        return st;
    }
    if (sw->by_id[id] != NULL) /* a stale group its root has forgotten */
        sw_group_free(sw, sw->by_id[id]);
    sw->by_id[id] = g;
    g->live_idx = sw->n_groups;
    sw->live[sw->n_groups++] = g;
    sw->c[OP_SW_C_groups_created]++;
    sw->c[OP_SW_C_groups_live] = sw->n_groups;
    *out = g;
    return OP_OK;
}

void sw_group_free(struct op_sw *sw, struct sw_group *g)
{
    sw->by_id[g->id] = NULL;
    struct sw_group *last = sw->live[--sw->n_groups];
    sw->live[g->live_idx] = last;
    last->live_idx = g->live_idx;
    sw->slot_mem_used -= g->mem_size;
    sw->c[OP_SW_C_groups_freed]++;
    sw->c[OP_SW_C_groups_live] = sw->n_groups;
    group_release(g);
}

void sw_tomb_add(struct op_sw *sw, const struct sw_group *g)
{
    struct sw_tomb *t = &sw->tombs[sw->next_tomb++ % SW_TOMBS];
    *t = (struct sw_tomb){.id = g->id, .n_children = g->n_children, .token = g->token,
                          .notify = g->notify};
}

/* Only a packet that knows the group's random token finds its tomb: nobody
 * else can make the switch speak for a group that is gone. */
const struct sw_tomb *sw_tomb_find(const struct op_sw *sw, uint16_t id, uint64_t token)
{
    for (uint32_t i = 0; i < SW_TOMBS; i++) {
        const struct sw_tomb *t = &sw->tombs[i];
        if (t->token != 0 && t->id == id && t->token == token)
            return t;
    }
    return NULL;
}

/* Children are sorted by rank, so find by rank and check the address: a packet
 * from anyone else, or claiming another's rank, is not a member's. */
int sw_group_child(const struct sw_group *g, uint32_t ip, uint16_t port, uint32_t rank)
{
    int lo = 0, hi = g->n_children - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const struct sw_member *m = &g->children[mid];
        if (m->rank == rank)
            return m->ip == ip && m->port == port ? mid : -1;
        if (m->rank < rank)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

struct sw_pending *sw_pending_find(struct op_sw *sw, const struct sw_key *key)
{
    for (int i = 0; i < SW_MAX_PENDING; i++)
        if (sw->pending[i].used && sw_key_eq(&sw->pending[i].key, key))
            return &sw->pending[i];
    return NULL;
}

struct sw_pending *sw_pending_get(struct op_sw *sw, const struct sw_key *key, uint64_t now)
{
    struct sw_pending *p = sw_pending_find(sw, key);
    if (p == NULL) {
        for (int i = 0; i < SW_MAX_PENDING && p == NULL; i++)
            if (!sw->pending[i].used)
                p = &sw->pending[i];
        if (p == NULL)
            return NULL;
        p->used = true;
        p->key = *key;
        p->refused = 0;
        p->n = 0;
    }
    p->expires_ns = now + SW_PENDING_TTL_NS;
    return p;
}

void sw_pending_free(struct sw_pending *p)
{
    free(p->m);
    memset(p, 0, sizeof(*p));
}

/* Returns 0 added or already there, -1 conflict (rank claimed by another
 * address), -2 no memory. */
int sw_pending_add(struct sw_pending *p, uint32_t ip, uint16_t port, uint32_t rank, bool by_port)
{
    for (uint16_t i = 0; i < p->n; i++) {
        bool same_host = p->m[i].ip == ip && p->m[i].port == port;
        if (p->m[i].rank == rank)
            return same_host ? 0 : -1;
        if (same_host && by_port) /* one leader is one member: it cannot fill a group alone */
            return -1;
    }
    if (p->n == p->cap) {
        if (p->cap >= UINT16_MAX / 2)
            return -2;
        uint16_t cap = p->cap ? (uint16_t)(p->cap * 2) : 16;
        struct sw_member *m = realloc(p->m, cap * sizeof(*m));
        if (m == NULL)
            return -2;
        p->m = m;
        p->cap = cap;
    }
    p->m[p->n++] = (struct sw_member){.ip = ip, .port = port, .rank = rank};
    return 0;
}

void sw_sweep(struct op_sw *sw, uint64_t now)
{
    uint64_t lease = (uint64_t)sw->cfg.lease_ms * OP_NS_PER_MS;
    for (uint32_t i = sw->n_groups; i-- > 0;) {
        struct sw_group *g = sw->live[i];
        if (now - g->last_ns > lease) {
            OP_INFO(sw->cfg.log, "group %u expired after %u ms without traffic", g->id,
                    sw->cfg.lease_ms);
            sw->c[OP_SW_C_groups_expired]++;
            sw_group_free(sw, g);
        }
    }
    for (int i = 0; i < SW_MAX_PENDING; i++)
        if (sw->pending[i].used && now > sw->pending[i].expires_ns)
            sw_pending_free(&sw->pending[i]);
}
