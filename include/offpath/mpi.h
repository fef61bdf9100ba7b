/* What liboffpath_mpi exports to MPI programs besides the MPI calls it
 * wraps. The library is preloaded (offpath mpirun), never linked: each symbol
 * is declared weak, so a program run without the library still starts and
 * sees NULL in its place. */
#ifndef OFFPATH_MPI_H
#define OFFPATH_MPI_H

#include "offpath/common.h"
#include "offpath/mode.h"

/* For benchmarks that compare modes in one job (osu_allreduce --compare):
 * communicators created after this call use mode (a name of offpath/mode.h,
 * any case). Collective in spirit: every rank must call it alike. Returns 0,
 * or -1 for an unknown mode or when no switch is reachable (host mode needs
 * none). */
OP_API int offpath_mpi_set_mode(const char *mode) __attribute__((weak));

#endif
