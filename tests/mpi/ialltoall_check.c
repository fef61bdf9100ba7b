/* An unmodified MPI program (nothing offpath-specific): MPI_Ialltoall on
 * several counts, completed by MPI_Wait, by polling MPI_Test, by MPI_Waitall
 * of two calls on two communicators, and followed by a blocking
 * MPI_Alltoall before its wait; every received element is compared with
 * what its sender must have sent. Then the overlap, measured as OSU's
 * osu_ialltoall does: the pure call (MPI_Ialltoall then MPI_Wait), a
 * compute loop as long, and both together with no MPI call in between (so
 * what overlaps is what moves on its own). Rank 0 prints
 * "ialltoall_check: R ranks, C calls, M mismatches" and
 * "ialltoall_check: overlap X% (pure P us, compute C us, overall T us)";
 * exit 1 on any mismatch. argv[1]: ints to each rank in the overlap
 * measurement (default 16384). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS 20

static int value(int from, int to, int i, int call) { return from * 100003 + to * 1009 + i * 7 + call; }

struct buf {
    int *send, *recv;
    int count, size, rank;
};

static void prepare(struct buf *b, MPI_Comm comm, int count, int call)
{
    MPI_Comm_rank(comm, &b->rank);
    MPI_Comm_size(comm, &b->size);
    b->count = count;
    b->send = malloc((size_t)b->size * count * sizeof(int));
    b->recv = calloc((size_t)b->size * count, sizeof(int));
    for (int q = 0; q < b->size; q++)
        for (int i = 0; i < count; i++)
            b->send[q * count + i] = value(b->rank, q, i, call);
}

static long verify(struct buf *b, int call)
{
    long bad = 0;
    for (int q = 0; q < b->size; q++)
        for (int i = 0; i < b->count; i++)
            bad += b->recv[q * b->count + i] != value(q, b->rank, i, call);
    free(b->send);
    free(b->recv);
    return bad;
}

static MPI_Request start(struct buf *b, MPI_Comm comm)
{
    MPI_Request req;
    MPI_Ialltoall(b->send, b->count, MPI_INT, b->recv, b->count, MPI_INT, comm, &req);
    return req;
}

static long waited(MPI_Comm comm, int count, int call)
{
    struct buf b;
    prepare(&b, comm, count, call);
    MPI_Request req = start(&b, comm);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    return verify(&b, call);
}

static long polled(MPI_Comm comm, int count, int call)
{
    struct buf b;
    prepare(&b, comm, count, call);
    MPI_Request req = start(&b, comm);
    int flag = 0;
    for (long k = 0; !flag && k < 100000000L; k++)
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    if (!flag)
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    return verify(&b, call) + !flag;
}

/* Two in flight on two communicators, completed together. */
static long two_at_once(MPI_Comm a, MPI_Comm c, int count, int call)
{
    struct buf x, y;
    prepare(&x, a, count, call);
    prepare(&y, c, count, call + 1);
    MPI_Request reqs[2] = {start(&x, a), start(&y, c)};
    MPI_Status sts[2]; /* (MPICH's header: MPI_STATUSES_IGNORE trips -Wstringop-overflow) */
    MPI_Waitall(2, reqs, sts);
    return verify(&x, call) + verify(&y, call + 1);
}

/* A blocking call after a nonblocking one on the same communicator, before
 * the wait: collectives run in the order they were called. */
static long then_blocking(MPI_Comm comm, int count, int call)
{
    struct buf x, y;
    prepare(&x, comm, count, call);
    prepare(&y, comm, count, call + 1);
    MPI_Request req = start(&x, comm);
    MPI_Alltoall(y.send, count, MPI_INT, y.recv, count, MPI_INT, comm);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    return verify(&x, call) + verify(&y, call + 1);
}

static volatile double sink;

static void compute(long iters)
{
    double s = 0;
    for (long i = 0; i < iters; i++)
        s += (double)(i % 7) * 0.5;
    sink = s;
}

static double slowest(double t)
{
    double m;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/* The median of REPS of (start, `iters` of compute, wait), slowest rank's. */
static double timed(struct buf *b, long iters, int with_call)
{
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Request req = with_call ? start(b, MPI_COMM_WORLD) : MPI_REQUEST_NULL;
        compute(iters);
        if (with_call)
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        t[r] = slowest(MPI_Wtime() - t0);
    }
    for (int i = 1; i < REPS; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[REPS / 2];
}

static void overlap(int count, int rank)
{
    struct buf b;
    prepare(&b, MPI_COMM_WORLD, count, 7);
    double pure = timed(&b, 0, 1);
    long iters = 1000;
    double one = timed(&b, iters, 0);
    iters = one > 0 ? (long)((double)iters * pure / one) : iters;
    double comp = timed(&b, iters, 0);
    double all = timed(&b, iters, 1);
    double x = pure > 0 ? 100.0 * (1.0 - (all - comp) / pure) : 0;
    x = x < 0 ? 0 : x > 100 ? 100 : x;
    if (rank == 0)
        printf("ialltoall_check: overlap %.1f%% (pure %.1f us, compute %.1f us, overall %.1f "
               "us, %d ints to each rank)\n",
               x, pure * 1e6, comp * 1e6, all * 1e6, count);
    verify(&b, 7);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, counts[] = {1, 64, 4096, 65536}, calls = 0;
    int n = argc > 1 ? atoi(argv[1]) : 16384;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    long bad = 0;
    for (int k = 0; k < 4; k++) {
        bad += waited(MPI_COMM_WORLD, counts[k], calls++);
        bad += polled(MPI_COMM_WORLD, counts[k], calls++);
        bad += two_at_once(MPI_COMM_WORLD, half, counts[k], calls);
        calls += 2;
        bad += then_blocking(MPI_COMM_WORLD, counts[k], calls);
        calls += 2;
    }
    long total;
    MPI_Reduce(&bad, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ialltoall_check: %d ranks, %d calls, %ld mismatches\n", size, calls, total);
    overlap(n > 0 ? n : 16384, rank);
    MPI_Comm_free(&half);
    MPI_Finalize();
    return rank == 0 && total != 0 ? 1 : 0;
}
