/* MPI_Allreduce through the switch: reduce inside the node (or socket) to its
 * leader, leaders allreduce through the switch, the leader broadcasts inside
 * the node. Whenever the switch cannot do a call, the MPI's own algorithm
 * does it: the caller always gets the right answer. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "offpath/wire.h"
#include "mpi_coll.h"

/* Which path a call takes depends only on its arguments and on state every
 * rank of the communicator shares, so all ranks take the same one. */
int opm_eligible(const struct opm_comm *c, int count, int type, int op, uint64_t bytes)
{
    if (c == NULL || c->mode == OP_MODE_OFF)
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

#define REJOIN_FIRST 64 /* calls on the leaders' MPI before the switch is tried again */
#define REJOIN_MAX (64u << 10)

/* A settled call may have to be redone from its input, which the switch's
 * results overwrite (in place, chunk by chunk, or whole after a give-up
 * that came too late for the result): keep a copy. */
static bool save_input(struct opm_comm *c, const void *buf, size_t bytes)
{
    if (bytes > c->input_cap) {
        void *p = realloc(c->input, bytes);
        if (p == NULL)
            return false;
        c->input = p;
        c->input_cap = bytes;
    }
    memcpy(c->input, buf, bytes);
    return true;
}

bool opm_leaders_begin(struct opm_comm *c, const void *buf, size_t bytes)
{
    op_rsc_call_begin(opm.rsc, c->rsc, c->calls + 1);
    c->input_saved = save_input(c, buf, bytes);
    if (c->input_saved)
        return true;
    /* nothing sent yet: giving the call up now leaves every input intact,
     * and the others redo it with this leader once they have given up too */
    op_rsc_give_up(opm.rsc, c->rsc);
    return false;
}

bool opm_leaders_ok(struct opm_comm *c, op_status_t st, const void *buf, size_t bytes)
{
    if (st != OP_OK ||
        op_rsc_call_done(opm.rsc, c->rsc, c->calls + 1, buf, bytes, false) != OP_OK)
        return false;
    c->calls++;
    return true;
}

/* Nobody asks for such a call's result (every leader made it by MPI): none
 * is kept, and one asked for anyway is refused as not held. */
void opm_leaders_mpi_done(struct opm_comm *c)
{
    c->calls++;
    op_rsc_call_done(opm.rsc, c->rsc, c->calls, NULL, 0, true);
}

/* Collective over the leaders (every one of them reaches call rejoin_at on
 * the leaders' MPI, in a blocking call): a new group at the switches. The
 * communicator goes back to the switch only if every leader joined and the
 * switches still do every op and type the other ranks were told (they
 * choose paths by them). */
static void try_rejoin(struct opm_comm *c, uint64_t seq)
{
    opm.rejoin_tries += c->lrank == 0; /* once per communicator, not per leader */
    op_inc_client_free(c->client);
    c->client = NULL;
    bool joined = opm_leader_join(c);
    int ok = joined, all = 0;
    if (joined) {
        const struct op_inc_caps *k = op_inc_eng_caps(op_inc_client_engine(c->client));
        ok = (k->ops & c->ops) == c->ops && (k->types & c->types) == c->types;
    }
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->leaders);
    if (all) {
        c->dead = false;
        c->backoff = REJOIN_FIRST;
        opm.rejoins += c->lrank == 0;
        return;
    }
    op_inc_client_free(c->client);
    c->client = NULL;
    c->backoff = c->backoff < REJOIN_MAX ? c->backoff * 2 : REJOIN_MAX;
    c->rejoin_at = seq + c->backoff;
}

static op_status_t switch_call(struct opm_comm *c, void *buf, int count, int type, int code)
{
    if (c->host != NULL)
        return opm_host_allreduce(c, buf, count, type, code);
    return op_inc_allreduce(c->client, buf, buf, (size_t)count, (unsigned)type, (unsigned)code);
}

static void leaders_step(struct opm_comm *c, void *buf, int count, MPI_Datatype dtype, MPI_Op op,
                         int type, int code, size_t bytes)
{
    if (c->dead && c->host == NULL && c->calls + 1 >= c->rejoin_at)
        try_rejoin(c, c->calls + 1);
    if (c->dead) {
        MPI_Request req; /* as the nonblocking calls' (iallreduce.c): a call is one kind everywhere */
        PMPI_Iallreduce(MPI_IN_PLACE, buf, count, dtype, op, c->leaders, &req);
        PMPI_Wait(&req, MPI_STATUS_IGNORE);
        opm_leaders_mpi_done(c);
        return;
    }
    uint64_t began = op_now_ns();
    bool sent = opm_leaders_begin(c, buf, bytes);
    if (sent && opm_leaders_ok(c, switch_call(c, buf, count, type, code), buf, bytes))
        return;
    struct opm_settle s;
    opm_settle_start(&s, c, buf, count, dtype, op, bytes, began);
    opm_settle_wait(&s);
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
    else if (c->mode == OP_MODE_HOST)
        opm.host_path++; /* leaders met host to host: no switch saw the call */
    else
        opm.offloaded++; /* as far as this rank can tell: its leader knows better */
    return c->local_size > 1 ? opm_node_bcast(c, recvbuf, count, dtype, bytes) : MPI_SUCCESS;
}
