/* `offpath topo_rank FILE --ppn P -- PROGRAM`: an MPI rank in its host's
 * namespace (src/launch/rank.c); what `offpath mpirun --topo` runs each
 * rank under, and what a user's own mpirun can run it under. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "offpath/launch.h"

static const char *const tool = "topo_rank";

enum { O_PPN = 256, O_PRELOAD, O_HELP };

static const struct option options[] = {
    {"ppn", 1, 0, O_PPN}, {"preload", 1, 0, O_PRELOAD}, {"help", 0, 0, O_HELP}, {0, 0, 0, 0}};

static void help(void)
{
    printf("usage: offpath topo_rank [--ppn P] [--preload LIB] FILE -- PROGRAM [ARGS...]\n"
           "\n"
           "Runs one MPI rank (under mpirun) in the network namespace of its host on the\n"
           "namespace topology FILE (docs/topo.md, brought up with offpath topo up): rank r\n"
           "(OMPI_COMM_WORLD_RANK, PMI_RANK or PMIX_RANK) runs on host r / P, hosts in file\n"
           "order, with OFFPATH_IP set to the host's address. Under Open MPI a relay of the\n"
           "rank's own carries its PMIx connection to mpirun's server on 127.0.0.1 outside.\n"
           "\n"
           "  --ppn P         ranks per host (default 1)\n"
           "  --preload LIB   LD_PRELOAD of PROGRAM (e.g. liboffpath_mpi.so), not of this\n"
           "                  wrapper\n"
           "\n"
           "e.g. mpirun -np 16 --mca btl tcp,self --mca btl_tcp_if_include 10.0.0.0/14 \\\n"
           "       offpath topo_rank --ppn 2 examples/two-racks.topo -- ./app\n"
           "Exit status: PROGRAM's; 2 a bad parameter or file, 1 topology not up, 127\n"
           "PROGRAM cannot run.\n");
}

static bool set(int opt, const char *val, void *arg)
{
    struct op_launch_rank_cfg *c = arg;
    uint64_t v;
    if (opt == O_PRELOAD) {
        c->preload = val;
        return true;
    }
    if (opt != O_PPN || !cli_u64(tool, "--ppn", val, 1, 254, &v))
        return false;
    c->ppn = (int)v;
    return true;
}

/* This process's rank in its job, from whichever launcher started it. */
static int job_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        uint64_t r;
        if (v != NULL && op_parse_u64(v, 0, 1u << 30, &r) == OP_OK)
            return (int)r;
    }
    return -1;
}

int cli_topo_rank(int argc, char **argv)
{
    struct op_launch_rank_cfg cfg = {.ppn = 1, .rank = job_rank()};
    int cut = argc; /* PROGRAM's flags are its own: getopt stops at "--" */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            cut = i;
            break;
        }
    int rc = cli_flags(cut, argv, "", options, O_HELP, help, set, &cfg);
    if (rc >= 0)
        return rc;
    if (cut - optind != 1) {
        cli_bad(tool, "expected one FILE before '--' (offpath topo_rank FILE -- PROGRAM)");
        return 2;
    }
    if (cut + 1 >= argc) {
        cli_bad(tool, "expected a PROGRAM after '--'");
        return 2;
    }
    cfg.file = argv[optind];
    cfg.argv = argv + cut + 1;
    return op_launch_rank_exec(&cfg);
}
