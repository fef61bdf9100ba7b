/* `offpath model seed`: the seed paper's tables 4-6 (3 node counts x 3 PPN x
 * 7 sizes x host/Node/Socket = 189 cells) against the model's prediction of
 * the same setup. A cell's ordering agrees when its mode has the same rank
 * among the three at that node count, PPN and size in both. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

#define MAX_CELLS 1024

static bool parse_row(char *line, struct mdl_cell *c, const char **why)
{
    char mode[16], extra[2];
    unsigned long long bytes;
    if (sscanf(line, "%u,%llu,%15[a-z],%u,%lf%1s", &c->nodes, &bytes, mode, &c->ppn, &c->meas_us,
               extra) != 5)
        return *why = "expected nodes,bytes,mode,ppn,us", false;
    c->bytes = bytes;
    for (c->mode = 0; c->mode < OP_MODEL_MODE_COUNT_; c->mode++)
        if (strcmp(mode, op_model_mode_name(c->mode)) == 0)
            break;
    if (c->mode == OP_MODEL_MODE_COUNT_)
        return *why = "mode is not host, node or socket", false;
    if (c->nodes < 2 || c->nodes > 4096 || c->ppn < 1 || c->ppn > 1024 || bytes == 0 ||
        bytes > (1u << 30) || !(c->meas_us > 0 && c->meas_us < 1e9))
        return *why = "a value out of range", false;
    return true;
}

size_t mdl_seed_parse(FILE *f, struct mdl_cell *cells, size_t max, char *why, size_t why_len)
{
    char line[256];
    size_t n = 0;
    unsigned no = 0;
    bool header = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        no++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            snprintf(why, why_len, "line %u: too long", no);
            return 0;
        }
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (!header) {
            header = true;
            if (strncmp(line, "nodes,bytes,mode,ppn,us", 23) == 0)
                continue;
            snprintf(why, why_len, "line %u: header nodes,bytes,mode,ppn,us missing", no);
            return 0;
        }
        const char *reason = NULL;
        if (n == max)
            reason = "too many rows";
        else if (parse_row(line, &cells[n], &reason))
            n++;
        if (reason != NULL) {
            snprintf(why, why_len, "line %u: %s", no, reason);
            return 0;
        }
    }
    if (n == 0)
        snprintf(why, why_len, "no rows");
    return n;
}

static struct mdl_cell *find(struct mdl_cell *c, size_t n, unsigned nodes, unsigned ppn, uint64_t b,
                         unsigned mode)
{
    for (size_t i = 0; i < n; i++)
        if (c[i].nodes == nodes && c[i].ppn == ppn && c[i].bytes == b && c[i].mode == mode)
            return &c[i];
    return NULL;
}

/* Predicts every cell of one (nodes, ppn) group, the first cell given. */
static op_status_t predict(const struct op_model_cfg *cfg, struct mdl_cell *cells, size_t n,
                           const struct mdl_cell *first)
{
    static const struct op_model_scenario none = {0};
    struct op_model_scenario sc[MAX_CELLS] = {none};
    struct mdl_cell *who[MAX_CELLS];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (cells[i].nodes == first->nodes && cells[i].ppn == first->ppn) {
            sc[k] = (struct op_model_scenario){.mode = cells[i].mode, .alg = cfg->alg,
                                               .bytes = cells[i].bytes};
            who[k++] = &cells[i];
        }
    struct op_model_result res[MAX_CELLS];
    op_status_t st = op_model_simulate(&cfg->platform, first->nodes, first->ppn, sc, k, res);
    for (size_t i = 0; i < k && st == OP_OK; i++)
        who[i]->pred_us = res[i].latency_s * 1e6;
    return st;
}

static unsigned rank_of(const struct mdl_cell *cells, size_t n, const struct mdl_cell *c, bool pred)
{
    unsigned r = 0;
    for (unsigned m = 0; m < OP_MODEL_MODE_COUNT_; m++) {
        const struct mdl_cell *o = find((struct mdl_cell *)cells, n, c->nodes, c->ppn, c->bytes, m);
        if (o != NULL && o != c && (pred ? o->pred_us < c->pred_us : o->meas_us < c->meas_us))
            r++;
    }
    return r;
}

static int report(const struct op_model_cfg *cfg, const struct mdl_cell *c, size_t n, FILE *out)
{
    size_t order_ok = 0, near = 0;
    double worst = 0;
    if (!cfg->json)
        fprintf(out, "%5s %4s %6s %7s %10s %10s %8s %6s\n", "nodes", "ppn", "bytes", "mode",
                "seed us", "model us", "error", "order");
    for (size_t i = 0; i < n; i++) {
        double err = c[i].pred_us / c[i].meas_us - 1;
        bool ok = rank_of(c, n, &c[i], false) == rank_of(c, n, &c[i], true);
        order_ok += ok;
        near += fabs(err) <= 0.30;
        worst = fabs(err) > worst ? fabs(err) : worst;
        if (cfg->json)
            fprintf(out, "{\"nodes\": %u, \"ppn\": %u, \"bytes\": %llu, \"mode\": \"%s\", "
                         "\"seed_us\": %.2f, \"model_us\": %.3f, \"error\": %.4f, \"order_ok\": %s}\n",
                    c[i].nodes, c[i].ppn, (unsigned long long)c[i].bytes,
                    op_model_mode_name(c[i].mode), c[i].meas_us, c[i].pred_us, err,
                    ok ? "true" : "false");
        else
            fprintf(out, "%5u %4u %6llu %7s %10.2f %10.2f %+7.1f%% %6s\n", c[i].nodes, c[i].ppn,
                    (unsigned long long)c[i].bytes, op_model_mode_name(c[i].mode), c[i].meas_us,
                    c[i].pred_us, err * 100, ok ? "same" : "DIFF");
    }
    bool pass = order_ok * 10 >= n * 9 && near == n;
    fprintf(cfg->json ? stderr : out,
            "# platform %s: ordering agrees in %zu of %zu cells (%.1f%%, need 90%%); %zu of %zu "
            "within 30%% (largest error %.1f%%): %s\n",
            cfg->platform.name, order_ok, n, 100.0 * order_ok / n, near, n, worst * 100,
            pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
}

int op_model_run_seed(const struct op_model_cfg *cfg, FILE *out)
{
    FILE *f = fopen(cfg->tables, "r");
    if (f == NULL) {
        fprintf(stderr, "offpath model: cannot read --tables '%s': %s\n", cfg->tables,
                strerror(errno));
        return 2;
    }
    struct mdl_cell *cells = calloc(MAX_CELLS, sizeof(*cells));
    char why[128] = "";
    size_t n = cells ? mdl_seed_parse(f, cells, MAX_CELLS, why, sizeof(why)) : 0;
    fclose(f);
    int rc = 0;
    if (n == 0) {
        fprintf(stderr, "offpath model: --tables '%s': %s\n", cfg->tables, why);
        rc = 2;
    } else if (!op_model_available()) {
        fprintf(stderr, "offpath model: built without SimGrid\n");
        rc = 3;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        if (cells[i].pred_us == 0 && predict(cfg, cells, n, &cells[i]) != OP_OK)
            rc = 3;
    if (rc == 0)
        rc = report(cfg, cells, n, out);
    free(cells);
    return rc;
}
