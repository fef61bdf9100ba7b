/* `offpath model calibrate` and `validate`: offpath's own INC path measured
 * here (`offpath inc_test`: leader processes on loopback addresses, a
 * software TOR process, real RoCEv2 packets) against the model of this
 * machine (the 'here' platform: every process on one host of 2 shared cores,
 * each hop a loopback crossing). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

#define N_SIZES 6
static const uint64_t val_sizes[N_SIZES] = {4, 64, 1024, 16384, 262144, 1048576};

#define RUNS 5

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of RUNS runs' p50 latency of inc_test (us), or a negative
 * value. Not the lowest: on this VM an idle vCPU takes ~40 us to wake, so
 * a run during which other work kept the cores awake comes out faster than
 * the machine is for us alone (4 leaders, 4 B: 27 us once where every other
 * run gave 55-75), and the lowest of 5 picked exactly those; the median
 * drops one such run and one disturbed by other work alike. */
static double measure(const struct op_model_cfg *cfg, unsigned leaders, uint64_t bytes)
{
    double v[RUNS];
    unsigned iters = bytes >= 65536 ? cfg->iters / 10 + 1 : cfg->iters;
    for (int k = 0; k < RUNS; k++) {
        char cmd[1024], buf[8192];
        snprintf(cmd, sizeof(cmd),
                 "'%s' inc_test --leaders %u --count %llu --type int32 --iters %u --warmup 5 "
                 "--json --quiet --net %u --port %u 2>/dev/null",
                 cfg->bin, leaders, (unsigned long long)(bytes / 4 ? bytes / 4 : 1), iters,
                 cfg->net, cfg->port);
        FILE *p = popen(cmd, "r");
        if (p == NULL)
            return -1;
        size_t n = fread(buf, 1, sizeof(buf) - 1, p);
        buf[n] = '\0';
        int st = pclose(p);
        const char *at = strstr(buf, "\"p50\": ");
        if (st != 0 || at == NULL)
            return -1;
        v[k] = strtod(at + 7, NULL);
    }
    qsort(v, RUNS, sizeof(v[0]), cmp_double);
    return v[RUNS / 2];
}

static bool predict(const struct op_model_platform *p, unsigned leaders, const uint64_t *sizes,
                    size_t n, double *us)
{
    struct op_model_scenario sc[N_SIZES] = {{0}};
    struct op_model_result r[N_SIZES];
    for (size_t i = 0; i < n; i++)
        sc[i] = (struct op_model_scenario){.mode = OP_MODEL_NODE, .bytes = sizes[i]};
    if (op_model_simulate(p, leaders, 1, sc, n, r) != OP_OK)
        return false;
    for (size_t i = 0; i < n; i++)
        us[i] = r[i].latency_s * 1e6;
    return true;
}

static double misfit(const struct op_model_platform *p, const double *meas)
{
    double pred[N_SIZES], sum = 0;
    if (!predict(p, 2, val_sizes, N_SIZES, pred))
        return INFINITY;
    for (size_t i = 0; i < N_SIZES; i++)
        sum += pow(log(pred[i] / meas[i]), 2);
    return sum;
}

/* Coordinate search in log steps over the costs a packet meets here. */
static void fit(struct op_model_platform *p, const double *meas)
{
    /* the loopback's bandwidth stays: a memory copy, never the limit here */
    double *knobs[] = {&p->wire_lat, &p->leader_pkt_s, &p->sw_chunk_s, &p->sw_byte_s,
                       &p->wake_s};
    static const double steps[] = {0.5, 0.8, 1.25, 2.0};
    double best = misfit(p, meas);
    for (int round = 0; round < 8; round++)
        for (size_t k = 0; k < sizeof(knobs) / sizeof(knobs[0]); k++)
            for (size_t s = 0; s < 4; s++) {
                double old = *knobs[k];
                *knobs[k] = old * steps[s];
                double m = misfit(p, meas);
                if (m < best)
                    best = m;
                else
                    *knobs[k] = old;
            }
    p->host_msg_s = p->leader_pkt_s; /* one UDP message, either side */
    p->host_byte_s = p->sw_byte_s;
}

/* Measures 2 leaders at every size and fits the 'here' platform to them. */
static bool calibrate(const struct op_model_cfg *cfg, struct op_model_platform *p, double *meas)
{
    op_model_preset("here", p);
    for (size_t i = 0; i < N_SIZES; i++) {
        meas[i] = measure(cfg, 2, val_sizes[i]);
        if (meas[i] <= 0) {
            fprintf(stderr, "offpath model: offpath inc_test failed (%s)\n", cfg->bin);
            return false;
        }
        fprintf(stderr, "offpath model: calibrating: 2 leaders, %llu B: %.1f us\n",
                (unsigned long long)val_sizes[i], meas[i]);
    }
    fit(p, meas);
    snprintf(p->name, sizeof(p->name), "here-calibrated");
    return true;
}

int op_model_run_calibrate(const struct op_model_cfg *cfg, FILE *out)
{
    if (!op_model_available() || cfg->bin == NULL)
        return 3;
    struct op_model_platform p;
    double meas[N_SIZES];
    if (!calibrate(cfg, &p, meas))
        return 3;
    fprintf(out, "# offpath model calibrate: inc_test p50 at 2 leaders, median of %d runs\n", RUNS);
    for (size_t i = 0; i < N_SIZES; i++)
        fprintf(out, "# %8llu B: %.1f us\n", (unsigned long long)val_sizes[i], meas[i]);
    fprintf(out, "preset here\n");
    op_model_platform_print(&p, out);
    if (cfg->out_path != NULL) {
        FILE *f = fopen(cfg->out_path, "w");
        if (f == NULL)
            return 3;
        fprintf(f, "preset here\n");
        op_model_platform_print(&p, f);
        if (fclose(f) != 0)
            return 3;
    }
    return 0;
}

static size_t leader_counts(const struct op_model_cfg *cfg, unsigned *c)
{
    size_t n = 0;
    if (cfg->nodes == 0) {
        for (unsigned l = 2; l <= 16; l *= 2)
            c[n++] = l;
    } else if (cfg->nodes <= 4) {
        for (unsigned l = 2; l <= cfg->nodes; l++)
            c[n++] = l;
    } else {
        for (unsigned l = 2; l <= cfg->nodes && n < 16; l *= 2)
            c[n++] = l;
    }
    return n;
}

int op_model_run_validate(const struct op_model_cfg *cfg_in, FILE *out)
{
    if (!op_model_available() || cfg_in->bin == NULL)
        return 3;
    struct op_model_cfg copy = *cfg_in;
    const struct op_model_cfg *cfg = &copy;
    double meas[N_SIZES];
    if (copy.platform.shared_cores == 0 && !calibrate(cfg, &copy.platform, meas))
        return 3; /* a cluster platform cannot predict this machine: calibrate first */
    unsigned counts[16];
    size_t nc = leader_counts(cfg, counts), bad = 0, total = 0;
    double worst = 0;
    if (!cfg->json)
        fprintf(out, "# platform %s against offpath inc_test (p50, median of %d runs)\n"
                     "%7s %8s %12s %12s %8s\n", cfg->platform.name, RUNS, "leaders", "bytes",
                "measured us", "model us", "error");
    for (size_t c = 0; c < nc; c++) {
        uint64_t sizes[N_SIZES];
        size_t ns = 0;
        for (size_t i = 0; i < N_SIZES; i++)
            if (val_sizes[i] >= cfg->min_bytes && val_sizes[i] <= cfg->max_bytes)
                sizes[ns++] = val_sizes[i];
        double pred[N_SIZES];
        if (!predict(&cfg->platform, counts[c], sizes, ns, pred))
            return 3;
        for (size_t i = 0; i < ns; i++) {
            double m = measure(cfg, counts[c], sizes[i]);
            if (m <= 0)
                return 3;
            double err = pred[i] / m - 1;
            total++;
            bad += fabs(err) > cfg->tolerance;
            worst = fmax(worst, fabs(err));
            if (cfg->json)
                fprintf(out, "{\"leaders\": %u, \"bytes\": %llu, \"measured_us\": %.2f, "
                             "\"model_us\": %.2f, \"error\": %.4f}\n",
                        counts[c], (unsigned long long)sizes[i], m, pred[i], err);
            else
                fprintf(out, "%7u %8llu %12.1f %12.1f %+7.1f%%%s\n", counts[c],
                        (unsigned long long)sizes[i], m, pred[i], err * 100,
                        fabs(err) > cfg->tolerance ? "  OFF" : "");
            fflush(out);
        }
    }
    fprintf(cfg->json ? stderr : out,
            "# %zu of %zu sizes within %.0f%% (largest error %.1f%%): %s\n", total - bad, total,
            cfg->tolerance * 100, worst * 100, bad ? "FAIL" : "PASS");
    return bad ? 1 : 0;
}
