/* `offpath inc_test`: flags to an inc_test configuration. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "offpath/inctest.h"
#include "offpath/wire.h"

static const char *const tool = "inc_test";

static void help(void)
{
    printf("usage: offpath inc_test [options]\n"
           "\n"
           "Starts a software switch topology on loopback (TORs, and a SPINE when there are\n"
           "two TORs or more), runs N leader processes, each on its own 127.x address, that\n"
           "allreduce through it, checks every element against a locally computed\n"
           "reference, and prints latency percentiles and throughput. Exit status 0 when\n"
           "every result is exact and identical on all leaders, 1 otherwise.\n"
           "\n"
           "  --leaders N     leader processes (default 8, at most 1024)\n"
           "  --tors T        TOR switches (default 1)\n"
           "  --spines S      SPINE switches (default 1 when T >= 2, else 0)\n"
           "  --count C       elements per allreduce (default 1024)\n"
           "  --type T        int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64\n"
           "  --op OP         sum prod min max land lor lxor band bor bxor (default sum)\n"
           "  --iters I       timed allreduces per leader (default 100)\n"
           "  --warmup W      untimed allreduces first (default 5)\n"
           "  --drop-rate P   each switch drops sent packets with probability P\n"
           "  --dup-rate P    each switch duplicates sent packets with probability P\n"
           "  --delay-us D    each switch delays sent packets by D microseconds\n"
           "  --window N      slots per group (default 32)\n"
           "  --max-data B    data bytes per packet, multiple of 8 (default 1024)\n"
           "  --port N        UDP port of the fabric (default 4791)\n"
           "  --first-host K  each TOR's leaders on its hosts from the K-th on (default 0):\n"
           "                  another job beside one on the first hosts\n"
           "  --net N         use addresses 127.N.x.y, 127.N+1.0.t, 127.N+2.0.s (default 10)\n"
           "  --deadline-ms M bound on each join/allreduce/leave (default 10000)\n"
           "  --rto-us U      retransmission timeout until round trips are measured (default 5000)\n"
           "  --seed N        data and token seed (default 1)\n"
           "  --connect FILE  use the running switches of this topology file\n"
           "  --topo NET      use the switches of this namespace topology (offpath topo\n"
           "                  up): a leader in each host's namespace, its TORs (--tors)\n"
           "  --pcap FILE     write every RoCEv2 packet the switches receive and send to\n"
           "                  FILE, one Ethernet/IPv4/UDP frame each (pcap, ns timestamps;\n"
           "                  a packet between two switches is in it twice: sent, received)\n"
           "  --json          print the report as one JSON object\n"
           "  --quiet         no progress lines, switches silent\n");
}

enum { O_LEADERS = 256, O_TORS, O_SPINES, O_COUNT, O_TYPE, O_OP, O_ITERS, O_WARMUP, O_DROP,
       O_DUP, O_DELAY, O_WINDOW, O_DATA, O_PORT, O_NET, O_DEADLINE, O_RTO, O_SEED, O_CONNECT, O_TOPO, O_FIRST_HOST,
       O_JSON, O_QUIET, O_PCAP, O_HELP };

static const struct option options[] = {
    {"leaders", 1, 0, O_LEADERS}, {"tors", 1, 0, O_TORS}, {"spines", 1, 0, O_SPINES},
    {"count", 1, 0, O_COUNT}, {"type", 1, 0, O_TYPE}, {"op", 1, 0, O_OP},
    {"iters", 1, 0, O_ITERS}, {"warmup", 1, 0, O_WARMUP}, {"drop-rate", 1, 0, O_DROP},
    {"dup-rate", 1, 0, O_DUP}, {"delay-us", 1, 0, O_DELAY}, {"window", 1, 0, O_WINDOW},
    {"max-data", 1, 0, O_DATA}, {"port", 1, 0, O_PORT}, {"net", 1, 0, O_NET},
    {"deadline-ms", 1, 0, O_DEADLINE}, {"rto-us", 1, 0, O_RTO}, {"seed", 1, 0, O_SEED},
    {"connect", 1, 0, O_CONNECT}, {"topo", 1, 0, O_TOPO}, {"first-host", 1, 0, O_FIRST_HOST}, {"json", 0, 0, O_JSON}, {"quiet", 0, 0, O_QUIET},
    {"pcap", 1, 0, O_PCAP}, {"help", 0, 0, O_HELP}, {0, 0, 0, 0}};

static bool set_number(int opt, const char *val, struct op_inctest_config *c)
{
    uint64_t v;
    switch (opt) {
    case O_LEADERS: if (!cli_u64(tool, "--leaders", val, 1, 1024, &v)) return false; c->leaders = (int)v; return true;
    case O_TORS: if (!cli_u64(tool, "--tors", val, 1, 32, &v)) return false; c->tors = (int)v; return true;
    case O_SPINES: if (!cli_u64(tool, "--spines", val, 0, 8, &v)) return false; c->spines = (int)v; return true;
    case O_COUNT: return cli_u64(tool, "--count", val, 1, 1ull << 28, &c->count);
    case O_ITERS: return cli_u64(tool, "--iters", val, 1, 100000000, &c->iters);
    case O_WARMUP: return cli_u64(tool, "--warmup", val, 0, 1000000, &c->warmup);
    case O_DELAY: if (!cli_u64(tool, "--delay-us", val, 0, 1000000, &v)) return false; c->delay_us = (uint32_t)v; return true;
    case O_WINDOW: if (!cli_u64(tool, "--window", val, 1, 4096, &v)) return false; c->window = (uint16_t)v; return true;
    case O_DATA:
        if (!cli_u64(tool, "--max-data", val, 8, OP_INC_MAX_DATA, &v)) return false;
        if (v % 8) { cli_bad(tool, "invalid value '%s' for --max-data (not a multiple of 8)", val); return false; }
        c->max_data = (uint16_t)v; return true;
    case O_PORT: if (!cli_u64(tool, "--port", val, 1, 65535, &v)) return false; c->port = (uint16_t)v; return true;
    case O_NET: if (!cli_u64(tool, "--net", val, 1, 250, &v)) return false; c->net = (uint8_t)v; return true;
    case O_FIRST_HOST: if (!cli_u64(tool, "--first-host", val, 0, 65535, &v)) return false; c->first_host = (int)v; return true;
    case O_DEADLINE: return cli_u64(tool, "--deadline-ms", val, 1, 3600000, &c->deadline_ms);
    case O_RTO: return cli_u64(tool, "--rto-us", val, 10, 10000000, &c->rto_us);
    case O_SEED: return cli_u64(tool, "--seed", val, 0, UINT64_MAX, &c->seed);
    default: return false;
    }
}

static bool set_flag(int opt, const char *val, struct op_inctest_config *c)
{
    int v;
    switch (opt) {
    case O_TYPE:
        if ((v = op_red_type_parse(val)) < 0) { cli_bad(tool, "invalid value '%s' for --type", val); return false; }
        c->type = (unsigned)v; return true;
    case O_OP:
        if ((v = op_red_op_parse(val)) < 0) { cli_bad(tool, "invalid value '%s' for --op", val); return false; }
        c->op = (unsigned)v; return true;
    case O_DROP: return cli_rate(tool, "--drop-rate", val, &c->drop_rate);
    case O_DUP: return cli_rate(tool, "--dup-rate", val, &c->dup_rate);
    case O_CONNECT: c->connect = val; return true;
    case O_TOPO: c->topo = val; return true;
    case O_JSON: c->json = true; return true;
    case O_QUIET: c->quiet = true; return true;
    default: return set_number(opt, val, c);
    }
}

struct it_flags {
    struct op_inctest_config cfg;
    const char *pcap;
};

static bool set_any(int opt, const char *val, void *flags)
{
    struct it_flags *f = flags;
    if (opt != O_PCAP)
        return set_flag(opt, val, &f->cfg);
    f->pcap = val;
    return true;
}

/* Checks across flags; false once one was reported. */
static bool consistent(const struct it_flags *f)
{
    const struct op_inctest_config *c = &f->cfg;
    if (!op_red_valid(c->op, c->type)) {
        cli_bad(tool, "--op %s is not defined for --type %s", op_red_op_name(c->op),
                op_red_type_name(c->type));
        return false;
    }
    if (c->tors > c->leaders) {
        cli_bad(tool, "--tors %d is more than --leaders %d", c->tors, c->leaders);
        return false;
    }
    if (c->tors > 1 && c->spines == 0) {
        cli_bad(tool, "--spines 0 with --tors %d: TORs need a SPINE to meet", c->tors);
        return false;
    }
    if (f->pcap != NULL && (c->connect != NULL || c->topo != NULL)) {
        cli_bad(tool, "--pcap captures at the switches inc_test starts: with --connect, give "
                      "--pcap to the running switches (offpath switch --pcap)");
        return false;
    }
    return true;
}

int cli_inc_test(int argc, char **argv)
{
    struct it_flags f = {.pcap = NULL};
    op_inctest_config_default(&f.cfg);
    int rc = cli_flags(argc, argv, "", options, O_HELP, help, set_any, &f);
    if (rc >= 0)
        return rc;
    if (optind < argc) {
        cli_bad(tool, "unexpected argument '%s'", argv[optind]);
        return 2;
    }
    f.cfg.udp_batching = cli_udp_batching();
    if (!consistent(&f) || !cli_pcap_open(tool, f.pcap, &f.cfg.pcap))
        return 2;
    rc = op_inctest_run(&f.cfg);
    if (!cli_pcap_close(tool, f.pcap, f.cfg.pcap) && rc == 0)
        rc = 1;
    return rc;
}
