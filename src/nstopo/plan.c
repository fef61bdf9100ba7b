/* From a topology to the ip(8) and tc(8) commands that build it: one
 * namespace a node, one veth pair a link (each end named after the node at
 * its other end), the node's address on every one of its ends as a /32, a
 * tbf on every end, and /32 routes along shortest paths (equal-cost ones as
 * multipath), so the kernel forwards in TORs and SPINEs until the switch's
 * --ports takes forwarding over. */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "offpath/nstopo.h"

/* The longest command is a multipath route: 7 words, then 6 a next hop of
 * at most 8 + 40 + 4 + 16 + 7 + 7 bytes. */
#define CMD_WORDS 64
#define CMD_BYTES 1024
_Static_assert(7 + 6 * OP_NSTOPO_MAX_PATHS < CMD_WORDS, "room for every next hop");
_Static_assert(128 + 82 * OP_NSTOPO_MAX_PATHS < CMD_BYTES, "room for every next hop");

struct cmd {
    const char *argv[CMD_WORDS];
    char buf[CMD_BYTES];
    int argc;
    size_t used;
};

static void word(struct cmd *c, const char *fmt, ...) OP_PRINTF(2, 3);
static void word(struct cmd *c, const char *fmt, ...)
{
    if (c->argc == CMD_WORDS - 1 || c->used >= sizeof(c->buf))
        return; /* bounded by the topology's limits, which stay well inside */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->buf + c->used, sizeof(c->buf) - c->used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(c->buf) - c->used)
        return;
    c->argv[c->argc++] = c->buf + c->used;
    c->argv[c->argc] = NULL;
    c->used += (size_t)n + 1;
}

static void start(struct cmd *c, const char *tool, const struct op_nstopo *t, int node)
{
    char ns[64];
    c->argc = 0;
    c->used = 0;
    op_nstopo_netns(t, node, ns, sizeof(ns));
    word(c, "%s", tool);
    word(c, "-n");
    word(c, "%s", ns);
}

uint32_t op_nstopo_mtu(const struct op_nstopo *t)
{
    return t->mtu != 0 ? t->mtu : OP_NSTOPO_MTU_DEFAULT;
}

/* A program that has no -n of its own, run in node's namespace. */
static void start_exec(struct cmd *c, const char *program, const struct op_nstopo *t, int node)
{
    char ns[64];
    c->argc = 0;
    c->used = 0;
    op_nstopo_netns(t, node, ns, sizeof(ns));
    word(c, "ip");
    word(c, "netns");
    word(c, "exec");
    word(c, "%s", ns);
    word(c, "%s", program);
}

void op_nstopo_ip4(uint32_t ip, char out[16])
{
    snprintf(out, 16, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

uint32_t op_nstopo_burst(uint64_t rate_bps)
{
    uint64_t ms = rate_bps / 8 / 1000;
    return ms < 16384 ? 16384 : (uint32_t)(ms > (64u << 20) ? (64u << 20) : ms);
}

/* Hop counts from src to every node, never passing through a host. */
static void bfs(const struct op_nstopo *t, int src, int *dist)
{
    int queue[OP_NSTOPO_MAX_NODES], head = 0, tail = 0;
    for (int i = 0; i < t->n_nodes; i++)
        dist[i] = -1;
    dist[src] = 0;
    queue[tail++] = src;
    while (head < tail) {
        int u = queue[head++];
        if (u != src && t->nodes[u].role == OP_NSTOPO_HOST)
            continue;
        for (int i = 0; i < t->n_links; i++) {
            const struct op_nstopo_link *l = &t->links[i];
            int v = l->a == u ? l->b : l->b == u ? l->a : -1;
            if (v >= 0 && dist[v] < 0) {
                dist[v] = dist[u] + 1;
                queue[tail++] = v;
            }
        }
    }
}

int op_nstopo_next_hops(const struct op_nstopo *t, int u, int v, uint16_t out[OP_NSTOPO_MAX_PATHS])
{
    int dist[OP_NSTOPO_MAX_NODES];
    int n = 0;
    bfs(t, v, dist); /* distances to v: a neighbour one hop closer is a next hop */
    if (u == v || dist[u] < 0)
        return 0;
    for (int i = 0; i < t->n_links && n < OP_NSTOPO_MAX_PATHS; i++) {
        const struct op_nstopo_link *l = &t->links[i];
        int w = l->a == u ? l->b : l->b == u ? l->a : -1;
        bool transit_ok = w == v || t->nodes[w < 0 ? 0 : w].role != OP_NSTOPO_HOST;
        if (w >= 0 && transit_ok && dist[w] == dist[u] - 1)
            out[n++] = (uint16_t)w;
    }
    return n;
}

static bool emit_nodes(const struct op_nstopo *t, op_nstopo_emit_fn emit, void *ctx)
{
    struct cmd c;
    for (int i = 0; i < t->n_nodes; i++) {
        char ns[64];
        op_nstopo_netns(t, i, ns, sizeof(ns));
        c.argc = 0;
        c.used = 0;
        word(&c, "ip");
        word(&c, "netns");
        word(&c, "add");
        word(&c, "%s", ns);
        if (!emit(c.argc, c.argv, ctx))
            return false;
        start(&c, "ip", t, i);
        word(&c, "link");
        word(&c, "set");
        word(&c, "lo");
        word(&c, "up");
        if (!emit(c.argc, c.argv, ctx))
            return false;
        /* Routed ends with ECMP: strict reverse-path filtering would drop
         * replies that come back over the other spine. */
        start_exec(&c, "sysctl", t, i);
        word(&c, "-q");
        word(&c, "-w");
        word(&c, "net.ipv4.conf.all.rp_filter=0");
        word(&c, "net.ipv4.conf.default.rp_filter=0");
        word(&c, "net.ipv4.ip_forward=%d", t->nodes[i].role != OP_NSTOPO_HOST);
        if (t->ip6) {
            word(&c, "net.ipv6.conf.all.forwarding=%d", t->nodes[i].role != OP_NSTOPO_HOST);
            /* Duplicate address detection holds a new link's link-local
             * address for a second, and neighbour discovery waits on it */
            word(&c, "net.ipv6.conf.default.accept_dad=0");
        }
        if (!emit(c.argc, c.argv, ctx))
            return false;
    }
    return true;
}

/* A veth hands its peer packets whose checksum the sender left to the
 * device (checksum offload): the kernel's own forwarding copes, but a
 * switch on the path reads frames through AF_XDP and would forward them
 * unfinished. Every end computes its checksums itself. */
static bool emit_csum_off(const struct op_nstopo *t, int self, int peer, op_nstopo_emit_fn emit,
                          void *ctx)
{
    struct cmd c;
    start_exec(&c, "ethtool", t, self);
    word(&c, "-K");
    word(&c, "%s", t->nodes[peer].name);
    word(&c, "tx");
    word(&c, "off");
    return emit(c.argc, c.argv, ctx);
}

/* One end of a link: the node's address, up, checksums computed, and the
 * link's rate and queue. */
static bool emit_end(const struct op_nstopo *t, const struct op_nstopo_link *l, int self,
                     int peer, op_nstopo_emit_fn emit, void *ctx)
{
    struct cmd c;
    char a[16];
    op_nstopo_ip4(t->nodes[self].ip, a);
    start(&c, "ip", t, self);
    word(&c, "addr");
    word(&c, "add");
    word(&c, "%s/32", a);
    word(&c, "dev");
    word(&c, "%s", t->nodes[peer].name);
    if (!emit(c.argc, c.argv, ctx))
        return false;
    if (t->ip6) {
        char a6[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, t->nodes[self].ip6, a6, sizeof(a6));
        start(&c, "ip", t, self);
        word(&c, "addr");
        word(&c, "add");
        word(&c, "%s/128", a6);
        word(&c, "dev");
        word(&c, "%s", t->nodes[peer].name);
        word(&c, "nodad"); /* the same address on every end: usable at once */
        if (!emit(c.argc, c.argv, ctx))
            return false;
    }
    start(&c, "ip", t, self);
    word(&c, "link");
    word(&c, "set");
    word(&c, "%s", t->nodes[peer].name);
    if (t->mtu != 0) {
        word(&c, "mtu");
        word(&c, "%u", t->mtu);
    }
    word(&c, "up");
    if (!emit(c.argc, c.argv, ctx) || !emit_csum_off(t, self, peer, emit, ctx))
        return false;
    start(&c, "tc", t, self);
    word(&c, "qdisc");
    word(&c, "add");
    word(&c, "dev");
    word(&c, "%s", t->nodes[peer].name);
    word(&c, "root");
    word(&c, "tbf");
    word(&c, "rate");
    word(&c, "%llubit", (unsigned long long)l->rate_bps);
    word(&c, "burst");
    word(&c, "%u", op_nstopo_burst(l->rate_bps));
    word(&c, "limit");
    word(&c, "%u", l->queue);
    return emit(c.argc, c.argv, ctx);
}

static bool emit_links(const struct op_nstopo *t, op_nstopo_emit_fn emit, void *ctx)
{
    struct cmd c;
    for (int i = 0; i < t->n_links; i++) {
        const struct op_nstopo_link *l = &t->links[i];
        char na[64], nb[64];
        op_nstopo_netns(t, l->a, na, sizeof(na));
        op_nstopo_netns(t, l->b, nb, sizeof(nb));
        c.argc = 0;
        c.used = 0;
        /* Both ends made inside their namespaces: nothing of ours ever
         * appears in the root namespace, so removing the namespaces removes
         * every veth. */
        word(&c, "ip");
        word(&c, "link");
        word(&c, "add");
        word(&c, "%s", t->nodes[l->b].name);
        word(&c, "netns");
        word(&c, "%s", na);
        word(&c, "type");
        word(&c, "veth");
        word(&c, "peer");
        word(&c, "name");
        word(&c, "%s", t->nodes[l->a].name);
        word(&c, "netns");
        word(&c, "%s", nb);
        if (!emit(c.argc, c.argv, ctx) || !emit_end(t, l, l->a, l->b, emit, ctx) ||
            !emit_end(t, l, l->b, l->a, emit, ctx))
            return false;
    }
    return true;
}

/* A node's address of one family, as text. */
static void addr_of(const struct op_nstopo *t, int node, bool v6, char out[INET6_ADDRSTRLEN])
{
    if (v6)
        inet_ntop(AF_INET6, t->nodes[node].ip6, out, INET6_ADDRSTRLEN);
    else
        op_nstopo_ip4(t->nodes[node].ip, out);
}

static bool emit_route(const struct op_nstopo *t, int u, int v, bool v6, op_nstopo_emit_fn emit,
                       void *ctx)
{
    uint16_t hops[OP_NSTOPO_MAX_PATHS];
    int n = op_nstopo_next_hops(t, u, v, hops);
    if (n == 0)
        return true; /* unreachable (a disconnected part): no route */
    struct cmd c;
    char a[INET6_ADDRSTRLEN];
    addr_of(t, v, v6, a);
    start(&c, "ip", t, u);
    if (v6)
        word(&c, "-6");
    word(&c, "route");
    word(&c, "add");
    word(&c, "%s/%d", a, v6 ? 128 : 32);
    if (n == 1 && hops[0] == v) {
        word(&c, "dev");
        word(&c, "%s", t->nodes[v].name);
        return emit(c.argc, c.argv, ctx);
    }
    for (int i = 0; i < n; i++) {
        if (n > 1)
            word(&c, "nexthop");
        addr_of(t, hops[i], v6, a);
        word(&c, "via");
        word(&c, "%s", a);
        word(&c, "dev");
        word(&c, "%s", t->nodes[hops[i]].name);
        word(&c, "onlink");
    }
    return emit(c.argc, c.argv, ctx);
}

bool op_nstopo_plan(const struct op_nstopo *t, op_nstopo_emit_fn emit, void *ctx)
{
    if (!emit_nodes(t, emit, ctx) || !emit_links(t, emit, ctx))
        return false;
    for (int u = 0; u < t->n_nodes; u++)
        for (int v = 0; v < t->n_nodes; v++)
            if (u != v && (!emit_route(t, u, v, false, emit, ctx) ||
                           (t->ip6 && !emit_route(t, u, v, true, emit, ctx))))
                return false;
    return true;
}
