/* MPI_Allreduce through the switch: reduce inside the node (or socket) to its
 * leader, leaders allreduce through the switch, the leader broadcasts inside
 * the node. Whenever the switch cannot do a call, the MPI's own algorithm
 * does it: the caller always gets the right answer. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "offpath/wire.h"
#include "opmpi.h"

/* Which path a call takes depends only on its arguments and on state every
 * rank of the communicator shares, so all ranks take the same one. */
static int eligible(const struct opm_comm *c, int count, int type, int op, uint64_t bytes)
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

#define RESCUE_ASK_NS (300 * OP_NS_PER_MS) /* how long peers get to answer */
#define RESCUE_HOLD_US 5000                  /* between polls while others catch up */
#define REJOIN_FIRST 64                      /* calls on the host path before a rejoin */
#define REJOIN_MAX (64u << 10)

static op_status_t switch_call(struct opm_comm *c, void *buf, int count, int type, int code)
{
    if (c->host != NULL)
        return opm_host_allreduce(c, buf, count, type, code);
    return op_inc_allreduce(c->client, buf, buf, (size_t)count, (unsigned)type, (unsigned)code);
}

/* A call that did not finish everywhere may have to be redone from its
 * input, which the switch's results overwrite chunk by chunk (in place):
 * keep a copy when the result can arrive in pieces. */
static bool save_input(struct opm_comm *c, const void *buf, size_t bytes)
{
    if (c->client != NULL && bytes <= op_inc_eng_caps(op_inc_client_engine(c->client))->max_data)
        return false;
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

static void note_wait(uint64_t since)
{
    uint64_t waited = op_now_ns() - since;
    opm.late_waits++;
    if (waited > opm.longest_wait_ns)
        opm.longest_wait_ns = waited;
}

/* Every leader gave call seq up: redo it among the leaders with the MPI's
 * own allreduce, and stay on that path until a rejoin (try_rejoin). */
static void redo(struct opm_comm *c, void *buf, int count, MPI_Datatype dtype, MPI_Op op,
                 size_t bytes, bool saved, uint64_t seq)
{
    if (saved)
        memcpy(buf, c->input, bytes);
    PMPI_Allreduce(MPI_IN_PLACE, buf, count, dtype, op, c->leaders);
    opm.redone++;
    c->dead = true;
    c->rejoin_at = seq + c->backoff;
}

/* Call seq ended at its deadline here: agree with the other leaders on what
 * happened (offpath/rescue.h) whatever call each of them has reached. */
static void rescue(struct opm_comm *c, void *buf, int count, MPI_Datatype dtype, MPI_Op op,
                   size_t bytes, bool saved, uint64_t seq, uint64_t began)
{
    struct op_rsc_peer *peers = calloc((size_t)c->n_peers, sizeof(*peers));
    bool gave_up = false, waited = false;
    uint16_t port = opm_rescue_port();
    for (;;) {
        if (peers != NULL)
            op_rsc_poll(opm.rsc, c->rsc, c->peer_ips, c->n_peers, port, RESCUE_ASK_NS, peers);
        int from = -1;
        enum op_rsc_verdict v = peers != NULL
                                    ? op_rsc_decide(peers, c->n_peers, seq, gave_up, &from)
                                    : OP_RSC_WAIT_PEER; /* no memory to ask: keep waiting */
        if (v == OP_RSC_FETCH &&
            op_rsc_fetch(opm.rsc, c->rsc, c->peer_ips[from], port, seq, buf, bytes,
                         op_now_ns() + opm.cfg.deadline_ms * OP_NS_PER_MS) == OP_OK) {
            opm.fetched++;
            break;
        }
        if (v == OP_RSC_WAIT_PEER && c->client != NULL) {
            /* a peer has not reached the call or does not answer (stopped,
             * descheduled): the switch still holds what the others sent */
            waited = true;
            if (op_inc_resume(c->client) == OP_OK)
                break;
            continue;
        }
        if (v == OP_RSC_WAIT_PEER || v == OP_RSC_GIVE_UP) { /* host mode cannot resume */
            gave_up = true;
            op_rsc_give_up(opm.rsc, c->rsc);
        } else if (v == OP_RSC_HOLD) {
            usleep(RESCUE_HOLD_US);
        } else if (v == OP_RSC_REDO) {
            redo(c, buf, count, dtype, op, bytes, saved, seq);
            break;
        }
    }
    if (waited)
        note_wait(began);
    free(peers);
}

/* Collective over the leaders (every one of them reaches call rejoin_at on
 * the host path): a new group at the switches. The communicator goes back
 * to the switch only if every leader joined and the switches still do every
 * op and type the other ranks were told (they choose paths by them). */
static void try_rejoin(struct opm_comm *c, uint64_t seq)
{
    opm.rejoin_tries++;
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
        opm.rejoins++;
        return;
    }
    op_inc_client_free(c->client);
    c->client = NULL;
    c->backoff = c->backoff < REJOIN_MAX ? c->backoff * 2 : REJOIN_MAX;
    c->rejoin_at = seq + c->backoff;
}

static void leaders_step(struct opm_comm *c, void *buf, int count, MPI_Datatype dtype, MPI_Op op,
                         int type, int code, size_t bytes)
{
    uint64_t seq = c->calls + 1;
    if (c->dead && c->host == NULL && seq >= c->rejoin_at)
        try_rejoin(c, seq);
    if (c->dead) {
        PMPI_Allreduce(MPI_IN_PLACE, buf, count, dtype, op, c->leaders);
    } else {
        uint64_t began = op_now_ns();
        op_rsc_call_begin(opm.rsc, c->rsc, seq);
        bool saved = save_input(c, buf, bytes);
        if (switch_call(c, buf, count, type, code) != OP_OK)
            rescue(c, buf, count, dtype, op, bytes, saved, seq, began);
    }
    /* a peer that missed this call's result may still ask for it */
    op_rsc_call_done(opm.rsc, c->rsc, seq, buf, bytes);
    c->calls = seq;
}

int opm_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype, MPI_Op op,
                  MPI_Comm comm)
{
    struct opm_comm *c = opm_comm_get(comm);
    int type = opm_type_code(dtype), code = opm_op_code(op);
    size_t bytes = type >= 0 && count > 0 ? (size_t)count * op_red_type_size((unsigned)type) : 0;
    if (c != NULL && c->wide != NULL && c->wide->inc_ok && bytes > opm.cfg.socket_max_bytes) {
        c = c->wide;
        opm.by_node++;
    }
    opm.calls++;
    int why = eligible(c, count, type, code, bytes);
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
    else if (c->mode == OPM_HOST)
        opm.host_path++; /* leaders met host to host: no switch saw the call */
    else
        opm.offloaded++; /* as far as this rank can tell: its leader knows better */
    return c->local_size > 1 ? opm_node_bcast(c, recvbuf, count, dtype, bytes) : MPI_SUCCESS;
}
