/* `offpath topo_rank`: an MPI rank enters its host's namespace (rank / ppn,
 * hosts in file order), with the host's one address for the library
 * (OFFPATH_IP) and, under Open MPI, a relay to mpirun's PMIx server. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch_internal.h"

extern char **environ;

static void say(const char *what, const char *detail)
{
    fprintf(stderr, "offpath topo_rank: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
}

int launch_host_node(const struct op_nstopo *t, int k)
{
    for (int i = 0; i < t->n_nodes; i++)
        if (t->nodes[i].role == OP_NSTOPO_HOST && k-- == 0)
            return i;
    return -1;
}

#define LOOPBACK_URI "tcp4://127.0.0.1:"

uint16_t launch_uri_port(const char *v)
{
    const char *at = v != NULL ? strstr(v, LOOPBACK_URI) : NULL;
    uint64_t port;
    if (at == NULL || op_parse_u64(at + strlen(LOOPBACK_URI), 1, 65535, &port) != OP_OK)
        return 0;
    return (uint16_t)port;
}

bool launch_uri_repoint(const char *v, uint16_t port, char *out, size_t len)
{
    if (launch_uri_port(v) == 0)
        return false;
    const char *at = strstr(v, LOOPBACK_URI);
    int n = snprintf(out, len, "%.*s" LOOPBACK_URI "%u", (int)(at - v), v, port);
    return n > 0 && (size_t)n < len;
}

#define MAX_URIS 16

/* Every PMIX_SERVER_URI* variable (the client reads the one of its
 * version) names the relay's port instead of the server's. */
static bool point_uris_at(uint16_t relay)
{
    char names[MAX_URIS][64], values[MAX_URIS][512];
    int n = 0;
    for (char **e = environ; *e != NULL && n < MAX_URIS; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, "PMIX_SERVER_URI", 15) != 0 || eq == NULL ||
            (size_t)(eq - *e) >= sizeof(names[0]) ||
            !launch_uri_repoint(eq + 1, relay, values[n], sizeof(values[0])))
            continue;
        snprintf(names[n++], sizeof(names[0]), "%.*s", (int)(eq - *e), *e);
    }
    for (int i = 0; i < n; i++)
        if (setenv(names[i], values[i], 1) != 0)
            return false;
    return true;
}

/* The PMIx server's port (0: none, no relay needed). */
static uint16_t pmix_server(void)
{
    for (char **e = environ; *e != NULL; e++)
        if (strncmp(*e, "PMIX_SERVER_URI", 15) == 0 && strchr(*e, '=') != NULL &&
            launch_uri_port(strchr(*e, '=') + 1) != 0)
            return launch_uri_port(strchr(*e, '=') + 1);
    return 0;
}

/* Open MPI: the relay, started from inside the host's namespace. */
static bool relay_pmix(int outside)
{
    char err[256];
    uint16_t relay, server = pmix_server();
    if (server == 0)
        return true; /* MPICH's hydra: the PMI socket is inherited, no relay */
    if (launch_relay_start(server, outside, &relay, err, sizeof(err)) != OP_OK) {
        say(err, NULL);
        return false;
    }
    if (!point_uris_at(relay)) {
        say("cannot set PMIX_SERVER_URI", strerror(errno));
        return false;
    }
    return true;
}

static int find_host(const struct op_launch_rank_cfg *cfg, const struct op_nstopo *t)
{
    char msg[160];
    int rank = cfg->rank;
    if (rank < 0) {
        say("no rank in the environment (OMPI_COMM_WORLD_RANK, PMI_RANK or PMIX_RANK): run "
            "it under mpirun", NULL);
        return -1;
    }
    int node = launch_host_node(t, rank / cfg->ppn);
    if (node < 0) {
        snprintf(msg, sizeof(msg), "rank %d with --ppn %d needs host %d; %s has fewer", rank,
                 cfg->ppn, rank / cfg->ppn + 1, cfg->file);
        say(msg, NULL);
    }
    return node;
}

static int enter_and_exec(const struct op_launch_rank_cfg *cfg, const struct op_nstopo *t,
                          int node)
{
    char err[300], ip[16];
    int outside = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (outside < 0) {
        say("cannot open /proc/self/ns/net", strerror(errno));
        return 1;
    }
    op_status_t st = op_nstopo_enter(t, node, err, sizeof(err));
    bool relayed = st == OP_OK && relay_pmix(outside);
    close(outside);
    if (st != OP_OK)
        say(err, NULL);
    if (!relayed)
        return 1;
    op_nstopo_ip4(t->nodes[node].ip, ip);
    setenv("OFFPATH_IP", ip, 1);
    if (cfg->preload != NULL)
        setenv("LD_PRELOAD", cfg->preload, 1);
    execvp(cfg->argv[0], cfg->argv);
    say(cfg->argv[0], strerror(errno));
    return 127;
}

int op_launch_rank_exec(const struct op_launch_rank_cfg *cfg)
{
    char err[256];
    struct op_nstopo_stats stats;
    struct op_nstopo *t = malloc(sizeof(*t));
    if (t == NULL)
        return 1;
    int rc = 2, node = -1;
    if (op_nstopo_load(cfg->file, t, &stats, err, sizeof(err)) != OP_OK)
        fprintf(stderr, "offpath topo_rank: %s: %s\n", cfg->file, err);
    else if ((node = find_host(cfg, t)) >= 0)
        rc = enter_and_exec(cfg, t, node);
    free(t);
    return rc;
}
