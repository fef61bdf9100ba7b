/* `offpath dns`: an authoritative DNS server. Flags to a server
 * configuration and zone files, the model started; src/dns's tool then
 * serves until a signal (op_dns_tool_serve). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "offpath/dns.h"

static const char *const tool = "dns";
#define MAX_ZONES 256

static void help(void)
{
    printf("usage: offpath dns --zone FILE [--zone FILE]... [options]\n"
           "\n"
           "An authoritative DNS server for the zones in RFC 1035 master files\n"
           "(pre-signed DNSSEC zones answered with RRSIG and NSEC or NSEC3 when DO is set).\n"
           "\n"
           "  --zone FILE           a zone file (repeatable); its origin is its first\n"
           "                        $ORIGIN, else the owner of its first record\n"
           "  --listen ADDR:PORT    UDP and TCP address (default 127.0.0.1:53); IPv6 as\n"
           "                        [ADDR6]:PORT (socket: [::] takes IPv4 too; rtc and\n"
           "                        pipeline: twice, an IPv4 and an IPv6 address on one\n"
           "                        port, serve both)\n"
           "  --model M             socket (default): UDP recvmmsg/sendmmsg threads with\n"
           "                        SO_REUSEPORT and TCP per RFC 7766 through the kernel;\n"
           "                        rtc: DPDK, one worker lcore per RX/TX queue (RSS);\n"
           "                        pipeline: DPDK, an RX/TX lcore and worker lcores joined\n"
           "                        by rte_rings. The DPDK models take EAL arguments after\n"
           "                        --, e.g. -- --no-huge -m 512 --no-pci -l 0,1\n"
           "                        --vdev=net_af_xdp0,iface=veth0; they answer ARP, IPv6\n"
           "                        neighbour solicitations and ICMP echo for --listen's\n"
           "                        addresses; TCP goes through the\n"
           "                        kernel (when it has the address too; an AF_XDP vdev\n"
           "                        gets an XDP program passing TCP to it);\n"
           "                        xdp: one thread on offpath's own AF_XDP socket on\n"
           "                        queue 0 of --xdp-if, no DPDK (ARP, ICMP and TCP go to\n"
           "                        the kernel, which must have the address)\n"
           "  --xdp-if IF           xdp: the interface\n"
           "  --xdp-frames N        xdp: UMEM frames for RX, all given to the kernel's fill\n"
           "                        ring, a power of 2, 64..1048576 (default 16384)\n"
           "  --mbufs N             DPDK: mbuf pool size (default 65535)\n"
           "  --ring-size N         pipeline: ring size, a power of 2 (default 4096)\n"
           "  --rx-desc N, --tx-desc N  DPDK: descriptors per queue (default 2048, 1024)\n"
           "  --tx-retries N        DPDK: tries after a partial TX burst (default 16)\n"
           "  --tx-backoff-us US    DPDK: longest pause between them (default 100)\n"
           "  --idle-sleep-us US    DPDK, xdp: longest sleep of an idle lcore (default 1000)\n"
           "  --idle-after-us US    DPDK, xdp: how long a worker polls an empty queue before it\n"
           "                        sleeps, 0..1000000 (default 1000)\n"
           "  --rt-yield-us US, --rt-yield-every-us US  DPDK, xdp: under a real-time policy\n"
           "                        (started by chrt -f N) no ordinary task preempts a\n"
           "                        worker, so it sleeps US every US', busy or not, for the\n"
           "                        kernel's real-time throttle and per-CPU threads\n"
           "                        (default: the throttle's share + 3%% of 10000 us)\n"
           "  --threads N           UDP threads (default 1)\n"
           "  --burst N             datagrams per burst, 1..1024 (a recvmmsg reads 64 at\n"
           "                        most), DPDK up to 512 (default 64)\n"
           "  --udp-max-payload N   largest UDP answer with EDNS, 512..4096 (default 1232)\n"
           "  --tcp-max N           TCP connections at once (default 64)\n"
           "  --tcp-idle-ms MS      close a silent TCP connection after MS (default 10000)\n"
           "  --allow-transfer NET  clients in NET (ADDR[/PREFIX], IPv4 or IPv6; repeatable,\n"
           "                        16 at most) may transfer zones (AXFR; IXFR gets the\n"
           "                        whole zone) over TCP; nobody by default\n"
           "  --nsid TEXT           this server's identity, sent to clients whose EDNS asks\n"
           "                        for it (NSID, RFC 5001; dig +nsid), 1..128 octets\n"
           "  --notify ADDR:PORT    a secondary sent NOTIFY over UDP for every zone at start\n"
           "                        and for each zone whose SOA serial a reload (SIGHUP)\n"
           "                        changed ([ADDR6]:PORT too; repeatable, 16 at most)\n"
           "  --rrl-rate N          response rate limiting: UDP answers a second to one client\n"
           "                        network (IPv4 /24, IPv6 /56) of one kind (a name and\n"
           "                        type answered, or an error rcode), per worker thread;\n"
           "                        past it they are dropped (0: no limit, the default)\n"
           "  --rrl-slip N          every Nth limited answer goes out truncated instead, so\n"
           "                        a real client asks again over TCP (default 2; 0: none)\n"
           "  --check               load the zones, print what was loaded, exit\n"
           "  --json                print the exit counters as JSON on stdout\n"
           "  --stats-json FILE     rewrite FILE with the counters as JSON every second\n"
           "  --log-level L         10..70 or disable|critical|error|warning|info|debug|trace;\n"
           "                        at info the counters are logged every second\n"
           "SIGHUP reloads every zone (a zone that fails keeps the old set serving);\n"
           "SIGINT/SIGTERM stop; the counters balance: received = sent + every drop.\n");
}

struct dns_flags {
    const char *zones[MAX_ZONES];
    const char *model;
    struct op_dns_dpdk_config dc;
    struct op_dns_xdp_config xc;
    size_t nzones;
    const char *stats_json;
    bool check, json;
    int log_level;
    struct op_dns_server_config cfg;
    unsigned listens; /* --listen given: a second one makes the DPDK models dual-stack */
};

enum { O_ZONE = 256, O_LISTEN, O_XFR_ACL, O_NOTIFY, O_NSID, O_RRL_RATE, O_RRL_SLIP, O_MODEL, O_THREADS, O_BURST, O_UDPMAX, O_TCPMAX, O_TCPIDLE,
       O_CHECK, O_JSON, O_STATS, O_LOG, O_MBUFS, O_RING, O_RXD, O_TXD, O_TXR, O_TXB, O_IDLE, O_IDLE_AFTER,
       O_RT_YIELD, O_RT_EVERY, O_XDP_IF, O_XDP_FRAMES,
       O_HELP };

static const struct option options[] = {
    {"zone", 1, 0, O_ZONE},          {"listen", 1, 0, O_LISTEN},
    {"allow-transfer", 1, 0, O_XFR_ACL}, {"notify", 1, 0, O_NOTIFY},
    {"nsid", 1, 0, O_NSID},
    {"rrl-rate", 1, 0, O_RRL_RATE},  {"rrl-slip", 1, 0, O_RRL_SLIP},
    {"model", 1, 0, O_MODEL},        {"threads", 1, 0, O_THREADS},
    {"burst", 1, 0, O_BURST},        {"udp-max-payload", 1, 0, O_UDPMAX},
    {"tcp-max", 1, 0, O_TCPMAX},     {"tcp-idle-ms", 1, 0, O_TCPIDLE},
    {"check", 0, 0, O_CHECK},        {"json", 0, 0, O_JSON},
    {"stats-json", 1, 0, O_STATS},   {"log-level", 1, 0, O_LOG},
    {"mbufs", 1, 0, O_MBUFS},        {"ring-size", 1, 0, O_RING},
    {"rx-desc", 1, 0, O_RXD},        {"tx-desc", 1, 0, O_TXD},
    {"tx-retries", 1, 0, O_TXR},     {"tx-backoff-us", 1, 0, O_TXB},
    {"idle-sleep-us", 1, 0, O_IDLE},
    {"idle-after-us", 1, 0, O_IDLE_AFTER},
    {"rt-yield-us", 1, 0, O_RT_YIELD},
    {"rt-yield-every-us", 1, 0, O_RT_EVERY},
    {"xdp-if", 1, 0, O_XDP_IF},
    {"xdp-frames", 1, 0, O_XDP_FRAMES},
    {"help", 0, 0, O_HELP},          {0, 0, 0, 0}};

#define NUM(opt, flag, field, min, max) CLI_NUM(opt, flag, struct dns_flags, field, min, max, false)
static const struct cli_num numeric[] = {
    NUM(O_THREADS, "--threads", cfg.udp_threads, 1, 64),
    NUM(O_BURST, "--burst", cfg.burst, 1, 1024),
    NUM(O_UDPMAX, "--udp-max-payload", cfg.udp_max, 512, 4096),
    NUM(O_RRL_RATE, "--rrl-rate", cfg.rrl_rate, 0, 1000000),
    NUM(O_RRL_SLIP, "--rrl-slip", cfg.rrl_slip, 0, 100),
    NUM(O_TCPMAX, "--tcp-max", cfg.tcp_max, 1, 4096),
    NUM(O_TCPIDLE, "--tcp-idle-ms", cfg.tcp_idle_ms, 1, 3600000),
    CLI_NUM(O_XDP_FRAMES, "--xdp-frames", struct dns_flags, xc.rx_frames, 64, 1u << 20, true),
    NUM(O_MBUFS, "--mbufs", dc.mbufs, 1024, 1u << 24),
    CLI_NUM(O_RING, "--ring-size", struct dns_flags, dc.ring_size, 64, 1u << 20, true),
    NUM(O_RXD, "--rx-desc", dc.rx_desc, 64, 32768),
    NUM(O_TXD, "--tx-desc", dc.tx_desc, 64, 32768),
    NUM(O_TXR, "--tx-retries", dc.tx_retries, 0, 1000),
    NUM(O_TXB, "--tx-backoff-us", dc.tx_backoff_us, 1, 100000),
    NUM(O_IDLE, "--idle-sleep-us", dc.poll.idle_sleep_us, 1, 100000),
    NUM(O_IDLE_AFTER, "--idle-after-us", dc.poll.idle_after_us, 0, 1000000),
    NUM(O_RT_YIELD, "--rt-yield-us", dc.poll.rt_yield_us, 0, 1000000),
    NUM(O_RT_EVERY, "--rt-yield-every-us", dc.poll.rt_yield_every_us, 100, 1000000),
};

static bool set(int opt, const char *val, void *arg)
{
    struct dns_flags *f = arg;
    switch (opt) {
    case O_ZONE:
        if (f->nzones == MAX_ZONES) {
            cli_bad(tool, "too many --zone (at most %d)", MAX_ZONES);
            return false;
        }
        f->zones[f->nzones++] = val;
        return true;
    case O_LISTEN: {
        struct op_endpoint t;
        if (!op_endpoint_parse(val, &t)) {
            cli_bad(tool, "invalid value '%s' for --listen (expected ADDR:PORT or [ADDR6]:PORT, "
                          "port 1..65535)", val);
            return false;
        }
        bool v6 = op_addr_is_ipv6(&t.addr);
        if (f->listens == 2 || (f->listens == 1 && (v6 == f->cfg.ipv6 || t.port != f->cfg.port))) {
            cli_bad(tool, "--listen '%s': a second --listen must be the other family on the same "
                          "port (--model rtc|pipeline serve both)", val);
            return false;
        }
        if (!v6)
            f->cfg.addr = t.addr.v4;
        else
            memcpy(f->cfg.addr6, t.addr.v6, 16);
        if (f->listens++ == 0) { /* the first decides the kernel sockets' family */
            f->cfg.port = t.port;
            f->cfg.ipv6 = v6;
        } else {
            f->cfg.dual_stack = true;
        }
        return true;
    }
    case O_NOTIFY:
        if (f->cfg.n_notify == OP_DNS_NOTIFY_MAX) {
            cli_bad(tool, "too many --notify (at most %d)", OP_DNS_NOTIFY_MAX);
            return false;
        }
        if (!op_endpoint_parse(val, &f->cfg.notify[f->cfg.n_notify])) {
            cli_bad(tool, "invalid value '%s' for --notify (expected ADDR:PORT or [ADDR6]:PORT, "
                          "port 1..65535)", val);
            return false;
        }
        f->cfg.n_notify++;
        return true;
    case O_NSID: {
        size_t n = strlen(val);
        if (n < 1 || n > OP_DNS_NSID_MAX) {
            cli_bad(tool, "invalid value for --nsid (1..%d octets)", OP_DNS_NSID_MAX);
            return false;
        }
        memcpy(f->cfg.nsid, val, n);
        f->cfg.nsid_len = (uint16_t)n;
        return true;
    }
    case O_XFR_ACL:
        if (f->cfg.n_xfr_acl == OP_DNS_ACL_MAX) {
            cli_bad(tool, "too many --allow-transfer (at most %d)", OP_DNS_ACL_MAX);
            return false;
        }
        if (op_dns_acl_parse(val, &f->cfg.xfr_acl[f->cfg.n_xfr_acl]) != OP_OK) {
            cli_bad(tool, "invalid value '%s' for --allow-transfer (expected ADDR[/PREFIX], "
                          "IPv4 or IPv6)", val);
            return false;
        }
        f->cfg.n_xfr_acl++;
        return true;
    case O_MODEL:
        if (strcmp(val, "socket") != 0 && strcmp(val, "rtc") != 0 &&
            strcmp(val, "pipeline") != 0 && strcmp(val, "xdp") != 0) {
            cli_bad(tool, "invalid value '%s' for --model (expected socket, rtc, pipeline or xdp)",
                    val);
            return false;
        }
#ifndef OP_HAVE_DPDK
        if (strcmp(val, "socket") != 0 && strcmp(val, "xdp") != 0) {
            cli_bad(tool, "--model %s: this build has no DPDK (install libdpdk-dev, rebuild)", val);
            return false;
        }
#endif
        f->model = val;
        return true;
    case O_XDP_IF: f->xc.ifname = val; return true;
    case O_CHECK: f->check = true; return true;
    case O_JSON: f->json = true; return true;
    case O_STATS: f->stats_json = val; return true;
    case O_LOG:
        f->log_level = op_log_level_parse(val);
        if (f->log_level < 0) {
            cli_bad(tool, "invalid value '%s' for --log-level", val);
            return false;
        }
        return true;
    default: {
        bool known;
        return cli_num_set(tool, numeric, sizeof numeric / sizeof numeric[0], opt, val, f, &known) &&
               known;
    }
    }
}

/* The socket model, or a DPDK one with the EAL arguments after "--"
 * (getopt leaves them from optind; EAL wants a program name first). */
static bool start(struct dns_flags *f, int nrest, char **rest, struct op_dns_zones *z,
                  struct op_dns_server **s)
{
    if (strcmp(f->model, "socket") == 0) {
        op_status_t st = op_dns_server_start(&f->cfg, z, s);
        if (st != OP_OK)
            cli_bad(tool, "cannot serve on --listen: %s", op_status_str(st));
        return st == OP_OK;
    }
    if (strcmp(f->model, "xdp") == 0) {
        f->xc.poll = f->dc.poll;
        op_status_t st = op_dns_xdp_start(&f->cfg, &f->xc, z, s);
        if (st != OP_OK)
            cli_bad(tool, "--model xdp on %s: %s", f->xc.ifname, op_status_str(st));
        return st == OP_OK;
    }
#ifdef OP_HAVE_DPDK
    f->dc.n_eal_args = nrest;
    f->dc.eal_args = rest;
    f->dc.pipeline = strcmp(f->model, "pipeline") == 0;
    char xdp[4096];
    f->dc.xdp_prog = cli_dns_xdp_prog(cli_self_exe(tool), xdp, sizeof(xdp));
    char err[256];
    op_status_t st = op_dns_dpdk_start(&f->cfg, &f->dc, z, s, err, sizeof(err));
    if (st != OP_OK)
        cli_bad(tool, "--model %s: %s", f->model, err);
    return st == OP_OK;
#else
    (void)nrest;
    (void)rest;
    (void)z;
    (void)s;
    return false;
#endif
}

int cli_dns(int argc, char **argv)
{
    struct dns_flags f = {.log_level = OP_LOG_WARNING, .model = "socket"};
    op_dns_server_config_default(&f.cfg);
    op_dns_xdp_config_default(&f.xc);
    f.dc.poll = f.xc.poll;
#ifdef OP_HAVE_DPDK
    op_dns_dpdk_config_default(&f.dc);
#endif
    int r = cli_flags(argc, argv, "h", options, O_HELP, help, set, &f);
    if (r >= 0)
        return r;
    bool dpdk = strcmp(f.model, "socket") != 0 && strcmp(f.model, "xdp") != 0;
    if (optind < argc && !dpdk) {
        cli_bad(tool, "unexpected argument '%s' (EAL arguments go with --model rtc|pipeline)",
                argv[optind]);
        return 2;
    }
    if (f.nzones == 0) {
        cli_bad(tool, "give at least one --zone FILE (see --help)");
        return 2;
    }
    if (f.cfg.dual_stack && !dpdk) {
        cli_bad(tool, "--listen twice: --model %s serves one address ([::] takes both families "
                      "on --model socket)", f.model);
        return 2;
    }
    if (strcmp(f.model, "xdp") == 0 && f.xc.ifname == NULL) {
        cli_bad(tool, "--model xdp needs --xdp-if IF");
        return 2;
    }
    struct op_log log;
    op_log_init(&log, "dns", f.log_level);
    f.cfg.log = &log;
    const struct op_dns_tool_config run = {.zones = f.zones, .nzones = f.nzones, .log = &log,
                                           .stats_json = f.stats_json, .json = f.json};
    struct op_dns_zones *z = op_dns_tool_load(&run);
    if (z == NULL)
        return 1;
    if (f.check) {
        printf("offpath dns: %zu zones, %zu records\n", op_dns_zones_count(z),
               op_dns_zones_records(z));
        op_dns_zones_free(z);
        return 0;
    }
    op_dns_tool_block_signals();
    struct op_dns_server *s;
    if (!start(&f, argc - optind, argv + optind, z, &s)) {
        op_dns_zones_free(z);
        return 1;
    }
    fprintf(stderr, "offpath dns: serving %zu zones (%zu records) on port %u, model %s\n",
            op_dns_zones_count(z), op_dns_zones_records(z), f.cfg.port, f.model);
    return op_dns_tool_serve(s, &run, z);
}
