/* libFuzzer target for `offpath model`'s platform files (text a user
 * writes or `calibrate --out` wrote). Properties: nothing crashes; a refusal
 * says why, naming the line; a platform taken passes the model's own check
 * and reads back the same after printing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct op_model_platform p, q;
    char why[128] = "";
    op_status_t st = op_model_platform_parse(text, &p, why, sizeof(why));
    free(text);
    if (st != OP_OK) {
        require(why[0] != '\0');
        return 0;
    }
    require(p.link_bw > 0 && p.window > 0 && p.max_data > 0 && p.rack_nodes > 0);
    char out[4096];
    FILE *f = fmemopen(out, sizeof(out), "w");
    require(f != NULL);
    op_model_platform_print(&p, f);
    fclose(f);
    require(op_model_platform_parse(out, &q, why, sizeof(why)) == OP_OK);
    require(q.link_bw == p.link_bw && q.wire_lat == p.wire_lat && q.window == p.window &&
            q.shared_cores == p.shared_cores && q.wake_s == p.wake_s);
    return 0;
}
