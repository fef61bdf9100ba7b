/* What the binary finds beside itself: in an installed prefix, under
 * ../libexec/offpath and ../share/offpath (meson's install layout, given as
 * OP_REL_*); in a build tree, in its neighbour folders or the source tree.
 * `offpath --paths` shows where each was found, so a broken install says
 * which file it lacks. */
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "offpath/launch.h"

#ifndef OFFPATH_SOURCE_DIR
#define OFFPATH_SOURCE_DIR "."
#endif

bool cli_mpiapp_path(const char *self, const char *program, char *out, size_t len)
{
    const char *const rel[] = {"../mpiapps", "../src/mpiapps", OP_REL_LIBEXECDIR};
    return op_path_find(self, rel, sizeof(rel) / sizeof(rel[0]), program, X_OK, out, len);
}

bool cli_data_path(const char *self, const char *name, char *out, size_t len)
{
    const char *const rel[] = {OP_REL_DATADIR, OFFPATH_SOURCE_DIR};
    return op_path_find(self, rel, sizeof(rel) / sizeof(rel[0]), name, R_OK, out, len);
}

const char *cli_dns_xdp_prog(const char *self, char *out, size_t len)
{
#ifdef OP_DNS_XDP_PROG
    char built[sizeof(OP_DNS_XDP_PROG)] = OP_DNS_XDP_PROG;
    const char *const rel[] = {OP_REL_DATADIR "/bpf", dirname(built)};
    if (op_path_find(self, rel, sizeof(rel) / sizeof(rel[0]), "dns_xdp.o", R_OK, out, len))
        return out;
#else
    (void)self;
    (void)out;
    (void)len;
#endif
    return NULL;
}

static void show(const char *what, bool found, const char *path)
{
    printf("%-28s %s\n", what, found ? path : "(not found)");
}

int cli_paths(void)
{
    const char *self = cli_self_exe("--paths");
    if (self == NULL)
        return 2;
    char p[4096];
    show("offpath", true, self);
    static const enum op_launch_mpi mpis[] = {OP_LAUNCH_OPENMPI, OP_LAUNCH_MPICH};
    static const char *const libs[] = {"liboffpath_mpi.so", "liboffpath_mpich.so"};
    static const char *const flavours[] = {"openmpi", "mpich"};
    static const char *const apps[] = {"osu_allreduce", "osu_iallreduce", "dpa_all_to_all"};
    for (int m = 0; m < 2; m++) {
        show(libs[m], op_launch_lib_path(self, mpis[m], p, sizeof(p)), p);
        for (size_t a = 0; a < sizeof(apps) / sizeof(apps[0]); a++) {
            char prog[64];
            snprintf(prog, sizeof(prog), "%s_%s", apps[a], flavours[m]);
            show(prog, cli_mpiapp_path(self, prog, p, sizeof(p)), p);
        }
    }
    show("scripts/model_plot.py", cli_data_path(self, "scripts/model_plot.py", p, sizeof(p)), p);
    show("data/seed_tables.csv", cli_data_path(self, "data/seed_tables.csv", p, sizeof(p)), p);
#ifdef OP_DNS_XDP_PROG
    show("bpf/dns_xdp.o", cli_dns_xdp_prog(self, p, sizeof(p)) != NULL, p);
#endif
    return 0;
}
