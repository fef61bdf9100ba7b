/* offpath fabric topology: which hosts sit under which TOR, which TORs under
 * which SPINEs. Shared by the switches, the load tool and the MPI library,
 * which finds its TOR from it. */
#ifndef OFFPATH_TOPO_H
#define OFFPATH_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

/* Text format, one switch a line ('#' comments):
 *   spine <name> <ip> [port N]
 *   tor <name> <ip> [port N] hosts <first-ip>-<last-ip> [spines <name>,<name>...]
 * A TOR with no spines is the root of its own one-level tree. */
#define OP_TOPO_MAX_SWITCHES 64
#define OP_TOPO_MAX_UPLINKS 8

struct op_topo_switch {
    char name[32];
    bool spine;
    uint32_t ip;
    uint16_t port;
    uint16_t index;            /* position among switches of its role */
    uint32_t host_lo, host_hi; /* TOR: hosts it serves (inclusive IPv4 range) */
    uint16_t n_up;
    uint16_t up[OP_TOPO_MAX_UPLINKS]; /* TOR: indices into op_topo.sw of its spines */
};

struct op_topo {
    struct op_topo_switch sw[OP_TOPO_MAX_SWITCHES];
    int n;
};

/* Parse text; on failure err names the line and the reason. */
OP_API op_status_t op_topo_parse(const char *text, struct op_topo *topo, char *err, size_t errlen);
OP_API op_status_t op_topo_load(const char *path, struct op_topo *topo, char *err, size_t errlen);
OP_API int op_topo_find(const struct op_topo *topo, const char *name); /* -1 if absent */
/* The TOR (index into sw) serving host ip, -1 if none. */
OP_API int op_topo_tor_of(const struct op_topo *topo, uint32_t host_ip);

#endif
