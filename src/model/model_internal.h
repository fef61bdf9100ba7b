/* Internal to src/model: the platform file, the actors' shared plumbing. */
#ifndef OFFPATH_MODEL_INTERNAL_H
#define OFFPATH_MODEL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "offpath/model.h"

/* BTH + DETH + INC header + ICRC on each INC packet; Ethernet/IP/UDP too. */
#define MDL_HDR_BYTES 92u
/* How long inc_test's and mpirun's INC leaders poll from a call's start
 * before they sleep (src/inc's OP_INC_SPIN_NS_DEFAULT, mpirun's
 * OFFPATH_SPIN_US default), us: what validate's records note. */
#define MDL_LEADER_SPIN_US 300.0
/* What an inc_test leader's checks between its calls (it_fill, it_check)
 * cost at least, a byte: bench/check_cost measured 0.55-0.78 ns here
 * (16 KiB-1 MiB, six runs, 29 Nov 12:55-13:35). The fit keeps check_byte_s
 * at or above it: left free, it took the checks to 0.08 and 0.2 ns on two
 * records (29 Nov 10:10, 07:50) and the leaders' wake-up (wake_s) to 61 and
 * 19 us a wake to carry the CPU a call instead. */
#define MDL_CHECK_BYTE_MIN_S 0.55e-9

op_status_t mdl_platform_check(const struct op_model_platform *p);
/* Whether nodes, TORs and SPINEs are SimGrid hosts joined by links (a
 * cluster, or a namespace topology), not all one loopback host. */
bool mdl_on_links(const struct op_model_platform *p);
void mdl_platform_write(const struct op_model_platform *p, unsigned nodes, FILE *f);
double mdl_host_link_lat(const struct op_model_platform *p);
unsigned mdl_racks(const struct op_model_platform *p, unsigned nodes);
uint64_t mdl_chunks(const struct op_model_platform *p, uint64_t bytes);
uint64_t mdl_chunk_bytes(const struct op_model_platform *p, uint64_t bytes);

/* The SimGrid host of a node ("n3"), a TOR ("tor1") or the SPINE
 * (idx < 0): all one host when the platform shares its cores. */
const char *mdl_host_of(const struct op_model_platform *p, char kind, int idx, char *buf,
                        size_t len);
/* A cost in seconds of CPU: work that shares the cores of a shared host,
 * else time the actor spends. */
struct mdl_run;
void mdl_cpu(struct mdl_run *r, double seconds);

/* What one simulation needs; lives in the child process. */
struct mdl_run {
    const struct op_model_platform *p;
    unsigned nodes, ppn;
    const struct op_model_scenario *sc;
    struct op_model_result *res;
    unsigned run_id; /* names this run's mailboxes apart from earlier runs' */
    unsigned runnable; /* INC on shared cores: leaders and switches not blocked in a receive */
    double cpu;        /* seconds of CPU spent so far (mdl_cpu) */
    double switch_cpu; /* of which by the switches */
    double spin_cpu;   /* INC leaders' polling (platform spin_s): CPU that delays no one */
    void *cpu_host;    /* sg_host_t: a namespace topology's shared cores (NULL: none) */
};

/* Run inside an initialised SimGrid engine whose platform is loaded. */
void mdl_inc_simulate(struct mdl_run *r);
void mdl_host_simulate(struct mdl_run *r);

/* The host baseline's schedule: the phases one Allreduce runs, as the
 * selector of `alg` picks them for `ranks` ranks and `bytes` (host_sim.c). */
enum {
    MDL_PH_RD, MDL_PH_RING, MDL_PH_RAB, MDL_PH_REDUCE_BINOMIAL, MDL_PH_BCAST_BINOMIAL,
    MDL_PH_BCAST_KNOMIAL, MDL_PH_BCAST_BINARY, MDL_PH_BCAST_CHAIN
};
#define MDL_PHASES_MAX 4
struct mdl_phase {
    unsigned kind;
    uint64_t bytes; /* the part of the message this phase reduces */
    uint64_t seg;   /* trees: pipelined in segments of this many bytes (0: whole) */
};
struct mdl_plan {
    unsigned n;
    struct mdl_phase ph[MDL_PHASES_MAX];
};
void mdl_host_plan(unsigned alg, unsigned ranks, uint64_t bytes, struct mdl_plan *out);

/* Measurements of this machine with offpath's own tools (measure.c): -1 or
 * false when a run failed. */
/* Runs a shell command, keeps up to len-1 bytes of its output; false when
 * it cannot start or exits non-zero. */
bool mdl_run_cmd(const char *cmd, char *buf, size_t len);
/* "nice -n N " for the measured processes ("" at 0). */
const char *mdl_nice_prefix(const struct op_model_cfg *cfg, char *buf, size_t len);
#define MDL_MEASURE_MAX 16 /* sizes one call measures */
bool mdl_measure_inc(const struct op_model_cfg *cfg, unsigned leaders, const uint64_t *sizes,
                     size_t n, double *us, double *cpu_us, double *sw_cpu_us);
#define MDL_CELLS_MAX 96 /* (leaders, bytes) cells one round measures */
/* A figure's runs: the lowest and highest of those averaged, how many were
 * kept (the least disturbed by other users' work), run, and quiet (others
 * took at most a tenth of the cores). */
struct mdl_spread {
    double lo, hi;
    unsigned kept, runs, quiet;
};
/* Other users' work during a run: the share of the cores that neither we
 * (our reaped and live children, and also_ours_s: CPU seconds of our
 * processes that are not our children, read at each mark) nor idle took
 * between a mark and now, 0..1 (/proc/stat). */
struct mdl_busy {
    double wall_s, busy_s, ours_s;
};
void mdl_busy_mark(struct mdl_busy *m, double also_ours_s);
double mdl_others_share(const struct mdl_busy *a, double also_ours_s);
/* A cell's runs: each run's figure and the share of the cores other users'
 * work took during it (measure.c). The figure comes from the least
 * disturbed runs (`median`: their median, else their mean less the lowest
 * and the highest from 5 runs on); unsettled: those runs reach beyond
 * tolerance either side of it. */
#define MDL_RUNS_MAX 16
struct mdl_runs {
    double v[MDL_RUNS_MAX], q[MDL_RUNS_MAX];
    unsigned n;
};
void mdl_runs_add(struct mdl_runs *r, double v, double q);
void mdl_runs_figure(const struct mdl_runs *r, double *us, struct mdl_spread *sp, bool median);
bool mdl_runs_unsettled(const struct mdl_runs *r, double tolerance);
/* sp may be NULL. cpu_us (NULL: not measured): each cell's CPU a call of
 * inc_test's processes (its leaders and its own switch), the median of its
 * runs, for cells of at least MDL_CPU_MIN_BYTES (0 below: a small call's
 * CPU is the start-ups' noise). */
#define MDL_CPU_MIN_BYTES 16384
bool mdl_measure_inc_cells(const struct op_model_cfg *cfg, const unsigned *leaders,
                           const uint64_t *sizes, size_t n, double *us, struct mdl_spread *sp,
                           double *cpu_us);
double mdl_measure_hop(const struct op_model_cfg *cfg);
/* The median of `runs` runs of a shell command that prints one positive
 * figure (at most 13 runs); -1 when one fails. */
double mdl_median_of_runs(const char *cmd, unsigned runs);
double mdl_median(double *v, size_t n); /* sorts v */
/* An `offpath mpirun` job: nodes of ppn ranks in `sockets` sockets, a mode
 * ("host", "node", "socket"). */
struct mdl_job {
    unsigned nodes, ppn, sockets;
    const char *mode;
};
bool mdl_measure_osu(const struct op_model_cfg *cfg, const struct mdl_job *job,
                     const uint64_t *sizes, size_t n, double *us, struct mdl_spread *sp);

/* SCHED_IDLE spinners that keep every core awake while calibrate and
 * validate measure (measure.c says why); stop kills and reaps them. */
#define MDL_WARM_MAX 64
struct mdl_warm {
    int pid[MDL_WARM_MAX];
    unsigned n;
};
void mdl_warm_start(struct mdl_warm *w);
void mdl_warm_stop(struct mdl_warm *w);

/* One cell of the seed's tables and the model's prediction of it. */
struct mdl_cell {
    unsigned nodes, ppn, mode;
    uint64_t bytes;
    double meas_us, pred_us;
};
/* Reads the tables' CSV ('#' comments, a header line, nodes,bytes,mode,ppn,us
 * rows); 0 and why (line and reason) on a malformed line. */
size_t mdl_seed_parse(FILE *f, struct mdl_cell *cells, size_t max, char *why, size_t why_len);

/* Actor payloads travel as one word: kind (4 bits), a run of n consecutive
 * sequence numbers or steps (n - 1: 10 bits; a GSO datagram's packets),
 * sender (18 bits), first sequence number or step (32 bits). */
enum { MDL_CONTRIB = 1, MDL_RESULT = 2, MDL_TICK = 3, MDL_BUNDLE = 4 };
#define MDL_RUN_MAX 1024u
static inline void *mdl_msg_run(unsigned kind, unsigned from, uint32_t seq, unsigned n)
{
    return (void *)(uintptr_t)(((uint64_t)kind << 60) | ((uint64_t)((n - 1) & 0x3ffu) << 50) |
                               ((uint64_t)(from & 0x3ffffu) << 32) | seq);
}
static inline void *mdl_msg(unsigned kind, unsigned from, uint32_t seq)
{
    return mdl_msg_run(kind, from, seq, 1);
}
static inline unsigned mdl_kind(void *m) { return (unsigned)((uintptr_t)m >> 60); }
static inline unsigned mdl_count(void *m) { return (unsigned)(((uintptr_t)m >> 50) & 0x3ffu) + 1; }
static inline unsigned mdl_from(void *m) { return (unsigned)(((uintptr_t)m >> 32) & 0x3ffffu); }
static inline uint32_t mdl_seq(void *m) { return (uint32_t)(uintptr_t)m; }

/* Sends in flight, kept to be reaped: SimGrid keeps detached comms in a list
 * it searches linearly, which made 4096 leaders' windows quadratic. */
#define MDL_OUTQ 64
struct mdl_outq {
    void *c[MDL_OUTQ]; /* sg_comm_t */
    unsigned n;
};
void mdl_send(struct mdl_outq *q, void *mailbox, void *msg, long bytes);
void mdl_outq_drain(struct mdl_outq *q);

/* xorshift64*: each actor draws its own losses. */
static inline double mdl_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

#endif
