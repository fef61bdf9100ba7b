/* Vulkan's kernels: the SPIR-V of post_thread.comp, post_batch.comp and
 * touch.comp (compiled by glslangValidator at build time, embedded), one
 * compute pipeline per poster with the work-group size as specialisation
 * constant 0, and a dispatch per launch, recorded again each time (the
 * push constants change), fenced and timed with two timestamps. */
#include <stdlib.h>
#include <string.h>

#include "vk_int.h"
#include "gpu_vk_post_thread.h"
#include "gpu_vk_post_batch.h"
#include "gpu_vk_touch.h"

#define WAIT_NS (60ull * OP_NS_PER_S) /* a launch is bounded: this is a lost device */
#define TOUCH_GROUP 64                /* touch.comp's local_size_x */

struct vk_kern {
    struct vk_dev *d;
    enum opg_kernel kind;
    uint32_t groups;
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkPipeline pipe;
    VkDescriptorPool pool;
    VkDescriptorSet set;
    VkCommandPool cpool;
    VkCommandBuffer cb;
    VkFence fence;
    VkQueryPool queries;
    bool running;
    uint64_t submit_ns; /* without timestamps: host time from submit to the fence */
};

/* The push constants of post_common.glsl's Args, and touch.comp's. */
struct post_args {
    uint32_t iters, opcode, size, slots, rkey, pad;
    uint32_t remote_lo, remote_hi;
};

op_status_t vk_make_modules(struct vk_dev *d, char *why, size_t len)
{
    static const struct { const uint32_t *code; size_t bytes; } spv[3] = {
        {opg_spv_post_thread, sizeof opg_spv_post_thread},
        {opg_spv_post_batch, sizeof opg_spv_post_batch},
        {opg_spv_touch, sizeof opg_spv_touch}};
    for (int i = 0; i < 3; i++) {
        const VkShaderModuleCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                             .codeSize = spv[i].bytes, .pCode = spv[i].code};
        VkResult r = vkCreateShaderModule(d->dev, &ci, NULL, &d->mod[i]);
        if (r != VK_SUCCESS)
            return opg_refuse(why, len, OP_ERR_UNSUPPORTED,
                              "Vulkan device %s refuses shader module %d: %d", d->name, i, (int)r);
    }
    return OP_OK;
}

static bool make_layout(struct vk_kern *k, unsigned nb)
{
    VkDescriptorSetLayoutBinding b[OPG_MAX_BINDS];
    for (unsigned i = 0; i < nb; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    const VkDescriptorSetLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = nb,
        .pBindings = b};
    const VkPushConstantRange pc = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
                                    .size = k->kind == OPG_K_TOUCH ? 4 : sizeof(struct post_args)};
    const VkPipelineLayoutCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                           .setLayoutCount = 1, .pSetLayouts = &k->dsl,
                                           .pushConstantRangeCount = 1, .pPushConstantRanges = &pc};
    return vkCreateDescriptorSetLayout(k->d->dev, &li, NULL, &k->dsl) == VK_SUCCESS &&
           vkCreatePipelineLayout(k->d->dev, &pi, NULL, &k->layout) == VK_SUCCESS;
}

static bool make_pipeline(struct vk_kern *k, uint32_t group)
{
    const VkSpecializationMapEntry e = {.constantID = 0, .offset = 0, .size = sizeof group};
    const VkSpecializationInfo si = {.mapEntryCount = 1, .pMapEntries = &e,
                                     .dataSize = sizeof group, .pData = &group};
    const VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = k->d->mod[k->kind],
                  .pName = "main", .pSpecializationInfo = k->kind == OPG_K_TOUCH ? NULL : &si},
        .layout = k->layout};
    return vkCreateComputePipelines(k->d->dev, VK_NULL_HANDLE, 1, &ci, NULL, &k->pipe) ==
           VK_SUCCESS;
}

/* Each bind must lie inside one allocation, at an offset the device takes. */
static op_status_t bind(struct vk_kern *k, const struct opg_bind *b, unsigned nb, char *why,
                        size_t len)
{
    const VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, nb};
    const VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                           .maxSets = 1, .poolSizeCount = 1, .pPoolSizes = &ps};
    if (vkCreateDescriptorPool(k->d->dev, &pi, NULL, &k->pool) != VK_SUCCESS)
        return opg_refuse(why, len, OP_ERR_NOMEM, "Vulkan descriptor pool");
    const VkDescriptorSetAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, .descriptorPool = k->pool,
        .descriptorSetCount = 1, .pSetLayouts = &k->dsl};
    if (vkAllocateDescriptorSets(k->d->dev, &ai, &k->set) != VK_SUCCESS)
        return opg_refuse(why, len, OP_ERR_NOMEM, "Vulkan descriptor set");
    VkDescriptorBufferInfo info[OPG_MAX_BINDS];
    VkWriteDescriptorSet w[OPG_MAX_BINDS];
    for (unsigned i = 0; i < nb; i++) {
        VkDeviceSize off = 0;
        const struct vk_alloc *a = vk_find(k->d, b[i].ptr, b[i].len, &off);
        if (a == NULL)
            return opg_refuse(why, len, OP_ERR_INVAL,
                              "buffer %u is not memory of this Vulkan device (op_gpu_alloc)", i);
        info[i] = (VkDescriptorBufferInfo){a->buf, off, b[i].len ? b[i].len : VK_WHOLE_SIZE};
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                      .dstSet = k->set, .dstBinding = i, .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &info[i]};
    }
    vkUpdateDescriptorSets(k->d->dev, nb, w, 0, NULL);
    return OP_OK;
}

static bool make_commands(struct vk_kern *k)
{
    const VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                        .queueFamilyIndex = k->d->qfam};
    const VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    const VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                      .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2};
    if (vkCreateCommandPool(k->d->dev, &pi, NULL, &k->cpool) != VK_SUCCESS ||
        vkCreateFence(k->d->dev, &fi, NULL, &k->fence) != VK_SUCCESS ||
        (k->d->timestamps && vkCreateQueryPool(k->d->dev, &qi, NULL, &k->queries) != VK_SUCCESS))
        return false;
    const VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = k->cpool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    return vkAllocateCommandBuffers(k->d->dev, &ai, &k->cb) == VK_SUCCESS;
}

op_status_t vk_kernel_create(void *impl, enum opg_kernel kind, const struct opg_bind *b,
                             unsigned nb, uint32_t global, uint32_t group, void **out, char *why,
                             size_t len)
{
    struct vk_kern *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return OP_ERR_NOMEM;
    uint32_t g = kind == OPG_K_TOUCH ? TOUCH_GROUP : group;
    *k = (struct vk_kern){.d = impl, .kind = kind, .groups = (global + g - 1) / g};
    op_status_t st = OP_OK;
    if (!make_layout(k, nb) || !make_pipeline(k, g))
        st = opg_refuse(why, len, OP_ERR_UNSUPPORTED,
                        "Vulkan device %s: no compute pipeline for a work-group of %u",
                        k->d->name, g);
    if (st == OP_OK)
        st = bind(k, b, nb, why, len);
    if (st == OP_OK && !make_commands(k))
        st = opg_refuse(why, len, OP_ERR_NOMEM, "Vulkan command buffer, fence or queries");
    if (st != OP_OK) {
        vk_kernel_destroy(k);
        return st;
    }
    *out = k;
    return OP_OK;
}

static void push(struct vk_kern *k, const struct opg_args *a)
{
    if (k->kind == OPG_K_TOUCH) {
        vkCmdPushConstants(k->cb, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &a->words);
        return;
    }
    const struct post_args p = {a->iters, a->opcode, a->size, a->slots, a->rkey, 0,
                                (uint32_t)a->remote_addr, (uint32_t)(a->remote_addr >> 32)};
    vkCmdPushConstants(k->cb, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof p, &p);
}

/* The dispatch, then its writes made visible to the host (a fence alone
 * does not: the barrier to HOST_READ does). */
static void record(struct vk_kern *k, const struct opg_args *a)
{
    const VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                         .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    vkBeginCommandBuffer(k->cb, &bi);
    if (k->queries) {
        vkCmdResetQueryPool(k->cb, k->queries, 0, 2);
        vkCmdWriteTimestamp(k->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, k->queries, 0);
    }
    vkCmdBindPipeline(k->cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipe);
    vkCmdBindDescriptorSets(k->cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &k->set, 0,
                            NULL);
    push(k, a);
    vkCmdDispatch(k->cb, k->groups, 1, 1);
    const VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                                .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(k->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    if (k->queries)
        vkCmdWriteTimestamp(k->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, k->queries, 1);
    vkEndCommandBuffer(k->cb);
}

op_status_t vk_launch(void *kp, const struct opg_args *a)
{
    struct vk_kern *k = kp;
    if (vkResetFences(k->d->dev, 1, &k->fence) != VK_SUCCESS ||
        vkResetCommandBuffer(k->cb, 0) != VK_SUCCESS)
        return OP_ERR_IO;
    record(k, a);
    const VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                             .pCommandBuffers = &k->cb};
    k->submit_ns = op_now_ns();
    if (vkQueueSubmit(k->d->q, 1, &si, k->fence) != VK_SUCCESS)
        return OP_ERR_IO;
    k->running = true;
    return OP_OK;
}

static uint64_t finish(struct vk_kern *k)
{
    k->running = false;
    uint64_t t[2] = {0, 0};
    if (k->queries == VK_NULL_HANDLE ||
        vkGetQueryPoolResults(k->d->dev, k->queries, 0, 2, sizeof t, t, sizeof t[0],
                              VK_QUERY_RESULT_64_BIT) != VK_SUCCESS)
        return op_now_ns() - k->submit_ns;
    return t[1] > t[0] ? (uint64_t)((double)(t[1] - t[0]) * k->d->ns_per_tick) : 0;
}

int vk_done(void *kp, uint64_t *device_ns)
{
    struct vk_kern *k = kp;
    VkResult r = vkGetFenceStatus(k->d->dev, k->fence);
    if (r == VK_NOT_READY)
        return 0;
    *device_ns = finish(k);
    return r == VK_SUCCESS ? 1 : -1;
}

op_status_t vk_wait(void *kp, uint64_t *device_ns)
{
    struct vk_kern *k = kp;
    VkResult r = vkWaitForFences(k->d->dev, 1, &k->fence, VK_TRUE, WAIT_NS);
    *device_ns = finish(k);
    return r == VK_SUCCESS ? OP_OK : OP_ERR_TIMEOUT;
}

void vk_kernel_destroy(void *kp)
{
    struct vk_kern *k = kp;
    VkDevice dev = k->d->dev;
    uint64_t ns;
    if (k->running)
        vk_wait(k, &ns);
    if (k->queries)
        vkDestroyQueryPool(dev, k->queries, NULL);
    if (k->fence)
        vkDestroyFence(dev, k->fence, NULL);
    if (k->cpool)
        vkDestroyCommandPool(dev, k->cpool, NULL);
    if (k->pool)
        vkDestroyDescriptorPool(dev, k->pool, NULL);
    if (k->pipe)
        vkDestroyPipeline(dev, k->pipe, NULL);
    if (k->layout)
        vkDestroyPipelineLayout(dev, k->layout, NULL);
    if (k->dsl)
        vkDestroyDescriptorSetLayout(dev, k->dsl, NULL);
    free(k);
}
