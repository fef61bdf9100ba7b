/* inc_load: the load generator of bench/switch_rate.
 *
 * K leaders, each a UDP socket on its own loopback address (first-ip,
 * first-ip + 1, ...) with its own loop (offpath/loop.h), all driven from
 * this one thread: one wait over the K loops, bursts in, bursts out. Each leader streams int32 sum allreduces of
 * --chunks packets through a window of --window outstanding packets:
 *   --mode inc    the leaders are op_inc_eng engines that join a group through
 *                 the switch at --target and aggregate there;
 *   --mode relay  the same senders build the same INC data packets
 *                 (op_inc_encode + op_icrc_seal, same sizes, same byte-order
 *                 work) and send them to a relay that bounces them back; a
 *                 packet is answered when it returns. The window, the call
 *                 boundaries and the per-packet work at the sender mirror the
 *                 engine's (src/inc/reduce.c), so the two runs differ only in
 *                 what sits at --target.
 * Every finished call is checked (inc: the sum over leaders; relay: the
 * leader's own data). It prints "measure start" after --warmup-ms and
 * "measure end" --duration-ms later (the caller snapshots the target's
 * counters at those lines), then one JSON line with its own rates over that
 * interval. Bounded: every phase has a deadline. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/inc.h"
#include "offpath/io.h"
#include "offpath/loop.h"
#include "offpath/reduce.h"
#include "offpath/wire.h"

#define MAX_LEADERS 64
#define BURSTS_PER_WAKE 16
#define PHASE_LIMIT_NS (5 * OP_NS_PER_S) /* join, drain and leave each */

enum mode { MODE_INC, MODE_RELAY };
enum phase { PH_JOIN, PH_STREAM, PH_DRAIN, PH_LEAVE };
enum gen_counter { GC_SENT, GC_RETX, GC_ANSWERED, GC_CALLS, GC_BAD_CALLS, GC_COUNT };

struct gen_cfg {
    enum mode mode;
    uint32_t target_ip, first_ip;
    uint16_t port, window, max_data;
    int leaders;
    uint32_t chunks; /* packets per allreduce per leader */
    uint64_t warmup_ns, duration_ns, rto_ns;
};

struct rchunk {
    uint32_t seq;
    uint64_t sent_ns;
    bool done;
};

struct leader {
    const struct gen_cfg *cfg;
    size_t count, per_chunk; /* the call's int32s, and per packet */
    uint32_t rank, ip;
    struct op_io *io;
    struct op_loop *loop;
    int32_t *send, *recv;
    const int32_t *expect;
    bool busy;        /* a call is running */
    uint64_t started; /* calls started */
    bool failed;
    struct op_inc_eng *eng; /* inc mode */
    /* relay mode: the engine's window, rebuilt */
    struct rchunk *ring;
    uint32_t base_seq, next_seq, lo, hi;
    uint64_t retx_at;
    uint64_t c[GC_COUNT];
    uint8_t scratch[OP_INC_MAX_DATA];
};

struct gen {
    struct gen_cfg cfg;
    size_t count, per_chunk;
    struct leader l[MAX_LEADERS];
    struct op_loop *loops[MAX_LEADERS];
    int32_t *sum; /* what every inc call must return */
};

/* ---- relay mode: the sender side of src/inc/reduce.c without the switch */

static struct op_flow out_flow(const struct leader *l)
{
    return (struct op_flow){.src.v4 = l->ip, .src_port = l->cfg->port,
                            .dst.v4 = l->cfg->target_ip, .dst_port = l->cfg->port};
}

static void relay_send(struct leader *l, uint32_t i, uint8_t flags, uint64_t now,
                       struct op_txq *q)
{
    size_t per = l->per_chunk;
    const struct gen_cfg *c = l->cfg;
    uint32_t seq = l->base_seq + i;
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_DATA, .flags = flags,
                           .group_id = 1, .op = OP_RED_SUM, .dtype = OP_RED_INT32,
                           .src_rank = l->rank, .token = 1, .seq = seq,
                           .slot = (uint16_t)(seq % c->window), .count = (uint16_t)per,
                           .req_id = (uint8_t)seq};
    op_red_to_be(OP_RED_INT32, l->scratch, l->send + (size_t)i * per, per);
    struct op_pkt *p = op_txq_next(q);
    p->flow = out_flow(l);
    size_t n = op_inc_encode(&h, 0, l->scratch, per * 4, p->data, OP_IO_BUF_SIZE);
    n = n ? op_icrc_seal(&p->flow, p->data, n, OP_IO_BUF_SIZE) : 0;
    if (n == 0)
        return;
    p->len = (uint32_t)n;
    op_txq_commit(q);
    l->ring[seq % c->window] = (struct rchunk){.seq = seq, .sent_ns = now};
    l->c[flags ? GC_RETX : GC_SENT]++;
}

static void relay_fill(struct leader *l, uint64_t now, struct op_txq *q)
{
    while (l->hi < l->cfg->chunks && l->hi - l->lo < l->cfg->window)
        relay_send(l, l->hi++, 0, now, q);
}

static void relay_start(struct leader *l, uint64_t now, struct op_txq *q)
{
    l->base_seq = l->next_seq;
    l->next_seq += l->cfg->chunks;
    l->lo = l->hi = 0;
    l->busy = true;
    l->retx_at = now + l->cfg->rto_ns;
    relay_fill(l, now, q);
}

static void call_done(struct leader *l)
{
    l->busy = false;
    l->c[GC_CALLS]++;
    if (memcmp(l->recv, l->expect, l->count * sizeof(int32_t)) != 0)
        l->c[GC_BAD_CALLS]++;
}

/* ---- a relay leader as its loop's engine */

static void relay_input(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *q)
{
    struct leader *l = eng;
    struct op_inc_pkt ip;
    struct op_flow f = out_flow(l); /* the ICRC was sealed for the way out */
    if (pkt->flow.src.v4 != l->cfg->target_ip || op_inc_decode(pkt->data, pkt->len, &ip) != OP_OK ||
        !op_icrc_check(&f, pkt->data, pkt->len))
        return;
    uint32_t i = ip.hdr.seq - l->base_seq;
    struct rchunk *rc = &l->ring[ip.hdr.seq % l->cfg->window];
    if (!l->busy || i >= l->hi || rc->seq != ip.hdr.seq || rc->done)
        return;
    op_red_from_be(OP_RED_INT32, l->recv + (size_t)i * l->per_chunk, ip.payload, ip.hdr.count);
    rc->done = true;
    l->c[GC_ANSWERED]++;
    while (l->lo < l->hi && l->ring[(l->base_seq + l->lo) % l->cfg->window].done)
        l->lo++;
    if (l->lo == l->cfg->chunks)
        call_done(l);
    else
        relay_fill(l, now, q);
}

static void relay_timer(void *eng, uint64_t now, struct op_txq *q)
{
    struct leader *l = eng;
    if (!l->busy || now < l->retx_at)
        return;
    uint64_t next = now + l->cfg->rto_ns;
    for (uint32_t i = l->lo; i < l->hi; i++) {
        struct rchunk *rc = &l->ring[(l->base_seq + i) % l->cfg->window];
        if (rc->done)
            continue;
        if (now - rc->sent_ns >= l->cfg->rto_ns)
            relay_send(l, i, OP_INC_F_RETX, now, q);
        else if (rc->sent_ns + l->cfg->rto_ns < next)
            next = rc->sent_ns + l->cfg->rto_ns;
    }
    l->retx_at = next;
}

static uint64_t relay_deadline(const void *eng)
{
    const struct leader *l = eng;
    return l->busy ? l->retx_at : UINT64_MAX;
}

static const struct op_engine_ops relay_ops = {
    .name = "relay leader",
    .input = relay_input,
    .timer = relay_timer,
    .next_deadline = relay_deadline,
};

/* ---- an INC leader: the engine itself */

static void inc_input(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *q)
{
    op_inc_eng_input(eng, pkt, now, q);
}

static void inc_timer(void *eng, uint64_t now, struct op_txq *q) { op_inc_eng_timer(eng, now, q); }

static uint64_t inc_deadline(const void *eng) { return op_inc_eng_next_timer(eng); }

static const struct op_engine_ops inc_ops = {
    .name = "inc leader",
    .input = inc_input,
    .timer = inc_timer,
    .next_deadline = inc_deadline,
};

/* ---- both modes */

static void counts(const struct leader *l, uint64_t out[GC_COUNT])
{
    memcpy(out, l->c, sizeof(l->c));
    if (l->eng == NULL)
        return;
    const uint64_t *e = op_inc_eng_counters(l->eng);
    out[GC_SENT] = e[OP_INC_C_chunks_sent];
    out[GC_RETX] = e[OP_INC_C_retransmissions];
    out[GC_ANSWERED] = e[OP_INC_C_results];
}

static void start_call(struct gen *g, struct leader *l, uint64_t now)
{
    if (l->eng == NULL) {
        relay_start(l, now, op_loop_txq(l->loop));
        l->started++;
        return;
    }
    op_status_t st = op_inc_eng_allreduce(l->eng, l->send, l->recv, g->count, OP_RED_INT32,
                                          OP_RED_SUM, now, op_loop_txq(l->loop));
    if (st != OP_OK) {
        fprintf(stderr, "inc_load: leader %u: allreduce: %s\n", l->rank, op_status_str(st));
        l->failed = true;
        return;
    }
    l->busy = true;
    l->started++;
}

/* inc mode: notice the end of the engine's operation. */
static void poll_engine(struct leader *l)
{
    if (l->eng == NULL || !l->busy || op_inc_eng_status(l->eng) == OP_INPROGRESS)
        return;
    op_status_t st = op_inc_eng_status(l->eng);
    if (st != OP_OK) {
        const uint64_t *c = op_inc_eng_counters(l->eng);
        fprintf(stderr, "inc_load: leader %u: allreduce %llu: %s (%llu results, %llu retx)\n",
                l->rank, (unsigned long long)c[OP_INC_C_allreduces], op_status_str(st),
                (unsigned long long)c[OP_INC_C_results],
                (unsigned long long)c[OP_INC_C_retransmissions]);
        l->failed = true;
        l->busy = false;
        return;
    }
    call_done(l);
}

static bool phase_over(struct gen *g, enum phase ph)
{
    uint64_t most = 0;
    for (int i = 0; i < g->cfg.leaders; i++)
        if (g->l[i].started > most)
            most = g->l[i].started;
    bool idle = true;
    for (int i = 0; i < g->cfg.leaders; i++) {
        struct leader *l = &g->l[i];
        if (l->failed)
            return true;
        /* Calls are collective: the drain first brings every leader to the
         * number of calls the furthest one started, or that call never ends. */
        if (!l->busy && (ph == PH_STREAM || (ph == PH_DRAIN && l->started < most)))
            start_call(g, l, op_now_ns());
        if (ph != PH_STREAM)
            idle &= l->eng ? op_inc_eng_status(l->eng) != OP_INPROGRESS : !l->busy;
    }
    return ph != PH_STREAM && idle;
}

/* Run the leaders until the phase is over or until; false on a failure. */
static bool drive(struct gen *g, enum phase ph, uint64_t until)
{
    for (;;) {
        for (int i = 0; i < g->cfg.leaders; i++)
            poll_engine(&g->l[i]);
        /* may start calls: what they queue leaves before the wait */
        if (phase_over(g, ph) || op_now_ns() >= until)
            break;
        int n = op_loop_run_many(g->loops, g->cfg.leaders, until);
        if (n < 0)
            fprintf(stderr, "inc_load: wait: %s\n", strerror(-n));
    }
    for (int i = 0; i < g->cfg.leaders; i++)
        op_loop_flush(g->loops[i]);
    for (int i = 0; i < g->cfg.leaders; i++)
        if (g->l[i].failed)
            return false;
    return ph == PH_STREAM || phase_over(g, ph);
}

/* ---- setup */

static op_status_t open_engine(struct gen *g, struct leader *l)
{
    const struct gen_cfg *c = &g->cfg;
    struct op_inc_config ic;
    op_inc_config_default(&ic);
    ic.ip = l->ip;
    ic.port = c->port;
    ic.tor_ip = c->target_ip;
    ic.tor_port = c->port;
    ic.rank = l->rank;
    ic.n_leaders = (uint16_t)c->leaders;
    ic.master_rank = 0;
    ic.master_ip = c->first_ip;
    ic.job_id = 0x5352; /* "SR" */
    ic.comm_id = 1;
    ic.c_id = 1;
    ic.world_rank = l->rank;
    ic.want_window = c->window;
    ic.want_data = c->max_data;
    /* A fixed timeout well above the round trip of a full window (K * W
     * packets queued at the target): no spurious retransmission. */
    ic.rto_ns = ic.rto_min_ns = c->rto_ns;
    ic.rto_max_ns = 4 * c->rto_ns;
    return op_inc_eng_create(&ic, &l->eng);
}

/* Each leader's wake takes up to BURSTS_PER_WAKE bursts, so one busy
 * socket cannot starve the others. */
static op_status_t open_loop(struct leader *l)
{
    struct op_loop_config lc = {.io = l->io, .bursts_per_round = BURSTS_PER_WAKE};
    op_status_t st = op_loop_create(&lc, &l->loop);
    if (st == OP_OK)
        st = l->eng ? op_loop_add(l->loop, &inc_ops, l->eng) : op_loop_add(l->loop, &relay_ops, l);
    return st;
}

static op_status_t open_leader(struct gen *g, int i)
{
    struct leader *l = &g->l[i];
    size_t bytes = g->count * sizeof(int32_t);
    l->cfg = &g->cfg;
    l->count = g->count;
    l->per_chunk = g->per_chunk;
    l->rank = (uint32_t)i;
    l->ip = g->cfg.first_ip + (uint32_t)i;
    l->send = malloc(bytes);
    l->recv = calloc(1, bytes);
    l->ring = calloc(g->cfg.window, sizeof(*l->ring));
    if (l->send == NULL || l->recv == NULL || l->ring == NULL)
        return OP_ERR_NOMEM;
    for (size_t j = 0; j < g->count; j++)
        l->send[j] = (int32_t)((l->rank + 1) * (1 + j % 97));
    l->expect = g->cfg.mode == MODE_INC ? g->sum : l->send;
    op_status_t st = op_io_udp_open(l->ip, g->cfg.port, &l->io);
    if (st == OP_OK) /* as every offpath tool reads it */
        op_io_udp_batching(l->io, getenv("OFFPATH_UDP_BATCHING") == NULL ||
                                      strcmp(getenv("OFFPATH_UDP_BATCHING"), "0") != 0);
    if (st == OP_OK && g->cfg.mode == MODE_INC)
        st = open_engine(g, l);
    if (st == OP_OK)
        st = open_loop(l);
    g->loops[i] = l->loop;
    return st;
}

static op_status_t gen_open(struct gen *g)
{
    int k = g->cfg.leaders;
    g->per_chunk = g->cfg.max_data / sizeof(int32_t);
    g->count = g->per_chunk * g->cfg.chunks;
    g->sum = malloc(g->count * sizeof(int32_t));
    if (g->sum == NULL)
        return OP_ERR_NOMEM;
    for (size_t j = 0; j < g->count; j++)
        g->sum[j] = (int32_t)((k * (k + 1) / 2) * (int)(1 + j % 97));
    op_status_t st = OP_OK;
    for (int i = 0; i < k && st == OP_OK; i++)
        st = open_leader(g, i);
    return st;
}

static void gen_close(struct gen *g)
{
    for (int i = 0; i < g->cfg.leaders; i++) {
        struct leader *l = &g->l[i];
        op_loop_destroy(l->loop);
        op_inc_eng_destroy(l->eng);
        op_io_close(l->io);
        free(l->send);
        free(l->recv);
        free(l->ring);
    }
    free(g->sum);
}

/* inc mode: every leader joins; the group must grant what was asked. */
static bool join(struct gen *g)
{
    uint64_t now = op_now_ns();
    for (int i = 0; i < g->cfg.leaders; i++)
        if (op_inc_eng_join(g->l[i].eng, now, op_loop_txq(g->loops[i])) != OP_OK)
            return false;
    if (!drive(g, PH_JOIN, now + PHASE_LIMIT_NS))
        return false;
    for (int i = 0; i < g->cfg.leaders; i++) {
        const struct op_inc_eng *e = g->l[i].eng;
        const struct op_inc_caps *caps = op_inc_eng_caps(e);
        if (op_inc_eng_status(e) != OP_OK) {
            fprintf(stderr, "inc_load: leader %d: join: %s (reason %s)\n", i,
                    op_status_str(op_inc_eng_status(e)), op_inc_reason_str(op_inc_eng_reason(e)));
            return false;
        }
        if (caps->window != g->cfg.window || caps->max_data != g->cfg.max_data) {
            fprintf(stderr, "inc_load: granted window %u data %u, asked %u and %u\n", caps->window,
                    caps->max_data, g->cfg.window, g->cfg.max_data);
            return false;
        }
    }
    return true;
}

static void leave(struct gen *g)
{
    uint64_t now = op_now_ns();
    for (int i = 0; i < g->cfg.leaders; i++)
        (void)op_inc_eng_leave(g->l[i].eng, now, op_loop_txq(g->loops[i]));
    if (!drive(g, PH_LEAVE, now + PHASE_LIMIT_NS))
        fprintf(stderr, "inc_load: leave did not finish (the group's lease frees it)\n");
}

static void snapshot(const struct gen *g, uint64_t sum[GC_COUNT])
{
    memset(sum, 0, GC_COUNT * sizeof(uint64_t));
    for (int i = 0; i < g->cfg.leaders; i++) {
        uint64_t c[GC_COUNT];
        counts(&g->l[i], c);
        for (int k = 0; k < GC_COUNT; k++)
            sum[k] += c[k];
    }
}

static void report(const struct gen *g, const uint64_t a[GC_COUNT], const uint64_t b[GC_COUNT],
                   double secs, uint64_t bad_total)
{
    const struct gen_cfg *c = &g->cfg;
    printf("{\"mode\": \"%s\", \"leaders\": %d, \"window\": %u, \"data_bytes\": %u, "
           "\"pkt_bytes\": %u, \"chunks_per_call\": %u, \"interval_s\": %.4f, "
           "\"sent_pps\": %.0f, \"answered_pps\": %.0f, \"retx\": %llu, \"calls\": %llu, "
           "\"bad_calls\": %llu}\n",
           c->mode == MODE_INC ? "inc" : "relay", c->leaders, c->window, c->max_data,
           (unsigned)(OP_INC_PREFIX_LEN + c->max_data + OP_ICRC_LEN), c->chunks, secs,
           (double)(b[GC_SENT] - a[GC_SENT] + b[GC_RETX] - a[GC_RETX]) / secs,
           (double)(b[GC_ANSWERED] - a[GC_ANSWERED]) / secs,
           (unsigned long long)(b[GC_RETX] - a[GC_RETX]),
           (unsigned long long)(b[GC_CALLS] - a[GC_CALLS]), (unsigned long long)bad_total);
    fflush(stdout);
}

/* Stream, marking the measured interval on stdout. */
static bool run(struct gen *g)
{
    uint64_t a[GC_COUNT], b[GC_COUNT], t0 = op_now_ns();
    if (!drive(g, PH_STREAM, t0 + g->cfg.warmup_ns))
        return false;
    snapshot(g, a);
    uint64_t m0 = op_now_ns();
    printf("measure start\n");
    fflush(stdout);
    if (!drive(g, PH_STREAM, m0 + g->cfg.duration_ns))
        return false;
    snapshot(g, b);
    uint64_t m1 = op_now_ns();
    printf("measure end\n");
    fflush(stdout);
    if (!drive(g, PH_DRAIN, op_now_ns() + PHASE_LIMIT_NS))
        fprintf(stderr, "inc_load: calls still running after the drain limit\n");
    uint64_t end[GC_COUNT];
    snapshot(g, end);
    report(g, a, b, (double)(m1 - m0) / 1e9, end[GC_BAD_CALLS]);
    if (g->cfg.mode == MODE_INC)
        leave(g);
    return end[GC_BAD_CALLS] == 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: inc_load --mode inc|relay --target IP --port N [options]\n"
            "  --leaders K       leaders, one socket each (default 8)\n"
            "  --first-ip IP     address of leader 0; leader i has IP + i (default 127.20.0.1)\n"
            "  --window W        outstanding packets per leader (default 128)\n"
            "  --max-data B      data bytes per packet, multiple of 8 (default 1024)\n"
            "  --chunks N        packets per allreduce per leader (default 1024)\n"
            "  --warmup-ms MS    before the measured interval (default 1000)\n"
            "  --duration-ms MS  measured interval (default 3000)\n"
            "  --rto-ms MS       retransmission timeout, fixed (default 200)\n");
}

static bool num(const char *v, uint64_t lo, uint64_t hi, uint64_t *x)
{
    return op_parse_u64(v, lo, hi, x) == OP_OK;
}

static bool parse_opt(int o, const char *v, struct gen_cfg *c)
{
    uint64_t x = 0;
    bool ok;
    switch (o) {
    case 'm':
        c->mode = strcmp(v, "relay") == 0 ? MODE_RELAY : MODE_INC;
        return strcmp(v, "relay") == 0 || strcmp(v, "inc") == 0;
    case 't': return op_parse_ipv4(v, &c->target_ip, NULL) == OP_OK;
    case 'f': return op_parse_ipv4(v, &c->first_ip, NULL) == OP_OK;
    case 'p': ok = num(v, 1, 65535, &x); c->port = (uint16_t)x; return ok;
    case 'k': ok = num(v, 1, MAX_LEADERS, &x); c->leaders = (int)x; return ok;
    case 'w': ok = num(v, 1, 4096, &x); c->window = (uint16_t)x; return ok;
    case 'd':
        ok = num(v, 8, OP_INC_MAX_DATA, &x) && x % 8 == 0;
        c->max_data = (uint16_t)x;
        return ok;
    case 'n': ok = num(v, 1, 1u << 20, &x); c->chunks = (uint32_t)x; return ok;
    case 'W': ok = num(v, 0, 600000, &x); c->warmup_ns = x * OP_NS_PER_MS; return ok;
    case 'D': ok = num(v, 1, 600000, &x); c->duration_ns = x * OP_NS_PER_MS; return ok;
    case 'r': ok = num(v, 1, 10000, &x); c->rto_ns = x * OP_NS_PER_MS; return ok;
    default: return false;
    }
}

static bool parse(int argc, char **argv, struct gen_cfg *c)
{
    static const struct option opts[] = {
        {"mode", 1, 0, 'm'}, {"target", 1, 0, 't'}, {"first-ip", 1, 0, 'f'},
        {"port", 1, 0, 'p'}, {"leaders", 1, 0, 'k'}, {"window", 1, 0, 'w'},
        {"max-data", 1, 0, 'd'}, {"chunks", 1, 0, 'n'}, {"warmup-ms", 1, 0, 'W'},
        {"duration-ms", 1, 0, 'D'}, {"rto-ms", 1, 0, 'r'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o == 'h') {
            usage(stdout);
            exit(0);
        }
        if (!parse_opt(o, optarg, c)) {
            fprintf(stderr, "inc_load: bad value for an option (see --help)\n");
            return false;
        }
    }
    if (c->target_ip == 0 || c->port == 0 || optind < argc) {
        usage(stderr);
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    static struct gen g;
    g.cfg = (struct gen_cfg){.mode = MODE_INC, .first_ip = 0x7f140001u, .leaders = 8,
                             .window = 128, .max_data = 1024, .chunks = 1024,
                             .warmup_ns = OP_NS_PER_S, .duration_ns = 3 * OP_NS_PER_S,
                             .rto_ns = 200 * OP_NS_PER_MS};
    if (!parse(argc, argv, &g.cfg))
        return 2;
    op_status_t st = gen_open(&g);
    if (st != OP_OK) {
        fprintf(stderr, "inc_load: setup: %s\n", op_status_str(st));
        gen_close(&g);
        return 1;
    }
    bool ok = (g.cfg.mode == MODE_RELAY || join(&g)) && run(&g);
    gen_close(&g);
    return ok ? 0 : 1;
}
