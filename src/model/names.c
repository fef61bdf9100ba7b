/* Names of modes and algorithms, for flags, tables and JSON. */
#include <string.h>

#include "model_internal.h"

static const char *const modes[] = {"host", "node", "socket"};
static const char *const algs[] = {"ompi", "mpich", "rd", "ring", "rabenseifner", "hier",
                                    "offpath", "ompi-classic"};

const char *op_model_mode_name(unsigned mode)
{
    return mode < OP_MODEL_MODE_COUNT_ ? modes[mode] : "?";
}

const char *op_model_alg_name(unsigned alg)
{
    return alg < OP_MODEL_ALG_COUNT_ ? algs[alg] : "?";
}

op_status_t op_model_alg_parse(const char *name, unsigned *alg)
{
    for (unsigned i = 0; i < OP_MODEL_ALG_COUNT_; i++)
        if (strcmp(name, algs[i]) == 0) {
            *alg = i;
            return OP_OK;
        }
    return OP_ERR_INVAL;
}
