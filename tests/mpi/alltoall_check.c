/* An unmodified MPI program (nothing offpath-specific): MPI_Alltoall on many
 * counts and types, on MPI_COMM_WORLD and a split, back to back with no
 * barrier, with a derived (strided) type and in place too; every received
 * element is compared with what its sender must have sent. Prints
 * "alltoall_check: R ranks, C calls, M mismatches" on rank 0; exit 1 on any
 * mismatch. argv[1]: rounds (default 3). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int value(int from, int to, int i, int call) { return from * 100003 + to * 1009 + i * 7 + call; }

static long check_ints(MPI_Comm comm, int count, int call)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *send = malloc((size_t)size * count * sizeof(int)), *recv = calloc((size_t)size * count, sizeof(int));
    for (int q = 0; q < size; q++)
        for (int i = 0; i < count; i++)
            send[q * count + i] = value(rank, q, i, call);
    MPI_Alltoall(send, count, MPI_INT, recv, count, MPI_INT, comm);
    long bad = 0;
    for (int q = 0; q < size; q++)
        for (int i = 0; i < count; i++)
            bad += recv[q * count + i] != value(q, rank, i, call);
    free(send);
    free(recv);
    return bad;
}

static long check_doubles_as_bytes(MPI_Comm comm, int count, int call)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    double *send = malloc((size_t)size * count * sizeof(double));
    double *recv = calloc((size_t)size * count, sizeof(double));
    for (int q = 0; q < size; q++)
        for (int i = 0; i < count; i++)
            send[q * count + i] = value(rank, q, i, call) + 0.25;
    /* sent as doubles, received as bytes: the same signature */
    MPI_Alltoall(send, count, MPI_DOUBLE, recv, count * (int)sizeof(double), MPI_BYTE, comm);
    long bad = 0;
    for (int q = 0; q < size; q++)
        for (int i = 0; i < count; i++)
            bad += recv[q * count + i] != value(q, rank, i, call) + 0.25;
    free(send);
    free(recv);
    return bad;
}

/* every other int: a type whose extent is not its size */
static long check_strided(MPI_Comm comm, int count, int call)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Datatype strided, resized;
    MPI_Type_vector(count, 1, 2, MPI_INT, &strided);
    MPI_Type_create_resized(strided, 0, (MPI_Aint)(2 * count * sizeof(int)), &resized);
    MPI_Type_commit(&resized);
    int *send = calloc((size_t)size * count * 2, sizeof(int)), *recv = calloc((size_t)size * count, sizeof(int));
    for (int q = 0; q < size; q++)
        for (int i = 0; i < count; i++)
            send[q * count * 2 + 2 * i] = value(rank, q, i, call);
    MPI_Alltoall(send, 1, resized, recv, count, MPI_INT, comm);
    long bad = 0;
    for (int q = 0; q < size; q++)
        for (int i = 0; i < count; i++)
            bad += recv[q * count + i] != value(q, rank, i, call);
    MPI_Type_free(&resized);
    MPI_Type_free(&strided);
    free(send);
    free(recv);
    return bad;
}

static long check_in_place(MPI_Comm comm, int count, int call)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *buf = malloc((size_t)size * count * sizeof(int));
    for (int q = 0; q < size; q++)
        for (int i = 0; i < count; i++)
            buf[q * count + i] = value(rank, q, i, call);
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, count, MPI_INT, comm);
    long bad = 0;
    for (int q = 0; q < size; q++)
        for (int i = 0; i < count; i++)
            bad += buf[q * count + i] != value(q, rank, i, call);
    free(buf);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rounds = argc > 1 ? atoi(argv[1]) : 3, rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    static const int counts[] = {1, 3, 256, 1000, 65536};
    long bad = 0, calls = 0;
    for (int r = 0; r < rounds; r++) {
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            int call = r * 10 + (int)k;
            bad += check_ints(MPI_COMM_WORLD, counts[k], call);
            bad += check_ints(half, counts[k], call + 1);
            bad += check_doubles_as_bytes(MPI_COMM_WORLD, counts[k] / 2 + 1, call + 2);
            calls += 3;
        }
        bad += check_strided(MPI_COMM_WORLD, 5, r);
        bad += check_in_place(MPI_COMM_WORLD, 7, r);
        bad += check_ints(MPI_COMM_WORLD, 4, r + 77); /* after the MPI's own: the workers again */
        calls += 3;
    }
    long all = 0;
    MPI_Reduce(&bad, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("alltoall_check: %d ranks, %ld calls, %ld mismatches\n", size, calls, all);
    MPI_Comm_free(&half);
    MPI_Finalize();
    return all != 0;
}
