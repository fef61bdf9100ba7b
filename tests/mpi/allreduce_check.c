/* An unmodified MPI program (nothing offpath-specific): runs MPI_Allreduce on
 * many counts, types and ops, on MPI_COMM_WORLD and on split and dup'ed
 * communicators, in place and not, and compares every result element by
 * element with PMPI_Allreduce's (which offpath never intercepts) and with a
 * reference computed here from every rank's (deterministic) input. Values are
 * small integers so float results are exact in any reduction order.
 * Where PMPI_Allreduce disagrees with the reference it is reported, not
 * counted against offpath (MPICH 4.0.2 computes MIN/MAX of unsigned types as
 * signed). Prints "allreduce_check: ..." on rank 0; exit 1 on any mismatch. */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tcase {
    MPI_Datatype type;
    size_t size;
    const char *name;
    int is_float;
};

static void fill(const struct tcase *t, MPI_Op op, int rank, int iter, int count, void *buf)
{
    for (int i = 0; i < count; i++) {
        long v = (long)((rank * 7 + i * 3 + iter) % 5) - 1; /* -1..3 */
        if (op == MPI_PROD) /* mostly 1, some 2 and -1: products stay exact */
            v = (rank + i + iter) % 4 != 0 ? 1 : (v > 1 ? 2 : -1);
        if (op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR)
            v = (long)(((unsigned long)rank * 2654435761u + (unsigned long)i * 40503u + (unsigned)iter) & 0x7f);
        if (t->is_float) {
            if (t->size == 4) ((float *)buf)[i] = (float)v;
            else ((double *)buf)[i] = (double)v;
        } else {
            memcpy((char *)buf + (size_t)i * t->size, &v, t->size); /* little-endian */
        }
    }
}

/* Fold one more rank's element x into the running answer acc (both as the
 * element type's bytes), with MPI's semantics for the type. */
static void fold(const struct tcase *t, MPI_Op op, int first, const char *x, char *acc)
{
    unsigned bits = (unsigned)t->size * 8;
    int is_signed = t->type != MPI_UNSIGNED && t->type != MPI_UINT64_T;
    uint64_t u = 0, a = 0;
    memcpy(&u, x, t->size);
    memcpy(&a, acc, t->size);
    double f = t->is_float ? (t->size == 4 ? (double)*(const float *)x : *(const double *)x) : 0;
    double fa = t->is_float ? (t->size == 4 ? (double)*(const float *)acc : *(const double *)acc) : 0;
    int64_t s = (int64_t)(u << (64 - bits)) >> (64 - bits), sa = (int64_t)(a << (64 - bits)) >> (64 - bits);
    int truth = t->is_float ? f != 0 : u != 0, atruth = t->is_float ? fa != 0 : a != 0;
    if (first) {
        /* one rank's element as it is: MPI applies no op to a single input */
    } else if (op == MPI_SUM) { u = a + u; f = fa + f; }
    else if (op == MPI_PROD) { u = a * u; f = fa * f; }
    else if (op == MPI_MIN) { u = (is_signed ? sa < s : a < u) ? a : u; f = fa < f ? fa : f; }
    else if (op == MPI_MAX) { u = (is_signed ? sa > s : a > u) ? a : u; f = fa > f ? fa : f; }
    else if (op == MPI_LAND) { u = (uint64_t)(atruth && truth); f = (double)u; }
    else if (op == MPI_LOR) { u = (uint64_t)(atruth || truth); f = (double)u; }
    else if (op == MPI_LXOR) { u = (uint64_t)(atruth != truth); f = (double)u; }
    else if (op == MPI_BAND) u &= a;
    else if (op == MPI_BOR) u |= a;
    else if (op == MPI_BXOR) u ^= a;
    if (t->is_float && t->size == 4)
        *(float *)acc = (float)f;
    else if (t->is_float)
        *(double *)acc = f;
    else
        memcpy(acc, &u, t->size);
}

/* The exact answer, from every rank's (deterministic) input. */
static void expected(const struct tcase *t, MPI_Op op, int size, int iter, int count, char *out)
{
    char *in = malloc((size_t)count * t->size + 8);
    for (int r = 0; r < size; r++) {
        fill(t, op, r, iter, count, in);
        for (int i = 0; i < count; i++)
            fold(t, op, r == 0, in + (size_t)i * t->size, out + (size_t)i * t->size);
    }
    free(in);
}

static long pmpi_wrong_reported;

static void check(const struct tcase *t, MPI_Op op, int size, int rank, int iter, int count,
                  const char *got, const char *pmpi, long *mismatches)
{
    char *want = malloc((size_t)count * t->size + 8);
    expected(t, op, size, iter, count, want);
    for (int i = 0; i < count; i++) {
        const char *g = got + (size_t)i * t->size, *p = pmpi + (size_t)i * t->size;
        const char *w = want + (size_t)i * t->size;
        if (memcmp(p, w, t->size) != 0 && pmpi_wrong_reported++ == 0 && rank == 0)
            fprintf(stderr, "note: PMPI_Allreduce itself is wrong for %s op %#lx (element %d)\n",
                    t->name, (unsigned long)(intptr_t)op, i);
        if (memcmp(g, w, t->size) != 0) {
            if (*mismatches < 5) {
                unsigned long long gv = 0, wv = 0;
                memcpy(&gv, g, t->size);
                memcpy(&wv, w, t->size);
                fprintf(stderr, "rank %d: %s op %#lx count %d element %d iter %d: got %#llx, want %#llx\n",
                        rank, t->name, (unsigned long)(intptr_t)op, count, i, iter, gv, wv);
            }
            (*mismatches)++;
        }
    }
    free(want);
}

static int stall_rank = -1;
static long world_calls;

/* Between the reference and the call under test, so the others are already
 * waiting in the call when this rank stops. */
static void maybe_stall(MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (comm == MPI_COMM_WORLD && world_calls++ == 50 && rank == stall_rank)
        raise(SIGSTOP);
}

static int run_case(MPI_Comm comm, const struct tcase *t, MPI_Op op, int count, int iter,
                    int in_place, long *mismatches)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    size_t bytes = (size_t)count * t->size;
    char *send = malloc(bytes + 1), *recv = malloc(bytes + 1), *ref = malloc(bytes + 1);
    fill(t, op, rank, iter, count, send);
    PMPI_Allreduce(send, ref, count, t->type, op, comm);
    maybe_stall(comm);
    if (in_place) {
        memcpy(recv, send, bytes);
        MPI_Allreduce(MPI_IN_PLACE, recv, count, t->type, op, comm);
    } else {
        MPI_Allreduce(send, recv, count, t->type, op, comm);
    }
    check(t, op, size, rank, iter, count, recv, ref, mismatches);
    free(send);
    free(recv);
    free(ref);
    return 1;
}

static long run_all(MPI_Comm comm, int iters, int max_count, long *mismatches)
{
    const struct tcase types[] = {
        {MPI_INT, sizeof(int), "int", 0},        {MPI_LONG, sizeof(long), "long", 0},
        {MPI_SHORT, sizeof(short), "short", 0},  {MPI_UNSIGNED, sizeof(unsigned), "unsigned", 0},
        {MPI_INT8_T, 1, "int8", 0},              {MPI_UINT64_T, 8, "uint64", 0},
        {MPI_FLOAT, sizeof(float), "float", 1},  {MPI_DOUBLE, sizeof(double), "double", 1},
    };
    const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR,
                          MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
    const int counts[] = {1, 7, 64, 1000, 70000};
    int n_counts = max_count >= 70000 ? 5 : max_count >= 1000 ? 4 : 3;
    long calls = 0;
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            int bitwise = ops[o] == MPI_BAND || ops[o] == MPI_BOR || ops[o] == MPI_BXOR;
            int logical = ops[o] == MPI_LAND || ops[o] == MPI_LOR || ops[o] == MPI_LXOR;
            if (types[t].is_float && (bitwise || logical))
                continue; /* MPI defines neither on floating point */
            for (int c = 0; c < n_counts; c++)
                for (int it = 0; it < iters; it++)
                    calls += run_case(comm, &types[t], ops[o], counts[c], it, (it + c) % 2,
                                      mismatches);
        }
    return calls;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 2;
    int max_count = argc > 2 ? atoi(argv[2]) : 70000; /* largest count tried */
    int keep_comms = argc > 3 && strcmp(argv[3], "keep") == 0;
    /* "stall": rank 1 stops itself (SIGSTOP) before its 50th call, as a
     * process stopped or descheduled would; whoever runs the test resumes it */
    stall_rank = argc > 3 && strcmp(argv[3], "stall") == 0 ? 1 : -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long mismatches = 0, calls = run_all(MPI_COMM_WORLD, iters, max_count, &mismatches);
    MPI_Comm dup, half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    calls += run_all(dup, 1, max_count, &mismatches);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half);
    calls += run_all(half, 1, max_count, &mismatches);
    if (!keep_comms) { /* "keep": leave them to MPI_Finalize, as mpi4py does */
        MPI_Comm_free(&half);
        MPI_Comm_free(&dup);
    }
    long total = 0;
    PMPI_Allreduce(&mismatches, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("allreduce_check: %d ranks, %ld calls, %ld mismatches, %ld elements where "
               "PMPI_Allreduce was wrong\n", size, calls, total, pmpi_wrong_reported);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
