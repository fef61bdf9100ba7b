/* `offpath ib_{write,read,send}_{bw,lat}`: perftest's command line (its
 * flags, defaults and ranges) to an op_perf_config. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "offpath/perf.h"
#include "perf_cli.h"

static const struct option options[] = {
    {"port", 1, 0, 'p'}, {"ib-dev", 1, 0, 'd'}, {"ib-port", 1, 0, 'i'}, {"size", 1, 0, 's'},
    {"iters", 1, 0, 'n'}, {"all", 0, 0, 'a'}, {"duration", 1, 0, 'D'}, {"margin", 1, 0, 'f'},
    {"qp", 1, 0, 'q'}, {"gid-index", 1, 0, 'x'}, {"CPU-freq", 0, 0, 'F'},
    {"tx-depth", 1, 0, 't'}, {"rx-depth", 1, 0, 'r'}, {"bidirectional", 0, 0, 'b'},
    {"mtu", 1, 0, 'm'}, {"connection", 1, 0, 'c'}, {"qp-timeout", 1, 0, 'u'},
    {"cq-mod", 1, 0, 'Q'}, {"inline_size", 1, 0, 'I'}, {"events", 0, 0, 'e'},
    {"outs", 1, 0, 'o'}, {"noPeak", 0, 0, 'N'}, {"version", 0, 0, 'V'}, {"help", 0, 0, 'h'},
    {"report_gbits", 0, 0, O_REPORT_GBITS}, {"tclass", 1, 0, O_TCLASS},
    {"out_json", 0, 0, O_OUT_JSON}, {"out_json_file", 1, 0, O_OUT_JSON_FILE},
    {"output", 1, 0, O_OUTPUT}, {"use_cuda", 1, 0, O_USE_CUDA}, {"loss", 1, 0, O_LOSS},
    {"loss_seed", 1, 0, O_LOSS_SEED}, {"retry_count", 1, 0, O_RETRY},
    {"log-level", 1, 0, O_LOG_LEVEL}, {"no-progress", 0, 0, O_NO_PROGRESS},
    {"xdp", 0, 0, O_XDP}, {"pcap", 1, 0, O_PCAP}, {"threads", 1, 0, O_THREADS},
    {"mode", 1, 0, O_MODE}, {"use_opencl", 1, 0, O_USE_OPENCL},
    {"inject_fault", 1, 0, O_BAD_RKEY}, {"gpu_touch", 1, 0, O_GPU_TOUCH},
    {"cpu_writes", 1, 0, O_CPU_WRITES}, {"slots", 1, 0, O_SLOTS}, {"use_vulkan", 1, 0, O_USE_VULKAN},
    {"api", 1, 0, O_API}, {"device", 1, 0, O_DEVICE}, {"atomic_type", 1, 0, 'A'},
    {"run_infinitely", 0, 0, O_INFINITE}, {"use_srq", 0, 0, O_SRQ},
    {"clients", 1, 0, O_CLIENTS}, {"rdma_cm", 0, 0, 'R'}, {"gpu_memory", 1, 0, O_GPU_MEMORY},
    {0, 0, 0, 0}};

static bool parse_size(const struct perf_cli *p, const char *val, uint64_t *out)
{
    char num[32];
    size_t n = strlen(val);
    uint64_t mult = 1;
    if (n > 0 && n < sizeof num && strchr("kKmMgG", val[n - 1]) != NULL) {
        mult = strchr("kK", val[n - 1]) ? 1024 : strchr("mM", val[n - 1]) ? 1 << 20 : 1 << 30;
        memcpy(num, val, n - 1);
        num[n - 1] = '\0';
        val = num;
    }
    uint64_t v;
    if (op_parse_u64(val, 1, (1ull << 31) / mult, &v) != OP_OK) {
        cli_bad(p->tool, "invalid value for -s (--size): expected 1..2^31 bytes, K/M suffixes");
        return false;
    }
    *out = v * mult;
    return true;
}

bool set_u32(const struct perf_cli *p, const char *flag, const char *val, uint64_t min,
             uint64_t max, uint32_t *out)
{
    uint64_t v;
    if (!cli_u64(p->tool, flag, val, min, max, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

bool set_choice(struct perf_cli *p, const char *flag, const char *val, const char *const *names,
                int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(val, names[i]) == 0) {
            *out = i;
            return true;
        }
    cli_bad(p->tool, "invalid value '%s' for %s", val, flag);
    return false;
}

#define NUM(opt, flag, field, min, max) CLI_NUM(opt, flag, struct perf_cli, cfg.field, min, max, false)
static const struct cli_num numeric[] = {
    NUM('p', "-p (--port)", tcp_port, 1, 65535),
    NUM('n', "-n (--iters)", iters, 5, 1ull << 32),
    NUM('D', "-D (--duration)", duration_s, 1, 86400),
    NUM('f', "-f (--margin)", margin_s, 0, 86400),
    NUM('q', "-q (--qp)", qps, 1, OP_PERF_MAX_QPS),
    NUM('x', "-x (--gid-index)", gid_index, 0, 64),
    NUM('t', "-t (--tx-depth)", tx_depth, 1, 15000),
    NUM('r', "-r (--rx-depth)", rx_depth, 1, 15000),
    NUM('m', "-m (--mtu)", mtu, 256, 4096),
    NUM('u', "-u (--qp-timeout)", qp_timeout, 0, 31),
    NUM('Q', "-Q (--cq-mod)", cq_mod, 1, 1024),
    NUM('I', "-I (--inline_size)", inline_size, 0, OP_RDMA_MAX_INLINE),
    NUM('o', "-o (--outs)", out_reads, 1, 255),
    NUM(O_TCLASS, "--tclass", tclass, 0, 255),
    NUM(O_LOSS_SEED, "--loss_seed", loss_seed, 0, UINT64_MAX),
    NUM(O_CLIENTS, "--clients", clients, 1, 64),
    NUM(O_RETRY, "--retry_count", retry_cnt, 0, 7),
};

static bool set_numeric(struct perf_cli *p, int opt, const char *val)
{
    uint32_t ib_port;
    bool known;
    if (opt == 'i') /* one port: 1 */
        return set_u32(p, "-i (--ib-port)", val, 1, 1, &ib_port);
    if (opt == 's')
        return parse_size(p, val, &p->cfg.size);
    if (!cli_num_set(p->tool, numeric, sizeof numeric / sizeof numeric[0], opt, val, p, &known))
        return false;
    if (!known)
        cli_bad(p->tool, "unknown option (see --help)");
    return known;
}

static bool set_option(struct perf_cli *p, int opt, const char *val)
{
    static const char *const types[] = {"RC", "UC", "UD"};
    static const char *const outputs[] = {"", "bandwidth", "message_rate", "latency"};
    struct op_perf_config *c = &p->cfg;
    int v;
    switch (opt) {
    case 'd': c->device = val; return true;
    case 'a': c->all = true; return true;
    case 'F': return true;
    case 'b': c->bidirectional = true; return true;
    case 'e': c->use_event = true; return true;
    case 'R': c->rdma_cm = true; return true;
    case 'N': c->no_peak = true; return true;
    case O_REPORT_GBITS: c->report_gbits = true; return true;
    case O_OUT_JSON: c->json = true; return true;
    case O_OUT_JSON_FILE: c->json = true; c->json_file = val; return true;
    case O_NO_PROGRESS: c->progress = false; return true;
    case O_XDP: c->xdp = true; return true;
    case O_INFINITE: c->run_infinitely = true; return true;
    case O_SRQ: c->use_srq = true; return true;
    case O_PCAP: p->pcap = val; return true;
    case 'A': {
        static const char *const atomics[] = {"FETCH_AND_ADD", "CMP_AND_SWAP"};
        if (c->verb != OP_PERF_ATOMIC) {
            cli_bad(p->tool, "-A (--atomic_type) is for ib_atomic_bw and ib_atomic_lat");
            return false;
        }
        if (!set_choice(p, "-A (--atomic_type): expected FETCH_AND_ADD or CMP_AND_SWAP", val, atomics, 2, &v)) return false;
        c->cmp_swap = v == 1; return true;
    }
    case 'c':
        if (!set_choice(p, "-c (--connection): expected RC, UC or UD", val, types, 3, &v)) return false;
        c->type = (enum op_rdma_qp_type)v; return true;
    case O_OUTPUT:
        if (!set_choice(p, "--output: expected bandwidth, message_rate or latency", val, outputs, 4, &v)) return false;
        c->output = (enum op_perf_output)v; return true;
    case O_LOSS: return cli_rate(p->tool, "--loss", val, &c->loss);
    case O_LOG_LEVEL:
        if ((c->log_level = op_log_level_parse(val)) < 0) {
            cli_bad(p->tool, "invalid value '%s' for --log-level", val);
            return false;
        }
        return true;
    case O_USE_OPENCL:
    case O_USE_VULKAN:
    case O_API:
    case O_DEVICE:
    case O_GPU_TOUCH:
    case O_GPU_MEMORY:
    case O_THREADS:
    case O_MODE:
    case O_CPU_WRITES:
    case O_SLOTS:
    case O_BAD_RKEY: return perf_gpu_flag(p, opt, val);
    case O_USE_CUDA:
        cli_bad(p->tool, "--use_cuda: this build has no GPU path (no CUDA device or nvcc here)");
        return false;
    default: return set_numeric(p, opt, val);
    }
}

static const char *flag_name(int opt, char *buf, size_t cap)
{
    if (opt < 256) {
        snprintf(buf, cap, "-%c", opt);
        return buf;
    }
    for (const struct option *o = options; o->name != NULL; o++)
        if (o->val == opt)
            snprintf(buf, cap, "--%s", o->name);
    return buf;
}

/* Returns -1 to run, else the exit status. */
static int parse(struct perf_cli *p, int argc, char **argv)
{
    int opt;
    optind = 1;
    opterr = 1;
    while ((opt = getopt_long(argc, argv, "p:d:i:s:n:aD:f:q:x:Ft:r:bm:c:u:Q:I:eo:A:RNVh", options,
                              NULL)) != -1) {
        char name[32];
        if (opt == 'h') {
            perf_help(p);
            return 0;
        }
        if (opt == 'V') {
            printf("Version: 0.1 (offpath)\n");
            return 0;
        }
        if (opt == '?' || opt < 0 || opt >= (int)sizeof(p->seen))
            return 2;
        if (p->seen[opt]) {
            cli_bad(p->tool, "Duplicated argument: %s", flag_name(opt, name, sizeof name));
            return 2;
        }
        p->seen[opt] = true;
        if (!set_option(p, opt, optarg))
            return 2;
    }
    if (optind < argc - 1) {
        cli_bad(p->tool, "unexpected argument '%s' (one server address at most)", argv[optind + 1]);
        return 2;
    }
    p->cfg.server = optind == argc - 1 ? argv[optind] : NULL;
    if (p->pcap != NULL && p->cfg.clients > 1) { /* its writer is opened after the check */
        cli_bad(p->tool, "--clients with --pcap, --xdp or a GPU: one client at a time");
        return 2;
    }
    char why[256];
    if (op_perf_config_check(&p->cfg, why, sizeof why) != OP_OK) {
        cli_bad(p->tool, "%s", why);
        return 2;
    }
    return -1;
}

static int perf_main(const char *tool, enum op_perf_verb verb, enum op_perf_test test, int argc,
                     char **argv)
{
    struct perf_cli p = {.tool = tool};
    op_perf_config_defaults(&p.cfg, verb, test);
    if (strcmp(tool, "gpunetio_write_bw") == 0) { /* the seed's experiment */
        p.cfg.gpu.threads = OP_PERF_GPU_DEFAULT_THREADS;
        p.cfg.gpu.mode = OP_GPU_MODE_BATCH;
        p.cfg.iters = OP_PERF_GPU_DEFAULT_ITERS;
    }
    p.cfg.udp_batching = cli_udp_batching();
    int rc = parse(&p, argc, argv);
    if (rc >= 0)
        return rc;
    if (!cli_pcap_open(tool, p.pcap, &p.cfg.pcap))
        return 2;
    rc = op_perf_run(&p.cfg);
    if (!cli_pcap_close(tool, p.pcap, p.cfg.pcap) && rc == 0)
        rc = 1;
    return rc;
}

int cli_gpunetio_write_bw(int argc, char **argv)
{
    return perf_main("gpunetio_write_bw", OP_PERF_WRITE, OP_PERF_BW, argc, argv);
}

int cli_ib_write_bw(int argc, char **argv)
{
    return perf_main("ib_write_bw", OP_PERF_WRITE, OP_PERF_BW, argc, argv);
}
int cli_ib_read_bw(int argc, char **argv)
{
    return perf_main("ib_read_bw", OP_PERF_READ, OP_PERF_BW, argc, argv);
}
int cli_ib_send_bw(int argc, char **argv)
{
    return perf_main("ib_send_bw", OP_PERF_SEND, OP_PERF_BW, argc, argv);
}
int cli_ib_write_lat(int argc, char **argv)
{
    return perf_main("ib_write_lat", OP_PERF_WRITE, OP_PERF_LAT, argc, argv);
}
int cli_ib_read_lat(int argc, char **argv)
{
    return perf_main("ib_read_lat", OP_PERF_READ, OP_PERF_LAT, argc, argv);
}
int cli_ib_send_lat(int argc, char **argv)
{
    return perf_main("ib_send_lat", OP_PERF_SEND, OP_PERF_LAT, argc, argv);
}
int cli_ib_atomic_bw(int argc, char **argv)
{
    return perf_main("ib_atomic_bw", OP_PERF_ATOMIC, OP_PERF_BW, argc, argv);
}
int cli_ib_atomic_lat(int argc, char **argv)
{
    return perf_main("ib_atomic_lat", OP_PERF_ATOMIC, OP_PERF_LAT, argc, argv);
}
