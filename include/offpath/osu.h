/* offpath's OSU-style collective benchmarks (osu_allreduce, osu_iallreduce):
 * their settings, filled from OSU's flags by src/cli (the only module that
 * parses arguments) and run by the MPI programs of src/mpi, which are built
 * once per MPI and link the parser in. */
#ifndef OFFPATH_OSU_H
#define OFFPATH_OSU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "offpath/common.h"
#include "offpath/mode.h"

enum op_osu_bench { OP_OSU_ALLREDUCE, OP_OSU_IALLREDUCE };

/* -T: the element types OSU's reduction benchmarks offer */
enum op_osu_type { OP_OSU_INT, OP_OSU_FLOAT, OP_OSU_DOUBLE, OP_OSU_LONG, OP_OSU_CHAR };

struct op_osu_config {
    enum op_osu_bench bench;
    long min_size, max_size; /* bytes, powers of two between */
    int iters, iters_large;  /* timed iterations up to 8 KiB, and above */
    int warmup;
    enum op_osu_type type;
    bool full;       /* -f: more columns */
    bool compare;    /* --compare (osu_allreduce): the modes side by side */
    enum op_mode mode; /* the job's mode (OFFPATH_MODE, as the library reads
                        * it), which --compare restores after its columns */
    bool validate;   /* -c (osu_iallreduce): check every result */
    int test_calls;  /* -t (osu_iallreduce): MPI_Test calls during the compute */
    bool help;       /* -h: print op_osu_usage and run nothing */
};

/* OP_OK, or OP_ERR_INVAL with a message naming the bad flag in err. */
op_status_t op_osu_parse(enum op_osu_bench bench, int argc, char **argv,
                         struct op_osu_config *cfg, char *err, size_t err_len);
void op_osu_usage(enum op_osu_bench bench, FILE *out);
const char *op_osu_bench_name(enum op_osu_bench bench);  /* "osu_allreduce" */
const char *op_osu_type_name(enum op_osu_type type);     /* as OSU prints it: "MPI_INT" */

#endif
