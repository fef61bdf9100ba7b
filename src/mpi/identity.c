/* Where each rank runs: its node, its index among the node's ranks, and its
 * socket. Emulation sets them by environment (OFFPATH_NODE / OFFPATH_PPN,
 * OFFPATH_SOCKET / OFFPATH_SOCKETS); otherwise the MPI says which ranks
 * share a node (MPI_COMM_TYPE_SHARED) and hwloc says which package (socket)
 * the process is bound to. Computed once, at MPI_Init, over COMM_WORLD. */
#include <stdio.h>

#ifdef OFFPATH_HAVE_HWLOC
#include <hwloc.h>
#endif

#include "mpi_base.h"

/* Node number (dense, in order of the nodes' lowest ranks), local index and
 * node size from the ranks that share memory with this one. */
static void shared_memory_node(void)
{
    MPI_Comm node, heads;
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, opm.world_rank, MPI_INFO_NULL,
                         &node);
    PMPI_Comm_rank(node, &opm.local);
    PMPI_Comm_size(node, &opm.node_size);
    PMPI_Comm_split(MPI_COMM_WORLD, opm.local == 0 ? 0 : MPI_UNDEFINED, opm.world_rank, &heads);
    if (heads != MPI_COMM_NULL) {
        PMPI_Comm_rank(heads, &opm.node);
        PMPI_Comm_free(&heads);
    }
    PMPI_Bcast(&opm.node, 1, MPI_INT, 0, node);
    PMPI_Comm_free(&node);
}

#ifdef OFFPATH_HAVE_HWLOC
/* The package this process is bound inside, or -1 (bound across packages, or
 * not bound); *packages: how many the machine has. */
static int hwloc_package(int *packages)
{
    hwloc_topology_t t;
    int pkg = -1;
    *packages = 1;
    if (hwloc_topology_init(&t) != 0)
        return -1;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (hwloc_topology_load(t) == 0 && set != NULL &&
        hwloc_get_cpubind(t, set, HWLOC_CPUBIND_PROCESS) == 0) {
        int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
        *packages = n > 0 ? n : 1;
        hwloc_obj_t o = hwloc_get_obj_covering_cpuset(t, set);
        while (o != NULL && o->type != HWLOC_OBJ_PACKAGE)
            o = o->parent;
        pkg = o != NULL ? (int)o->logical_index : -1;
    }
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(t);
    return pkg;
}
#else
static int hwloc_package(int *packages)
{
    *packages = 1;
    return -1;
}
#endif

/* Unbound ranks: as the seed assumes, a node's ranks fill its sockets in
 * rank order, the same number on each. */
static int socket_by_order(int sockets)
{
    int per_socket = opm.node_size / sockets > 0 ? opm.node_size / sockets : 1;
    int s = opm.local / per_socket;
    return s < sockets ? s : sockets - 1;
}

static void find_socket(void)
{
    const struct opm_config *cfg = &opm.cfg;
    opm.sockets = cfg->sockets > 0 ? cfg->sockets : 1;
    if (cfg->socket >= 0) {
        opm.socket = cfg->socket < opm.sockets ? cfg->socket : opm.sockets - 1;
        opm.socket_from = "OFFPATH_SOCKET";
    } else if (cfg->sockets > 0) {
        opm.socket = socket_by_order(opm.sockets);
        opm.socket_from = "OFFPATH_SOCKETS";
    } else {
        opm.socket = hwloc_package(&opm.sockets);
        opm.socket_from = "hwloc binding";
        if (opm.socket < 0 || opm.socket >= OPM_MAX_SOCKETS) {
            opm.socket = socket_by_order(opm.sockets < OPM_MAX_SOCKETS ? opm.sockets
                                                                       : OPM_MAX_SOCKETS);
            opm.socket_from = "hwloc packages, rank order";
        }
    }
}

void opm_identity(void)
{
    const struct opm_config *cfg = &opm.cfg;
    if (cfg->ppn > 0 || cfg->node >= 0) {
        int ppn = cfg->ppn > 0 ? cfg->ppn : opm.world_size;
        opm.node = cfg->node >= 0 ? cfg->node : opm.world_rank / ppn;
        opm.local = opm.world_rank % ppn;
        opm.node_size = ppn;
        opm.node_from = cfg->node >= 0 ? "OFFPATH_NODE" : "OFFPATH_PPN";
    } else {
        shared_memory_node();
        opm.node_from = "shared memory";
    }
    find_socket();
    if (opm.cfg.verbose >= 2)
        fprintf(stderr, "offpath: rank %d: node %d (%s), local rank %d, socket %d of %d (%s)\n",
                opm.world_rank, opm.node, opm.node_from, opm.local, opm.socket, opm.sockets,
                opm.socket_from);
    if (opm.cfg.verbose >= 2 && opm.world_rank == 0)
        fprintf(stderr, "offpath: config: mode %s, deadline %llu ms, rto %llu us, net %u, port %u\n",
                op_mode_name(cfg->mode), (unsigned long long)cfg->deadline_ms,
                (unsigned long long)cfg->rto_us, cfg->net, cfg->port);
}
