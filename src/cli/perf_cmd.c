/* `offpath ib_{write,read,send}_{bw,lat}`: perftest's command line (its
 * flags, defaults and ranges) to an op_perf_config. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "offpath/perf.h"

struct perf_cli {
    const char *tool;
    struct op_perf_config cfg;
    bool seen[512]; /* perftest refuses a flag given twice */
    const char *pcap;
};

enum { O_REPORT_GBITS = 256, O_TCLASS, O_OUT_JSON, O_OUT_JSON_FILE, O_OUTPUT, O_USE_CUDA,
       O_LOSS, O_LOSS_SEED, O_RETRY, O_LOG_LEVEL, O_NO_PROGRESS, O_XDP, O_PCAP, O_THREADS,
       O_MODE, O_USE_OPENCL, O_BAD_RKEY, O_GPU_TOUCH, O_CPU_WRITES, O_INFINITE, O_SRQ,
       O_CLIENTS };

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
    {"cpu_writes", 1, 0, O_CPU_WRITES}, {"atomic_type", 1, 0, 'A'},
    {"run_infinitely", 0, 0, O_INFINITE}, {"use_srq", 0, 0, O_SRQ},
    {"clients", 1, 0, O_CLIENTS}, {"rdma_cm", 0, 0, 'R'}, {0, 0, 0, 0}};

static void help(const struct perf_cli *p)
{
    const struct op_perf_config *c = &p->cfg;
    bool bw = c->test == OP_PERF_BW;
    printf("Usage:\n"
           "  offpath %s            start a server and wait for connection\n"
           "  offpath %s <host>     connect to server at <host>\n\n"
           "%s over offpath's software RoCEv2 (RoCEv2 packets over UDP; the QP socket\n"
           "binds UDP port 4791 when it is free). perftest's flags, defaults and output.\n\n"
           "Options:\n",
           p->tool, p->tool, op_perf_title(c));
    printf("  -p, --port=<port>          listen on/connect to TCP port (default %d)\n"
           "  -d, --ib-dev=<dev>         an interface or IPv4 address for the QPs (default:\n"
           "                             the address the TCP connection uses)\n"
           "  -i, --ib-port=<port>       device port: 1 (the only one)\n"
           "  -s, --size=<size>          message size, K/M suffixes (default %llu)\n"
           "  -a, --all                  sizes 2 to 2^23\n"
           "  -n, --iters=<iters>        iterations, 5..2^32 (default %llu)\n"
           "  -D, --duration=<sec>       run for sec seconds (not with -a)\n"
           "  -f, --margin=<sec>         with -D: seconds left out at each end (default D/4)\n",
           OP_PERF_DEFAULT_PORT, (unsigned long long)c->size, (unsigned long long)c->iters);
    if (bw)
        printf("  -q, --qp=<num>             queue pairs, 1..%d (default 1)\n"
               "  -b, --bidirectional        traffic both ways\n"
               "  -Q, --cq-mod=<n>           signal one completion every n (default 100)\n"
               "  -N, --noPeak               do not compute the peak bandwidth\n"
               "      --run_infinitely       a row every -D seconds (default 5) until SIGINT\n"
               "      --report_gbits         Gb/s instead of MiB/s\n"
               "      --output=bandwidth|message_rate  print only that figure\n",
               OP_PERF_MAX_QPS);
    else
        printf("      --output=latency       print only the typical latency\n");
    if (c->verb == OP_PERF_ATOMIC)
        printf("  -A, --atomic_type=<type>   FETCH_AND_ADD (default) or CMP_AND_SWAP; 8 bytes each\n");
    printf("  -t, --tx-depth=<dep>       send queue depth, 1..15000 (default %u)\n"
           "  -r, --rx-depth=<dep>       receive queue depth (send tests), 1..15000 (default 512)\n"
           "      --use_srq              send tests: every QP's receives from one shared\n"
           "                             receive queue of -r receives\n"
           "  -m, --mtu=<mtu>            256, 512, 1024, 2048 or 4096 (default 4096)\n"
           "  -I, --inline_size=<size>   messages up to size bytes are posted INLINE (copied\n"
           "                             at post), 0..912 (default 0; READ: always 0)\n"
           "  -e, --events               sleep in poll(2) when idle instead of polling\n"
           "                             (send and read tests)\n"
           "  -o, --outs=<num>           READs in flight per QP, 1..255 (read tests;\n"
           "                             default 16)\n"
           "  -c, --connection=<type>    RC, UC or UD (default RC)\n"
           "  -R, --rdma_cm              connect the QPs with CM REQ/REP/RTU on UDP 4791\n"
           "                             (the server's address must own that port)\n"
           "  -u, --qp-timeout=<n>       4.096 us * 2^n per try, 0..31 (default 14)\n"
           "      --retry_count=<n>      retries before RETRY_EXC_ERR, 0..7 (7 = forever,\n"
           "                             the default)\n"
           "  -x, --gid-index=<index>    shown in the banner; offpath has one RoCEv2 GID per\n"
           "                             address (default 3)\n"
           "      --tclass=<n>           IP traffic class (TOS) of the RoCEv2 packets\n"
           "  -F, --CPU-freq             accepted (offpath times with the monotonic clock)\n"
           "      --out_json             also write a JSON report (every size with -a)\n"
           "      --out_json_file=<file> its file (default perftest_out.json)\n"
           "      --loss=<p>             drop each RoCEv2 packet this side sends with\n"
           "                             probability p (go-back-N recovers it on RC)\n"
           "      --loss_seed=<n>        seed of those drops (default 1)\n"
           "      --xdp                  move the RoCEv2 frames through AF_XDP on -d's\n"
           "                             interface (kernel bypass; root; peers on-link)\n"
           "      --pcap=<file>          write every RoCEv2 packet this side receives and\n"
           "                             sends to file, one Ethernet/IPv4/UDP frame each\n"
           "                             (pcap, ns timestamps)\n"
           "      --log-level=<level>    engine log: error (default), warning, info, debug\n"
           "      --no-progress          no progress lines on stderr\n"
           "      --use_opencl=<p>,<d>   buffers in OpenCL platform p's device d's shared\n"
           "                             virtual memory (fine-grained buffer SVM)\n"
           "      --gpu_touch=once|infinite  with --use_opencl: the device reads every\n"
           "                             buffer before the test, or pass after pass during it\n"
           "%s"
           "      --clients=<n>          (server) serve n clients at once, each with its own\n"
           "                             QPs; each one's report, then their sum (default 1)\n"
           "  -V, --version              version\n"
           "  -h, --help                 this text\n",
           c->tx_depth,
           c->gpu.threads == 0
               ? ""
               : "      --threads=<n>          work-items of the posting kernel, each posting one\n"
                 "                             write per iteration (default 512; above 256 a\n"
                 "                             multiple of 256); -n is iterations per work-item\n"
                 "      --mode=thread|batch    every work-item rings the doorbell, or work-item 0\n"
                 "                             of each work-group after a barrier (default batch)\n"
                 "      --inject_fault=rkey|range  (both sides) the device posts with a key\n"
                 "                             not the server's, or past its region: the run\n"
                 "                             checks that the writes complete with\n"
                 "                             REM_ACCESS_ERR and that nothing lands\n"
                 "      --cpu_writes=<n>       (client) the host also posts n writes of the same\n"
                 "                             slots on the same QP, between the device's\n");
}

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

static bool set_u32(const struct perf_cli *p, const char *flag, const char *val, uint64_t min,
                    uint64_t max, uint32_t *out)
{
    uint64_t v;
    if (!cli_u64(p->tool, flag, val, min, max, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool set_choice(struct perf_cli *p, const char *flag, const char *val,
                       const char *const *names, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(val, names[i]) == 0) {
            *out = i;
            return true;
        }
    cli_bad(p->tool, "invalid value '%s' for %s", val, flag);
    return false;
}

static bool set_numeric(struct perf_cli *p, int opt, const char *val)
{
    struct op_perf_config *c = &p->cfg;
    uint32_t v;
    switch (opt) {
    case 'p': if (!set_u32(p, "-p (--port)", val, 1, 65535, &v)) return false; c->tcp_port = (uint16_t)v; return true;
    case 'i': return set_u32(p, "-i (--ib-port)", val, 1, 1, &v);
    case 's': return parse_size(p, val, &c->size);
    case 'n': return cli_u64(p->tool, "-n (--iters)", val, 5, 1ull << 32, &c->iters);
    case 'D': return set_u32(p, "-D (--duration)", val, 1, 86400, &c->duration_s);
    case 'f': return set_u32(p, "-f (--margin)", val, 0, 86400, &c->margin_s);
    case 'q': return set_u32(p, "-q (--qp)", val, 1, OP_PERF_MAX_QPS, &c->qps);
    case 'x': if (!set_u32(p, "-x (--gid-index)", val, 0, 64, &v)) return false; c->gid_index = (int)v; return true;
    case 't': return set_u32(p, "-t (--tx-depth)", val, 1, 15000, &c->tx_depth);
    case 'r': return set_u32(p, "-r (--rx-depth)", val, 1, 15000, &c->rx_depth);
    case 'm': return set_u32(p, "-m (--mtu)", val, 256, 4096, &c->mtu);
    case 'u': if (!set_u32(p, "-u (--qp-timeout)", val, 0, 31, &v)) return false; c->qp_timeout = (uint8_t)v; return true;
    case 'Q': return set_u32(p, "-Q (--cq-mod)", val, 1, 1024, &c->cq_mod);
    case 'I': return set_u32(p, "-I (--inline_size)", val, 0, OP_RDMA_MAX_INLINE, &c->inline_size);
    case 'o': return set_u32(p, "-o (--outs)", val, 1, 255, &c->out_reads);
    case O_TCLASS: if (!set_u32(p, "--tclass", val, 0, 255, &v)) return false; c->tclass = (int)v; return true;
    case O_LOSS_SEED: return cli_u64(p->tool, "--loss_seed", val, 0, UINT64_MAX, &c->loss_seed);
    case O_CLIENTS: return set_u32(p, "--clients", val, 1, 64, &c->clients);
    case O_RETRY: if (!set_u32(p, "--retry_count", val, 0, 7, &v)) return false; c->retry_cnt = (uint8_t)v; return true;
    default:
        cli_bad(p->tool, "unknown option (see --help)");
        return false;
    }
}

/* "<platform>,<device>", perftest's --use_opencl */
static bool parse_opencl(struct perf_cli *p, const char *val)
{
    unsigned a = 0, b = 0;
    int used = -1;
    if (sscanf(val, "%u,%u%n", &a, &b, &used) != 2 || val[used] != '\0' || a > 15 || b > 15) {
        cli_bad(p->tool, "invalid value '%s' for --use_opencl (<platform>,<device>, 0..15 each)",
                val);
        return false;
    }
    p->cfg.gpu.platform = a;
    p->cfg.gpu.device = b;
    return true;
}

static bool set_gpu_option(struct perf_cli *p, int opt, const char *val)
{
    static const char *const modes[] = {"thread", "batch"};
    struct op_perf_config *c = &p->cfg;
    if (c->gpu.threads == 0) {
        cli_bad(p->tool, "device-posted writes (--threads, --mode, --inject_fault, "
                         "--cpu_writes) are gpunetio_write_bw's");
        return false;
    }
    int v;
    switch (opt) {
    case O_THREADS: return set_u32(p, "--threads", val, 1, 65536, &c->gpu.threads);
    case O_CPU_WRITES:
        return cli_u64(p->tool, "--cpu_writes", val, 0, UINT32_MAX, &c->gpu.cpu_writes);
    case O_MODE:
        if (!set_choice(p, "--mode", val, modes, 2, &v))
            return false;
        c->gpu.mode = v ? OP_GPU_MODE_BATCH : OP_GPU_MODE_THREAD;
        return true;
    default: {
        static const char *const faults[] = {"rkey", "range"};
        if (!set_choice(p, "--inject_fault", val, faults, 2, &v))
            return false;
        c->gpu.fault = v == 0 ? OP_PERF_FAULT_RKEY : OP_PERF_FAULT_RANGE;
        return true;
    }
    }
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
        c->gpu.use_opencl = c->gpu.threads == 0; /* gpunetio: the posting device */
        return parse_opencl(p, val);
    case O_GPU_TOUCH: {
        static const char *const touch[] = {"once", "infinite"};
        int v;
        if (!set_choice(p, "--gpu_touch", val, touch, 2, &v))
            return false;
        c->gpu.touch = v == 0 ? OP_PERF_TOUCH_ONCE : OP_PERF_TOUCH_INFINITE;
        return true;
    }
    case O_THREADS:
    case O_MODE:
    case O_CPU_WRITES:
    case O_BAD_RKEY: return set_gpu_option(p, opt, val);
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
            help(p);
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
