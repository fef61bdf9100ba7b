/* A leader's switch call that ended at its deadline (or was given up) is
 * settled with the other leaders (offpath/rescue.h, docs/inc.md "When a
 * call does not finish"), in steps that never block: a nonblocking
 * allreduce settles from inside MPI_Test, a blocking one waits on the same
 * steps (opm_settle_wait). The only MPI call is the redo, a nonblocking
 * allreduce among the leaders that every leader posts in the same call. */
#include <stdlib.h>
#include <string.h>

#include "mpi_node.h"

#define SETTLE_ASK_NS (300 * OP_NS_PER_MS) /* how long a silent peer gets to answer */
#define SETTLE_HOLD_NS (5 * OP_NS_PER_MS)   /* between questions while others catch up */

static void ask(struct opm_settle *s)
{
    op_rsc_ask_start(opm.rsc, &s->asker, s->c->rsc, &s->q, s->peers);
    s->stage = SS_ASK;
}

void opm_settle_start(struct opm_settle *s, struct opm_comm *c, void *buf, int count,
                      MPI_Datatype dtype, MPI_Op op, size_t bytes, uint64_t began)
{
    *s = (struct opm_settle){.c = c, .buf = buf, .count = count, .dtype = dtype, .op = op,
                             .bytes = bytes, .seq = c->calls + 1, .began = began,
                             .req = MPI_REQUEST_NULL};
    s->q = (struct op_rsc_ask){.ips = c->peer_ips, .ports = c->peer_ports, .n = c->n_peers,
                               .wait_ns = SETTLE_ASK_NS};
    s->peers = calloc((size_t)c->n_peers + 1, sizeof(*s->peers));
    s->have_asker = op_rsc_asker_open(opm.rsc, &s->asker) == OP_OK;
    if (s->peers != NULL && s->have_asker)
        ask(s);
    else
        s->stage = SS_HOLD; /* no socket or memory yet: try again shortly */
    s->hold_until = op_now_ns() + SETTLE_HOLD_NS;
}

/* Every leader gave the call up: all post the same allreduce among the
 * leaders, from the input (the switch's partial results overwrote it; a
 * leader that could not keep it never sent, so its buffer is the input). */
static void redo(struct opm_settle *s)
{
    if (s->c->input_saved)
        memcpy(s->buf, s->c->input, s->bytes);
    PMPI_Iallreduce(MPI_IN_PLACE, s->buf, s->count, s->dtype, s->op, s->c->leaders, &s->req);
    s->stage = SS_REDO;
}

static enum opm_settle_ev decided(struct opm_settle *s)
{
    struct opm_comm *c = s->c;
    bool gave_up = op_rsc_gave_up(opm.rsc, c->rsc);
    int from = -1;
    uint32_t patience = (uint32_t)opm.cfg.deadline_ms;
    switch (op_rsc_decide(s->peers, c->n_peers, s->seq, gave_up, patience, &from)) {
    case OP_RSC_FETCH:
        op_rsc_fetch_start(opm.rsc, &s->asker, c->rsc, c->peer_ips[from], c->peer_ports[from],
                           s->seq, s->buf, s->bytes,
                           op_now_ns() + opm.cfg.deadline_ms * OP_NS_PER_MS);
        s->stage = SS_FETCH;
        return OPM_SETTLE_PENDING;
    case OP_RSC_WAIT_PEER:
        /* a peer has not reached the call or does not answer (stopped,
         * descheduled): the switch still holds what the others sent. Host
         * mode cannot resume its call: it gives up instead */
        if (c->client != NULL) {
            s->waited = true;
            s->stage = SS_RESUMED;
            return OPM_SETTLE_RESUME;
        }
        /* fall through */
    case OP_RSC_GIVE_UP:
        op_rsc_give_up(opm.rsc, c->rsc);
        ask(s); /* telling the others at once stops their waits */
        return OPM_SETTLE_PENDING;
    case OP_RSC_HOLD:
        s->stage = SS_HOLD;
        s->hold_until = op_now_ns() + SETTLE_HOLD_NS;
        return OPM_SETTLE_PENDING;
    case OP_RSC_REDO:
        redo(s);
        return OPM_SETTLE_PENDING;
    }
    return OPM_SETTLE_PENDING;
}

/* The call is settled: kept for peers that missed it, and counted. */
static void settled(struct opm_settle *s)
{
    if (!s->done_by_switch) {
        op_rsc_call_done(opm.rsc, s->c->rsc, s->seq, s->buf, s->bytes, true);
        if (s->c->client != NULL && !s->c->dead) /* fetched: the group went on */
            op_inc_client_settled(s->c->client);
    }
    s->c->calls = s->seq;
    if (s->waited) {
        uint64_t waited = op_now_ns() - s->began;
        opm.late_waits++;
        if (waited > opm.longest_wait_ns)
            opm.longest_wait_ns = waited;
    }
    s->stage = SS_DONE;
}

enum opm_settle_ev opm_settle_test(struct opm_settle *s)
{
    int flag = 0;
    op_status_t st;
    switch (s->stage) {
    case SS_ASK:
        return op_rsc_ask_step(opm.rsc, &s->asker, &s->q, s->peers) ? decided(s)
                                                                      : OPM_SETTLE_PENDING;
    case SS_FETCH:
        st = op_rsc_fetch_step(opm.rsc, &s->asker);
        if (st == OP_INPROGRESS)
            return OPM_SETTLE_PENDING;
        if (st != OP_OK) { /* it went away or no longer holds it: ask again */
            ask(s);
            return OPM_SETTLE_PENDING;
        }
        opm.fetched++;
        settled(s);
        return OPM_SETTLE_DONE;
    case SS_HOLD:
        if (op_now_ns() < s->hold_until)
            return OPM_SETTLE_PENDING;
        if (s->peers == NULL || !s->have_asker) {
            opm_settle_free(s);
            opm_settle_start(s, s->c, s->buf, s->count, s->dtype, s->op, s->bytes, s->began);
        } else {
            ask(s);
        }
        return OPM_SETTLE_PENDING;
    case SS_REDO:
        PMPI_Test(&s->req, &flag, MPI_STATUS_IGNORE);
        if (!flag)
            return OPM_SETTLE_PENDING;
        opm.redone += s->c->lrank == 0; /* once per call, not per leader */
        s->c->dead = true; /* the leaders' MPI from now on, until a rejoin */
        s->c->rejoin_at = s->seq + s->c->backoff;
        settled(s);
        return OPM_SETTLE_DONE;
    case SS_RESUMED:
        return OPM_SETTLE_RESUME;
    case SS_DONE:
        return OPM_SETTLE_DONE;
    }
    return OPM_SETTLE_PENDING;
}

void opm_settle_resumed(struct opm_settle *s, op_status_t st)
{
    if (st == OP_OK && op_rsc_call_done(opm.rsc, s->c->rsc, s->seq, s->buf, s->bytes, false) ==
                           OP_OK) {
        s->done_by_switch = true;
        settled(s);
        return;
    }
    /* the group cannot take the call any more (killed, its lease gone):
     * waiting on it for the late peer would only spin */
    if (st != OP_OK && st != OP_ERR_TIMEOUT)
        op_rsc_give_up(opm.rsc, s->c->rsc);
    ask(s);
}

void opm_settle_free(struct opm_settle *s)
{
    if (s->have_asker)
        op_rsc_asker_close(&s->asker);
    s->have_asker = false;
    free(s->peers);
    s->peers = NULL;
}

/* The blocking call's driver over the same steps. */
void opm_settle_wait(struct opm_settle *s)
{
    enum opm_settle_ev ev;
    while ((ev = opm_settle_test(s)) != OPM_SETTLE_DONE) {
        if (ev == OPM_SETTLE_RESUME)
            opm_settle_resumed(s, op_inc_resume(s->c->client));
        else if (s->stage == SS_REDO)
            PMPI_Wait(&s->req, MPI_STATUS_IGNORE); /* test sees it done */
        else
            opm_settle_idle(s);
    }
    opm_settle_free(s);
}

/* A pause in a waiting loop: until an answer may be in, or 2 ms. */
void opm_settle_idle(const struct opm_settle *s)
{
    (void)op_io_wait_fd(s->have_asker ? s->asker.fd : -1, OP_IO_IN, op_io_deadline_in_ms(2));
}
