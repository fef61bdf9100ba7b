/* `offpath switch`: flags to a switch configuration, then op_sw_run. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "switch_flags.h"
#include "offpath/switch.h"

static const char *const tool = "switch";

static void help(void)
{
    printf("usage: offpath switch --topology FILE --name NAME [options]\n"
           "       offpath switch --role tor --listen IP --hosts FIRST-LAST [--uplink IP]... [options]\n"
           "       offpath switch --role spine --listen IP --tor IP=FIRST-LAST... [options]\n"
           "       offpath switch --topology NET --name NAME --ports all|IF[=PEER],... [options]\n"
           "\n"
           "A software switch: forwards the INC control plane (query/notify/kill) and\n"
           "aggregates Allreduce chunks from its children, over RoCEv2 on UDP.\n"
           "\n"
           "  --topology FILE      topology file (see README, docs/inc.md); with --name\n"
           "  --name NAME          which switch of the file this process is\n"
           "  --ports LIST         on the path: forward whole frames between these\n"
           "                       interfaces (af_xdp), INC to our address to the engine;\n"
           "                       --topology is then a namespace topology (docs/topo.md)\n"
           "                       giving routes, link rates and queues; all: every link\n"
           "  --dpdk \"EAL ARGS\"    on the path: the ports are DPDK's (a --vdev or -a each:\n"
           "                       a vdev's iface=IF is port IF, else in --ports' order)\n"
           "  --no-shape           on the path: send at the ports' own pace, not the links'\n"
           "  --port-loss IF=P     on the path: drop each frame sent on IF with chance P\n"
           "  --ecn BYTES|off      on the path: mark CE on ECN-capable frames that find\n"
           "                       BYTES queued at a port (default: an eighth of its queue)\n"
           "  --role tor|spine     describe the switch with flags instead of a file\n"
           "  --listen IP          its address (port: --port)\n"
           "  --hosts FIRST-LAST   tor: the hosts under it\n"
           "  --uplink IP          tor: a spine above it (repeatable)\n"
           "  --tor IP=FIRST-LAST  spine: a tor below it and that tor's hosts (repeatable)\n"
           "  --port N             UDP port of the fabric (default 4791)\n"
           "  --max-groups N       groups held at once (default 1024)\n"
           "  --window N           slots per group (default 32)\n"
           "  --max-data BYTES     data bytes per packet, multiple of 8, 8..8192 (default 1024)\n"
           "  --max-children N     contributors per slot (default 4096)\n"
           "  --lease-ms MS        free a group silent this long (default 30000)\n"
           "  --slot-memory-mb MB  memory all groups' slots may use (default 1024)\n"
           "  --drop-rate P        drop each sent packet with probability P (testing)\n"
           "  --dup-rate P         send each packet twice with probability P (testing)\n"
           "  --delay-us D         hold each sent packet D microseconds (testing)\n"
           "  --link-down IP@T+D   drop everything sent to host IP from T ms after start,\n"
           "                       for D ms: a link down for a while (testing); on the\n"
           "                       path IF@T+D takes port IF down, IF@inc:N+D from the\n"
           "                       N-th INC packet port IF receives\n"
           "  --stats-json FILE    write counters as JSON at exit and on SIGUSR1\n"
           "  --pcap FILE          write every RoCEv2 packet received and sent to FILE\n"
           "                       (pcap, ns timestamps, one Ethernet/IPv4/UDP frame each)\n"
           "  --json               print the exit counters as JSON\n"
           "  --busy-poll          never sleep (dedicated core)\n"
           "  --seed N             seed of group tokens and fault injection\n"
           "  --log-level L        10..70 or disable|critical|error|warning|info|debug|trace\n"
           "  --ready-fd FD        write \"ready\" to FD once listening\n"
           "Counters are printed at exit (SIGINT/SIGTERM) and on SIGUSR1.\n");
}


/* --role flags become a small topology text, parsed like a file. */
static bool flags_topology(const struct sw_flags *f, char *text, size_t cap)
{
    size_t off = 0;
    unsigned port = (unsigned)f->port;
    if (f->listen == NULL) {
        cli_bad(tool, "--role wants --listen IP");
        return false;
    }
    if (strcmp(f->role, "tor") == 0) {
        if (f->hosts == NULL) {
            cli_bad(tool, "--role tor wants --hosts FIRST-LAST");
            return false;
        }
        for (int i = 0; i < f->n_up; i++)
            off += (size_t)snprintf(text + off, cap - off, "spine up%d %s port %u\n", i,
                                    f->uplinks[i], port);
        off += (size_t)snprintf(text + off, cap - off, "tor self %s port %u hosts %s", f->listen,
                                port, f->hosts);
        for (int i = 0; i < f->n_up; i++)
            off += (size_t)snprintf(text + off, cap - off, "%sup%d", i ? "," : " spines ", i);
        snprintf(text + off, cap - off, "\n");
        return true;
    }
    if (strcmp(f->role, "spine") == 0) {
        off += (size_t)snprintf(text + off, cap - off, "spine self %s port %u\n", f->listen, port);
        for (int i = 0; i < f->n_tor; i++) {
            char *eq = strchr(f->tors[i], '=');
            if (eq == NULL) {
                cli_bad(tool, "invalid value '%s' for --tor (expected IP=FIRST-LAST)", f->tors[i]);
                return false;
            }
            off += (size_t)snprintf(text + off, cap - off, "tor t%d %.*s port %u hosts %s spines self\n",
                                    i, (int)(eq - f->tors[i]), f->tors[i], port, eq + 1);
        }
        return true;
    }
    cli_bad(tool, "invalid value '%s' for --role (expected tor or spine)", f->role);
    return false;
}

static bool load_topology(const struct sw_flags *f, struct op_topo *topo, int *self)
{
    char err[300], text[8192];
    op_status_t st;
    if (f->topology != NULL) {
        if (f->name == NULL) {
            cli_bad(tool, "--topology wants --name");
            return false;
        }
        st = op_topo_load(f->topology, topo, err, sizeof(err));
    } else if (f->role != NULL) {
        if (!flags_topology(f, text, sizeof(text)))
            return false;
        st = op_topo_parse(text, topo, err, sizeof(err));
    } else {
        cli_bad(tool, "give --topology FILE --name NAME, or --role (see --help)");
        return false;
    }
    if (st != OP_OK) {
        cli_bad(tool, "bad topology: %s", err);
        return false;
    }
    *self = op_topo_find(topo, f->topology ? f->name : "self");
    if (*self < 0) {
        cli_bad(tool, "invalid value '%s' for --name (not in the topology)", f->name);
        return false;
    }
    return true;
}

enum { O_TOPO = 256, O_NAME, O_ROLE, O_LISTEN, O_HOSTS, O_UPLINK, O_TOR, O_PORT, O_GROUPS,
       O_WINDOW, O_DATA, O_CHILDREN, O_LEASE, O_MEM, O_DROP, O_DUP, O_DELAY, O_STATS, O_JSON,
       O_BUSY, O_SEED, O_LOG, O_READY, O_PCAP, O_LINK_DOWN, O_PORTS, O_PORT_LOSS, O_DPDK, O_NO_SHAPE, O_ECN, O_HELP };

static const struct option options[] = {
    {"topology", 1, 0, O_TOPO}, {"name", 1, 0, O_NAME}, {"role", 1, 0, O_ROLE},
    {"listen", 1, 0, O_LISTEN}, {"hosts", 1, 0, O_HOSTS}, {"uplink", 1, 0, O_UPLINK},
    {"tor", 1, 0, O_TOR}, {"port", 1, 0, O_PORT}, {"max-groups", 1, 0, O_GROUPS},
    {"window", 1, 0, O_WINDOW}, {"max-data", 1, 0, O_DATA}, {"max-children", 1, 0, O_CHILDREN},
    {"lease-ms", 1, 0, O_LEASE}, {"slot-memory-mb", 1, 0, O_MEM}, {"drop-rate", 1, 0, O_DROP},
    {"dup-rate", 1, 0, O_DUP}, {"delay-us", 1, 0, O_DELAY}, {"link-down", 1, 0, O_LINK_DOWN}, {"stats-json", 1, 0, O_STATS},
    {"json", 0, 0, O_JSON}, {"busy-poll", 0, 0, O_BUSY}, {"seed", 1, 0, O_SEED},
    {"log-level", 1, 0, O_LOG}, {"ready-fd", 1, 0, O_READY}, {"pcap", 1, 0, O_PCAP},
    {"ports", 1, 0, O_PORTS}, {"port-loss", 1, 0, O_PORT_LOSS}, {"dpdk", 1, 0, O_DPDK},
    {"no-shape", 0, 0, O_NO_SHAPE}, {"ecn", 1, 0, O_ECN}, {"help", 0, 0, O_HELP},
    {0, 0, 0, 0}};

static bool set_u64(int opt, const char *val, struct sw_flags *f, struct op_sw_run_config *rc)
{
    uint64_t v = 0;
    struct op_sw_config *c = &rc->sw;
    switch (opt) {
    case O_PORT: return cli_u64(tool, "--port", val, 1, 65535, &f->port);
    case O_GROUPS: if (!cli_u64(tool, "--max-groups", val, 1, 65535, &v)) return false; c->max_groups = (uint32_t)v; return true;
    case O_WINDOW: if (!cli_u64(tool, "--window", val, 1, 4096, &v)) return false; c->window = (uint16_t)v; return true;
    case O_DATA:
        if (!cli_u64(tool, "--max-data", val, 8, OP_INC_MAX_DATA, &v)) return false;
        if (v % 8) { cli_bad(tool, "invalid value '%s' for --max-data (not a multiple of 8)", val); return false; }
        c->max_data = (uint16_t)v; return true;
    case O_CHILDREN: if (!cli_u64(tool, "--max-children", val, 1, 65535, &v)) return false; c->max_children = (uint16_t)v; return true;
    case O_LEASE: if (!cli_u64(tool, "--lease-ms", val, 1, 86400000, &v)) return false; c->lease_ms = (uint32_t)v; return true;
    case O_MEM: if (!cli_u64(tool, "--slot-memory-mb", val, 1, 1 << 20, &v)) return false; c->slot_memory = v << 20; return true;
    case O_DELAY: if (!cli_u64(tool, "--delay-us", val, 0, 10000000, &v)) return false; rc->delay_us = (uint32_t)v; return true;
    case O_SEED: return cli_u64(tool, "--seed", val, 0, UINT64_MAX, &c->seed);
    case O_READY: if (!cli_u64(tool, "--ready-fd", val, 0, 65535, &v)) return false; rc->ready_fd = (int)v; return true;
    default: return false;
    }
}

static bool set_text(int opt, const char *val, struct sw_flags *f)
{
    switch (opt) {
    case O_TOPO: f->topology = val; return true;
    case O_NAME: f->name = val; return true;
    case O_ROLE: f->role = val; return true;
    case O_LISTEN: f->listen = val; return true;
    case O_HOSTS: f->hosts = val; return true;
    case O_UPLINK:
        if (f->n_up == OP_TOPO_MAX_UPLINKS || strlen(val) >= sizeof(f->uplinks[0])) {
            cli_bad(tool, "invalid value '%s' for --uplink (too long or too many)", val);
            return false;
        }
        strcpy(f->uplinks[f->n_up++], val);
        return true;
    case O_TOR:
        if (f->n_tor == OP_TOPO_MAX_SWITCHES - 1 || strlen(val) >= sizeof(f->tors[0])) {
            cli_bad(tool, "invalid value '%s' for --tor (too long or too many)", val);
            return false;
        }
        strcpy(f->tors[f->n_tor++], val);
        return true;
    default: return false;
    }
}

static bool parse(int argc, char **argv, struct sw_flags *f, struct op_sw_run_config *rc, int *exit_code)
{
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        bool ok = true;
        if (opt == O_HELP) { help(); *exit_code = 0; return false; }
        else if (opt == O_DROP) ok = cli_rate(tool, "--drop-rate", optarg, &rc->drop_rate);
        else if (opt == O_DUP) ok = cli_rate(tool, "--dup-rate", optarg, &rc->dup_rate);
        else if (opt == O_STATS) rc->stats_json = optarg;
        else if (opt == O_PCAP) f->pcap = optarg;
        else if (opt == O_LINK_DOWN) f->link_down = optarg;
        else if (opt == O_PORTS) f->ports = optarg;
        else if (opt == O_DPDK) f->dpdk = optarg;
        else if (opt == O_NO_SHAPE) f->no_shape = true;
        else if (opt == O_ECN) f->ecn = optarg;
        else if (opt == O_PORT_LOSS) {
            ok = f->n_loss < OP_SW_MAX_PORTS && strlen(optarg) < sizeof(f->losses[0]);
            if (ok) strcpy(f->losses[f->n_loss++], optarg);
            else cli_bad(tool, "invalid value '%s' for --port-loss (too long or too many)", optarg);
        }
        else if (opt == O_JSON) f->json = true;
        else if (opt == O_BUSY) rc->busy_poll = true;
        else if (opt == O_LOG) {
            f->log_level = op_log_level_parse(optarg);
            if (f->log_level < 0) { cli_bad(tool, "invalid value '%s' for --log-level", optarg); ok = false; }
        } else if (opt >= O_TOPO && opt <= O_TOR) ok = set_text(opt, optarg, f);
        else if (opt == '?') ok = false;
        else ok = set_u64(opt, optarg, f, rc);
        if (!ok) { *exit_code = 2; return false; }
    }
    if ((f->dpdk != NULL || f->ecn != NULL) && f->ports == NULL) {
        cli_bad(tool, "%s wants --ports", f->dpdk != NULL ? "--dpdk" : "--ecn");
        *exit_code = 2;
        return false;
    }
    if (optind < argc) {
        cli_bad(tool, "unexpected argument '%s'", argv[optind]);
        *exit_code = 2;
        return false;
    }
    return true;
}

int cli_switch(int argc, char **argv)
{
    struct sw_flags f = {.port = OP_ROCE_UDP_PORT, .log_level = OP_LOG_INFO};
    struct op_sw_run_config rc = {.ready_fd = -1, .counters_fd = -1,
                                  .udp_batching = cli_udp_batching()};
    op_sw_config_default(&rc.sw);
    int code = 2;
    if (!parse(argc, argv, &f, &rc, &code))
        return code;
    struct op_topo *topo = calloc(1, sizeof(*topo));
    struct op_sw_path_config *path = calloc(1, sizeof(*path));
    bool loaded = topo != NULL && path != NULL &&
                  (f.ports != NULL ? switch_load_path(&f, &rc, topo, path)
                                   : load_topology(&f, topo, &rc.sw.self) &&
                                         (f.link_down == NULL || switch_link_down(f.link_down, &rc, NULL)));
    if (!loaded || !switch_dpdk_open(&f, path)) {
        switch_dpdk_close(&f);
        free(topo);
        free(path);
        return 2;
    }
    if (!cli_pcap_open(tool, f.pcap, &rc.pcap)) {
        switch_dpdk_close(&f);
        free(topo);
        free(path);
        return 2;
    }
    struct op_log log;
    op_log_init(&log, "switch", f.log_level);
    rc.sw.topo = topo;
    rc.sw.log = &log;
    rc.json_exit = f.json;
    op_status_t st = op_sw_run(&rc);
    switch_dpdk_close(&f); /* the path closed the ports' queues */
    free(topo);
    free(path);
    bool captured = cli_pcap_close(tool, f.pcap, rc.pcap);
    if (st != OP_OK) {
        cli_bad(tool, "cannot run: %s", op_status_str(st));
        return 1;
    }
    return captured ? 0 : 1;
}
