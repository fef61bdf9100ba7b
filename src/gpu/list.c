/* `offpath gpu list`'s report: every device of every API built in, what
 * memory it offers and whether the work queue runs on it (and if not,
 * what is missing), as text or JSON. */
#include <stdio.h>

#include "offpath/gpu.h"

#define LIST_MAX 32

static void json_str(FILE *out, const char *key, const char *s, const char *sep)
{
    fprintf(out, "\"%s\": \"", key);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(out, "\\u%04x", ch);
        else
            fputc(ch, out);
    }
    fprintf(out, "\"%s", sep);
}

static void print_json(FILE *out, const struct op_gpu_info *g, int n)
{
    fprintf(out, "{\"devices\": [");
    for (int i = 0; i < n; i++) {
        fprintf(out, "%s{\"api\": \"%s\", \"platform\": %u, \"device\": %u, ", i ? ", " : "",
                op_gpu_api_str(g[i].api), g[i].platform, g[i].device);
        json_str(out, "name", g[i].name, ", ");
        json_str(out, "driver", g[i].driver, ", ");
        json_str(out, "memory", g[i].memory, ", ");
        fprintf(out, "\"can_run_queue\": %s, ", g[i].can_run ? "true" : "false");
        json_str(out, "missing", g[i].why, "}");
    }
    fprintf(out, "]}\n");
}

static void print_text(FILE *out, const struct op_gpu_info *g, int n)
{
    if (n == 0)
        fprintf(out, "no OpenCL or Vulkan device (see docs/gpu.md for the packages)\n");
    for (int i = 0; i < n; i++) {
        if (g[i].api == OP_GPU_API_OPENCL)
            fprintf(out, "opencl %u,%u  ", g[i].platform, g[i].device);
        else
            fprintf(out, "vulkan %u    ", g[i].device);
        fprintf(out, "%s\n  driver: %s\n  memory: %s\n  queue:  %s%s\n", g[i].name, g[i].driver,
                g[i].memory, g[i].can_run ? "runs" : "cannot run: ", g[i].why);
    }
}

int op_gpu_list_report(FILE *out, bool json)
{
    struct op_gpu_info g[LIST_MAX];
    int n = op_gpu_list(g, LIST_MAX);
    if (n > LIST_MAX)
        n = LIST_MAX;
    if (json)
        print_json(out, g, n);
    else
        print_text(out, g, n);
    int runs = 0;
    for (int i = 0; i < n; i++)
        runs += g[i].can_run;
    return runs;
}
