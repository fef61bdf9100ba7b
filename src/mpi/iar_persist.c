/* MPI_Allreduce_init (MPI 4; MPICH 4 has it, Open MPI 4.1 does not): the
 * MPI's persistent request is the handle; each MPI_Start of it is one call,
 * through the switch (iallreduce.c) or the MPI's own. */
#include <stdlib.h>

#include "mpi_nb.h"

#if MPI_VERSION >= 4
struct persist {
    struct persist *next;
    MPI_Request handle;
    const void *sendbuf;
    void *recvbuf;
    int count;
    MPI_Datatype dtype;
    MPI_Op op;
    MPI_Comm comm;
    bool ours; /* its last start went through the switch: the MPI never saw it */
};

static struct persist *persists;

static struct persist **persist_of(MPI_Request req)
{
    struct persist **p = &persists;
    while (*p != NULL && (*p)->handle != req)
        p = &(*p)->next;
    return p;
}

int opm_allreduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype,
                       MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
    /* Every Start must go the same way on every rank, so a request without
     * its record must not exist: without memory the call fails before the
     * MPI makes one (its error handler decides, fatal by default). */
    struct persist *p = malloc(sizeof(*p));
    if (p == NULL)
        return opm_no_memory(comm);
    int rc = PMPI_Allreduce_init(sendbuf, recvbuf, count, dtype, op, comm, info, req);
    if (rc != MPI_SUCCESS) {
        free(p);
        return rc;
    }
    *p = (struct persist){persists, *req, sendbuf, recvbuf, count, dtype, op, comm, false};
    persists = p;
    return rc;
}

bool iar_ours_idle(MPI_Request req)
{
    const struct persist *p = *persist_of(req);
    return p != NULL && p->ours;
}

int opm_start(MPI_Request *req)
{
    struct persist *p = *persist_of(*req);
    if (p == NULL)
        return PMPI_Start(req);
    int rc = iar_start(p->sendbuf, p->recvbuf, p->count, p->dtype, p->op, p->comm, req, true);
    opm_prog_lock();
    p->ours = iar_kind(*req) == IAR_RUNNING;
    opm_prog_unlock();
    return rc;
}

/* Freeing one still running is allowed: it completes first. */
int opm_request_free(MPI_Request *req)
{
    struct persist **p = persist_of(*req);
    if (*p != NULL) {
        opm_iar_wait(req, 1);
        opm_prog_lock();
        iar_reap(*req);
        opm_prog_unlock();
        struct persist *gone = *p;
        *p = gone->next;
        free(gone);
    }
    return PMPI_Request_free(req);
}
#else
bool iar_ours_idle(MPI_Request req)
{
    (void)req;
    return false;
}
#endif
