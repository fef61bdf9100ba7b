/* Internal to liboffpath_mpi, its third level: a node's steps (shared
 * memory or the MPI), Host mode's leaders, the settling of a call that did
 * not finish, and the progress thread. */
#ifndef OFFPATH_MPI_NODE_H
#define OFFPATH_MPI_NODE_H

#include "mpi_comm.h"

void opm_node_setup(struct opm_comm *c);
void opm_node_free(struct opm_comm *c);
int opm_node_reduce(struct opm_comm *c, const void *sendbuf, void *recvbuf, int count,
                    MPI_Datatype dtype, MPI_Op op, int type, int code);
int opm_node_bcast(struct opm_comm *c, void *buf, int count, MPI_Datatype dtype, size_t bytes);

bool opm_host_join(struct opm_comm *c);
op_status_t opm_host_allreduce(struct opm_comm *c, void *buf, int count, int type, int code);
void opm_host_free(struct opm_comm *c);
void opm_host_finalize(void); /* collective over COMM_WORLD */

/* settle.c: a leader's call that did not finish, settled with the other
 * leaders (offpath/rescue.h) in steps that never block. RESUME: wait on the
 * switch again (a peer is late): resume the call, then report how it ended
 * (opm_settle_resumed). DONE: the call is complete and counted. */
enum opm_settle_ev { OPM_SETTLE_PENDING, OPM_SETTLE_DONE, OPM_SETTLE_RESUME };
enum opm_settle_stage { SS_ASK, SS_FETCH, SS_HOLD, SS_RESUMED, SS_REDO, SS_DONE };
struct opm_settle {
    struct opm_comm *c;
    void *buf;
    int count;
    MPI_Datatype dtype;
    MPI_Op op;
    size_t bytes;
    uint64_t seq, began, hold_until;
    enum opm_settle_stage stage;
    bool have_asker, waited, done_by_switch;
    struct op_rsc_peer *peers;
    struct op_rsc_ask q;
    struct op_rsc_asker asker;
    MPI_Request req; /* the redo */
};
void opm_settle_start(struct opm_settle *s, struct opm_comm *c, void *buf, int count,
                      MPI_Datatype dtype, MPI_Op op, size_t bytes, uint64_t began);
enum opm_settle_ev opm_settle_test(struct opm_settle *s);
void opm_settle_resumed(struct opm_settle *s, op_status_t st);
void opm_settle_idle(const struct opm_settle *s);
void opm_settle_wait(struct opm_settle *s); /* the blocking call's: test until done */
void opm_settle_free(struct opm_settle *s);

/* progress.c: the thread, and the lock the requests share with it */
void opm_prog_lock(void);
void opm_prog_unlock(void);
/* lock held: a switch step is under way; sweep (the nonblocking path's,
 * given from above) is what the thread runs after each progress */
void opm_prog_started(void (*sweep)(void));
void opm_prog_ended(void);             /* lock held: one ended (wakes opm_prog_sleep) */
void opm_prog_sleep(uint64_t max_ns);  /* lock held: until a step ends, at most max_ns */
void opm_prog_stop(void);

#endif
