/* Internal to liboffpath_mpi: the PMPI library's state. Built once per MPI
 * (OpenMPI and MPICH differ in ABI), from the same sources. */
#ifndef OFFPATH_OPMPI_H
#define OFFPATH_OPMPI_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "offpath/agent.h"
#include "offpath/hostar.h"
#include "offpath/inc.h"
#include "offpath/mode.h" /* OP_MODE_HOST: hostpath.c */
#include "offpath/rescue.h"
#include "offpath/shmcoll.h"
#include "offpath/topo.h"


#define OPM_MAX_SOCKETS 16 /* a node's socket groups are told apart by node * 16 + socket */

/* Why a call did not go through the switch; one counter each. */
#define OPM_REASONS(X)                                                                             \
    X(mode_off, "offpath off")                                                                     \
    X(one_node, "one node")                                                                        \
    X(not_joined, "switch refused or unreachable")                                                 \
    X(switch_gone, "switch unreachable")                                                                  \
    X(unsupported_type, "unsupported type")                                                        \
    X(unsupported_op, "unsupported op")                                                            \
    X(too_small, "too small")                                                                      \
    X(too_large, "too large")

enum opm_reason {
#define OPM_ENUM_(n, t) OPM_R_##n,
    OPM_REASONS(OPM_ENUM_)
#undef OPM_ENUM_
        OPM_R_COUNT_
};

struct opm_config {
    enum op_mode mode;
    int ppn, sockets;     /* emulation: ranks per node, sockets per node (0: detect) */
    int node, socket;     /* explicit identity (-1: derive) */
    uint32_t net;         /* emulated addresses 127.<net>.<node+1>.<local+1> */
    uint16_t port;
    uint32_t switch_ip;   /* OFFPATH_SWITCH: one TOR for every rank */
    char topology[1024];  /* OFFPATH_TOPOLOGY */
    uint64_t min_bytes, max_bytes;
    uint64_t socket_max_bytes; /* Socket mode: larger calls go by node */
    uint64_t deadline_ms, rto_us;
    int verbose;
    uint32_t job_id;
    bool shm;           /* OFFPATH_SHM: node steps through shared memory */
    uint64_t shm_slot;  /* OFFPATH_SHM_SLOT: bytes per hand-over */
    bool udp_batching;  /* OFFPATH_UDP_BATCHING (not 0): the leaders' sockets */
    /* Host mode (hostpath.c): OFFPATH_DROP_RATE and OFFPATH_DUP_RATE injected
     * on what the leaders send, OFFPATH_HOST_RING_BYTES where the ring starts */
    double host_drop_rate, host_dup_rate;
    uint64_t host_ring_bytes;
    /* OFFPATH_ALLTOALL=agent: MPI_Alltoall by the agent's worker threads
     * (alltoall.c), OFFPATH_ALLTOALL_THREADS of them a rank */
    bool alltoall_agent;
    uint32_t alltoall_threads;
    bool alltoall_pinned; /* OFFPATH_ALLTOALL_CPU: the workers' CPU */
    int alltoall_cpu;
};

/* A level's nonblocking calls (iallreduce.c). Held by value in opm_comm:
 * its first call is collective over the node (the duplicates), so nothing
 * in it may fail for want of memory on one rank only. */
struct opm_iq {
    bool open;        /* the first nonblocking call made the duplicates */
    MPI_Comm red, bc; /* duplicates of c->local (MPI_COMM_NULL with one rank) */
    uint64_t issued, next_switch, next_bcast;
};

/* What a communicator carries (as an MPI attribute). */
struct opm_comm {
    enum op_mode mode; /* as it was when the communicator was created */
    MPI_Comm local;   /* my node's (or socket's) ranks; rank 0 is the leader */
    MPI_Comm leaders; /* the leaders; MPI_COMM_NULL on the others */
    int local_size;
    int n_leaders;
    bool is_leader;
    bool inc_ok;   /* every leader joined: calls may use the switch */
    bool dead;     /* a deadline expired: leaders reduce over `leaders` by PMPI */
    uint16_t ops, types; /* what the switches support */
    struct op_shm_group *shm; /* the node steps; NULL: PMPI over `local` */
    struct opm_comm *wide;    /* Socket mode: the node level, for large calls */
    struct op_inc_client *client;
    struct op_har_client *host; /* Host mode: instead of client */
    MPI_Comm handle;     /* the communicator this state is attached to */
    struct opm_comm *older, *newer; /* opm.newest's list: live communicators */
    uint64_t calls;      /* allreduces through the leaders so far: the call sequence */
    struct op_rsc_entry *rsc; /* where this leader stands, for the others (rescue.h) */
    uint32_t *peer_ips;       /* the other leaders' addresses */
    int lrank;                /* this leader's rank among them */
    int n_peers;
    uint64_t rejoin_at, backoff; /* dead: the call that tries the switch again */
    void *input;              /* a copy of a call's input while it may need a redo */
    size_t input_cap;
    bool input_saved;         /* input holds this call's (else buf was never sent) */
    struct opm_iq iq;    /* its nonblocking calls (iallreduce.c) */
    struct op_a2a *a2a;  /* MPI_Alltoall's workers, for chunks of a2a_chunk bytes */
    size_t a2a_chunk;
    bool a2a_broken;     /* a call failed here: the next calls are the MPI's */
};

struct opm_state {
    bool initialized;
    struct opm_config cfg;
    struct op_topo topo;
    bool have_topo;
    int keyval;
    int self_keyval; /* on MPI_COMM_SELF: its deletion opens MPI_Finalize */
    struct opm_comm *newest; /* live communicators, newest first */
    int world_rank, world_size;
    struct op_inc_port *port; /* opened when this process first leads */
    struct op_har_port *host_port; /* Host mode's, likewise */
    struct op_rsc_svc *rsc;        /* answers the other leaders (rescue.h) */
    uint64_t host_c[OP_HAR_C_COUNT_]; /* Host mode counters of freed communicators */
    int node, local, node_size; /* this rank's node, index and the node's ranks */
    int socket, sockets;
    const char *node_from, *socket_from; /* how they were found */
    uint32_t my_ip, tor_ip;
    uint16_t tor_port;
    uint64_t calls, offloaded, fallback[OPM_R_COUNT_];
    uint64_t host_path; /* Host mode: leaders reduced host to host, no switch */
    uint64_t by_node; /* Socket mode calls above OFFPATH_SOCKET_MAX_BYTES */
    uint64_t comms, comms_joined;
    uint64_t comms_local, comms_shm; /* with several ranks a node; of those in shm */
    /* leaders' recovery events: calls that waited for a late peer (and the
     * longest such call) and results taken from a peer, each leader its
     * own; calls redone without the switch, communicators back on the
     * switch and the tries, counted once for all leaders (by the first) */
    uint64_t late_waits, longest_wait_ns, fetched, redone, rejoins, rejoin_tries;
    uint64_t a2a_calls, a2a_agent; /* MPI_(I)alltoall calls, and those the workers did */
    uint64_t ia2a_calls;           /* MPI_Ialltoall calls the workers took */
};

/* The PMPI interface passes no context, so the library's one state is a
 * process global; everything else hangs off communicators. */
extern struct opm_state opm;

void opm_config_load(struct opm_config *cfg);
void opm_identity(void); /* collective over COMM_WORLD */
const char *opm_reason_text(unsigned r);
/* A call that cannot go on for want of memory: MPI_ERR_NO_MEM raised on
 * comm's error handler (as the MPI raises its own), and returned. */
int opm_no_memory(MPI_Comm comm);
int opm_type_code(MPI_Datatype t);  /* enum op_red_type, -1 if none */
int opm_op_code(MPI_Op op);         /* enum op_red_op, -1 if none */

void opm_comm_setup(MPI_Comm comm);
bool opm_leader_join(struct opm_comm *c); /* collective over c->leaders */
uint16_t opm_rescue_port(void);
int opm_comm_delete(MPI_Comm comm, int keyval, void *attr, void *extra);
struct opm_comm *opm_comm_get(MPI_Comm comm);
void opm_comm_release_all(void); /* collective over COMM_WORLD, as MPI_Finalize */

void opm_node_setup(struct opm_comm *c);
void opm_node_free(struct opm_comm *c);
int opm_node_reduce(struct opm_comm *c, const void *sendbuf, void *recvbuf, int count,
                    MPI_Datatype dtype, MPI_Op op, int type, int code);
int opm_node_bcast(struct opm_comm *c, void *buf, int count, MPI_Datatype dtype, size_t bytes);

bool opm_host_join(struct opm_comm *c);
op_status_t opm_host_allreduce(struct opm_comm *c, void *buf, int count, int type, int code);
void opm_host_free(struct opm_comm *c);
void opm_host_finalize(void); /* collective over COMM_WORLD */

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

/* iallreduce.c: MPI_Iallreduce through the switch. Requests are generalized
 * requests the caller's own MPI_Wait/Test family completes: the wrappers
 * advance them (opm_iar_*) on the caller's thread; progress.c's thread
 * drives the switch steps and calls no MPI. */
int opm_iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req);
void opm_iar_test(void);                             /* one pass over every request */
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
void opm_iar_wait(const MPI_Request *reqs, int n);   /* until ours among them are done */
/* the MPI's Wait/Test family with offpath's requests among the MPI's */
bool opm_iar_any(const MPI_Request *reqs, int n);    /* is one of ours among them? */
void opm_iar_idle(void);                             /* a pause in a polling loop */
void opm_iar_drain(MPI_Comm comm);                   /* every request on comm done */
void opm_iar_comm_free(MPI_Comm comm);               /* before the MPI frees comm */
void opm_iar_finalize(void);
void opm_iar_summary(void);
void opm_a2a_free(struct opm_comm *c);
/* MPI_Ialltoall (alltoall.c) as a request of iallreduce.c's list: the
 * workers run it, done says when, end copies the result out (or raises
 * the error); the request completes in the caller's Wait or Test. */
bool opm_a2a_done(struct opm_comm *c);
int opm_a2a_end(struct opm_comm *c, void *recvbuf, MPI_Comm comm);
int opm_ia2a_request(struct opm_comm *c, void *recvbuf, MPI_Comm comm, MPI_Request *req);
void opm_a2a_summary(void); /* collective over COMM_WORLD */
void opm_iar_sweep(void); /* progress thread, lock held: switch steps that ended */

/* progress.c: the thread, and the lock it shares with iallreduce.c */
void opm_prog_lock(void);
void opm_prog_unlock(void);
void opm_prog_started(void);           /* lock held: a switch step is under way */
void opm_prog_ended(void);             /* lock held: one ended (wakes opm_prog_sleep) */
void opm_prog_sleep(uint64_t max_ns);  /* lock held: until a step ends, at most max_ns */
void opm_prog_stop(void);

#endif
