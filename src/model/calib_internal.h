/* What `offpath model calibrate` and `validate` measure, shared by the fit
 * (calib.c) and the record of a run (record.c). Times in us. */
#ifndef OFFPATH_MODEL_CALIB_INTERNAL_H
#define OFFPATH_MODEL_CALIB_INTERNAL_H

#include "model_internal.h"

#define N_SIZES 6
extern const uint64_t mdl_val_sizes[N_SIZES];

/* The INC path is measured at 2 leaders (3 processes on 2 cores) and at 8
 * (9 processes: every wake-up displaces another process, which 2 leaders
 * mostly do not show), for its latency and for the CPU a call costs. */
#define N_INC (N_SIZES + 2)
struct mdl_inc_point {
    unsigned leaders;
    uint64_t bytes;
};
extern const struct mdl_inc_point mdl_inc_points[N_INC];

/* `validate --topo`: the namespace topology of `offpath topo`
 * (examples/two-racks.topo: 8 hosts under 2 TORs and 2 SPINEs, host links
 * 1 Gbit/s, fabric links 2 Gbit/s, a switch process in every TOR and
 * SPINE), one job a round of osu_allreduce --compare under `offpath mpirun
 * --topo` with a rank a host: the MPI's own allreduce (Open MPI over TCP
 * through the switches) and INC Node mode, every power of two 4 B..1 MiB. */
#define TOPO_NODES 8u
#define TOPO_SIZES_MAX 24
struct mdl_topo {
    size_t n;                        /* sizes measured (0: none) */
    uint64_t sizes[TOPO_SIZES_MAX];
    double host[TOPO_SIZES_MAX], node[TOPO_SIZES_MAX]; /* us, median of the rounds */
    double host_lo[TOPO_SIZES_MAX], host_hi[TOPO_SIZES_MAX]; /* the rounds' lowest, highest */
    double node_lo[TOPO_SIZES_MAX], node_hi[TOPO_SIZES_MAX];
    unsigned host_kept[TOPO_SIZES_MAX], node_kept[TOPO_SIZES_MAX]; /* jobs the medians take */
    unsigned jobs;   /* jobs run (0: a record older than the seventh session) */
    double frame_us; /* the switches' CPU a frame they took, over the jobs */
    double hop_us;   /* one frame h1 to h5, half a ping-pong (0: none recorded) */
    double retx;     /* the leaders' retransmissions a contribution the TORs took (0: none
                        recorded) */
};

/* What the fit reads. */
struct calib {
    double inc[N_INC];     /* inc_test p50 */
    double inc_cpu[N_INC]; /* CPU a call: the leaders (inc_test's processes), */
    double sw_cpu[N_INC];  /* the switch (a process of ours: its CPU reads apart) */
    double val_cpu[N_INC]; /* validate's cells: leaders and switch together (0: none) */
    double hop;            /* one UDP hop between two sleeping processes */
    double host[N_SIZES];  /* osu_allreduce, mpirun --mode host, 2 nodes of 1 rank, */
    double host4[N_SIZES]; /* and 4 (4 ranks crowd 2 cores; 0: a size not measured) */
    double shm[N_SIZES];   /* osu_allreduce, 1 node of 2 ranks (shared memory only) */
    double mpi[N_SIZES];   /* osu_allreduce, mpirun --mode node, 2 nodes of 2 ranks (0: none) */
    double mpi_sock[N_SIZES]; /* the same in Socket mode */
    double mpi_sim[N_SIZES], mpi_sock_sim[N_SIZES]; /* their simulations without the MPI layer */
    double spin_us;        /* the leaders' poll from a call's start (0: records before it) */
    struct mdl_topo topo;
};

/* A validation row: one tool and mode at one node count, every size. */
enum mdl_row_kind {
    ROW_INC,        /* inc_test: leaders through a switch (Node mode, a rank a node) */
    ROW_HOST,       /* osu_allreduce, mpirun --mode host, a rank a node */
    ROW_MPI_NODE,   /* osu_allreduce, mpirun --mode node, 2 ranks a node in 2 sockets */
    ROW_MPI_SOCKET, /* the same in Socket mode: a leader a socket */
    ROW_TOPO_NODE,  /* validate --topo: INC Node mode on the namespace topology */
    ROW_TOPO_HOST,  /* and the MPI's own allreduce (Open MPI over TCP) there */
    ROW_KINDS
};
struct mdl_row_kind_info {
    const char *name; /* the table's first column */
    const char *mpirun_mode; /* NULL: inc_test */
    unsigned mode, ppn;      /* the model's */
};
extern const struct mdl_row_kind_info mdl_row_kinds[ROW_KINDS];

struct vrow {
    unsigned kind, nodes;
    double us[N_SIZES], lo[N_SIZES], hi[N_SIZES]; /* figure, its runs' spread */
    unsigned kept[N_SIZES], runs[N_SIZES]; /* runs kept and run (0: not recorded) */
    double cpu[N_SIZES]; /* inc_test: CPU a call, leaders and switch (0: not measured) */
    char note[160]; /* a row measured twice says so (a '#' line in the record) */
};
#define MAX_ROWS 48
struct vmeas {
    size_t nrows, ns;
    uint64_t sizes[N_SIZES];
    struct vrow rows[MAX_ROWS];
};

/* A run's measurements as "key values" lines, and read back (`validate
 * --out FILE`, `--replay FILE`): the fit and the predictions of a recorded
 * run can be redone without the machine's noise. false and why on a
 * malformed line. */
void mdl_record_write(const struct calib *c, const struct vmeas *v, FILE *f);
/* "topo BYTES HOST NODE HOST_LO HOST_HI NODE_LO NODE_HI", each followed by
 * "topokept JOBS HOST_KEPT NODE_KEPT" (newer records), and "topoframe US"
 * (topo.c); key is the line's first word: NULL when the line is fine, else
 * why not; not_mine when the key is another's. */
void mdl_topo_write(const struct mdl_topo *t, FILE *f);
const char *mdl_topo_line(const char *key, const char *rest, struct mdl_topo *t, bool *not_mine);

/* The fit's coordinate search (calib.c), for the topology's costs too. */
typedef double (*mdl_misfit_fn)(const struct op_model_platform *p, const void *data);
void mdl_search(struct op_model_platform *p, const void *data, double *const *knobs, size_t n,
                mdl_misfit_fn f, int rounds);
double mdl_sq_log(double pred, double meas);

/* An mpirun row's in-network path without its node part (the shared-memory
 * closed form is Open MPI's; offpath's own is the MPI layer's, fitted on
 * the mpirun rows), each size (us). osu_allreduce checks nothing between
 * its calls, where inc_test checks every result (check_byte_s: with more
 * leaders than cores a share of it inside the calls); eleventh session:
 * charged here, the 4-node rows came out +20..+30 % from 16 KiB in most
 * records, where the mpirun job measured faster than inc_test's 4 leaders
 * (29 Nov 08:30: 1543 against 1686 us at 256 KiB). */
bool mdl_predict_mpi_network(const struct op_model_platform *p, unsigned mode, unsigned nodes,
                             const uint64_t *sizes, size_t n, double *us);

/* validate --topo (topo.c): measures the topology (false and why on a
 * failure: it needs root and network namespaces), derives its platform
 * from this machine's fitted one (the switches' measured cost a frame, the
 * links' rates; the MPI's TCP costs fitted on the sizes between the
 * validated ones), and the two rows at the validated sizes. */
bool mdl_topo_measure(const struct op_model_cfg *cfg, struct mdl_topo *t);
bool mdl_topo_platform(const struct op_model_platform *here, const struct mdl_topo *t,
                       struct op_model_platform *out);
/* INC Node mode on it, each size (us; averaged over the late frames' draws) */
bool mdl_topo_predict_node(const struct op_model_platform *p, const uint64_t *sizes, size_t n,
                           double *us);
void mdl_topo_rows(const struct mdl_topo *t, struct vrow *node, struct vrow *host, uint64_t *sizes,
                   size_t *ns);
bool mdl_record_read(FILE *f, struct calib *c, struct vmeas *v, char *why, size_t why_len);

#endif
