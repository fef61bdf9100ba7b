/* `offpath osu_allreduce`, `offpath osu_iallreduce`, `offpath
 * dpa_all_to_all`: run the MPI build of the program that matches the MPI
 * this rank was started by (it is an MPI program; offpath is not). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char *flavour(void)
{
    const char *mpi = getenv("OFFPATH_MPI");
    if (mpi != NULL && (strcmp(mpi, "openmpi") == 0 || strcmp(mpi, "mpich") == 0))
        return mpi;
    if (getenv("OMPI_COMM_WORLD_SIZE") != NULL)
        return "openmpi";
    if (getenv("PMI_SIZE") != NULL || getenv("PMI_RANK") != NULL)
        return "mpich";
    return "openmpi";
}

static int run_bench(const char *name, char **argv)
{
    char prog[128], path[4300];
    const char *self = cli_self_exe(name);
    if (self == NULL)
        return 2;
    snprintf(prog, sizeof(prog), "%s_%s", name, flavour());
    if (!cli_mpiapp_path(self, prog, path, sizeof(path))) {
        cli_bad(name, "%s is not built (is %s's MPI installed?)", prog, flavour());
        return 2;
    }
    argv[0] = path;
    execv(path, argv);
    cli_bad(name, "cannot run %s: %s", path, strerror(errno));
    return 2;
}

/* argv goes on whole, NULL-terminated */
int cli_osu_allreduce(int argc, char **argv)
{
    (void)argc;
    return run_bench("osu_allreduce", argv);
}

int cli_osu_iallreduce(int argc, char **argv)
{
    (void)argc;
    return run_bench("osu_iallreduce", argv);
}

int cli_dpa_all_to_all(int argc, char **argv)
{
    if (cli_a2a_is_daemon(argc, argv))
        return cli_a2a_daemon(argc, argv);
    return run_bench("dpa_all_to_all", argv);
}
