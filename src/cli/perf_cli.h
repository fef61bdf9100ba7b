/* Internal to src/cli: the perftest tools' flag state, shared by their
 * parser (perf_cmd.c) and their help text (perf_help.c). */
#ifndef OFFPATH_CLI_PERF_CLI_H
#define OFFPATH_CLI_PERF_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "offpath/perf.h"

struct perf_cli {
    const char *tool;
    struct op_perf_config cfg;
    bool seen[512]; /* perftest refuses a flag given twice */
    const char *pcap;
};

enum { O_REPORT_GBITS = 256, O_TCLASS, O_OUT_JSON, O_OUT_JSON_FILE, O_OUTPUT, O_USE_CUDA,
       O_LOSS, O_LOSS_SEED, O_RETRY, O_LOG_LEVEL, O_NO_PROGRESS, O_XDP, O_PCAP, O_THREADS,
       O_MODE, O_USE_OPENCL, O_BAD_RKEY, O_GPU_TOUCH, O_CPU_WRITES, O_USE_VULKAN, O_API, O_SLOTS,
       O_DEVICE, O_INFINITE, O_SRQ, O_CLIENTS, O_GPU_MEMORY };

/* Flag helpers (perf_cmd.c): false after reporting a bad value. */
bool set_u32(const struct perf_cli *p, const char *flag, const char *val, uint64_t min,
             uint64_t max, uint32_t *out);
bool set_choice(struct perf_cli *p, const char *flag, const char *val, const char *const *names,
                int n, int *out);
/* One of the GPU flags (perf_gpu_flags.c). */
bool perf_gpu_flag(struct perf_cli *p, int opt, const char *val);
/* perftest's usage for p->tool, with p's defaults. */
void perf_help(const struct perf_cli *p);

#endif
