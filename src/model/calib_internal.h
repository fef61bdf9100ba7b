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

/* What the fit reads. */
struct calib {
    double inc[N_INC];     /* inc_test p50 */
    double inc_cpu[N_INC]; /* CPU a call: the leaders (inc_test's processes), */
    double sw_cpu[N_INC];  /* the switch (a process of ours: its CPU reads apart) */
    double hop;            /* one UDP hop between two sleeping processes */
    double host[N_SIZES];  /* osu_allreduce, mpirun --mode host, 2 nodes of 1 rank, */
    double host4[N_SIZES]; /* and 4 (4 ranks crowd 2 cores; 0: a size not measured) */
    double shm[N_SIZES];   /* osu_allreduce, 1 node of 2 ranks (shared memory only) */
    double mpi[N_SIZES];   /* osu_allreduce, mpirun --mode node, 2 nodes of 2 ranks (0: none) */
    double mpi_sock[N_SIZES]; /* the same in Socket mode */
    double mpi_sim[N_SIZES], mpi_sock_sim[N_SIZES]; /* their simulations without the MPI layer */
};

/* A validation row: one tool and mode at one node count, every size. */
enum mdl_row_kind {
    ROW_INC,        /* inc_test: leaders through a switch (Node mode, a rank a node) */
    ROW_HOST,       /* osu_allreduce, mpirun --mode host, a rank a node */
    ROW_MPI_NODE,   /* osu_allreduce, mpirun --mode node, 2 ranks a node in 2 sockets */
    ROW_MPI_SOCKET, /* the same in Socket mode: a leader a socket */
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
bool mdl_record_read(FILE *f, struct calib *c, struct vmeas *v, char *why, size_t why_len);

#endif
