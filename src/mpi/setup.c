/* Per communicator: find each rank's node (and socket), pick one leader per
 * node (Node mode) or per socket (Socket mode), join the leaders into a switch
 * group, and agree on the outcome. Undone when the communicator is freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_comm.h"

static struct opm_comm *attach(MPI_Comm comm, struct opm_comm *c)
{
    c->handle = comm;
    c->older = opm.newest;
    if (opm.newest != NULL)
        opm.newest->newer = c;
    opm.newest = c;
    PMPI_Comm_set_attr(comm, opm.keyval, c);
    return c;
}

static void detach(struct opm_comm *c)
{
    if (c->newer != NULL)
        c->newer->older = c->older;
    else if (opm.newest == c)
        opm.newest = c->older;
    if (c->older != NULL)
        c->older->newer = c->newer;
}

/* Programs need not free their communicators (mpi4py never frees a split):
 * MPI_Finalize releases those still held, newest first. Every rank created
 * the communicators it shares with another in the same order (creation is
 * collective), so the leaves through the switches pair up. */
void opm_comm_release_all(void)
{
    while (opm.newest != NULL)
        PMPI_Comm_delete_attr(opm.newest->handle, opm.keyval);
}

static bool ensure_port(void)
{
    if (opm.port != NULL)
        return true;
    op_status_t st = op_inc_port_open(opm.my_ip, opm.port_base, opm.cfg.udp_batching, &opm.port);
    if (st != OP_OK && opm.cfg.verbose)
        fprintf(stderr, "offpath: rank %d cannot open its RoCEv2 port: %s\n", opm.world_rank,
                op_status_str(st));
    return st == OP_OK;
}

/* The master leader names the communicator and says where it is. */
static void share_master(const struct opm_comm *c, uint32_t info[2])
{
    int lrank;
    PMPI_Comm_rank(c->leaders, &lrank);
    if (lrank == 0) {
        info[0] = opm.my_ip;
        info[1] = (uint32_t)(op_now_ns() ^ ((uint64_t)opm.my_ip << 20) ^ opm.comms * 2654435761u);
    }
    PMPI_Bcast(info, 2, MPI_UINT32_T, 0, c->leaders);
}

/* Data bytes a packet of prefix bytes of headers (and an ICRC) carries
 * whole over links of OFFPATH_MTU: the leaders send with DF set. */
uint16_t opm_data_fits(size_t prefix, uint16_t max)
{
    const size_t ipv4_udp = 28;
    if (opm.cfg.mtu == 0)
        return 0;
    size_t fit = (opm.cfg.mtu - ipv4_udp - prefix - OP_ICRC_LEN) & ~(size_t)7;
    return (uint16_t)(fit < max ? fit : max);
}

uint16_t opm_rescue_port(void) { return (uint16_t)(opm.port_base + 2u); }

/* Every leader opens its entry in the rescue service and learns the other
 * leaders' addresses. Collective over the leaders; false if this one cannot
 * answer its peers (then the communicator does not use the switch). */
static bool rescue_setup(struct opm_comm *c)
{
    uint32_t key = (uint32_t)(op_now_ns() ^ (uint64_t)opm.my_ip << 12 ^ opm.comms * 40503u);
    PMPI_Bcast(&key, 1, MPI_UINT32_T, 0, c->leaders);
    uint32_t *all = malloc(sizeof(*all) * 2 * (size_t)c->n_leaders);
    c->peer_ips = malloc(sizeof(*c->peer_ips) * (size_t)c->n_leaders);
    c->peer_ports = malloc(sizeof(*c->peer_ports) * (size_t)c->n_leaders);
    int have = all != NULL && c->peer_ips != NULL && c->peer_ports != NULL, everyone = 0;
    PMPI_Allreduce(&have, &everyone, 1, MPI_INT, MPI_MIN, c->leaders);
    PMPI_Comm_rank(c->leaders, &c->lrank);
    if (everyone) { /* else nobody gathers: no collective left half-joined */
        uint32_t mine[2] = {opm.my_ip, opm_rescue_port()};
        PMPI_Allgather(mine, 2, MPI_UINT32_T, all, 2, MPI_UINT32_T, c->leaders);
        for (int i = 0; i < c->n_leaders; i++)
            if (i != c->lrank) {
                c->peer_ips[c->n_peers] = all[2 * i];
                c->peer_ports[c->n_peers++] = (uint16_t)all[2 * i + 1];
            }
    }
    free(all);
    if (opm.rsc == NULL && op_rsc_svc_open(opm.my_ip, opm_rescue_port(), &opm.rsc) != OP_OK &&
        opm.cfg.verbose)
        fprintf(stderr, "offpath: rank %d cannot open its rescue port %u\n", opm.world_rank,
                opm_rescue_port());
    c->rsc = opm.rsc != NULL ? op_rsc_entry_open(opm.rsc, opm.cfg.job_id, key) : NULL;
    c->backoff = 64;
    return c->rsc != NULL && c->peer_ips != NULL && c->peer_ports != NULL &&
           c->n_peers == c->n_leaders - 1;
}

bool opm_leader_join(struct opm_comm *c)
{
    uint32_t info[2] = {0, 0};
    share_master(c, info);
    if (!ensure_port())
        return false;
    int lrank;
    PMPI_Comm_rank(c->leaders, &lrank);
    struct op_inc_config ic;
    op_inc_config_default(&ic);
    ic.ip = opm.my_ip;
    ic.port = opm.port_base;
    ic.want_data = opm_data_fits(OP_INC_PREFIX_LEN, OP_INC_MAX_DATA);
    ic.tor_ip = opm.tor_ip;
    ic.tor_port = opm.tor_port;
    ic.rank = (uint32_t)lrank;
    ic.n_leaders = (uint16_t)c->n_leaders;
    ic.master_rank = 0;
    ic.master_ip = info[0];
    ic.job_id = opm.cfg.job_id;
    ic.comm_id = info[1];
    ic.world_rank = (uint32_t)opm.world_rank;
    ic.master_num = c->mode == OP_MODE_SOCKET ? 2 : 1;
    ic.rto_ns = opm.cfg.rto_us * OP_NS_PER_US;
    if (ic.rto_min_ns > ic.rto_ns)
        ic.rto_min_ns = ic.rto_ns;
    ic.deadline_ns = opm.cfg.deadline_ms * OP_NS_PER_MS;
    ic.spin_ns = opm.cfg.spin_us * OP_NS_PER_US;
    uint8_t reason = 0;
    op_status_t st = op_inc_join_on(opm.port, &ic, &c->client, &reason);
    if (st == OP_OK) /* a peer that gives a call up stops this leader's wait */
        op_inc_client_watch(c->client, op_rsc_cancel_flag(c->rsc));
    if (st != OP_OK && opm.cfg.verbose)
        fprintf(stderr, "offpath: rank %d: join failed: %s%s%s\n", opm.world_rank,
                op_status_str(st), st == OP_ERR_REFUSED ? ": " : "",
                st == OP_ERR_REFUSED ? op_inc_reason_str(reason) : "");
    return st == OP_OK;
}

/* Every rank learns whether every leader joined, and what the switches can do. */
static void agree(MPI_Comm comm, struct opm_comm *c, bool joined)
{
    int ok = joined || !c->is_leader, all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    uint32_t caps[2] = {c->ops, c->types}; /* Host mode's, or none */
    if (c->is_leader && c->client != NULL) {
        const struct op_inc_caps *k = op_inc_eng_caps(op_inc_client_engine(c->client));
        caps[0] = k->ops;
        caps[1] = k->types;
    }
    PMPI_Bcast(caps, 2, MPI_UINT32_T, 0, c->local);
    c->ops = (uint16_t)caps[0];
    c->types = (uint16_t)caps[1];
    c->inc_ok = all == 1;
    if (!c->inc_ok && c->client != NULL) {
        /* some leader is not in: the group is useless; its lease frees it */
        op_inc_client_free(c->client);
        c->client = NULL;
    }
}

/* My node's (or socket's) ranks and the leaders: collective over comm. */
static void split(MPI_Comm comm, struct opm_comm *c, int rank)
{
    int color = c->mode != OP_MODE_SOCKET ? opm.node : opm.node * OPM_MAX_SOCKETS + opm.socket;
    PMPI_Comm_split(comm, color, rank, &c->local);
    int lrank;
    PMPI_Comm_rank(c->local, &lrank);
    PMPI_Comm_size(c->local, &c->local_size);
    c->is_leader = lrank == 0;
    PMPI_Comm_split(comm, c->is_leader ? 0 : MPI_UNDEFINED, rank, &c->leaders);
}

/* Counts the leaders, and whether any rank has no memory for its state: it
 * took part in the splits all the same (the others were in them with it),
 * and now every rank learns it in the same collective and drops the level. */
static bool count_leaders(MPI_Comm comm, struct opm_comm *c, bool have_memory)
{
    int mine[2] = {c->is_leader, !have_memory}, sum[2] = {0, 0};
    PMPI_Allreduce(mine, sum, 2, MPI_INT, MPI_SUM, comm);
    c->n_leaders = sum[0];
    if (sum[1] == 0)
        return true;
    PMPI_Comm_free(&c->local);
    if (c->leaders != MPI_COMM_NULL)
        PMPI_Comm_free(&c->leaders);
    return false;
}

/* One level of the hierarchy for `comm`: leaders by node or by socket, their
 * group at the switches, the shared memory below them. NULL when some rank
 * had no memory for it: then on every rank (they agreed) the communicator
 * has no such level and its calls are the MPI's own. */
static struct opm_comm *comm_state(MPI_Comm comm, enum op_mode mode)
{
    struct opm_comm spare, *c = calloc(1, sizeof(*c));
    struct opm_comm *s = c != NULL ? c : &spare;
    *s = (struct opm_comm){.mode = mode, .local = MPI_COMM_NULL, .leaders = MPI_COMM_NULL};
    if (mode == OP_MODE_OFF) { /* no collective: no one waits for this rank */
        opm.comms += c != NULL;
        return c;
    }
    int rank;
    PMPI_Comm_rank(comm, &rank);
    split(comm, s, rank);
    if (!count_leaders(comm, s, c != NULL)) {
        free(c);
        return NULL;
    }
    opm.comms++;
    if (c->n_leaders >= 2)
        opm.parts->node_setup(c); /* one node: every call is the MPI's own */
    bool joined = false;
    if (c->n_leaders >= 2 && c->n_leaders <= UINT16_MAX && c->is_leader) {
        bool rescuable = rescue_setup(c);
        joined = (mode == OP_MODE_HOST ? opm.parts->host_join(c) : opm_leader_join(c)) &&
                 rescuable;
    }
    if (c->n_leaders >= 2)
        agree(comm, c, joined);
    opm.comms_joined += c->inc_ok && c->is_leader && rank == 0;
    return c;
}

void opm_comm_parts_set(const struct opm_comm_parts *parts) { opm.parts = parts; }

void opm_comm_setup(MPI_Comm comm)
{
    struct opm_comm *c = comm_state(comm, opm.cfg.mode);
    if (c == NULL)
        return;
    /* Socket mode sends every byte once per socket; above a size the node's
     * group (once per node) is faster, so a socket communicator has both. */
    if (c->mode == OP_MODE_SOCKET && c->inc_ok && opm.cfg.socket_max_bytes < opm.cfg.max_bytes)
        c->wide = comm_state(comm, OP_MODE_NODE);
    attach(comm, c);
}

struct opm_comm *opm_comm_get(MPI_Comm comm)
{
    void *v = NULL;
    int found = 0;
    if (comm == MPI_COMM_NULL || PMPI_Comm_get_attr(comm, opm.keyval, &v, &found) != MPI_SUCCESS)
        return NULL;
    return found ? v : NULL;
}

static void free_state(struct opm_comm *c)
{
    if (c->wide != NULL)
        free_state(c->wide);
    if (c->client != NULL) {
        /* collective: every leader frees the communicator; a dead group
         * cannot be left through its switch, its lease frees it */
        if (!c->dead)
            op_inc_leave(c->client);
        op_inc_client_free(c->client);
    }
    opm.parts->free(c);
    if (c->local != MPI_COMM_NULL)
        PMPI_Comm_free(&c->local);
    if (c->leaders != MPI_COMM_NULL)
        PMPI_Comm_free(&c->leaders);
    op_rsc_entry_close(opm.rsc, c->rsc);
    free(c->peer_ips);
    free(c->peer_ports);
    free(c->input);
    free(c);
}

int opm_comm_delete(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    detach(attr);
    free_state(attr);
    return MPI_SUCCESS;
}
