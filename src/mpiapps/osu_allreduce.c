/* osu_allreduce: the OSU micro-benchmark's Allreduce latency test, same flags
 * and output (-m min:max, -i iterations, -x warm-up, -T type, -f for min/max
 * columns), plus --compare: host, INC Node, INC Socket and host UDP (offpath's
 * own host algorithm between the same leaders) measured in one job
 * and printed side by side with the improvement in percent. An ordinary MPI
 * program; the modes come from liboffpath_mpi when it is preloaded, the
 * flags from src/cli (osu_args.c). */
#include <stdio.h>

#include "offpath/mpi.h"
#include "osu_bench.h"

#define FIELD OSU_FIELD

/* Average, min and max over ranks of one size's mean latency, in us. */
static void measure(MPI_Comm comm, const struct osu_run *b, long size, double out[3],
                    int *iters_out)
{
    int count = (int)(size / b->type_size);
    int iters = osu_iters(b->cfg, size), warmup = osu_warmup(b->cfg, size);
    double total = 0;
    MPI_Barrier(comm);
    for (int i = 0; i < iters + warmup; i++) {
        double t0 = MPI_Wtime();
        MPI_Allreduce(b->send, b->recv, count, b->type, MPI_SUM, comm);
        if (i >= warmup)
            total += MPI_Wtime() - t0;
    }
    double lat = total * 1e6 / iters, sum = 0;
    int n;
    MPI_Comm_size(comm, &n);
    PMPI_Reduce(&lat, &out[1], 1, MPI_DOUBLE, MPI_MIN, 0, comm);
    PMPI_Reduce(&lat, &out[2], 1, MPI_DOUBLE, MPI_MAX, 0, comm);
    PMPI_Reduce(&lat, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, comm);
    out[0] = sum / n;
    *iters_out = iters;
}

/* liboffpath_mpi's mode switch, if the library is preloaded. */
static int set_mode(enum op_mode mode)
{
    return offpath_mpi_set_mode != NULL && offpath_mpi_set_mode(op_mode_name(mode)) == 0;
}

static MPI_Comm comm_in_mode(enum op_mode mode, int *ok)
{
    *ok = set_mode(mode);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    return c;
}

static void run_plain(const struct osu_run *b)
{
    int rank = b->rank;
    if (rank == 0) {
        printf("\n# OSU MPI Allreduce Latency Test (offpath osu_allreduce)\n# Datatype: %s.\n",
               op_osu_type_name(b->cfg->type));
        printf(b->cfg->full ? "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
                       : "# Size       Avg Latency(us)\n");
    }
    for (long size = b->cfg->min_size; size <= b->cfg->max_size; size *= 2) {
        if (size < b->type_size)
            continue;
        double r[3];
        int iters;
        measure(MPI_COMM_WORLD, b, size, r, &iters);
        if (rank == 0 && b->cfg->full)
            printf("%-10ld%*.2f%*.2f%*.2f%*d\n", size, FIELD, r[0], FIELD, r[1], FIELD, r[2], 12, iters);
        else if (rank == 0)
            printf("%-10ld%*.2f\n", size, FIELD, r[0]);
        fflush(stdout);
    }
}

#define MODES OP_MODE_COUNT_ /* the columns, in the table's order: off (the MPI's), node, ... */

static void run_compare(const struct osu_run *b)
{
    int rank = b->rank;
    MPI_Comm comms[MODES];
    int ok[MODES];
    for (int m = 0; m < MODES; m++)
        comms[m] = comm_in_mode((enum op_mode)m, &ok[m]);
    set_mode(b->cfg->mode);
    if (rank == 0) {
        printf("\n# offpath osu_allreduce --compare: %d ranks, %s, sum\n", b->size,
               op_osu_type_name(b->cfg->type));
        printf("# host: the MPI's own allreduce; INC: through the switches%s\n",
               ok[OP_MODE_NODE] && ok[OP_MODE_SOCKET] ? "" : " (unavailable: run under offpath mpirun)");
        printf("# host UDP: the same leaders with offpath's own host algorithm over UDP%s\n",
               ok[OP_MODE_HOST] ? "" : " (unavailable: run under offpath mpirun)");
        printf("# Size        Host(us)    INC Node(us)  INC Socket(us)    Host UDP(us)"
               "    Node vs host  Socket vs host     UDP vs host\n");
    }
    for (long size = b->cfg->min_size; size <= b->cfg->max_size; size *= 2) {
        if (size < b->type_size)
            continue;
        double r[MODES][3];
        int iters;
        for (int m = 0; m < MODES; m++)
            measure(comms[m], b, size, r[m], &iters);
        if (rank == 0)
            printf("%-10ld%14.2f%16.2f%16.2f%16.2f%15.1f%%%15.1f%%%15.1f%%\n", size, r[0][0],
                   r[1][0], r[2][0], r[3][0], 100.0 * (r[1][0] - r[0][0]) / r[0][0],
                   100.0 * (r[2][0] - r[0][0]) / r[0][0], 100.0 * (r[3][0] - r[0][0]) / r[0][0]);
        fflush(stdout);
    }
    for (int m = 0; m < MODES; m++)
        MPI_Comm_free(&comms[m]);
}

static void run(const struct osu_run *b)
{
    if (b->cfg->compare)
        run_compare(b);
    else
        run_plain(b);
}

int main(int argc, char **argv) { return osu_main(OP_OSU_ALLREDUCE, argc, argv, run); }
