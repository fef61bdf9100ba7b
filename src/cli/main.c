/* The offpath multi-call binary: `offpath <tool> [flags]`, or invoked through
 * a link named after the tool. It finds the tool and hands it argv. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "offpath/io.h"

struct tool {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *summary;
};

static const struct tool tools[] = {
    {"switch", cli_switch, "software TOR/SPINE switch with in-network Allreduce"},
    {"inc_test", cli_inc_test, "run leaders through a switch topology and check every result"},
    {"osu_allreduce", cli_osu_allreduce, "OSU-style MPI_Allreduce latency (run it under mpirun)"},
    {"osu_iallreduce", cli_osu_iallreduce,
     "OSU-style MPI_Iallreduce overlap (run it under mpirun)"},
    {"allreduce", cli_allreduce,
     "DOCA allreduce: daemons reduce for offloaded clients, RDMA between daemons"},
    {"dpa_all_to_all", cli_dpa_all_to_all,
     "DOCA dpa_all_to_all: all-to-all by worker threads over RoCEv2 (under mpirun)"},
    {"mpirun", cli_mpirun, "run an MPI program on an emulated cluster with in-network allreduce"},
    {"ib_write_bw", cli_ib_write_bw, "perftest RDMA WRITE bandwidth over software RoCEv2"},
    {"ib_read_bw", cli_ib_read_bw, "perftest RDMA READ bandwidth over software RoCEv2"},
    {"ib_send_bw", cli_ib_send_bw, "perftest SEND bandwidth over software RoCEv2"},
    {"ib_write_lat", cli_ib_write_lat, "perftest RDMA WRITE latency over software RoCEv2"},
    {"ib_read_lat", cli_ib_read_lat, "perftest RDMA READ latency over software RoCEv2"},
    {"ib_atomic_bw", cli_ib_atomic_bw, "perftest atomic (FETCH_AND_ADD, CMP_AND_SWAP) bandwidth"},
    {"ib_atomic_lat", cli_ib_atomic_lat, "perftest atomic latency over software RoCEv2"},
    {"raw_ethernet_bw", cli_raw_ethernet_bw, "perftest raw Ethernet bandwidth over AF_XDP"},
    {"raw_ethernet_lat", cli_raw_ethernet_lat, "perftest raw Ethernet latency over AF_XDP"},
    {"ib_send_lat", cli_ib_send_lat, "perftest SEND latency over software RoCEv2"},
    {"gpunetio_write_bw", cli_gpunetio_write_bw,
     "GPU-initiated RDMA WRITE bandwidth: OpenCL or Vulkan work-items post"},
    {"gpu", cli_gpu, "gpu list: OpenCL and Vulkan devices and whether each runs the queue"},
    {"secure_channel", cli_secure_channel,
     "DOCA secure_channel over an encrypted, mutually authenticated channel"},
    {"keygen", cli_keygen, "write an X25519 key pair for secure_channel (NAME.key, NAME.pub)"},
    {"dns", cli_dns, "authoritative DNS server for RFC 1035 zone files (sockets or DPDK)"},
    {"topo", cli_topo, "hosts, TORs and SPINEs as namespaces on rate-limited links (up|down|...)"},
    {"topo_rank", cli_topo_rank, "run an MPI rank in its host's namespace of a topology (mpirun)"},
    {"model", cli_model, "in-network against host Allreduce at scale, on SimGrid (4..4096 nodes)"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: offpath <tool> [flags]   (offpath <tool> --help for its flags)\n"
                 "       offpath --paths           (the files it finds beside itself)\n\ntools:\n");
    for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
        fprintf(out, "  %-12s %s\n", tools[i].name, tools[i].summary);
}

bool cli_u64(const char *tool, const char *flag, const char *val, uint64_t min, uint64_t max,
             uint64_t *out)
{
    if (op_parse_u64(val, min, max, out) == OP_OK)
        return true;
    cli_bad(tool, "invalid value '%s' for %s (expected an integer %llu..%llu)", val, flag,
            (unsigned long long)min, (unsigned long long)max);
    return false;
}

bool cli_num_set(const char *tool, const struct cli_num *t, size_t n, int opt, const char *val,
                 void *base, bool *known)
{
    uint64_t v;
    for (*known = false; n > 0 && t->opt != opt; t++, n--)
        ;
    if (n == 0)
        return true;
    *known = true;
    if (!cli_u64(tool, t->flag, val, t->min, t->max, &v))
        return false;
    if (t->pow2 && (v & (v - 1)) != 0) {
        cli_bad(tool, "invalid value '%s' for %s (not a power of 2)", val, t->flag);
        return false;
    }
    uint8_t *field = (uint8_t *)base + t->off;
    switch (t->size) {
    case 1: *field = (uint8_t)v; break;
    case 2: memcpy(field, &(uint16_t){(uint16_t)v}, 2); break;
    case 4: memcpy(field, &(uint32_t){(uint32_t)v}, 4); break;
    default: memcpy(field, &v, 8); break;
    }
    return true;
}

bool cli_rate(const char *tool, const char *flag, const char *val, double *out)
{
    if (op_parse_double(val, 0.0, 1.0, out) == OP_OK)
        return true;
    cli_bad(tool, "invalid value '%s' for %s (expected a probability 0..1)", val, flag);
    return false;
}

void cli_bad(const char *tool, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "offpath %s: ", tool);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

int cli_flags(int argc, char **argv, const char *shortopts, const struct option *opts,
              int help_opt, void (*help)(void), bool (*set)(int opt, const char *val, void *cfg),
              void *cfg)
{
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
        if (opt == help_opt) {
            help();
            return 0;
        }
        if (opt == '?' || !set(opt, optarg, cfg))
            return 2;
    }
    return -1;
}

bool cli_pcap_open(const char *tool, const char *path, struct op_pcap **out)
{
    *out = NULL;
    if (path == NULL)
        return true;
    op_status_t st = op_pcap_open(path, out);
    if (st == OP_OK)
        return true;
    int e = op_status_errno(st);
    cli_bad(tool, "cannot write --pcap '%s': %s", path, e != 0 ? strerror(e) : op_status_str(st));
    return false;
}

bool cli_pcap_close(const char *tool, const char *path, struct op_pcap *w)
{
    if (w == NULL)
        return true;
    op_status_t st = op_pcap_close(w);
    if (st == OP_OK)
        return true;
    cli_bad(tool, "--pcap '%s' is incomplete: %s", path, strerror(op_status_errno(st)));
    return false;
}

bool cli_udp_batching(void)
{
    const char *v = getenv("OFFPATH_UDP_BATCHING");
    return v == NULL || strcmp(v, "0") != 0;
}

const char *cli_self_exe(const char *tool)
{
    static char exe[4096]; /* one per process, written once */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        cli_bad(tool, "cannot find the offpath binary (/proc/self/exe)");
        return NULL;
    }
    exe[n] = '\0';
    return exe;
}

static const struct tool *find(const char *name)
{
    for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
        if (strcmp(tools[i].name, name) == 0)
            return &tools[i];
    return NULL;
}

int main(int argc, char **argv)
{
    const struct tool *t = find(basename(argv[0]));
    if (t != NULL)
        return t->main(argc, argv);
    if (argc == 2 && strcmp(argv[1], "--paths") == 0)
        return cli_paths();
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    t = find(argv[1]);
    if (t == NULL) {
        fprintf(stderr, "offpath: unknown tool '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    return t->main(argc - 1, argv + 1);
}
