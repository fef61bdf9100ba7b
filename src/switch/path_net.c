/* A switch's path from a namespace topology (offpath/nstopo.h): the ports
 * of its links, each with the link's rate and queue, and a route to every
 * other node over the ports of its shortest paths, the same next hops
 * `offpath topo up` gives the kernel's tables. Pure: a file in, a
 * configuration out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/nstopo.h"
#include "offpath/switch.h"

/* The link between nodes a and b; NULL if none. */
static const struct op_nstopo_link *link_of(const struct op_nstopo *t, int a, int b)
{
    for (int i = 0; i < t->n_links; i++) {
        const struct op_nstopo_link *l = &t->links[i];
        if ((l->a == a && l->b == b) || (l->a == b && l->b == a))
            return l;
    }
    return NULL;
}

static op_status_t add_port(const struct op_nstopo *t, int self, const char *ifname, int peer,
                            struct op_sw_path_config *c, int peer_of[], char *err, size_t errlen)
{
    const struct op_nstopo_link *l = peer >= 0 ? link_of(t, self, peer) : NULL;
    if (l == NULL) {
        snprintf(err, errlen, "port %s: its peer is no node linked to %s", ifname,
                 t->nodes[self].name);
        return OP_ERR_INVAL;
    }
    for (int i = 0; i < c->n_ports; i++)
        if (peer_of[i] == peer || strcmp(c->ports[i].name, ifname) == 0) {
            snprintf(err, errlen, "port %s: its interface or peer given twice", ifname);
            return OP_ERR_INVAL;
        }
    if (c->n_ports == OP_SW_MAX_PORTS || strlen(ifname) >= sizeof c->ports[0].name) {
        snprintf(err, errlen, "port %s: too many ports or too long a name", ifname);
        return OP_ERR_INVAL;
    }
    struct op_sw_port_config *pc = &c->ports[c->n_ports];
    memset(pc, 0, sizeof *pc);
    snprintf(pc->name, sizeof pc->name, "%s", ifname);
    pc->peer4 = op_addr_ipv4(t->nodes[peer].ip);
    if (t->ip6)
        pc->peer6 = op_addr_ipv6(t->nodes[peer].ip6);
    pc->rate_bps = l->rate_bps;
    pc->queue_bytes = l->queue;
    pc->burst_bytes = op_nstopo_burst(l->rate_bps);
    pc->ecn_bytes = l->queue / 8; /* 32 KiB of the default 256: 0.26 ms at 1 Gbit/s */
    /* the link's faults each way: the peer's direction here too when the
     * peer is a host, which has no injector */
    pc->drop_rate = l->loss;
    pc->delay_us = l->delay_us;
    pc->down_after_ms = l->down_after_ms;
    pc->down_for_ms = l->down_for_ms;
    pc->down_at_inc = l->down_at_inc;
    if (t->nodes[peer].role == OP_NSTOPO_HOST)
        pc->rx_drop_rate = l->loss;
    peer_of[c->n_ports++] = peer;
    return OP_OK;
}

/* IF or IF=PEER, comma separated; "all": every link, named after the peer. */
static op_status_t add_ports(const struct op_nstopo *t, int self, const char *list,
                             struct op_sw_path_config *c, int peer_of[], char *err, size_t errlen)
{
    op_status_t st = OP_OK;
    if (strcmp(list, "all") == 0) {
        for (int i = 0; i < t->n_links && st == OP_OK; i++) {
            const struct op_nstopo_link *l = &t->links[i];
            int peer = l->a == self ? l->b : l->b == self ? l->a : -1;
            if (peer >= 0)
                st = add_port(t, self, t->nodes[peer].name, peer, c, peer_of, err, errlen);
        }
        return st;
    }
    char item[64];
    for (const char *p = list; st == OP_OK && *p != '\0';) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof item) {
            snprintf(err, errlen, "'%.*s': IF or IF=PEER expected", (int)n, p);
            return OP_ERR_INVAL;
        }
        memcpy(item, p, n);
        item[n] = '\0';
        char *eq = strchr(item, '=');
        if (eq != NULL)
            *eq++ = '\0';
        int peer = op_nstopo_find(t, eq != NULL ? eq : item);
        st = add_port(t, self, item, peer, c, peer_of, err, errlen);
        p += n + (p[n] == ',');
    }
    return st;
}

static op_status_t add_route(const struct op_nstopo *t, int self, int v, bool v6,
                             struct op_sw_path_config *c, const int peer_of[], char *err,
                             size_t errlen)
{
    uint16_t hops[OP_NSTOPO_MAX_PATHS];
    int n = op_nstopo_next_hops(t, self, v, hops);
    if (n == 0)
        return OP_OK; /* another part of the graph: no route, as topo up */
    struct op_sw_route *r = &c->routes[c->n_routes];
    r->dst = v6 ? op_addr_ipv6(t->nodes[v].ip6) : op_addr_ipv4(t->nodes[v].ip);
    r->n_ports = 0;
    for (int h = 0; h < n && h < OP_SW_MAX_PATHS; h++) {
        int port = -1;
        for (int i = 0; i < c->n_ports; i++)
            port = peer_of[i] == hops[h] ? i : port;
        if (port < 0) {
            snprintf(err, errlen, "no port towards %s (the way to %s): add it to --ports",
                     t->nodes[hops[h]].name, t->nodes[v].name);
            return OP_ERR_INVAL;
        }
        r->ports[r->n_ports++] = (uint8_t)port;
    }
    c->n_routes++;
    return OP_OK;
}

op_status_t op_sw_path_from_net(const struct op_nstopo *t, int self, const char *list,
                                struct op_sw_path_config *c, char *err, size_t errlen)
{
    int peer_of[OP_SW_MAX_PORTS];
    if (self < 0 || self >= t->n_nodes || list == NULL) {
        snprintf(err, errlen, "no such node");
        return OP_ERR_INVAL;
    }
    c->own4 = op_addr_ipv4(t->nodes[self].ip);
    c->inc_port = OP_ROCE_UDP_PORT; /* the fabric's, unless a caller's topology says another */
    c->own6 = t->ip6 ? op_addr_ipv6(t->nodes[self].ip6) : (struct op_addr){0};
    c->n_ports = c->n_routes = 0;
    op_status_t st = add_ports(t, self, list, c, peer_of, err, errlen);
    for (int v = 0; v < t->n_nodes && st == OP_OK; v++) {
        if (v == self)
            continue;
        st = add_route(t, self, v, false, c, peer_of, err, errlen);
        if (st == OP_OK && t->ip6)
            st = add_route(t, self, v, true, c, peer_of, err, errlen);
    }
    return st;
}

int op_sw_path_port_find(const struct op_sw_path_config *c, const char *name)
{
    for (int i = 0; i < c->n_ports; i++)
        if (strcmp(c->ports[i].name, name) == 0)
            return i;
    return -1;
}

static op_status_t fabric_of(const struct op_nstopo *t, const char *name, struct op_topo *topo,
                             int *self, char *err, size_t errlen)
{
    char text[8192], why[256];
    op_status_t st = op_nstopo_switches(t, text, sizeof text, why, sizeof why);
    if (st == OP_OK && (st = op_topo_parse(text, topo, why, sizeof why)) == OP_OK &&
        (*self = op_topo_find(topo, name)) < 0) {
        snprintf(err, errlen, "%s is no TOR or SPINE of the topology", name);
        return OP_ERR_INVAL;
    }
    if (st != OP_OK)
        snprintf(err, errlen, "the switches of the topology: %s", why);
    return st;
}

op_status_t op_sw_path_load(const char *file, const char *name, const char *list,
                            struct op_topo *topo, int *self, struct op_sw_path_config *c,
                            char *err, size_t errlen)
{
    struct op_nstopo *t = calloc(1, sizeof *t);
    if (t == NULL)
        return OP_ERR_NOMEM;
    op_status_t st = op_nstopo_load(file, t, NULL, err, errlen);
    if (st == OP_OK)
        st = fabric_of(t, name, topo, self, err, errlen);
    if (st == OP_OK)
        st = op_sw_path_from_net(t, op_nstopo_find(t, name), list, c, err, errlen);
    if (st == OP_OK)
        c->inc_port = topo->sw[*self].port;
    free(t);
    return st;
}
