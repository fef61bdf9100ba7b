#include "incsim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_HOP_NS (10 * OP_NS_PER_US)
#define SIM_MAX_STEPS 200000000ull

static uint32_t ip4(int a, int b, int c, int d)
{
    return (uint32_t)a << 24 | (uint32_t)b << 16 | (uint32_t)c << 8 | (uint32_t)d;
}

uint32_t sim_leader_ip(int i) { return ip4(127, 1, (i + 1) / 256, (i + 1) % 256); }

static bool earlier(const struct sim_event *a, const struct sim_event *b)
{
    return a->at != b->at ? a->at < b->at : a->order < b->order;
}

static void heap_push(struct sim *s, const struct op_pkt *p, uint64_t at)
{
    if (s->heap_n == s->heap_cap) {
        s->heap_cap = s->heap_cap ? s->heap_cap * 2 : 1024;
        s->heap = realloc(s->heap, s->heap_cap * sizeof(*s->heap));
        if (s->heap == NULL)
            abort();
    }
    struct sim_event ev = {.at = at, .order = s->order++, .pkt = *p};
    ev.pkt.data = malloc(p->len);
    if (ev.pkt.data == NULL)
        abort();
    memcpy(ev.pkt.data, p->data, p->len);
    size_t i = s->heap_n++;
    while (i > 0 && earlier(&ev, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = ev;
}

static struct sim_event heap_pop(struct sim *s)
{
    struct sim_event top = s->heap[0], last = s->heap[--s->heap_n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->heap_n)
            break;
        if (c + 1 < s->heap_n && earlier(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!earlier(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->heap_n > 0)
        s->heap[i] = last;
    return top;
}

static void enqueue(struct sim *s, const struct op_pkt *p)
{
    if (p->flow.dst.v4 == s->dead_ip || p->flow.src.v4 == s->dead_ip ||
        (s->lose != NULL && s->lose(s, p)) || op_rng_unit(&s->rng) < s->drop) {
        s->dropped++;
        return;
    }
    int copies = op_rng_unit(&s->rng) < s->dup ? 2 : 1;
    for (int i = 0; i < copies; i++) {
        uint64_t jitter = s->jitter_ns ? op_rng_next(&s->rng) % s->jitter_ns : 0;
        heap_push(s, p, s->now + SIM_HOP_NS + jitter);
    }
}

static void flush(void *ctx, struct op_txq *q)
{
    struct sim *s = ctx;
    for (int i = 0; i < q->n; i++)
        enqueue(s, &q->pkts[i]);
    q->n = 0;
}

static void write_topo(const struct sim_spec *spec, char *text, size_t cap)
{
    size_t off = 0;
    for (int i = 0; i < spec->spines; i++)
        off += (size_t)snprintf(text + off, cap - off, "spine s%d 127.3.0.%d\n", i, i + 1);
    for (int t = 0; t < spec->tors; t++) {
        int lo = t * spec->leaders / spec->tors, hi = (t + 1) * spec->leaders / spec->tors - 1;
        uint32_t a = sim_leader_ip(lo), b = sim_leader_ip(hi < lo ? lo : hi);
        off += (size_t)snprintf(text + off, cap - off,
                                "tor t%d 127.2.0.%d hosts 127.1.%u.%u-127.1.%u.%u", t, t + 1,
                                (a >> 8) & 255, a & 255, (b >> 8) & 255, b & 255);
        for (int i = 0; i < spec->spines; i++)
            off += (size_t)snprintf(text + off, cap - off, "%s%s%d", i ? "," : " spines ", "s", i);
        off += (size_t)snprintf(text + off, cap - off, "\n");
    }
}

static void make_switches(struct sim *s, const struct sim_spec *spec)
{
    for (int i = 0; i < s->topo.n; i++) {
        struct op_sw_config cfg;
        op_sw_config_default(&cfg);
        cfg.topo = &s->topo;
        cfg.self = i;
        cfg.seed = spec->seed + (uint64_t)i;
        if (spec->window)
            cfg.window = spec->window;
        if (spec->max_data)
            cfg.max_data = spec->max_data;
        if (spec->max_groups)
            cfg.max_groups = spec->max_groups;
        if (spec->lease_ms)
            cfg.lease_ms = spec->lease_ms;
        if (op_sw_create(&cfg, &s->sw[i]) != OP_OK)
            abort();
    }
    s->n_sw = s->topo.n;
}

int sim_tor_of_leader(const struct sim *s, int leader)
{
    return op_topo_tor_of(&s->topo, s->leader_ip[leader]);
}

static void make_leaders(struct sim *s, const struct sim_spec *spec, uint32_t comm_id)
{
    for (int i = 0; i < spec->leaders; i++) {
        struct op_inc_config cfg;
        op_inc_config_default(&cfg);
        s->leader_ip[i] = sim_leader_ip(i);
        const struct op_topo_switch *tor = &s->topo.sw[op_topo_tor_of(&s->topo, s->leader_ip[i])];
        cfg.ip = s->leader_ip[i];
        cfg.port = tor->port;
        cfg.tor_ip = tor->ip;
        cfg.tor_port = tor->port;
        cfg.rank = (uint32_t)i;
        cfg.n_leaders = (uint16_t)spec->leaders;
        cfg.master_rank = 0;
        cfg.master_ip = sim_leader_ip(0);
        cfg.job_id = 7;
        cfg.comm_id = comm_id;
        cfg.world_rank = (uint32_t)i;
        cfg.rto_ns = 2 * OP_NS_PER_MS;
        cfg.deadline_ns = 5 * OP_NS_PER_S;
        if (s->leader[i] != NULL)
            op_inc_eng_destroy(s->leader[i]);
        if (op_inc_eng_create(&cfg, &s->leader[i]) != OP_OK)
            abort();
    }
    s->n_leaders = spec->leaders;
}

void sim_init(struct sim *s, const struct sim_spec *spec)
{
    char text[8192], err[256];
    memset(s, 0, sizeof(*s));
    write_topo(spec, text, sizeof(text));
    if (op_topo_parse(text, &s->topo, err, sizeof(err)) != OP_OK) {
        fprintf(stderr, "sim topology: %s\n%s", err, text);
        abort();
    }
    make_switches(s, spec);
    make_leaders(s, spec, 1);
    s->drop = spec->drop;
    s->dup = spec->dup;
    s->jitter_ns = spec->jitter_ns;
    op_rng_seed(&s->rng, spec->seed);
    if (op_pktbuf_init(&s->txbuf, 16) != OP_OK)
        abort();
    s->q = (struct op_txq){.pkts = s->txbuf.pkts, .cap = s->txbuf.n, .flush = flush, .ctx = s};
}

void sim_free(struct sim *s)
{
    for (int i = 0; i < s->n_sw; i++)
        op_sw_destroy(s->sw[i]);
    for (int i = 0; i < s->n_leaders; i++)
        op_inc_eng_destroy(s->leader[i]);
    for (size_t i = 0; i < s->heap_n; i++)
        free(s->heap[i].pkt.data);
    free(s->heap);
    op_pktbuf_free(&s->txbuf);
}

void sim_deliver(struct sim *s, const struct op_pkt *p)
{
    for (int i = 0; i < s->n_sw; i++)
        if (s->topo.sw[i].ip == p->flow.dst.v4) {
            op_sw_input(s->sw[i], p, s->now, &s->q);
            return;
        }
    for (int i = 0; i < s->n_leaders; i++)
        if (s->leader_ip[i] == p->flow.dst.v4) {
            op_inc_eng_input(s->leader[i], p, s->now, &s->q);
            return;
        }
}

static uint64_t next_timer(const struct sim *s)
{
    uint64_t t = UINT64_MAX;
    for (int i = 0; i < s->n_leaders; i++)
        if (op_inc_eng_status(s->leader[i]) == OP_INPROGRESS) {
            uint64_t x = op_inc_eng_next_timer(s->leader[i]);
            t = x < t ? x : t;
        }
    return t;
}

static void run_timers(struct sim *s)
{
    for (int i = 0; i < s->n_sw; i++)
        if (op_sw_next_timer(s->sw[i]) <= s->now)
            op_sw_timer(s->sw[i], s->now, &s->q);
    for (int i = 0; i < s->n_leaders; i++)
        if (op_inc_eng_next_timer(s->leader[i]) <= s->now)
            op_inc_eng_timer(s->leader[i], s->now, &s->q);
}

static bool busy(const struct sim *s)
{
    for (int i = 0; i < s->n_leaders; i++)
        if (op_inc_eng_status(s->leader[i]) == OP_INPROGRESS)
            return true;
    return false;
}

bool sim_run(struct sim *s)
{
    flush(s, &s->q);
    while (busy(s)) {
        if (++s->steps > SIM_MAX_STEPS)
            return false;
        uint64_t tp = s->heap_n ? s->heap[0].at : UINT64_MAX, tt = next_timer(s);
        if (tp == UINT64_MAX && tt == UINT64_MAX)
            return false;
        if (tp <= tt) {
            struct sim_event ev = heap_pop(s);
            s->now = ev.at;
            sim_deliver(s, &ev.pkt);
            free(ev.pkt.data);
            s->delivered++;
        } else {
            s->now = tt;
        }
        run_timers(s);
        flush(s, &s->q);
    }
    /* let stragglers (late duplicates) drain so counters settle */
    while (s->heap_n > 0) {
        struct sim_event ev = heap_pop(s);
        s->now = ev.at > s->now ? ev.at : s->now;
        sim_deliver(s, &ev.pkt);
        free(ev.pkt.data);
        flush(s, &s->q);
    }
    return true;
}

op_status_t sim_join(struct sim *s, uint32_t comm_id)
{
    if (comm_id != 1) {
        struct sim_spec spec = {.leaders = s->n_leaders};
        make_leaders(s, &spec, comm_id);
    }
    for (int i = 0; i < s->n_leaders; i++)
        if (op_inc_eng_join(s->leader[i], s->now, &s->q) != OP_OK)
            return OP_ERR_STATE;
    if (!sim_run(s))
        return OP_ERR_TIMEOUT;
    op_status_t st = OP_OK;
    for (int i = 0; i < s->n_leaders; i++)
        if (op_inc_eng_status(s->leader[i]) != OP_OK)
            st = op_inc_eng_status(s->leader[i]);
    return st;
}

void sim_inject(struct sim *s, const struct op_flow *flow, const uint8_t *data, size_t len)
{
    struct op_pkt p = {.flow = *flow, .len = (uint32_t)len, .data = (uint8_t *)data};
    heap_push(s, &p, s->now + SIM_HOP_NS);
}

uint64_t sim_sw_counter(const struct sim *s, int sw, unsigned c)
{
    return op_sw_counters(s->sw[sw])[c];
}

uint64_t sim_sw_total(const struct sim *s, unsigned c)
{
    uint64_t t = 0;
    for (int i = 0; i < s->n_sw; i++)
        t += op_sw_counters(s->sw[i])[c];
    return t;
}

uint64_t sim_leader_total(const struct sim *s, unsigned c)
{
    uint64_t t = 0;
    for (int i = 0; i < s->n_leaders; i++)
        t += op_inc_eng_counters(s->leader[i])[c];
    return t;
}
