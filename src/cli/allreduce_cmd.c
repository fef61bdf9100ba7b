/* `offpath allreduce`: DOCA's allreduce application with its flags. A
 * daemon (the DPU's role) reduces for its clients and exchanges partials
 * with the other daemons by RDMA; an offloaded client submits, computes and
 * waits, and prints DOCA's metrics and the overlap (src/agent). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "offpath/agent.h"
#include "offpath/wire.h"

#define TOOL "allreduce"
#define DEFAULT_PORT 18515

struct ar_flags {
    bool daemon, role_set, offloaded, mesh;
    struct cli_agent_flags a;
    uint64_t port;
    bool json;
    const char *fallback; /* offloaded client: the clients' mesh if the daemon fails */
    uint64_t io_cpu;      /* offloaded client: --io-cpu N, as N + 1 (0: not given) */
    struct op_agent_job job;
};

static void usage(void)
{
    printf("usage: offpath allreduce -r daemon -t PORT -c CLIENTS -a ADDR:PORT[,...] "
           "--key DAEMONS.key --peer CLIENTS.pub [job]\n"
           "       offpath allreduce -r client -m offloaded -a DAEMON[:PORT] "
           "--key CLIENTS.key --peer DAEMONS.pub [job]\n"
           "       offpath allreduce -r client -m non-offloaded -t PORT -a ADDR:PORT[,...] "
           "--key CLIENTS.key --peer CLIENTS.pub [job]\n"
           "job (the same on every daemon and client, checked by DOCA's handshake):\n"
           "  -s, --size N          elements a vector (default 65535)\n"
           "  -d, --datatype T      byte, int, float or double (default float)\n"
           "  -o, --operation OP    sum or prod (default sum)\n"
           "  -b, --batch-size N    allreduce operations a batch, 1..1024 (default 16)\n"
           "  -i, --num-batches N   batches measured (default 16)\n"
           "daemon:\n"
           "  -t, --listen-port P   clients connect here, daemons at P + 1\n"
           "  -c, --num-clients N   this daemon's clients (1..64)\n"
           "  -a, --address LIST    every daemon as IP:PORT, this one among them, in one\n"
           "                        order on all daemons (the reduction order)\n"
           "      --ip ADDR         this daemon's address (default 127.0.0.1)\n"
           "client:\n"
           "  -m, --mode M          offloaded: through its daemon; non-offloaded: the clients\n"
           "                        reduce among themselves (a full mesh, -t and -a as a\n"
           "                        daemon's: every client's IP:PORT, one order on all)\n"
           "  -a, --address A       offloaded: its daemon, IP[:PORT] (port: -p, default 18515)\n"
           "      --fallback LIST   offloaded: if the daemon fails, start over non-offloaded\n"
           "                        with every client of LIST (IP:PORT, one order on all;\n"
           "                        this one at -t)\n"
           "      --io-cpu N        offloaded: run the client's channel threads (encryption,\n"
           "                        sockets) on CPU N, not on the cores that compute (as a\n"
           "                        DPU's DMA is not the host's work)\n"
           "both:\n"
           "  -p, --port P          the daemon port an address without one means\n"
           "      --key FILE        this side's secret key (the daemons share one pair,\n"
           "                        the clients another: offpath keygen)\n"
           "      --peer FILE       the other side's public key (pinned)\n"
           "      --timeout S       longest wait for a peer, seconds (default 30)\n"
           "  -l, --log-level L     10..70 (default 50)\n"
           "      --json            the client's metrics as one JSON line too\n");
}

enum { OPT_JSON = CLI_AGENT_OPT_NEXT, OPT_FALLBACK, OPT_IO_CPU };

static bool set_job(int opt, const char *v, struct ar_flags *f)
{
    uint64_t x;
    switch (opt) {
    case 's': return cli_u64(TOOL, "-s (--size)", v, 1, 1u << 22, &f->job.size);
    case 'b': return cli_u64(TOOL, "-b (--batch-size)", v, 1, 1024, &f->job.batch);
    case 'i': return cli_u64(TOOL, "-i (--num-batches)", v, 1, 1000000, &f->job.batches);
    case 'd':
        for (x = 0; x <= OP_AGENT_DOUBLE; x++)
            if (strcmp(v, op_agent_type_name((enum op_agent_type)x)) == 0) {
                f->job.type = (enum op_agent_type)x;
                return true;
            }
        cli_bad(TOOL, "invalid value '%s' for -d (--datatype): byte, int, float or double", v);
        return false;
    case 'o':
        if (strcmp(v, "sum") == 0 || strcmp(v, "prod") == 0) {
            f->job.op = v[0] == 's' ? OP_RED_SUM : OP_RED_PROD;
            return true;
        }
        cli_bad(TOOL, "invalid value '%s' for -o (--operation): sum or prod", v);
        return false;
    }
    return false;
}

static bool set_role(int opt, const char *v, struct ar_flags *f)
{
    if (opt == 'r' && (strcmp(v, "daemon") == 0 || strcmp(v, "client") == 0)) {
        f->daemon = v[0] == 'd';
        f->role_set = true;
        return true;
    }
    if (opt == 'm' && (strcmp(v, "offloaded") == 0 || strcmp(v, "non-offloaded") == 0)) {
        f->offloaded = v[0] == 'o';
        f->mesh = !f->offloaded;
        return true;
    }
    cli_bad(TOOL, "invalid value '%s' for %s", v,
            opt == 'r' ? "-r (--role): daemon or client"
                       : "-m (--mode): offloaded or non-offloaded");
    return false;
}

static bool set(int opt, const char *v, void *cfg)
{
    struct ar_flags *f = cfg;
    bool known;
    bool ok = cli_agent_flag(TOOL, opt, v, &f->a, &known);
    if (known)
        return ok;
    switch (opt) {
    case 'r':
    case 'm': return set_role(opt, v, f);
    case 's':
    case 'd':
    case 'o':
    case 'b':
    case 'i': return set_job(opt, v, f);
    case 'p': return cli_u64(TOOL, "-p (--port)", v, 1, 65534, &f->port);
    case OPT_JSON: f->json = true; return true;
    case OPT_FALLBACK: f->fallback = v; return true;
    case OPT_IO_CPU:
        if (!cli_u64(TOOL, "--io-cpu", v, 0, 1023, &f->io_cpu))
            return false;
        f->io_cpu++;
        return true;
    }
    return false;
}

static bool read_keys(const struct ar_flags *f, struct op_chan_keypair *key, uint8_t *peer)
{
    return cli_agent_keys(TOOL, f->a.key, f->a.peer, key, peer);
}

/* Every non-offloaded client, "IP[:PORT],IP[:PORT],..." (-a, or --fallback's). */
static bool parse_list(const struct ar_flags *f, const char *flag, const char *text, uint32_t max,
                       uint32_t *ip, uint16_t *port, uint32_t *n)
{
    if (!cli_agent_addresses(TOOL, flag, text, (uint16_t)f->port, max, ip, port, n))
        return false;
    if (*n > 0)
        return true;
    cli_bad(TOOL, "%s is needed: every client's IP:PORT", flag);
    return false;
}

static int run_daemon(const struct ar_flags *f, struct op_log *log)
{
    struct op_agent_daemon_config c = {.job = f->job};
    int rc = cli_agent_daemon_net(TOOL, &f->a, (uint16_t)f->port, &c.net);
    if (rc != 0)
        return rc;
    c.net.log = log;
    return op_agent_daemon_run(&c) == OP_OK ? 0 : 1;
}

static void print_metrics(const struct ar_flags *f, bool mesh, const struct op_agent_client_result *r)
{
    const char *op = f->job.op == OP_RED_SUM ? "sum" : "prod";
    const char *mode = mesh ? "non-offloaded" : "offloaded";
    printf("Allreduce (%s/%s/%s) and matrix multiplication metrics to complete %llu "
           "batches (batch size - %llu, vector size - %llu):\n",
           mode, op, op_agent_type_name(f->job.type), (unsigned long long)f->job.batches,
           (unsigned long long)f->job.batch, (unsigned long long)f->job.size);
    printf("Min - %.6f seconds\nMax - %.6f seconds\nAvg - %.6f seconds\nTotal - %.6f seconds\n",
           r->batch_min_s, r->batch_max_s, r->batch_avg_s, r->total_s);
    printf("Computation time - %.6f seconds\nPure network time - %.6f seconds\n", r->compute_s,
           r->network_s);
    printf("Computation and communication overlap - %.2f%%\n", r->overlap_pct);
    printf("result check: %llu elements wrong (%llu results, client %u of %u",
           (unsigned long long)r->wrong, (unsigned long long)r->results, r->rank, r->clients);
    if (mesh)
        printf(", reduced among the clients)\n");
    else
        printf(", %u daemons)\n", r->daemons);
    if (f->json)
        printf("{\"mode\": \"%s\", \"op\": \"%s\", \"datatype\": \"%s\", \"size\": %llu, "
               "\"batch\": %llu, \"batches\": %llu, \"min_s\": %.6f, \"max_s\": %.6f, "
               "\"avg_s\": %.6f, \"total_s\": %.6f, \"compute_s\": %.6f, \"network_s\": %.6f, "
               "\"overlap_pct\": %.2f, \"wrong\": %llu, \"results\": %llu, \"submit_s\": %.6f, "
               "\"compute_in_batch_s\": %.6f, \"wait_s\": %.6f}\n",
               mode, op, op_agent_type_name(f->job.type), (unsigned long long)f->job.size,
               (unsigned long long)f->job.batch, (unsigned long long)f->job.batches,
               r->batch_min_s, r->batch_max_s, r->batch_avg_s, r->total_s, r->compute_s,
               r->network_s, r->overlap_pct, (unsigned long long)r->wrong,
               (unsigned long long)r->results, r->submit_s, r->compute_in_batch_s, r->wait_s);
    fflush(stdout);
}

/* fb: with --fallback, the mesh the job goes on in when the offloaded run
 * fails (the daemon died, or refused to go on): it starts over there. */
static int report(const struct ar_flags *f, const struct op_agent_client_config *c,
                  const struct op_agent_client_config *fb)
{
    struct op_agent_client_result r;
    op_status_t st = op_agent_client_run(c, &r);
    if (st != OP_OK && fb != NULL) {
        fprintf(stderr, "offpath allreduce: client: offloaded: %s; continuing non-offloaded "
                "(--fallback)\n", op_status_str(st));
        c = fb;
        st = op_agent_client_run(c, &r);
    }
    if (st != OP_OK) {
        fprintf(stderr, "offpath allreduce: client: %s\n", op_status_str(st));
        return 1;
    }
    print_metrics(f, c->mesh, &r);
    return r.wrong == 0 ? 0 : 1;
}

/* A non-offloaded client's settings: -t, every client from `flag`. */
static bool mesh_config(const struct ar_flags *f, const char *flag, const char *list,
                        struct op_agent_client_config *c)
{
    if (f->a.listen_port == 0) {
        cli_bad(TOOL, "a non-offloaded client needs -t (--listen-port)%s",
                f->fallback != NULL ? " (with --fallback too)" : "");
        return false;
    }
    c->mesh = true;
    c->ip = f->a.ip;
    c->port = (uint16_t)f->a.listen_port;
    return parse_list(f, flag, list, OP_AGENT_MAX_CLIENTS, c->client_ip, c->client_port,
                      &c->n_clients);
}

static int run_client(const struct ar_flags *f, struct op_log *log)
{
    struct op_agent_client_config c = {.job = f->job, .timeout_ns = f->a.timeout_s * OP_NS_PER_S,
                                       .io_pinned = f->io_cpu > 0,
                                       .io_cpu = (int)f->io_cpu - 1, .log = log},
                                  fb;
    uint32_t ip;
    uint16_t port = (uint16_t)f->port;
    if (!f->offloaded && !f->mesh) {
        cli_bad(TOOL, "a client needs -m (--mode) offloaded or non-offloaded");
        return 2;
    }
    if (f->mesh)
        return mesh_config(f, "-a (--address)", f->a.addresses, &c) &&
                       read_keys(f, &c.key, c.peer_pub)
                   ? report(f, &c, NULL)
                   : 2;
    if (f->a.addresses == NULL || op_parse_ipv4(f->a.addresses, &ip, &port) != OP_OK) {
        cli_bad(TOOL, "-a (--address) must be the daemon's IP[:PORT]");
        return 2;
    }
    c.daemon.kind = OP_CHAN_TCP;
    op_format_ipv4(ip, c.daemon.host);
    c.daemon.port = port;
    if (!read_keys(f, &c.key, c.peer_pub))
        return 2;
    fb = c;
    /* the clients share one key pair: the mesh pins their own public key */
    memcpy(fb.peer_pub, c.key.pub, OP_CHAN_KEY_BYTES);
    if (f->fallback != NULL && !mesh_config(f, "--fallback", f->fallback, &fb))
        return 2;
    return report(f, &c, f->fallback != NULL ? &fb : NULL);
}

int cli_allreduce(int argc, char **argv)
{
    static const struct option opts[] = {
        {"role", required_argument, NULL, 'r'},       {"mode", required_argument, NULL, 'm'},
        {"port", required_argument, NULL, 'p'},       {"listen-port", required_argument, NULL, 't'},
        {"address", required_argument, NULL, 'a'},    {"num-clients", required_argument, NULL, 'c'},
        {"size", required_argument, NULL, 's'},       {"datatype", required_argument, NULL, 'd'},
        {"operation", required_argument, NULL, 'o'},  {"batch-size", required_argument, NULL, 'b'},
        {"num-batches", required_argument, NULL, 'i'}, {"log-level", required_argument, NULL, 'l'},
        {"key", required_argument, NULL, CLI_AGENT_OPT_KEY},    {"peer", required_argument, NULL, CLI_AGENT_OPT_PEER},
        {"ip", required_argument, NULL, CLI_AGENT_OPT_IP},      {"timeout", required_argument, NULL, CLI_AGENT_OPT_TIMEOUT},
        {"json", no_argument, NULL, OPT_JSON},        {"fallback", required_argument, NULL, OPT_FALLBACK},
        {"io-cpu", required_argument, NULL, OPT_IO_CPU},        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct ar_flags f = {.port = DEFAULT_PORT, .a = CLI_AGENT_DEFAULTS,
                         .job = {.size = 65535, .type = OP_AGENT_FLOAT, .op = OP_RED_SUM,
                                 .batch = 16, .batches = 16}};
    int rc = cli_flags(argc, argv, "r:m:p:t:a:c:s:d:o:b:i:l:h", opts, 'h', usage, set, &f);
    if (rc >= 0)
        return rc;
    if (optind < argc || !f.role_set) {
        cli_bad(TOOL, optind < argc ? "unexpected argument '%s'" : "-r (--role) is needed%s",
                optind < argc ? argv[optind] : "");
        return 2;
    }
    if (!op_agent_job_ok(&f.job)) {
        cli_bad(TOOL, "-s (--size) %llu of %s is more than a channel message holds",
                (unsigned long long)f.job.size, op_agent_type_name(f.job.type));
        return 2;
    }
    struct op_log log;
    op_log_init(&log, f.daemon ? "allreduce_daemon" : "allreduce_client", f.a.log_level);
    log.doca = true;
    return f.daemon ? run_daemon(&f, &log) : run_client(&f, &log);
}
