/* libFuzzer target for perf's side-channel parsers (lines from another
 * process) and its statistics: what parses re-formats to a line that parses
 * to the same values, parsed figures are finite, and the statistics of any
 * time stamps stay ordered. Any violated property aborts. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/perf/perf_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond)
        abort();
}

static void fuzz_lines(const char *line)
{
    char text[PERF_LINE_MAX];
    struct perf_params pa, pb;
    if (perf_parse_params(line, &pa) == OP_OK) {
        perf_format_params(&pa, text, sizeof text);
        require(perf_parse_params(text, &pb) == OP_OK);
        require(perf_params_mismatch(&pa, &pb) == NULL);
    }
    struct perf_peer peer;
    uint32_t idx;
    if (perf_parse_qp(line, &idx, &peer) == OP_OK)
        require(peer.qpn <= 0xffffffu && peer.psn <= 0xffffffu && peer.port != 0);
    struct op_perf_bw_result bw, bw2;
    if (perf_parse_bw_done(line, &bw) == OP_OK) {
        require(isfinite(bw.bw_avg) && bw.bw_avg >= 0 && isfinite(bw.msg_rate));
        perf_format_bw_done(&bw, text, sizeof text);
        require(perf_parse_bw_done(text, &bw2) == OP_OK);
        require(memcmp(&bw, &bw2, sizeof bw) == 0);
    }
    struct op_perf_lat_result lat, lat2;
    if (perf_parse_lat_done(line, &lat) == OP_OK) {
        perf_format_lat_done(&lat, text, sizeof text);
        require(perf_parse_lat_done(text, &lat2) == OP_OK);
        require(memcmp(&lat, &lat2, sizeof lat) == 0);
    }
}

/* The input as increasing time stamps (gaps from its bytes). */
static void fuzz_stats(const uint8_t *data, size_t size)
{
    size_t n = size / 2;
    if (n < 2)
        return;
    uint64_t *t = malloc(n * sizeof(*t));
    require(t != NULL);
    t[0] = 0;
    for (size_t i = 1; i < n; i++)
        t[i] = t[i - 1] + (uint64_t)(data[2 * i] << 8 | data[2 * i + 1]);
    struct op_perf_lat_result r;
    require(op_perf_lat_compute(t, n, 2, 2, &r) == OP_OK);
    require(r.t_min <= r.t_typical && r.t_typical <= r.t_max);
    require(r.t_min <= r.t_avg && r.t_avg <= r.t_max + 1e-9);
    require(r.p99 <= r.p999 && r.p999 <= r.t_max && r.t_stdev >= 0);
    struct op_perf_bw_result b;
    op_perf_bw_compute(t, t, n, 1024, (uint32_t)(data[0] % 8) + 1, false, false, &b);
    require(b.bw_avg >= 0 && b.bw_peak >= 0 && isfinite(b.bw_peak));
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char line[PERF_LINE_MAX];
    size_t n = size < sizeof line - 1 ? size : sizeof line - 1;
    memcpy(line, data, n);
    line[n] = '\0';
    fuzz_lines(line);
    fuzz_stats(data, size);
    return 0;
}
