/* MPI_Iallreduce through the switch, never blocking in the call: the same
 * path as MPI_Allreduce (node reduce to the leader, leaders through the
 * switch, node broadcast), each step started when the one before ends.
 *
 * The caller gets an MPI generalized request. Steps that need MPI (the node
 * steps as PMPI_Ireduce / PMPI_Ibcast, recovery, completing the request) run
 * on the caller's thread inside the wrapped MPI_Iallreduce, Wait and Test
 * calls, and never block there (a failed switch step recovers through
 * recover.c's nonblocking collectives); the switch step runs on the progress
 * thread (progress.c), so it overlaps with whatever the program computes
 * meanwhile.
 *
 * Order: MPI has every rank start a communicator's collectives in the same
 * order, so each level (struct opm_comm) numbers its requests; a request
 * takes its turn at the switch, and at the node broadcast, only after the
 * one numbered before it. Reduces and broadcasts go on two duplicates of the
 * node's communicator so that each carries its collectives in that order on
 * every rank, whenever each leader's switch step ends. Blocking calls wait
 * for a communicator's requests first (opm_iar_drain): they share its switch
 * group, its call count and its recovery. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_nb.h"
#include "offpath/wire.h"

/* OPM_REASONS, and one the blocking path does not have */
#define IAR_R_host_mode OPM_R_COUNT_
#define IAR_REASONS (OPM_R_COUNT_ + 1)


enum stage {
    S_REDUCE,      /* node reduce to the leader in flight */
    S_TURN_SWITCH, /* the leader waits for the request before it to leave the switch */
    S_SWITCH,      /* the progress thread drives it */
    S_SWITCH_DONE, /* ended (r->ok): the caller's thread goes on, or settles it */
    S_RECOVER,     /* it did not finish: settled with the other leaders (settle.c) */
    S_LEADERS,     /* the switch is gone: the leaders' step by MPI in flight */
    S_TURN_BCAST,  /* waits for the request before it to start its broadcast */
    S_BCAST,       /* node broadcast in flight */
};

/* An MPI_Iallreduce: a request of requests.c's table and its steps. */
struct iar {
    struct opm_req base; /* first: the table's */
    uint64_t seq;
    enum stage stage;
    op_status_t st;
    bool fell; /* the leaders' step went by MPI (the switch is gone) */
    bool ok;      /* the switch step ended with the result, counted */
    bool resumed; /* the switch step runs again while settling (a late peer) */
    uint64_t began;
    MPI_Request sub;
    struct opm_settle settle;
    const void *sendbuf;
    void *recvbuf;
    int count, type, code;
    MPI_Datatype dtype;
    MPI_Op op;
    size_t bytes;
};

static uint64_t n_calls, n_offloaded, n_fallback[IAR_REASONS];

static const struct opm_req_ops iar_ops;

static struct iar *iar_of(struct opm_req *r) { return (struct iar *)r; }

static void sweep(void);

static struct iar *find_turn(const struct opm_comm *c, uint64_t seq, enum stage stage)
{
    for (struct opm_req *q = opm_req_first(); q != NULL; q = q->next) {
        struct iar *r = iar_of(q);
        if (q->ops == &iar_ops && q->c == c && r->seq == seq && r->stage == stage)
            return r;
    }
    return NULL;
}

/* ---- the steps, with the lock held (no step blocks) */
static bool sub_done(struct iar *r)
{
    int flag = 1;
    if (r->sub != MPI_REQUEST_NULL)
        PMPI_Test(&r->sub, &flag, MPI_STATUS_IGNORE);
    return flag != 0;
}

static void start_switch(struct iar *r)
{
    r->began = op_now_ns();
    op_status_t st = OP_ERR_NOMEM; /* a leader that cannot keep its input gives up */
    if (opm_leaders_begin(r->base.c, r->recvbuf, r->bytes))
        st = op_inc_allreduce_start(r->base.c->client, r->recvbuf, r->recvbuf, (size_t)r->count,
                                    (unsigned)r->type, (unsigned)r->code);
    if (st == OP_OK) {
        r->stage = S_SWITCH;
        opm_prog_started(sweep);
        return;
    }
    r->st = st;
    r->stage = S_SWITCH_DONE;
}

/* The progress thread's part: steps that ended, and the next in line. */
static void sweep(void)
{
    for (struct opm_req *q = opm_req_first(); q != NULL; q = q->next) {
        struct iar *r = iar_of(q);
        if (q->ops != &iar_ops || q->complete || r->stage != S_SWITCH)
            continue;
        op_status_t st = op_inc_client_status(r->base.c->client);
        if (st == OP_INPROGRESS)
            continue;
        r->st = st;
        r->stage = S_SWITCH_DONE;
        opm_prog_ended();
        /* counted here, before the next call's step starts on the sequence */
        r->ok = !r->resumed && opm_leaders_ok(r->base.c, st, r->recvbuf, r->bytes);
        if (!r->ok)
            continue; /* the caller's thread settles it; nothing follows it here */
        struct iar *n = find_turn(r->base.c, ++r->base.c->iq.next_switch, S_TURN_SWITCH);
        if (n != NULL)
            start_switch(n);
    }
}

/* The leaders' step without the switch (a dead communicator's). */
static void leaders_by_mpi(struct iar *r)
{
    PMPI_Iallreduce(MPI_IN_PLACE, r->recvbuf, r->count, r->dtype, r->op, r->base.c->leaders, &r->sub);
    opm_leaders_mpi_done(r->base.c); /* on the sequence now: the next may post after it */
    r->fell = true;
    r->base.c->iq.next_switch++;
    r->stage = S_LEADERS;
}

static void leaders_end(struct iar *r)
{
    if (r->ok) {
        r->stage = S_TURN_BCAST;
        return;
    }
    if (r->resumed) {
        r->resumed = false;
        opm_settle_resumed(&r->settle, r->st);
    } else {
        opm_settle_start(&r->settle, r->base.c, r->recvbuf, r->count, r->dtype, r->op, r->bytes,
                         r->began);
    }
    r->stage = S_RECOVER;
}

/* One step of the settling; the switch runs again when a peer is late. */
static enum opm_moved settle_step(struct iar *r)
{
    enum opm_settle_ev ev = opm_settle_test(&r->settle);
    if (ev == OPM_SETTLE_PENDING)
        return OPM_NONE;
    if (ev == OPM_SETTLE_RESUME) {
        op_status_t st = op_inc_resume_start(r->base.c->client);
        if (st != OP_OK) {
            opm_settle_resumed(&r->settle, st);
            return OPM_MOVED;
        }
        r->resumed = true;
        r->stage = S_SWITCH;
        opm_prog_started(sweep);
        return OPM_MOVED;
    }
    opm_settle_free(&r->settle);
    r->fell = r->base.c->dead; /* redone without the switch */
    r->base.c->iq.next_switch++; /* settled: the next may use the leaders */
    r->stage = S_TURN_BCAST;
    return OPM_MOVED;
}

/* Counted as the blocking path counts (as far as this rank can tell). */
static enum opm_moved finish(struct iar *r)
{
    n_fallback[OPM_R_switch_gone] += r->base.c->is_leader && r->fell;
    n_offloaded += !(r->base.c->is_leader && r->fell);
    return OPM_GONE;
}

/* Moves r on by one step if it can (GONE: done, the table completes it). */
static enum opm_moved step(struct opm_req *req)
{
    struct iar *r = iar_of(req);
    struct opm_iq *q = &r->base.c->iq;
    switch (r->stage) {
    case S_REDUCE:
        if (!sub_done(r))
            return OPM_NONE;
        r->stage = r->base.c->is_leader ? S_TURN_SWITCH : S_TURN_BCAST;
        return OPM_MOVED;
    case S_TURN_SWITCH:
        if (q->next_switch != r->seq)
            return OPM_NONE;
        if (r->base.c->dead)
            leaders_by_mpi(r);
        else
            start_switch(r);
        return OPM_MOVED;
    case S_SWITCH:
        return OPM_NONE;
    case S_SWITCH_DONE:
        leaders_end(r);
        return OPM_MOVED;
    case S_RECOVER:
        return settle_step(r);
    case S_LEADERS:
        if (!sub_done(r))
            return OPM_NONE;
        r->stage = S_TURN_BCAST;
        return OPM_MOVED;
    case S_TURN_BCAST:
        if (q->next_bcast != r->seq)
            return OPM_NONE;
        q->next_bcast++;
        if (q->bc != MPI_COMM_NULL)
            PMPI_Ibcast(r->recvbuf, r->count, r->dtype, 0, q->bc, &r->sub);
        r->stage = S_BCAST;
        return OPM_MOVED;
    case S_BCAST:
        if (!sub_done(r))
            return OPM_NONE;
        return finish(r);
    }
    return OPM_NONE;
}

static bool switch_only(const struct opm_req *r)
{
    return ((const struct iar *)r)->stage == S_SWITCH;
}

static const struct opm_req_ops iar_ops = {.step = step, .switch_only = switch_only};

static void free_queue(struct opm_comm *c)
{
    if (c == NULL || !c->iq.open)
        return;
    if (c->iq.red != MPI_COMM_NULL)
        PMPI_Comm_free(&c->iq.red);
    if (c->iq.bc != MPI_COMM_NULL)
        PMPI_Comm_free(&c->iq.bc);
    c->iq = (struct opm_iq){.open = false};
}

/* Collective, as MPI_Comm_free is: every rank has the same queues. */
void opm_iar_comm_free(MPI_Comm comm)
{
    opm_iar_drain(comm);
    struct opm_comm *c = opm_comm_get(comm);
    if (c != NULL)
        free_queue(c->wide);
    free_queue(c);
}

void opm_iar_finalize(void)
{
    opm_iar_drain(MPI_COMM_NULL); /* a correct program has none left */
    opm_prog_stop();
    opm_iar_comm_free(MPI_COMM_WORLD);
}

void opm_iar_summary(void)
{
    if (n_calls == 0)
        return;
    uint64_t fell = 0;
    char why[512] = "";
    size_t off = 0;
    for (int r = 0; r < IAR_REASONS; r++) {
        fell += n_fallback[r];
        if (n_fallback[r] && off < sizeof(why))
            off += (size_t)snprintf(why + off, sizeof(why) - off, "%s%s %llu", off ? ", " : "",
                                    r == IAR_R_host_mode ? "host mode"
                                                         : opm_reason_text((unsigned)r),
                                    (unsigned long long)n_fallback[r]);
    }
    fprintf(stderr, "offpath: %llu iallreduce calls: %llu offloaded, %llu fell back%s%s%s\n",
            (unsigned long long)n_calls, (unsigned long long)n_offloaded,
            (unsigned long long)fell, fell ? " (" : "", why, fell ? ")" : "");
}

/* ---- starting a call */
static struct opm_iq *queue_of(struct opm_comm *c)
{
    struct opm_iq *q = &c->iq;
    if (q->open)
        return q;
    q->red = q->bc = MPI_COMM_NULL;
    /* collective over the node: every rank's first nonblocking call on this
     * level is the same call, since every rank decides alike */
    if (c->local_size > 1) {
        PMPI_Comm_dup(c->local, &q->red);
        PMPI_Comm_dup(c->local, &q->bc);
    }
    q->open = true;
    return q;
}

static int reason(const struct opm_comm *c, int count, int type, int code, size_t bytes)
{
    int why = opm_eligible(c, count, type, code, bytes);
    if (why < 0 && c->host != NULL)
        return IAR_R_host_mode; /* hostar has no nonblocking call */
    return why;
}

static void node_reduce(struct iar *r, const struct opm_iq *q)
{
    const void *in = r->sendbuf == MPI_IN_PLACE ? r->recvbuf : r->sendbuf;
    if (q->red != MPI_COMM_NULL)
        PMPI_Ireduce(r->base.c->is_leader && r->sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : in,
                     r->recvbuf, r->count, r->dtype, r->op, 0, q->red, &r->sub);
    else if (in != r->recvbuf)
        memcpy(r->recvbuf, in, r->bytes);
}

/* persistent: *req is the MPI's persistent request being started (the
 * MPI's own allreduce runs it when the switch cannot take the call). */
int iar_start(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype,
                      MPI_Op op, MPI_Comm comm, MPI_Request *req, bool persistent)
{
    int type = opm_type_code(dtype), code = opm_op_code(op);
    size_t bytes = type >= 0 && count > 0 ? (size_t)count * op_red_type_size((unsigned)type) : 0;
    struct opm_comm *c = opm_level(opm_comm_get(comm), bytes);
    n_calls++;
    int why = reason(c, count, type, code, bytes);
    if (why >= 0) {
        n_fallback[why]++;
        return persistent ? PMPI_Start(req)
                          : PMPI_Iallreduce(sendbuf, recvbuf, count, dtype, op, comm, req);
    }
    struct opm_iq *q = queue_of(c);
    struct iar *r = calloc(1, sizeof(*r));
    /* The other ranks took this call to the switch: going the MPI's way
     * alone would pair collectives wrongly, so the call fails here as the
     * MPI's own fails without memory (its error handler decides: fatal by
     * default, which takes the job down rather than leaving it waiting). */
    if (r == NULL)
        return opm_no_memory(comm);
    *r = (struct iar){.base = {.ops = &iar_ops, .comm = comm, .c = c,
                               .persistent = persistent, .greq = *req},
                      .stage = S_REDUCE, .sub = MPI_REQUEST_NULL, .sendbuf = sendbuf,
                      .recvbuf = recvbuf, .count = count, .type = type, .code = code,
                      .dtype = dtype, .op = op, .bytes = bytes};
    int rc = opm_req_greq(&r->base);
    if (rc != MPI_SUCCESS) {
        free(r);
        return rc;
    }
    *req = r->base.greq;
    opm_prog_lock();
    r->seq = q->issued++;
    node_reduce(r, q);
    opm_req_link(&r->base);
    iar_advance(); /* a one-rank node's leader is at the switch before returning */
    opm_prog_unlock();
    return MPI_SUCCESS;
}

int opm_iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req)
{
    return iar_start(sendbuf, recvbuf, count, dtype, op, comm, req, false);
}

