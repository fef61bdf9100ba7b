/* The ways an MPI job's allreduce may go, spelled once for the launcher's
 * --mode, the OFFPATH_MODE the library reads, offpath_mpi_set_mode's argument
 * and osu_allreduce --compare's columns. OFF: the MPI's own allreduce; NODE:
 * a leader per node through the switches; SOCKET: a leader per socket; HOST:
 * Node mode's leaders allreduce host to host over UDP, no switches.
 * Header-only: liboffpath_mpi and the osu programs use it as the CLI does. */
#ifndef OFFPATH_MODE_H
#define OFFPATH_MODE_H

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#define OP_MODES(X) X(OFF, "off") X(NODE, "node") X(SOCKET, "socket") X(HOST, "host")

enum op_mode {
#define OP_MODE_ENUM_(e, s) OP_MODE_##e,
    OP_MODES(OP_MODE_ENUM_)
#undef OP_MODE_ENUM_
        OP_MODE_COUNT_
};

static inline const char *op_mode_name(enum op_mode m)
{
    switch (m) {
#define OP_MODE_CASE_(e, s)                                                                        \
    case OP_MODE_##e:                                                                              \
        return s;
        OP_MODES(OP_MODE_CASE_)
#undef OP_MODE_CASE_
    default:
        return "?";
    }
}

/* any_case: the library has always taken OFFPATH_MODE=NODE; flags are exact. */
static inline bool op_mode_parse(const char *name, bool any_case, enum op_mode *out)
{
    for (int m = 0; m < OP_MODE_COUNT_; m++) {
        const char *s = op_mode_name((enum op_mode)m);
        if (any_case ? strcasecmp(name, s) == 0 : strcmp(name, s) == 0) {
            *out = (enum op_mode)m;
            return true;
        }
    }
    return false;
}

#endif
