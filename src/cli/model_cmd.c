/* `offpath model`: the scale model on SimGrid. Subcommands simulate, project,
 * seed, calibrate, validate; flags into struct op_model_cfg, then the
 * module's run function. */
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "offpath/model.h"

/* Not found: the installed place, so the error on opening it names the file. */
static void data_file(const char *self, const char *name, char *out, size_t len)
{
    if (!cli_data_path(self, name, out, len))
        snprintf(out, len, "%s/%s", OP_REL_DATADIR, name);
}

static void help(void)
{
    printf("usage: offpath model <simulate|project|seed|calibrate|validate|platform> [flags]\n\n"
           "The in-network Allreduce (Node and Socket modes) against the host's\n"
           "(the MPIs' algorithms) on a simulated cluster (SimGrid: S4U actors for\n"
           "the leaders, switches and nodes).\n\n"
           "  simulate   one cluster, one size: the latency of each mode\n"
           "  platform   the SimGrid platform file of --nodes nodes (for smpirun)\n"
           "  project    latency and speedup for 4..--nodes nodes and 4 B..64 MiB\n"
           "             (a table, --json, --plot PNG), slots each size needs\n"
           "  seed       the seed paper's tables 4-6 against the model (exit 1 when\n"
           "             the ordering agrees in < 90%% of cells or a latency is off\n"
           "             by > 30%%)\n"
           "  calibrate  measure this machine (inc_test, ib_send_lat, osu_allreduce\n"
           "             under mpirun) and fit the 'here' platform; --out FILE writes it\n"
           "  validate   predict inc_test and the host path (mpirun --mode host) at\n"
           "             --nodes leaders and compare (exit 1 when any size is off by\n"
           "             > --tolerance)\n\n"
           "  --nodes N          nodes (simulate, validate: exactly; project: up to)\n"
           "  --ppn P            ranks per node (default 8)\n"
           "  --bytes B          simulate: message size (K, M, G suffixes)\n"
           "  --min-bytes B      smallest size (default 4)\n"
           "  --max-bytes B      largest size (project: 64M; validate: 1M)\n"
           "  --mode M           simulate: host, node or socket (default all)\n"
           "  --alg A            host algorithm: ompi (default; seed: ompi-classic),\n"
           "                     mpich, rd, ring, rabenseifner, hier, offpath\n"
           "                     (src/hostar's rule), ompi-classic (Open MPI <= 4.0)\n"
           "  --link P           platform preset: %s (default 100G;\n"
           "                     seed: seed; validate: calibrated here)\n"
           "  --platform FILE    platform file (key value lines, `calibrate --out`)\n"
           "  --loss R           INC packet loss probability per hop (0..0.5)\n"
           "  --seed N           loss draws\n"
           "  --plot FILE        project: write a PNG plot\n"
           "  --tables FILE      seed: the tables (default data/seed_tables.csv)\n"
           "  --tolerance X      validate: largest relative error (default 0.25)\n"
           "  --iters N          calibrate/validate: allreduces a measurement (200)\n"
           "  --out FILE         calibrate: platform file to write; validate: the run's\n"
           "                     measurements (what --replay reads)\n"
           "  --replay FILE      validate: fit and predict a recorded run's measurements\n"
           "                     instead of measuring (deterministic)\n"
           "  --net N, --port P  calibrate/validate: 127.N..N+2 addresses, ports P..P+2\n"
           "  --nice N           calibrate/validate: run the measured processes at this\n"
           "                     nice value (-20..19; below 0 needs root: on a shared\n"
           "                     machine other users' load then yields to them)\n"
           "  --no-spin          calibrate/validate: no SCHED_IDLE spinner keeping each\n"
           "                     core awake (idle vCPUs then halt: slower wake-ups)\n"
           "  --topo             validate: also the namespace topology (8 hosts, 2 TORs,\n"
           "                     2 SPINEs, 1 Gbit/s links, switches on the path): INC\n"
           "                     and Open MPI over TCP, 3 jobs of ~60 s (root)\n"
           "  --json             machine-readable output\n"
           "  --trace            simulate: SimGrid's messages and each step's time\n",
           op_model_preset_names());
}

enum { O_NODES = 256, O_PPN, O_BYTES, O_MIN, O_MAX, O_MODE, O_ALG, O_LINK, O_PLATFORM, O_LOSS,
       O_SEED, O_PLOT, O_TABLES, O_TOL, O_ITERS, O_OUT, O_JSON, O_TRACE, O_NET, O_PORT, O_NICE, O_NO_SPIN, O_REPLAY, O_TOPO,
       O_HELP };

static const struct option opts[] = {
    {"nodes", 1, 0, O_NODES},       {"ppn", 1, 0, O_PPN},       {"bytes", 1, 0, O_BYTES},
    {"min-bytes", 1, 0, O_MIN},     {"max-bytes", 1, 0, O_MAX}, {"mode", 1, 0, O_MODE},
    {"alg", 1, 0, O_ALG},           {"link", 1, 0, O_LINK},     {"platform", 1, 0, O_PLATFORM},
    {"loss", 1, 0, O_LOSS},         {"seed", 1, 0, O_SEED},     {"plot", 1, 0, O_PLOT},
    {"tables", 1, 0, O_TABLES},     {"tolerance", 1, 0, O_TOL}, {"iters", 1, 0, O_ITERS},
    {"out", 1, 0, O_OUT},           {"json", 0, 0, O_JSON},     {"help", 0, 0, O_HELP},
    {"trace", 0, 0, O_TRACE},       {"net", 1, 0, O_NET},       {"port", 1, 0, O_PORT},
    {"nice", 1, 0, O_NICE},         {"no-spin", 0, 0, O_NO_SPIN}, {"replay", 1, 0, O_REPLAY},
    {"topo", 0, 0, O_TOPO},
    {0, 0, 0, 0},
};

/* "64M", "4K", "1G", "256": bytes */
static bool size_flag(const char *flag, const char *v, uint64_t *out)
{
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    uint64_t mult = 1;
    if (end != v && (*end == 'K' || *end == 'k'))
        mult = 1024, end++;
    else if (end != v && (*end == 'M' || *end == 'm'))
        mult = 1024 * 1024, end++;
    else if (end != v && (*end == 'G' || *end == 'g'))
        mult = 1024 * 1024 * 1024, end++;
    if (end == v || *end != '\0' || v[0] == '-' || n == 0 || n > (1ull << 40) / mult) {
        cli_bad("model", "invalid value '%s' for %s (expected a size, e.g. 256, 4K, 64M)", v, flag);
        return false;
    }
    *out = n * mult;
    return true;
}

struct flags {
    struct op_model_cfg cfg;
    bool mode_set, nodes_set, platform_set, alg_set;
};

static bool set(int opt, const char *v, void *arg)
{
    struct flags *f = arg;
    struct op_model_cfg *c = &f->cfg;
    uint64_t u;
    double d;
    char why[160];
    switch (opt) {
    case O_NODES:
        f->nodes_set = true;
        return cli_u64("model", "--nodes", v, 1, 65536, &u) && (c->nodes = (unsigned)u, true);
    case O_PPN:
        return cli_u64("model", "--ppn", v, 1, 1024, &u) && (c->ppn = (unsigned)u, true);
    case O_BYTES:
        return size_flag("--bytes", v, &c->min_bytes) && (c->max_bytes = c->min_bytes, true);
    case O_MIN:
        return size_flag("--min-bytes", v, &c->min_bytes);
    case O_MAX:
        return size_flag("--max-bytes", v, &c->max_bytes);
    case O_MODE:
        for (unsigned m = 0; m < OP_MODEL_MODE_COUNT_; m++)
            if (strcmp(v, op_model_mode_name(m)) == 0) {
                c->mode = m;
                f->mode_set = true;
                return true;
            }
        cli_bad("model", "invalid value '%s' for --mode (host, node or socket)", v);
        return false;
    case O_ALG:
        if (op_model_alg_parse(v, &c->alg) == OP_OK)
            return f->alg_set = true;
        cli_bad("model", "invalid value '%s' for --alg (ompi, mpich, rd, ring, rabenseifner, hier, offpath, ompi-classic)", v);
        return false;
    case O_LINK:
        f->platform_set = true;
        if (op_model_preset(v, &c->platform) == OP_OK)
            return true;
        cli_bad("model", "invalid value '%s' for --link (%s)", v, op_model_preset_names());
        return false;
    case O_PLATFORM:
        f->platform_set = true;
        if (op_model_platform_load(v, &c->platform, why, sizeof(why)) == OP_OK)
            return true;
        cli_bad("model", "invalid --platform '%s': %s", v, why);
        return false;
    case O_LOSS:
        if (cli_rate("model", "--loss", v, &c->loss) && c->loss <= 0.5)
            return true;
        cli_bad("model", "--loss must be at most 0.5");
        return false;
    case O_SEED:
        return cli_u64("model", "--seed", v, 0, UINT64_MAX, &c->seed);
    case O_PLOT:
        c->plot = v;
        return true;
    case O_TABLES:
        c->tables = v;
        return true;
    case O_TOL:
        if (op_parse_double(v, 0.0, 100.0, &c->tolerance) == OP_OK && c->tolerance > 0)
            return true;
        cli_bad("model", "invalid value '%s' for --tolerance (a relative error, e.g. 0.25)", v);
        return false;
    case O_ITERS:
        return cli_u64("model", "--iters", v, 10, 100000, &u) && (c->iters = (unsigned)u, true);
    case O_OUT:
        c->out_path = v;
        return true;
    case O_REPLAY:
        c->replay_path = v;
        return true;
    case O_JSON:
        c->json = true;
        return true;
    case O_NET:
        return cli_u64("model", "--net", v, 1, 250, &u) && (c->net = (unsigned)u, true);
    case O_NICE:
        if (op_parse_double(v, -20.0, 19.0, &d) == OP_OK && d == (int)d)
            return c->nice = (int)d, true;
        cli_bad("model", "invalid value '%s' for --nice (an integer -20..19)", v);
        return false;
    case O_PORT:
        return cli_u64("model", "--port", v, 1024, 65000, &u) && (c->port = (unsigned)u, true);
    case O_NO_SPIN:
        c->no_spin = true;
        return true;
    case O_TOPO:
        c->topo = true;
        return true;
    case O_TRACE:
        c->trace = true;
        return true;
    default:
        return false;
    }
}

static int (*const runs[])(const struct op_model_cfg *, FILE *) = {
    op_model_run_simulate, op_model_run_project, op_model_run_seed, op_model_run_calibrate,
    op_model_run_validate, op_model_run_platform,
};
static const char *const subs[] = {"simulate", "project", "seed", "calibrate", "validate",
                                   "platform"};

int cli_model(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        help();
        return argc < 2 ? 2 : 0;
    }
    size_t sub = 0;
    while (sub < sizeof(subs) / sizeof(subs[0]) && strcmp(argv[1], subs[sub]) != 0)
        sub++;
    if (sub == sizeof(subs) / sizeof(subs[0])) {
        cli_bad("model", "unknown subcommand '%s' (simulate, project, seed, calibrate, validate, platform)",
                argv[1]);
        return 2;
    }
    struct flags f = {0};
    op_model_cfg_default(&f.cfg);
    char plot[4096], tables[4096];
    f.cfg.bin = cli_self_exe("model");
    data_file(f.cfg.bin, "scripts/model_plot.py", plot, sizeof(plot));
    data_file(f.cfg.bin, "data/seed_tables.csv", tables, sizeof(tables));
    f.cfg.script_dir = dirname(plot);
    f.cfg.tables = tables;
    int rc = cli_flags(argc - 1, argv + 1, "", opts, O_HELP, help, set, &f);
    if (rc >= 0)
        return rc;
    if (optind < argc - 1) {
        cli_bad("model", "unexpected argument '%s'", argv[optind + 1]);
        return 2;
    }
    if (f.cfg.min_bytes > f.cfg.max_bytes) {
        cli_bad("model", "--min-bytes is above --max-bytes");
        return 2;
    }
    if (!f.mode_set)
        f.cfg.mode = OP_MODEL_MODE_COUNT_; /* every mode */
    if (sub == 2 && !f.platform_set)
        op_model_preset("seed", &f.cfg.platform); /* the seed's cluster, unless told */
    if (sub == 2 && !f.alg_set)
        f.cfg.alg = OP_MODEL_ALG_OMPI_CLASSIC; /* its Open MPI 4.0.5 */
    if (sub == 4 && !f.nodes_set)
        f.cfg.nodes = 0; /* validate's own set of cluster sizes */
    return runs[sub](&f.cfg, stdout);
}
