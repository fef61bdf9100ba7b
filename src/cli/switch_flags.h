/* Internal to src/cli: `offpath switch`'s flags, shared by switch_cmd.c
 * (the flags) and switch_path.c (the switch on the path and faults). */
#ifndef OFFPATH_CLI_SWITCH_FLAGS_H
#define OFFPATH_CLI_SWITCH_FLAGS_H

#include "offpath/switch.h"

struct sw_flags {
    const char *topology, *name, *role, *listen, *hosts, *pcap, *ports, *link_down;
    const char *dpdk;             /* --dpdk: EAL arguments, the ports DPDK's */
    struct sw_dpdk *dpdk_ports;   /* what switch_dpdk_open opened */
    bool no_shape;
    const char *ecn;              /* --ecn: BYTES or off; NULL: the ports' default */
    char losses[OP_SW_MAX_PORTS][32];
    int n_loss;
    char uplinks[OP_TOPO_MAX_UPLINKS][64];
    int n_up;
    char tors[OP_TOPO_MAX_SWITCHES][96];
    int n_tor;
    uint64_t port;
    int log_level;
    bool json;
};

/* The link to a host (IP@T+D), or on the path a port (IF@T+D), down. */
bool switch_link_down(const char *val, struct op_sw_run_config *rc,
                      struct op_sw_path_config *path);
/* --ports: the path from --topology NET --name NAME, faults on its ports. */
bool switch_load_path(const struct sw_flags *f, struct op_sw_run_config *rc,
                      struct op_topo *topo, struct op_sw_path_config *path);

/* --dpdk: the EAL from f->dpdk and each port of path a DPDK port's queue
 * (path->ports[i].io); false with the reason printed. Nothing without
 * --dpdk. */
bool switch_dpdk_open(struct sw_flags *f, struct op_sw_path_config *path);
/* After the path is gone (it closed the queues): the ports and the EAL. */
void switch_dpdk_close(struct sw_flags *f);

#endif
