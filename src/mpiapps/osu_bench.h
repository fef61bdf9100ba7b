/* Internal to the osu_* benchmark programs: what they share. */
#ifndef OFFPATH_OSU_BENCH_H
#define OFFPATH_OSU_BENCH_H

#include <mpi.h>

#include "offpath/osu.h"

#define OSU_FIELD 18 /* OSU's column width */

struct osu_run {
    const struct op_osu_config *cfg;
    int rank, size;
    MPI_Datatype type;
    int type_size;
    void *send, *recv; /* max_size bytes each */
};

/* MPI_Init, the flags, buffers, run(), MPI_Finalize; returns main's status. */
int osu_main(enum op_osu_bench bench, int argc, char **argv, void (*run)(const struct osu_run *));

/* Iterations and warm-up for one size: OSU's fewer above 8 KiB. */
int osu_iters(const struct op_osu_config *cfg, long size);
int osu_warmup(const struct op_osu_config *cfg, long size);

#endif
