/* Tests for the reduce module: every op on every type against a scalar
 * reference written here, in host and network order, on unaligned buffers,
 * for each kernel set (baseline and, where the CPU has it, AVX2). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "offpath/reduce.h"

#include "../../src/reduce/reduce_internal.h"

struct tinfo {
    const char *name;
    unsigned size;
    bool is_signed, is_float;
};

static const struct tinfo tinfo[OP_RED_TYPE_COUNT_] = {
    [OP_RED_INT8] = {"int8", 1, true, false},     [OP_RED_INT16] = {"int16", 2, true, false},
    [OP_RED_INT32] = {"int32", 4, true, false},   [OP_RED_INT64] = {"int64", 8, true, false},
    [OP_RED_UINT8] = {"uint8", 1, false, false},  [OP_RED_UINT16] = {"uint16", 2, false, false},
    [OP_RED_UINT32] = {"uint32", 4, false, false}, [OP_RED_UINT64] = {"uint64", 8, false, false},
    [OP_RED_FLOAT32] = {"float32", 4, true, true}, [OP_RED_FLOAT64] = {"float64", 8, true, true},
};

static const size_t counts[] = {0, 1, 7, 15, 16, 17, 64, 127, 128, 129, 1000};
static const size_t offsets[][2] = {{0, 0}, {1, 1}, {1, 0}, {0, 3}}; /* acc, in */
static const enum red_isa isas[] = {RED_ISA_GENERIC, RED_ISA_AVX2};

/* ---- the reference: one element at a time, bit patterns in a uint64_t ---- */

static uint64_t ld_bits(const unsigned char *p, unsigned size)
{
    uint8_t v8;
    uint16_t v16;
    uint32_t v32;
    uint64_t v64;
    switch (size) {
    case 1:
        memcpy(&v8, p, 1);
        return v8;
    case 2:
        memcpy(&v16, p, 2);
        return v16;
    case 4:
        memcpy(&v32, p, 4);
        return v32;
    default:
        memcpy(&v64, p, 8);
        return v64;
    }
}

static void st_bits(unsigned char *p, unsigned size, uint64_t v)
{
    uint8_t v8 = (uint8_t)v;
    uint16_t v16 = (uint16_t)v;
    uint32_t v32 = (uint32_t)v;
    switch (size) {
    case 1:
        memcpy(p, &v8, 1);
        break;
    case 2:
        memcpy(p, &v16, 2);
        break;
    case 4:
        memcpy(p, &v32, 4);
        break;
    default:
        memcpy(p, &v, 8);
        break;
    }
}

/* An unsigned key that orders the values as the type does. */
static uint64_t int_key(const struct tinfo *t, uint64_t v)
{
    if (!t->is_signed)
        return v;
    uint64_t sign = 1ull << (t->size * 8 - 1);
    return ((v ^ sign) - sign) ^ (1ull << 63); /* sign-extend, then bias */
}

static uint64_t ref_int(unsigned op, const struct tinfo *t, uint64_t a, uint64_t b)
{
    uint64_t mask = t->size == 8 ? ~0ull : (1ull << (t->size * 8)) - 1;
    switch (op) {
    case OP_RED_SUM:
        return (a + b) & mask;
    case OP_RED_PROD:
        return (a * b) & mask;
    case OP_RED_MIN:
        return int_key(t, b) < int_key(t, a) ? b : a;
    case OP_RED_MAX:
        return int_key(t, b) > int_key(t, a) ? b : a;
    case OP_RED_LAND:
        return a != 0 && b != 0;
    case OP_RED_LOR:
        return a != 0 || b != 0;
    case OP_RED_LXOR:
        return (a != 0) != (b != 0);
    case OP_RED_BAND:
        return a & b;
    case OP_RED_BOR:
        return a | b;
    default:
        return a ^ b;
    }
}

#define REF_FLOAT(name, F, U)                                                                      \
    static uint64_t name(unsigned op, uint64_t abits, uint64_t bbits)                              \
    {                                                                                              \
        U ua = (U)abits, ub = (U)bbits;                                                            \
        F a, b, r;                                                                                 \
        memcpy(&a, &ua, sizeof a);                                                                 \
        memcpy(&b, &ub, sizeof b);                                                                 \
        switch (op) {                                                                              \
        case OP_RED_SUM: r = a + b; break;                                                         \
        case OP_RED_PROD: r = a * b; break;                                                        \
        case OP_RED_MIN: r = b < a ? b : a; break;                                                 \
        case OP_RED_MAX: r = b > a ? b : a; break;                                                 \
        case OP_RED_LAND: r = (a != 0 && b != 0) ? 1 : 0; break;                                   \
        case OP_RED_LOR: r = (a != 0 || b != 0) ? 1 : 0; break;                                    \
        case OP_RED_LXOR: r = ((a != 0) != (b != 0)) ? 1 : 0; break;                               \
        default: return abits; /* bitwise: invalid, acc untouched */                               \
        }                                                                                          \
        memcpy(&ua, &r, sizeof ua);                                                                \
        return ua;                                                                                 \
    }
REF_FLOAT(ref_f32, float, uint32_t)
REF_FLOAT(ref_f64, double, uint64_t)

static uint64_t ref_elem(unsigned op, unsigned type, uint64_t a, uint64_t b)
{
    if (type == OP_RED_FLOAT32)
        return ref_f32(op, a, b);
    if (type == OP_RED_FLOAT64)
        return ref_f64(op, a, b);
    return ref_int(op, &tinfo[type], a, b);
}

static bool is_nan(unsigned type, uint64_t v)
{
    if (type == OP_RED_FLOAT32)
        return (v & 0x7f800000u) == 0x7f800000u && (v & 0x007fffffu) != 0;
    if (type == OP_RED_FLOAT64)
        return (v & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (v << 12) != 0;
    return false;
}

/* Bitwise equal; two NaNs match whatever their payloads (which NaN of two an
 * addition returns depends on the operand order the compiler picked). */
static bool same(unsigned type, uint64_t x, uint64_t y)
{
    return x == y || (is_nan(type, x) && is_nan(type, y));
}

/* ---- test data: random bits, edge values, small numbers ---- */

static uint64_t rng(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

static const uint64_t edges_f32[] = {
    0x00000000, 0x80000000, 0x7fc00000, 0xffc00000, 0x7fa00000, 0x7f800000, 0xff800000,
    0x00000001, 0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000,
};
static const uint64_t edges_f64[] = {
    0x0000000000000000ull, 0x8000000000000000ull, 0x7ff8000000000000ull, 0xfff8000000000000ull,
    0x7ff4000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull, 0x0000000000000001ull,
    0x800fffffffffffffull, 0x0010000000000000ull, 0x7fefffffffffffffull, 0xffefffffffffffffull,
    0x3ff0000000000000ull, 0xbff0000000000000ull,
};

static uint64_t gen_value(unsigned type, uint64_t *s)
{
    const struct tinfo *t = &tinfo[type];
    uint64_t r = rng(s), pick = r >> 32;
    if (r % 4 == 0 && t->is_float) {
        if (type == OP_RED_FLOAT32)
            return edges_f32[pick % (sizeof edges_f32 / sizeof edges_f32[0])];
        return edges_f64[pick % (sizeof edges_f64 / sizeof edges_f64[0])];
    }
    if (r % 4 == 0) { /* 0, 1, 2, all ones, MIN, MAX, MIN+1, MAX-1 */
        uint64_t sign = 1ull << (t->size * 8 - 1);
        const uint64_t e[] = {0, 1, 2, ~0ull, sign, sign - 1, sign + 1, sign - 2};
        return e[pick % 8];
    }
    if (r % 4 == 1) { /* small numbers: meaningful sums and products */
        int64_t k = (int64_t)(pick % 17) - 8;
        if (type == OP_RED_FLOAT32) {
            float f = (float)k / 4;
            uint32_t u;
            memcpy(&u, &f, 4);
            return u;
        }
        if (type == OP_RED_FLOAT64) {
            double d = (double)k / 4;
            memcpy(&r, &d, 8);
            return r;
        }
        return (uint64_t)k;
    }
    return rng(s);
}

static void fill(unsigned type, unsigned char *p, size_t count, uint64_t *s)
{
    unsigned sz = tinfo[type].size;
    for (size_t i = 0; i < count; i++)
        st_bits(p + i * sz, sz, gen_value(type, s));
}

/* Reverse each element's bytes: network order, written without the module. */
static void swap_elems(unsigned char *dst, const unsigned char *src, unsigned sz, size_t count)
{
    for (size_t i = 0; i < count; i++)
        for (unsigned k = 0; k < sz; k++)
            dst[i * sz + k] = src[i * sz + sz - 1 - k];
}

static unsigned char *xmalloc(size_t n)
{
    unsigned char *p = malloc(n > 0 ? n : 1);
    assert_non_null(p);
    return p;
}

/* Compare got to expected element by element; fail with a useful message. */
static void check(unsigned op, unsigned type, size_t count, const char *what,
                  const unsigned char *got, const unsigned char *exp)
{
    unsigned sz = tinfo[type].size;
    for (size_t i = 0; i < count; i++) {
        uint64_t g = ld_bits(got + i * sz, sz), e = ld_bits(exp + i * sz, sz);
        if (!same(type, g, e))
            fail_msg("%s: op %u type %s count %zu: element %zu is %#llx, expected %#llx", what,
                     op, tinfo[type].name, count, i, (unsigned long long)g, (unsigned long long)e);
    }
}

/* One case: acc op= in, host or network order, buffers at the given offsets,
 * each allocated to its exact end so that ASan sees any overrun. */
static void run_case(unsigned op, unsigned type, size_t count, size_t oa, size_t ob, bool be,
                     uint64_t *seed)
{
    unsigned sz = tinfo[type].size;
    size_t n = count * sz;
    unsigned char *acc = xmalloc(oa + n), *in = xmalloc(ob + n), *wire = xmalloc(ob + n);
    unsigned char *exp = xmalloc(n);
    fill(type, acc + oa, count, seed);
    fill(type, in + ob, count, seed);
    for (size_t i = 0; i < count; i++) {
        uint64_t a = ld_bits(acc + oa + i * sz, sz), b = ld_bits(in + ob + i * sz, sz);
        st_bits(exp + i * sz, sz, ref_elem(op, type, a, b));
    }
    if (be) {
        swap_elems(wire + ob, in + ob, sz, count);
        op_reduce_be(op, type, acc + oa, wire + ob, count);
    } else {
        op_reduce(op, type, acc + oa, in + ob, count);
    }
    check(op, type, count, be ? "op_reduce_be" : "op_reduce", acc + oa, exp);
    free(acc);
    free(in);
    free(wire);
    free(exp);
}

/* Run body for each kernel set this build and CPU have; put back the default. */
#define FOR_EACH_ISA(body)                                                                         \
    do {                                                                                           \
        for (size_t isa_i = 0; isa_i < sizeof isas / sizeof isas[0]; isa_i++) {                    \
            if (!op_red_isa_select(isas[isa_i])) {                                                 \
                print_message("kernel set %d not available here: skipped\n", (int)isas[isa_i]);   \
                continue;                                                                          \
            }                                                                                      \
            body;                                                                                  \
        }                                                                                          \
        assert_true(op_red_isa_select(RED_ISA_AUTO));                                              \
    } while (0)

static void all_cases(bool be)
{
    uint64_t seed = be ? 0x9e3779b97f4a7c15ull : 0x243f6a8885a308d3ull;
    for (unsigned op = 0; op < OP_RED_OP_COUNT_; op++)
        for (unsigned type = 0; type < OP_RED_TYPE_COUNT_; type++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
                    run_case(op, type, counts[c], offsets[o][0], offsets[o][1], be, &seed);
}

static void test_reference_host(void **state)
{
    (void)state;
    FOR_EACH_ISA(all_cases(false));
}

static void test_reference_be(void **state)
{
    (void)state;
    FOR_EACH_ISA(all_cases(true));
}

/* op_reduce_be(in_be) equals op_red_to_be then op_reduce. */
static void be_matches_to_be(void)
{
    uint64_t seed = 7;
    for (unsigned op = 0; op < OP_RED_OP_COUNT_; op++) {
        for (unsigned type = 0; type < OP_RED_TYPE_COUNT_; type++) {
            size_t count = 1000, n = count * tinfo[type].size;
            unsigned char *a1 = xmalloc(n + 1), *a2 = xmalloc(n), *in = xmalloc(n);
            unsigned char *wire = xmalloc(n + 1);
            fill(type, a2, count, &seed);
            memcpy(a1 + 1, a2, n);
            fill(type, in, count, &seed);
            op_red_to_be(type, wire + 1, in, count);
            op_reduce_be(op, type, a1 + 1, wire + 1, count);
            op_reduce(op, type, a2, in, count);
            check(op, type, count, "op_reduce_be vs to_be + op_reduce", a1 + 1, a2);
            free(a1);
            free(a2);
            free(in);
            free(wire);
        }
    }
}

static void test_be_matches_to_be(void **state)
{
    (void)state;
    FOR_EACH_ISA(be_matches_to_be());
}

/* acc and in the same buffer: acc[i] = acc[i] op acc[i]. */
static void alias_cases(void)
{
    uint64_t seed = 11;
    for (unsigned op = 0; op < OP_RED_OP_COUNT_; op++) {
        for (unsigned type = 0; type < OP_RED_TYPE_COUNT_; type++) {
            unsigned sz = tinfo[type].size;
            size_t count = 1000, n = count * sz;
            unsigned char *acc = xmalloc(n), *exp = xmalloc(n);
            fill(type, acc, count, &seed);
            for (size_t i = 0; i < count; i++) {
                uint64_t a = ld_bits(acc + i * sz, sz);
                st_bits(exp + i * sz, sz, ref_elem(op, type, a, a));
            }
            op_reduce(op, type, acc, acc, count);
            check(op, type, count, "op_reduce(acc, acc)", acc, exp);
            free(acc);
            free(exp);
        }
    }
}

static void test_alias(void **state)
{
    (void)state;
    FOR_EACH_ISA(alias_cases());
}

/* to_be reverses each element's bytes (a no-op for bytes); from_be undoes it;
 * both work in place and on unaligned buffers. */
static void byte_order_cases(void)
{
    uint64_t seed = 13;
    for (unsigned type = 0; type < OP_RED_TYPE_COUNT_; type++) {
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            unsigned sz = tinfo[type].size;
            size_t count = counts[c], n = count * sz;
            unsigned char *src = xmalloc(n + 1), *dst = xmalloc(n + 3), *exp = xmalloc(n);
            fill(type, src + 1, count, &seed);
            swap_elems(exp, src + 1, sz, count);
            op_red_to_be(type, dst + 3, src + 1, count);
            assert_memory_equal(dst + 3, exp, n);
            op_red_from_be(type, dst + 3, dst + 3, count); /* in place */
            assert_memory_equal(dst + 3, src + 1, n);
            op_red_to_be(type, dst + 3, dst + 3, count);
            assert_memory_equal(dst + 3, exp, n);
            op_red_from_be(type, src + 1, dst + 3, count);
            swap_elems(exp, dst + 3, sz, count);
            assert_memory_equal(src + 1, exp, n);
            free(src);
            free(dst);
            free(exp);
        }
    }
}

static void test_byte_order(void **state)
{
    (void)state;
    FOR_EACH_ISA(byte_order_cases());
}

/* Bitwise ops on floats are invalid: acc stays as it was, bit for bit. */
static void float_bitwise_noop(void)
{
    uint64_t seed = 17;
    const unsigned types[] = {OP_RED_FLOAT32, OP_RED_FLOAT64};
    const unsigned ops[] = {OP_RED_BAND, OP_RED_BOR, OP_RED_BXOR};
    for (size_t t = 0; t < 2; t++) {
        for (size_t o = 0; o < 3; o++) {
            size_t count = 129, n = count * tinfo[types[t]].size;
            unsigned char *acc = xmalloc(n + 1), *in = xmalloc(n), *keep = xmalloc(n);
            fill(types[t], acc + 1, count, &seed);
            fill(types[t], in, count, &seed);
            memcpy(keep, acc + 1, n);
            op_reduce(ops[o], types[t], acc + 1, in, count);
            assert_memory_equal(acc + 1, keep, n);
            op_reduce_be(ops[o], types[t], acc + 1, in, count);
            assert_memory_equal(acc + 1, keep, n);
            free(acc);
            free(in);
            free(keep);
        }
    }
}

static void test_float_bitwise_noop(void **state)
{
    (void)state;
    FOR_EACH_ISA(float_bitwise_noop());
}

/* Unknown op or type, or count 0: nothing is touched. */
static void test_invalid_args(void **state)
{
    (void)state;
    int32_t acc[4] = {1, 2, 3, 4}, in[4] = {5, 6, 7, 8};
    const int32_t keep[4] = {1, 2, 3, 4};
    op_reduce(OP_RED_OP_COUNT_, OP_RED_INT32, acc, in, 4);
    op_reduce(OP_RED_SUM, OP_RED_TYPE_COUNT_, acc, in, 4);
    op_reduce_be(99, OP_RED_INT32, acc, in, 4);
    op_reduce_be(OP_RED_SUM, 1000, acc, in, 4);
    op_reduce(OP_RED_SUM, OP_RED_INT32, acc, in, 0);
    op_reduce(OP_RED_SUM, OP_RED_INT32, NULL, NULL, 0);
    op_reduce_be(OP_RED_SUM, OP_RED_INT32, NULL, NULL, 0);
    op_red_to_be(OP_RED_TYPE_COUNT_, acc, in, 4);
    op_red_from_be(OP_RED_TYPE_COUNT_, acc, in, 4);
    op_red_to_be(OP_RED_INT32, NULL, NULL, 0);
    assert_memory_equal(acc, keep, sizeof acc);
}

/* A few answers worked out by hand, independent of the reference above. */
static void test_known_values(void **state)
{
    (void)state;
    int8_t i8a[3] = {127, -128, -1}, i8b[3] = {1, -1, -1};
    op_reduce(OP_RED_SUM, OP_RED_INT8, i8a, i8b, 3);
    assert_int_equal(i8a[0], -128);
    assert_int_equal(i8a[1], 127);
    assert_int_equal(i8a[2], -2);

    uint16_t u16a[2] = {65535, 300}, u16b[2] = {65535, 300};
    op_reduce(OP_RED_PROD, OP_RED_UINT16, u16a, u16b, 2);
    assert_int_equal(u16a[0], 1);                         /* 65535^2 mod 2^16 */
    assert_int_equal(u16a[1], (300 * 300) & 0xffff);

    int32_t i32a[2] = {INT32_MIN, 5}, i32b[2] = {-1, -7};
    op_reduce(OP_RED_PROD, OP_RED_INT32, i32a, i32b, 2);  /* INT_MIN * -1 wraps */
    assert_int_equal(i32a[0], INT32_MIN);
    assert_int_equal(i32a[1], -35);

    uint32_t u32a[2] = {0x80000000u, 3}, u32b[2] = {1, 0xffffffffu};
    op_reduce(OP_RED_MIN, OP_RED_UINT32, u32a, u32b, 2);
    assert_int_equal(u32a[0], 1);
    assert_int_equal(u32a[1], 3);
    int64_t i64a[2] = {INT64_MIN, 0}, i64b[2] = {INT64_MAX, -1};
    op_reduce(OP_RED_MAX, OP_RED_INT64, i64a, i64b, 2);
    assert_true(i64a[0] == INT64_MAX && i64a[1] == 0);

    float fa[4] = {1.0f, 0.0f, 2.0f, 0.0f}, fb[4] = {0.0f, -0.0f, 0.0f, 0.0f};
    memcpy(&fb[0], &(uint32_t){0x7fc00000}, 4); /* NaN */
    fa[2] = fb[0];
    op_reduce(OP_RED_MIN, OP_RED_FLOAT32, fa, fb, 4);
    assert_true(fa[0] == 1.0f);                 /* a NaN input never replaces acc */
    assert_false(signbit(fa[1]));               /* -0 < +0 is false: acc stays +0 */
    assert_true(fa[2] != fa[2]);                /* a NaN acc stays */

    double da[3] = {0.0, 0.5, 0.0}, db[3] = {0.0, 0.0, -0.0};
    memcpy(&da[0], &(uint64_t){0x7ff8000000000000ull}, 8);
    op_reduce(OP_RED_LAND, OP_RED_FLOAT64, da, (double[]){2.0, 0.0, 1.0}, 3);
    assert_true(da[0] == 1.0 && da[1] == 0.0 && da[2] == 0.0); /* NaN is true, -0 false */
    op_reduce(OP_RED_LXOR, OP_RED_FLOAT64, da, db, 3);
    assert_true(da[0] == 1.0 && da[1] == 0.0 && da[2] == 0.0);

    uint8_t wire[4] = {0x00, 0x00, 0x01, 0x02}; /* 258 in network order */
    int32_t acc = 1;
    op_reduce_be(OP_RED_SUM, OP_RED_INT32, &acc, wire, 1);
    assert_int_equal(acc, 259);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values),       cmocka_unit_test(test_reference_host),
        cmocka_unit_test(test_reference_be),       cmocka_unit_test(test_be_matches_to_be),
        cmocka_unit_test(test_alias),              cmocka_unit_test(test_byte_order),
        cmocka_unit_test(test_float_bitwise_noop), cmocka_unit_test(test_invalid_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
