/* libFuzzer target for the switch engine's input path.
 *
 * Each input runs on a fresh in-memory fabric (tests/unit/incsim.c): SPINE s0
 * over TORs t0 and t1, three leaders (L0 under t0, L1 and L2 under t1) joined
 * in one group. The input is a sequence of packets, each handed to op_sw_input
 * of a switch (or to the master leader's engine) as if sent from a chosen
 * address; whatever the engines send in answer is delivered at once, and one
 * packet may cause at most STORM_LIMIT deliveries. Then the leaders run an
 * allreduce, which must give the exact sum.
 *
 * Record: ctl (1 byte), length (2 bytes, big-endian), that many bytes.
 *   ctl bits 0-2  source: L0, L1, L2, s0, t0, t1, a stranger, L0's address
 *                 with another port
 *   ctl bits 3-4  target: t0, t1, s0, L0
 *   ctl bit 5     overwrite the last 4 bytes with the right ICRC
 *   ctl bit 6     write a token into the INC header: the one of the group its
 *                 group id names at the target switch, or else the leaders'
 *                 group's id and token
 *   ctl bit 7     a millisecond passes first
 * Hostile input must never change a result unless it carries the group's
 * token from a member's address: so packets from the group's members and
 * switches never carry the real token (a bit of it is flipped); strangers'
 * may. Packets from a switch's address may stop the allreduce (a switch is
 * trusted to manage groups); those from anyone else may not. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/incsim.h"

/* White-box: the tokens of the groups a switch holds (see ctl bit 6). */
#include "../../src/switch/switch_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_LEADERS 3
#define MAX_RECORDS 1000  /* at most a second of virtual time: leases last 30 */
/* Deliveries one injected packet may cause: a switch answers one packet with
 * at most one packet per member it knows, and members are at most the leaders
 * plus one per record. */
#define STORM_LIMIT (2 * MAX_RECORDS + 100)
#define COUNT 300         /* int64 elements: three chunks of 1 KiB */
#define TOKEN_OFF (OP_BTH_LEN + OP_DETH_LEN + 16)
#define GROUP_OFF (OP_BTH_LEN + OP_DETH_LEN + 8)

enum src { SRC_L0, SRC_L1, SRC_L2, SRC_SPINE, SRC_TOR0, SRC_TOR1, SRC_STRANGER, SRC_SPOOF };

static void require(bool cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_switch: %s\n", what);
        abort();
    }
}

/* ---- a zero-latency FIFO for what the engines send while input is fed */

struct fifo {
    struct op_pkt *p;
    size_t head, tail, cap;
};

static void fifo_flush(void *ctx, struct op_txq *q)
{
    struct fifo *f = ctx;
    for (int i = 0; i < q->n; i++) {
        if (f->tail == f->cap) {
            f->cap = f->cap ? 2 * f->cap : 64;
            f->p = realloc(f->p, f->cap * sizeof(*f->p));
            require(f->p != NULL, "out of memory");
        }
        struct op_pkt *p = &f->p[f->tail++];
        *p = q->pkts[i];
        p->data = malloc(p->len ? p->len : 1);
        require(p->data != NULL, "out of memory");
        memcpy(p->data, q->pkts[i].data, p->len);
    }
    q->n = 0;
}

/* Deliver what is queued, and what that causes, until the fabric is quiet. */
static void pump(struct sim *s, struct fifo *f)
{
    fifo_flush(f, &s->q);
    for (size_t n = 0; f->head < f->tail; n++) {
        require(n < STORM_LIMIT, "one packet caused a storm of packets");
        struct op_pkt p = f->p[f->head++];
        sim_deliver(s, &p);
        free(p.data);
        fifo_flush(f, &s->q);
    }
    f->head = f->tail = 0;
}

/* ---- the input */

struct world {
    struct sim sim;
    uint16_t group;
    uint64_t token;
    bool switch_sent; /* a packet came from a switch's address */
};

static struct op_flow source(const struct world *w, unsigned src)
{
    const struct sim *s = &w->sim;
    struct op_flow f = {.src_port = OP_ROCE_UDP_PORT, .dst_port = OP_ROCE_UDP_PORT};
    if (src <= SRC_L2)
        f.src.v4 = s->leader_ip[src];
    else if (src <= SRC_TOR1)
        f.src.v4 = s->topo.sw[src - SRC_SPINE].ip; /* s0, t0, t1 in topology order */
    else if (src == SRC_STRANGER)
        f.src.v4 = 0x7f090001u;
    else {
        f.src.v4 = s->leader_ip[0];
        f.src_port = OP_ROCE_UDP_PORT - 1;
    }
    return f;
}

static bool trusted(unsigned src) { return src <= SRC_TOR1; }

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static void write_token(const struct world *w, const struct op_sw *sw, uint8_t *buf)
{
    const struct sw_group *g = sw ? sw->by_id[(uint16_t)(buf[GROUP_OFF] << 8 | buf[GROUP_OFF + 1])]
                                  : NULL;
    if (g == NULL)
        put_be(buf + GROUP_OFF, w->group, 2);
    put_be(buf + TOKEN_OFF, g ? g->token : w->token, 8);
}

static void inject(struct world *w, struct fifo *f, uint8_t ctl, uint8_t *buf, size_t len)
{
    struct sim *s = &w->sim;
    unsigned src = ctl & 7u, target = (ctl >> 3) & 3u;
    struct op_sw *sw = target == 3 ? NULL : s->sw[(target + 1) % 3]; /* t0, t1, s0 */
    struct op_pkt p = {.flow = source(w, src), .len = (uint32_t)len, .data = buf};
    p.flow.dst.v4 = target == 3 ? s->leader_ip[0] : s->topo.sw[(target + 1) % 3].ip;
    if (ctl & 0x80)
        s->now += OP_NS_PER_MS;
    if ((ctl & 0x40) && len >= TOKEN_OFF + 8)
        write_token(w, sw, buf);
    if (trusted(src) && len >= TOKEN_OFF + 8 && get_be64(buf + TOKEN_OFF) == w->token)
        buf[TOKEN_OFF + 7] ^= 1;
    if ((ctl & 0x20) && len >= OP_ICRC_LEN)
        op_icrc_seal(&p.flow, buf, len - OP_ICRC_LEN, OP_IO_BUF_SIZE);
    w->switch_sent |= src >= SRC_SPINE && src <= SRC_TOR1;
    if (sw == NULL)
        op_inc_eng_input(s->leader[0], &p, s->now, &s->q);
    else
        op_sw_input(sw, &p, s->now, &s->q);
    pump(s, f);
}

static void feed_records(struct world *w, const uint8_t *data, size_t size)
{
    static uint8_t buf[OP_IO_BUF_SIZE];
    struct fifo f = {0};
    struct sim *s = &w->sim;
    void (*flush)(void *, struct op_txq *) = s->q.flush;
    void *ctx = s->q.ctx;
    s->q.flush = fifo_flush;
    s->q.ctx = &f;
    for (int n = 0; size >= 3 && n < MAX_RECORDS; n++) {
        size_t len = (size_t)data[1] << 8 | data[2];
        uint8_t ctl = data[0];
        data += 3;
        size -= 3;
        len = len < size ? len : size;
        len = len < sizeof(buf) ? len : sizeof(buf);
        memcpy(buf, data, len);
        inject(w, &f, ctl, buf, len);
        data += len;
        size -= len;
    }
    free(f.p);
    s->q.flush = flush;
    s->q.ctx = ctx;
}

/* ---- the allreduce after it */

static int64_t value(int leader, size_t i)
{
    return (int64_t)(leader + 1) * 1000003 * (int64_t)(i + 1) - (int64_t)i * 77;
}

static void check_allreduce(struct world *w)
{
    static int64_t send[N_LEADERS][COUNT], recv[N_LEADERS][COUNT];
    struct sim *s = &w->sim;
    for (int l = 0; l < N_LEADERS; l++) {
        for (size_t i = 0; i < COUNT; i++)
            send[l][i] = value(l, i);
        memset(recv[l], 0, sizeof(recv[l]));
        op_status_t st = op_inc_eng_allreduce(s->leader[l], send[l], recv[l], COUNT,
                                              OP_RED_INT64, OP_RED_SUM, s->now, &s->q);
        if (st != OP_OK) {
            require(w->switch_sent, "a leader cannot start an allreduce");
            return;
        }
    }
    require(sim_run(s), "the fabric hung");
    for (int l = 0; l < N_LEADERS; l++) {
        if (op_inc_eng_status(s->leader[l]) != OP_OK) {
            require(w->switch_sent, "the allreduce failed");
            continue;
        }
        for (size_t i = 0; i < COUNT; i++)
            require(recv[l][i] == value(0, i) + value(1, i) + value(2, i),
                    "the allreduce gave a wrong result");
    }
}

/* FUZZ_SWITCH_VERBOSE=1: each switch's nonzero counters after the input. */
static void report(const struct sim *s)
{
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("FUZZ_SWITCH_VERBOSE") != NULL;
    for (int i = 0; verbose && i < s->n_sw; i++) {
        fprintf(stderr, "%s:", s->topo.sw[i].name);
        for (unsigned c = 0; c < OP_SW_C_ENGINE_COUNT_; c++)
            if (op_sw_counters(s->sw[i])[c])
                fprintf(stderr, " %s=%llu", op_sw_counter_name(c),
                        (unsigned long long)op_sw_counters(s->sw[i])[c]);
        fprintf(stderr, "\n");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct world w;
    memset(&w, 0, sizeof(w));
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = N_LEADERS, .seed = 1};
    sim_init(&w.sim, &spec);
    require(sim_join(&w.sim, 1) == OP_OK, "the leaders cannot join");
    w.group = op_inc_eng_caps(w.sim.leader[0])->group_id;
    w.token = op_inc_eng_caps(w.sim.leader[0])->token;
    feed_records(&w, data, size);
    report(&w.sim);
    check_allreduce(&w);
    sim_free(&w.sim);
    return 0;
}
