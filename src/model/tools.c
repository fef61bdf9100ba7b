/* `offpath model simulate` and `project`: tables, JSON and the plot. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model_internal.h"

void op_model_cfg_default(struct op_model_cfg *cfg)
{
    *cfg = (struct op_model_cfg){.nodes = 4096, .ppn = 8, .min_bytes = 4,
                                 .max_bytes = 64ull << 20, .alg = OP_MODEL_ALG_OMPI,
                                 .tolerance = 0.25, .iters = 200, .seed = 1,
                                 .net = 150, .port = 9391};
    op_model_preset("100G", &cfg->platform);
}

static int unavailable(FILE *out)
{
    (void)out;
    fprintf(stderr, "offpath model: built without SimGrid (install libsimgrid-dev and "
                    "rebuild: scripts/bootstrap, meson -Dsimgrid=enabled)\n");
    return 3;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

int op_model_run_simulate(const struct op_model_cfg *cfg, FILE *out)
{
    if (!op_model_available())
        return unavailable(out);
    struct op_model_scenario sc[OP_MODEL_MODE_COUNT_];
    struct op_model_result res[OP_MODEL_MODE_COUNT_];
    size_t n = 0;
    for (unsigned m = 0; m < OP_MODEL_MODE_COUNT_; m++)
        if (cfg->mode == OP_MODEL_MODE_COUNT_ || cfg->mode == m)
            sc[n++] = (struct op_model_scenario){.mode = m, .alg = cfg->alg,
                                                 .bytes = cfg->min_bytes, .loss = cfg->loss,
                                                 .seed = cfg->seed, .trace = cfg->trace};
    op_status_t st = op_model_simulate(&cfg->platform, cfg->nodes, cfg->ppn, sc, n, res);
    if (st != OP_OK) {
        fprintf(stderr, "offpath model: simulation failed: %s\n", op_status_str(st));
        return 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (cfg->json)
            fprintf(out, "{\"platform\": \"%s\", \"nodes\": %u, \"ppn\": %u, \"mode\": \"%s\", "
                         "\"alg\": \"%s\", \"bytes\": %llu, \"loss\": %g, \"latency_us\": %.4f, "
                         "\"intra_us\": %.4f, \"cpu_us\": %.4f, \"chunks\": %llu, "
                         "\"slots\": %u, \"slot_bytes\": %llu, \"retransmissions\": %llu, "
                         "\"fast_retransmits\": %llu}\n",
                    cfg->platform.name, cfg->nodes, cfg->ppn, op_model_mode_name(sc[i].mode),
                    op_model_alg_name(cfg->alg), (unsigned long long)sc[i].bytes, cfg->loss,
                    res[i].latency_s * 1e6, res[i].intra_s * 1e6, res[i].cpu_s * 1e6,
                    (unsigned long long)res[i].chunks, res[i].slots,
                    (unsigned long long)res[i].slot_bytes,
                    (unsigned long long)res[i].retransmissions,
                    (unsigned long long)res[i].fast_retransmits);
        else
            fprintf(out, "%-7s %10llu B  %12.3f us  (inside the nodes %.3f us; %u switch slots)\n",
                    op_model_mode_name(sc[i].mode), (unsigned long long)sc[i].bytes,
                    res[i].latency_s * 1e6, res[i].intra_s * 1e6, res[i].slots);
    }
    return 0;
}

/* ---- project */

struct row {
    unsigned nodes;
    uint64_t bytes;
    struct op_model_result r[OP_MODEL_MODE_COUNT_];
};

static size_t sizes_of(const struct op_model_cfg *cfg, uint64_t *sizes, size_t max)
{
    size_t n = 0;
    for (uint64_t b = cfg->min_bytes; b <= cfg->max_bytes && n < max; b *= 4)
        sizes[n++] = b;
    if (n > 0 && sizes[n - 1] != cfg->max_bytes && n < max)
        sizes[n++] = cfg->max_bytes;
    return n;
}

/* 4, 16, 64, ... up to --nodes, and --nodes itself */
static size_t counts_of(const struct op_model_cfg *cfg, unsigned *counts, size_t max)
{
    size_t n = 0;
    for (unsigned c = 4; c < cfg->nodes && n < max; c *= 4)
        counts[n++] = c;
    counts[n++] = cfg->nodes;
    return n;
}

static void print_rows(const struct op_model_cfg *cfg, const struct row *rows, size_t n, FILE *out)
{
    if (cfg->json) {
        fprintf(out, "{\"platform\": \"%s\", \"ppn\": %u, \"alg\": \"%s\", \"loss\": %g, \"rows\": [",
                cfg->platform.name, cfg->ppn, op_model_alg_name(cfg->alg), cfg->loss);
        for (size_t i = 0; i < n; i++) {
            const struct op_model_result *r = rows[i].r;
            fprintf(out, "%s\n {\"nodes\": %u, \"bytes\": %llu, \"host_us\": %.4f, \"node_us\": %.4f, "
                         "\"socket_us\": %.4f, \"node_speedup\": %.4f, \"socket_speedup\": %.4f, "
                         "\"slots\": %u, \"slot_bytes\": %llu}",
                    i ? "," : "", rows[i].nodes, (unsigned long long)rows[i].bytes,
                    r[0].latency_s * 1e6, r[1].latency_s * 1e6, r[2].latency_s * 1e6,
                    r[0].latency_s / r[1].latency_s, r[0].latency_s / r[2].latency_s, r[1].slots,
                    (unsigned long long)r[1].slot_bytes);
        }
        fprintf(out, "\n]}\n");
        return;
    }
    fprintf(out, "# platform %s, %u ranks a node, host algorithm %s, loss %g\n", cfg->platform.name,
            cfg->ppn, op_model_alg_name(cfg->alg), cfg->loss);
    fprintf(out, "%6s %10s %13s %13s %13s %8s %8s %6s %10s\n", "nodes", "bytes", "host us",
            "INC node us", "INC socket us", "node x", "socket x", "slots", "slot KiB");
    for (size_t i = 0; i < n; i++) {
        const struct op_model_result *r = rows[i].r;
        fprintf(out, "%6u %10llu %13.2f %13.2f %13.2f %8.2f %8.2f %6u %10.1f\n", rows[i].nodes,
                (unsigned long long)rows[i].bytes, r[0].latency_s * 1e6, r[1].latency_s * 1e6,
                r[2].latency_s * 1e6, r[0].latency_s / r[1].latency_s,
                r[0].latency_s / r[2].latency_s, r[1].slots, r[1].slot_bytes / 1024.0);
    }
}

static int plot(const struct op_model_cfg *cfg, const struct row *rows, size_t n)
{
    char csv[] = "/tmp/offpath-model-csv-XXXXXX";
    int fd = mkstemp(csv);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (f == NULL)
        return 3;
    fprintf(f, "nodes,bytes,host_us,node_us,socket_us,slots\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%u,%llu,%.6f,%.6f,%.6f,%u\n", rows[i].nodes, (unsigned long long)rows[i].bytes,
                rows[i].r[0].latency_s * 1e6, rows[i].r[1].latency_s * 1e6,
                rows[i].r[2].latency_s * 1e6, rows[i].r[1].slots);
    fclose(f);
    char script[4096], title[128];
    snprintf(script, sizeof(script), "%s/model_plot.py", cfg->script_dir);
    snprintf(title, sizeof(title), "%s, %u ranks/node, host: %s", cfg->platform.name, cfg->ppn,
             op_model_alg_name(cfg->alg));
    pid_t pid = fork();
    if (pid == 0) {
        /* Debian's python3 has python3-matplotlib (scripts/bootstrap); a
         * python3 earlier in PATH may not */
        execl("/usr/bin/python3", "python3", script, csv, cfg->plot, title, (char *)NULL);
        execlp("python3", "python3", script, csv, cfg->plot, title, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    unlink(csv);
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "offpath model: the plot (%s) failed\n", script);
        return 3;
    }
    fprintf(stderr, "offpath model: plot written to %s\n", cfg->plot);
    return 0;
}

int op_model_run_project(const struct op_model_cfg *cfg, FILE *out)
{
    if (!op_model_available())
        return unavailable(out);
    uint64_t sizes[64];
    unsigned counts[32];
    size_t ns = sizes_of(cfg, sizes, 64), nc = counts_of(cfg, counts, 32);
    struct row *rows = calloc(ns * nc, sizeof(*rows));
    struct op_model_scenario *sc = calloc(ns * 3, sizeof(*sc));
    struct op_model_result *res = calloc(ns * 3, sizeof(*res));
    int rc = rows && sc && res ? 0 : 3;
    double t0 = now_s();
    for (size_t c = 0; c < nc && rc == 0; c++) {
        for (size_t s = 0; s < ns; s++)
            for (unsigned m = 0; m < 3; m++)
                sc[s * 3 + m] = (struct op_model_scenario){.mode = m, .alg = cfg->alg,
                                                           .bytes = sizes[s], .loss = cfg->loss,
                                                           .seed = cfg->seed};
        op_status_t st = op_model_simulate(&cfg->platform, counts[c], cfg->ppn, sc, ns * 3, res);
        if (st != OP_OK) {
            fprintf(stderr, "offpath model: %u nodes: simulation failed: %s\n", counts[c],
                    op_status_str(st));
            rc = 3;
            break;
        }
        for (size_t s = 0; s < ns; s++) {
            struct row *r = &rows[c * ns + s];
            r->nodes = counts[c];
            r->bytes = sizes[s];
            memcpy(r->r, &res[s * 3], sizeof(r->r));
        }
        fprintf(stderr, "offpath model: %u nodes done (%zu runs), %.1f s\n", counts[c], ns * 3,
                now_s() - t0);
    }
    if (rc == 0) {
        print_rows(cfg, rows, nc * ns, out);
        if (cfg->plot != NULL)
            rc = plot(cfg, rows, nc * ns);
    }
    free(rows);
    free(sc);
    free(res);
    return rc;
}

int op_model_run_platform(const struct op_model_cfg *cfg, FILE *out)
{
    if (mdl_platform_check(&cfg->platform) != OP_OK || cfg->nodes == 0)
        return 2;
    mdl_platform_write(&cfg->platform, cfg->nodes, out);
    return ferror(out) ? 3 : 0;
}
