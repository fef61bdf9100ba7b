/* inc_test's report: correctness verdict first, then latency, throughput and
 * the retransmission/drop counters of leaders and switches; text or JSON. */
#include <stdio.h>
#include <string.h>

#include "inctest_internal.h"
#include "offpath/inc.h"
#include "offpath/switch.h"
#include "offpath/wire.h"

struct it_summary {
    int failed, joined;
    uint64_t mismatches, retx, timeouts, dups, done, congested, cuts;
    bool identical;
    double p50, p90, p99, max, mean, ops_per_s, mb_per_s;
};

static void summarize(const struct op_inctest_config *cfg, const struct it_leader *res,
                      struct it_summary *s)
{
    struct op_samples lat;
    op_samples_init(&lat);
    memset(s, 0, sizeof(*s));
    s->identical = true;
    double elapsed = 0;
    for (int l = 0; l < cfg->leaders; l++) {
        const struct it_leader *r = &res[l];
        s->failed += r->status != OP_OK;
        s->joined += r->joined;
        s->mismatches += r->mismatches;
        s->retx += r->retransmissions;
        s->timeouts += r->timeouts;
        s->dups += r->dup_results;
        s->congested += r->congested_results;
        s->cuts += r->window_cuts;
        s->done += r->done_iters;
        if (r->hash != res[0].hash)
            s->identical = false;
        uint64_t n = r->done_iters > cfg->warmup ? r->done_iters - cfg->warmup : 0;
        for (uint64_t i = 0; i < n && i < IT_MAX_SAMPLES; i++)
            op_samples_add(&lat, r->lat_us[i]);
        if ((double)r->elapsed_ns / 1e9 > elapsed)
            elapsed = (double)r->elapsed_ns / 1e9;
    }
    s->p50 = op_samples_percentile(&lat, 50);
    s->p90 = op_samples_percentile(&lat, 90);
    s->p99 = op_samples_percentile(&lat, 99);
    s->max = op_samples_percentile(&lat, 100);
    s->mean = op_samples_mean(&lat);
    op_samples_free(&lat);
    if (elapsed > 0) {
        s->ops_per_s = (double)cfg->iters / elapsed;
        s->mb_per_s = s->ops_per_s * (double)(cfg->count * op_red_type_size(cfg->type)) / 1e6;
    }
}

static void print_failures(const struct op_inctest_config *cfg, const struct it_leader *res)
{
    for (int l = 0; l < cfg->leaders; l++) {
        const struct it_leader *r = &res[l];
        if (!r->joined && r->status != OP_OK)
            fprintf(stderr, "leader %d: join failed: %s%s%s\n", l, op_status_str(r->status),
                    r->status == OP_ERR_REFUSED ? ": " : "",
                    r->status == OP_ERR_REFUSED ? op_inc_reason_str(r->reason) : "");
        else if (r->status != OP_OK)
            fprintf(stderr, "leader %d: allreduce %llu failed: %s\n", l,
                    (unsigned long long)r->failed_iter, op_status_str(r->status));
        if (r->mismatches)
            fprintf(stderr, "leader %d: %llu wrong elements, first at iteration %llu element %llu\n",
                    l, (unsigned long long)r->mismatches, (unsigned long long)r->first_bad_iter,
                    (unsigned long long)r->first_bad_elem);
    }
}

static void print_json(const struct op_inctest_config *cfg, const struct it_summary *s,
                       const uint64_t sw[], double wall, bool pass)
{
    printf("{\"leaders\": %d, \"tors\": %d, \"spines\": %d, \"count\": %llu, \"type\": \"%s\", "
           "\"op\": \"%s\", \"iters\": %llu, \"drop_rate\": %g, \"dup_rate\": %g, "
           "\"pass\": %s, \"failed_leaders\": %d, \"mismatches\": %llu, \"identical\": %s, "
           "\"allreduces_done\": %llu, \"latency_us\": {\"mean\": %.2f, \"p50\": %.2f, "
           "\"p90\": %.2f, \"p99\": %.2f, \"max\": %.2f}, \"ops_per_s\": %.1f, "
           "\"mb_per_s\": %.3f, \"wall_s\": %.3f, \"leader_retransmissions\": %llu, "
           "\"leader_timeouts\": %llu, \"leader_duplicate_results\": %llu, "
           "\"leader_congested_results\": %llu, \"leader_window_cuts\": %llu, \"switch\": {",
           cfg->leaders, cfg->tors, cfg->spines, (unsigned long long)cfg->count,
           op_red_type_name(cfg->type), op_red_op_name(cfg->op), (unsigned long long)cfg->iters,
           cfg->drop_rate, cfg->dup_rate, pass ? "true" : "false", s->failed,
           (unsigned long long)s->mismatches, s->identical ? "true" : "false",
           (unsigned long long)s->done, s->mean, s->p50, s->p90, s->p99, s->max, s->ops_per_s,
           s->mb_per_s, wall, (unsigned long long)s->retx, (unsigned long long)s->timeouts,
           (unsigned long long)s->dups, (unsigned long long)s->congested,
           (unsigned long long)s->cuts);
    op_counters_print(stdout, op_sw_counter_names(), sw, OP_SW_C_COUNT_, OP_COUNTERS_JSON);
    printf("}}\n");
}

static void print_text(const struct op_inctest_config *cfg, const struct it_summary *s,
                       const uint64_t sw[], double wall, bool pass)
{
    printf("offpath inc_test: %d leaders, %d TOR%s, %d SPINE%s, %llu x %s %s, %llu iterations "
           "(+%llu warm-up), drop %.3g dup %.3g\n",
           cfg->leaders, cfg->tors, cfg->tors == 1 ? "" : "s", cfg->spines,
           cfg->spines == 1 ? "" : "s", (unsigned long long)cfg->count,
           op_red_type_name(cfg->type), op_red_op_name(cfg->op), (unsigned long long)cfg->iters,
           (unsigned long long)cfg->warmup, cfg->drop_rate, cfg->dup_rate);
    printf("  results     : %s (%llu allreduces checked element by element, %llu wrong "
           "elements, %s on every leader)\n",
           pass ? "PASS" : "FAIL", (unsigned long long)s->done, (unsigned long long)s->mismatches,
           s->identical ? "identical" : "NOT identical");
    printf("  latency us  : mean %.1f  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n", s->mean, s->p50,
           s->p90, s->p99, s->max);
    printf("  throughput  : %.1f allreduces/s, %.3f MB/s of vector per leader (wall %.2f s)\n",
           s->ops_per_s, s->mb_per_s, wall);
    printf("  leaders     : retransmissions %llu, timeouts %llu, duplicate results %llu, "
           "congested results %llu, window cuts %llu\n",
           (unsigned long long)s->retx, (unsigned long long)s->timeouts,
           (unsigned long long)s->dups, (unsigned long long)s->congested,
           (unsigned long long)s->cuts);
    if (cfg->connect != NULL) {
        printf("  switches    : not started by inc_test (--connect): see their own counters\n");
        return;
    }
    const struct op_counter_set set = {op_sw_counter_names(), sw, OP_SW_C_COUNT_};
    (void)op_counter_set_render(
        stdout, &set,
        "  switches    : contributions {contributions}, chunks aggregated {chunks_aggregated}, "
        "duplicates {duplicates}, retransmissions {retransmissions}, results resent "
        "{results_resent}, injected drops {injected_drops}, injected dups {injected_dups}\n");
    if (cfg->pcap != NULL)
        printf("  capture     : %llu RoCEv2 packets, as the switches received and sent them\n",
               (unsigned long long)op_pcap_count(cfg->pcap));
}

int it_report(const struct op_inctest_config *cfg, const struct it_leader *res,
              const uint64_t sw[], double wall_s)
{
    struct it_summary s;
    summarize(cfg, res, &s);
    bool pass = s.failed == 0 && s.mismatches == 0 && s.identical;
    print_failures(cfg, res);
    if (cfg->json)
        print_json(cfg, &s, sw, wall_s, pass);
    else
        print_text(cfg, &s, sw, wall_s, pass);
    return pass ? 0 : 1;
}
