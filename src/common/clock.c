/* Clock and pseudo-random numbers. */
#include <time.h>

#include "offpath/common.h"

uint64_t op_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * OP_NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* The seed goes through one splitmix64 step so that nearby seeds (0, 1, 2...)
 * start far apart and seed 0 does not give xorshift's all-zero fixed point. */
void op_rng_seed(struct op_rng *r, uint64_t seed)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    r->s = z != 0 ? z : 0x9e3779b97f4a7c15ull;
}

/* xorshift64* (Vigna 2014). */
uint64_t op_rng_next(struct op_rng *r)
{
    uint64_t x = r->s;

    if (x == 0) /* a zeroed struct that was never seeded */
        x = 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545f4914f6cdd1dull;
}

double op_rng_unit(struct op_rng *r)
{
    return (double)(op_rng_next(r) >> 11) * 0x1.0p-53;
}
