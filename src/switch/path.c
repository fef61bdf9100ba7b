/* The switch on the path (offpath/switch.h, `--ports`): a router of whole
 * frames between its ports with the INC engine at its own address. Each
 * port is a frame backend driven by a loop of its own (frames mode); a
 * frame forwarded moves to the other port's queue without a copy
 * (op_frameq_put exchanges buffers). Egress is shaped to the link's rate
 * (shape.c) and faults are injected per port (loss and delay by the io
 * fault layer, a link taken down here). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/loop.h"
#include "path_internal.h"

#define ASK_EVERY_NS (1000 * OP_NS_PER_MS)
#define INC_QUEUE OP_IO_BURST

/* ---- the table: open addressing on the address, a few hundred entries */

static uint32_t addr_hash(const struct op_addr *a)
{
    uint32_t h = a->v4;
    if (a->family == OP_AF_IPV6) {
        uint32_t w[4];
        memcpy(w, a->v6, 16);
        h = w[0] ^ w[1] ^ w[2] ^ w[3] ^ 0x9e3779b9u;
    }
    h ^= h >> 16;
    h *= 0x7feb352du;
    return h ^ (h >> 15);
}

static bool table_add(struct op_sw_path *p, int route)
{
    uint32_t i = addr_hash(&p->cfg.routes[route].dst) & (PATH_TABLE - 1);
    for (uint32_t k = 0; k < PATH_TABLE; k++, i = (i + 1) & (PATH_TABLE - 1)) {
        if (p->table[i] == 0) {
            p->table[i] = (uint16_t)(route + 1);
            return true;
        }
        if (op_addr_eq(&p->cfg.routes[p->table[i] - 1].dst, &p->cfg.routes[route].dst))
            return false; /* twice the same destination */
    }
    return false;
}

static const struct op_sw_route *lookup(const struct op_sw_path *p, const struct op_addr *dst)
{
    uint32_t i = addr_hash(dst) & (PATH_TABLE - 1);
    for (uint32_t k = 0; k < PATH_TABLE && p->table[i] != 0; k++, i = (i + 1) & (PATH_TABLE - 1)) {
        const struct op_sw_route *r = &p->cfg.routes[p->table[i] - 1];
        if (op_addr_eq(&r->dst, dst))
            return r;
    }
    return NULL;
}

/* One flow keeps one of the equal-cost ports (no reordering within it);
 * RoCEv2's source port is its entropy. */
static struct sw_port *pick(struct op_sw_path *p, const struct op_sw_route *r,
                            const struct op_flow *f)
{
    if (r->n_ports == 1)
        return &p->port[r->ports[0]];
    uint32_t h = addr_hash(&f->src) ^ (addr_hash(&f->dst) * 31u) ^
                 ((uint32_t)f->src_port << 16 | f->dst_port);
    h ^= h >> 13;
    return &p->port[r->ports[(h * 0x9e3779b1u >> 16) % r->n_ports]];
}

/* ---- neighbours: a port's one peer (a point-to-point link) */

static bool is_peer(const struct sw_port *pt, const struct op_addr *a)
{
    return op_addr_eq(a, &pt->cfg.peer4) || (pt->has_peer6 && op_addr_eq(a, &pt->cfg.peer6));
}

static void learn(struct sw_port *pt, const struct op_frame_info *in)
{
    if (in->kind == OP_FRAME_KIND_OTHER || (in->src_mac[0] & 1) || !is_peer(pt, &in->flow.src))
        return;
    memcpy(pt->peer_mac, in->src_mac, 6);
    pt->peer_known = true;
}

static void ask_one(struct sw_port *pt, const struct op_addr *own, const struct op_addr *peer)
{
    struct op_frame *q = op_frameq_next(pt->fq);
    q->len = (uint32_t)op_neigh_solicit_build(q->data, q->room, own, pt->mac, peer);
    if (q->len == 0)
        return;
    op_frameq_commit(pt->fq);
    pt->c[OP_SW_PATH_C_neigh_asked]++;
}

static void ask_if_due(struct op_sw_path *p, struct sw_port *pt, uint64_t now)
{
    if (pt->peer_known || (pt->asked_at != 0 && now - pt->asked_at < ASK_EVERY_NS))
        return;
    pt->asked_at = now;
    if (!op_addr_is_any(&pt->cfg.peer4))
        ask_one(pt, &p->cfg.own4, &pt->cfg.peer4);
    if (pt->has_peer6 && p->has_own6)
        ask_one(pt, &p->cfg.own6, &pt->cfg.peer6);
}

/* ---- the engine's packets out: headers, the route's port, the peer's MAC */

static void send_inc(struct op_sw_path *p, const struct op_pkt *pkt, uint64_t now)
{
    const struct op_sw_route *r = lookup(p, &pkt->flow.dst);
    if (r == NULL)
        return; /* the engine counts destinations it has no address for */
    struct op_flow f = pkt->flow;
    f.src = p->cfg.own4;
    f.src_port = p->cfg.inc_port;
    struct sw_port *out = pick(p, r, &f);
    if (!out->peer_known) {
        out->c[OP_SW_PATH_C_tx_no_neigh]++;
        ask_if_due(p, out, now);
        return;
    }
    struct op_frame *t = op_frameq_next(out->fq);
    /* ECN-capable: the leaders narrow their windows on what it brings back */
    struct op_frame_l2 l2 = {.tos = OP_ECN_ECT0};
    memcpy(l2.src_mac, out->mac, 6);
    memcpy(l2.dst_mac, out->peer_mac, 6);
    memcpy(t->data + op_udp_frame_hdr_len(f.dst.family), pkt->data, pkt->len);
    t->len = (uint32_t)op_udp_frame_build(t->data, t->room, &f, &l2, pkt->len);
    if (t->len == 0)
        return;
    op_frameq_commit(out->fq);
    out->c[OP_SW_PATH_C_tx_inc]++;
}

static void drain_inc(void *ctx, struct op_txq *q)
{
    struct op_sw_path *p = ctx;
    uint64_t now = op_now_ns();
    for (int i = 0; i < q->n; i++)
        send_inc(p, &q->pkts[i], now);
    q->n = 0;
}

/* ---- frames in */

static bool is_own(const struct op_sw_path *p, const struct op_addr *a)
{
    return op_addr_eq(a, &p->cfg.own4) || (p->has_own6 && op_addr_eq(a, &p->cfg.own6));
}

static bool is_multicast(const struct op_addr *a)
{
    return a->family == OP_AF_IPV6 ? a->v6[0] == 0xff : (a->v4 >> 28) == 0xe || a->v4 == ~0u;
}

/* The payload in place: the engine reads it and copies what it keeps. A
 * queue's CE on the way becomes the BTH's FECN, as an InfiniBand switch
 * marks forward congestion (the ICRC masks both): the engine sees it in the
 * packet it decodes. */
static void to_engine(struct op_sw_path *p, struct sw_port *pt, struct op_frame *f, uint64_t now)
{
    if (f->info.ecn == OP_ECN_CE && f->info.payload_len >= OP_BTH_LEN) {
        f->data[f->info.payload_off + OP_BTH_FECN_BYTE] |= OP_BTH_FECN_BIT;
        pt->c[OP_SW_PATH_C_ecn_seen]++;
    }
    const struct op_pkt pkt = {.flow = f->info.flow, .len = f->info.payload_len,
                               .data = f->data + f->info.payload_off};
    op_sw_input(p->sw, &pkt, now, &p->incq);
}

/* ARP, NDP and echo: answered on the port they came by when they are for
 * us, otherwise taken (a neighbour's answer, its advertisements). */
static bool control(struct op_sw_path *p, struct sw_port *pt, struct op_frame *f)
{
    const struct op_frame_info *in = &f->info;
    bool arp = in->kind == OP_FRAME_KIND_ARP;
    bool icmp = (in->kind == OP_FRAME_KIND_IPV4 && in->ip_proto == 1) ||
                (in->kind == OP_FRAME_KIND_IPV6 && in->ip_proto == 58);
    if (!arp && !icmp)
        return false;
    const struct op_addr *own = in->kind == OP_FRAME_KIND_IPV6 ? &p->cfg.own6 : &p->cfg.own4;
    size_t r = in->kind != OP_FRAME_KIND_IPV6 || p->has_own6
                   ? op_frame_control_reply(f->data, f->len, f->room, own, pt->mac)
                   : 0;
    if (r > 0) {
        f->len = (uint32_t)r;
        op_frameq_put(pt->fq, f);
        return true;
    }
    /* not an answerable question: an ARP or ICMPv6 to us or to a group is
     * ours to take; an ICMP between others is forwarded */
    return arp || (in->kind == OP_FRAME_KIND_IPV6 && (is_own(p, &in->flow.dst) ||
                                                     is_multicast(&in->flow.dst)));
}

static enum op_sw_path_counter forward(struct op_sw_path *p, struct op_frame *f, uint64_t now)
{
    const struct op_frame_info *in = &f->info;
    const struct op_sw_route *r = lookup(p, &in->flow.dst);
    if (r == NULL)
        return OP_SW_PATH_C_drop_no_route;
    struct sw_port *out = pick(p, r, &in->flow);
    if (!out->peer_known) {
        ask_if_due(p, out, now);
        return OP_SW_PATH_C_drop_no_neigh;
    }
    if (!op_frame_route(f->data, f->len, in, out->mac, out->peer_mac))
        return OP_SW_PATH_C_drop_ttl;
    op_frameq_put(out->fq, f);
    return OP_SW_PATH_C_forwarded;
}

static enum op_sw_path_counter classify(struct op_sw_path *p, struct sw_port *pt,
                                        struct op_frame *f, uint64_t now)
{
    const struct op_frame_info *in = &f->info;
    learn(pt, in);
    if (control(p, pt, f))
        return OP_SW_PATH_C_control;
    if (in->kind != OP_FRAME_KIND_IPV4 && in->kind != OP_FRAME_KIND_IPV6)
        return OP_SW_PATH_C_drop_other;
    if (is_own(p, &in->flow.dst)) {
        if (p->sw == NULL || in->udp != OP_FRAME_OK || in->flow.dst_port != p->cfg.inc_port ||
            in->kind != OP_FRAME_KIND_IPV4)
            return OP_SW_PATH_C_drop_local;
        to_engine(p, pt, f, now);
        return OP_SW_PATH_C_to_inc;
    }
    if (is_multicast(&in->flow.dst) || (in->dst_mac[0] & 1))
        return OP_SW_PATH_C_drop_other;
    return forward(p, f, now);
}

/* `down inc:N+D`: the N-th INC packet in takes the link down, now, while an
 * allreduce is under way. */
static bool down_at_this_inc(struct sw_port *pt, uint64_t now)
{
    if (pt->cfg.down_at_inc == 0 || pt->sh.down_until != 0 ||
        pt->c[OP_SW_PATH_C_to_inc] < pt->cfg.down_at_inc)
        return false;
    path_shape_down_from(pt, now);
    return true;
}

static void port_input(void *eng, struct op_frame *frames, int n, uint64_t now,
                       struct op_frameq *out)
{
    (void)out; /* each frame goes to the queue of the port it leaves by */
    struct sw_port *pt = eng;
    struct op_sw_path *p = pt->path;
    pt->c[OP_SW_PATH_C_rx_frames] += (uint64_t)n;
    bool down = now >= pt->sh.down_from && now < pt->sh.down_until; /* both ways */
    for (int i = 0; i < n; i++) {
        bool lost = down || (pt->cfg.rx_drop_rate > 0 &&
                             op_rng_unit(&p->rx_loss) < pt->cfg.rx_drop_rate);
        enum op_sw_path_counter k = lost ? OP_SW_PATH_C_drop_injected
                                         : classify(p, pt, &frames[i], now);
        pt->c[k]++;
        down = down || (k == OP_SW_PATH_C_to_inc && down_at_this_inc(pt, now));
    }
    drain_inc(p, &p->incq);
}

/* ---- timers: a port's shaped queue; the engine's and the questions (path) */

static void port_timer(void *eng, uint64_t now, struct op_txq *out)
{
    (void)out;
    path_shape_release(eng, now);
}

static uint64_t port_deadline(const void *eng) { return path_shape_deadline(eng); }

static const struct op_engine_ops port_ops = {
    .name = "switch port",
    .input_frames = port_input,
    .timer = port_timer,
    .next_deadline = port_deadline,
};

static uint64_t path_deadline(const void *eng)
{
    const struct op_sw_path *p = eng;
    uint64_t t = p->sw != NULL ? op_sw_next_timer(p->sw) : UINT64_MAX;
    for (int i = 0; i < p->cfg.n_ports; i++)
        if (!p->port[i].peer_known) {
            uint64_t ask = p->port[i].asked_at + ASK_EVERY_NS;
            t = ask < t ? ask : t;
        }
    return t;
}

static void path_timer(void *eng, uint64_t now, struct op_txq *out)
{
    (void)out;
    struct op_sw_path *p = eng;
    if (p->sw != NULL && op_sw_next_timer(p->sw) <= now) {
        op_sw_timer(p->sw, now, &p->incq);
        drain_inc(p, &p->incq);
    }
    for (int i = 0; i < p->cfg.n_ports; i++)
        ask_if_due(p, &p->port[i], now);
}

static const struct op_engine_ops path_ops = {
    .name = "switch path",
    .timer = path_timer,
    .next_deadline = path_deadline,
};

/* ---- setup */

static op_status_t open_port(struct op_sw_path *p, struct sw_port *pt, const struct op_log *log,
                             char *err, size_t errlen)
{
    op_status_t st = OP_OK;
    if (pt->cfg.io == NULL) {
        struct op_io_xdp_config xc = {.ifname = pt->cfg.name, .zero_copy = true, .log = log};
        st = op_io_xdp_open_frames(&xc, &pt->io);
    } else {
        pt->io = pt->cfg.io;
    }
    pt->base = pt->io;
    if (st == OP_OK && op_io_local_mac(pt->io, pt->mac) != OP_OK)
        st = OP_ERR_INVAL;
    if (st == OP_OK && (pt->cfg.drop_rate > 0 || pt->cfg.dup_rate > 0 || pt->cfg.delay_us > 0)) {
        struct op_io *faulty;
        struct op_fault_cfg fc = {.drop = pt->cfg.drop_rate, .dup = pt->cfg.dup_rate,
                                  .delay_us = pt->cfg.delay_us,
                                  .seed = p->cfg.seed ^ (uint64_t)(pt->index + 1) * 0x9e3779b97f4a7c15ull};
        if ((st = op_io_fault_wrap(pt->io, &fc, &faulty)) == OP_OK)
            pt->io = faulty;
    }
    if (st == OP_OK)
        st = path_shape_init(pt, op_now_ns());
    if (st == OP_OK) {
        struct op_loop_config lc = {.io = pt->io, .frames = true, .busy_poll = p->cfg.busy_poll,
                                    .flush_frames = path_shape_flush, .flush_ctx = pt,
                                    .bursts_per_round = 4};
        if ((st = op_loop_create(&lc, &pt->loop)) == OP_OK)
            st = op_loop_add(pt->loop, &port_ops, pt);
    }
    if (st != OP_OK)
        snprintf(err, errlen, "port %s: %s", pt->cfg.name, op_status_str(st));
    else
        pt->fq = op_loop_frameq(pt->loop);
    return st;
}

static op_status_t check_config(const struct op_sw_path_config *c, char *err, size_t errlen)
{
    if (c->n_ports < 1 || c->n_ports > OP_SW_MAX_PORTS || c->n_routes < 0 ||
        c->n_routes > OP_SW_MAX_ROUTES || c->own4.family != OP_AF_IPV4 ||
        op_addr_is_any(&c->own4)) {
        snprintf(err, errlen, "a path needs 1..%d ports and its own IPv4 address",
                 OP_SW_MAX_PORTS);
        return OP_ERR_INVAL;
    }
    for (int i = 0; i < c->n_routes; i++) {
        const struct op_sw_route *r = &c->routes[i];
        bool ok = r->n_ports >= 1 && r->n_ports <= OP_SW_MAX_PATHS;
        for (int k = 0; ok && k < r->n_ports; k++)
            ok = r->ports[k] < c->n_ports;
        if (!ok) {
            snprintf(err, errlen, "route %d: 1..%d ports of the %d given", i, OP_SW_MAX_PATHS,
                     c->n_ports);
            return OP_ERR_INVAL;
        }
    }
    return OP_OK;
}

static op_status_t build(struct op_sw_path *p, const struct op_log *log, char *err, size_t errlen)
{
    for (int i = 0; i < p->cfg.n_routes; i++)
        if (!table_add(p, i)) {
            snprintf(err, errlen, "route %d: a destination given twice", i);
            return OP_ERR_INVAL;
        }
    op_status_t st = op_pktbuf_init(&p->inc_mem, INC_QUEUE);
    if (st != OP_OK)
        return st;
    p->incq = (struct op_txq){.pkts = p->inc_mem.pkts, .cap = INC_QUEUE, .flush = drain_inc,
                              .ctx = p};
    for (int i = 0; i < p->cfg.n_ports && st == OP_OK; i++) {
        st = open_port(p, &p->port[i], log, err, errlen);
        p->loops[i] = p->port[i].loop;
    }
    if (st == OP_OK)
        st = op_loop_add(p->loops[0], &path_ops, p);
    return st;
}

op_status_t op_sw_path_create(const struct op_sw_path_config *c, struct op_sw *sw,
                              const struct op_log *log, struct op_sw_path **out, char *err,
                              size_t errlen)
{
    op_status_t st = check_config(c, err, errlen);
    struct op_sw_path *p = st == OP_OK ? calloc(1, sizeof *p) : NULL;
    if (p == NULL) {
        for (int i = 0; i < c->n_ports && i < OP_SW_MAX_PORTS; i++)
            op_io_close(c->ports[i].io);
        return st != OP_OK ? st : OP_ERR_NOMEM;
    }
    p->cfg = *c;
    p->sw = sw;
    op_rng_seed(&p->rx_loss, c->seed ^ 0x5deece66dull);
    p->has_own6 = c->own6.family == OP_AF_IPV6 && !op_addr_is_any(&c->own6);
    for (int i = 0; i < c->n_ports; i++) {
        struct sw_port *pt = &p->port[i];
        pt->path = p;
        pt->index = i;
        pt->cfg = c->ports[i];
        pt->has_peer6 = pt->cfg.peer6.family == OP_AF_IPV6 && !op_addr_is_any(&pt->cfg.peer6);
    }
    if ((st = build(p, log, err, errlen)) != OP_OK) {
        if (err[0] == '\0')
            snprintf(err, errlen, "%s", op_status_str(st));
        op_sw_path_destroy(p);
        return st;
    }
    for (int i = 0; i < c->n_ports; i++) /* the peers asked for at once */
        ask_if_due(p, &p->port[i], op_now_ns());
    *out = p;
    return OP_OK;
}

void op_sw_path_destroy(struct op_sw_path *p)
{
    if (p == NULL)
        return;
    for (int i = 0; i < p->cfg.n_ports; i++) {
        struct sw_port *pt = &p->port[i];
        op_loop_destroy(pt->loop);
        path_shape_free(pt);
        if (pt->io != NULL)
            op_io_close(pt->io);
        else if (pt->cfg.io != NULL)
            op_io_close(pt->cfg.io); /* not reached by open_port: still ours */
    }
    op_pktbuf_free(&p->inc_mem);
    free(p);
}

int op_sw_path_run_once(struct op_sw_path *p, uint64_t until)
{
    return op_loop_run_many(p->loops, p->cfg.n_ports, until);
}

struct op_loop *op_sw_path_loop(struct op_sw_path *p) { return p->loops[0]; }

int op_sw_path_ports(const struct op_sw_path *p) { return p->cfg.n_ports; }

const char *op_sw_path_port_name(const struct op_sw_path *p, int port)
{
    return port >= 0 && port < p->cfg.n_ports ? p->port[port].cfg.name : NULL;
}

void op_sw_path_counters(const struct op_sw_path *p, int port, uint64_t out[OP_SW_PATH_C_COUNT_])
{
    const struct sw_port *pt = &p->port[port];
    memcpy(out, pt->c, sizeof pt->c);
    uint64_t fc[OP_FAULT_C_COUNT_], xc[OP_IO_XDP_C_COUNT_];
    op_io_fault_counters(pt->io, fc);
    out[OP_SW_PATH_C_injected_drops] += fc[OP_FAULT_C_dropped];
    out[OP_SW_PATH_C_injected_dups] = fc[OP_FAULT_C_duplicated];
    if (pt->base != NULL) {
        op_io_xdp_counters(pt->base, xc);
        out[OP_SW_PATH_C_rx_ring_lost] = xc[OP_IO_XDP_C_rx_ring_full] + xc[OP_IO_XDP_C_rx_kernel_dropped];
    }
}

static const char *const path_counter_names[] = {OP_SW_PATH_COUNTERS(OP_COUNTER_NAME)};

const char *op_sw_path_counter_name(unsigned c)
{
    return op_counter_name(path_counter_names, OP_SW_PATH_C_COUNT_, c);
}

void op_sw_path_print(const struct op_sw_path *p, FILE *out, bool json)
{
    uint64_t v[OP_SW_PATH_C_COUNT_];
    const struct op_counter_set set = {.names = path_counter_names, .vals = v,
                                       .n = OP_SW_PATH_C_COUNT_};
    if (json)
        fputs("{", out);
    for (int i = 0; i < p->cfg.n_ports; i++) {
        op_sw_path_counters(p, i, v);
        if (json) {
            fprintf(out, "%s\"%s\": {", i ? ", " : "", p->port[i].cfg.name);
            op_counter_set_print(out, &set, OP_COUNTERS_JSON);
            fprintf(out, "}");
        } else {
            fprintf(out, "port %s counters:\n", p->port[i].cfg.name);
            op_counter_set_print(out, &set, OP_COUNTERS_TABLE);
        }
    }
    if (json)
        fputs("}", out);
}
