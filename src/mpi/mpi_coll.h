/* Internal to liboffpath_mpi, its fourth level: the blocking allreduce,
 * and the table of the nonblocking requests (requests.c: each kind of
 * request its own steps, behind struct opm_req_ops). */
#ifndef OFFPATH_MPI_COLL_H
#define OFFPATH_MPI_COLL_H

#include "mpi_node.h"

int opm_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype, MPI_Op op,
                  MPI_Comm comm);
/* allreduce.c's pieces that the nonblocking path shares: the level a call
 * of `bytes` takes (Socket mode's wide one above its size), why a call
 * cannot go through the switch (enum opm_reason, or -1 when it can), and a
 * leader's call on the call sequence: begin (false: it could not keep its
 * input and gave the call up before sending anything: settle it), the end
 * of its switch step (false: settle it), the end of a call made with the
 * leaders' MPI (a dead communicator's). */
struct opm_comm *opm_level(struct opm_comm *c, size_t bytes);
int opm_eligible(const struct opm_comm *c, int count, int type, int op, uint64_t bytes);
bool opm_leaders_begin(struct opm_comm *c, const void *buf, size_t bytes);
bool opm_leaders_ok(struct opm_comm *c, op_status_t st, const void *buf, size_t bytes);
void opm_leaders_mpi_done(struct opm_comm *c);

/* ---- the requests (requests.c). Generalized requests the caller's own
 * MPI_Wait/Test family completes: the wrappers advance them on the
 * caller's thread ("lock held": progress.c's lock). */
enum opm_moved { OPM_NONE, OPM_MOVED, OPM_GONE };
struct opm_req;
struct opm_req_ops {
    /* one step if it can; OPM_GONE: done (the table completes it) */
    enum opm_moved (*step)(struct opm_req *r);
    /* it waits on nothing but the progress thread's switch step */
    bool (*switch_only)(const struct opm_req *r);
};
struct opm_req {
    struct opm_req *next, *prev; /* every request of the process, oldest first */
    const struct opm_req_ops *ops;
    MPI_Request greq; /* the caller's handle */
    MPI_Comm comm;
    struct opm_comm *c;
    bool persistent; /* greq is the MPI's persistent request, inactive meanwhile */
    bool complete;   /* persistent: done, not yet reported */
};
/* A generalized request for r (unless persistent: the caller set greq):
 * MPI_SUCCESS or the MPI's error. */
int opm_req_greq(struct opm_req *r);
/* The same, then r in the table (taking the lock); r not linked on an error. */
int opm_req_start(struct opm_req *r);
void opm_req_link(struct opm_req *r);           /* lock held */
struct opm_req *opm_req_first(void);            /* lock held: for a kind's own scans */
struct opm_req *opm_req_find(MPI_Request req);  /* lock held */
bool opm_req_pending(MPI_Request req);          /* lock held: ours and not complete */
void opm_iar_test(void);                        /* one pass over every request */
void opm_iar_wait(const MPI_Request *reqs, int n); /* until ours among them are done */
void opm_iar_idle(void);                        /* a pause in a polling loop */
void opm_iar_drain(MPI_Comm comm);              /* every request on comm done */
void iar_advance(void);                         /* lock held: every request as far as it goes */
void iar_reap(MPI_Request req);                 /* lock held: a completed one is reported */
bool iar_any_running(const MPI_Request *reqs, int n); /* lock held */

#endif
