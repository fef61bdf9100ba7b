/* A validate run's measurements, written and read back: calibration lines
 *   hop US | spin US (the leaders' poll) | inc LEADERS BYTES US CPU SWITCH_CPU | shm BYTES US |
 *   host NODES BYTES US (2 or 4 nodes) | mpi BYTES US | mpisocket BYTES US
 * and validation rows
 *   row KIND NODES BYTES US LO HI
 *   runs KIND NODES BYTES KEPT RUN (after its row line; older records lack it)
 *   inccpu LEADERS BYTES CPU (after an inc_test row line: the CPU a call of
 *     its processes, leaders and switch; records before the eleventh session
 *     lack it)
 * in us (printed exactly: a replay fits the same numbers), '#' comments. A
 * validation row's sizes are the first row's. Validate's host and MPI
 * calibration figures come from its rows (2 and 4 nodes). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib_internal.h"

void mdl_record_write(const struct calib *c, const struct vmeas *v, FILE *f)
{
    fprintf(f, "# offpath model validate: measurements (us; `validate --replay` reads them)\n");
    fprintf(f, "hop %.17g\n", c->hop);
    fprintf(f, "spin %.17g\n", c->spin_us);
    for (size_t i = 0; i < N_INC; i++)
        fprintf(f, "inc %u %llu %.17g %.17g %.17g\n", mdl_inc_points[i].leaders,
                (unsigned long long)mdl_inc_points[i].bytes, c->inc[i], c->inc_cpu[i],
                c->sw_cpu[i]);
    for (size_t i = 0; i < N_SIZES; i++) {
        unsigned long long b = mdl_val_sizes[i];
        fprintf(f, "shm %llu %.17g\n", b, c->shm[i]);
        if (c->host[i] > 0)
            fprintf(f, "host 2 %llu %.17g\n", b, c->host[i]);
        if (c->host4[i] > 0)
            fprintf(f, "host 4 %llu %.17g\n", b, c->host4[i]);
        if (c->mpi[i] > 0)
            fprintf(f, "mpi %llu %.17g\n", b, c->mpi[i]);
        if (c->mpi_sock[i] > 0)
            fprintf(f, "mpisocket %llu %.17g\n", b, c->mpi_sock[i]);
    }
    mdl_topo_write(&c->topo, f);
    for (size_t r = 0; r < v->nrows; r++)
        for (size_t i = 0; i < v->ns; i++) {
            const char *name = mdl_row_kinds[v->rows[r].kind].name;
            if (i == 0 && v->rows[r].note[0] != '\0')
                fprintf(f, "# %s %u: %s\n", name, v->rows[r].nodes, v->rows[r].note);
            unsigned long long b = v->sizes[i];
            fprintf(f, "row %s %u %llu %.17g %.17g %.17g\n", name, v->rows[r].nodes, b,
                    v->rows[r].us[i], v->rows[r].lo[i], v->rows[r].hi[i]);
            if (v->rows[r].runs[i] > 0)
                fprintf(f, "runs %s %u %llu %u %u\n", name, v->rows[r].nodes, b,
                        v->rows[r].kept[i], v->rows[r].runs[i]);
            if (v->rows[r].cpu[i] > 0)
                fprintf(f, "inccpu %u %llu %.17g\n", v->rows[r].nodes, b, v->rows[r].cpu[i]);
        }
}

static int size_index(const uint64_t *sizes, size_t n, unsigned long long b)
{
    for (size_t i = 0; i < n; i++)
        if (sizes[i] == b)
            return (int)i;
    return -1;
}

static bool positive(const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(x[i] > 0) || !isfinite(x[i]))
            return false;
    return true;
}

static const char *calib_line(const char *key, const char *rest, struct calib *c)
{
    unsigned u;
    unsigned long long b;
    double x[3];
    int i;
    if (strcmp(key, "hop") == 0)
        return sscanf(rest, "%lf", &c->hop) == 1 && positive(&c->hop, 1) ? NULL : "a bad hop";
    if (strcmp(key, "spin") == 0) /* older records lack it: their leaders slept at once */
        return sscanf(rest, "%lf", &c->spin_us) == 1 && c->spin_us >= 0 && c->spin_us <= 1e6
                   ? NULL : "spin: the leaders' poll (us, 0..1000000) expected";
    if (strcmp(key, "inc") == 0) {
        if (sscanf(rest, "%u %llu %lf %lf %lf", &u, &b, &x[0], &x[1], &x[2]) != 5 ||
            !positive(x, 1) || !(x[1] >= 0 && x[2] >= 0))
            return "inc: LEADERS BYTES US CPU SWITCH_CPU expected";
        for (size_t p = 0; p < N_INC; p++)
            if (mdl_inc_points[p].leaders == u && mdl_inc_points[p].bytes == b) {
                c->inc[p] = x[0], c->inc_cpu[p] = x[1], c->sw_cpu[p] = x[2];
                return NULL;
            }
        return "inc: not a calibration point";
    }
    double *per_size = strcmp(key, "shm") == 0 ? c->shm : strcmp(key, "mpi") == 0 ? c->mpi
                       : strcmp(key, "mpisocket") == 0 ? c->mpi_sock : NULL;
    if (per_size != NULL) {
        if (sscanf(rest, "%llu %lf", &b, &x[0]) != 2 || !positive(x, 1) ||
            (i = size_index(mdl_val_sizes, N_SIZES, b)) < 0)
            return "BYTES US expected, BYTES a calibration size";
        per_size[i] = x[0];
        return NULL;
    }
    if (strcmp(key, "host") == 0) {
        if (sscanf(rest, "%u %llu %lf", &u, &b, &x[0]) != 3 || !positive(x, 1) ||
            (u != 2 && u != 4) || (i = size_index(mdl_val_sizes, N_SIZES, b)) < 0)
            return "host: 2|4 BYTES US expected";
        (u == 2 ? c->host : c->host4)[i] = x[0];
        return NULL;
    }
    return "unknown key";
}

/* A row line: a new row when the kind or the node count changes. */
static const char *row_line(const char *rest, struct vmeas *v)
{
    char name[16];
    unsigned nodes, kind = ROW_KINDS;
    unsigned long long b;
    double x[3];
    if (sscanf(rest, "%15s %u %llu %lf %lf %lf", name, &nodes, &b, &x[0], &x[1], &x[2]) != 6 ||
        !positive(x, 3) || nodes < 2)
        return "row: KIND NODES BYTES US LO HI expected";
    for (unsigned k = 0; k < ROW_KINDS; k++)
        kind = strcmp(name, mdl_row_kinds[k].name) == 0 ? k : kind;
    if (kind == ROW_KINDS)
        return "row: unknown kind";
    struct vrow *r = v->nrows ? &v->rows[v->nrows - 1] : NULL;
    if (r == NULL || r->kind != kind || r->nodes != nodes) {
        if (v->nrows == MAX_ROWS)
            return "too many rows";
        r = &v->rows[v->nrows++];
        *r = (struct vrow){.kind = kind, .nodes = nodes};
    }
    int i = size_index(v->sizes, v->ns, b);
    if (i < 0 && v->nrows == 1 && v->ns < N_SIZES && size_index(mdl_val_sizes, N_SIZES, b) >= 0) {
        v->sizes[v->ns] = b;
        i = (int)v->ns++;
    }
    if (i < 0)
        return "row: a size the first row does not have";
    r->us[i] = x[0], r->lo[i] = x[1], r->hi[i] = x[2];
    return NULL;
}

/* A runs line: the counts of the row line before it. */
static const char *runs_line(const char *rest, struct vmeas *v)
{
    char name[16];
    unsigned nodes, kept, runs;
    unsigned long long b;
    struct vrow *r = v->nrows ? &v->rows[v->nrows - 1] : NULL;
    if (sscanf(rest, "%15s %u %llu %u %u", name, &nodes, &b, &kept, &runs) != 5 ||
        kept == 0 || kept > runs)
        return "runs: KIND NODES BYTES KEPT RUN expected, 0 < KEPT <= RUN";
    int i = size_index(v->sizes, v->ns, b);
    if (r == NULL || i < 0 || r->nodes != nodes || strcmp(name, mdl_row_kinds[r->kind].name) != 0)
        return "runs: not after its row line";
    r->kept[i] = kept, r->runs[i] = runs;
    return NULL;
}

/* An inccpu line: the CPU of the inc_test row line before it. */
static const char *inccpu_line(const char *rest, struct vmeas *v)
{
    unsigned nodes;
    unsigned long long b;
    double cpu;
    struct vrow *r = v->nrows ? &v->rows[v->nrows - 1] : NULL;
    if (sscanf(rest, "%u %llu %lf", &nodes, &b, &cpu) != 3 || !positive(&cpu, 1))
        return "inccpu: LEADERS BYTES CPU expected, CPU > 0";
    int i = size_index(v->sizes, v->ns, b);
    if (r == NULL || i < 0 || r->kind != ROW_INC || r->nodes != nodes)
        return "inccpu: not after its inc_test row line";
    r->cpu[i] = cpu;
    return NULL;
}

bool mdl_record_read(FILE *f, struct calib *c, struct vmeas *v, char *why, size_t why_len)
{
    char line[256], key[16];
    unsigned n = 0;
    int at;
    memset(c, 0, sizeof(*c));
    memset(v, 0, sizeof(*v));
    while (fgets(line, sizeof(line), f) != NULL) {
        n++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        bool other = false;
        const char *bad = sscanf(line, "%15s %n", key, &at) != 1 ? "no key"
                          : strcmp(key, "row") == 0     ? row_line(line + at, v)
                          : strcmp(key, "runs") == 0    ? runs_line(line + at, v)
                          : strcmp(key, "inccpu") == 0  ? inccpu_line(line + at, v)
                                                        : mdl_topo_line(key, line + at, &c->topo,
                                                                        &other);
        if (other)
            bad = calib_line(key, line + at, c);
        if (bad != NULL) {
            snprintf(why, why_len, "line %u: %s", n, bad);
            return false;
        }
    }
    for (size_t r = 0; r < v->nrows; r++)
        if (!positive(v->rows[r].us, v->ns)) {
            snprintf(why, why_len, "row %zu lacks a size", r + 1);
            return false;
        }
    if (!positive(c->inc, N_INC) || !positive(c->shm, N_SIZES) ||
        !(c->hop > 0) || v->nrows == 0) {
        snprintf(why, why_len, "a calibration figure or every row is missing");
        return false;
    }
    return true;
}
