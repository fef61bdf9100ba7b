/* bench/check_cost: what an inc_test leader spends a byte on its work
 * between timed calls (the next input's it_fill, the result's it_check:
 * every element against the reference, the run's hash), the figure behind
 * the `here` platform's check_byte_s (docs/model.md). Nanoseconds of CPU a
 * byte at the validated sizes from 16 KiB (int32, inc_test's default
 * type), each the least of several trials of 16 MiB, so a busy neighbour
 * shows as fewer good trials rather than a slower figure. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/inctest/inctest_internal.h"
#include "offpath/reduce.h"

#define TRIALS 9
#define TRIAL_BYTES (16u << 20)

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* inc_test's leaders cycle through DATA_VARIANTS inputs and references
 * (leader.c), and the library has just written the result: each call's
 * result is copied in untimed from its reference, then its check timed. */
#define VARIANTS 4

struct bufs {
    uint8_t *send, *recv, *ref[VARIANTS];
};

/* One trial: as many calls' checks as make TRIAL_BYTES, ns a byte. */
static double trial(const struct op_inctest_config *cfg, const struct bufs *b, size_t bytes,
                    uint64_t *bad)
{
    size_t calls = TRIAL_BYTES / bytes;
    uint64_t hash = 0, first = 0;
    double spent = 0;
    for (size_t i = 0; i < calls; i++) {
        memcpy(b->recv, b->ref[i % VARIANTS], bytes);
        double t0 = cpu_s();
        *bad += it_check(cfg, b->recv, b->ref[i % VARIANTS], &hash, &first);
        it_fill(cfg, 0, (i + 1) % VARIANTS, b->send);
        spent += cpu_s() - t0;
    }
    return spent * 1e9 / (double)(calls * bytes);
}

static bool alloc(struct bufs *b, const struct op_inctest_config *cfg, size_t bytes)
{
    b->send = malloc(bytes);
    b->recv = malloc(bytes);
    bool ok = b->send != NULL && b->recv != NULL;
    for (int v = 0; v < VARIANTS; v++) {
        b->ref[v] = malloc(bytes);
        ok = ok && b->ref[v] != NULL;
        if (b->ref[v] != NULL)
            it_fill(cfg, 1, (uint64_t)v, b->ref[v]); /* right results, as a good run's */
    }
    return ok;
}

static void release(struct bufs *b)
{
    free(b->send);
    free(b->recv);
    for (int v = 0; v < VARIANTS; v++)
        free(b->ref[v]);
}

int main(void)
{
    static const size_t sizes[] = {16384, 262144, 1048576};
    printf("%10s %12s\n", "bytes", "ns a byte");
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        struct op_inctest_config cfg;
        op_inctest_config_default(&cfg);
        cfg.count = sizes[s] / op_red_type_size(cfg.type);
        struct bufs b;
        uint64_t bad = 0;
        double least = 1e9;
        bool ok = alloc(&b, &cfg, sizes[s]);
        for (int t = 0; ok && t < TRIALS; t++) {
            double ns = trial(&cfg, &b, sizes[s], &bad);
            least = ns < least ? ns : least;
        }
        release(&b);
        if (!ok || bad != 0)
            return 1;
        printf("%10zu %12.3f\n", sizes[s], least);
    }
    return 0;
}
