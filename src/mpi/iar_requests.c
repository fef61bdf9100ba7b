/* The MPI's Wait and Test family over a mix of the MPI's requests and
 * offpath's (iallreduce.c): ours are advanced, and hidden from the MPI. */
#include <stdlib.h>

#include "mpi_nb.h"

enum iar_kind iar_kind(MPI_Request req)
{
    const struct opm_req *r = opm_req_find(req);
    if (r != NULL)
        return r->complete ? IAR_COMPLETE : IAR_RUNNING;
    return req != MPI_REQUEST_NULL && iar_ours_idle(req) ? IAR_IDLE : IAR_MPI;
}

bool opm_iar_any(const MPI_Request *reqs, int n)
{
    bool any = false;
    opm_prog_lock();
    for (int i = 0; i < n && !any; i++)
        any = iar_kind(reqs[i]) != IAR_MPI;
    opm_prog_unlock();
    return any;
}

/* A reported persistent request of ours is never handed to the MPI: it is
 * inactive there, never started, and MPICH 4.0 waits forever on such a
 * collective request. Its status is an empty one, as MPI gives an inactive
 * request. */
static void empty_status(MPI_Status *st)
{
    if (st == MPI_STATUS_IGNORE)
        return;
    st->MPI_SOURCE = MPI_ANY_SOURCE;
    st->MPI_TAG = MPI_ANY_TAG;
    st->MPI_ERROR = MPI_SUCCESS;
    PMPI_Status_set_elements(st, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(st, 0);
}

static MPI_Status *status_at(MPI_Status *sts, int i)
{
    return sts == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &sts[i];
}

/* The requests as the MPI may see them: ours (pending, complete, or a
 * persistent one offpath last ran) become MPI_REQUEST_NULL, flagged in
 * ours[]; lock held. NULL without memory: the caller's Wait or Test fails
 * (no_view) before any request changed, so calling it again is right. */
static MPI_Request *mpi_view(const MPI_Request *reqs, int n, bool **ours)
{
    MPI_Request *copy = malloc(sizeof(*copy) * (size_t)(n > 0 ? n : 1));
    *ours = calloc((size_t)(n > 0 ? n : 1), sizeof(**ours));
    if (copy == NULL || *ours == NULL) {
        free(copy);
        free(*ours);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        (*ours)[i] = iar_kind(reqs[i]) != IAR_MPI;
        copy[i] = (*ours)[i] ? MPI_REQUEST_NULL : reqs[i];
    }
    return copy;
}

/* Requests belong to no one communicator: MPI 3.1 raises such errors on
 * MPI_COMM_WORLD. Lock held, released here. */
static int no_view(void)
{
    opm_prog_unlock();
    return opm_no_memory(MPI_COMM_WORLD);
}

/* After the MPI's call on the view: the MPI's requests back, ours that
 * completed reported (their handles stay: persistent) with empty statuses. */
static void merge_view(MPI_Request *reqs, int n, MPI_Request *copy, bool *ours,
                       MPI_Status *sts)
{
    opm_prog_lock();
    for (int i = 0; i < n; i++) {
        if (!ours[i]) {
            reqs[i] = copy[i];
            continue;
        }
        iar_reap(reqs[i]);
        empty_status(status_at(sts, i));
    }
    opm_prog_unlock();
    free(copy);
    free(ours);
}

int opm_iar_waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
    opm_iar_wait(reqs, n);
    bool *ours;
    opm_prog_lock();
    MPI_Request *copy = mpi_view(reqs, n, &ours);
    if (copy == NULL)
        return no_view();
    opm_prog_unlock();
    /* one request: the MPI's single-request call (MPICH 4.0's Testall fails
     * on an active persistent collective that its Test completes) */
    int rc = n == 1 ? PMPI_Wait(&copy[0], status_at(sts, 0)) : PMPI_Waitall(n, copy, sts);
    merge_view(reqs, n, copy, ours, sts);
    return rc;
}

/* false while one of ours is pending, as for the MPI's own */
int opm_iar_testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
    bool *ours;
    opm_prog_lock();
    iar_advance();
    if (iar_any_running(reqs, n)) {
        opm_prog_unlock();
        *flag = 0;
        return MPI_SUCCESS;
    }
    MPI_Request *copy = mpi_view(reqs, n, &ours);
    if (copy == NULL)
        return no_view();
    opm_prog_unlock();
    int rc = n == 1 ? PMPI_Test(&copy[0], flag, status_at(sts, 0))
                    : PMPI_Testall(n, copy, flag, sts);
    if (*flag) {
        merge_view(reqs, n, copy, ours, sts);
    } else {
        free(copy);
        free(ours);
    }
    return rc;
}

/* A completed persistent one of ours among them, or -1; lock held. */
static int first_complete(const MPI_Request *reqs, int n)
{
    for (int i = 0; i < n; i++)
        if (iar_kind(reqs[i]) == IAR_COMPLETE)
            return i;
    return -1;
}

/* With the lock held: one of ours among reqs that has completed, reaped
 * (the lock is then released), or -1 (still held). */
static int reap_first_complete(MPI_Request reqs[], int n, MPI_Status *status)
{
    iar_advance();
    int done = first_complete(reqs, n);
    if (done < 0)
        return -1;
    iar_reap(reqs[done]);
    opm_prog_unlock();
    empty_status(status);
    return done;
}

/* With the lock held, none of ours among reqs complete: whether some are
 * still running (then the MPI's "nothing left" is not the answer) and the
 * view the MPI's call gets. The lock is released; NULL: no memory. */
static MPI_Request *view_of_running(const MPI_Request *reqs, int n, bool **ours, bool *hidden)
{
    *hidden = iar_any_running(reqs, n);
    MPI_Request *copy = mpi_view(reqs, n, ours);
    opm_prog_unlock();
    return copy;
}

/* Testany and Testsome: a completed one of ours first, else the MPI's. */
int opm_iar_testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    bool *ours;
    opm_prog_lock();
    int done = reap_first_complete(reqs, n, status);
    if (done >= 0) {
        *index = done;
        *flag = 1;
        return MPI_SUCCESS;
    }
    bool hidden;
    MPI_Request *copy = view_of_running(reqs, n, &ours, &hidden);
    if (copy == NULL)
        return opm_no_memory(MPI_COMM_WORLD);
    int rc = PMPI_Testany(n, copy, index, flag, status);
    if (*flag && *index != MPI_UNDEFINED)
        reqs[*index] = copy[*index];
    else if (*flag && hidden)
        *flag = 0; /* only ours are left, still running */
    free(copy);
    free(ours);
    return rc;
}

int opm_iar_testsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                     MPI_Status statuses[])
{
    bool *ours;
    opm_prog_lock();
    int done = reap_first_complete(reqs, n, status_at(statuses, 0));
    if (done >= 0) {
        *outcount = 1;
        indices[0] = done;
        return MPI_SUCCESS;
    }
    bool hidden;
    MPI_Request *copy = view_of_running(reqs, n, &ours, &hidden);
    if (copy == NULL)
        return opm_no_memory(MPI_COMM_WORLD);
    int rc = PMPI_Testsome(n, copy, outcount, indices, statuses);
    for (int k = 0; *outcount != MPI_UNDEFINED && k < *outcount; k++)
        reqs[indices[k]] = copy[indices[k]];
    if (*outcount == MPI_UNDEFINED && hidden)
        *outcount = 0;
    free(copy);
    free(ours);
    return rc;
}

