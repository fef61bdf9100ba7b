/* Vulkan's side of src/gpu, shared by vk.c (instance, device, memory,
 * list) and vk_kernel.c (pipelines and dispatches). Internal. */
#ifndef OFFPATH_GPU_VK_INT_H
#define OFFPATH_GPU_VK_INT_H

#include <vulkan/vulkan.h>

#include "gpu_int.h"

struct vk_alloc { /* one op_gpu_alloc: a buffer over its own memory, mapped */
    void *host;
    size_t len;
    VkDeviceMemory mem;
    VkBuffer buf;
};

struct vk_dev {
    VkInstance inst;
    VkPhysicalDevice pd;
    VkDevice dev;
    VkQueue q;
    uint32_t qfam;
    uint32_t mem_type;
    enum op_gpu_mem placement;
    bool timestamps;     /* the queue writes timestamps: device time per dispatch */
    double ns_per_tick;  /* timestampPeriod */
    VkShaderModule mod[3]; /* by enum opg_kernel */
    struct vk_alloc *allocs;
    size_t nallocs, cap;
    char name[256];
    char driver[160];
};

/* The allocation holding [p, p + len), and p's offset in it; NULL if none. */
const struct vk_alloc *vk_find(const struct vk_dev *d, const void *p, size_t len,
                               VkDeviceSize *off);
op_status_t vk_make_modules(struct vk_dev *d, char *why, size_t len);

op_status_t vk_kernel_create(void *impl, enum opg_kernel kind, const struct opg_bind *b,
                             unsigned nb, uint32_t global, uint32_t group, void **k, char *why,
                             size_t len);
op_status_t vk_launch(void *k, const struct opg_args *a);
int vk_done(void *k, uint64_t *device_ns);
op_status_t vk_wait(void *k, uint64_t *device_ns);
void vk_kernel_destroy(void *k);

#endif
