/* osu_iallreduce: the OSU micro-benchmark's nonblocking Allreduce test, same
 * flags, method and rows, so its numbers sit beside OSU's own binary's:
 * first the pure communication time (MPI_Iallreduce then MPI_Wait), then
 * the same call with that long of computation between the two (MPI_Test
 * called -t times during it), and the overlap: how much of the
 * communication the computation hid, 100 * (1 - (overall - compute) / pure).
 * The computation is real CPU work, not a sleep, and calls no MPI (except
 * -t's MPI_Test): what overlaps is what progresses on its own. -c checks
 * every result. An ordinary MPI program; the flags come from src/cli. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "osu_bench.h"

#define W OSU_FIELD

/* Per-rank sums of one size's times (seconds), then averages over ranks. */
struct times {
    double pure, overall, compute, test, init, wait;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* where the work's result goes, so the compiler cannot drop the work */
volatile float osu_work_sink;

/* CPU work (multiply-adds on a cache-resident array) for `seconds`. */
static void work(double seconds)
{
    static float a[256];
    double end = now_s() + seconds;
    float x = 1.0001f;
    do {
        for (int rep = 0; rep < 16; rep++)
            for (int i = 0; i < 256; i++)
                a[i] = a[i] * x + 0.5f;
        x = a[x > 1 ? 3 : 5] > 1e6f ? 1.0f : x;
    } while (now_s() < end);
    osu_work_sink = a[0];
}

/* `seconds` of work in test_calls + 1 slices, MPI_Test between them; the
 * time the tests took is reported apart, as OSU does. */
static double compute(double seconds, int test_calls, MPI_Request *req, double *test_time)
{
    double t0 = now_s(), slice = seconds / (test_calls + 1);
    for (int k = 0; k < test_calls; k++) {
        work(slice);
        int flag;
        double t = MPI_Wtime();
        MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        *test_time += MPI_Wtime() - t;
    }
    work(slice);
    return now_s() - t0;
}

/* ---- -c: every rank's input is known, so every result can be checked */
static double input(int rank, long i, int iter) { return (double)((rank + i + iter) % 3); }

static void put(const struct osu_run *b, void *buf, long i, double v)
{
    switch (b->cfg->type) {
    case OP_OSU_FLOAT: ((float *)buf)[i] = (float)v; break;
    case OP_OSU_DOUBLE: ((double *)buf)[i] = v; break;
    case OP_OSU_LONG: ((long *)buf)[i] = (long)v; break;
    case OP_OSU_CHAR: ((signed char *)buf)[i] = (signed char)v; break;
    case OP_OSU_INT: ((int *)buf)[i] = (int)v; break;
    }
}

static double get(const struct osu_run *b, const void *buf, long i)
{
    switch (b->cfg->type) {
    case OP_OSU_FLOAT: return ((const float *)buf)[i];
    case OP_OSU_DOUBLE: return ((const double *)buf)[i];
    case OP_OSU_LONG: return (double)((const long *)buf)[i];
    case OP_OSU_CHAR: return ((const signed char *)buf)[i];
    case OP_OSU_INT: break;
    }
    return ((const int *)buf)[i];
}

static void fill(const struct osu_run *b, int count, int iter)
{
    for (long i = 0; i < count; i++)
        put(b, b->send, i, input(b->rank, i, iter));
}

static long wrong(const struct osu_run *b, int count, int iter)
{
    long bad = 0;
    for (long i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < b->size; r++)
            want += input(r, i, iter);
        bad += get(b, b->recv, i) != want;
    }
    return bad;
}

/* ---- the measurement */
static double pure_comm(const struct osu_run *b, int count, int iters, int warmup)
{
    double total = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters + warmup; i++) {
        MPI_Request req;
        double t0 = MPI_Wtime();
        MPI_Iallreduce(b->send, b->recv, count, b->type, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (i >= warmup)
            total += MPI_Wtime() - t0;
    }
    return total / iters;
}

static void overlapped(const struct osu_run *b, int count, int iters, int warmup, double pure,
                       struct times *t, long *bad)
{
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters + warmup; i++) {
        if (b->cfg->validate)
            fill(b, count, i);
        struct times one = {0};
        MPI_Request req;
        double t0 = MPI_Wtime();
        MPI_Iallreduce(b->send, b->recv, count, b->type, MPI_SUM, MPI_COMM_WORLD, &req);
        one.init = MPI_Wtime() - t0;
        one.compute = compute(pure, b->cfg->test_calls, &req, &one.test);
        double tw = MPI_Wtime();
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        one.wait = MPI_Wtime() - tw;
        one.overall = MPI_Wtime() - t0;
        if (b->cfg->validate)
            *bad += wrong(b, count, i);
        if (i < warmup)
            continue;
        t->overall += one.overall;
        t->compute += one.compute;
        t->test += one.test;
        t->init += one.init;
        t->wait += one.wait;
    }
}

/* Each rank's per-iteration means in us, averaged over ranks on rank 0. */
static void average(const struct osu_run *b, struct times *t, int iters)
{
    double mine[6] = {t->pure, t->overall / iters, t->compute / iters, t->test / iters,
                      t->init / iters, t->wait / iters};
    double sum[6];
    MPI_Reduce(mine, sum, 6, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    double k = 1e6 / b->size;
    *t = (struct times){.pure = sum[0] * k, .overall = sum[1] * k, .compute = sum[2] * k,
                        .test = sum[3] * k, .init = sum[4] * k, .wait = sum[5] * k};
}

static void header(const struct osu_run *b)
{
    printf("\n# OSU MPI Non-blocking Allreduce Latency Test (offpath osu_iallreduce)\n");
    printf("# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n\n");
    printf("# Datatype: %s.\n", op_osu_type_name(b->cfg->type));
    printf("%-10s%*s%*s", "# Size", W, "Overall(us)", W, "Compute(us)");
    if (b->cfg->full)
        printf("%*s%*s%*s", W, "Coll. Init(us)", W, "MPI_Test(us)", W, "MPI_Wait(us)");
    printf("%*s%*s", W, "Pure Comm.(us)", W, "Overlap(%)");
    printf(b->cfg->validate ? "%*s\n" : "\n", W, "Validation");
    fflush(stdout);
}

static void row(const struct osu_run *b, long size, const struct times *t, long bad)
{
    double compute = t->compute - t->test; /* the tests are overhead, not compute */
    double overlap = 100.0 * (1.0 - (t->overall - compute) / t->pure);
    printf("%-10ld%*.2f%*.2f", size, W, t->overall, W, compute);
    if (b->cfg->full)
        printf("%*.2f%*.2f%*.2f", W, t->init, W, t->test, W, t->wait);
    printf("%*.2f%*.2f", W, t->pure, W, overlap > 0 ? overlap : 0.0);
    printf(b->cfg->validate ? "%*s\n" : "\n", W, bad == 0 ? "Pass" : "Fail");
    fflush(stdout);
}

static void run(const struct osu_run *b)
{
    if (b->rank == 0)
        header(b);
    for (long size = b->cfg->min_size; size <= b->cfg->max_size; size *= 2) {
        if (size < b->type_size)
            continue;
        int count = (int)(size / b->type_size);
        int iters = osu_iters(b->cfg, size), warmup = osu_warmup(b->cfg, size);
        memset(b->send, 0, (size_t)size);
        struct times t = {.pure = pure_comm(b, count, iters, warmup)};
        long bad = 0, all_bad = 0;
        overlapped(b, count, iters, warmup, t.pure, &t, &bad);
        average(b, &t, iters);
        MPI_Reduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (b->rank == 0)
            row(b, size, &t, all_bad);
    }
}

int main(int argc, char **argv) { return osu_main(OP_OSU_IALLREDUCE, argc, argv, run); }
