/* `offpath mpirun`: flags to a launch configuration. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "offpath/launch.h"
#include "offpath/wire/inc.h"

static const char *const tool = "mpirun";

static void help(void)
{
    printf("usage: offpath mpirun [options] -- command [args]\n"
           "\n"
           "Runs an unmodified MPI program on an emulated cluster: N nodes of P ranks\n"
           "under T TORs (and a SPINE when T >= 2), software switches on loopback, the\n"
           "program under mpirun with liboffpath_mpi preloaded, so its MPI_Allreduce\n"
           "calls go through the switches. Exit status: the program's.\n"
           "\n"
           "  --nodes N         emulated nodes (default 2)\n"
           "  --ppn P           ranks per node (default 1)\n"
           "  --sockets S       sockets per node (default 1)\n"
           "  --tors T          TOR switches (default 1)\n"
           "  --spines S        SPINE switches (default 1 when T >= 2)\n"
           "  --mode M          node (a leader per node), socket (a leader per socket),\n"
           "                    host (node's leaders allreduce host to host over UDP\n"
           "                    with offpath's own algorithm: no switches),\n"
           "                    off (no switches, no library: the MPI's own allreduce)\n"
           "  --mpi M           openmpi (default) or mpich\n"
           "  --tcp             Open MPI over TCP between all ranks (--mca btl tcp,self):\n"
           "                    the network baseline a cluster sees\n"
           "  --drop-rate P     switches (host mode: leaders) drop each sent packet with\n"
           "                    probability P\n"
           "  --dup-rate P      switches (host mode: leaders) duplicate each sent packet\n"
           "                    with probability P\n"
           "  --fault-switch S  only switch S (its name: t0.., s0.., or --topo's) drops and\n"
           "                    duplicates; the others pass all (default: every switch)\n"
           "  --deadline-ms M   bound on each switch operation before falling back (5000)\n"
           "  --max-data B      switches' data bytes per packet, multiple of 8 (8192; with\n"
           "                    --topo the largest the links' MTU carries)\n"
           "  --window N        switches' slots per group (32)\n"
           "  --net N           addresses 127.N.x.y (ranks), 127.N+1.0.t, 127.N+2.0.s (60)\n"
           "  --port N          UDP port of the fabric (4791)\n"
           "  --connect FILE    use the running switches of this topology file\n"
           "  --topo FILE       run on a namespace topology (docs/topo.md), brought up\n"
           "                    for the job unless it is up: node i is host i of the\n"
           "                    file (--nodes: all hosts by default), its ranks run in\n"
           "                    the host's namespace with its one address, the switches\n"
           "                    in their TORs' and SPINEs' namespaces, and MPI's own\n"
           "                    traffic goes over TCP across the same links\n"
           "  --lib PATH        the liboffpath_mpi to preload\n"
           "  --verbose         per-job summary of offloaded and fallen-back calls\n"
           "\n"
           "OFFPATH_MODE, OFFPATH_MPI, OFFPATH_PPN, OFFPATH_SOCKETS, OFFPATH_NET, OFFPATH_PORT,\n"
           "OFFPATH_DROP_RATE, OFFPATH_DUP_RATE, OFFPATH_DEADLINE_MS and OFFPATH_VERBOSE (a\n"
           "level) set in the environment are the defaults of the matching flags; the\n"
           "ranks see the value in effect. Other OFFPATH_* variables reach the ranks as set.\n");
}

enum { O_NODES = 256, O_PPN, O_SOCKETS, O_TORS, O_SPINES, O_MODE, O_MPI, O_TCP, O_DROP, O_DUP,
       O_DEADLINE, O_NET, O_PORT, O_CONNECT, O_LIB, O_VERBOSE, O_DATA, O_WINDOW, O_TOPO,
       O_FAULT_SWITCH, O_HELP };

static const struct option options[] = {
    {"nodes", 1, 0, O_NODES}, {"ppn", 1, 0, O_PPN}, {"sockets", 1, 0, O_SOCKETS},
    {"tors", 1, 0, O_TORS}, {"spines", 1, 0, O_SPINES}, {"mode", 1, 0, O_MODE},
    {"mpi", 1, 0, O_MPI}, {"tcp", 0, 0, O_TCP}, {"drop-rate", 1, 0, O_DROP},
    {"dup-rate", 1, 0, O_DUP}, {"deadline-ms", 1, 0, O_DEADLINE}, {"net", 1, 0, O_NET},
    {"port", 1, 0, O_PORT}, {"connect", 1, 0, O_CONNECT}, {"lib", 1, 0, O_LIB},
    {"verbose", 0, 0, O_VERBOSE}, {"max-data", 1, 0, O_DATA}, {"window", 1, 0, O_WINDOW},
    {"topo", 1, 0, O_TOPO}, {"fault-switch", 1, 0, O_FAULT_SWITCH},
    {"help", 0, 0, O_HELP}, {0, 0, 0, 0}};

static bool set_int(const char *flag, const char *val, uint64_t min, uint64_t max, int *out)
{
    uint64_t v;
    if (!cli_u64(tool, flag, val, min, max, &v))
        return false;
    *out = (int)v;
    return true;
}

static bool set_choice(const char *flag, const char *val, const char *const *names, int n,
                       int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(val, names[i]) == 0) {
            *out = i;
            return true;
        }
    cli_bad(tool, "invalid value '%s' for %s", val, flag);
    return false;
}

static bool set(int opt, const char *val, struct op_launch_config *c)
{
    static const char *const mpis[] = {"openmpi", "mpich"};
    int v = 0;
    uint64_t u = 0;
    switch (opt) {
    case O_NODES: return set_int("--nodes", val, 1, 254, &c->nodes);
    case O_PPN: return set_int("--ppn", val, 1, 254, &c->ppn);
    case O_SOCKETS: return set_int("--sockets", val, 1, 16, &c->sockets);
    case O_TORS: return set_int("--tors", val, 1, 32, &c->tors);
    case O_SPINES: return set_int("--spines", val, 0, 8, &c->spines);
    case O_MODE:
        if (op_mode_parse(val, false, &c->mode)) return true;
        cli_bad(tool, "invalid value '%s' for --mode", val); return false;
    case O_MPI:
        if (!set_choice("--mpi", val, mpis, 2, &v)) return false;
        c->mpi = (enum op_launch_mpi)v; return true;
    case O_TCP: c->tcp = true; return true;
    case O_DROP: return cli_rate(tool, "--drop-rate", val, &c->drop_rate);
    case O_DUP: return cli_rate(tool, "--dup-rate", val, &c->dup_rate);
    case O_DEADLINE: return cli_u64(tool, "--deadline-ms", val, 1, 3600000, &c->deadline_ms);
    case O_NET:
        if (!cli_u64(tool, "--net", val, 1, 250, &u)) return false;
        c->net = (uint8_t)u; return true;
    case O_PORT:
        if (!cli_u64(tool, "--port", val, 1, 65535, &u)) return false;
        c->port = (uint16_t)u; return true;
    case O_CONNECT: c->connect = val; return true;
    case O_TOPO: c->topo = val; return true;
    case O_FAULT_SWITCH: c->fault_switch = val; return true;
    case O_LIB: c->lib = val; return true;
    case O_VERBOSE: c->verbose++; return true;
    case O_DATA:
        if (!cli_u64(tool, "--max-data", val, 8, OP_INC_MAX_DATA, &u) || u % 8) {
            if (u % 8)
                cli_bad(tool, "invalid value '%s' for --max-data (not a multiple of 8)", val);
            return false;
        }
        c->max_data = (uint16_t)u; return true;
    case O_WINDOW:
        if (!cli_u64(tool, "--window", val, 1, 4096, &u)) return false;
        c->window = (uint16_t)u; return true;
    default: return false;
    }
}

/* The file lays the nodes out: the loopback layout's flags have no say. */
static bool check_topo(const struct op_launch_config *c, const struct op_launch_config *dflt)
{
    const char *clash = c->tors != dflt->tors       ? "--tors"
                        : c->spines != dflt->spines ? "--spines"
                        : c->connect != NULL        ? "--connect"
                                                    : NULL;
    if (clash != NULL)
        cli_bad(tool, "%s does not go with --topo (the file lays out the nodes)", clash);
    return clash == NULL;
}

static bool check(const struct op_launch_config *c)
{
    if (c->topo != NULL)
        return c->sockets <= c->ppn || (cli_bad(tool, "--sockets %d is more than --ppn %d",
                                                c->sockets, c->ppn), false);
    if (c->tors > c->nodes) {
        cli_bad(tool, "--tors %d is more than --nodes %d", c->tors, c->nodes);
        return false;
    }
    if (c->tors > 1 && c->spines == 0) {
        cli_bad(tool, "--spines 0 with --tors %d: TORs need a SPINE to meet", c->tors);
        return false;
    }
    if (c->sockets > c->ppn) {
        cli_bad(tool, "--sockets %d is more than --ppn %d", c->sockets, c->ppn);
        return false;
    }
    if (c->tcp && c->mpi != OP_LAUNCH_OPENMPI) {
        cli_bad(tool, "--tcp is for --mpi openmpi");
        return false;
    }
    return true;
}

static bool set_any(int opt, const char *val, void *cfg) { return set(opt, val, cfg); }

/* The variables liboffpath_mpi reads that mpirun also has a flag for. A value
 * the user exported is the flag's default, so the launcher forwards it rather
 * than its own; the flag, when given, wins. OFFPATH_TOPOLOGY and OFFPATH_JOB
 * describe the switches this launcher starts and stay its own. */
static const struct {
    const char *var;
    int opt;
} env_flags[] = {
    {"OFFPATH_MODE", O_MODE},       {"OFFPATH_MPI", O_MPI},
    {"OFFPATH_PPN", O_PPN},         {"OFFPATH_SOCKETS", O_SOCKETS},
    {"OFFPATH_NET", O_NET},         {"OFFPATH_PORT", O_PORT},
    {"OFFPATH_DROP_RATE", O_DROP},  {"OFFPATH_DUP_RATE", O_DUP},
    {"OFFPATH_DEADLINE_MS", O_DEADLINE}, {"OFFPATH_VERBOSE", O_VERBOSE},
};

/* OFFPATH_VERBOSE goes to *verbose: --verbose counts from zero, and any
 * count of it replaces the variable's level. */
static bool env_defaults(struct op_launch_config *c, int *verbose)
{
    for (size_t i = 0; i < sizeof(env_flags) / sizeof(env_flags[0]); i++) {
        const char *v = getenv(env_flags[i].var);
        if (v == NULL || *v == '\0')
            continue;
        bool ok;
        if (env_flags[i].opt == O_VERBOSE) { /* a level here, a count as a flag */
            uint64_t level = 0;
            ok = cli_u64(tool, "OFFPATH_VERBOSE", v, 0, 9, &level);
            *verbose = (int)level;
        } else {
            ok = set(env_flags[i].opt, v, c);
        }
        if (!ok) {
            cli_bad(tool, "the value comes from the environment: %s=%s", env_flags[i].var, v);
            return false;
        }
    }
    /* the ranks check it (src/mpi/env.c); the launcher only carries it */
    c->spin_us = getenv("OFFPATH_SPIN_US");
    return true;
}

int cli_mpirun(int argc, char **argv)
{
    struct op_launch_config cfg;
    op_launch_config_default(&cfg);
    int env_verbose = 0;
    if (!env_defaults(&cfg, &env_verbose))
        return 2;
    cfg.nodes = 0; /* until --nodes: --topo's default is every host of its file */
    /* "+": flags end at the MPI command, whose own flags are its business */
    int rc = cli_flags(argc, argv, "+", options, O_HELP, help, set_any, &cfg);
    if (rc >= 0)
        return rc;
    if (optind >= argc) {
        cli_bad(tool, "no MPI command given (offpath mpirun [options] -- command args)");
        return 2;
    }
    if (cfg.verbose == 0)
        cfg.verbose = env_verbose;
    struct op_launch_config dflt;
    op_launch_config_default(&dflt);
    if (cfg.nodes == 0 && cfg.topo == NULL)
        cfg.nodes = dflt.nodes;
    if ((cfg.topo != NULL && !check_topo(&cfg, &dflt)) || !check(&cfg) ||
        (cfg.self_exe = cli_self_exe(tool)) == NULL)
        return 2;
    cfg.udp_batching = cli_udp_batching();
    cfg.argv = argv + optind;
    cfg.argc = argc - optind;
    return op_launch_run(&cfg);
}
