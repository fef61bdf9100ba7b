/* libFuzzer target for `offpath topo`'s topology files. Properties: nothing
 * crashes; a refusal names a line and counts at least one malformed line; a
 * topology taken has a name, hosts on one link each, and plans into whole
 * ip/tc commands whose every route has a next hop that is a neighbour, and
 * whose switches' file is written or refused with a reason. */
#include <stdlib.h>
#include <string.h>

#include "offpath/nstopo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond)
        abort();
}

static bool check_cmd(int argc, const char *const *argv, void *ctx)
{
    require(argc >= 3 && argv[argc] == NULL);
    require(strcmp(argv[0], "ip") == 0 || strcmp(argv[0], "tc") == 0);
    for (int i = 0; i < argc; i++)
        require(argv[i][0] != '\0');
    ++*(int *)ctx;
    return true;
}

static bool neighbours(const struct op_nstopo *t, int a, int b)
{
    for (int i = 0; i < t->n_links; i++)
        if ((t->links[i].a == a && t->links[i].b == b) ||
            (t->links[i].a == b && t->links[i].b == a))
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    struct op_nstopo *t = malloc(sizeof(*t));
    if (text == NULL || t == NULL) {
        free(text);
        free(t);
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    struct op_nstopo_stats stats;
    char why[256] = "";
    op_status_t st = op_nstopo_parse(text, t, &stats, why, sizeof(why));
    free(text);
    if (st != OP_OK) {
        require(strncmp(why, "line ", 5) == 0 && stats.malformed > 0);
        free(t);
        return 0;
    }
    require(stats.malformed == 0 && t->name[0] != '\0' && t->n_nodes > 0);
    int cmds = 0;
    require(op_nstopo_plan(t, check_cmd, &cmds));
    require(cmds >= 3 * t->n_nodes + 7 * t->n_links);
    uint16_t hops[OP_NSTOPO_MAX_PATHS];
    for (int u = 0; u < t->n_nodes; u++)
        for (int v = 0; v < t->n_nodes; v++) {
            int n = op_nstopo_next_hops(t, u, v, hops);
            for (int i = 0; i < n; i++)
                require(neighbours(t, u, hops[i]));
        }
    /* the switches' file: written whole, or refused with a reason */
    static char sw[16384];
    char err[256] = "";
    op_status_t s = op_nstopo_switches(t, sw, sizeof sw, err, sizeof err);
    require(s == OP_OK ? strncmp(sw, "# the switches of topo ", 23) == 0 : err[0] != '\0');
    free(t);
    return 0;
}
