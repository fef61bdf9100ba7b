/* liboffpath_mpi configuration: environment variables (documented in the
 * README). A bad value is reported once on stderr and the default used: an MPI
 * job must not die of a typo in a tuning knob. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_base.h"

static const char *const reason_text[] = {
#define OPM_TEXT_(n, t) t,
    OPM_REASONS(OPM_TEXT_)
#undef OPM_TEXT_
};

const char *opm_reason_text(unsigned r) { return r < OPM_R_COUNT_ ? reason_text[r] : "?"; }

static void env_u64(const char *name, uint64_t min, uint64_t max, uint64_t *out)
{
    const char *v = getenv(name);
    uint64_t x;
    if (v == NULL || *v == '\0')
        return;
    if (op_parse_u64(v, min, max, &x) != OP_OK) {
        fprintf(stderr, "offpath: ignoring %s=%s (expected %llu..%llu)\n", name, v,
                (unsigned long long)min, (unsigned long long)max);
        return;
    }
    *out = x;
}

static void env_int(const char *name, int min, int max, int *out)
{
    uint64_t x = (uint64_t)(*out < 0 ? 0 : *out);
    bool set = getenv(name) != NULL && *getenv(name) != '\0';
    env_u64(name, (uint64_t)min, (uint64_t)max, &x);
    if (set)
        *out = (int)x;
}

static void env_mode(struct opm_config *cfg)
{
    const char *v = getenv("OFFPATH_MODE");
    cfg->mode = OP_MODE_NODE;
    if (v != NULL && *v != '\0' && !op_mode_parse(v, true, &cfg->mode))
        fprintf(stderr, "offpath: ignoring OFFPATH_MODE=%s (expected node, socket, host or off)\n",
                v);
}

static double env_rate(const char *name)
{
    const char *v = getenv(name);
    double x = 0;
    if (v != NULL && *v != '\0' && op_parse_double(v, 0.0, 1.0, &x) != OP_OK) {
        fprintf(stderr, "offpath: ignoring %s=%s (expected 0..1)\n", name, v);
        x = 0;
    }
    return x;
}

/* Batching is on unless the variable says 0, as in the tools (src/cli). */
static bool env_batching(void)
{
    const char *v = getenv("OFFPATH_UDP_BATCHING");
    return v == NULL || strcmp(v, "0") != 0;
}

static void env_host(struct opm_config *cfg)
{
    struct op_har_config hc;
    op_har_config_default(&hc);
    cfg->host_ring_bytes = hc.ring_bytes;
    env_u64("OFFPATH_HOST_RING_BYTES", 0, UINT64_MAX, &cfg->host_ring_bytes);
    cfg->host_drop_rate = env_rate("OFFPATH_DROP_RATE");
    cfg->host_dup_rate = env_rate("OFFPATH_DUP_RATE");
}

static void env_alltoall(struct opm_config *cfg)
{
    const char *v = getenv("OFFPATH_ALLTOALL");
    cfg->alltoall_threads = 1;
    if (v != NULL && strcmp(v, "agent") == 0)
        cfg->alltoall_agent = true;
    else if (v != NULL && *v != '\0' && strcmp(v, "mpi") != 0)
        fprintf(stderr, "offpath: ignoring OFFPATH_ALLTOALL=%s (expected agent or mpi)\n", v);
    uint64_t t = cfg->alltoall_threads;
    env_u64("OFFPATH_ALLTOALL_THREADS", 1, OP_A2A_MAX_WORKERS, &t);
    cfg->alltoall_threads = (uint32_t)t;
    uint64_t cpu = UINT64_MAX;
    env_u64("OFFPATH_ALLTOALL_CPU", 0, 1023, &cpu);
    cfg->alltoall_pinned = cpu != UINT64_MAX;
    cfg->alltoall_cpu = cfg->alltoall_pinned ? (int)cpu : 0;
}

static void env_ip(const char *name, uint32_t *out)
{
    const char *v = getenv(name);
    uint16_t port = 0;
    if (v != NULL && *v != '\0' && op_parse_ipv4(v, out, &port) != OP_OK)
        fprintf(stderr, "offpath: ignoring %s=%s (expected an IPv4 address)\n", name, v);
}

void opm_config_load(struct opm_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->mode = OP_MODE_NODE;
    cfg->node = cfg->socket = -1;
    cfg->sockets = 0; /* unset: hwloc tells */
    cfg->net = 50;
    cfg->port = OP_ROCE_UDP_PORT;
    cfg->max_bytes = UINT64_MAX;
    cfg->socket_max_bytes = 8192;
    cfg->deadline_ms = 5000;
    cfg->rto_us = 2000;
    cfg->spin_us = OP_INC_SPIN_NS_DEFAULT / OP_NS_PER_US;
    cfg->job_id = (uint32_t)getppid();
    cfg->shm = true;
    cfg->shm_slot = OP_SHM_SLOT_DEFAULT;
    env_mode(cfg);
    env_int("OFFPATH_PPN", 1, 254, &cfg->ppn);
    env_int("OFFPATH_SOCKETS", 1, 16, &cfg->sockets);
    env_int("OFFPATH_NODE", 0, 65535, &cfg->node);
    env_int("OFFPATH_SOCKET", 0, 15, &cfg->socket);
    env_int("OFFPATH_VERBOSE", 0, 9, &cfg->verbose);
    uint64_t v = cfg->net;
    env_u64("OFFPATH_NET", 1, 250, &v);
    cfg->net = (uint32_t)v;
    v = cfg->port;
    env_u64("OFFPATH_PORT", 1, 65535, &v);
    cfg->port = (uint16_t)v;
    v = cfg->job_id;
    env_u64("OFFPATH_JOB", 0, UINT32_MAX, &v);
    cfg->job_id = (uint32_t)v;
    v = cfg->shm;
    env_u64("OFFPATH_SHM", 0, 1, &v);
    cfg->shm = v != 0;
    env_u64("OFFPATH_SHM_SLOT", 64, 64u << 20, &cfg->shm_slot);
    env_u64("OFFPATH_SOCKET_MAX_BYTES", 0, UINT64_MAX, &cfg->socket_max_bytes);
    env_u64("OFFPATH_MIN_BYTES", 0, UINT64_MAX, &cfg->min_bytes);
    env_u64("OFFPATH_MAX_BYTES", 1, UINT64_MAX, &cfg->max_bytes);
    env_u64("OFFPATH_DEADLINE_MS", 1, 3600000, &cfg->deadline_ms);
    env_u64("OFFPATH_RTO_US", 10, 10000000, &cfg->rto_us);
    env_u64("OFFPATH_SPIN_US", 0, 1000000, &cfg->spin_us);
    env_ip("OFFPATH_SWITCH", &cfg->switch_ip);
    env_ip("OFFPATH_IP", &cfg->ip);
    v = 0;
    env_u64("OFFPATH_MTU", 576, 65535, &v); /* IPv4's minimum: a header still fits */
    cfg->mtu = (uint32_t)v;
    cfg->udp_batching = env_batching();
    env_host(cfg);
    env_alltoall(cfg);
    const char *t = getenv("OFFPATH_TOPOLOGY");
    if (t != NULL)
        snprintf(cfg->topology, sizeof(cfg->topology), "%s", t);
}
