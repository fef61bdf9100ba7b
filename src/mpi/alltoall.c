/* MPI_Alltoall and MPI_Ialltoall by the agent's worker threads (offpath/agent.h), when
 * OFFPATH_ALLTOALL=agent: an unmodified MPI program's all-to-all moves as
 * RDMA writes over offpath's RoCEv2 instead of the MPI's own path. Each
 * communicator gets its workers at its first call of a chunk size (a
 * collective setup over PMPI); every call first agrees over PMPI that all
 * ranks take this path with the same chunk, so a rank that cannot (an odd
 * datatype, MPI_IN_PLACE, a broken worker) sends all of them to the MPI's
 * own MPI_Alltoall instead of leaving the others waiting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_nb.h"

#define A2A_CALL_NS (30 * OP_NS_PER_S)

/* Bytes a rank sends each rank, when the buffers are plain bytes: a
 * contiguous type whose extent is its size; 0 otherwise. */
static size_t plain_chunk(const void *sendbuf, int scount, MPI_Datatype stype, int rcount,
                          MPI_Datatype rtype)
{
    int ssize, rsize;
    MPI_Aint slb, sext, rlb, rext;
    if (sendbuf == MPI_IN_PLACE || scount <= 0 || PMPI_Type_size(stype, &ssize) != MPI_SUCCESS ||
        PMPI_Type_size(rtype, &rsize) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(stype, &slb, &sext) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(rtype, &rlb, &rext) != MPI_SUCCESS)
        return 0;
    if (slb != 0 || rlb != 0 || sext != ssize || rext != rsize ||
        (int64_t)scount * ssize != (int64_t)rcount * rsize)
        return 0;
    return (size_t)scount * (size_t)ssize;
}

/* Every rank's chunk, or 0 for all when any rank has 0 or another size. */
static size_t agreed_chunk(MPI_Comm comm, size_t chunk)
{
    long long mine[2] = {(long long)chunk, -(long long)chunk}, all[2];
    PMPI_Allreduce(mine, all, 2, MPI_LONG_LONG, MPI_MIN, comm);
    return all[0] > 0 && all[0] == -all[1] ? (size_t)all[0] : 0;
}

struct setup {
    struct op_a2a_endpoint *eps;
    struct op_a2a_qp_info *mine, *theirs;
};

static bool setup_alloc(struct setup *s, int ranks)
{
    s->eps = calloc((size_t)ranks, sizeof(*s->eps));
    s->mine = calloc((size_t)ranks, sizeof(*s->mine));
    s->theirs = calloc((size_t)ranks, sizeof(*s->theirs));
    return s->eps && s->mine && s->theirs;
}

static void setup_free(struct setup *s)
{
    free(s->eps);
    free(s->mine);
    free(s->theirs);
}

/* Every rank's verdict: true only if all are. */
static bool all_of(MPI_Comm comm, bool ok)
{
    int mine = ok, all;
    PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, comm);
    return all != 0;
}

/* Endpoints to all, each pair's QP to its peer (collective). */
static op_status_t connect_workers(MPI_Comm comm, struct op_a2a *a, struct setup *s)
{
    struct op_a2a_endpoint me;
    op_a2a_endpoint(a, &me);
    op_a2a_qp_infos(a, s->mine);
    PMPI_Allgather(&me, sizeof me, MPI_BYTE, s->eps, sizeof me, MPI_BYTE, comm);
    PMPI_Alltoall(s->mine, sizeof *s->mine, MPI_BYTE, s->theirs, sizeof *s->mine, MPI_BYTE,
                  comm);
    return op_a2a_connect(a, s->eps, s->theirs);
}

/* Workers for chunks of `chunk` bytes on every rank of comm, or on none. */
static bool open_workers(MPI_Comm comm, struct opm_comm *c, size_t chunk)
{
    int rank, ranks;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &ranks);
    opm_a2a_free(c);
    struct op_a2a_config cfg = {.ranks = (uint32_t)ranks, .rank = (uint32_t)rank,
                                .workers = opm.cfg.alltoall_threads, .ip = opm.my_ip,
                                .chunk = chunk, .progress = true /* MPI_Ialltoall's */,
                                .pinned = opm.cfg.alltoall_pinned, .cpu = opm.cfg.alltoall_cpu};
    struct setup s;
    op_status_t st = setup_alloc(&s, ranks) ? op_a2a_create(&cfg, &c->a2a) : OP_ERR_NOMEM;
    bool ok = all_of(comm, st == OP_OK);
    if (ok)
        st = connect_workers(comm, c->a2a, &s);
    ok = ok && all_of(comm, st == OP_OK);
    setup_free(&s);
    if (ok) {
        c->a2a_chunk = chunk;
        return true;
    }
    if (opm.cfg.verbose && st != OP_OK)
        fprintf(stderr, "offpath: rank %d: all-to-all workers: %s\n", opm.world_rank,
                op_status_str(st));
    opm_a2a_free(c);
    c->a2a_broken = true; /* every rank: the calls are the MPI's */
    return false;
}

/* A call's first half: the send buffer in, the workers started. */
static void begin(struct opm_comm *c, const void *sendbuf, MPI_Comm comm)
{
    int ranks;
    PMPI_Comm_size(comm, &ranks);
    memcpy(op_a2a_sendbuf(c->a2a), sendbuf, (size_t)ranks * c->a2a_chunk);
    op_a2a_start(c->a2a, op_now_ns() + A2A_CALL_NS);
}

static int a2a_end(struct opm_comm *c, void *recvbuf, MPI_Comm comm)
{
    int ranks;
    PMPI_Comm_size(comm, &ranks);
    op_status_t st = op_a2a_wait(c->a2a);
    if (st != OP_OK) {
        /* the others may have their data; this rank has not: the call
         * fails here, and the next one agrees to go the MPI's way */
        fprintf(stderr, "offpath: rank %d: MPI_Alltoall by the workers: %s\n", opm.world_rank,
                op_status_str(st));
        c->a2a_broken = true;
        PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
        return MPI_ERR_OTHER;
    }
    memcpy(recvbuf, op_a2a_recvbuf(c->a2a), (size_t)ranks * c->a2a_chunk);
    opm.a2a_agent++;
    return MPI_SUCCESS;
}

/* An MPI_Ialltoall as a request of requests.c's table: the workers move
 * it; done, the result is copied out (or the error raised) and the
 * request completes in the caller's Wait or Test. */
struct ia2a {
    struct opm_req base; /* first: the table's */
    void *recvbuf;
};

static enum opm_moved ia2a_step(struct opm_req *r)
{
    if (!op_a2a_done(r->c->a2a))
        return OPM_NONE;
    (void)a2a_end(r->c, ((struct ia2a *)r)->recvbuf, r->comm); /* an error raised there */
    return OPM_GONE;
}

static bool ia2a_switch_only(const struct opm_req *r)
{
    (void)r;
    return false;
}

static const struct opm_req_ops ia2a_ops = {.step = ia2a_step, .switch_only = ia2a_switch_only};

static int ia2a_request(struct opm_comm *c, void *recvbuf, MPI_Comm comm, MPI_Request *req)
{
    struct ia2a *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        (void)a2a_end(c, recvbuf, comm); /* the others run it: finish it here */
        return opm_no_memory(comm);
    }
    *r = (struct ia2a){.base = {.ops = &ia2a_ops, .comm = comm, .c = c}, .recvbuf = recvbuf};
    int rc = opm_req_start(&r->base);
    if (rc != MPI_SUCCESS) {
        (void)a2a_end(c, recvbuf, comm);
        free(r);
        return rc;
    }
    *req = r->base.greq;
    return MPI_SUCCESS;
}

/* The communicator's state when this call goes to the workers (they are
 * ready for it), or NULL: the MPI's own, on every rank alike. */
static struct opm_comm *by_agent(const void *sendbuf, int scount, MPI_Datatype stype,
                                 int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    struct opm_comm *c = opm.initialized && opm.cfg.alltoall_agent ? opm_comm_get(comm) : NULL;
    int inter = 0;
    if (c != NULL)
        PMPI_Comm_test_inter(comm, &inter);
    if (c == NULL || inter)
        return NULL;
    opm.a2a_calls++;
    opm_iar_drain(comm); /* an MPI_Ialltoall still running holds the workers */
    size_t mine = c->a2a_broken ? 0 : plain_chunk(sendbuf, scount, stype, rcount, rtype);
    size_t chunk = agreed_chunk(comm, mine);
    if (chunk == 0 || (chunk != c->a2a_chunk && !open_workers(comm, c, chunk)))
        return NULL;
    return c;
}

OP_API int MPI_Alltoall(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf,
                        int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    struct opm_comm *c = by_agent(sendbuf, scount, stype, rcount, rtype, comm);
    if (c == NULL)
        return PMPI_Alltoall(sendbuf, scount, stype, recvbuf, rcount, rtype, comm);
    begin(c, sendbuf, comm);
    return a2a_end(c, recvbuf, comm);
}

/* Returns once the workers have the call (after the ranks' agreement, one
 * small allreduce): they move it while the program computes, and its
 * MPI_Wait or MPI_Test completes it (iallreduce.c's requests). */
OP_API int MPI_Ialltoall(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf,
                         int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    struct opm_comm *c = by_agent(sendbuf, scount, stype, rcount, rtype, comm);
    if (c == NULL)
        return PMPI_Ialltoall(sendbuf, scount, stype, recvbuf, rcount, rtype, comm, req);
    opm.ia2a_calls++;
    begin(c, sendbuf, comm);
    return ia2a_request(c, recvbuf, comm, req);
}

void opm_a2a_free(struct opm_comm *c)
{
    op_a2a_destroy(c->a2a);
    c->a2a = NULL;
    c->a2a_chunk = 0;
}

void opm_a2a_summary(void)
{
    uint64_t mine[3] = {opm.a2a_calls, opm.a2a_agent, opm.ia2a_calls}, sum[3];
    PMPI_Reduce(mine, sum, 3, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (opm.world_rank == 0 && opm.cfg.alltoall_agent)
        fprintf(stderr,
                "offpath: alltoall: %llu rank calls, %llu by the agent's workers (%u a rank), "
                "%llu the MPI's own; %llu MPI_Ialltoall by the workers\n",
                (unsigned long long)sum[0], (unsigned long long)sum[1],
                opm.cfg.alltoall_threads, (unsigned long long)(sum[0] - sum[1]),
                (unsigned long long)sum[2]);
}
