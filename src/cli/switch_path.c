/* `offpath switch`: the switch on the path (--ports), its ports opened as
 * DPDK's (--dpdk), and the fault flags that take a link down or lose
 * frames on a port. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "switch_flags.h"

static const char *const tool = "switch";

/* WHO@AFTER+FOR, the times in milliseconds; WHO an IP or a port. WHO@inc:N+FOR
 * (at_inc): from the N-th INC packet the port receives. */
static bool parse_link_down(const char *val, char *who, size_t cap, uint64_t *after,
                            uint64_t *span, bool *at_inc)
{
    const char *at = strchr(val, '@'), *plus = at != NULL ? strchr(at, '+') : NULL;
    char num[32];
    if (at == NULL || plus == NULL || (size_t)(at - val) >= cap ||
        (size_t)(plus - at - 1) >= sizeof(num))
        return false;
    memcpy(who, val, (size_t)(at - val));
    who[at - val] = '\0';
    memcpy(num, at + 1, (size_t)(plus - at - 1));
    num[plus - at - 1] = '\0';
    *at_inc = strncmp(num, "inc:", 4) == 0;
    return op_parse_u64(num + (*at_inc ? 4 : 0), *at_inc ? 1 : 0, 86400000, after) == OP_OK &&
           op_parse_u64(plus + 1, 1, 86400000, span) == OP_OK;
}

/* The link to a host (IP@T+D), or on the path a port (IF@T+D or
 * IF@inc:N+D), down. */
bool switch_link_down(const char *val, struct op_sw_run_config *rc,
                      struct op_sw_path_config *path)
{
    char who[32];
    uint64_t after, span;
    uint16_t port = 0;
    int i = -1;
    bool at_inc = false;
    bool ok = parse_link_down(val, who, sizeof(who), &after, &span, &at_inc) &&
              (path != NULL ? (i = op_sw_path_port_find(path, who)) >= 0
                            : !at_inc && op_parse_ipv4(who, &rc->link_down_ip, &port) == OP_OK &&
                                  port == 0);
    if (!ok) {
        cli_bad(tool, "invalid value '%s' for --link-down (expected %s)", val,
                path != NULL ? "a port's IF@AFTER_MS+FOR_MS or IF@inc:N+FOR_MS"
                             : "IP@AFTER_MS+FOR_MS");
        return false;
    }
    if (path != NULL) {
        path->ports[i].down_after_ms = at_inc ? 0 : (uint32_t)after;
        path->ports[i].down_at_inc = at_inc ? (uint32_t)after : 0;
        path->ports[i].down_for_ms = (uint32_t)span;
        return true;
    }
    rc->link_down_after_ms = (uint32_t)after;
    rc->link_down_for_ms = (uint32_t)span;
    return true;
}

/* On the path the fault flags act on the ports: all of them, or one. */
static bool port_faults(const struct sw_flags *f, struct op_sw_run_config *rc,
                        struct op_sw_path_config *path)
{
    for (int i = 0; i < path->n_ports; i++) {
        path->ports[i].drop_rate = rc->drop_rate;
        path->ports[i].dup_rate = rc->dup_rate;
        path->ports[i].delay_us = rc->delay_us;
    }
    for (int k = 0; k < f->n_loss; k++) {
        char *eq = strchr(f->losses[k], '=');
        int i = -1;
        if (eq != NULL) {
            *eq = '\0';
            i = op_sw_path_port_find(path, f->losses[k]);
            *eq = '=';
        }
        if (i < 0 || !cli_rate(tool, "--port-loss", eq + 1, &path->ports[i].drop_rate)) {
            if (i < 0)
                cli_bad(tool, "invalid value '%s' for --port-loss (expected IF=P, IF a port)",
                        f->losses[k]);
            return false;
        }
    }
    rc->drop_rate = rc->dup_rate = 0;
    rc->delay_us = 0;
    return f->link_down == NULL || switch_link_down(f->link_down, rc, path);
}

bool switch_load_path(const struct sw_flags *f, struct op_sw_run_config *rc,
                      struct op_topo *topo, struct op_sw_path_config *path)
{
    char err[300];
    if (f->topology == NULL || f->name == NULL) {
        cli_bad(tool, "--ports wants --topology NET --name NAME");
        return false;
    }
    if (op_sw_path_load(f->topology, f->name, f->ports, topo, &rc->sw.self, path, err,
                        sizeof(err)) != OP_OK) {
        cli_bad(tool, "invalid value for --topology/--name/--ports: %s", err);
        return false;
    }
    path->busy_poll = rc->busy_poll;
    path->seed = rc->sw.seed;
    for (int i = 0; f->no_shape && i < path->n_ports; i++)
        path->ports[i].rate_bps = 0;
    uint64_t ecn = 0;
    if (f->ecn != NULL && strcmp(f->ecn, "off") != 0 &&
        !cli_u64(tool, "--ecn", f->ecn, 1, UINT32_MAX, &ecn))
        return false;
    for (int i = 0; f->ecn != NULL && i < path->n_ports; i++)
        path->ports[i].ecn_bytes = (uint32_t)ecn;
    rc->path = path;
    return port_faults(f, rc, path);
}


#ifdef OP_HAVE_DPDK
#define MAX_EAL_ARGS 64
#define DPDK_MBUFS 16383 /* a port's pool: its rings full, bursts in flight */

struct sw_dpdk {
    char *text; /* --dpdk's copy, split in place into argv */
    char *argv[MAX_EAL_ARGS];
    struct op_io_dpdk *port[OP_SW_MAX_PORTS];
    int n;
    bool eal;
};

static bool split_eal(struct sw_dpdk *d, const char *args, int *argc)
{
    char *save = NULL;
    *argc = 0;
    if ((d->text = strdup(args)) == NULL)
        return false;
    for (char *w = strtok_r(d->text, " \t", &save); w != NULL; w = strtok_r(NULL, " \t", &save)) {
        if (*argc == MAX_EAL_ARGS)
            return false;
        d->argv[(*argc)++] = w;
    }
    return true;
}

/* The DPDK port for the path's port called name, the i-th of --ports:
 * the one whose iface= names it where the devices name interfaces (vdevs),
 * else the i-th the EAL found (PCI devices). -1: none. */
static int dpdk_port_for(const struct sw_dpdk *d, const char *name, int i)
{
    char dev[64], iface[64];
    bool named = false;
    for (int k = 0; k < d->n; k++) {
        op_io_dpdk_port_names(d->port[k], dev, iface, sizeof iface);
        if (iface[0] != '\0' && strcmp(iface, name) == 0)
            return k;
        named |= iface[0] != '\0';
    }
    return named ? -1 : i;
}

static bool dpdk_queues(struct sw_dpdk *d, struct op_sw_path_config *path)
{
    for (int i = 0; i < path->n_ports; i++) {
        int k = dpdk_port_for(d, path->ports[i].name, i);
        if (k < 0) {
            cli_bad(tool, "invalid value for --dpdk: no DPDK port has iface=%s (a port of --ports)",
                    path->ports[i].name);
            return false;
        }
        if (op_io_dpdk_queue_open(d->port[k], 0, &path->ports[i].io) != OP_OK) {
            cli_bad(tool, "--dpdk: cannot open queue 0 of DPDK port %d", k);
            return false;
        }
    }
    return true;
}

static bool dpdk_ports(struct sw_flags *f, struct sw_dpdk *d, struct op_sw_path_config *path)
{
    char err[300];
    int argc;
    if (!split_eal(d, f->dpdk, &argc)) {
        cli_bad(tool, "invalid value '%s' for --dpdk (more than %d arguments)", f->dpdk,
                MAX_EAL_ARGS);
        return false;
    }
    struct op_io_dpdk_config c = {.name = "offpath-switch", .n_eal_args = argc, .eal_args = d->argv,
                                  .queues = 1, .mbufs = DPDK_MBUFS, .mbuf_cache = 256,
                                  .rx_desc = 1024, .tx_desc = 1024};
    sigset_t sigs; /* the EAL's threads inherit the mask: the stop signals stay the switch's */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    if (op_io_dpdk_eal_init(&c, err, sizeof err) != OP_OK) {
        cli_bad(tool, "invalid value '%s' for --dpdk: %s", f->dpdk, err);
        return false;
    }
    d->eal = true;
    if (op_io_dpdk_ports() != (unsigned)path->n_ports) {
        cli_bad(tool, "invalid value '%s' for --dpdk: the EAL found %u ports for the %d of --ports "
                "(a --vdev or -a each)", f->dpdk, op_io_dpdk_ports(), path->n_ports);
        return false;
    }
    for (c.port = 0; c.port < (unsigned)path->n_ports; c.port++)
        if (op_io_dpdk_port_open(&c, &d->port[d->n++], err, sizeof err) != OP_OK) {
            cli_bad(tool, "--dpdk: DPDK port %u: %s", c.port, err);
            return false;
        }
    return dpdk_queues(d, path);
}

bool switch_dpdk_open(struct sw_flags *f, struct op_sw_path_config *path)
{
    if (f->dpdk == NULL)
        return true;
    if ((f->dpdk_ports = calloc(1, sizeof *f->dpdk_ports)) == NULL)
        return false;
    if (dpdk_ports(f, f->dpdk_ports, path))
        return true;
    for (int i = 0; i < path->n_ports; i++) { /* not handed to a path: ours to close */
        op_io_close(path->ports[i].io);
        path->ports[i].io = NULL;
    }
    return false;
}

void switch_dpdk_close(struct sw_flags *f)
{
    struct sw_dpdk *d = f->dpdk_ports;
    if (d == NULL)
        return;
    for (int k = 0; k < d->n; k++)
        op_io_dpdk_close(d->port[k]);
    if (d->eal)
        op_io_dpdk_eal_cleanup();
    free(d->text);
    free(d);
    f->dpdk_ports = NULL;
}
#else
bool switch_dpdk_open(struct sw_flags *f, struct op_sw_path_config *path)
{
    (void)path;
    if (f->dpdk != NULL)
        cli_bad(tool, "--dpdk: this build has no DPDK (install libdpdk-dev, rebuild)");
    return f->dpdk == NULL;
}

void switch_dpdk_close(struct sw_flags *f) { (void)f; }
#endif
