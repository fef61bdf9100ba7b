/* The perftest tools' GPU flags: perftest's --use_opencl, offpath's
 * --use_vulkan and gpunetio_write_bw's posting device (--api, --device,
 * --threads, --mode, --slots, --inject_fault, --cpu_writes). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "perf_cli.h"

/* "<platform>,<device>", perftest's --use_opencl */
static bool parse_opencl(struct perf_cli *p, const char *val)
{
    unsigned a = 0, b = 0;
    int used = -1;
    if (sscanf(val, "%u,%u%n", &a, &b, &used) != 2 || val[used] != '\0' || a > 15 || b > 15) {
        cli_bad(p->tool, "invalid value '%s' for --use_opencl (<platform>,<device>, 0..15 each)",
                val);
        return false;
    }
    p->cfg.gpu.platform = a;
    p->cfg.gpu.device = b;
    return true;
}

/* --use_vulkan=<d> (any tool; gpunetio: the posting device), --api and
 * --device (gpunetio_write_bw's). */
static bool set_gpu_api(struct perf_cli *p, int opt, const char *val)
{
    static const char *const apis[] = {"opencl", "vulkan"};
    struct op_perf_config *c = &p->cfg;
    int v;
    if (opt == O_USE_VULKAN) {
        c->gpu.use_gpu = c->gpu.threads == 0;
        c->gpu.api = OP_GPU_API_VULKAN;
        c->gpu.api_given = true;
        c->gpu.platform = 0;
        return set_u32(p, "--use_vulkan", val, 0, 15, &c->gpu.device);
    }
    if (c->gpu.threads == 0) {
        cli_bad(p->tool, "--api and --device choose gpunetio_write_bw's posting device; the "
                         "ib_* tools take --use_opencl or --use_vulkan");
        return false;
    }
    if (opt == O_DEVICE)
        return set_u32(p, "--device", val, 0, 15, &c->gpu.device);
    if (!set_choice(p, "--api: expected opencl or vulkan", val, apis, 2, &v))
        return false;
    c->gpu.api = (enum op_gpu_api)v;
    c->gpu.api_given = true;
    return true;
}

static bool set_gpu_option(struct perf_cli *p, int opt, const char *val)
{
    static const char *const modes[] = {"thread", "batch"};
    struct op_perf_config *c = &p->cfg;
    if (c->gpu.threads == 0) {
        cli_bad(p->tool, "device-posted writes (--threads, --mode, --slots, --inject_fault, "
                         "--cpu_writes) are gpunetio_write_bw's");
        return false;
    }
    int v;
    switch (opt) {
    case O_THREADS: return set_u32(p, "--threads", val, 1, 65536, &c->gpu.threads);
    case O_SLOTS: return set_u32(p, "--slots", val, 1, 65536, &c->gpu.slots);
    case O_CPU_WRITES:
        return cli_u64(p->tool, "--cpu_writes", val, 0, UINT32_MAX, &c->gpu.cpu_writes);
    case O_MODE:
        if (!set_choice(p, "--mode", val, modes, 2, &v))
            return false;
        c->gpu.mode = v ? OP_GPU_MODE_BATCH : OP_GPU_MODE_THREAD;
        return true;
    default: {
        static const char *const faults[] = {"rkey", "range"};
        if (!set_choice(p, "--inject_fault", val, faults, 2, &v))
            return false;
        c->gpu.fault = v == 0 ? OP_PERF_FAULT_RKEY : OP_PERF_FAULT_RANGE;
        return true;
    }
    }
}

bool perf_gpu_flag(struct perf_cli *p, int opt, const char *val)
{
    struct op_perf_config *c = &p->cfg;
    switch (opt) {
    case O_USE_OPENCL:
        c->gpu.use_gpu = c->gpu.threads == 0; /* gpunetio: the posting device */
        c->gpu.api = OP_GPU_API_OPENCL;
        c->gpu.api_given = true;
        return parse_opencl(p, val);
    case O_USE_VULKAN:
    case O_API:
    case O_DEVICE: return set_gpu_api(p, opt, val);
    case O_GPU_TOUCH: {
        static const char *const touch[] = {"once", "infinite"};
        int v;
        if (!set_choice(p, "--gpu_touch", val, touch, 2, &v))
            return false;
        c->gpu.touch = v == 0 ? OP_PERF_TOUCH_ONCE : OP_PERF_TOUCH_INFINITE;
        return true;
    }
    case O_GPU_MEMORY: {
        static const char *const where[] = {"auto", "device", "host"};
        int v;
        if (!set_choice(p, "--gpu_memory", val, where, 3, &v))
            return false;
        c->gpu.mem = (enum op_gpu_mem)v;
        return true;
    }
    default: return set_gpu_option(p, opt, val);
    }
}
