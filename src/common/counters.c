/* One printer for every counter list: the X-macro lists (switch, io, rdma,
 * hostar) give names and values side by side, and each tool's text or JSON
 * comes from here, so a name is spelt once and printed the same everywhere. */
#include <inttypes.h>

#include "offpath/common.h"

static void print_one(FILE *out, const char *name, uint64_t v, int i,
                      enum op_counters_format fmt)
{
    switch (fmt) {
    case OP_COUNTERS_TABLE:
        fprintf(out, "  %-20s %" PRIu64 "\n", name, v);
        break;
    case OP_COUNTERS_LINE:
        fprintf(out, "%s %s %" PRIu64, i ? "," : "", name, v);
        break;
    case OP_COUNTERS_JSON:
        fprintf(out, "%s\"%s\": %" PRIu64, i ? ", " : "", name, v);
        break;
    }
}

void op_counters_print(FILE *out, const char *const *names, const uint64_t *vals, int n,
                       enum op_counters_format fmt)
{
    for (int i = 0; i < n; i++)
        print_one(out, names[i], vals[i], i, fmt);
}
