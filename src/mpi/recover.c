/* A leader's switch call failed (deadline: the switch is gone). Leaders that
 * failed the same call redo it over PMPI; a leader one call behind (the
 * switch died after some leaders got that call's result) gets the result
 * from one that has it. All failing leaders run the same collectives in the
 * same order, so this needs no agreement beyond one allgather.
 *
 * A state machine of nonblocking collectives on c->leaders, because a
 * nonblocking allreduce recovers from inside MPI_Test or MPI_Wait, where it
 * must not block: a leader blocked in one communicator's recovery could not
 * take part in another's that its peers had reached first. Blocking calls
 * wait on the same collectives (opm_recover): MPI never matches a blocking
 * collective with a nonblocking one, so every collective on c->leaders
 * after a failure is a nonblocking one, in both paths. */
#include <stdlib.h>

#include "opmpi.h"

static void post_reduce(struct opm_recovery *r)
{
    PMPI_Iallreduce(MPI_IN_PLACE, r->buf, r->count, r->dtype, r->op, r->c->leaders, &r->req);
    r->stage = OPM_RC_REDUCE;
}

/* Who is a call ahead, if anyone; then share or redo. */
static void after_gather(struct opm_recovery *r)
{
    const struct opm_comm *c = r->c;
    long long lowest = r->mine;
    int ahead = -1;
    for (int i = 0; i < c->n_leaders; i++)
        if (r->all[i] < lowest)
            lowest = r->all[i];
    for (int i = 0; i < c->n_leaders && ahead < 0; i++)
        if (r->all[i] > lowest)
            ahead = i;
    free(r->all);
    r->all = NULL;
    if (ahead < 0) {
        post_reduce(r);
        return;
    }
    /* call `lowest` completed for some: they hold its result */
    bool have = r->mine > lowest;
    PMPI_Ibcast(have ? c->last : r->buf, (int)(have ? c->last_bytes : r->bytes), MPI_BYTE, ahead,
                c->leaders, &r->req);
    r->redo = have; /* the one ahead has its own call still to do */
    r->stage = OPM_RC_SHARE;
}

void opm_recovery_start(struct opm_recovery *r, struct opm_comm *c, void *buf, int count,
                        MPI_Datatype dtype, MPI_Op op, size_t bytes)
{
    *r = (struct opm_recovery){.c = c, .buf = buf, .count = count, .dtype = dtype, .op = op,
                               .bytes = bytes, .mine = (long long)c->calls,
                               .req = MPI_REQUEST_NULL};
    r->all = malloc(sizeof(*r->all) * (size_t)c->n_leaders);
    if (r->all == NULL)
        abort(); /* cannot agree on a recovery without memory: never guess */
    c->dead = true;
    PMPI_Iallgather(&r->mine, 1, MPI_LONG_LONG, r->all, 1, MPI_LONG_LONG, c->leaders, &r->req);
    r->stage = OPM_RC_GATHER;
}

bool opm_recovery_test(struct opm_recovery *r)
{
    int flag = 1;
    while (r->stage != OPM_RC_DONE) {
        PMPI_Test(&r->req, &flag, MPI_STATUS_IGNORE);
        if (!flag)
            return false;
        if (r->stage == OPM_RC_GATHER)
            after_gather(r);
        else if (r->stage == OPM_RC_SHARE && r->redo)
            post_reduce(r);
        else
            r->stage = OPM_RC_DONE;
    }
    return true;
}

void opm_recovery_wait(struct opm_recovery *r)
{
    while (!opm_recovery_test(r))
        PMPI_Wait(&r->req, MPI_STATUS_IGNORE);
}

/* The leaders' step of a communicator whose switch is gone. */
void opm_leaders_mpi(struct opm_comm *c, void *buf, int count, MPI_Datatype dtype, MPI_Op op,
                     MPI_Request *req)
{
    PMPI_Iallreduce(MPI_IN_PLACE, buf, count, dtype, op, c->leaders, req);
}
