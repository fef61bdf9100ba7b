/* The steps inside a node (or socket): reduce to the leader and broadcast
 * from it, through a shared-memory segment (shmcoll) when every local rank
 * could map it, else through the MPI's own PMPI_Reduce/PMPI_Bcast. On a
 * cluster these steps never touch the network; here they also keep the
 * emulated node's traffic off the MPI's TCP transport. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mpi_node.h"

/* The leader names the segment; a name nobody else uses: pid + a counter. */
static void agree_name(const struct opm_comm *c, char name[OP_SHM_NAME_MAX])
{
    memset(name, 0, OP_SHM_NAME_MAX);
    if (c->is_leader)
        snprintf(name, OP_SHM_NAME_MAX, "/offpath-%d-%llu", (int)getpid(),
                 (unsigned long long)opm.comms);
    PMPI_Bcast(name, OP_SHM_NAME_MAX, MPI_CHAR, 0, c->local);
}

void opm_node_setup(struct opm_comm *c)
{
    if (c->local_size < 2)
        return;
    opm.comms_local++;
    if (!opm.cfg.shm)
        return;
    char name[OP_SHM_NAME_MAX];
    agree_name(c, name);
    int lrank, ok = 0, all = 0;
    PMPI_Comm_rank(c->local, &lrank);
    if (c->is_leader)
        ok = op_shm_create(name, (unsigned)c->local_size, opm.cfg.shm_slot, &c->shm) == OP_OK;
    PMPI_Bcast(&ok, 1, MPI_INT, 0, c->local);
    if (ok && !c->is_leader)
        ok = op_shm_attach(name, (unsigned)lrank, &c->shm) == OP_OK;
    /* after this everyone has attached (or failed): the name can go */
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->local);
    if (c->is_leader)
        op_shm_unlink(name);
    opm.comms_shm += all != 0;
    if (all)
        return;
    if (opm.cfg.verbose && c->shm == NULL)
        fprintf(stderr, "offpath: rank %d: no shared memory segment %s, using MPI in the node\n",
                opm.world_rank, name);
    op_shm_free(c->shm);
    c->shm = NULL;
}

void opm_node_free(struct opm_comm *c)
{
    op_shm_free(c->shm);
    c->shm = NULL;
}

int opm_node_reduce(struct opm_comm *c, const void *sendbuf, void *recvbuf, int count,
                    MPI_Datatype dtype, MPI_Op op, int type, int code)
{
    const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    if (c->shm != NULL) {
        op_shm_reduce(c->shm, in, recvbuf, (size_t)count, (unsigned)type, (unsigned)code);
        return MPI_SUCCESS;
    }
    return PMPI_Reduce(c->is_leader && sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : in, recvbuf,
                       count, dtype, op, 0, c->local);
}

int opm_node_bcast(struct opm_comm *c, void *buf, int count, MPI_Datatype dtype, size_t bytes)
{
    if (c->shm != NULL) {
        op_shm_bcast(c->shm, buf, bytes);
        return MPI_SUCCESS;
    }
    return PMPI_Bcast(buf, count, dtype, 0, c->local);
}
