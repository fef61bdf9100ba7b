/* Vulkan's table (gpu_int.h), device and memory: a Vulkan 1.2 device with
 * a compute queue, a host-visible coherent memory type (device-local too
 * where there is one) and the Vulkan memory model at device scope, which
 * the posting shaders' release/acquire atomics need. Anything missing is
 * refused by name. Shared memory is one buffer per allocation, mapped for
 * its whole life: the host pointer is what the engine and the RDMA memory
 * region use, the buffer what the shaders bind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_int.h"

#define MAX_PHYS 16
#define NEED_ALIGN 64 /* the queue's binds sit at multiples of 64 bytes */
#define NEED_HOST (VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)

/* How well a host-visible coherent type fits the placement: 0 never. */
static int memory_score(VkMemoryPropertyFlags f, enum op_gpu_mem mem)
{
    if ((f & NEED_HOST) != NEED_HOST)
        return 0;
    bool local = f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    bool cached = f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    switch (mem) {
    case OP_GPU_MEM_DEVICE: return local ? 1 : 0;
    /* the host engine polls and copies from it: its caches matter */
    case OP_GPU_MEM_HOST: return local ? 0 : 1 + cached;
    /* Cached first: on a discrete GPU the device-local host-visible type is
     * its BAR, which the host reads uncached (an H200: 24-27 MiB/s of
     * payload against 3.1 GiB/s from host memory); lavapipe's and
     * integrated GPUs' one type is device-local and cached. */
    default: return 1 + 2 * cached + local;
    }
}

/* The best type for the placement; -1 if none. */
static int pick_memory(const VkPhysicalDeviceMemoryProperties *mp, uint32_t allowed,
                       enum op_gpu_mem mem)
{
    int best = -1, best_score = 0;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        int s = (allowed & (1u << i)) ? memory_score(mp->memoryTypes[i].propertyFlags, mem) : 0;
        if (s > best_score) {
            best = (int)i;
            best_score = s;
        }
    }
    return best;
}

static const char *const placement_need[] = {
    "a HOST_VISIBLE | HOST_COHERENT memory type",
    "host-visible coherent device-local memory (memory placement 'device')",
    "host-visible coherent memory not device-local (memory placement 'host')"};

static int compute_family(VkPhysicalDevice pd, uint32_t *ts_bits)
{
    VkQueueFamilyProperties qf[16];
    uint32_t n = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, qf);
    for (uint32_t i = 0; i < n; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            *ts_bits = qf[i].timestampValidBits;
            return (int)i;
        }
    return -1;
}

/* What the queue needs and pd lacks (NULL: nothing); names and driver
 * filled in on the way. */
static const char *missing(VkPhysicalDevice pd, enum op_gpu_mem mem, char *name, size_t nlen,
                           char *driver, size_t dlen, char *buf, size_t blen)
{
    VkPhysicalDeviceDriverProperties drv = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &drv};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    const VkPhysicalDeviceProperties *p = &p2.properties;
    snprintf(name, nlen, "%.120s", p->deviceName);
    snprintf(driver, dlen, "%.60s %.90s", drv.driverName, drv.driverInfo);
    if (p->apiVersion < VK_API_VERSION_1_2) {
        snprintf(buf, blen, "Vulkan 1.2 (the device offers %u.%u)",
                 VK_API_VERSION_MAJOR(p->apiVersion), VK_API_VERSION_MINOR(p->apiVersion));
        return buf;
    }
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &f12};
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    uint32_t ts;
    if (compute_family(pd, &ts) < 0)
        return "a compute queue";
    if (pick_memory(&mp, ~0u, mem) < 0)
        return placement_need[mem];
    if (!f12.vulkanMemoryModel)
        return "the vulkanMemoryModel feature";
    if (!f12.vulkanMemoryModelDeviceScope)
        return "the vulkanMemoryModelDeviceScope feature";
    if (p->limits.minStorageBufferOffsetAlignment > NEED_ALIGN) {
        snprintf(buf, blen, "storage buffer offsets aligned to %d bytes (it needs %llu)",
                 NEED_ALIGN, (unsigned long long)p->limits.minStorageBufferOffsetAlignment);
        return buf;
    }
    return NULL;
}

static op_status_t make_instance(VkInstance *inst, char *why, size_t len)
{
    const VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                   .pApplicationName = "offpath",
                                   .apiVersion = VK_API_VERSION_1_2};
    const VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                     .pApplicationInfo = &app};
    VkResult r = vkCreateInstance(&ci, NULL, inst);
    if (r != VK_SUCCESS)
        return opg_refuse(why, len, OP_ERR_UNSUPPORTED,
                          "no Vulkan device (vkCreateInstance: %d; is a driver such as "
                          "mesa-vulkan-drivers installed?)", (int)r);
    return OP_OK;
}

static op_status_t make_device(struct vk_dev *d, char *why, size_t len)
{
    uint32_t ts_bits = 0;
    d->qfam = (uint32_t)compute_family(d->pd, &ts_bits);
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(d->pd, &p);
    d->timestamps = ts_bits > 0 && p.limits.timestampComputeAndGraphics;
    d->ns_per_tick = p.limits.timestampPeriod;
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(d->pd, &mp);
    d->mem_type = (uint32_t)pick_memory(&mp, ~0u, d->placement);
    const float prio = 1.0f;
    const VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                         .queueFamilyIndex = d->qfam, .queueCount = 1,
                                         .pQueuePriorities = &prio};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .vulkanMemoryModel = VK_TRUE, .vulkanMemoryModelDeviceScope = VK_TRUE};
    const VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                   .pNext = &f12, .queueCreateInfoCount = 1,
                                   .pQueueCreateInfos = &qci};
    VkResult r = vkCreateDevice(d->pd, &ci, NULL, &d->dev);
    if (r != VK_SUCCESS)
        return opg_refuse(why, len, OP_ERR_UNSUPPORTED, "Vulkan device %s: vkCreateDevice: %d",
                          d->name, (int)r);
    vkGetDeviceQueue(d->dev, d->qfam, 0, &d->q);
    return vk_make_modules(d, why, len);
}

static void vk_free_alloc(struct vk_dev *d, struct vk_alloc *a)
{
    vkUnmapMemory(d->dev, a->mem);
    vkDestroyBuffer(d->dev, a->buf, NULL);
    vkFreeMemory(d->dev, a->mem, NULL);
}

static void vk_close(void *impl)
{
    struct vk_dev *d = impl;
    if (d == NULL)
        return;
    if (d->dev) {
        vkDeviceWaitIdle(d->dev);
        for (size_t i = 0; i < d->nallocs; i++)
            vk_free_alloc(d, &d->allocs[i]);
        for (int i = 0; i < 3; i++)
            if (d->mod[i])
                vkDestroyShaderModule(d->dev, d->mod[i], NULL);
        vkDestroyDevice(d->dev, NULL);
    }
    if (d->inst)
        vkDestroyInstance(d->inst, NULL);
    free(d->allocs);
    free(d);
}

static op_status_t pick(struct vk_dev *d, unsigned device, char *why, size_t len)
{
    VkPhysicalDevice pds[MAX_PHYS];
    uint32_t n = MAX_PHYS;
    if (vkEnumeratePhysicalDevices(d->inst, &n, pds) < 0 || n == 0)
        return opg_refuse(why, len, OP_ERR_UNSUPPORTED,
                          "no Vulkan device (vkEnumeratePhysicalDevices found none)");
    if (device >= n)
        return opg_refuse(why, len, OP_ERR_INVAL, "Vulkan device %u: out of range (%u devices)",
                          device, n);
    d->pd = pds[device];
    char buf[120];
    const char *lack = missing(d->pd, d->placement, d->name, sizeof d->name, d->driver, sizeof d->driver, buf,
                               sizeof buf);
    if (lack != NULL)
        return opg_refuse(why, len, OP_ERR_UNSUPPORTED,
                          "Vulkan device %s (%s) lacks %s, which the work queue needs",
                          d->name, d->driver, lack);
    return OP_OK;
}

static op_status_t vk_open(unsigned platform, unsigned device, enum op_gpu_mem mem, void **impl,
                           char *why, size_t len)
{
    if (platform != 0)
        return opg_refuse(why, len, OP_ERR_INVAL, "Vulkan has no platforms: platform %u",
                          platform);
    if ((unsigned)mem > OP_GPU_MEM_HOST)
        return opg_refuse(why, len, OP_ERR_INVAL, "unknown memory placement %d", (int)mem);
    struct vk_dev *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return OP_ERR_NOMEM;
    d->placement = mem;
    op_status_t st = make_instance(&d->inst, why, len);
    if (st == OP_OK)
        st = pick(d, device, why, len);
    if (st == OP_OK)
        st = make_device(d, why, len);
    if (st != OP_OK) {
        vk_close(d);
        return st;
    }
    *impl = d;
    return OP_OK;
}

static const char *vk_device_name(const void *impl) { return ((const struct vk_dev *)impl)->name; }
static const char *vk_driver_name(const void *impl)
{
    return ((const struct vk_dev *)impl)->driver;
}

static bool make_buffer(struct vk_dev *d, struct vk_alloc *a)
{
    const VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = a->len,
                                   .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                                   .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    if (vkCreateBuffer(d->dev, &bi, NULL, &a->buf) != VK_SUCCESS)
        return false;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->dev, a->buf, &req);
    const VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                     .allocationSize = req.size, .memoryTypeIndex = d->mem_type};
    if (!(req.memoryTypeBits & (1u << d->mem_type)) ||
        vkAllocateMemory(d->dev, &ai, NULL, &a->mem) != VK_SUCCESS) {
        vkDestroyBuffer(d->dev, a->buf, NULL);
        return false;
    }
    if (vkBindBufferMemory(d->dev, a->buf, a->mem, 0) != VK_SUCCESS ||
        vkMapMemory(d->dev, a->mem, 0, VK_WHOLE_SIZE, 0, &a->host) != VK_SUCCESS ||
        (uintptr_t)a->host % NEED_ALIGN != 0) {
        if (a->host != NULL)
            vkUnmapMemory(d->dev, a->mem);
        vkDestroyBuffer(d->dev, a->buf, NULL);
        vkFreeMemory(d->dev, a->mem, NULL);
        return false;
    }
    return true;
}

static void *vk_alloc(void *impl, size_t len)
{
    struct vk_dev *d = impl;
    if (d->nallocs == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 8;
        struct vk_alloc *n = realloc(d->allocs, cap * sizeof(*n));
        if (n == NULL)
            return NULL;
        d->allocs = n;
        d->cap = cap;
    }
    struct vk_alloc a = {.len = len ? len : 4};
    if (!make_buffer(d, &a))
        return NULL;
    d->allocs[d->nallocs++] = a;
    return a.host;
}

static void vk_free(void *impl, void *p)
{
    struct vk_dev *d = impl;
    for (size_t i = 0; i < d->nallocs; i++)
        if (d->allocs[i].host == p) {
            vk_free_alloc(d, &d->allocs[i]);
            d->allocs[i] = d->allocs[--d->nallocs];
            return;
        }
}

const struct vk_alloc *vk_find(const struct vk_dev *d, const void *p, size_t len,
                               VkDeviceSize *off)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < d->nallocs; i++) {
        const uint8_t *h = d->allocs[i].host;
        if (b >= h && b < h + d->allocs[i].len && len <= d->allocs[i].len - (size_t)(b - h)) {
            *off = (VkDeviceSize)(b - h);
            return &d->allocs[i];
        }
    }
    return NULL;
}

/* "DL HV HC HCa" per memory type: device-local, host-visible, -coherent, -cached. */
static void describe_memory(VkPhysicalDevice pd, char *out, size_t cap)
{
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    static const struct { VkMemoryPropertyFlags bit; const char *tag; } tags[] = {
        {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, " DL"}, {VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, " HV"},
        {VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, " HC"}, {VK_MEMORY_PROPERTY_HOST_CACHED_BIT, " HCa"}};
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < mp.memoryTypeCount && used + 1 < cap; i++) {
        used += (size_t)snprintf(out + used, cap - used, "%s%u:", i ? "; " : "", i);
        for (size_t t = 0; t < sizeof tags / sizeof tags[0] && used + 1 < cap; t++)
            if (mp.memoryTypes[i].propertyFlags & tags[t].bit)
                used += (size_t)snprintf(out + used, cap - used, "%s", tags[t].tag);
    }
    /* which type each --gpu_memory placement takes ("-": refused) */
    for (int m = OP_GPU_MEM_AUTO; m <= OP_GPU_MEM_HOST && used + 1 < cap; m++) {
        int t = pick_memory(&mp, ~0u, (enum op_gpu_mem)m);
        used += (size_t)snprintf(out + used, cap - used, t < 0 ? "%s%s: -" : "%s%s: %d",
                                 m == OP_GPU_MEM_AUTO ? " (placement " : ", ",
                                 op_gpu_mem_str((enum op_gpu_mem)m), t);
    }
    if (used + 1 < cap)
        snprintf(out + used, cap - used, ")");
}

static int vk_list(struct op_gpu_info *out, int max)
{
    VkInstance inst;
    char why[160];
    if (make_instance(&inst, why, sizeof why) != OP_OK)
        return 0;
    VkPhysicalDevice pds[MAX_PHYS];
    uint32_t n = MAX_PHYS;
    if (vkEnumeratePhysicalDevices(inst, &n, pds) < 0)
        n = 0;
    for (uint32_t i = 0; i < n && (int)i < max; i++) {
        struct op_gpu_info *g = &out[i];
        *g = (struct op_gpu_info){.api = OP_GPU_API_VULKAN, .device = i};
        char buf[120];
        const char *lack = missing(pds[i], OP_GPU_MEM_AUTO, g->name, sizeof g->name, g->driver, sizeof g->driver,
                                   buf, sizeof buf);
        describe_memory(pds[i], g->memory, sizeof g->memory);
        g->can_run = lack == NULL;
        if (lack)
            snprintf(g->why, sizeof g->why, "lacks %s", lack);
    }
    vkDestroyInstance(inst, NULL);
    return (int)n;
}

const struct opg_backend opg_backend_vk = {
    .open = vk_open, .close = vk_close, .device_name = vk_device_name,
    .driver_name = vk_driver_name, .alloc = vk_alloc, .free = vk_free,
    .kernel_create = vk_kernel_create, .launch = vk_launch, .kernel_done = vk_done, .wait = vk_wait,
    .kernel_destroy = vk_kernel_destroy, .list = vk_list};
