/* `offpath gpu list [--json]`: the OpenCL and Vulkan devices this build
 * sees (API, device, driver, memory) and whether each can run the device
 * work queue of gpunetio_write_bw; exit 0 if at least one can, 1 if none. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "offpath/gpu.h"

#define TOOL "gpu"

static const struct option options[] = {{"json", 0, 0, 'j'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};

static void help(void)
{
    printf("Usage: offpath gpu list [--json]\n\n"
           "Lists every OpenCL device (platform,device as --use_opencl takes them) and every\n"
           "Vulkan device (as --use_vulkan and gpunetio_write_bw --api vulkan --device take\n"
           "them): name, driver, memory (OpenCL: SVM capabilities; Vulkan: memory types,\n"
           "DL device-local, HV host-visible, HC host-coherent, HCa host-cached) and whether\n"
           "it runs the device work queue, or what it lacks.\n\n"
           "  -j, --json   one JSON object {\"devices\": [...]}\n"
           "  -h, --help   this text\n"
           "Exit status: 0 when at least one device runs the queue, 1 when none does.\n");
}

static bool set(int opt, const char *val, void *cfg)
{
    (void)val;
    if (opt == 'j')
        *(bool *)cfg = true;
    return opt == 'j';
}

int cli_gpu(int argc, char **argv)
{
    bool json = false;
    int rc = cli_flags(argc, argv, "jh", options, 'h', help, set, &json);
    if (rc >= 0)
        return rc;
    if (optind >= argc || strcmp(argv[optind], "list") != 0 || optind + 1 != argc) {
        cli_bad(TOOL, "expected the command 'list' (offpath gpu list [--json])");
        return 2;
    }
    return op_gpu_list_report(stdout, json) > 0 ? 0 : 1;
}
