/* perf: perftest's arithmetic and formats on fixed numbers, the flag rules,
 * and the side channel's parsers with malformed lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../src/perf/perf_int.h"

static char *render(void (*fn)(FILE *, const void *), const void *arg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    fn(f, arg);
    fclose(f);
    return buf;
}

/* ---- latency */

static void test_lat_drops_two_largest_and_takes_median(void **state)
{
    (void)state;
    /* round trips (ns): 10, 20, 30, 40, 1000, 2000 -> the last two dropped */
    const uint64_t stamps[] = {0, 10000, 30000, 60000, 100000, 1100000, 3100000};
    struct op_perf_lat_result r;
    assert_int_equal(op_perf_lat_compute(stamps, 7, 2, 2, &r), OP_OK);
    /* kept 10,20,30,40 us RTT -> one way 5,10,15,20; median of 4 = (10+15)/2 */
    assert_true(r.t_min == 5.0);
    assert_true(r.t_max == 20.0);
    assert_true(r.t_typical == 12.5);
    assert_true(r.t_avg == 12.5);
    /* stdev in floating point: sqrt(mean((x-12.5)^2)) = sqrt(31.25) */
    assert_true(r.t_stdev > 5.5901 && r.t_stdev < 5.5902);
    /* percentiles: sorted[ceil(p*n)] clamped into the kept samples */
    assert_true(r.p99 == 20.0 && r.p999 == 20.0);
    assert_int_equal(r.iters, 7);
}

static void test_lat_read_is_full_round_trip(void **state)
{
    (void)state;
    uint64_t stamps[201];
    for (int i = 0; i <= 200; i++)
        stamps[i] = (uint64_t)i * 8000; /* 8 us each */
    struct op_perf_lat_result r;
    assert_int_equal(op_perf_lat_compute(stamps, 201, 1, 64, &r), OP_OK);
    assert_true(r.t_typical == 8.0 && r.t_min == 8.0 && r.t_max == 8.0);
    assert_true(r.t_stdev == 0.0);
    assert_int_equal(op_perf_lat_compute(stamps, 1, 1, 64, &r), OP_ERR_INVAL);
}

static void test_lat_percentile_index(void **state)
{
    (void)state;
    /* 1000 samples 1..1000 us (+2 huge ones dropped): p99 = sorted[990] */
    uint64_t *stamps = malloc(1003 * sizeof(*stamps));
    assert_non_null(stamps);
    stamps[0] = 0;
    for (int i = 1; i <= 1000; i++)
        stamps[i] = stamps[i - 1] + (uint64_t)i * 1000;
    stamps[1001] = stamps[1000] + 50000000;
    stamps[1002] = stamps[1001] + 60000000;
    struct op_perf_lat_result r;
    assert_int_equal(op_perf_lat_compute(stamps, 1003, 1, 2, &r), OP_OK);
    assert_true(r.p99 == 991.0);  /* sorted[990] holds 991 us */
    assert_true(r.p999 == 1000.0); /* sorted[999] */
    assert_true(r.t_max == 1000.0);
    free(stamps);
}

/* ---- bandwidth */

static void test_bw_average_and_rate(void **state)
{
    (void)state;
    /* 4 messages of 1 MiB posted at 0, completed by 1 s: 4 MiB/s, 4e-6 Mpps */
    const uint64_t posted[] = {0, 0, 0, 0};
    const uint64_t done[] = {250000000, 500000000, 750000000, 1000000000};
    struct op_perf_bw_result r;
    op_perf_bw_compute(posted, done, 4, 1 << 20, 1, false, false, &r);
    assert_true(r.bw_avg > 3.9999 && r.bw_avg < 4.0001);
    assert_true(r.msg_rate > 3.9999e-6 && r.msg_rate < 4.0001e-6);
    op_perf_bw_compute(posted, done, 4, 1 << 20, 1, false, true, &r);
    /* Gb/s: 4 * 2^20 * 8 / 1e9 */
    assert_true(r.bw_avg > 0.033554 && r.bw_avg < 0.033555);
}

static void test_bw_peak_is_best_window(void **state)
{
    (void)state;
    /* messages 2 and 3 went in 10 ms together; the rest slowly */
    const uint64_t posted[] = {0, 100000000, 200000000, 200000000};
    const uint64_t done[] = {100000000, 200000000, 205000000, 210000000};
    struct op_perf_bw_result r;
    op_perf_bw_compute(posted, done, 4, 1000, 1, false, false, &r);
    /* best: i=2..j=3: (210 ms - 200 ms) / 2 = 5 ms per 1000 B */
    assert_true(r.bw_peak > 0.19073 && r.bw_peak < 0.19074);
    op_perf_bw_compute(posted, done, 4, 1000, 1, true, false, &r);
    assert_true(r.bw_peak == 0.0);
    /* with cq_mod 2 only completions 1 and 3 are observed windows' ends */
    op_perf_bw_compute(posted, done, 4, 1000, 2, false, false, &r);
    assert_true(r.bw_peak > 0.19073 && r.bw_peak < 0.19074);
}

/* ---- report formats */

static void banner_write_bw(FILE *f, const void *arg)
{
    const struct op_perf_config *c = arg;
    const struct op_perf_banner b = {.device = "lo", .mtu = 1024, .gid_index = 3};
    op_perf_print_banner(f, c, &b);
}

static void test_banner_exact(void **state)
{
    (void)state;
    struct op_perf_config c;
    op_perf_config_defaults(&c, OP_PERF_WRITE, OP_PERF_BW);
    char *text = render(banner_write_bw, &c);
    assert_string_equal(text, OP_PERF_LINE
                        "                    RDMA_Write BW Test\n"
                        " Dual-port       : OFF\t\tDevice         : lo\n"
                        " Number of qps   : 1\t\tTransport type : IB\n"
                        " Connection type : RC\t\tUsing SRQ      : OFF\n"
                        " TX depth        : 128\n"
                        " CQ Moderation   : 100\n"
                        " Mtu             : 1024[B]\n"
                        " Link type       : Ethernet\n"
                        " GID index       : 3\n"
                        " Max inline data : 0[B]\n"
                        " rdma_cm QPs\t : OFF\n"
                        " Data ex. method : Ethernet\n" OP_PERF_LINE);
    free(text);
}

static void rows(FILE *f, const void *arg)
{
    (void)arg;
    struct op_perf_config c;
    op_perf_config_defaults(&c, OP_PERF_SEND, OP_PERF_BW);
    const struct op_perf_bw_result bw = {2097152, 1000, 23370.21, 23365.53, 0.011683};
    op_perf_print_header(f, &c);
    op_perf_print_bw(f, &c, &bw);
    op_perf_config_defaults(&c, OP_PERF_WRITE, OP_PERF_LAT);
    const struct op_perf_lat_result lat = {2, 1000, 1.5, 9.25, 2.0, 2.5, 0.75, 8.0, 9.0};
    op_perf_print_header(f, &c);
    op_perf_print_lat(f, &c, &lat);
    c.output = OP_PERF_OUT_LAT;
    op_perf_print_lat(f, &c, &lat);
    const struct op_perf_addr a = {0x4a, 0xe03644, 0x1fffbd, 0x7f5e2a4d0000ull, 0x0afa2d45};
    op_perf_print_addr(f, &c, "local", &a);
}

static void test_rows_exact(void **state)
{
    (void)state;
    char *text = render(rows, NULL);
    assert_string_equal(
        text,
        " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n"
        " 2097152    1000             23370.21            23365.53\t\t     0.011683\n"
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
        "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]\n"
        " 2       1000          1.50           9.25         2.00     \t       2.50        "
        "\t0.75   \t\t8.00    \t\t9.00   \n"
        "2.000000\n"
        " local address: LID 0000 QPN 0x004a PSN 0xe03644 RKey 0x1fffbd VAddr 0x007f5e2a4d0000\n"
        " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:250:45:69\n");
    free(text);
}

static void json_all(FILE *f, const void *arg)
{
    (void)arg;
    struct op_perf_config c;
    op_perf_config_defaults(&c, OP_PERF_READ, OP_PERF_BW);
    c.all = true;
    const struct op_perf_banner b = {.device = "lo", .mtu = 4096, .out_reads = 16, .gid_index = 3};
    const struct op_perf_bw_result bw[2] = {{2, 5, 1, 2, 3}, {4, 5, 4, 5, 6}};
    const char *const names[1] = {"retransmissions"};
    const uint64_t vals[1] = {7};
    const struct op_perf_json j = {.banner = &b, .bw = bw, .n = 2, .counter_names = names,
                                   .counter_vals = vals, .n_counters = 1, .data_check = "ok"};
    op_perf_write_json(f, &c, &j);
}

static void test_json_keeps_every_size(void **state)
{
    (void)state;
    char *text = render(json_all, NULL);
    assert_non_null(strstr(text, "\"test\": \"RDMA_Read BW Test\""));
    assert_non_null(strstr(text, "\"Outstand reads\": 16"));
    assert_non_null(strstr(text, " \"results\": [\n  {\"MsgSize\": 2, \"n_iterations\": 5, "
                                 "\"BW_peak\": 1.00, \"BW_average\": 2.00, \"MsgRate\": 3.000000},\n"
                                 "  {\"MsgSize\": 4,"));
    assert_non_null(strstr(text, "\"offpath\": {\"retransmissions\": 7, \"data_check\": \"ok\"}"));
    free(text);
}

/* ---- flag rules */

static void test_config_rules(void **state)
{
    (void)state;
    char why[200];
    struct op_perf_config c;
    op_perf_config_defaults(&c, OP_PERF_WRITE, OP_PERF_BW);
    assert_int_equal(c.iters, 5000);
    assert_int_equal(c.size, 65536);
    c.all = true;
    c.duration_s = 4;
    assert_int_equal(op_perf_config_check(&c, why, sizeof why), OP_ERR_INVAL);
    assert_non_null(strstr(why, "-a"));
    op_perf_config_defaults(&c, OP_PERF_READ, OP_PERF_BW);
    c.type = OP_RDMA_QPT_UC;
    assert_int_equal(op_perf_config_check(&c, why, sizeof why), OP_ERR_INVAL);
    op_perf_config_defaults(&c, OP_PERF_SEND, OP_PERF_LAT);
    assert_int_equal(c.size, 2);
    assert_int_equal(c.iters, 1000);
    c.qps = 2;
    assert_int_equal(op_perf_config_check(&c, why, sizeof why), OP_ERR_INVAL);
    assert_non_null(strstr(why, "-q"));
    /* -I: at most 912 bytes; a READ carries no data to inline */
    op_perf_config_defaults(&c, OP_PERF_WRITE, OP_PERF_LAT);
    c.inline_size = OP_RDMA_MAX_INLINE + 1;
    assert_int_equal(op_perf_config_check(&c, why, sizeof why), OP_ERR_INVAL);
    assert_non_null(strstr(why, "-I (--inline_size)"));
    c.inline_size = 64;
    assert_int_equal(op_perf_config_check(&c, why, sizeof why), OP_OK);
    assert_int_equal(c.inline_size, 64);
    op_perf_config_defaults(&c, OP_PERF_READ, OP_PERF_LAT);
    c.inline_size = 64;
    assert_int_equal(op_perf_config_check(&c, why, sizeof why), OP_OK);
    assert_int_equal(c.inline_size, 0);
    assert_int_equal(c.out_reads, 16); /* -o's default, for READ tests only */
    op_perf_config_defaults(&c, OP_PERF_SEND, OP_PERF_BW);
    c.out_reads = 4;
    assert_int_equal(op_perf_config_check(&c, why, sizeof why), OP_ERR_INVAL);
    assert_non_null(strstr(why, "-o (--outs)"));
    /* perftest's adjustments: tx depth <= iters, cq_mod <= tx depth, margin D/4 */
    op_perf_config_defaults(&c, OP_PERF_SEND, OP_PERF_BW);
    c.iters = 50;
    assert_int_equal(op_perf_config_check(&c, why, sizeof why), OP_OK);
    assert_int_equal(c.tx_depth, 50);
    assert_int_equal(c.cq_mod, 50);
    assert_int_equal(c.rx_depth, 50);
    op_perf_config_defaults(&c, OP_PERF_SEND, OP_PERF_BW);
    c.duration_s = 8;
    assert_int_equal(op_perf_config_check(&c, why, sizeof why), OP_OK);
    assert_int_equal(c.margin_s, 2);
    c.margin_s = 4;
    assert_int_equal(op_perf_config_check(&c, why, sizeof why), OP_ERR_INVAL);
}

/* ---- side channel lines */

static void test_params_roundtrip_and_mismatch(void **state)
{
    (void)state;
    struct op_perf_config c;
    op_perf_config_defaults(&c, OP_PERF_WRITE, OP_PERF_BW);
    struct perf_params a, b;
    char text[PERF_LINE_MAX];
    perf_params_of(&c, &a);
    perf_format_params(&a, text, sizeof text);
    assert_int_equal(perf_parse_params(text, &b), OP_OK);
    assert_null(perf_params_mismatch(&a, &b));
    b.size = 8;
    assert_string_equal(perf_params_mismatch(&a, &b), "-s (--size)");
    b = a;
    b.qps = 3;
    assert_string_equal(perf_params_mismatch(&a, &b), "-q (--qp)");
    b = a;
    b.gpu_threads = 64;
    assert_string_equal(perf_params_mismatch(&a, &b), "--threads");
    b = a;
    b.gpu_mode = 1;
    assert_string_equal(perf_params_mismatch(&a, &b), "--mode");
    b = a;
    b.gpu_fault = 2;
    assert_string_equal(perf_params_mismatch(&a, &b), "--inject_fault");
    b = a;
    b.gpu_slots = 1;
    assert_string_equal(perf_params_mismatch(&a, &b), "--slots");
    b = a;
    b.rdma_cm = 1;
    assert_string_equal(perf_params_mismatch(&a, &b), "-R (--rdma_cm)");
    b = a;
    b.verb = OP_PERF_ATOMIC + 1;
    a.verb = OP_PERF_ATOMIC;
    assert_string_equal(perf_params_mismatch(&a, &b), "-A (--atomic_type)");
    assert_int_equal(perf_parse_params("1 1 65536 0 5000 0 1 0 4096 0 512 1 2 16 1", &b), OP_OK);
    assert_int_equal(b.gpu_threads, 512);
    assert_int_equal(b.gpu_mode, 1);
    assert_int_equal(b.gpu_fault, 2);
    assert_int_equal(b.gpu_slots, 16);
    assert_int_equal(b.rdma_cm, 1);
    const char *bad[] = {"", "1 1", "1 1 65536 0 5000 0 1 0 4096 0 0 0 0 0 0 extra",
                         "x 1 2 3 4 5 6 7 8 9 10 11 12 13 14",
                         "1 1 65536 0 5000 0 1 0 4096 0 0 0 0 0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(perf_parse_params(bad[i], &b), OP_ERR_MALFORMED);
}

static void test_qp_and_done_lines(void **state)
{
    (void)state;
    struct perf_peer p;
    uint32_t idx;
    assert_int_equal(perf_parse_qp("0 11 5785c2 1fffbd 7f5e2a4d0000 7f000001 4791", &idx, &p),
                     OP_OK);
    assert_int_equal(p.qpn, 0x11);
    assert_int_equal(p.psn, 0x5785c2);
    assert_int_equal(p.port, 4791);
    assert_true(p.vaddr == 0x7f5e2a4d0000ull);
    const char *bad_qp[] = {"0 11 5785c2 1fffbd 7f5e2a4d0000 7f000001 0",
                            "0 11 5785c2 1fffbd 7f5e2a4d0000 7f000001 65536",
                            "0 1000000 5785c2 1fffbd 0 7f000001 4791",
                            "0 11 1000000 1fffbd 0 7f000001 4791",
                            "0 11 5785c2 1fffbd 0 7f000001 4791 junk", "0 11"};
    for (size_t i = 0; i < sizeof bad_qp / sizeof bad_qp[0]; i++)
        assert_int_equal(perf_parse_qp(bad_qp[i], &idx, &p), OP_ERR_MALFORMED);

    struct op_perf_bw_result bw = {65536, 5000, 1.25, 2.5, 0.125}, back;
    char text[PERF_LINE_MAX];
    perf_format_bw_done(&bw, text, sizeof text);
    assert_int_equal(perf_parse_bw_done(text, &back), OP_OK);
    assert_memory_equal(&bw, &back, sizeof bw);
    const char *bad_bw[] = {"1 2 nan 1 1", "1 2 1 inf 1", "1 2 1 1 -1", "1 2 1 1 1e300",
                            "1 2 1 1", "1 2 1 1 1 1"};
    for (size_t i = 0; i < sizeof bad_bw / sizeof bad_bw[0]; i++)
        assert_int_equal(perf_parse_bw_done(bad_bw[i], &back), OP_ERR_MALFORMED);

    struct op_perf_lat_result lat = {2, 1000, 1, 2, 3, 4, 5, 6, 7}, lback;
    perf_format_lat_done(&lat, text, sizeof text);
    assert_int_equal(perf_parse_lat_done(text, &lback), OP_OK);
    assert_memory_equal(&lat, &lback, sizeof lat);
    assert_int_equal(perf_parse_lat_done("2 1000 1 2 3 4 5 6 nan", &lback), OP_ERR_MALFORMED);
    assert_int_equal(perf_parse_lat_done("2 1000 1 2 3", &lback), OP_ERR_MALFORMED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lat_drops_two_largest_and_takes_median),
        cmocka_unit_test(test_lat_read_is_full_round_trip),
        cmocka_unit_test(test_lat_percentile_index),
        cmocka_unit_test(test_bw_average_and_rate),
        cmocka_unit_test(test_bw_peak_is_best_window),
        cmocka_unit_test(test_banner_exact),
        cmocka_unit_test(test_rows_exact),
        cmocka_unit_test(test_json_keeps_every_size),
        cmocka_unit_test(test_config_rules),
        cmocka_unit_test(test_params_roundtrip_and_mismatch),
        cmocka_unit_test(test_qp_and_done_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
