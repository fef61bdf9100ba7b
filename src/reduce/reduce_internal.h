/* Internal to src/reduce and its tests: which kernel set op_reduce uses.
 * Not part of the public API (include/offpath/reduce.h). */
#ifndef OFFPATH_REDUCE_INTERNAL_H
#define OFFPATH_REDUCE_INTERNAL_H

#include <stdbool.h>

enum red_isa {
    RED_ISA_AUTO = 0, /* the best set this CPU runs (what the first call picks) */
    RED_ISA_GENERIC,  /* the baseline build */
    RED_ISA_AVX2,     /* x86 AVX2 build */
};

/* Make later calls use this kernel set; false, and nothing changes, where the
 * build or the CPU lacks it. For tests: do not call it while another thread
 * reduces. */
bool op_red_isa_select(enum red_isa isa);

#endif
