/* Internal to liboffpath_mpi, its fifth level: the nonblocking calls
 * (MPI_Iallreduce through the switch, MPI_Ialltoall by the agent's
 * workers, MPI_Allreduce_init) as kinds of requests.c's requests, and the
 * MPI's Wait and Test family over a mix of the MPI's requests and ours. */
#ifndef OFFPATH_MPI_NB_H
#define OFFPATH_MPI_NB_H

#include "mpi_coll.h"

/* iallreduce.c: MPI_Iallreduce through the switch. Requests are generalized
 * requests the caller's own MPI_Wait/Test family completes: the wrappers
 * advance them (opm_iar_*) on the caller's thread; progress.c's thread
 * drives the switch steps and calls no MPI. */
int opm_iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req);
int opm_iar_waitall(int n, MPI_Request reqs[], MPI_Status sts[]);
int opm_iar_testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]);
int opm_iar_testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status);
int opm_iar_testsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                     MPI_Status statuses[]);
#if MPI_VERSION >= 4
int opm_allreduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype,
                       MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *req);
int opm_start(MPI_Request *req);
int opm_request_free(MPI_Request *req);
#endif
/* the MPI's Wait/Test family with offpath's requests among the MPI's */
bool opm_iar_any(const MPI_Request *reqs, int n);    /* is one of ours among them? */
void opm_iar_comm_free(MPI_Comm comm);               /* before the MPI frees comm */
void opm_iar_finalize(void);
void opm_iar_summary(void);
void opm_a2a_free(struct opm_comm *c);
void opm_a2a_summary(void); /* collective over COMM_WORLD */

/* What a request handle is to offpath. */
enum iar_kind {
    IAR_MPI,      /* the MPI's own */
    IAR_RUNNING,  /* ours, not complete */
    IAR_COMPLETE, /* a persistent one of ours, done, not yet reported */
    IAR_IDLE,     /* a persistent one offpath last ran: the MPI never started it */
};

enum iar_kind iar_kind(MPI_Request req); /* lock held */
int iar_start(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype, MPI_Op op,
              MPI_Comm comm, MPI_Request *req, bool persistent);
bool iar_ours_idle(MPI_Request req); /* lock held (iar_persist.c) */

#endif
