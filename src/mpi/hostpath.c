/* Host mode (OFFPATH_MODE=host): the leaders allreduce among themselves with
 * offpath's own host algorithm (src/hostar: recursive doubling, ring) over
 * UDP, instead of through the switches. Everything else is Node mode's: the
 * same leaders, addresses, intra-node steps, fallback and recovery; so
 * comparing the two isolates what the switch does.
 *
 * Each leader's hostar socket is its RoCEv2 address at OFFPATH_PORT + 1. The
 * INC port cannot be shared: its receive loop hands every packet to the INC
 * engines, and between calls nobody reads it, where hostar needs its timer
 * thread to resend what a slower peer lost (see src/hostar/port.c). Same
 * address, io layer and packet size; another UDP port.
 *
 * OFFPATH_DROP_RATE and OFFPATH_DUP_RATE inject loss and duplication on
 * everything the leaders send (there is no switch to inject it), and
 * OFFPATH_HOST_RING_BYTES moves the recursive doubling / ring threshold. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mpi_node.h"

static uint16_t host_port_number(void)
{
    return (uint16_t)(opm.port_base < UINT16_MAX ? opm.port_base + 1 : opm.port_base - 1);
}

static op_status_t ensure_port(void)
{
    if (opm.host_port != NULL)
        return OP_OK;
    struct op_fault_cfg fault = {.drop = opm.cfg.host_drop_rate,
                                 .dup = opm.cfg.host_dup_rate,
                                 .seed = opm.my_ip ^ (uint64_t)getpid() << 32};
    bool inject = fault.drop > 0 || fault.dup > 0;
    op_status_t st = op_har_port_open(opm.my_ip, host_port_number(), opm.cfg.udp_batching,
                                      inject ? &fault : NULL,
                                      &opm.host_port);
    if (st != OP_OK && opm.cfg.verbose)
        fprintf(stderr, "offpath: rank %d cannot open its host allreduce port: %s\n",
                opm.world_rank, op_status_str(st));
    return st;
}

/* Every leader's address (all: room for two numbers each), and a session
 * number from the first leader. */
static void exchange_addresses(const struct opm_comm *c, uint32_t *all, struct op_har_peer *peers,
                               uint32_t *session)
{
    uint32_t mine[2] = {opm.my_ip, host_port_number()};
    *session = (uint32_t)(op_now_ns() ^ (uint64_t)opm.my_ip << 16 ^ opm.comms * 2654435761u);
    PMPI_Bcast(session, 1, MPI_UINT32_T, 0, c->leaders);
    PMPI_Allgather(mine, 2, MPI_UINT32_T, all, 2, MPI_UINT32_T, c->leaders);
    for (int i = 0; i < c->n_leaders; i++)
        peers[i] = (struct op_har_peer){.ip = all[2 * i], .port = (uint16_t)all[2 * i + 1]};
}

/* The leaders agree before the exchange whether each has the memory for it:
 * one that had not would leave the others waiting in it. If any has not,
 * none joins, and agree() (setup.c) keeps the communicator off the host
 * path on every rank. */
static bool all_leaders(const struct opm_comm *c, bool mine)
{
    int ok = mine, all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->leaders);
    return all == 1;
}

/* Any op on any type: the host reduces with the reduce module. */
static void all_ops_and_types(struct opm_comm *c)
{
    c->ops = (uint16_t)((1u << OP_RED_OP_COUNT_) - 1);
    c->types = (uint16_t)((1u << OP_RED_TYPE_COUNT_) - 1);
}

/* This leader's client of the host allreduce among peers. */
static bool host_attach(struct opm_comm *c, const struct op_har_peer *peers, uint32_t session)
{
    int lrank;
    PMPI_Comm_rank(c->leaders, &lrank);
    struct op_har_config hc;
    op_har_config_default(&hc);
    hc.rank = (uint32_t)lrank;
    hc.n = (uint32_t)c->n_leaders;
    hc.peers = peers;
    hc.session = session;
    hc.rto_ns = opm.cfg.rto_us * OP_NS_PER_US;
    hc.rto_min_ns = hc.rto_min_ns < hc.rto_ns ? hc.rto_min_ns : hc.rto_ns;
    if (hc.ack_delay_ns >= hc.rto_min_ns)
        hc.ack_delay_ns = hc.rto_min_ns / 2; /* an ack must beat the sender's timeout */
    hc.deadline_ns = opm.cfg.deadline_ms * OP_NS_PER_MS;
    hc.ring_bytes = opm.cfg.host_ring_bytes;
    if (opm_data_fits(OP_HAR_PREFIX_LEN, OP_HAR_MAX_DATA) != 0)
        hc.max_data = opm_data_fits(OP_HAR_PREFIX_LEN, OP_HAR_MAX_DATA);
    op_status_t st = ensure_port(); /* its failure's errno goes into the message */
    if (st == OP_OK)
        st = op_har_attach(opm.host_port, &hc, &c->host);
    if (st != OP_OK && opm.cfg.verbose)
        fprintf(stderr, "offpath: rank %d: host allreduce setup failed: %s\n", opm.world_rank,
                op_status_str(st));
    if (st == OP_OK)
        all_ops_and_types(c);
    return st == OP_OK;
}

bool opm_host_join(struct opm_comm *c)
{
    struct op_har_peer *peers = malloc(sizeof(*peers) * (size_t)c->n_leaders);
    uint32_t *all = malloc(sizeof(*all) * 2 * (size_t)c->n_leaders), session = 0;
    bool ok = all_leaders(c, peers != NULL && all != NULL);
    if (ok)
        exchange_addresses(c, all, peers, &session);
    free(all);
    ok = ok && host_attach(c, peers, session);
    free(peers);
    return ok;
}

op_status_t opm_host_allreduce(struct opm_comm *c, void *buf, int count, int type, int code)
{
    return op_har_allreduce(c->host, buf, buf, (size_t)count, (unsigned)type, (unsigned)code);
}

/* Collective over the leaders. Once all are in the barrier every call has
 * ended everywhere, so nothing a leader still holds unacknowledged is needed
 * (its thread resends it meanwhile to whoever still waits). */
void opm_host_free(struct opm_comm *c)
{
    if (c->host == NULL)
        return;
    if (c->inc_ok) /* else some leader has no session: no call used it */
        PMPI_Barrier(c->leaders);
    uint64_t k[OP_HAR_C_COUNT_];
    op_har_client_counters(c->host, k);
    for (unsigned i = 0; i < OP_HAR_C_COUNT_; i++)
        opm.host_c[i] += k[i];
    op_har_client_free(c->host);
    c->host = NULL;
}

/* What the leaders sum at the end: the engines' counters and, after them,
 * the port's fault layer's drops (a port counter, not the engine's). */
enum {
    HOST_C_injected_drops = OP_HAR_C_COUNT_,
    HOST_C_COUNT_
};

/* The leaders' sums in words: the engines' counters, the port's drops. */
static void report_host(const uint64_t sum[HOST_C_COUNT_])
{
    const char *names[HOST_C_COUNT_];
    for (unsigned i = 0; i < OP_HAR_C_COUNT_; i++)
        names[i] = op_har_counter_name(i);
    names[HOST_C_injected_drops] = "injected_drops";
    const struct op_counter_set s = {names, sum, HOST_C_COUNT_};
    (void)op_counter_set_render(
        stderr, &s,
        "offpath: host allreduce: {allreduces} leader calls ({ring_calls} ring), {tx_data} data "
        "packets, {retransmissions} retransmissions, {duplicates} duplicates, {injected_drops} "
        "injected drops, {deadlines} timeouts\n");
}

/* Collective over COMM_WORLD (MPI_Finalize): with OFFPATH_VERBOSE, rank 0
 * prints every leader's packet counts; then the socket closes. */
void opm_host_finalize(void)
{
    if (opm.cfg.verbose) {
        uint64_t sum[HOST_C_COUNT_], mine[HOST_C_COUNT_];
        uint64_t f[OP_FAULT_C_COUNT_] = {0};
        if (opm.host_port != NULL)
            op_har_port_stats(opm.host_port, NULL, f);
        for (unsigned i = 0; i < OP_HAR_C_COUNT_; i++)
            mine[i] = opm.host_c[i];
        mine[HOST_C_injected_drops] = f[OP_FAULT_C_dropped];
        PMPI_Reduce(mine, sum, HOST_C_COUNT_, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        if (opm.world_rank == 0 && sum[OP_HAR_C_allreduces] > 0)
            report_host(sum);
    }
    op_har_port_close(opm.host_port);
    opm.host_port = NULL;
}
