/* The device side shared by every API: a device handle over a backend's
 * table (gpu_int.h), and the posting protocol of the persistent kernel —
 * parameters, warm-up, launch only with room for a work-group, resume,
 * stop — and the --gpu_touch passes, written once for OpenCL and Vulkan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_int.h"
#include "wq_layout.h"

#define DEFAULT_GROUP 256
#define TOUCH_ITEMS 64

struct op_gpu_dev {
    const struct opg_backend *be;
    enum op_gpu_api api;
    void *impl;
};

static const struct opg_backend *const backends[OP_GPU_API_COUNT] = {&opg_backend_cl,
                                                                     &opg_backend_vk};

op_status_t opg_refuse(char *why, size_t len, op_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return st;
}

const char *op_gpu_api_str(enum op_gpu_api api)
{
    return api == OP_GPU_API_VULKAN ? "vulkan" : "opencl";
}

const char *op_gpu_api_title(enum op_gpu_api api)
{
    return api == OP_GPU_API_VULKAN ? "Vulkan" : "OpenCL";
}

const char *op_gpu_mem_str(enum op_gpu_mem mem)
{
    static const char *const names[] = {"auto", "device", "host"};
    return (unsigned)mem < 3 ? names[mem] : "?";
}

op_status_t op_gpu_open(enum op_gpu_api api, unsigned platform, unsigned device,
                        enum op_gpu_mem mem, struct op_gpu_dev **out, char *why, size_t why_len)
{
    *out = NULL;
    if ((unsigned)api >= OP_GPU_API_COUNT)
        return opg_refuse(why, why_len, OP_ERR_INVAL, "unknown GPU API %d", (int)api);
    struct op_gpu_dev *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return OP_ERR_NOMEM;
    d->be = backends[api];
    d->api = api;
    op_status_t st = d->be->open(platform, device, mem, &d->impl, why, why_len);
    if (st != OP_OK) {
        free(d);
        return st;
    }
    *out = d;
    return OP_OK;
}

void op_gpu_close(struct op_gpu_dev *dev)
{
    if (dev == NULL)
        return;
    dev->be->close(dev->impl);
    free(dev);
}

enum op_gpu_api op_gpu_dev_api(const struct op_gpu_dev *dev) { return dev->api; }
const char *op_gpu_device_name(const struct op_gpu_dev *dev)
{
    return dev->be->device_name(dev->impl);
}
const char *op_gpu_driver_name(const struct op_gpu_dev *dev)
{
    return dev->be->driver_name(dev->impl);
}
void *op_gpu_alloc(struct op_gpu_dev *dev, size_t len) { return dev->be->alloc(dev->impl, len); }
void op_gpu_free(struct op_gpu_dev *dev, void *p)
{
    if (p != NULL)
        dev->be->free(dev->impl, p);
}

int op_gpu_list(struct op_gpu_info *out, int max)
{
    int n = 0;
    for (unsigned a = 0; a < OP_GPU_API_COUNT; a++)
        n += backends[a]->list(out + (n < max ? n : max), n < max ? max - n : 0);
    return n;
}

/* ---- the posting kernel */

struct op_gpu_poster {
    struct op_gpu_dev *dev;
    void *k;
    struct opg_ctrl *ctrl;
    uint32_t *resume; /* shared: each work-item's next iteration */
    struct op_gpu_post_params p;
    uint32_t group;
    struct opg_args args;
    bool running, stopped;
    /* oldest_pending() as of the last launch's end: resume[] moves only
     * while a launch runs, so it is scanned once per launch, not per step */
    uint32_t oldest;
    struct op_gpu_poster_stats st;
};

static op_status_t check_params(const struct op_gpu_post_params *p, uint32_t depth,
                                uint32_t group, char *why, size_t len)
{
    if (p->threads == 0 || p->threads % group != 0)
        return opg_refuse(why, len, OP_ERR_INVAL,
                          "%u work-items: not a multiple of the work-group (%u)", p->threads,
                          group);
    if (group > depth)
        return opg_refuse(why, len, OP_ERR_INVAL,
                          "a work-group of %u is larger than the queue (%u)", group, depth);
    if (p->slots == 0 || p->iters == 0 || (uint64_t)p->iters * p->threads > UINT32_MAX)
        return opg_refuse(why, len, OP_ERR_INVAL, "bad slots (%u) or iterations (%u)", p->slots,
                          p->iters);
    return OP_OK;
}

/* The oldest ticket no work-item has posted yet; UINT32_MAX when every
 * work-item posted all its writes. */
static uint32_t oldest_pending(const struct op_gpu_poster *po)
{
    uint32_t oldest = UINT32_MAX;
    for (uint32_t g = 0; g < po->p.threads; g++)
        if (po->resume[g] < po->p.iters) {
            uint32_t t = po->resume[g] * po->p.threads + g;
            oldest = t < oldest ? t : oldest;
        }
    return oldest;
}

/* A launch that posts nothing: drivers compile a kernel for its work-group
 * size at its first launch (PoCL, lavapipe: tens of ms), which would
 * otherwise count as posting time. */
static op_status_t warm_up(struct op_gpu_poster *po)
{
    struct opg_args none = po->args;
    none.iters = 0;
    uint64_t ns;
    op_status_t st = po->dev->be->launch(po->k, &none);
    return st == OP_OK ? po->dev->be->wait(po->k, &ns) : st;
}

static op_status_t make_kernel(struct op_gpu_poster *po, char *why, size_t len)
{
    uint32_t depth = po->ctrl->depth;
    const struct opg_bind b[4] = {
        {po->ctrl, sizeof(struct opg_ctrl)},
        {po->ctrl + 1, (size_t)depth * sizeof(struct opg_wqe)},
        {(uint8_t *)(po->ctrl + 1) + (size_t)depth * sizeof(struct opg_wqe),
         (size_t)depth * sizeof(struct opg_cqe)},
        {po->resume, (size_t)po->p.threads * sizeof(uint32_t)}};
    enum opg_kernel kind = po->p.mode == OP_GPU_MODE_BATCH ? OPG_K_BATCH : OPG_K_THREAD;
    return po->dev->be->kernel_create(po->dev->impl, kind, b, 4, po->p.threads, po->group,
                                      &po->k, why, len);
}

op_status_t op_gpu_poster_create(struct op_gpu_dev *dev, void *wq,
                                 const struct op_gpu_post_params *p, struct op_gpu_poster **out,
                                 char *why, size_t why_len)
{
    struct opg_ctrl *ctrl = wq;
    uint32_t group = p->group ? p->group : (p->threads < DEFAULT_GROUP ? p->threads : DEFAULT_GROUP);
    op_status_t st = check_params(p, ctrl->depth, group, why, why_len);
    if (st != OP_OK)
        return st;
    struct op_gpu_poster *po = calloc(1, sizeof(*po));
    if (po == NULL)
        return OP_ERR_NOMEM;
    *po = (struct op_gpu_poster){
        .dev = dev, .ctrl = ctrl, .p = *p, .group = group, .st.group = group,
        .args = {.iters = p->iters, .size = p->size, .slots = p->slots, .rkey = p->rkey,
                 .remote_addr = p->remote_addr,
                 .opcode = p->with_imm ? OPG_WQE_RDMA_WRITE_IMM : OPG_WQE_RDMA_WRITE}};
    po->resume = op_gpu_alloc(dev, (size_t)p->threads * sizeof(uint32_t));
    st = po->resume ? make_kernel(po, why, why_len)
                    : opg_refuse(why, why_len, OP_ERR_NOMEM, "no shared memory for resume[]");
    if (st == OP_OK) {
        memset(po->resume, 0, (size_t)p->threads * sizeof(uint32_t));
        po->oldest = oldest_pending(po);
        if ((st = warm_up(po)) != OP_OK)
            opg_refuse(why, why_len, st, "the posting kernel does not run");
    }
    if (st != OP_OK) {
        op_gpu_poster_destroy(po);
        return st;
    }
    *out = po;
    return OP_OK;
}

static void finish_launch(struct op_gpu_poster *po, uint64_t device_ns)
{
    po->st.device_ns += device_ns;
    po->st.last_end_ns = op_now_ns();
    po->running = false;
    po->oldest = oldest_pending(po);
}

void op_gpu_poster_destroy(struct op_gpu_poster *po)
{
    if (po == NULL)
        return;
    if (po->running)
        op_gpu_poster_stop(po);
    op_gpu_free(po->dev, po->resume);
    if (po->k)
        po->dev->be->kernel_destroy(po->k);
    free(po);
}

/* When to launch again. A launch into a nearly full queue would end at
 * once and be launched again, round and round (with 8-wide work-groups
 * batch groups, a relaunch per 8 free slots made 937 launches for 20
 * iterations of 512): so wait for half the queue, and at least a
 * work-group (room for every work-item was the rule before, which in a
 * queue much deeper than the work-items made a launch per iteration of
 * them). But never wait once the engine
 * has completed everything below the oldest unposted ticket: it is then
 * blocked on that entry (in thread mode later tickets may be committed
 * around it), and only a launch frees anything. */
static bool should_launch(const struct op_gpu_poster *po, uint32_t oldest)
{
    uint32_t bell = atomic_load_explicit(&po->ctrl->doorbell, memory_order_acquire);
    uint32_t released = atomic_load_explicit(&po->ctrl->released, memory_order_acquire);
    uint32_t depth = po->ctrl->depth;
    if (released >= oldest)
        return true;
    return depth - (bell - released) >= (depth / 2 > po->group ? depth / 2 : po->group);
}

int op_gpu_poster_step(struct op_gpu_poster *po)
{
    if (po->running) {
        uint64_t ns = 0;
        int s = po->dev->be->kernel_done(po->k, &ns);
        if (s < 0)
            return OP_ERR_IO;
        if (s == 0)
            return 0;
        finish_launch(po, ns);
    }
    po->st.dev_errors = atomic_load_explicit(&po->ctrl->dev_errors, memory_order_relaxed);
    po->st.first_error = atomic_load_explicit(&po->ctrl->first_error, memory_order_relaxed);
    if (po->stopped || po->st.dev_errors > 0 || po->oldest == UINT32_MAX)
        return 1;
    if (!should_launch(po, po->oldest))
        return 0;
    if (po->st.launches++ == 0)
        po->st.first_launch_ns = op_now_ns();
    if (po->dev->be->launch(po->k, &po->args) != OP_OK)
        return OP_ERR_IO;
    po->running = true;
    return 0;
}

void op_gpu_poster_stop(struct op_gpu_poster *po)
{
    atomic_store_explicit(&po->ctrl->stop, 1, memory_order_relaxed);
    po->stopped = true;
    if (po->running) {
        uint64_t ns = 0;
        po->dev->be->wait(po->k, &ns);
        finish_launch(po, ns);
    }
}

void op_gpu_poster_stats(const struct op_gpu_poster *po, struct op_gpu_poster_stats *s)
{
    *s = po->st;
}

/* ---- --gpu_touch */

struct op_gpu_toucher {
    struct op_gpu_dev *dev;
    void *k;
    uint32_t *sink;
    struct opg_args args;
    bool running;
    uint64_t passes;
};

op_status_t op_gpu_toucher_create(struct op_gpu_dev *dev, const void *mem, size_t len,
                                  struct op_gpu_toucher **out)
{
    struct op_gpu_toucher *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return OP_ERR_NOMEM;
    t->dev = dev;
    t->args.words = (uint32_t)(len / 4 < UINT32_MAX ? len / 4 : UINT32_MAX);
    t->sink = op_gpu_alloc(dev, TOUCH_ITEMS * sizeof(uint32_t));
    const struct opg_bind b[2] = {{(void *)(uintptr_t)mem, (size_t)t->args.words * 4},
                                  {t->sink, TOUCH_ITEMS * sizeof(uint32_t)}};
    char why[160];
    const struct opg_args none = {.words = 0};
    uint64_t ns;
    /* a pass over nothing first: the driver compiles the kernel at its
     * first launch (lavapipe), which would otherwise delay the first pass */
    if (t->sink == NULL ||
        dev->be->kernel_create(dev->impl, OPG_K_TOUCH, b, 2, TOUCH_ITEMS, 0, &t->k, why,
                               sizeof why) != OP_OK ||
        dev->be->launch(t->k, &none) != OP_OK || dev->be->wait(t->k, &ns) != OP_OK) {
        op_gpu_toucher_destroy(t);
        return OP_ERR_INVAL;
    }
    *out = t;
    return OP_OK;
}

uint64_t op_gpu_toucher_step(struct op_gpu_toucher *t)
{
    uint64_t ns;
    if (t->running) {
        int s = t->dev->be->kernel_done(t->k, &ns);
        if (s == 0)
            return t->passes;
        t->running = false;
        t->passes += s > 0;
    }
    t->running = t->dev->be->launch(t->k, &t->args) == OP_OK;
    return t->passes;
}

uint64_t op_gpu_toucher_finish(struct op_gpu_toucher *t)
{
    uint64_t ns;
    if (t->running) {
        t->running = false;
        t->passes += t->dev->be->wait(t->k, &ns) == OP_OK;
    }
    return t->passes;
}

void op_gpu_toucher_destroy(struct op_gpu_toucher *t)
{
    if (t == NULL)
        return;
    uint64_t ns;
    if (t->running)
        t->dev->be->wait(t->k, &ns);
    op_gpu_free(t->dev, t->sink);
    if (t->k)
        t->dev->be->kernel_destroy(t->k);
    free(t);
}
