/* Unit tests for the osu_* benchmarks' flags (src/cli/osu_args.c): OSU's
 * defaults, every flag, and errors that name the bad flag. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "offpath/osu.h"

static op_status_t parse(enum op_osu_bench b, struct op_osu_config *cfg, char *err,
                         const char *const *args)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = (char *)"osu";
    while (*args != NULL && argc < 15)
        argv[argc++] = (char *)*args++;
    argv[argc] = NULL;
    err[0] = '\0';
    return op_osu_parse(b, argc, argv, cfg, err, 128);
}

static void test_defaults_follow_osu(void **state)
{
    (void)state;
    struct op_osu_config c;
    char err[128];
    const char *none[] = {NULL};
    assert_int_equal(parse(OP_OSU_ALLREDUCE, &c, err, none), OP_OK);
    assert_int_equal(c.min_size, 4);
    assert_int_equal(c.max_size, 1 << 20);
    assert_int_equal(c.iters, 1000);
    assert_int_equal(c.iters_large, 100);
    assert_int_equal(c.warmup, 200);
    assert_int_equal(c.type, OP_OSU_INT);
    assert_false(c.full || c.compare || c.validate || c.help);
    assert_int_equal(c.test_calls, 0);
    assert_string_equal(op_osu_type_name(c.type), "MPI_INT");
}

static void test_every_flag(void **state)
{
    (void)state;
    struct op_osu_config c;
    char err[128];
    const char *a[] = {"-m", "8:4096", "-i", "20", "-x", "2", "-T", "mpi_double", "-f",
                       "--compare", NULL};
    assert_int_equal(parse(OP_OSU_ALLREDUCE, &c, err, a), OP_OK);
    assert_int_equal(c.min_size, 8);
    assert_int_equal(c.max_size, 4096);
    assert_int_equal(c.iters, 20);
    assert_int_equal(c.iters_large, 20); /* -i sets both, as before */
    assert_int_equal(c.warmup, 2);
    assert_int_equal(c.type, OP_OSU_DOUBLE);
    assert_true(c.full && c.compare);
    const char *nb[] = {"-m", "64", "-t", "5", "-c", "--full", NULL};
    assert_int_equal(parse(OP_OSU_IALLREDUCE, &c, err, nb), OP_OK);
    assert_int_equal(c.min_size, 4); /* "-m MAX" keeps the smallest size */
    assert_int_equal(c.max_size, 64);
    assert_int_equal(c.test_calls, 5);
    assert_true(c.validate && c.full);
    const char *h[] = {"-h", NULL};
    assert_int_equal(parse(OP_OSU_IALLREDUCE, &c, err, h), OP_OK);
    assert_true(c.help);
}

static void test_errors_name_the_flag(void **state)
{
    (void)state;
    struct op_osu_config c;
    char err[128];
    const struct {
        enum op_osu_bench bench;
        const char *args[4];
        const char *needle;
    } bad[] = {
        {OP_OSU_ALLREDUCE, {"-m", "8:4", NULL}, "-m"},
        {OP_OSU_ALLREDUCE, {"-m", "x", NULL}, "-m"},
        {OP_OSU_ALLREDUCE, {"-m", "4:536870912", NULL}, "-m"},
        {OP_OSU_ALLREDUCE, {"-i", "0", NULL}, "-i"},
        {OP_OSU_ALLREDUCE, {"-x", "-1", NULL}, "-x"},
        {OP_OSU_ALLREDUCE, {"-T", "mpi_quad", NULL}, "-T"},
        {OP_OSU_ALLREDUCE, {"-t", "3", NULL}, "-t"},      /* blocking: no MPI_Test */
        {OP_OSU_ALLREDUCE, {"-q", NULL}, "-q"},
        {OP_OSU_IALLREDUCE, {"-t", "many", NULL}, "-t"},
        {OP_OSU_IALLREDUCE, {"--compare", NULL}, "--compare"},
        {OP_OSU_IALLREDUCE, {"-i", NULL}, "-i"},
        {OP_OSU_IALLREDUCE, {"stray", NULL}, "unexpected argument"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse(bad[i].bench, &c, err, bad[i].args), OP_ERR_INVAL);
        if (strstr(err, bad[i].needle) == NULL)
            fail_msg("case %zu: \"%s\" does not name %s", i, err, bad[i].needle);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_follow_osu),
        cmocka_unit_test(test_every_flag),
        cmocka_unit_test(test_errors_name_the_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
