/* Built without Vulkan: the engine and OpenCL work, Vulkan says why not. */
#include "gpu_int.h"

static op_status_t none_open(unsigned platform, unsigned device, enum op_gpu_mem mem,
                             void **impl, char *why, size_t len)
{
    (void)platform;
    (void)device;
    (void)mem;
    *impl = NULL;
    return opg_refuse(why, len, OP_ERR_UNSUPPORTED,
                      "no Vulkan device: offpath was built without Vulkan (install "
                      "libvulkan-dev, glslang-tools and mesa-vulkan-drivers, then rebuild)");
}

static int none_list(struct op_gpu_info *out, int max)
{
    (void)out;
    (void)max;
    return 0;
}

/* open always refuses, so no other operation is ever reached */
const struct opg_backend opg_backend_vk = {.open = none_open, .list = none_list};
