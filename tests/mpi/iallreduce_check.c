/* An unmodified MPI program (nothing offpath-specific): MPI_Iallreduce mixed
 * with MPI_Allreduce, several requests outstanding at once on MPI_COMM_WORLD,
 * a dup and a split, completed by MPI_Waitall, MPI_Test loops, MPI_Waitany,
 * MPI_Waitsome and MPI_Wait in reverse order; one request a round uses a
 * user-defined op (which no switch can take). Where the MPI has MPI 4's
 * MPI_Allreduce_init (MPICH), each communicator also has a persistent
 * allreduce, started (MPI_Startall) with the others every round and
 * completed by MPI_Wait or an MPI_Test loop (MPICH 4.0.2 alone, without
 * offpath, leaves persistent collectives active after MPI_Waitall and
 * corrupts its heap in MPI_Waitany/Waitsome on them). Every result is compared
 * element by element with a reference computed here from every rank's
 * (deterministic) input; values are small integers, so float sums are exact
 * in any order. Prints "iallreduce_check: ..." on rank 0; exit 1 on any
 * mismatch. Usage: iallreduce_check [ROUNDS] [MAX_COUNT] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 5 /* requests per communicator per round */
#define COMMS 3
#if MPI_VERSION >= 4
#define PERSISTENT 1 /* slot SLOTS: MPI_Allreduce_init's */
#else
#define PERSISTENT 0
#endif
#define REQS (COMMS * SLOTS)

struct slot {
    MPI_Datatype type;
    MPI_Op op;
    int count, in_place, is_double, user_op;
    void *send, *recv;
};

static double value(int rank, int i, int round, int slot)
{
    return (double)((rank * 3 + i + round * 7 + slot * 5) % 11 - 3);
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

static MPI_Op user_op;

static void setup(struct slot *s, int k, int round, int max_count)
{
    static const int counts[] = {1, 7, 256, 3000, 70000};
    int c = counts[(k + round) % 5];
    s->count = c > max_count ? max_count : c;
    s->is_double = k % 2;
    s->type = s->is_double ? MPI_DOUBLE : MPI_INT;
    s->user_op = k == SLOTS - 1;
    s->op = s->user_op ? user_op : (k + round) % 3 == 0 ? MPI_MAX : MPI_SUM;
    if (s->user_op) {
        s->is_double = 0;
        s->type = MPI_INT;
    }
    s->in_place = (k + round) % 2;
}

static void fill(struct slot *s, int rank, int round, int k)
{
    size_t esize = s->is_double ? sizeof(double) : sizeof(int);
    s->send = malloc((size_t)s->count * esize);
    s->recv = malloc((size_t)s->count * esize);
    for (int i = 0; i < s->count; i++) {
        double v = value(rank, i, round, k);
        if (s->is_double)
            ((double *)s->send)[i] = v;
        else
            ((int *)s->send)[i] = (int)v;
    }
    if (s->in_place)
        memcpy(s->recv, s->send, (size_t)s->count * esize);
}

static long check(const struct slot *s, MPI_Comm comm, int round, int k)
{
    int size, rank, wrank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    int *world_of = malloc(sizeof(int) * (size_t)size); /* comm rank -> its input's rank */
    PMPI_Allgather(&wrank, 1, MPI_INT, world_of, 1, MPI_INT, comm);
    long bad = 0;
    for (int i = 0; i < s->count; i++) {
        double want = 0;
        for (int r = 0; r < size; r++) {
            double v = value(world_of[r], i, round, k);
            want = r == 0 ? v : s->op == MPI_MAX ? (v > want ? v : want) : want + v;
        }
        double got = s->is_double ? ((double *)s->recv)[i] : ((int *)s->recv)[i];
        if (got != want && bad++ < 3)
            fprintf(stderr, "rank %d: round %d slot %d count %d element %d: got %g, want %g\n",
                    wrank, round, k, s->count, i, got, want);
    }
    free(world_of);
    return bad;
}

static void post(struct slot *s, MPI_Comm comm, MPI_Request *req)
{
    MPI_Iallreduce(s->in_place ? MPI_IN_PLACE : s->send, s->recv, s->count, s->type, s->op, comm,
                   req);
}

/* Completion by one of the ways a program may complete requests. */
static void complete(int how, int n, MPI_Request *reqs)
{
    /* arrays, not MPI_STATUSES_IGNORE: gcc takes MPICH's for a 0-byte array */
    MPI_Status *st = malloc(sizeof(*st) * (size_t)n);
    if (how == 0) {
        MPI_Waitall(n, reqs, st);
    } else if (how == 1) {
        int *done = calloc((size_t)n, sizeof(int)); /* a persistent one stays, inactive */
        for (int left = n; left > 0;) {
            for (int i = 0; i < n; i++) {
                int flag = 0;
                if (done[i])
                    continue;
                MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
                done[i] = flag != 0;
                left -= flag != 0;
            }
        }
        free(done);
    } else if (how == 2) {
        for (int i = 0; i < n; i++) {
            int idx;
            MPI_Waitany(n, reqs, &idx, MPI_STATUS_IGNORE);
        }
    } else if (how == 3) {
        int done = 0, out, *idx = malloc(sizeof(int) * (size_t)n);
        while (done < n) {
            MPI_Waitsome(n, reqs, &out, idx, st);
            done += out;
        }
        free(idx);
    } else {
        for (int i = n - 1; i >= 0; i--)
            MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
    }
    free(st);
}

/* Blocking calls between the posts: the same communicators, the same order. */
static long blocking(MPI_Comm comm, int round)
{
    int mine = round + 1, sum = 0, size;
    MPI_Comm_size(comm, &size);
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, comm);
    return sum != size * (round + 1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rounds = argc > 1 ? atoi(argv[1]) : 10, max_count = argc > 2 ? atoi(argv[2]) : 3000;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Op_create(user_sum, 1, &user_op);
    MPI_Comm comms[COMMS] = {MPI_COMM_WORLD};
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &comms[2]);
    long bad = 0, calls = 0;
    struct slot pers[COMMS];
    MPI_Request reqs[REQS], preqs[COMMS];
#if PERSISTENT
    for (int c = 0; c < COMMS; c++) {
        setup(&pers[c], 1, 0, max_count); /* doubles, 7 of them */
        pers[c].op = MPI_SUM;
        pers[c].in_place = 0;
        fill(&pers[c], rank, 0, SLOTS);
        MPI_Allreduce_init(pers[c].send, pers[c].recv, pers[c].count, pers[c].type, MPI_SUM,
                           comms[c], MPI_INFO_NULL, &preqs[c]);
    }
#endif
    for (int round = 0; round < rounds; round++) {
        struct slot s[COMMS][SLOTS];
#if PERSISTENT
        for (int c = 0; c < COMMS; c++)
            for (int i = 0; i < pers[c].count; i++)
                ((double *)pers[c].send)[i] = value(rank, i, round, SLOTS);
        MPI_Startall(COMMS, preqs);
        calls += COMMS;
#endif
        for (int k = 0; k < SLOTS; k++)
            for (int c = 0; c < COMMS; c++) {
                setup(&s[c][k], k, round, max_count);
                fill(&s[c][k], rank, round, k);
                post(&s[c][k], comms[c], &reqs[c * SLOTS + k]);
                calls++;
                if (k == 2 && c == round % COMMS)
                    bad += blocking(comms[c], round);
            }
        complete(round % 5, REQS, reqs);
        for (int c = 0; c < COMMS && PERSISTENT; c++) {
            complete(round % 2 ? 1 : 4, 1, &preqs[c]); /* a Test loop, or MPI_Wait */
            bad += check(&pers[c], comms[c], round, SLOTS);
        }
        for (int c = 0; c < COMMS; c++)
            for (int k = 0; k < SLOTS; k++) {
                bad += check(&s[c][k], comms[c], round, k);
                free(s[c][k].send);
                free(s[c][k].recv);
            }
    }
    for (int c = 0; c < COMMS && PERSISTENT; c++) {
        MPI_Request_free(&preqs[c]);
        free(pers[c].send);
        free(pers[c].recv);
    }
    MPI_Comm_free(&comms[2]);
    MPI_Comm_free(&comms[1]);
    MPI_Op_free(&user_op);
    long total = 0;
    PMPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("iallreduce_check: %d ranks, %ld calls, %ld mismatches\n", size, calls, total);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
