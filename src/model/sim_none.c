/* Built without SimGrid: the closed forms and the tools' arguments work, a
 * simulation says why it cannot run. */
#include "model_internal.h"

bool op_model_available(void)
{
    return false;
}

op_status_t op_model_simulate(const struct op_model_platform *p, unsigned nodes, unsigned ppn,
                              const struct op_model_scenario *sc, size_t n,
                              struct op_model_result *out)
{
    (void)p, (void)nodes, (void)ppn, (void)sc, (void)n, (void)out;
    return OP_ERR_UNSUPPORTED;
}
