/* Internal to the nonblocking allreduce: iallreduce.c (requests and their
 * steps), iar_requests.c (the MPI's Wait/Test family over them) and
 * iar_persist.c (MPI_Allreduce_init). "lock held": progress.c's lock. */
#ifndef OFFPATH_IAR_INTERNAL_H
#define OFFPATH_IAR_INTERNAL_H

#include "opmpi.h"

/* What a request handle is to offpath. */
enum iar_kind {
    IAR_MPI,      /* the MPI's own */
    IAR_RUNNING,  /* ours, not complete */
    IAR_COMPLETE, /* a persistent one of ours, done, not yet reported */
    IAR_IDLE,     /* a persistent one offpath last ran: the MPI never started it */
};

enum iar_kind iar_kind(MPI_Request req); /* lock held */
void iar_advance(void);                  /* lock held: every request as far as it goes */
void iar_reap(MPI_Request req);          /* lock held: a completed one is reported */
bool iar_any_running(const MPI_Request *reqs, int n); /* lock held */
int iar_start(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype, MPI_Op op,
              MPI_Comm comm, MPI_Request *req, bool persistent);
bool iar_ours_idle(MPI_Request req); /* lock held (iar_persist.c) */

#endif
