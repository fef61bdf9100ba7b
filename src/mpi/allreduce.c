/* MPI_Allreduce through the switch: reduce inside the node (or socket) to its
 * leader, leaders allreduce through the switch, the leader broadcasts inside
 * the node. Whenever the switch cannot do a call, the MPI's own algorithm
 * does it: the caller always gets the right answer. */
#include <stdlib.h>
#include <string.h>

#include "offpath/wire.h"
#include "opmpi.h"

/* Which path a call takes depends only on its arguments and on state every
 * rank of the communicator shares, so all ranks take the same one. */
int opm_eligible(const struct opm_comm *c, int count, int type, int op, uint64_t bytes)
{
    if (c == NULL || c->mode == OPM_OFF)
        return OPM_R_mode_off;
    if (c->n_leaders < 2)
        return OPM_R_one_node;
    if (!c->inc_ok)
        return OPM_R_not_joined;
    if (type < 0 || !(c->types & (1u << type)))
        return OPM_R_unsupported_type;
    if (op < 0 || !(c->ops & (1u << op)) || !op_red_valid((unsigned)op, (unsigned)type))
        return OPM_R_unsupported_op;
    if (count <= 0 || bytes < opm.cfg.min_bytes)
        return OPM_R_too_small;
    if (bytes > opm.cfg.max_bytes)
        return OPM_R_too_large;
    return -1;
}

static bool keep_result(struct opm_comm *c, const void *buf, size_t bytes)
{
    if (bytes > c->last_cap) {
        void *p = realloc(c->last, bytes);
        if (p == NULL)
            return false;
        c->last = p;
        c->last_cap = bytes;
    }
    memcpy(c->last, buf, bytes);
    c->last_bytes = bytes;
    return true;
}

/* A leader's switch call failed: the recovery (recover.c), waited for. */
void opm_recover(struct opm_comm *c, void *buf, int count, MPI_Datatype dtype, MPI_Op op,
                 size_t bytes)
{
    struct opm_recovery r;
    opm_recovery_start(&r, c, buf, count, dtype, op, bytes);
    opm_recovery_wait(&r);
}

static void leaders_step(struct opm_comm *c, void *buf, int count, MPI_Datatype dtype, MPI_Op op,
                         int type, int code, size_t bytes)
{
    if (c->dead) {
        MPI_Request req; /* nonblocking, as the nonblocking calls' (recover.c) */
        opm_leaders_mpi(c, buf, count, dtype, op, &req);
        PMPI_Wait(&req, MPI_STATUS_IGNORE);
        return;
    }
    op_status_t st = c->host != NULL ? opm_host_allreduce(c, buf, count, type, code)
                                     : op_inc_allreduce(c->client, buf, buf, (size_t)count,
                                                        (unsigned)type, (unsigned)code);
    if (!opm_leaders_ok(c, st, buf, bytes))
        opm_recover(c, buf, count, dtype, op, bytes);
}

/* The end of a leader's switch call, blocking or not: one call sequence per
 * communicator. False: the call must be recovered. */
bool opm_leaders_ok(struct opm_comm *c, op_status_t st, const void *buf, size_t bytes)
{
    if (st == OP_OK && keep_result(c, buf, bytes)) {
        c->calls++;
        return true;
    }
    return false;
}

/* Socket mode sends every byte once per socket; above a size the node's
 * group (once per node) is faster, so a socket communicator has both. */
struct opm_comm *opm_level(struct opm_comm *c, size_t bytes)
{
    if (c != NULL && c->wide != NULL && c->wide->inc_ok && bytes > opm.cfg.socket_max_bytes)
        return c->wide;
    return c;
}

int opm_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype, MPI_Op op,
                  MPI_Comm comm)
{
    struct opm_comm *top = opm_comm_get(comm);
    int type = opm_type_code(dtype), code = opm_op_code(op);
    size_t bytes = type >= 0 && count > 0 ? (size_t)count * op_red_type_size((unsigned)type) : 0;
    struct opm_comm *c = opm_level(top, bytes);
    opm.by_node += c != top;
    opm.calls++;
    int why = opm_eligible(c, count, type, code, bytes);
    if (why >= 0) {
        opm.fallback[why]++;
        return PMPI_Allreduce(sendbuf, recvbuf, count, dtype, op, comm);
    }
    const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    if (c->local_size > 1) {
        int rc = opm_node_reduce(c, sendbuf, recvbuf, count, dtype, op, type, code);
        if (rc != MPI_SUCCESS)
            return rc;
    } else if (in != recvbuf) {
        memcpy(recvbuf, in, bytes);
    }
    if (c->is_leader)
        leaders_step(c, recvbuf, count, dtype, op, type, code, bytes);
    if (c->is_leader && c->dead)
        opm.fallback[OPM_R_switch_gone]++;
    else
        opm.offloaded++; /* as far as this rank can tell: its leader knows better */
    return c->local_size > 1 ? opm_node_bcast(c, recvbuf, count, dtype, bytes) : MPI_SUCCESS;
}
