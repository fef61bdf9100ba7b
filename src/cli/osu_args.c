/* OSU's flags for offpath's osu_allreduce and osu_iallreduce. Compiled into
 * those MPI programs (src/mpi), not into `offpath`, which only execs them:
 * argv is parsed here, in cli, so the benchmarks take a filled config. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/osu.h"

#define MAX_BYTES (1L << 28)

static const struct {
    const char *flag, *shown;
    enum op_osu_type type;
} types[] = {
    {"mpi_int", "MPI_INT", OP_OSU_INT},       {"mpi_float", "MPI_FLOAT", OP_OSU_FLOAT},
    {"mpi_double", "MPI_DOUBLE", OP_OSU_DOUBLE}, {"mpi_long", "MPI_LONG", OP_OSU_LONG},
    {"mpi_char", "MPI_CHAR", OP_OSU_CHAR},
};

const char *op_osu_type_name(enum op_osu_type type)
{
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (types[i].type == type)
            return types[i].shown;
    return "?";
}

const char *op_osu_bench_name(enum op_osu_bench bench)
{
    return bench == OP_OSU_IALLREDUCE ? "osu_iallreduce" : "osu_allreduce";
}

void op_osu_usage(enum op_osu_bench bench, FILE *out)
{
    bool nb = bench == OP_OSU_IALLREDUCE;
    fprintf(out, "usage: offpath %s [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-T TYPE] [-f] %s\n",
            op_osu_bench_name(bench), nb ? "[-t CALLS] [-c]" : "[--compare]");
    fprintf(out,
            "  -m MIN:MAX  message sizes in bytes, powers of two (default 4:1048576)\n"
            "  -i ITERS    timed iterations per size (default 1000; 100 above 8 KiB)\n"
            "  -x WARMUP   untimed iterations first (default 200; 10 above 8 KiB)\n"
            "  -T TYPE     mpi_int (default), mpi_float, mpi_double, mpi_long, mpi_char\n");
    if (nb)
        fprintf(out,
                "  -f          also the init, MPI_Test and MPI_Wait times\n"
                "  -t CALLS    MPI_Test calls spread over the compute (default 0)\n"
                "  -c          check every result and print a Validation column\n");
    else
        fprintf(out, "  -f          also min and max latency and iterations\n"
                     "  --compare   host, INC Node, INC Socket and host UDP side by side (needs\n"
                     "              offpath mpirun)\n");
}

static op_status_t bad(char *err, size_t len, const char *what)
{
    snprintf(err, len, "%s", what);
    return OP_ERR_INVAL;
}

static bool parse_long(const char *s, long *out)
{
    char *end = NULL;
    *out = strtol(s, &end, 10);
    return end != s && *end == '\0';
}

/* "MIN:MAX" or "MAX" */
static bool parse_sizes(const char *s, struct op_osu_config *cfg)
{
    const char *colon = strchr(s, ':');
    long lo = cfg->min_size, hi;
    if (colon != NULL) {
        char first[32];
        size_t n = (size_t)(colon - s);
        if (n == 0 || n >= sizeof(first))
            return false;
        memcpy(first, s, n);
        first[n] = '\0';
        if (!parse_long(first, &lo))
            return false;
        s = colon + 1;
    }
    if (!parse_long(s, &hi) || lo < 1 || hi < lo || hi > MAX_BYTES)
        return false;
    cfg->min_size = lo;
    cfg->max_size = hi;
    return true;
}

static bool parse_type(const char *s, enum op_osu_type *out)
{
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcmp(s, types[i].flag) == 0) {
            *out = types[i].type;
            return true;
        }
    return false;
}

static bool parse_count(const char *s, long min, int *out)
{
    long v;
    if (!parse_long(s, &v) || v < min || v > 100000000)
        return false;
    *out = (int)v;
    return true;
}

static op_status_t one_flag(int opt, const char *arg, struct op_osu_config *cfg, char *err,
                            size_t len)
{
    switch (opt) {
    case 'm':
        return parse_sizes(arg, cfg) ? OP_OK
                                     : bad(err, len, "invalid value for -m (expected MIN:MAX bytes)");
    case 'i':
        if (!parse_count(arg, 1, &cfg->iters))
            return bad(err, len, "invalid value for -i (expected a positive count)");
        cfg->iters_large = cfg->iters;
        return OP_OK;
    case 'x':
        return parse_count(arg, 0, &cfg->warmup)
                   ? OP_OK
                   : bad(err, len, "invalid value for -x (expected a count)");
    case 'T':
        return parse_type(arg, &cfg->type) ? OP_OK : bad(err, len, "invalid value for -T");
    case 't':
        return parse_count(arg, 0, &cfg->test_calls)
                   ? OP_OK
                   : bad(err, len, "invalid value for -t (expected a count of MPI_Test calls)");
    case 'f': cfg->full = true; return OP_OK;
    case 'c': cfg->validate = true; return OP_OK;
    case 'C': cfg->compare = true; return OP_OK;
    case 'h': cfg->help = true; return OP_OK;
    default: return bad(err, len, "unknown option");
    }
}

/* The mode liboffpath_mpi took from OFFPATH_MODE at MPI_Init: node when the
 * variable is unset or not a mode, as the library reads it (src/mpi/env.c). */
static enum op_mode job_mode(void)
{
    const char *v = getenv("OFFPATH_MODE");
    enum op_mode m = OP_MODE_NODE;
    if (v != NULL && *v != '\0' && !op_mode_parse(v, true, &m))
        m = OP_MODE_NODE;
    return m;
}

static op_status_t unknown(int argc, char **argv, char *err, size_t len)
{
    const char *what = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
    if (optopt != 0 && strchr("mixTt", optopt) != NULL)
        snprintf(err, len, "-%c needs a value", optopt);
    else if (optopt != 0)
        snprintf(err, len, "unknown option -%c", optopt);
    else
        snprintf(err, len, "unknown option %s", what);
    return OP_ERR_INVAL;
}

op_status_t op_osu_parse(enum op_osu_bench bench, int argc, char **argv,
                         struct op_osu_config *cfg, char *err, size_t err_len)
{
    static const struct option common[] = {
        {"message-size", 1, 0, 'm'}, {"iterations", 1, 0, 'i'}, {"warmup", 1, 0, 'x'},
        {"type", 1, 0, 'T'},         {"full", 0, 0, 'f'},       {"help", 0, 0, 'h'},
        {"compare", 0, 0, 'C'},      {0, 0, 0, 0}};
    static const struct option nonblocking[] = {
        {"message-size", 1, 0, 'm'}, {"iterations", 1, 0, 'i'},     {"warmup", 1, 0, 'x'},
        {"type", 1, 0, 'T'},         {"full", 0, 0, 'f'},           {"help", 0, 0, 'h'},
        {"validation", 0, 0, 'c'},   {"num_test_calls", 1, 0, 't'}, {0, 0, 0, 0}};
    bool nb = bench == OP_OSU_IALLREDUCE;
    *cfg = (struct op_osu_config){.bench = bench, .min_size = 4, .max_size = 1L << 20,
                                  .iters = 1000, .iters_large = 100, .warmup = 200,
                                  .type = OP_OSU_INT};
    optind = 0; /* glibc: a full reset, so the parser can run more than once */
    opterr = 0; /* the caller prints err, on one rank */
    int opt;
    while ((opt = getopt_long(argc, argv, nb ? "+m:i:x:T:ft:ch" : "+m:i:x:T:fh",
                              nb ? nonblocking : common, NULL)) != -1) {
        op_status_t st = opt == '?' ? unknown(argc, argv, err, err_len)
                                    : one_flag(opt, optarg, cfg, err, err_len);
        if (st != OP_OK)
            return st;
    }
    if (optind < argc)
        return bad(err, err_len, "unexpected argument (all settings are flags)");
    cfg->mode = job_mode();
    return OP_OK;
}
