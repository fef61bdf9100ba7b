/* offpath model: the in-network Allreduce against the host's at scale, on
 * SimGrid. A platform (hosts with PPN ranks and sockets, TOR and SPINE
 * switches, links) is written as a SimGrid platform; the INC protocol runs as
 * S4U actors (one per leader, one per switch) and the host baseline as one
 * actor per node following the MPI ranks' schedule. What happens between a
 * node's ranks (shared memory) is a calibrated closed form.
 *
 * Every simulation runs in a child process: SimGrid's engine is one per
 * process, so the caller can run many platforms one after another. Built
 * without SimGrid, op_model_simulate returns OP_ERR_UNSUPPORTED. */
#ifndef OFFPATH_MODEL_H
#define OFFPATH_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "offpath/common.h"

/* A cluster and its switches. Times in seconds, bandwidth in bytes/s. */
struct op_model_platform {
    char name[32];
    double link_bw;        /* node <-> TOR port */
    double wire_lat;       /* one link: cable, serdes, NIC */
    double switch_lat;     /* one pass through a switch's forwarding pipeline */
    double spine_bw;       /* TOR <-> SPINE (0: rack_nodes x link_bw, non-blocking) */
    double sw_chunk_s;     /* an INC switch's work on one chunk (serialised per switch) */
    double sw_byte_s;      /* and per byte of it */
    double host_msg_s;     /* a rank's software cost of one message (send + receive) */
    double nic_msg_s;      /* a node's NIC gap between messages (its ranks share it) */
    double host_byte_s;    /* a rank's reduction cost per byte */
    double leader_pkt_s;   /* an INC leader's cost per packet sent or received */
    double leader_byte_s;  /* and per data byte of a result (its copy out; on this machine
                              also inc_test's check of every element, which competes for
                              the shared cores with the other leaders' calls) */
    double wake_s;         /* CPU a leader or switch spends waking up to a packet after
                              blocking (a context switch; 0 on a polling NIC path) */
    double sw_wake_s;      /* the same for a switch (its loop: timers, grouping, stats) */
    double ctx_s;          /* shared_cores: more CPU a wake-up costs when more leaders and
                              switches are runnable than there are cores (the woken process
                              displaces one: a switch each way, their cache misses) */
    double crowd_f;        /* shared_cores: per-packet CPU grows by this fraction while more
                              processes are runnable than cores (they evict each other's
                              caches) */
    double host_crowd_f;   /* shared_cores: the same for a host-path rank's per-datagram and
                              per-byte work while more ranks than cores share them (its
                              working set is the host path's buffers, not the INC
                              processes') */
    double runq_s;         /* shared_cores: and the time it waits on a run queue first, per
                              runnable process in excess of the cores, over the cores (not
                              CPU: the scheduler queues wake-ups behind busy processes) */
    double check_byte_s;   /* shared_cores: CPU a leader of inc_test spends per byte between
                              its timed calls (fill, compare, hash): with more leaders than
                              cores some leaders' calls overlap others' checks */
    double host_wake_s;    /* shared_cores: a host-path rank blocked for its messages runs
                              this long after they arrive (the scheduler's wake-up, not
                              CPU; the rank's CPU is host_msg_s and per-packet costs) */
    double mpi_call_s;     /* an MPI_Allreduce's own cost in offpath's MPI layer (the
                              wrapper, the node's ranks meeting; on this machine also
                              the waiting ranks' share of the cores): fitted here */
    double mpi_byte_s;     /* and per byte (copies in and out of the user's buffers) */
    double mpi_node_s;     /* and when a node's ranks meet for the call (Node mode, or
                              Socket mode's node groups above socket_max_bytes) */
    double shm_level_s;    /* one level of a node's shared-memory tree in one socket */
    double shm_xsock_s;    /* the level that crosses sockets */
    double shm_byte_s;     /* per byte per level */
    unsigned sockets;      /* per node */
    unsigned rack_nodes;   /* nodes under one TOR */
    uint16_t max_data;     /* INC payload bytes per packet */
    uint16_t window;       /* INC slots per group */
    uint32_t socket_max_bytes; /* Socket mode takes the node group above this (0: never) */
    double rto_min_s;      /* leader retransmission timeout floor */
    /* This machine's emulation: every node, TOR and SPINE is a process on
     * one host of this many cores, packets cross its loopback (latency
     * wire_lat, bandwidth link_bw) and each per-packet cost is CPU work
     * that shares the cores. 0: a real cluster. */
    unsigned shared_cores;
    /* With shared_cores: a namespace topology (`offpath topo`): nodes, TORs
     * and SPINEs are namespaces whose frames cross rate-limited links
     * (link_bw a node's, spine_bw a TOR's to the SPINEs) through a switch
     * process in every TOR and SPINE, which spends this CPU on each frame it
     * takes (in, forwarded or aggregated, paced out), on the shared cores.
     * 0: one loopback, no switch on the path. */
    double fwd_frame_s;
    uint16_t frame_data; /* with fwd_frame_s: TCP payload a frame (the links' MTU) */
    /* INC: the probability that a frame which wakes its receiver comes too
     * late for the leaders' timer (the woken process not run in time),
     * taken as lost (the wait is a timeout either way): a namespace
     * topology's, from its measured retransmissions */
    double late_loss;
    /* shared_cores, the host path: a call whose vector is at most
     * host_hot_bytes keeps its buffers (and the sockets' copies) in the
     * caches, its per-byte cost host_byte_s x host_hot_f (0 bytes: none) */
    double host_hot_bytes, host_hot_f;
    /* shared_cores, INC: a leader polls (yielding the core between polls)
     * for this long from its call's start before it sleeps for packets
     * (src/inc's spin_ns): a packet in that time wakes no one, and the
     * leader's waiting is CPU (0: it sleeps at once) */
    double spin_s;
};

/* Presets: "25G", "100G", "400G" (Ethernet, RoCE NICs, a Tofino-like switch
 * pipeline), "seed" (the seed paper's 25 GbE cluster and FPGA switch, fitted
 * to its tables 4-6), "here" (this machine, from `offpath model calibrate`'s
 * defaults). OP_ERR_INVAL for an unknown name. */
OP_API op_status_t op_model_preset(const char *name, struct op_model_platform *out);
OP_API const char *op_model_preset_names(void); /* "25G, 100G, ..." */

enum op_model_mode { OP_MODEL_HOST, OP_MODEL_NODE, OP_MODEL_SOCKET, OP_MODEL_MODE_COUNT_ };
OP_API const char *op_model_mode_name(unsigned mode);

/* The host's algorithm: the MPIs' selectors as SMPI (SimGrid 3.32) runs
 * them: `ompi` (Open MPI 4.1's decision rules: recursive doubling, ring,
 * Rabenseifner, reduce + broadcast by communicator size and message size),
 * `mpich` (MVAPICH2's two-level: node reduce, recursive doubling between
 * the nodes' leaders, node broadcast); one
 * algorithm over every rank; the hierarchical split (node reduce, recursive
 * doubling or ring between one rank a node, node broadcast); or
 * `ompi-classic`, Open MPI <= 4.0's fixed rule (recursive doubling below
 * 10000 B, ring above; the seed's 4.0.5). */
/* OP_MODEL_ALG_OFFPATH: offpath's own host path between leaders (src/hostar,
 * `offpath mpirun --mode host`): recursive doubling below 32 KiB, ring from
 * there, in packets of 4096 data bytes. */
enum op_model_alg {
    OP_MODEL_ALG_OMPI, OP_MODEL_ALG_MPICH, OP_MODEL_ALG_RD, OP_MODEL_ALG_RING,
    OP_MODEL_ALG_RABENSEIFNER, OP_MODEL_ALG_HIER, OP_MODEL_ALG_OFFPATH, OP_MODEL_ALG_OMPI_CLASSIC,
    OP_MODEL_ALG_COUNT_
};
OP_API const char *op_model_alg_name(unsigned alg);
OP_API op_status_t op_model_alg_parse(const char *name, unsigned *alg);

struct op_model_scenario {
    unsigned mode;  /* enum op_model_mode */
    unsigned alg;   /* host mode: enum op_model_alg */
    uint64_t bytes; /* per rank */
    double loss;    /* INC: probability a packet is lost on a link */
    uint64_t seed;  /* loss draws */
    uint64_t budget; /* INC: leader-chunks to simulate at most (0: 8192); beyond,
                        chunks travel in trains and the steady state is extrapolated */
    bool trace;     /* SimGrid's own messages and the steps' times on stderr */
};

struct op_model_result {
    double latency_s;       /* one MPI_Allreduce, first rank in to last rank out */
    double intra_s;         /* of which inside the nodes (closed form) */
    uint64_t chunks;        /* INC chunks per leader */
    uint64_t retransmissions;
    uint64_t fast_retransmits; /* of which re-sent as a later chunk's result came first */
    uint32_t slots;         /* INC slots a group holds on each switch */
    uint64_t slot_bytes;    /* switch memory of those slots (with the kept copy) */
    uint64_t sim_steps;     /* simulated chunks or host steps (the rest extrapolated) */
    double cpu_s;           /* CPU the leaders, switches or nodes spend on the call (the
                               extrapolated part pro rata) */
    double switch_cpu_s;    /* of which the switches' */
};

/* Simulate n scenarios on one platform of `nodes` nodes with `ppn` ranks each
 * (in a child process). OP_ERR_INVAL for a bad platform or scenario,
 * OP_ERR_UNSUPPORTED without SimGrid, OP_ERR_IO if the child failed. */
OP_API op_status_t op_model_simulate(const struct op_model_platform *p, unsigned nodes,
                                     unsigned ppn, const struct op_model_scenario *sc, size_t n,
                                     struct op_model_result *out);
OP_API bool op_model_available(void);

/* Closed forms the simulation is tested against. */
/* A node's reduce plus broadcast over shared memory (ranks of one leader). */
OP_API double op_model_intra(const struct op_model_platform *p, unsigned ranks, bool across_sockets,
                             uint64_t bytes);
/* Ring over n endpoints with one message per step: 2(n-1)/n x bytes/bw +
 * 2(n-1) x step latency. */
OP_API double op_model_ring_closed(unsigned n, uint64_t bytes, double bw, double step_lat);
/* INC under one TOR, no loss, one chunk: the sum of the hop costs. */
OP_API double op_model_one_switch_closed(const struct op_model_platform *p, unsigned leaders,
                                         uint64_t bytes);
/* Slots a group needs for a message and the switch memory they take. */
OP_API uint32_t op_model_slots(const struct op_model_platform *p, uint64_t bytes);

/* Platform files: "key value" lines (# comments), the keys named as the
 * fields of struct op_model_platform, starting from a preset ("preset NAME"
 * first, or 25G). Malformed input is refused naming the line and why. */
OP_API op_status_t op_model_platform_parse(const char *text, struct op_model_platform *out,
                                           char *why, size_t why_len);
OP_API op_status_t op_model_platform_load(const char *path, struct op_model_platform *out,
                                          char *why, size_t why_len);
OP_API void op_model_platform_print(const struct op_model_platform *p, FILE *out);

/* ---- tools: each returns the process's exit status (0 ok, 1 a check
 * failed, 2 bad input, 3 could not run). */
struct op_model_cfg {
    struct op_model_platform platform;
    unsigned nodes, ppn;          /* simulate: the cluster; project: up to nodes */
    uint64_t min_bytes, max_bytes;
    unsigned mode, alg;
    double loss;
    uint64_t seed;
    bool json, trace;
    const char *plot;             /* project: PNG path, or NULL */
    const char *script_dir;       /* where model_plot.py lives */
    const char *tables;           /* seed: CSV of the seed's tables 4-6 */
    const char *bin;              /* calibrate/validate: the offpath binary */
    const char *out_path;         /* calibrate: platform file to write; validate: its
                                     measurements */
    const char *replay_path;      /* validate: a recorded run's measurements, not new ones */
    double tolerance;             /* validate: largest relative error allowed */
    unsigned iters;               /* calibrate/validate: iterations a measurement */
    int nice;                     /* calibrate/validate: the measured processes' nice value
                                     (below 0 needs root; other users' load then yields) */
    bool no_spin;                 /* calibrate/validate: let idle cores halt (no spinners) */
    bool topo;                    /* validate: the namespace topology's rows too (root,
                                     ~4 minutes) */
    unsigned net, port;           /* calibrate/validate: inc_test's 127.N network, UDP port */
};
OP_API void op_model_cfg_default(struct op_model_cfg *cfg);
OP_API int op_model_run_simulate(const struct op_model_cfg *cfg, FILE *out);
OP_API int op_model_run_project(const struct op_model_cfg *cfg, FILE *out);
/* The seed's tables 4-6 against the model: ordering >= 90 % of cells and
 * latencies within 30 %, else 1. */
OP_API int op_model_run_seed(const struct op_model_cfg *cfg, FILE *out);
OP_API int op_model_run_calibrate(const struct op_model_cfg *cfg, FILE *out);
OP_API int op_model_run_validate(const struct op_model_cfg *cfg, FILE *out);
/* The SimGrid platform file of cfg->nodes nodes: hosts n0.. (smpirun's
 * hostfile names them), tor0.., spine. */
OP_API int op_model_run_platform(const struct op_model_cfg *cfg, FILE *out);

#endif
