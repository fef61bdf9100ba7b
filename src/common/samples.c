/* Sample statistics. Every sample is kept; the percentile sorts on demand.
 * An empty set reports 0 for every statistic (and stdev needs 2 samples). */
#include <math.h>
#include <stdlib.h>

#include "offpath/common.h"

void op_samples_init(struct op_samples *s)
{
    s->v = NULL;
    s->n = 0;
    s->cap = 0;
    s->sorted = 1;
}

void op_samples_free(struct op_samples *s)
{
    free(s->v);
    op_samples_init(s);
}

op_status_t op_samples_add(struct op_samples *s, double x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap != 0 ? s->cap * 2 : 64;
        if (cap > SIZE_MAX / sizeof *s->v)
            return OP_ERR_NOMEM;
        double *v = realloc(s->v, cap * sizeof *v);
        if (v == NULL)
            return OP_ERR_NOMEM;
        s->v = v;
        s->cap = cap;
    }
    if (s->n > 0 && x < s->v[s->n - 1])
        s->sorted = 0;
    s->v[s->n++] = x;
    return OP_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Nearest rank: the smallest sample with at least p% of samples <= it. */
double op_samples_percentile(struct op_samples *s, double p)
{
    if (s->n == 0)
        return 0.0;
    if (!s->sorted) {
        qsort(s->v, s->n, sizeof *s->v, cmp_double);
        s->sorted = 1;
    }
    if (!(p > 0.0)) /* also NaN */
        return s->v[0];
    if (p >= 100.0)
        return s->v[s->n - 1];
    size_t rank = (size_t)ceil(p * (double)s->n / 100.0); /* exact for whole p */
    if (rank < 1)
        rank = 1;
    if (rank > s->n)
        rank = s->n;
    return s->v[rank - 1];
}

double op_samples_mean(const struct op_samples *s)
{
    double sum = 0.0;

    if (s->n == 0)
        return 0.0;
    for (size_t i = 0; i < s->n; i++)
        sum += s->v[i];
    return sum / (double)s->n;
}

/* Sample standard deviation (n - 1 in the denominator), two passes. */
double op_samples_stdev(const struct op_samples *s)
{
    double mean, ss = 0.0;

    if (s->n < 2)
        return 0.0;
    mean = op_samples_mean(s);
    for (size_t i = 0; i < s->n; i++)
        ss += (s->v[i] - mean) * (s->v[i] - mean);
    return sqrt(ss / (double)(s->n - 1));
}
