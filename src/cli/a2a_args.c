/* DOCA dpa_all_to_all's flags for offpath's: compiled into that MPI program
 * (src/mpi), not into `offpath`, which only execs it. */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/agent.h"

#define MAX_MSGSIZE (1ull << 30)

void op_a2a_bench_usage(FILE *out)
{
    fprintf(out,
            "usage: offpath dpa_all_to_all [-m BYTES[,BYTES...]] [-t THREADS[,THREADS...]]\n"
            "                              [-n RUNS] [-w WARMUP] [--ip ADDR]\n"
            "                              [--matrix|--no-matrix]\n"
            "                              [-d DAEMON[,DAEMON...] --key RANKS.key --peer DAEMONS.pub]\n"
            "                              [--json]      (an MPI program: start it with mpirun)\n"
            "  -m, --msgsize   bytes of each rank's send buffer, a multiple of 4 and at least\n"
            "                  ranks * 4 (default ranks * 4); a list runs each\n"
            "  -t, --threads   worker threads per rank moving the data (default min(ranks, 8));\n"
            "                  a list runs each, as the seed's thread table\n"
            "  -n, --iters     timed runs of each size and thread count (default 10)\n"
            "  -w, --warmup    untimed runs before them (default 2)\n"
            "      --ip        the address the workers bind (default 127.0.0.1)\n"
            "  -d, --devices   agent daemons to offload to, IP[:PORT][,...] (port default\n"
            "                  18515): `offpath dpa_all_to_all -r daemon` runs them; rank r\n"
            "                  is served by daemon r / (ranks / daemons). Without -d the\n"
            "                  workers run in each rank, as DPA threads sit beside their host\n"
            "      --key       with -d: the ranks' secret key; --peer the daemons' public key\n"
            "      --timeout   with -d: longest wait for a daemon, seconds (default 30)\n"
            "      --matrix    print the send and receive matrices (default: when a row has\n"
            "                  at most 64 values)\n"
            "      --json      one JSON line per measurement\n"
            "Every received element is checked; MPI_Alltoall is timed in the same run.\n");
}

static op_status_t bad(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return OP_ERR_INVAL;
}

/* "a,b,c" of integers lo..hi into out (at most OP_A2A_BENCH_MAX_LIST). */
static int parse_list(const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
    int n = 0;
    const char *p = text;
    while (n < OP_A2A_BENCH_MAX_LIST) {
        char item[32];
        size_t k = strcspn(p, ",");
        if (k == 0 || k >= sizeof item)
            return -1;
        memcpy(item, p, k);
        item[k] = '\0';
        if (op_parse_u64(item, lo, hi, &out[n++]) != OP_OK)
            return -1;
        if (p[k] == '\0')
            return n;
        p += k + 1;
    }
    return -1;
}

static op_status_t set_msgsizes(const char *v, struct op_a2a_bench_config *c, char *err,
                                size_t len)
{
    c->n_msgsize = parse_list(v, 4, MAX_MSGSIZE, c->msgsize);
    for (int i = 0; i < c->n_msgsize; i++)
        if (c->msgsize[i] % 4 != 0)
            c->n_msgsize = -1;
    if (c->n_msgsize > 0)
        return OP_OK;
    return bad(err, len,
               "invalid value '%s' for -m (--msgsize): expected up to %d sizes 4..%llu, "
               "multiples of 4, separated by commas",
               v, OP_A2A_BENCH_MAX_LIST, MAX_MSGSIZE);
}

static op_status_t set_threads(const char *v, struct op_a2a_bench_config *c, char *err,
                               size_t len)
{
    uint64_t t[OP_A2A_BENCH_MAX_LIST];
    c->n_threads = parse_list(v, 1, OP_A2A_MAX_WORKERS, t);
    for (int i = 0; i < c->n_threads; i++)
        c->threads[i] = (uint32_t)t[i];
    if (c->n_threads > 0)
        return OP_OK;
    return bad(err, len,
               "invalid value '%s' for -t (--threads): expected up to %d counts 1..%d, "
               "separated by commas",
               v, OP_A2A_BENCH_MAX_LIST, OP_A2A_MAX_WORKERS);
}

static op_status_t set_count(const char *v, const char *flag, uint64_t lo, uint32_t *out,
                             char *err, size_t len)
{
    uint64_t x;
    if (op_parse_u64(v, lo, 1000000, &x) == OP_OK) {
        *out = (uint32_t)x;
        return OP_OK;
    }
    return bad(err, len, "invalid value '%s' for %s (expected %llu..1000000)", v, flag,
               (unsigned long long)lo);
}

/* -d: "IP[:PORT],..." of agent daemons */
static op_status_t set_daemons(const char *v, struct op_a2a_bench_config *c, char *err,
                               size_t len)
{
    const char *p = v;
    c->n_daemons = 0;
    while (c->n_daemons < OP_AGENT_MAX_DAEMONS) {
        char item[64];
        size_t k = strcspn(p, ",");
        uint16_t port = 18515;
        if (k == 0 || k >= sizeof item)
            break;
        memcpy(item, p, k);
        item[k] = '\0';
        if (op_parse_ipv4(item, &c->daemon_ip[c->n_daemons], &port) != OP_OK)
            break;
        c->daemon_port[c->n_daemons++] = port;
        if (p[k] == '\0')
            return OP_OK;
        p += k + 1;
    }
    return bad(err, len,
               "invalid value '%s' for -d (--devices): expected up to %d agent daemons "
               "IP[:PORT] separated by commas",
               v, OP_AGENT_MAX_DAEMONS);
}

enum { OPT_IP = 256, OPT_MATRIX, OPT_NO_MATRIX, OPT_JSON, OPT_KEY, OPT_PEER, OPT_TIMEOUT };

static op_status_t apply(int opt, const char *v, struct op_a2a_bench_config *c, char *err,
                         size_t len)
{
    switch (opt) {
    case 'm': return set_msgsizes(v, c, err, len);
    case 't': return set_threads(v, c, err, len);
    case 'n': return set_count(v, "-n (--iters)", 1, &c->iters, err, len);
    case 'w': return set_count(v, "-w (--warmup)", 0, &c->warmup, err, len);
    case 'h': c->help = true; return OP_OK;
    case OPT_MATRIX: c->matrices = OP_A2A_MATRIX_ALWAYS; return OP_OK;
    case OPT_NO_MATRIX: c->matrices = OP_A2A_MATRIX_NEVER; return OP_OK;
    case OPT_JSON: c->json = true; return OP_OK;
    case OPT_IP: {
        uint16_t port = 0;
        if (op_parse_ipv4(v, &c->ip, &port) == OP_OK && port == 0 && c->ip != 0)
            return OP_OK;
        return bad(err, len, "invalid value '%s' for --ip (expected an IPv4 address)", v);
    }
    case 'd': return set_daemons(v, c, err, len);
    case OPT_KEY: c->key = v; return OP_OK;
    case OPT_PEER: c->peer = v; return OP_OK;
    case OPT_TIMEOUT: return set_count(v, "--timeout", 1, &c->timeout_s, err, len);
    default: return bad(err, len, "unknown flag (see --help)");
    }
}

op_status_t op_a2a_bench_parse(int argc, char **argv, struct op_a2a_bench_config *cfg, char *err,
                               size_t err_len)
{
    static const struct option opts[] = {
        {"msgsize", required_argument, NULL, 'm'}, {"threads", required_argument, NULL, 't'},
        {"iters", required_argument, NULL, 'n'},   {"warmup", required_argument, NULL, 'w'},
        {"devices", required_argument, NULL, 'd'}, {"ip", required_argument, NULL, OPT_IP},
        {"matrix", no_argument, NULL, OPT_MATRIX}, {"no-matrix", no_argument, NULL, OPT_NO_MATRIX},
        {"json", no_argument, NULL, OPT_JSON},     {"help", no_argument, NULL, 'h'},
        {"key", required_argument, NULL, OPT_KEY}, {"peer", required_argument, NULL, OPT_PEER},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {NULL, 0, NULL, 0},
    };
    *cfg = (struct op_a2a_bench_config){.iters = 10, .warmup = 2, .ip = 0x7f000001u,
                                         .timeout_s = 30};
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "m:t:n:w:d:h", opts, NULL)) != -1) {
        if (opt == '?')
            return bad(err, err_len, "unknown flag or missing value: %s (see --help)",
                       argv[optind - 1]);
        op_status_t st = apply(opt, optarg, cfg, err, err_len);
        if (st != OP_OK || cfg->help)
            return st;
    }
    if (optind < argc)
        return bad(err, err_len, "unexpected argument '%s' (see --help)", argv[optind]);
    if (cfg->n_daemons > 0 && (cfg->key == NULL || cfg->peer == NULL))
        return bad(err, err_len, "-d (--devices) needs --key and --peer (offpath keygen)");
    return OP_OK;
}
