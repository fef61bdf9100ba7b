/* `offpath switch`: the switch on the path (--ports) and the fault flags
 * that take a link down or lose frames on a port. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "switch_flags.h"

static const char *const tool = "switch";

/* WHO@AFTER+FOR, the times in milliseconds; WHO an IP or a port. */
static bool parse_link_down(const char *val, char *who, size_t cap, uint64_t *after,
                            uint64_t *span)
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
    return op_parse_u64(num, 0, 86400000, after) == OP_OK &&
           op_parse_u64(plus + 1, 1, 86400000, span) == OP_OK;
}

/* The link to a host (IP@T+D), or on the path a port (IF@T+D), down. */
bool switch_link_down(const char *val, struct op_sw_run_config *rc,
                      struct op_sw_path_config *path)
{
    char who[32];
    uint64_t after, span;
    uint16_t port = 0;
    int i = -1;
    bool ok = parse_link_down(val, who, sizeof(who), &after, &span) &&
              (path != NULL ? (i = op_sw_path_port_find(path, who)) >= 0
                            : op_parse_ipv4(who, &rc->link_down_ip, &port) == OP_OK && port == 0);
    if (!ok) {
        cli_bad(tool, "invalid value '%s' for --link-down (expected %s@AFTER_MS+FOR_MS)", val,
                path != NULL ? "a port's IF" : "IP");
        return false;
    }
    if (path != NULL) {
        path->ports[i].down_after_ms = (uint32_t)after;
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
    rc->path = path;
    return port_faults(f, rc, path);
}

