/* The start and end of every osu_* program: MPI up, flags through src/cli's
 * parser (errors printed once, by rank 0), buffers, MPI down. */
#include <stdlib.h>

#include "osu_bench.h"

static MPI_Datatype mpi_type(enum op_osu_type t, int *size)
{
    switch (t) {
    case OP_OSU_FLOAT: *size = sizeof(float); return MPI_FLOAT;
    case OP_OSU_DOUBLE: *size = sizeof(double); return MPI_DOUBLE;
    case OP_OSU_LONG: *size = sizeof(long); return MPI_LONG;
    case OP_OSU_CHAR: *size = 1; return MPI_SIGNED_CHAR;
    case OP_OSU_INT: break;
    }
    *size = sizeof(int);
    return MPI_INT;
}

int osu_iters(const struct op_osu_config *cfg, long size)
{
    return size > 8192 ? cfg->iters_large : cfg->iters;
}

int osu_warmup(const struct op_osu_config *cfg, long size)
{
    return size > 8192 && cfg->warmup > 10 ? 10 : cfg->warmup;
}

int osu_main(enum op_osu_bench bench, int argc, char **argv, void (*run)(const struct osu_run *))
{
    MPI_Init(&argc, &argv);
    struct op_osu_config cfg;
    struct osu_run r = {.cfg = &cfg};
    char err[256];
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.size);
    op_status_t st = op_osu_parse(bench, argc, argv, &cfg, err, sizeof(err));
    if (st != OP_OK || cfg.help) {
        if (r.rank == 0 && st != OP_OK)
            fprintf(stderr, "%s: %s\n", op_osu_bench_name(bench), err);
        if (r.rank == 0)
            op_osu_usage(bench, st != OP_OK ? stderr : stdout);
        MPI_Finalize();
        return st != OP_OK ? 2 : 0;
    }
    r.type = mpi_type(cfg.type, &r.type_size);
    r.send = calloc(1, (size_t)cfg.max_size);
    r.recv = calloc(1, (size_t)cfg.max_size);
    if (r.send == NULL || r.recv == NULL) {
        fprintf(stderr, "%s: rank %d: no memory for %ld-byte buffers\n",
                op_osu_bench_name(bench), r.rank, cfg.max_size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    run(&r);
    free(r.send);
    free(r.recv);
    MPI_Finalize();
    return 0;
}
