/* The nonblocking requests of the process: one list of every kind (an
 * MPI_Iallreduce through the switch, an MPI_Ialltoall by the agent's
 * workers), each moved on by its kind's steps (struct opm_req_ops). The
 * caller's thread advances them inside the wrapped calls and completes
 * them as generalized requests; persistent ones stay listed, complete,
 * until their Wait or Test reports them. Only the caller's thread adds or
 * removes requests; progress.c's thread reads the list under the lock. */
#include <sched.h>
#include <stdlib.h>

#include "mpi_coll.h"

#define IDLE_NS (2 * OP_NS_PER_MS) /* longest sleep while only switch steps run */

static struct opm_req *head, *tail;

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
void opm_req_link(struct opm_req *r)
{
    r->prev = tail;
    r->next = NULL;
    if (tail != NULL)
        tail->next = r;
    else
        head = r;
    tail = r;
}

static void unlink_req(struct opm_req *r)
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

struct opm_req *opm_req_first(void) { return head; }

struct opm_req *opm_req_find(MPI_Request req)
{
    for (struct opm_req *r = head; req != MPI_REQUEST_NULL && r != NULL; r = r->next)
        if (r->greq == req)
            return r;
    return NULL;
}

int opm_req_greq(struct opm_req *r)
{
    return r->persistent ? MPI_SUCCESS
                         : PMPI_Grequest_start(query_fn, free_fn, cancel_fn, NULL, &r->greq);
}

int opm_req_start(struct opm_req *r)
{
    int rc = opm_req_greq(r);
    if (rc == MPI_SUCCESS) {
        opm_prog_lock();
        opm_req_link(r);
        opm_prog_unlock();
    }
    return rc;
}

/* Done: a persistent request waits to be reported, any other completes. */
static void complete(struct opm_req *r)
{
    if (r->persistent) {
        r->complete = true; /* the next Wait or Test of it reports it */
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
    struct opm_req *r = opm_req_find(req);
    if (r == NULL || !r->complete)
        return;
    unlink_req(r);
    free(r);
}

bool opm_req_pending(MPI_Request req)
{
    const struct opm_req *r = opm_req_find(req);
    return r != NULL && !r->complete;
}

/* Every request as far as it goes now; lock held. A request's turn may
 * come from one later in the list (another level's), so walk until nothing
 * moves. */
static void advance_all(void)
{
    bool moved = true;
    while (moved) {
        moved = false;
        for (struct opm_req *r = head, *next; r != NULL; r = next) {
            next = r->next;
            enum opm_moved m = OPM_NONE;
            while (!r->complete && (m = r->ops->step(r)) == OPM_MOVED)
                moved = true;
            if (m == OPM_GONE) {
                complete(r);
                moved = true;
            }
        }
    }
}

/* Nothing to do right now. While only switch steps run there is nothing for
 * this thread but to wait for one to end; the MPI still gets a call, since a
 * peer may need this rank's progress to reach its own switch step. */
static void idle_locked(void)
{
    bool only_switch = true;
    for (const struct opm_req *r = head; r != NULL && only_switch; r = r->next)
        only_switch = r->complete || r->ops->switch_only(r);
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
        if (opm_req_pending(reqs[i]))
            return true;
    return false;
}

static bool any_on(const void *arg, int n)
{
    (void)n;
    const MPI_Comm *comm = arg;
    for (const struct opm_req *r = head; r != NULL; r = r->next)
        if ((*comm == MPI_COMM_NULL || r->comm == *comm) && !r->complete)
            return true;
    return false;
}

void opm_iar_test(void)
{
    opm_prog_lock();
    advance_all();
    opm_prog_unlock();
}

void opm_iar_wait(const MPI_Request *reqs, int n) { wait_while(any_of, reqs, n); }

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
