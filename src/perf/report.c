/* perftest's report, byte for byte: banner, address lines, result headers
 * and rows (the printf formats of perftest's perftest_parameters.h), and the
 * --out_json report. Everything here writes to a FILE and reads only its
 * arguments. */
#include <inttypes.h>

#include "offpath/perf.h"

static const char *const type_names[] = {"RC", "UC", "UD"};

#define BW_HEADER_MIB                                                                              \
    " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n"
#define BW_HEADER_GBIT                                                                             \
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
#define LAT_HEADER                                                                                 \
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "     \
    "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]\n"
#define BW_ROW " %-7" PRIu64 "    %-10" PRIu64 "       %-7.2lf            %-7.2lf\t\t     %-7.6lf\n"
#define LAT_ROW                                                                                    \
    " %-7" PRIu64 " %" PRIu64 "          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     "   \
    "\t%-7.2f\t\t%-7.2f \t\t%-7.2f\n"

const char *op_perf_title(const struct op_perf_config *cfg)
{
    /* by verb, CMP_AND_SWAP after FETCH_AND_ADD (perftest: "Atomic" and the type) */
    static const char *const titles[5][2][2] = {
        {{"Send BW Test", "Send Bidirectional BW Test"}, {"Send Latency Test", "Send Latency Test"}},
        {{"RDMA_Write BW Test", "RDMA_Write Bidirectional BW Test"},
         {"RDMA_Write Latency Test", "RDMA_Write Latency Test"}},
        {{"RDMA_Read BW Test", "RDMA_Read Bidirectional BW Test"},
         {"RDMA_Read Latency Test", "RDMA_Read Latency Test"}},
        {{"Atomic FETCH_AND_ADD BW Test", "Atomic FETCH_AND_ADD Bidirectional BW Test"},
         {"Atomic FETCH_AND_ADD Latency Test", "Atomic FETCH_AND_ADD Latency Test"}},
        {{"Atomic CMP_AND_SWAP BW Test", "Atomic CMP_AND_SWAP Bidirectional BW Test"},
         {"Atomic CMP_AND_SWAP Latency Test", "Atomic CMP_AND_SWAP Latency Test"}},
    };
    unsigned row = cfg->verb + (cfg->verb == OP_PERF_ATOMIC && cfg->cmp_swap);
    return titles[row][cfg->test][cfg->bidirectional ? 1 : 0];
}

/* READ and atomic tests show how many may be in flight instead of inline data */
static bool shows_outstanding(const struct op_perf_config *cfg)
{
    return cfg->verb == OP_PERF_READ || cfg->verb == OP_PERF_ATOMIC;
}

static bool sends_here(const struct op_perf_config *cfg, bool is_server)
{
    return !is_server || cfg->bidirectional;
}

void op_perf_print_banner(FILE *f, const struct op_perf_config *cfg, const struct op_perf_banner *b)
{
    fprintf(f, OP_PERF_LINE);
    fprintf(f, "                    %s\n", op_perf_title(cfg));
    fprintf(f, " Dual-port       : OFF\t\tDevice         : %s\n", b->device);
    fprintf(f, " Number of qps   : %u\t\tTransport type : IB\n", cfg->qps);
    fprintf(f, " Connection type : %s\t\tUsing SRQ      : %s\n", type_names[cfg->type],
            cfg->use_srq ? "ON" : "OFF");
    if (sends_here(cfg, b->is_server))
        fprintf(f, " TX depth        : %u\n", cfg->tx_depth);
    if (cfg->verb == OP_PERF_SEND && (b->is_server || cfg->bidirectional))
        fprintf(f, " RX depth        : %u\n", cfg->rx_depth);
    if (cfg->test == OP_PERF_BW)
        fprintf(f, " CQ Moderation   : %u\n", cfg->cq_mod);
    fprintf(f, " Mtu             : %u[B]\n", b->mtu);
    fprintf(f, " Link type       : Ethernet\n");
    fprintf(f, " GID index       : %d\n", b->gid_index);
    if (shows_outstanding(cfg))
        fprintf(f, " Outstand reads  : %u\n", b->out_reads);
    else
        fprintf(f, " Max inline data : %u[B]\n", cfg->inline_size);
    fprintf(f, " rdma_cm QPs\t : %s\n", cfg->rdma_cm ? "ON" : "OFF");
    fprintf(f, " Data ex. method : %s\n", cfg->rdma_cm ? "rdma_cm" : "Ethernet");
    fprintf(f, OP_PERF_LINE);
}

void op_perf_print_addr(FILE *f, const struct op_perf_config *cfg, const char *side,
                        const struct op_perf_addr *a)
{
    fprintf(f, " %s address: LID %#04x QPN %#06x PSN %#06x", side, 0u, a->qpn, a->psn);
    if (cfg->verb != OP_PERF_SEND)
        fprintf(f, " RKey %#08x VAddr %#016" PRIx64, a->rkey, a->vaddr);
    fprintf(f, "\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:%02u:%02u:%02u:%02u\n",
            (unsigned)(a->ip >> 24), (unsigned)(a->ip >> 16 & 0xff), (unsigned)(a->ip >> 8 & 0xff),
            (unsigned)(a->ip & 0xff));
}

void op_perf_print_header(FILE *f, const struct op_perf_config *cfg)
{
    if (cfg->output != OP_PERF_OUT_FULL)
        return;
    if (cfg->test == OP_PERF_LAT)
        fputs(LAT_HEADER, f);
    else
        fputs(cfg->report_gbits ? BW_HEADER_GBIT : BW_HEADER_MIB, f);
}

void op_perf_print_bw(FILE *f, const struct op_perf_config *cfg, const struct op_perf_bw_result *r)
{
    if (cfg->output == OP_PERF_OUT_BW)
        fprintf(f, "%lf\n", r->bw_avg);
    else if (cfg->output == OP_PERF_OUT_MSGRATE)
        fprintf(f, "%lf\n", r->msg_rate);
    else if (cfg->output == OP_PERF_OUT_FULL)
        fprintf(f, BW_ROW, r->size, r->iters, r->bw_peak, r->bw_avg, r->msg_rate);
}

void op_perf_print_lat(FILE *f, const struct op_perf_config *cfg,
                       const struct op_perf_lat_result *r)
{
    if (cfg->output == OP_PERF_OUT_LAT)
        fprintf(f, "%lf\n", r->t_typical);
    else if (cfg->output == OP_PERF_OUT_FULL)
        fprintf(f, LAT_ROW, r->size, r->iters, r->t_min, r->t_max, r->t_typical, r->t_avg,
                r->t_stdev, r->p99, r->p999);
}

static void json_test_info(FILE *f, const struct op_perf_config *cfg,
                           const struct op_perf_banner *b)
{
    fprintf(f, " \"test_info\": {\n");
    fprintf(f, "  \"test\": \"%s\",\n", op_perf_title(cfg));
    fprintf(f, "  \"Dual-port\": \"OFF\",\n  \"Device\": \"%s\",\n", b->device);
    fprintf(f, "  \"Number of qps\": %u,\n  \"Transport type\": \"IB\",\n", cfg->qps);
    fprintf(f, "  \"Connection type\": \"%s\",\n  \"Using SRQ\": \"%s\",\n",
            type_names[cfg->type], cfg->use_srq ? "ON" : "OFF");
    if (sends_here(cfg, b->is_server))
        fprintf(f, "  \"TX depth\": %u,\n", cfg->tx_depth);
    if (cfg->verb == OP_PERF_SEND && (b->is_server || cfg->bidirectional))
        fprintf(f, "  \"RX depth\": %u,\n", cfg->rx_depth);
    if (cfg->test == OP_PERF_BW)
        fprintf(f, "  \"CQ Moderation\": %u,\n", cfg->cq_mod);
    fprintf(f, "  \"Mtu\": %u,\n  \"Link type\": \"Ethernet\",\n  \"GID index\": %d,\n", b->mtu,
            b->gid_index);
    if (shows_outstanding(cfg))
        fprintf(f, "  \"Outstand reads\": %u,\n", b->out_reads);
    else
        fprintf(f, "  \"Max inline data\": %u,\n", cfg->inline_size);
    fprintf(f, "  \"rdma_cm QPs\": \"%s\",\n  \"Data ex. method\": \"%s\",\n",
            cfg->rdma_cm ? "ON" : "OFF", cfg->rdma_cm ? "rdma_cm" : "Ethernet");
    fprintf(f, "  \"BW unit\": \"%s\"\n },\n", cfg->report_gbits ? "Gb/sec" : "MiB/sec");
}

static void json_result(FILE *f, const struct op_perf_json *j, size_t i, const char *indent)
{
    if (j->bw != NULL) {
        const struct op_perf_bw_result *r = &j->bw[i];
        fprintf(f,
                "%s{\"MsgSize\": %" PRIu64 ", \"n_iterations\": %" PRIu64
                ", \"BW_peak\": %.2f, \"BW_average\": %.2f, \"MsgRate\": %.6f}",
                indent, r->size, r->iters, r->bw_peak, r->bw_avg, r->msg_rate);
        return;
    }
    const struct op_perf_lat_result *r = &j->lat[i];
    fprintf(f,
            "%s{\"MsgSize\": %" PRIu64 ", \"n_iterations\": %" PRIu64
            ", \"t_min\": %.2f, \"t_max\": %.2f, \"t_typical\": %.2f, \"t_avg\": %.2f, "
            "\"t_stdev\": %.2f, \"percentile_99\": %.2f, \"percentile_99.9\": %.2f}",
            indent, r->size, r->iters, r->t_min, r->t_max, r->t_typical, r->t_avg, r->t_stdev,
            r->p99, r->p999);
}

void op_perf_write_json(FILE *f, const struct op_perf_config *cfg, const struct op_perf_json *j)
{
    fprintf(f, "{\n");
    if (j->test_info != NULL)
        j->test_info(f, j->test_info_ctx);
    else
        json_test_info(f, cfg, j->banner);
    if (cfg->all) {
        fprintf(f, " \"results\": [\n");
        for (size_t i = 0; i < j->n; i++) {
            json_result(f, j, i, "  ");
            fprintf(f, i + 1 < j->n ? ",\n" : "\n");
        }
        fprintf(f, " ],\n");
    } else if (j->n > 0) {
        json_result(f, j, j->n - 1, " \"results\": ");
        fprintf(f, ",\n");
    }
    fprintf(f, " \"offpath\": {");
    op_counters_print(f, j->counter_names, j->counter_vals, j->n_counters, OP_COUNTERS_JSON);
    if (j->data_check != NULL)
        fprintf(f, "%s\"data_check\": \"%s\"", j->n_counters ? ", " : "", j->data_check);
    fprintf(f, "}\n}\n");
}
