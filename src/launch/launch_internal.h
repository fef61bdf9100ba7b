/* offpath mpirun's pieces (src/launch): the namespace topology a job runs
 * on (nsjob.c), the rank wrapper (rank.c) and its PMIx relay (relay.c). */
#ifndef OFFPATH_LAUNCH_INTERNAL_H
#define OFFPATH_LAUNCH_INTERNAL_H

#include "offpath/fabric.h"
#include "offpath/launch.h"
#include "offpath/nstopo.h"

/* INC's largest chunk (OP_NSTOPO_SWITCH_MAX_DATA, 8 KiB): loopback carries
 * it, and the switches' and leaders' cost is per packet: on make demo's
 * cluster 1 MiB calls took 0.87-0.99x the host's time at 8 KiB against
 * 0.98-1.21x at 4 KiB (docs/PERFORMANCE.md, ninth session) */
#define LAUNCH_LOOPBACK_MAX_DATA OP_NSTOPO_SWITCH_MAX_DATA

/* A job's namespace topology (mpirun --topo). */
struct launch_ns {
    struct op_nstopo t;
    char file[4096];  /* absolute: the ranks read it from wherever they start */
    bool brought_up;  /* this job built it, so this job takes it down */
    char hosts_cidr[24]; /* the prefix all hosts' addresses share: MPI's TCP interfaces */
};

/* Loads cfg->topo, checks cfg->nodes against its hosts (0: all of them,
 * stored back), brings it up when its state file does not exist, and writes
 * the switches' fabric file to fabric_path. 0, or an exit status (2: bad
 * parameter or file, 1: could not build), said on stderr. */
int launch_ns_open(struct launch_ns *ns, struct op_launch_config *cfg, const char *fabric_path);
/* Takes the topology down if this job brought it up. */
void launch_ns_close(struct launch_ns *ns);
/* The switches of topo, each in its own node's namespace. */
op_status_t launch_ns_switches(struct launch_ns *ns, struct op_fabric_opts *o,
                               const struct op_topo *topo, struct op_fabric **out, char *err,
                               size_t errlen);

/* The port of "...;tcp4://127.0.0.1:PORT" in a PMIx server URI; 0 if none. */
uint16_t launch_uri_port(const char *v);
/* The URI v with its loopback port replaced by port, into out; false when v
 * names no loopback port or out is too short. */
bool launch_uri_repoint(const char *v, uint16_t port, char *out, size_t len);
/* The longest prefix all hosts' IPv4 addresses share, "a.b.c.d/len". */
void launch_hosts_cidr(const struct op_nstopo *t, char *out, size_t len);
/* Data bytes an INC packet carries whole over an MTU: the leaders send
 * with DF set, so a packet must fit whole (the switches' data size, the
 * ranks' OFFPATH_MTU). */
uint16_t launch_data_fits(uint32_t mtu);

/* The node index of host k (file order), -1 if there are fewer. */
int launch_host_node(const struct op_nstopo *t, int k);

/* Forks the relay: it listens on 127.0.0.1 of the calling process's
 * namespace (port: where), connects to 127.0.0.1:server_port of the
 * namespace server_ns (an open /proc/.../ns/net), and lives as long as the
 * calling process (exec'ing another program keeps it). */
op_status_t launch_relay_start(uint16_t server_port, int server_ns, uint16_t *port, char *err,
                               size_t errlen);

#endif
