/* Built without OpenCL: the engine and Vulkan work, OpenCL says why not. */
#include "gpu_int.h"

static op_status_t none_open(unsigned platform, unsigned device, enum op_gpu_mem mem,
                             void **impl, char *why, size_t len)
{
    (void)platform;
    (void)device;
    (void)mem;
    *impl = NULL;
    return opg_refuse(why, len, OP_ERR_UNSUPPORTED,
                      "no OpenCL platform: offpath was built without OpenCL (install "
                      "ocl-icd-opencl-dev, opencl-c-headers and pocl-opencl-icd, then rebuild)");
}

static int none_list(struct op_gpu_info *out, int max)
{
    (void)out;
    (void)max;
    return 0;
}

/* open always refuses, so no other operation is ever reached */
const struct opg_backend opg_backend_cl = {.open = none_open, .list = none_list};
