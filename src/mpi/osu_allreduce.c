/* osu_allreduce: the OSU micro-benchmark's Allreduce latency test, same flags
 * and output (-m min:max, -i iterations, -x warm-up, -T type, -f for min/max
 * columns), plus --compare: host, INC Node, INC Socket and host UDP (offpath's
 * own host algorithm between the same leaders) measured in one job
 * and printed side by side with the improvement in percent. An ordinary MPI
 * program; the modes come from liboffpath_mpi when it is preloaded. */
#include <dlfcn.h>
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIELD 18

struct bench {
    long min_size, max_size;
    int iters, iters_large, warmup;
    int full, compare;
    MPI_Datatype type;
    const char *type_name;
    int type_size;
};

static int usage(int rank, const char *msg)
{
    if (rank == 0) {
        if (msg)
            fprintf(stderr, "osu_allreduce: %s\n", msg);
        fprintf(msg ? stderr : stdout,
                "usage: offpath osu_allreduce [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-T TYPE] [-f] [--compare]\n"
                "  -m MIN:MAX  message sizes in bytes, powers of two (default 4:1048576)\n"
                "  -i ITERS    timed iterations per size (default 1000; 100 above 8 KiB)\n"
                "  -x WARMUP   untimed iterations first (default 200; 10 above 8 KiB)\n"
                "  -T TYPE     mpi_int (default), mpi_float, mpi_double, mpi_long, mpi_char\n"
                "  -f          also min and max latency and iterations\n"
                "  --compare   host, INC Node, INC Socket and host UDP side by side (needs\n"
                "              offpath mpirun)\n");
    }
    return msg ? 2 : 0;
}

static int parse_type(struct bench *b, const char *t)
{
    const struct { const char *name; MPI_Datatype type; int size; const char *shown; } types[] = {
        {"mpi_int", MPI_INT, sizeof(int), "MPI_INT"},
        {"mpi_float", MPI_FLOAT, sizeof(float), "MPI_FLOAT"},
        {"mpi_double", MPI_DOUBLE, sizeof(double), "MPI_DOUBLE"},
        {"mpi_long", MPI_LONG, sizeof(long), "MPI_LONG"},
        {"mpi_char", MPI_SIGNED_CHAR, 1, "MPI_CHAR"},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcmp(t, types[i].name) == 0) {
            b->type = types[i].type;
            b->type_size = types[i].size;
            b->type_name = types[i].shown;
            return 0;
        }
    return -1;
}

static int parse(int argc, char **argv, int rank, struct bench *b)
{
    static const struct option longs[] = {{"compare", 0, 0, 'C'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    *b = (struct bench){.min_size = 4, .max_size = 1 << 20, .iters = 1000, .iters_large = 100,
                        .warmup = 200};
    parse_type(b, "mpi_int");
    int opt, warm_set = 0;
    while ((opt = getopt_long(argc, argv, "m:i:x:T:fh", longs, NULL)) != -1) {
        char *end = NULL;
        switch (opt) {
        case 'm':
            if (strchr(optarg, ':')) {
                b->min_size = strtol(optarg, &end, 10);
                b->max_size = strtol(end + 1, &end, 10);
            } else {
                b->max_size = strtol(optarg, &end, 10);
            }
            if (*end || b->min_size < 1 || b->max_size < b->min_size || b->max_size > (1L << 28))
                return usage(rank, "invalid value for -m (expected MIN:MAX bytes)");
            break;
        case 'i':
            b->iters = b->iters_large = (int)strtol(optarg, &end, 10);
            if (*end || b->iters < 1)
                return usage(rank, "invalid value for -i (expected a positive count)");
            break;
        case 'x':
            b->warmup = (int)strtol(optarg, &end, 10);
            warm_set = 1;
            if (*end || b->warmup < 0)
                return usage(rank, "invalid value for -x (expected a count)");
            break;
        case 'T':
            if (parse_type(b, optarg) != 0)
                return usage(rank, "invalid value for -T");
            break;
        case 'f': b->full = 1; break;
        case 'C': b->compare = 1; break;
        case 'h': return usage(rank, NULL) - 1;
        default: return usage(rank, "unknown option");
        }
    }
    (void)warm_set;
    return 0;
}

/* Average, min and max over ranks of one size's mean latency, in us. */
static void measure(MPI_Comm comm, const struct bench *b, long size, void *send, void *recv,
                    double out[3], int *iters_out)
{
    int count = (int)(size / b->type_size);
    int iters = size > 8192 ? b->iters_large : b->iters;
    int warmup = size > 8192 && b->warmup > 10 ? 10 : b->warmup;
    double total = 0;
    MPI_Barrier(comm);
    for (int i = 0; i < iters + warmup; i++) {
        double t0 = MPI_Wtime();
        MPI_Allreduce(send, recv, count, b->type, MPI_SUM, comm);
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
static int set_mode(const char *mode)
{
    int (*fn)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "offpath_mpi_set_mode");
    return fn != NULL && fn(mode) == 0;
}

static MPI_Comm comm_in_mode(const char *mode, int *ok)
{
    *ok = set_mode(mode);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    return c;
}

static void run_plain(const struct bench *b, int rank, void *send, void *recv)
{
    if (rank == 0) {
        printf("\n# OSU MPI Allreduce Latency Test (offpath osu_allreduce)\n# Datatype: %s.\n",
               b->type_name);
        printf(b->full ? "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
                       : "# Size       Avg Latency(us)\n");
    }
    for (long size = b->min_size; size <= b->max_size; size *= 2) {
        if (size < b->type_size)
            continue;
        double r[3];
        int iters;
        measure(MPI_COMM_WORLD, b, size, send, recv, r, &iters);
        if (rank == 0 && b->full)
            printf("%-10ld%*.2f%*.2f%*.2f%*d\n", size, FIELD, r[0], FIELD, r[1], FIELD, r[2], 12, iters);
        else if (rank == 0)
            printf("%-10ld%*.2f\n", size, FIELD, r[0]);
        fflush(stdout);
    }
}

#define MODES 4

static void run_compare(const struct bench *b, int rank, int size_world, void *send, void *recv)
{
    const char *modes[MODES] = {"off", "node", "socket", "host"};
    MPI_Comm comms[MODES];
    int ok[MODES];
    for (int m = 0; m < MODES; m++)
        comms[m] = comm_in_mode(modes[m], &ok[m]);
    set_mode(getenv("OFFPATH_MODE") ? getenv("OFFPATH_MODE") : "node");
    if (rank == 0) {
        printf("\n# offpath osu_allreduce --compare: %d ranks, %s, sum\n", size_world, b->type_name);
        printf("# host: the MPI's own allreduce; INC: through the switches%s\n",
               ok[1] && ok[2] ? "" : " (unavailable: run under offpath mpirun)");
        printf("# host UDP: the same leaders with offpath's own host algorithm over UDP%s\n",
               ok[3] ? "" : " (unavailable: run under offpath mpirun)");
        printf("# Size        Host(us)    INC Node(us)  INC Socket(us)    Host UDP(us)"
               "    Node vs host  Socket vs host     UDP vs host\n");
    }
    for (long size = b->min_size; size <= b->max_size; size *= 2) {
        if (size < b->type_size)
            continue;
        double r[MODES][3];
        int iters;
        for (int m = 0; m < MODES; m++)
            measure(comms[m], b, size, send, recv, r[m], &iters);
        if (rank == 0)
            printf("%-10ld%14.2f%16.2f%16.2f%16.2f%15.1f%%%15.1f%%%15.1f%%\n", size, r[0][0],
                   r[1][0], r[2][0], r[3][0], 100.0 * (r[1][0] - r[0][0]) / r[0][0],
                   100.0 * (r[2][0] - r[0][0]) / r[0][0], 100.0 * (r[3][0] - r[0][0]) / r[0][0]);
        fflush(stdout);
    }
    for (int m = 0; m < MODES; m++)
        MPI_Comm_free(&comms[m]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct bench b;
    int rc = parse(argc, argv, rank, &b);
    if (rc != 0) {
        MPI_Finalize();
        return rc < 0 ? 0 : rc;
    }
    void *send = calloc(1, (size_t)b.max_size), *recv = calloc(1, (size_t)b.max_size);
    if (b.compare)
        run_compare(&b, rank, size, send, recv);
    else
        run_plain(&b, rank, send, recv);
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
