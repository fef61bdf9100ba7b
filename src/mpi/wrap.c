/* The PMPI interposition layer: the MPI functions this library replaces.
 * Loaded with LD_PRELOAD (or linked before the MPI library) into an
 * unmodified MPI program. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "offpath/mpi.h"
#include "mpi_nb.h"

struct opm_state opm;

/* Emulated on loopback, every rank has an address of its own; on a node
 * with one address (OFFPATH_IP, or the host's own in a TOR's range of
 * OFFPATH_TOPOLOGY: a namespace topology, a real cluster) its
 * ranks share it, and each process takes ports of its own, three apart
 * (INC, host path, rescue): a node's socket leaders lead side by side. */
/* A real cluster: of this host's IPv4 addresses, the one a TOR of the
 * topology serves (0: none, as on loopback, where 127.0.0.1 is in no TOR's
 * range and the emulation's addresses are the ranks' own). */
static uint32_t address_served(const struct op_topo *topo)
{
    struct ifaddrs *ifs = NULL;
    uint32_t found = 0;
    if (topo == NULL || getifaddrs(&ifs) != 0)
        return 0;
    for (const struct ifaddrs *i = ifs; i != NULL && found == 0; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
            continue;
        uint32_t ip = ntohl(((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr.s_addr);
        found = op_topo_tor_of(topo, ip) >= 0 ? ip : 0;
    }
    freeifaddrs(ifs);
    return found;
}

static void my_address(const struct op_topo *topo)
{
    const struct opm_config *cfg = &opm.cfg;
    uint32_t ip = cfg->ip != 0 ? cfg->ip : address_served(topo);
    opm.port_base = cfg->port;
    if (ip != 0) {
        opm.my_ip = ip;
        opm.port_base = (uint16_t)(cfg->port + 3u * (unsigned)opm.local);
        return;
    }
    opm.my_ip = 127u << 24 | cfg->net << 16 | (uint32_t)(opm.node + 1) << 8 |
                (uint32_t)(opm.local + 1);
}

static void find_tor(void)
{
    char err[256];
    const struct opm_config *cfg = &opm.cfg;
    bool have_topo = cfg->topology[0] != '\0' &&
                     op_topo_load(cfg->topology, &opm.topo, err, sizeof(err)) == OP_OK;
    my_address(have_topo ? &opm.topo : NULL);
    opm.tor_port = cfg->port;
    if (cfg->switch_ip != 0) {
        opm.tor_ip = cfg->switch_ip;
        return;
    }
    if (have_topo) {
        int t = op_topo_tor_of(&opm.topo, opm.my_ip);
        if (t >= 0) {
            opm.tor_ip = opm.topo.sw[t].ip;
            opm.tor_port = opm.topo.sw[t].port;
            return;
        }
        snprintf(err, sizeof(err), "no TOR of OFFPATH_TOPOLOGY serves this rank's address");
    } else if (cfg->topology[0] == '\0') {
        snprintf(err, sizeof(err), "neither OFFPATH_TOPOLOGY nor OFFPATH_SWITCH is set");
    }
    if (cfg->mode == OP_MODE_HOST)
        return; /* the leaders meet host to host */
    if (opm.world_rank == 0 && cfg->mode != OP_MODE_OFF)
        fprintf(stderr, "offpath: in-network allreduce off: %s\n", err);
    opm.cfg.mode = OP_MODE_OFF;
}

static int finalize_hook(MPI_Comm comm, int keyval, void *attr, void *extra);

/* What the levels above a communicator's own state add to it: the node's
 * steps, Host mode's leaders, MPI_Alltoall's workers. */
static void free_parts(struct opm_comm *c)
{
    opm_host_free(c);
    opm_node_free(c);
    opm_a2a_free(c);
}

static const struct opm_comm_parts comm_parts = {
    .node_setup = opm_node_setup, .host_join = opm_host_join, .free = free_parts};

/* Collective over COMM_WORLD so every rank decides the same: off for all if
 * any rank cannot reach a switch. */
static void start(void)
{
    opm_config_load(&opm.cfg);
    PMPI_Comm_rank(MPI_COMM_WORLD, &opm.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &opm.world_size);
    opm_identity();
    find_tor();
    int reach = opm.tor_ip != 0 || opm.cfg.mode == OP_MODE_HOST, all = 0;
    PMPI_Allreduce(&reach, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        opm.cfg.mode = OP_MODE_OFF;
        opm.tor_ip = 0;
    }
    /* MPI_Comm_free calls opm_comm_delete, which leaves the communicator's
     * group: no MPI_Comm_free wrapper needed; finalize_hook does the rest. */
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, opm_comm_delete, &opm.keyval, NULL);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_hook, &opm.self_keyval, NULL);
    PMPI_Comm_set_attr(MPI_COMM_SELF, opm.self_keyval, NULL);
    opm.initialized = true;
    opm_comm_parts_set(&comm_parts);
    opm_comm_setup(MPI_COMM_WORLD);
}

OP_API int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        start();
    return rc;
}

OP_API int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        start();
    return rc;
}

static void summary(void)
{
    uint64_t fell = 0;
    for (int r = 0; r < OPM_R_COUNT_; r++)
        fell += opm.fallback[r];
    char why[512] = "";
    size_t off = 0;
    for (int r = 0; r < OPM_R_COUNT_; r++)
        if (opm.fallback[r] && off < sizeof(why))
            off += (size_t)snprintf(why + off, sizeof(why) - off, "%s%s %llu", off ? ", " : "",
                                    opm_reason_text((unsigned)r),
                                    (unsigned long long)opm.fallback[r]);
    char host[64] = "";
    if (opm.host_path > 0)
        snprintf(host, sizeof(host), ", %llu host path", (unsigned long long)opm.host_path);
    fprintf(stderr, "offpath: %llu allreduce calls: %llu offloaded%s, %llu fell back%s%s%s\n",
            (unsigned long long)opm.calls, (unsigned long long)opm.offloaded, host,
            (unsigned long long)fell, fell ? " (" : "", why, fell ? ")" : "");
    if (opm.by_node > 0)
        fprintf(stderr, "offpath: socket mode: %llu calls above %llu bytes went by node\n",
                (unsigned long long)opm.by_node, (unsigned long long)opm.cfg.socket_max_bytes);
    if (opm.comms_local > 0)
        fprintf(stderr, "offpath: node steps through shared memory in %llu of %llu communicators\n",
                (unsigned long long)opm.comms_shm, (unsigned long long)opm.comms_local);
    opm_iar_summary();
}

/* The leaders' recovery events, summed over every rank (the longest wait:
 * the longest anywhere). Collective over COMM_WORLD. */
static void recovery_summary(void)
{
    uint64_t mine[5] = {opm.late_waits, opm.fetched, opm.redone, opm.rejoins, opm.rejoin_tries};
    uint64_t sum[5], longest = 0;
    PMPI_Reduce(mine, sum, 5, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    PMPI_Reduce(&opm.longest_wait_ns, &longest, 1, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
    if (opm.world_rank != 0 || (sum[0] | sum[1] | sum[2] | sum[4]) == 0)
        return;
    fprintf(stderr,
            "offpath: leaders: %llu calls waited for a late peer (longest %.0f ms), %llu results "
            "taken from a peer, %llu calls redone without the switch (switch unreachable), "
            "%llu rejoins of the switch in %llu tries\n",
            (unsigned long long)sum[0], (double)longest / 1e6, (unsigned long long)sum[1],
            (unsigned long long)sum[2], (unsigned long long)sum[3], (unsigned long long)sum[4]);
}

/* MPI_COMM_SELF's attributes are deleted first thing in MPI_Finalize, with
 * MPI still usable, however finalize was reached (a PMPI_Finalize that
 * bypasses the wrapper, a Fortran binding): the hook where the library lets
 * go of every group and port. Collective, like MPI_Finalize itself. */
static int finalize_hook(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)attr;
    (void)extra;
    if (!opm.initialized)
        return MPI_SUCCESS;
    opm_iar_finalize(); /* before the groups its requests use go */
    if (opm.cfg.verbose)
        opm_a2a_summary(); /* before the world's state goes */
    opm_comm_release_all(); /* the world's and those the program never freed */
    opm_host_finalize();
    if (opm.cfg.verbose && opm.world_rank == 0)
        summary();
    if (opm.cfg.verbose)
        recovery_summary();
    op_inc_port_close(opm.port);
    opm.port = NULL;
    op_rsc_svc_close(opm.rsc);
    opm.rsc = NULL;
    PMPI_Comm_free_keyval(&opm.keyval);
    opm.initialized = false;
    return MPI_SUCCESS;
}

OP_API int MPI_Finalize(void)
{
    if (opm.initialized) {
        /* what MPI_Finalize would do first, done here so the order is ours */
        PMPI_Comm_delete_attr(MPI_COMM_SELF, opm.self_keyval);
        PMPI_Comm_free_keyval(&opm.self_keyval);
    }
    return PMPI_Finalize();
}

static int after_create(int rc, MPI_Comm *newcomm)
{
    if (rc == MPI_SUCCESS && opm.initialized && *newcomm != MPI_COMM_NULL)
        opm_comm_setup(*newcomm);
    return rc;
}

OP_API int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    return after_create(PMPI_Comm_dup(comm, newcomm), newcomm);
}

OP_API int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    return after_create(PMPI_Comm_split(comm, color, key, newcomm), newcomm);
}

OP_API int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    return after_create(PMPI_Comm_split_type(comm, type, key, info, newcomm), newcomm);
}

OP_API int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    return after_create(PMPI_Comm_create(comm, group, newcomm), newcomm);
}


/* offpath/mpi.h */
OP_API int offpath_mpi_set_mode(const char *mode)
{
    enum op_mode m;
    if (!op_mode_parse(mode, true, &m))
        return -1;
    if (m != OP_MODE_OFF && (!opm.initialized || (m != OP_MODE_HOST && opm.tor_ip == 0)))
        return -1;
    opm.cfg.mode = m;
    return 0;
}

OP_API int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype, MPI_Op op,
                  MPI_Comm comm)
{
    if (!opm.initialized)
        return PMPI_Allreduce(sendbuf, recvbuf, count, dtype, op, comm);
    opm_iar_drain(comm); /* its nonblocking calls came first: same group, same order */
    return opm_allreduce(sendbuf, recvbuf, count, dtype, op, comm);
}

/* ---- nonblocking allreduce (iallreduce.c): the call, and the MPI calls
 * that complete requests, which advance offpath's requests first */
OP_API int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dtype,
                          MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    if (!opm.initialized)
        return PMPI_Iallreduce(sendbuf, recvbuf, count, dtype, op, comm, request);
    return opm_iallreduce(sendbuf, recvbuf, count, dtype, op, comm, request);
}

OP_API int MPI_Comm_free(MPI_Comm *comm)
{
    if (opm.initialized && comm != NULL)
        opm_iar_comm_free(*comm);
    return PMPI_Comm_free(comm);
}

static MPI_Status *as_array(MPI_Status *status)
{
    return status == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : status;
}

OP_API int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    if (!opm.initialized)
        return PMPI_Wait(request, status);
    return opm_iar_waitall(1, request, as_array(status));
}

OP_API int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    if (!opm.initialized)
        return PMPI_Waitall(count, requests, statuses);
    return opm_iar_waitall(count, requests, statuses);
}

OP_API int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    if (!opm.initialized)
        return PMPI_Test(request, flag, status);
    return opm_iar_testall(1, request, flag, as_array(status));
}

OP_API int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    if (!opm.initialized)
        return PMPI_Testall(count, requests, flag, statuses);
    return opm_iar_testall(count, requests, flag, statuses);
}

OP_API int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag,
                       MPI_Status *status)
{
    if (!opm.initialized)
        return PMPI_Testany(count, requests, index, flag, status);
    return opm_iar_testany(count, requests, index, flag, status);
}

OP_API int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                        MPI_Status statuses[])
{
    if (!opm.initialized)
        return PMPI_Testsome(incount, requests, outcount, indices, statuses);
    return opm_iar_testsome(incount, requests, outcount, indices, statuses);
}

/* Any and some: whichever completes first may be the MPI's or offpath's, so
 * poll both until one does. */
OP_API int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    if (!opm.initialized || !opm_iar_any(requests, count))
        return PMPI_Waitany(count, requests, index, status);
    for (;;) {
        int flag = 0;
        int rc = opm_iar_testany(count, requests, index, &flag, status);
        if (rc != MPI_SUCCESS || flag)
            return rc;
        opm_iar_idle();
    }
}

OP_API int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                        MPI_Status statuses[])
{
    if (!opm.initialized || !opm_iar_any(requests, incount))
        return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
    for (;;) {
        int rc = opm_iar_testsome(incount, requests, outcount, indices, statuses);
        if (rc != MPI_SUCCESS || *outcount != 0)
            return rc;
        opm_iar_idle();
    }
}

#if MPI_VERSION >= 4
/* MPI 4's persistent collective (MPICH 4; Open MPI 4.1 has none) */
OP_API int MPI_Allreduce_init(const void *sendbuf, void *recvbuf, int count,
                              MPI_Datatype dtype, MPI_Op op, MPI_Comm comm, MPI_Info info,
                              MPI_Request *request)
{
    if (!opm.initialized)
        return PMPI_Allreduce_init(sendbuf, recvbuf, count, dtype, op, comm, info, request);
    return opm_allreduce_init(sendbuf, recvbuf, count, dtype, op, comm, info, request);
}

OP_API int MPI_Start(MPI_Request *request)
{
    return opm.initialized ? opm_start(request) : PMPI_Start(request);
}

OP_API int MPI_Startall(int count, MPI_Request requests[])
{
    int rc = MPI_SUCCESS;
    for (int i = 0; i < count && rc == MPI_SUCCESS; i++)
        rc = MPI_Start(&requests[i]);
    return rc;
}

OP_API int MPI_Request_free(MPI_Request *request)
{
    return opm.initialized ? opm_request_free(request) : PMPI_Request_free(request);
}
#endif
