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
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iar_internal.h"
#include "offpath/wire.h"

/* OPM_REASONS, and one the blocking path does not have */
#define IAR_R_host_mode OPM_R_COUNT_
#define IAR_REASONS (OPM_R_COUNT_ + 1)

#define IDLE_NS (2 * OP_NS_PER_MS) /* longest sleep while only switch steps run */

enum stage {
    S_REDUCE,      /* node reduce to the leader in flight */
    S_TURN_SWITCH, /* the leader waits for the request before it to leave the switch */
    S_SWITCH,      /* the progress thread drives it */
    S_SWITCH_DONE, /* ended (r->ok): the caller's thread goes on, or settles it */
    S_RECOVER,     /* it did not finish: settled with the other leaders (settle.c) */
    S_LEADERS,     /* the switch is gone: the leaders' step by MPI in flight */
    S_TURN_BCAST,  /* waits for the request before it to start its broadcast */
    S_BCAST,       /* node broadcast in flight */
    S_COMPLETE,    /* persistent (MPI_Allreduce_init): done, not yet reported */
    S_A2A,         /* an MPI_Ialltoall: the agent's workers move it (alltoall.c) */
};

/* One level's queue: the two node communicators and the turns. */
struct iar {
    struct iar *next, *prev; /* every request of the process, oldest first */
    MPI_Request greq;        /* the caller's handle */
    MPI_Comm comm;
    struct opm_comm *c;
    uint64_t seq;
    enum stage stage;
    op_status_t st;
    bool fell; /* the leaders' step went by MPI (the switch is gone) */
    bool ok;      /* the switch step ended with the result, counted */
    bool resumed; /* the switch step runs again while settling (a late peer) */
    uint64_t began;
    bool persistent; /* greq is the MPI's persistent request, inactive meanwhile */
    MPI_Request sub;
    struct opm_settle settle;
    const void *sendbuf;
    void *recvbuf;
    int count, type, code;
    MPI_Datatype dtype;
    MPI_Op op;
    size_t bytes;
};

static struct iar *head, *tail;
static uint64_t n_calls, n_offloaded, n_fallback[IAR_REASONS];

/* ---- generalized request callbacks: the request carries no state of ours
 * once complete, so they need none */
static int query_fn(void *extra, MPI_Status *status)
{
    (void)extra;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int free_fn(void *extra)
{
    (void)extra;
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS; /* a collective cannot be cancelled: it just completes */
}

/* ---- the list */
static void link_tail(struct iar *r)
{
    r->prev = tail;
    r->next = NULL;
    if (tail != NULL)
        tail->next = r;
    else
        head = r;
    tail = r;
}

static void unlink_req(struct iar *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        head = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    else
        tail = r->prev;
}

static struct iar *find(MPI_Request req)
{
    for (struct iar *r = head; r != NULL; r = r->next)
        if (r->greq == req)
            return r;
    return NULL;
}

static struct iar *find_turn(const struct opm_comm *c, uint64_t seq, enum stage stage)
{
    for (struct iar *r = head; r != NULL; r = r->next)
        if (r->c == c && r->seq == seq && r->stage == stage)
            return r;
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
    if (opm_leaders_begin(r->c, r->recvbuf, r->bytes))
        st = op_inc_allreduce_start(r->c->client, r->recvbuf, r->recvbuf, (size_t)r->count,
                                    (unsigned)r->type, (unsigned)r->code);
    if (st == OP_OK) {
        r->stage = S_SWITCH;
        opm_prog_started();
        return;
    }
    r->st = st;
    r->stage = S_SWITCH_DONE;
}

/* The progress thread's part: steps that ended, and the next in line. */
void opm_iar_sweep(void)
{
    for (struct iar *r = head; r != NULL; r = r->next) {
        if (r->stage != S_SWITCH)
            continue;
        op_status_t st = op_inc_client_status(r->c->client);
        if (st == OP_INPROGRESS)
            continue;
        r->st = st;
        r->stage = S_SWITCH_DONE;
        opm_prog_ended();
        /* counted here, before the next call's step starts on the sequence */
        r->ok = !r->resumed && opm_leaders_ok(r->c, st, r->recvbuf, r->bytes);
        if (!r->ok)
            continue; /* the caller's thread settles it; nothing follows it here */
        struct iar *n = find_turn(r->c, ++r->c->iq.next_switch, S_TURN_SWITCH);
        if (n != NULL)
            start_switch(n);
    }
}

enum moved { NONE, MOVED, GONE };

/* The leaders' step without the switch (a dead communicator's). */
static void leaders_by_mpi(struct iar *r)
{
    PMPI_Iallreduce(MPI_IN_PLACE, r->recvbuf, r->count, r->dtype, r->op, r->c->leaders, &r->sub);
    opm_leaders_mpi_done(r->c); /* on the sequence now: the next may post after it */
    r->fell = true;
    r->c->iq.next_switch++;
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
        opm_settle_start(&r->settle, r->c, r->recvbuf, r->count, r->dtype, r->op, r->bytes,
                         r->began);
    }
    r->stage = S_RECOVER;
}

/* One step of the settling; the switch runs again when a peer is late. */
static enum moved settle_step(struct iar *r)
{
    enum opm_settle_ev ev = opm_settle_test(&r->settle);
    if (ev == OPM_SETTLE_PENDING)
        return NONE;
    if (ev == OPM_SETTLE_RESUME) {
        op_status_t st = op_inc_resume_start(r->c->client);
        if (st != OP_OK) {
            opm_settle_resumed(&r->settle, st);
            return MOVED;
        }
        r->resumed = true;
        r->stage = S_SWITCH;
        opm_prog_started();
        return MOVED;
    }
    opm_settle_free(&r->settle);
    r->fell = r->c->dead; /* redone without the switch */
    r->c->iq.next_switch++; /* settled: the next may use the leaders */
    r->stage = S_TURN_BCAST;
    return MOVED;
}

static void finish(struct iar *r)
{
    if (r->stage != S_A2A) /* (an MPI_Ialltoall is counted by alltoall.c) */
        n_fallback[OPM_R_switch_gone] += r->c->is_leader && r->fell;
    if (r->stage != S_A2A && !(r->c->is_leader && r->fell))
        n_offloaded++; /* as far as this rank can tell, like the blocking path */
    if (r->persistent) {
        r->stage = S_COMPLETE; /* the next Wait or Test of it reports it */
        return;
    }
    unlink_req(r);
    PMPI_Grequest_complete(r->greq);
    free(r);
}

/* A completed persistent request is reported: its handle is the MPI's own
 * again (inactive: the MPI's Wait and Test return it at once). */
void iar_reap(MPI_Request req)
{
    struct iar *r = find(req);
    if (r == NULL || r->stage != S_COMPLETE)
        return;
    unlink_req(r);
    free(r);
}

static bool pending(MPI_Request req)
{
    const struct iar *r = req != MPI_REQUEST_NULL ? find(req) : NULL;
    return r != NULL && r->stage != S_COMPLETE;
}

/* Moves r on by one step if it can (GONE: it completed and is freed). */
static enum moved step(struct iar *r)
{
    struct opm_iq *q = &r->c->iq;
    switch (r->stage) {
    case S_REDUCE:
        if (!sub_done(r))
            return NONE;
        r->stage = r->c->is_leader ? S_TURN_SWITCH : S_TURN_BCAST;
        return MOVED;
    case S_TURN_SWITCH:
        if (q->next_switch != r->seq)
            return NONE;
        if (r->c->dead)
            leaders_by_mpi(r);
        else
            start_switch(r);
        return MOVED;
    case S_SWITCH:
        return NONE;
    case S_SWITCH_DONE:
        leaders_end(r);
        return MOVED;
    case S_RECOVER:
        return settle_step(r);
    case S_LEADERS:
        if (!sub_done(r))
            return NONE;
        r->stage = S_TURN_BCAST;
        return MOVED;
    case S_TURN_BCAST:
        if (q->next_bcast != r->seq)
            return NONE;
        q->next_bcast++;
        if (q->bc != MPI_COMM_NULL)
            PMPI_Ibcast(r->recvbuf, r->count, r->dtype, 0, q->bc, &r->sub);
        r->stage = S_BCAST;
        return MOVED;
    case S_BCAST:
        if (!sub_done(r))
            return NONE;
        if (r->persistent) {
            finish(r);
            return NONE;
        }
        finish(r);
        return GONE;
    case S_COMPLETE:
        return NONE;
    case S_A2A:
        if (!opm_a2a_done(r->c))
            return NONE;
        (void)opm_a2a_end(r->c, r->recvbuf, r->comm); /* an error raised there */
        finish(r);
        return GONE;
    }
    return NONE;
}

/* Every request as far as it goes now; lock held. A request's turn may
 * come from one later in the list (another level's), so walk until nothing
 * moves. Only this thread adds or removes requests. */
static void advance_all(void)
{
    bool moved = true;
    while (moved) {
        moved = false;
        for (struct iar *r = head, *next; r != NULL; r = next) {
            next = r->next;
            enum moved m;
            while ((m = step(r)) == MOVED)
                moved = true;
            moved |= m == GONE;
        }
    }
}

/* Nothing to do right now. While only switch steps run there is nothing for
 * this thread but to wait for one to end; the MPI still gets a call, since a
 * peer may need this rank's progress to reach its own switch step. */
static void idle_locked(void)
{
    bool only_switch = true;
    for (const struct iar *r = head; r != NULL && only_switch; r = r->next)
        only_switch = r->stage == S_SWITCH || r->stage == S_COMPLETE;
    if (only_switch && head != NULL) {
        opm_prog_sleep(IDLE_NS);
    } else {
        opm_prog_unlock();
        sched_yield();
        opm_prog_lock();
    }
    int flag;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

/* ---- the wrappers' entry points */
typedef bool (*pending_fn)(const void *arg, int n);

static void wait_while(pending_fn pending, const void *arg, int n)
{
    opm_prog_lock();
    advance_all();
    while (pending(arg, n)) {
        idle_locked();
        advance_all();
    }
    opm_prog_unlock();
}

static bool any_of(const void *arg, int n)
{
    const MPI_Request *reqs = arg;
    for (int i = 0; i < n; i++)
        if (pending(reqs[i]))
            return true;
    return false;
}

static bool any_on(const void *arg, int n)
{
    (void)n;
    const MPI_Comm *comm = arg;
    for (const struct iar *r = head; r != NULL; r = r->next)
        if ((*comm == MPI_COMM_NULL || r->comm == *comm) && r->stage != S_COMPLETE)
            return true;
    return false;
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

void opm_iar_test(void)
{
    opm_prog_lock();
    advance_all();
    opm_prog_unlock();
}

void opm_iar_wait(const MPI_Request *reqs, int n) { wait_while(any_of, reqs, n); }

/* ---- for iar_requests.c and iar_persist.c (iar_internal.h) */
enum iar_kind iar_kind(MPI_Request req)
{
    const struct iar *r = req != MPI_REQUEST_NULL ? find(req) : NULL;
    if (r != NULL)
        return r->stage == S_COMPLETE ? IAR_COMPLETE : IAR_RUNNING;
    return req != MPI_REQUEST_NULL && iar_ours_idle(req) ? IAR_IDLE : IAR_MPI;
}

void iar_advance(void) { advance_all(); }

bool iar_any_running(const MPI_Request *reqs, int n) { return any_of(reqs, n); }

void opm_iar_idle(void)
{
    opm_prog_lock();
    idle_locked();
    opm_prog_unlock();
}

void opm_iar_drain(MPI_Comm comm)
{
    if (head != NULL) /* only this thread adds requests */
        wait_while(any_on, &comm, 0);
}

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
        PMPI_Ireduce(r->c->is_leader && r->sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : in,
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
    *r = (struct iar){.comm = comm, .c = c, .stage = S_REDUCE, .sub = MPI_REQUEST_NULL,
                      .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count, .type = type,
                      .code = code, .dtype = dtype, .op = op, .bytes = bytes,
                      .persistent = persistent, .greq = *req};
    int rc = persistent ? MPI_SUCCESS
                        : PMPI_Grequest_start(query_fn, free_fn, cancel_fn, NULL, &r->greq);
    if (rc != MPI_SUCCESS) {
        free(r);
        return rc;
    }
    *req = r->greq;
    opm_prog_lock();
    r->seq = q->issued++;
    node_reduce(r, q);
    link_tail(r);
    advance_all(); /* a one-rank node's leader is at the switch before returning */
    opm_prog_unlock();
    return MPI_SUCCESS;
}

int opm_ia2a_request(struct opm_comm *c, void *recvbuf, MPI_Comm comm, MPI_Request *req)
{
    struct iar *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        (void)opm_a2a_end(c, recvbuf, comm); /* the others run it: finish it here */
        return opm_no_memory(comm);
    }
    *r = (struct iar){.comm = comm, .c = c, .stage = S_A2A, .sub = MPI_REQUEST_NULL,
                      .recvbuf = recvbuf};
    int rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, NULL, &r->greq);
    if (rc != MPI_SUCCESS) {
        (void)opm_a2a_end(c, recvbuf, comm);
        free(r);
        return rc;
    }
    *req = r->greq;
    opm_prog_lock();
    link_tail(r);
    opm_prog_unlock();
    return MPI_SUCCESS;
}

int opm_iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req)
{
    return iar_start(sendbuf, recvbuf, count, dtype, op, comm, req, false);
}

