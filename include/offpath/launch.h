/* `offpath mpirun`: runs an unmodified MPI program on an emulated cluster.
 * Lays out N nodes under T TORs (and SPINEs), starts the switches on
 * loopback, runs the program under Open MPI's or MPICH's mpirun with
 * liboffpath_mpi preloaded and each rank's emulated node and socket known,
 * and stops the switches afterwards. With a namespace topology (--topo,
 * offpath/nstopo.h) the nodes are its hosts' namespaces and the switches run
 * in their TORs' and SPINEs'; each rank enters its host's namespace through
 * op_launch_rank_exec (`offpath topo_rank`). */
#ifndef OFFPATH_LAUNCH_H
#define OFFPATH_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/mode.h"

enum op_launch_mpi { OP_LAUNCH_OPENMPI, OP_LAUNCH_MPICH };

struct op_launch_config {
    int nodes, tors, spines, ppn, sockets;
    enum op_launch_mpi mpi;
    enum op_mode mode;
    double drop_rate, dup_rate;
    const char *fault_switch; /* the one switch that drops/duplicates; NULL: all */
    /* switch limits: data bytes per packet (0: 8192 over loopback, the
     * largest chunk a --topo's MTU carries), slots per group */
    uint16_t max_data, window;
    uint8_t net;
    uint16_t port;
    bool tcp;             /* Open MPI: --mca btl tcp,self (the network baseline) */
    bool udp_batching;    /* the switches' ports (the ranks read OFFPATH_UDP_BATCHING) */
    int verbose;
    uint64_t deadline_ms; /* the library's bound on each switch operation */
    const char *connect;  /* topology file of running switches: start none */
    const char *topo;     /* namespace topology file (docs/topo.md): nodes are its
                           * hosts (nodes 0: all of them); brought up if down */
    const char *lib;      /* liboffpath_mpi to preload; NULL: next to the binary */
    const char *spin_us;  /* OFFPATH_SPIN_US for the ranks; NULL: their default */
    const char *self_exe;
    const char *workdir;
    char **argv;          /* the MPI command */
    int argc;
};

OP_API void op_launch_config_default(struct op_launch_config *cfg);
/* Returns mpirun's exit status, or 2 when nothing could be started. */
OP_API int op_launch_run(const struct op_launch_config *cfg);
/* The MPI library that op_launch_run preloads when cfg->lib is NULL: found
 * beside self_exe in a build tree, in the prefix's libdir when installed. */
OP_API bool op_launch_lib_path(const char *self_exe, enum op_launch_mpi mpi, char *out,
                               size_t len);

/* One MPI rank on a namespace topology: rank r (the CLI reads it from
 * OMPI_COMM_WORLD_RANK, PMI_RANK or PMIX_RANK) runs in the namespace of host r / ppn (file
 * order) with OFFPATH_IP set to the host's address. Open MPI's PMIx server
 * listens on 127.0.0.1 of the namespace mpirun runs in: a relay process of
 * the rank's own carries the connection out, and PMIX_SERVER_URI* name the
 * relay. Returns only on failure (the exit status: 2 bad input, 1 not up or
 * no relay, 127 cannot run). */
struct op_launch_rank_cfg {
    const char *file;
    int ppn;
    int rank;            /* -1: none found */
    const char *preload; /* LD_PRELOAD of the program (not of this wrapper); NULL: none */
    char *const *argv;   /* the program, NULL-terminated */
};
OP_API int op_launch_rank_exec(const struct op_launch_rank_cfg *cfg);

#endif
