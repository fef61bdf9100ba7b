/* perftest's arithmetic on time stamps, in nanoseconds and floating point
 * (perftest truncates its stdev to whole cycles-per-usec; we do not). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/perf.h"

#define MIB (1024.0 * 1024.0)
#define GBIT_BYTES 125000000.0 /* 10^9 bits */

/* The smallest mean interval per message over any run i..j of messages,
 * j ending a completion batch (only every cq_mod-th message is signaled). */
static double best_interval_ns(const uint64_t *posted, const uint64_t *completed, uint64_t n,
                               uint32_t cq_mod)
{
    double best = (double)(completed[n - 1] - posted[0]) / (double)n;
    uint64_t step = cq_mod ? cq_mod : 1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t j = ((i + step) / step) * step - 1; /* first batch end at or after i */
        for (; j < n; j += step) {
            double t = (double)(completed[j] - posted[i]) / (double)(j - i + 1);
            if (t < best)
                best = t;
        }
    }
    return best;
}

void op_perf_bw_rate(uint64_t size, uint64_t count, uint64_t ns, bool gbits,
                     struct op_perf_bw_result *out)
{
    *out = (struct op_perf_bw_result){.size = size, .iters = count};
    if (ns == 0)
        return;
    double seconds = (double)ns / 1e9;
    out->bw_avg = (double)size * (double)count / seconds / (gbits ? GBIT_BYTES : MIB);
    out->msg_rate = (double)count / seconds / 1e6;
}

void op_perf_bw_compute(const uint64_t *posted, const uint64_t *completed, uint64_t n,
                        uint64_t size, uint32_t cq_mod, bool no_peak, bool gbits,
                        struct op_perf_bw_result *out)
{
    bool ran = n > 0 && completed[n - 1] > posted[0];
    op_perf_bw_rate(size, n, ran ? completed[n - 1] - posted[0] : 0, gbits, out);
    if (!ran)
        return;
    double unit = gbits ? GBIT_BYTES : MIB;
    if (!no_peak && n <= OP_PERF_NO_PEAK_ITERS) {
        double best = best_interval_ns(posted, completed, n, cq_mod);
        if (best > 0)
            out->bw_peak = (double)size / (best / 1e9) / unit;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double percentile(const uint64_t *sorted, uint64_t m, double p)
{
    uint64_t i = (uint64_t)ceil(p * (double)m);
    return (double)sorted[i < m ? i : m - 1];
}

op_status_t op_perf_lat_compute(const uint64_t *stamps, uint64_t n, unsigned rtt_factor,
                                uint64_t size, struct op_perf_lat_result *out)
{
    memset(out, 0, sizeof(*out));
    out->size = size;
    out->iters = n;
    if (n < 2 || rtt_factor == 0)
        return OP_ERR_INVAL;
    uint64_t m = n - 1;
    uint64_t *d = malloc(m * sizeof(*d));
    if (d == NULL)
        return OP_ERR_NOMEM;
    for (uint64_t i = 0; i < m; i++)
        d[i] = stamps[i + 1] - stamps[i];
    qsort(d, m, sizeof(*d), cmp_u64);
    if (m > 2)
        m -= 2; /* perftest drops the two largest samples */
    double scale = 1000.0 * rtt_factor; /* ns of round trip -> usec of the reported way */
    double sum = 0;
    for (uint64_t i = 0; i < m; i++)
        sum += (double)d[i];
    double avg = sum / (double)m, var = 0;
    for (uint64_t i = 0; i < m; i++)
        var += ((double)d[i] - avg) * ((double)d[i] - avg);
    double median = (m - 1) % 2 ? ((double)d[m / 2] + (double)d[m / 2 - 1]) / 2 : (double)d[m / 2];
    out->t_min = (double)d[0] / scale;
    out->t_max = (double)d[m - 1] / scale;
    out->t_typical = median / scale;
    out->t_avg = avg / scale;
    out->t_stdev = sqrt(var / (double)m) / scale;
    out->p99 = percentile(d, m, 0.99) / scale;
    out->p999 = percentile(d, m, 0.999) / scale;
    free(d);
    return OP_OK;
}
