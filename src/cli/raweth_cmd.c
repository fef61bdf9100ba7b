/* `offpath raw_ethernet_bw` / `raw_ethernet_lat`: perftest's raw Ethernet
 * command line (--server / --client, -B/-E MACs, -j/-J IPs, -k/-K ports)
 * to an op_perf_raweth_config. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "offpath/perf.h"

struct raweth_cli {
    const char *tool;
    struct op_perf_raweth_config cfg;
    bool role_set, src_ip_set, dst_ip_set, src_port_set, dst_port_set;
};

enum { O_SERVER = 256, O_CLIENT, O_GBITS, O_OUTPUT, O_LOG, O_INFINITE, O_JSON, O_JSON_FILE };

static const struct option options[] = {
    {"server", 0, 0, O_SERVER}, {"client", 0, 0, O_CLIENT}, {"ib-dev", 1, 0, 'd'},
    {"source_mac", 1, 0, 'B'}, {"dest_mac", 1, 0, 'E'}, {"source_ip", 1, 0, 'j'},
    {"dest_ip", 1, 0, 'J'}, {"source_port", 1, 0, 'k'}, {"dest_port", 1, 0, 'K'},
    {"size", 1, 0, 's'}, {"iters", 1, 0, 'n'}, {"duration", 1, 0, 'D'}, {"qp", 1, 0, 'q'},
    {"report_gbits", 0, 0, O_GBITS}, {"output", 1, 0, O_OUTPUT}, {"log-level", 1, 0, O_LOG},
    {"run_infinitely", 0, 0, O_INFINITE}, {"out_json", 0, 0, O_JSON},
    {"out_json_file", 1, 0, O_JSON_FILE},
    {"version", 0, 0, 'V'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};

static void help_for(const char *tool)
{
    printf("Usage: offpath %s --server|--client -d <iface> -j <ip> [-J <ip>] [flags]\n\n"
           "perftest's raw Ethernet test: UDP/IPv4 frames of -s bytes through AF_XDP on\n"
           "-d's interface (kernel bypass; root; peers on-link), no RDMA. BW: the client\n"
           "sends, the server receives and checks every payload. Latency: the server\n"
           "echoes each frame, the client times the round trips (reported halved).\n\n"
           "  --server | --client        the role (one is needed)\n"
           "  -d, --ib-dev=<iface>       the interface (a veth, a NIC)\n"
           "  -B, --source_mac=<mac>     this side's MAC (checked against -d's)\n"
           "  -E, --dest_mac=<mac>       the peer's MAC (the client needs it)\n"
           "  -j, --source_ip=<ip>       this side's IPv4 address (on -d)\n"
           "  -J, --dest_ip=<ip>         the peer's (the client needs it)\n"
           "  -k, --source_port=<port>   this side's UDP port (client 5000, server 5001)\n"
           "  -K, --dest_port=<port>     the peer's (client 5001, server 5000)\n"
           "  -s, --size=<bytes>         frame size without FCS, %d..9000 (default 1024)\n"
           "  -n, --iters=<n>            frames (of each QP), 5..2^32 (default 1000)\n"
           "  -q, --qp=<n>               BW: n QPs, 1..%d; QP i sends on queue i of -d and\n"
           "                             is received at the peer's queue i (both sides -q)\n"
           "  -D, --duration=<sec>       BW: send for sec seconds instead\n"
           "      --run_infinitely       BW: a row every -D seconds (default 5) until SIGINT\n"
           "      --out_json             the report as JSON too (perftest_out.json)\n"
           "      --out_json_file=<file> its file\n"
           "      --report_gbits         Gb/s instead of MiB/s\n"
           "      --output=bandwidth|message_rate|latency  print only that figure\n"
           "      --log-level=<level>    error (default), warning, info, debug\n",
           tool, OP_PERF_RAWETH_MIN, OP_PERF_RAWETH_MAX_QPS);
}

/* cli_flags' help callback takes no argument: one per tool */
static void help_bw(void) { help_for("raw_ethernet_bw"); }
static void help_lat(void) { help_for("raw_ethernet_lat"); }

static bool parse_mac(struct raweth_cli *p, const char *flag, const char *v, uint8_t m[6])
{
    unsigned b[6];
    int used = -1;
    if (sscanf(v, "%2x:%2x:%2x:%2x:%2x:%2x%n", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
               &used) != 6 || v[used] != '\0') {
        cli_bad(p->tool, "invalid MAC '%s' for %s (aa:bb:cc:dd:ee:ff)", v, flag);
        return false;
    }
    for (int i = 0; i < 6; i++)
        m[i] = (uint8_t)b[i];
    return true;
}

static bool parse_ip(struct raweth_cli *p, const char *flag, const char *v, uint32_t *ip,
                     bool *set)
{
    uint16_t port = 0;
    if (op_parse_ipv4(v, ip, &port) != OP_OK || port != 0) {
        cli_bad(p->tool, "invalid IPv4 address '%s' for %s", v, flag);
        return false;
    }
    *set = true;
    return true;
}

static bool parse_port(struct raweth_cli *p, const char *flag, const char *v, uint16_t *port,
                       bool *set)
{
    uint64_t x;
    if (!cli_u64(p->tool, flag, v, 1, 65535, &x))
        return false;
    *port = (uint16_t)x;
    *set = true;
    return true;
}

static bool set(int opt, const char *v, void *arg)
{
    static const char *const outputs[] = {"", "bandwidth", "message_rate", "latency"};
    struct raweth_cli *p = arg;
    struct op_perf_raweth_config *c = &p->cfg;
    uint64_t x;
    switch (opt) {
    case O_SERVER:
    case O_CLIENT:
        c->server = opt == O_SERVER;
        p->role_set = true;
        return true;
    case 'd': c->ifname = v; return true;
    case 'B': return (c->have_src_mac = parse_mac(p, "-B (--source_mac)", v, c->src_mac));
    case 'E': return (c->have_dst_mac = parse_mac(p, "-E (--dest_mac)", v, c->dst_mac));
    case 'j': return parse_ip(p, "-j (--source_ip)", v, &c->src_ip, &p->src_ip_set);
    case 'J': return parse_ip(p, "-J (--dest_ip)", v, &c->dst_ip, &p->dst_ip_set);
    case 'k': return parse_port(p, "-k (--source_port)", v, &c->src_port, &p->src_port_set);
    case 'K': return parse_port(p, "-K (--dest_port)", v, &c->dst_port, &p->dst_port_set);
    case 's':
        if (!cli_u64(p->tool, "-s (--size)", v, OP_PERF_RAWETH_MIN, 9000, &x))
            return false;
        c->size = (uint32_t)x;
        return true;
    case 'n': return cli_u64(p->tool, "-n (--iters)", v, 5, 1ull << 32, &c->iters);
    case 'q':
        if (!cli_u64(p->tool, "-q (--qp)", v, 1, OP_PERF_RAWETH_MAX_QPS, &x))
            return false;
        c->qps = (uint32_t)x;
        return true;
    case 'D':
        if (!cli_u64(p->tool, "-D (--duration)", v, 1, 86400, &x))
            return false;
        c->duration_s = (uint32_t)x;
        return true;
    case O_GBITS: c->report_gbits = true; return true;
    case O_INFINITE: c->run_infinitely = true; return true;
    case O_JSON: c->json = true; return true;
    case O_JSON_FILE: c->json = true; c->json_file = v; return true;
    case O_LOG:
        if ((c->log_level = op_log_level_parse(v)) >= 0)
            return true;
        cli_bad(p->tool, "invalid value '%s' for --log-level", v);
        return false;
    case O_OUTPUT:
        for (int i = 1; i < 4; i++)
            if (strcmp(v, outputs[i]) == 0) {
                c->output = (enum op_perf_output)i;
                return true;
            }
        cli_bad(p->tool, "invalid value '%s' for --output", v);
        return false;
    case 'V': printf("Version: 0.1 (offpath)\n"); return true;
    default: return false;
    }
}

/* The rules perftest's raw Ethernet tools keep, and what AF_XDP needs. */
static const char *check(const struct raweth_cli *p)
{
    const struct op_perf_raweth_config *c = &p->cfg;
    if (!p->role_set)
        return "--server or --client is needed";
    if (c->ifname == NULL || !p->src_ip_set)
        return "-d (the interface) and -j (its IPv4 address) are needed: AF_XDP steers UDP to "
               "that address";
    if (!c->server && (!p->dst_ip_set || !c->have_dst_mac))
        return "the client needs -J (dest IP) and -E (dest MAC)";
    if (c->qps > 1 && c->test == OP_PERF_LAT)
        return "-q (--qp) is for raw_ethernet_bw (the latency test is one ping-pong)";
    if ((c->duration_s || c->run_infinitely) && c->test == OP_PERF_LAT)
        return c->run_infinitely ? "--run_infinitely is for raw_ethernet_bw"
                                 : "-D (--duration) is for raw_ethernet_bw";
    if ((c->output == OP_PERF_OUT_LAT) != (c->test == OP_PERF_LAT) && c->output != OP_PERF_OUT_FULL)
        return "--output: latency for raw_ethernet_lat, bandwidth|message_rate for raw_ethernet_bw";
    return NULL;
}

static int raweth_main(const char *tool, enum op_perf_test test, int argc, char **argv)
{
    struct raweth_cli p = {.tool = tool,
                           .cfg = {.test = test, .size = 1024, .iters = 1000, .qps = 1,
                                   .output = OP_PERF_OUT_FULL, .log_level = OP_LOG_ERROR}};
    int rc = cli_flags(argc, argv, "d:B:E:j:J:k:K:s:n:D:q:Vh", options, 'h',
                       test == OP_PERF_BW ? help_bw : help_lat, set, &p);
    if (rc >= 0)
        return rc;
    const char *why = optind < argc ? "unexpected argument (raw Ethernet takes no host)" : check(&p);
    if (why != NULL) {
        cli_bad(tool, "%s", why);
        return 2;
    }
    struct op_perf_raweth_config *c = &p.cfg;
    if (!p.src_port_set)
        c->src_port = c->server ? 5001 : 5000;
    if (!p.dst_port_set)
        c->dst_port = c->server ? 5000 : 5001;
    if (c->run_infinitely && c->duration_s == 0)
        c->duration_s = 5; /* perftest's interval */
    return op_perf_raweth_run(c);
}

int cli_raw_ethernet_bw(int argc, char **argv)
{
    return raweth_main("raw_ethernet_bw", OP_PERF_BW, argc, argv);
}

int cli_raw_ethernet_lat(int argc, char **argv)
{
    return raweth_main("raw_ethernet_lat", OP_PERF_LAT, argc, argv);
}
