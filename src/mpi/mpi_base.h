/* Internal to liboffpath_mpi, its first level: the library's state,
 * configuration, identity and the MPI's types and ops in our codes. Built
 * once per MPI (OpenMPI and MPICH differ in ABI), from the same sources.
 *
 * The library's files are in levels, each including the header of its own
 * level (which includes the ones below): mpi_base.h (env.c, identity.c,
 * types.c), mpi_comm.h (setup.c), mpi_node.h (node.c, hostpath.c,
 * settle.c, progress.c), mpi_coll.h (allreduce.c, requests.c), mpi_nb.h
 * (iallreduce.c, alltoall.c, iar_persist.c, iar_requests.c), then wrap.c
 * over all of them. Calls go down only: what a level needs from above
 * (a communicator's parts, the progress thread's sweep, a request's steps)
 * it is given as functions. tests/check_layering.sh holds every file to
 * its level. */
#ifndef OFFPATH_MPI_BASE_H
#define OFFPATH_MPI_BASE_H

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
    uint32_t ip;          /* OFFPATH_IP: the node's one address (0: emulated 127.x) */
    uint32_t mtu;         /* OFFPATH_MTU: the links' (0: loopback's, no limit here) */
    char topology[1024];  /* OFFPATH_TOPOLOGY */
    uint64_t min_bytes, max_bytes;
    uint64_t socket_max_bytes; /* Socket mode: larger calls go by node */
    uint64_t deadline_ms, rto_us;
    uint64_t spin_us;     /* OFFPATH_SPIN_US: a blocking call's poll before it sleeps */
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
    uint16_t *peer_ports;     /* and their rescue services' ports */
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

struct opm_comm_parts;

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
    uint16_t port_base; /* this process's INC port; host path +1, rescue +2 */
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
    const struct opm_comm_parts *parts; /* mpi_comm.h: what the levels above add */
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

#endif
