/* mpirun --topo: the job's namespace topology, built for the job unless it
 * stands already, and its switches started inside their nodes' namespaces. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch_internal.h"
#include "offpath/wire.h"

#define IPV4_UDP_LEN 28

uint16_t launch_data_fits(uint32_t mtu)
{
    uint32_t data = (mtu - IPV4_UDP_LEN - OP_INC_PREFIX_LEN - OP_ICRC_LEN) & ~7u;
    return (uint16_t)(data < OP_INC_MAX_DATA ? data : OP_INC_MAX_DATA);
}

static int count_hosts(const struct op_nstopo *t)
{
    int n = 0;
    while (launch_host_node(t, n) >= 0)
        n++;
    return n;
}

/* The longest prefix every host's IPv4 address shares, as a.b.c.d/len. */
void launch_hosts_cidr(const struct op_nstopo *t, char *out, size_t len)
{
    uint32_t first = t->nodes[launch_host_node(t, 0)].ip, differ = 0;
    for (int k = 0, i; (i = launch_host_node(t, k)) >= 0; k++)
        differ |= t->nodes[i].ip ^ first;
    int bits = differ == 0 ? 32 : __builtin_clz(differ);
    uint32_t mask = bits == 0 ? 0 : ~0u << (32 - bits);
    char ip[16];
    op_nstopo_ip4(first & mask, ip);
    snprintf(out, len, "%s/%d", ip, bits);
}

static bool write_switches(const struct op_nstopo *t, const char *path)
{
    static char text[16384];
    char err[256];
    if (op_nstopo_switches(t, text, sizeof(text), err, sizeof(err)) != OP_OK) {
        fprintf(stderr, "offpath mpirun: --topo: %s\n", err);
        return false;
    }
    FILE *f = fopen(path, "w");
    bool ok = f != NULL && fputs(text, f) >= 0;
    if (f != NULL && fclose(f) != 0)
        ok = false;
    if (!ok)
        fprintf(stderr, "offpath mpirun: cannot write %s: %s\n", path, strerror(errno));
    return ok;
}

static bool is_up(const struct op_nstopo *t)
{
    char state[256];
    op_nstopo_state_path(t, NULL, state, sizeof(state));
    return access(state, F_OK) == 0;
}

int launch_ns_open(struct launch_ns *ns, struct op_launch_config *cfg, const char *fabric_path)
{
    char err[256];
    struct op_nstopo_stats stats = {0};
    if (realpath(cfg->topo, ns->file) == NULL) {
        fprintf(stderr, "offpath mpirun: --topo %s: %s\n", cfg->topo, strerror(errno));
        return 2;
    }
    if (op_nstopo_load(ns->file, &ns->t, &stats, err, sizeof(err)) != OP_OK) {
        fprintf(stderr, "offpath mpirun: --topo %s: %s (%u malformed of %u lines)\n", cfg->topo,
                err, stats.malformed, stats.lines);
        return 2;
    }
    int hosts = count_hosts(&ns->t);
    if (cfg->nodes > hosts) {
        fprintf(stderr, "offpath mpirun: --nodes %d is more than the %d hosts of --topo %s\n",
                cfg->nodes, hosts, cfg->topo);
        return 2;
    }
    if (cfg->nodes == 0)
        cfg->nodes = hosts;
    launch_hosts_cidr(&ns->t, ns->hosts_cidr, sizeof(ns->hosts_cidr));
    uint32_t mtu = op_nstopo_mtu(&ns->t);
    if (cfg->max_data == 0)
        cfg->max_data = launch_data_fits(mtu); /* the largest chunk the links carry whole */
    if (cfg->max_data > launch_data_fits(mtu)) {
        if (cfg->verbose && (cfg->mode == OP_MODE_NODE || cfg->mode == OP_MODE_SOCKET))
            fprintf(stderr, "offpath mpirun: --max-data %u: %u bytes fit the links' %u-byte MTU\n",
                    cfg->max_data, launch_data_fits(mtu), mtu);
        cfg->max_data = launch_data_fits(mtu);
    }
    if (!write_switches(&ns->t, fabric_path))
        return 2;
    if (!is_up(&ns->t)) {
        if (op_nstopo_up(&ns->t, NULL, false) != 0) {
            unlink(fabric_path);
            return 1;
        }
        ns->brought_up = true;
    }
    return 0;
}

void launch_ns_close(struct launch_ns *ns)
{
    if (ns->brought_up && op_nstopo_down(&ns->t, NULL) != 0)
        fprintf(stderr, "offpath mpirun: could not take topology %s down: offpath topo down %s\n",
                ns->t.name, ns->file);
    ns->brought_up = false;
}

struct switch_ns {
    struct launch_ns *ns;
    const struct op_topo *topo;
};

/* In switch sw's process: into its node's namespace, where its links are. */
static op_status_t enter_switch(int sw, void *ctx)
{
    const struct switch_ns *s = ctx;
    char err[300];
    int node = op_nstopo_find(&s->ns->t, s->topo->sw[sw].name);
    op_status_t st = node >= 0 ? op_nstopo_enter(&s->ns->t, node, err, sizeof(err))
                               : OP_ERR_INVAL;
    if (node < 0)
        snprintf(err, sizeof(err), "no node %s in the topology", s->topo->sw[sw].name);
    if (st != OP_OK)
        fprintf(stderr, "offpath mpirun: switch %s: %s\n", s->topo->sw[sw].name, err);
    return st;
}

/* In switch sw's process, in its namespace: on the path of its node's
 * links (`switch --ports all`), the job's faults on every port of the one
 * switch that injects them, and the links' own from the file. */
static op_status_t path_switch(int sw, struct op_sw_run_config *rc, void *ctx)
{
    const struct switch_ns *s = ctx;
    char err[300];
    /* the child's own: it lives as long as the switch, which exits */
    struct op_sw_path_config *path = calloc(1, sizeof(*path));
    int node = op_nstopo_find(&s->ns->t, s->topo->sw[sw].name);
    op_status_t st = path != NULL ? op_sw_path_from_net(&s->ns->t, node, "all", path, err,
                                                        sizeof(err))
                                  : OP_ERR_NOMEM;
    if (st != OP_OK) {
        fprintf(stderr, "offpath mpirun: switch %s: %s\n", s->topo->sw[sw].name,
                path != NULL ? err : "no memory");
        free(path);
        return st;
    }
    for (int i = 0; i < path->n_ports; i++) {
        struct op_sw_port_config *p = &path->ports[i];
        p->drop_rate = rc->drop_rate > p->drop_rate ? rc->drop_rate : p->drop_rate;
        p->dup_rate = rc->dup_rate;
    }
    path->seed = rc->sw.seed;
    path->inc_port = s->topo->sw[sw].port;
    rc->drop_rate = rc->dup_rate = 0;
    rc->path = path;
    return OP_OK;
}

op_status_t launch_ns_switches(struct launch_ns *ns, struct op_fabric_opts *o,
                               const struct op_topo *topo, struct op_fabric **out, char *err,
                               size_t errlen)
{
    struct switch_ns ctx = {.ns = ns, .topo = topo};
    o->enter = enter_switch;
    o->configure = path_switch;
    o->enter_ctx = &ctx; /* read by the forked switches only, before start returns */
    op_status_t st = op_fabric_start(o, topo, out, err, errlen);
    o->enter = NULL;
    o->configure = NULL;
    o->enter_ctx = NULL;
    return st;
}
