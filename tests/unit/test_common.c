/* Unit tests for src/common: status strings, logger, parsers, rng, samples. */
#include <errno.h>
#include <math.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "offpath/common.h"

static void test_status_str(void **state)
{
    (void)state;
    for (int st = OP_ERR_NOSPACE; st <= OP_INPROGRESS; st++) {
        const char *s = op_status_str((op_status_t)st);
        assert_non_null(s);
        assert_string_not_equal(s, "unknown status");
        for (int other = OP_ERR_NOSPACE; other < st; other++)
            assert_string_not_equal(s, op_status_str((op_status_t)other));
    }
    assert_string_equal(op_status_str(OP_OK), "success");
    assert_string_equal(op_status_str((op_status_t)-12), "unknown status");
    assert_string_equal(op_status_str((op_status_t)2), "unknown status");
    assert_string_equal(op_status_str((op_status_t)-1000), "unknown status");
    assert_string_equal(op_status_str((op_status_t)INT32_MIN), "unknown status");
}

/* A failed system call's errno travels in the status, clear of the
 * project's codes, and reads back as the C library's text. */
static void test_status_errno(void **state)
{
    (void)state;
    op_status_t st = op_status_from_errno(EADDRINUSE);
    assert_true(st < OP_ERR_ERRNO_BASE);
    assert_int_equal(op_status_errno(st), EADDRINUSE);
    assert_int_equal(op_status_errno(OP_ERR_IO), 0);
    assert_int_equal(op_status_errno(OP_OK), 0);
    assert_int_equal(op_status_errno(op_status_from_errno(0)), EIO); /* errno lost */
    char want[160];
    snprintf(want, sizeof want, "I/O: %s", strerror(EADDRINUSE));
    assert_string_equal(op_status_str(st), want);
}

/* Reads everything written to f since the start. */
static char *slurp(FILE *f)
{
    long n = ftell(f);
    char *buf = calloc(1, (size_t)n + 1);

    assert_non_null(buf);
    rewind(f);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    return buf;
}

static void test_log_format(void **state)
{
    struct op_log log;
    regex_t re;
    char pattern[512];
    FILE *f = tmpfile();

    (void)state;
    assert_non_null(f);
    op_log_init(&log, "test", OP_LOG_INFO);
    log.stream = f;
    OP_INFO(&log, "hello %d", 42);
    OP_DEBUG(&log, "filtered %d", 1);
    OP_ERROR(&log, "bad thing\n"); /* a trailing newline is not doubled */
    OP_LOG(&log, OP_LOG_CRIT, "crit");
    op_log_write(&log, OP_LOG_TRACE, "filtered too");
    char *text = slurp(f);
    snprintf(pattern, sizeof pattern,
             "^\\[[0-2][0-9]:[0-5][0-9]:[0-6][0-9]:[0-9]{6}\\]\\[%ld\\]\\[test\\]"
             "\\[INF\\] hello 42\n"
             "\\[[^]]*\\]\\[%ld\\]\\[test\\]\\[ERR\\] bad thing\n"
             "\\[[^]]*\\]\\[%ld\\]\\[test\\]\\[CRT\\] crit\n$",
             (long)getpid(), (long)getpid(), (long)getpid());
    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED), 0);
    if (regexec(&re, text, 0, NULL, 0) != 0)
        fail_msg("log text does not match:\n%s", text);
    regfree(&re);
    free(text);
    fclose(f);
}

/* DOCA's own line for the tools that stand in for DOCA's: the [DOCA] tag,
 * then the level, the source file and line, and the log source. */
static void test_log_doca_shape(void **state)
{
    struct op_log log;
    regex_t re;
    char pattern[512];
    FILE *f = tmpfile();

    (void)state;
    assert_non_null(f);
    op_log_init(&log, "dpa_a2a", OP_LOG_TRACE);
    log.stream = f;
    log.doca = true;
    int line = __LINE__ + 1;
    OP_INFO(&log, "Number of processes = %d", 4);
    OP_LOG(&log, OP_LOG_TRACE, "t");
    op_log_write(&log, OP_LOG_WARNING, "no place"); /* not through the macros */
    char *text = slurp(f);
    snprintf(pattern, sizeof pattern,
             "^\\[[0-2][0-9]:[0-5][0-9]:[0-6][0-9]:[0-9]{6}\\]\\[%ld\\]\\[DOCA\\]\\[INF\\]"
             "\\[test_common\\.c:%d\\]\\[dpa_a2a\\] Number of processes = 4\n"
             "\\[[^]]*\\]\\[%ld\\]\\[DOCA\\]\\[TRC\\]\\[test_common\\.c:%d\\]\\[dpa_a2a\\] t\n"
             "\\[[^]]*\\]\\[%ld\\]\\[DOCA\\]\\[WRN\\]\\[\\?:0\\]\\[dpa_a2a\\] no place\n$",
             (long)getpid(), line, (long)getpid(), line + 1, (long)getpid());
    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED), 0);
    if (regexec(&re, text, 0, NULL, 0) != 0)
        fail_msg("log text does not match:\n%s", text);
    regfree(&re);
    free(text);
    fclose(f);
}

static void test_log_levels_and_long_line(void **state)
{
    struct op_log log;
    FILE *f = tmpfile();
    char big[5000];

    (void)state;
    op_log_init(&log, "x", OP_LOG_DISABLE);
    log.stream = f;
    OP_LOG(&log, OP_LOG_CRIT, "nothing");
    assert_int_equal(ftell(f), 0);
    log.level = OP_LOG_TRACE;
    op_log_write(&log, OP_LOG_TRACE, "t");
    op_log_write(&log, OP_LOG_DEBUG, "d");
    op_log_write(&log, OP_LOG_WARNING, "w");
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    op_log_write(&log, OP_LOG_INFO, "%s", big);
    char *text = slurp(f);
    assert_non_null(strstr(text, "[x][TRC] t\n"));
    assert_non_null(strstr(text, "[x][DBG] d\n"));
    assert_non_null(strstr(text, "[x][WRN] w\n"));
    char *line = strstr(text, "[x][INF] ");
    assert_non_null(line);
    assert_int_equal(strlen(line), strlen("[x][INF] ") + sizeof big - 1 + 1);
    free(text);
    fclose(f);
    op_log_write(NULL, OP_LOG_ERROR, "no crash");
}

static void test_log_level_parse(void **state)
{
    (void)state;
    assert_int_equal(op_log_level_parse("10"), 10);
    assert_int_equal(op_log_level_parse("50"), 50);
    assert_int_equal(op_log_level_parse("70"), 70);
    assert_int_equal(op_log_level_parse("9"), -1);
    assert_int_equal(op_log_level_parse("71"), -1);
    assert_int_equal(op_log_level_parse("-50"), -1);
    assert_int_equal(op_log_level_parse("disable"), OP_LOG_DISABLE);
    assert_int_equal(op_log_level_parse("CRITICAL"), OP_LOG_CRIT);
    assert_int_equal(op_log_level_parse("Error"), OP_LOG_ERROR);
    assert_int_equal(op_log_level_parse("warning"), OP_LOG_WARNING);
    assert_int_equal(op_log_level_parse("info"), OP_LOG_INFO);
    assert_int_equal(op_log_level_parse("debug"), OP_LOG_DEBUG);
    assert_int_equal(op_log_level_parse("TRACE"), OP_LOG_TRACE);
    assert_int_equal(op_log_level_parse("verbose"), -1);
    assert_int_equal(op_log_level_parse(""), -1);
    assert_int_equal(op_log_level_parse(" info"), -1);
    assert_int_equal(op_log_level_parse(NULL), -1);
}

static void test_parse_u64(void **state)
{
    uint64_t v = 7;

    (void)state;
    assert_int_equal(op_parse_u64("0", 0, 10, &v), OP_OK);
    assert_int_equal(v, 0);
    assert_int_equal(op_parse_u64("18446744073709551615", 0, UINT64_MAX, &v), OP_OK);
    assert_true(v == UINT64_MAX);
    assert_int_equal(op_parse_u64("0042", 0, 100, &v), OP_OK);
    assert_int_equal(v, 42);
    v = 7;
    assert_int_not_equal(op_parse_u64("18446744073709551616", 0, UINT64_MAX, &v), OP_OK);
    assert_int_not_equal(op_parse_u64("99999999999999999999999", 0, UINT64_MAX, &v), OP_OK);
    assert_int_not_equal(op_parse_u64("", 0, 10, &v), OP_OK);
    assert_int_not_equal(op_parse_u64("-1", 0, 10, &v), OP_OK);
    assert_int_not_equal(op_parse_u64("+1", 0, 10, &v), OP_OK);
    assert_int_not_equal(op_parse_u64(" 1", 0, 10, &v), OP_OK);
    assert_int_not_equal(op_parse_u64("1 ", 0, 10, &v), OP_OK);
    assert_int_not_equal(op_parse_u64("1x", 0, 10, &v), OP_OK);
    assert_int_not_equal(op_parse_u64("0x10", 0, 100, &v), OP_OK);
    assert_int_equal(op_parse_u64("11", 0, 10, &v), OP_ERR_INVAL);
    assert_int_equal(op_parse_u64("4", 5, 10, &v), OP_ERR_INVAL);
    assert_int_equal(op_parse_u64("abc", 0, 10, &v), OP_ERR_MALFORMED);
    assert_int_not_equal(op_parse_u64(NULL, 0, 10, &v), OP_OK);
    assert_int_equal(v, 7); /* untouched on every failure */
}

static void test_parse_double(void **state)
{
    double d = -1.0;

    (void)state;
    assert_int_equal(op_parse_double("0.25", 0, 1, &d), OP_OK);
    assert_true(d == 0.25);
    assert_int_equal(op_parse_double("1e3", 0, 1e4, &d), OP_OK);
    assert_true(d == 1000.0);
    assert_int_equal(op_parse_double("-2.5", -3, 0, &d), OP_OK);
    assert_true(d == -2.5);
    d = -1.0;
    assert_int_not_equal(op_parse_double("", 0, 1, &d), OP_OK);
    assert_int_not_equal(op_parse_double("0.5x", 0, 1, &d), OP_OK);
    assert_int_not_equal(op_parse_double(" 0.5", 0, 1, &d), OP_OK);
    assert_int_not_equal(op_parse_double("0.5 ", 0, 1, &d), OP_OK);
    assert_int_not_equal(op_parse_double("nan", 0, 1, &d), OP_OK);
    assert_int_not_equal(op_parse_double("inf", 0, 1e308, &d), OP_OK);
    assert_int_not_equal(op_parse_double("1e999", 0, 1e308, &d), OP_OK);
    assert_int_not_equal(op_parse_double("0x1p-2", 0, 1, &d), OP_OK);
    assert_int_equal(op_parse_double("1.5", 0, 1, &d), OP_ERR_INVAL);
    assert_int_equal(op_parse_double("-0.1", 0, 1, &d), OP_ERR_INVAL);
    assert_true(d == -1.0);
}

static void test_parse_ipv4(void **state)
{
    uint32_t a = 1;
    uint16_t p = 99;
    char buf[16];

    (void)state;
    assert_int_equal(op_parse_ipv4("127.0.0.21", &a, &p), OP_OK);
    assert_int_equal(a, 0x7f000015);
    assert_int_equal(p, 99); /* untouched: no port given */
    assert_int_equal(op_parse_ipv4("10.1.2.3:4791", &a, &p), OP_OK);
    assert_int_equal(a, 0x0a010203);
    assert_int_equal(p, 4791);
    assert_int_equal(op_parse_ipv4("255.255.255.255:65535", &a, &p), OP_OK);
    assert_int_equal(a, 0xffffffff);
    assert_int_equal(p, 65535);
    assert_int_equal(op_parse_ipv4("0.0.0.0", &a, NULL), OP_OK);
    assert_int_equal(a, 0);

    static const char *const bad[] = {
        "", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.256", "1.2.3.4:0", "1.2.3.4:65536",
        "1.2.3.4:", "1.2.3.4:x", "1.2.3.4:80:81", "1..2.3", ".1.2.3", "1.2.3.", " 1.2.3.4",
        "1.2.3.4 ", "1.2.3.-4", "+1.2.3.4", "01.2.3.4", "1.2.3.4:+80", "1.2.3.4:-1", "a.b.c.d",
        "1.2.3.4x", "1000.2.3.4", "1.2.3.4:99999999999999999999999",
    };
    a = 1;
    p = 99;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (op_parse_ipv4(bad[i], &a, &p) == OP_OK)
            fail_msg("accepted \"%s\"", bad[i]);
    assert_int_equal(a, 1);
    assert_int_equal(p, 99);
    assert_int_not_equal(op_parse_ipv4("1.2.3.4:80", &a, NULL), OP_OK);

    op_format_ipv4(0x7f000016, buf);
    assert_string_equal(buf, "127.0.0.22");
    op_format_ipv4(0xffffffff, buf);
    assert_string_equal(buf, "255.255.255.255");
    op_format_ipv4(0, buf);
    assert_string_equal(buf, "0.0.0.0");
}

static void test_rng(void **state)
{
    struct op_rng a, b, z;
    uint64_t first[8];

    (void)state;
    op_rng_seed(&a, 12345);
    op_rng_seed(&b, 12345);
    for (int i = 0; i < 1000; i++)
        assert_true(op_rng_next(&a) == op_rng_next(&b));
    op_rng_seed(&a, 1);
    op_rng_seed(&b, 2);
    assert_true(op_rng_next(&a) != op_rng_next(&b));

    op_rng_seed(&z, 0); /* zero seed must not stick at zero */
    for (int i = 0; i < 8; i++) {
        first[i] = op_rng_next(&z);
        assert_true(first[i] != 0);
    }
    assert_true(first[0] != first[1]);

    double sum = 0.0;
    op_rng_seed(&a, 7);
    for (int i = 0; i < 100000; i++) {
        double u = op_rng_unit(&a);
        assert_true(u >= 0.0 && u < 1.0);
        sum += u;
    }
    assert_true(fabs(sum / 100000 - 0.5) < 0.01);
}

static void test_samples(void **state)
{
    struct op_samples s;

    (void)state;
    op_samples_init(&s);
    assert_true(op_samples_percentile(&s, 50) == 0.0);
    assert_true(op_samples_mean(&s) == 0.0);
    assert_true(op_samples_stdev(&s) == 0.0);
    /* 1..100 added in a scrambled order */
    for (int i = 0; i < 100; i++)
        assert_int_equal(op_samples_add(&s, (double)((i * 37) % 100 + 1)), OP_OK);
    assert_true(op_samples_percentile(&s, 0) == 1.0);
    assert_true(op_samples_percentile(&s, 1) == 1.0);
    assert_true(op_samples_percentile(&s, 50) == 50.0);
    for (int p = 1; p <= 100; p++) /* no rounding surprises at whole ranks */
        assert_true(op_samples_percentile(&s, p) == (double)p);
    assert_true(op_samples_percentile(&s, 50.5) == 51.0);
    assert_true(op_samples_percentile(&s, 99) == 99.0);
    assert_true(op_samples_percentile(&s, 99.9) == 100.0);
    assert_true(op_samples_percentile(&s, 100) == 100.0);
    assert_true(fabs(op_samples_mean(&s) - 50.5) < 1e-12);
    assert_true(fabs(op_samples_stdev(&s) - 29.011491975882016) < 1e-9);
    /* adding after a sort keeps results right */
    assert_int_equal(op_samples_add(&s, 0.5), OP_OK);
    assert_true(op_samples_percentile(&s, 0) == 0.5);
    op_samples_free(&s);

    /* classic nearest-rank example: 15 20 35 40 50 */
    static const double v[] = {50, 15, 40, 20, 35};
    for (size_t i = 0; i < 5; i++)
        op_samples_add(&s, v[i]);
    assert_true(op_samples_percentile(&s, 5) == 15.0);
    assert_true(op_samples_percentile(&s, 30) == 20.0);
    assert_true(op_samples_percentile(&s, 40) == 20.0);
    assert_true(op_samples_percentile(&s, 50) == 35.0);
    assert_true(op_samples_percentile(&s, 100) == 50.0);
    op_samples_free(&s);

    op_samples_add(&s, 3.0);
    assert_true(op_samples_percentile(&s, 50) == 3.0);
    assert_true(op_samples_stdev(&s) == 0.0);
    op_samples_free(&s);
}

static void test_now_ns(void **state)
{
    (void)state;
    uint64_t a = op_now_ns();
    usleep(2000);
    uint64_t b = op_now_ns();
    assert_true(b - a >= 2 * OP_NS_PER_MS);
    assert_true(b - a < OP_NS_PER_S);
}

/* The counter-set descriptor: every format, a buffer too small, and the
 * pipe between a forked switch and its launcher (exact, another count,
 * a writer that died halfway). */
static void test_counter_set(void **state)
{
    (void)state;
    static const char *const names[] = {"rx", "tx_drops"};
    const uint64_t vals[] = {7, 12345678901ull};
    const struct op_counter_set s = {.names = names, .vals = vals, .n = 2};
    char buf[128];
    assert_string_equal(op_counter_set_format(&s, OP_COUNTERS_KV, buf, sizeof buf),
                        " rx=7 tx_drops=12345678901");
    assert_string_equal(op_counter_set_format(&s, OP_COUNTERS_LINE, buf, sizeof buf),
                        " rx 7, tx_drops 12345678901");
    assert_string_equal(op_counter_set_format(&s, OP_COUNTERS_JSON, buf, sizeof buf),
                        "\"rx\": 7, \"tx_drops\": 12345678901");
    assert_string_equal(op_counter_set_format(&s, OP_COUNTERS_TABLE, buf, sizeof buf),
                        "  rx                   7\n  tx_drops             12345678901\n");
    assert_string_equal(op_counter_set_format(&s, OP_COUNTERS_KV, buf, 6), " rx=7");
    char line[128] = "";
    FILE *m = fmemopen(line, sizeof line, "w");
    assert_true(op_counter_set_render(m, &s, "got {rx} of {tx_drops}; {rx}x {"));
    fflush(m);
    assert_string_equal(line, "got 7 of 12345678901; 7x {");
    rewind(m);
    assert_false(op_counter_set_render(m, &s, "a {rx_pkts} b\n"));
    fputc('\0', m);
    fclose(m);
    assert_string_equal(line, "a {rx_pkts?} b\n");
    int p[2];
    uint64_t got[2] = {0}, got3[3];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(op_counter_set_write(p[1], &s), OP_OK);
    assert_int_equal(op_counter_set_write(p[1], &s), OP_OK);
    assert_int_equal(op_counter_set_read(p[0], got, 2), OP_OK);
    assert_memory_equal(got, vals, sizeof vals);
    assert_int_equal(op_counter_set_read(p[0], got3, 3), OP_ERR_MALFORMED);
    close(p[0]);
    close(p[1]);
    assert_int_equal(pipe(p), 0);
    const uint32_t n = 2;
    assert_int_equal(write(p[1], &n, sizeof n), (ssize_t)sizeof n);
    assert_int_equal(write(p[1], vals, 8), 8); /* one value of two, then the end */
    close(p[1]);
    memset(got, 0xa5, sizeof got);
    assert_int_equal(op_counter_set_read(p[0], got, 2), OP_ERR_TRUNCATED);
    assert_int_equal(got[0], 0xa5a5a5a5a5a5a5a5ull); /* nothing written */
    assert_int_equal(op_counter_set_read(p[0], got, 2), OP_ERR_TRUNCATED); /* at the end */
    close(p[0]);
}

/* A prefix in a temporary folder: bin/offpath (never run, only its folder
 * counts), lib/liboffpath_mpi.so, libexec/offpath/prog (executable). */
static void test_path_find(void **state)
{
    (void)state;
    char root[] = "/tmp/offpath-path-XXXXXX", p[4096], out[4096];
    assert_non_null(mkdtemp(root));
    const char *const made[] = {"bin", "lib", "libexec", "libexec/offpath"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof(p), "%s/%s", root, made[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    snprintf(p, sizeof(p), "%s/lib/liboffpath_mpi.so", root);
    fclose(fopen(p, "w"));
    snprintf(p, sizeof(p), "%s/libexec/offpath/prog", root);
    fclose(fopen(p, "w")); /* readable, not executable yet */
    char exe[4096];
    snprintf(exe, sizeof(exe), "%s/bin/offpath", root);

    const char *const libs[] = {"../mpi", "../lib"};
    assert_true(op_path_find(exe, libs, 2, "liboffpath_mpi.so", R_OK, out, sizeof(out)));
    snprintf(p, sizeof(p), "%s/bin/../lib/liboffpath_mpi.so", root);
    assert_string_equal(out, p);
    /* the first dir that has it wins; an absolute dir is taken as it is */
    snprintf(p, sizeof(p), "%s/libexec/offpath", root);
    const char *const both[] = {p, "../lib"};
    assert_false(op_path_find(exe, both, 2, "prog", X_OK, out, sizeof(out)));
    assert_string_equal(out, "");
    assert_true(op_path_find(exe, both, 2, "prog", R_OK, out, sizeof(out)));
    assert_memory_equal(out, p, strlen(p));
    /* not there, no dirs, no binary, a path that does not fit */
    assert_false(op_path_find(exe, libs, 2, "liboffpath_mpich.so", R_OK, out, sizeof(out)));
    assert_false(op_path_find(exe, libs, 0, "liboffpath_mpi.so", R_OK, out, sizeof(out)));
    assert_false(op_path_find(NULL, libs, 2, "liboffpath_mpi.so", R_OK, out, sizeof(out)));
    assert_true(op_path_find(NULL, both, 2, "prog", R_OK, out, sizeof(out)));
    assert_false(op_path_find(exe, libs, 2, "liboffpath_mpi.so", R_OK, out, 20));
    assert_string_equal(out, "");

    const char *const rm[] = {"lib/liboffpath_mpi.so", "libexec/offpath/prog", "libexec/offpath",
                              "libexec", "lib", "bin", ""};
    for (size_t i = 0; i < 7; i++) {
        snprintf(p, sizeof(p), "%s/%s", root, rm[i]);
        assert_int_equal(remove(p), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_str),      cmocka_unit_test(test_status_errno),
        cmocka_unit_test(test_log_format),
        cmocka_unit_test(test_log_levels_and_long_line),
        cmocka_unit_test(test_log_doca_shape),
        cmocka_unit_test(test_log_level_parse), cmocka_unit_test(test_parse_u64),
        cmocka_unit_test(test_parse_double),   cmocka_unit_test(test_parse_ipv4),
        cmocka_unit_test(test_rng),            cmocka_unit_test(test_samples),
        cmocka_unit_test(test_now_ns),         cmocka_unit_test(test_counter_set),
        cmocka_unit_test(test_path_find),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
