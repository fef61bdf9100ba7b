/* The switches' own fabric description (offpath/topo.h's format) derived
 * from a namespace topology: what `offpath switch --topology`, inc_test and
 * the MPI library (OFFPATH_TOPOLOGY) read to find whom to address. A TOR
 * serves its hosts as one IPv4 range, so the hosts under a TOR must hold a
 * range no other host falls into. Pure: text out. */
#include <stdio.h>
#include <string.h>

#include "offpath/nstopo.h"

/* The one TOR host h is linked to; -1 if none, -2 if several. */
static int tor_of(const struct op_nstopo *t, int h)
{
    int tor = -1;
    for (int i = 0; i < t->n_links; i++) {
        const struct op_nstopo_link *l = &t->links[i];
        int other = l->a == h ? l->b : l->b == h ? l->a : -1;
        if (other < 0 || t->nodes[other].role != OP_NSTOPO_TOR)
            continue;
        tor = tor == -1 || tor == other ? other : -2;
    }
    return tor;
}

/* TOR r's hosts as [lo, hi]; false (err says why) when another host falls
 * inside or a host hangs under no TOR or several. */
static bool host_range(const struct op_nstopo *t, int r, uint32_t *lo, uint32_t *hi, char *err,
                       size_t errlen)
{
    *lo = UINT32_MAX;
    *hi = 0;
    for (int h = 0; h < t->n_nodes; h++)
        if (t->nodes[h].role == OP_NSTOPO_HOST && tor_of(t, h) == r) {
            *lo = t->nodes[h].ip < *lo ? t->nodes[h].ip : *lo;
            *hi = t->nodes[h].ip > *hi ? t->nodes[h].ip : *hi;
        }
    for (int h = 0; h < t->n_nodes; h++) {
        const struct op_nstopo_node *n = &t->nodes[h];
        if (n->role != OP_NSTOPO_HOST)
            continue;
        int under = tor_of(t, h);
        if (under < 0) {
            snprintf(err, errlen, "host %s: linked to %s TOR", n->name,
                     under == -1 ? "no" : "more than one");
            return false;
        }
        if (under != r && n->ip >= *lo && n->ip <= *hi) {
            snprintf(err, errlen, "host %s (under %s) lies in the address range of %s's hosts",
                     n->name, t->nodes[under].name, t->nodes[r].name);
            return false;
        }
    }
    return *lo <= *hi || (snprintf(err, errlen, "TOR %s: no hosts", t->nodes[r].name), false);
}

/* TOR r's line: its range and the spines it links to. */
static int tor_line(const struct op_nstopo *t, int r, uint32_t lo, uint32_t hi, char *out,
                    size_t cap)
{
    char ip[16], a[16], b[16];
    op_nstopo_ip4(t->nodes[r].ip, ip);
    op_nstopo_ip4(lo, a);
    op_nstopo_ip4(hi, b);
    int used = snprintf(out, cap, "tor %s %s hosts %s-%s", t->nodes[r].name, ip, a, b);
    const char *sep = " spines ";
    for (int i = 0; i < t->n_links && used >= 0 && (size_t)used < cap; i++) {
        const struct op_nstopo_link *l = &t->links[i];
        int other = l->a == r ? l->b : l->b == r ? l->a : -1;
        if (other < 0 || t->nodes[other].role != OP_NSTOPO_SPINE)
            continue;
        used += snprintf(out + used, cap - (size_t)used, "%s%s", sep, t->nodes[other].name);
        sep = ",";
    }
    return used;
}

op_status_t op_nstopo_switches(const struct op_nstopo *t, char *out, size_t cap, char *err,
                               size_t errlen)
{
    size_t used = (size_t)snprintf(out, cap, "# the switches of topo %s (offpath topo switches)\n",
                                   t->name);
    for (int i = 0; i < t->n_nodes && used < cap; i++) {
        const struct op_nstopo_node *n = &t->nodes[i];
        char ip[16], line[512];
        uint32_t lo, hi;
        op_nstopo_ip4(n->ip, ip);
        if (n->role == OP_NSTOPO_SPINE)
            snprintf(line, sizeof line, "spine %s %s", n->name, ip);
        else if (n->role != OP_NSTOPO_TOR)
            continue;
        else if (!host_range(t, i, &lo, &hi, err, errlen))
            return OP_ERR_INVAL;
        else
            (void)tor_line(t, i, lo, hi, line, sizeof line);
        used += (size_t)snprintf(out + used, cap - used, "%s\n", line);
    }
    if (used >= cap) {
        snprintf(err, errlen, "the switches' file is longer than %zu bytes", cap);
        return OP_ERR_NOSPACE;
    }
    return OP_OK;
}
