/* OpenCL glue: a device with fine-grained buffer SVM, the posting kernel
 * (embedded source, compiled at open), and its launches. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/gpu.h"
#include "gpu_cl_source.h"
#include "wq_layout.h"

#define NAME_MAX_ 128
#define MAX_PLATFORMS 16
#define MAX_DEVICES 16
#define DEFAULT_GROUP 256

struct op_gpu_cl {
    cl_context ctx;
    cl_device_id dev;
    cl_command_queue q;
    cl_program prog;
    char dev_name[NAME_MAX_], plat_name[NAME_MAX_];
};

struct op_gpu_poster {
    struct op_gpu_cl *cl;
    cl_kernel k;
    struct opg_ctrl *ctrl;
    uint32_t *resume; /* SVM: each work-item's next iteration */
    struct op_gpu_post_params p;
    size_t group;
    cl_event running; /* NULL: no kernel in flight */
    bool stopped;
    struct op_gpu_poster_stats st;
};

static op_status_t refuse(char *why, size_t len, op_status_t st, const char *fmt, ...)
    OP_PRINTF(4, 5);
static op_status_t refuse(char *why, size_t len, op_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return st;
}

static op_status_t pick_device(unsigned platform, unsigned device, struct op_gpu_cl *cl, char *why,
                               size_t len)
{
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint np = 0;
    if (clGetPlatformIDs(MAX_PLATFORMS, plats, &np) != CL_SUCCESS || np == 0)
        return refuse(why, len, OP_ERR_UNSUPPORTED,
                      "no OpenCL platform (clGetPlatformIDs found none)");
    if (platform >= np)
        return refuse(why, len, OP_ERR_INVAL, "OpenCL platform %u: out of range (%u platforms)",
                      platform, np);
    cl_device_id devs[MAX_DEVICES];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[platform], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs, &nd) != CL_SUCCESS ||
        device >= nd)
        return refuse(why, len, OP_ERR_INVAL, "OpenCL device %u: out of range (%u devices)", device,
                      nd);
    cl->dev = devs[device];
    clGetPlatformInfo(plats[platform], CL_PLATFORM_NAME, sizeof cl->plat_name, cl->plat_name, NULL);
    clGetDeviceInfo(cl->dev, CL_DEVICE_NAME, sizeof cl->dev_name, cl->dev_name, NULL);
    cl_device_svm_capabilities svm = 0;
    clGetDeviceInfo(cl->dev, CL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm, NULL);
    if (!(svm & CL_DEVICE_SVM_FINE_GRAIN_BUFFER) || !(svm & CL_DEVICE_SVM_ATOMICS))
        return refuse(why, len, OP_ERR_UNSUPPORTED,
                      "OpenCL device %s has no fine-grained buffer SVM with atomics",
                      cl->dev_name);
    return OP_OK;
}

/* OpenCL C 3.0 with its atomics features (PoCL), else 2.0 (drivers that
 * stop there). */
static op_status_t build(struct op_gpu_cl *cl, char *why, size_t len)
{
    const char *src = opg_cl_source;
    cl_int err;
    cl->prog = clCreateProgramWithSource(cl->ctx, 1, &src, NULL, &err);
    if (err != CL_SUCCESS)
        return refuse(why, len, OP_ERR_NOMEM, "clCreateProgramWithSource: %d", err);
    err = clBuildProgram(cl->prog, 1, &cl->dev, "-cl-std=CL3.0", NULL, NULL);
    if (err != CL_SUCCESS)
        err = clBuildProgram(cl->prog, 1, &cl->dev, "-cl-std=CL2.0", NULL, NULL);
    if (err == CL_SUCCESS)
        return OP_OK;
    char log[512] = "";
    clGetProgramBuildInfo(cl->prog, cl->dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    return refuse(why, len, OP_ERR_UNSUPPORTED, "the posting kernel does not build: %.400s (%d)",
                  log, err);
}

op_status_t op_gpu_cl_open(unsigned platform, unsigned device, struct op_gpu_cl **out, char *why,
                           size_t why_len)
{
    struct op_gpu_cl *cl = calloc(1, sizeof(*cl));
    if (cl == NULL)
        return OP_ERR_NOMEM;
    op_status_t st = pick_device(platform, device, cl, why, why_len);
    cl_int err = CL_SUCCESS;
    if (st == OP_OK)
        cl->ctx = clCreateContext(NULL, 1, &cl->dev, NULL, NULL, &err);
    cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
    if (st == OP_OK && err == CL_SUCCESS)
        cl->q = clCreateCommandQueueWithProperties(cl->ctx, cl->dev, props, &err);
    if (st == OP_OK && err != CL_SUCCESS)
        st = refuse(why, why_len, OP_ERR_UNSUPPORTED, "OpenCL context or queue: %d", err);
    if (st == OP_OK)
        st = build(cl, why, why_len);
    if (st != OP_OK) {
        op_gpu_cl_close(cl);
        return st;
    }
    *out = cl;
    return OP_OK;
}

void op_gpu_cl_close(struct op_gpu_cl *cl)
{
    if (cl == NULL)
        return;
    if (cl->prog)
        clReleaseProgram(cl->prog);
    if (cl->q)
        clReleaseCommandQueue(cl->q);
    if (cl->ctx)
        clReleaseContext(cl->ctx);
    free(cl);
}

const char *op_gpu_cl_device_name(const struct op_gpu_cl *cl) { return cl->dev_name; }
const char *op_gpu_cl_platform_name(const struct op_gpu_cl *cl) { return cl->plat_name; }

void *op_gpu_svm_alloc(struct op_gpu_cl *cl, size_t len)
{
    cl_svm_mem_flags f = CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS;
    return clSVMAlloc(cl->ctx, f, len, 64);
}

void op_gpu_svm_free(struct op_gpu_cl *cl, void *p)
{
    if (p != NULL)
        clSVMFree(cl->ctx, p);
}

static op_status_t check_params(const struct op_gpu_post_params *p, uint32_t depth, size_t group,
                                char *why, size_t len)
{
    if (p->threads == 0 || p->threads % group != 0)
        return refuse(why, len, OP_ERR_INVAL,
                      "%u work-items: not a multiple of the work-group (%zu)", p->threads, group);
    if (group > depth)
        return refuse(why, len, OP_ERR_INVAL, "a work-group of %zu is larger than the queue (%u)",
                      group, depth);
    if (p->slots == 0 || p->iters == 0 || (uint64_t)p->iters * p->threads > UINT32_MAX)
        return refuse(why, len, OP_ERR_INVAL, "bad slots (%u) or iterations (%u)", p->slots,
                      p->iters);
    return OP_OK;
}

static op_status_t set_args(struct op_gpu_poster *po)
{
    const struct op_gpu_post_params *p = &po->p;
    struct opg_wqe *wq = (struct opg_wqe *)(po->ctrl + 1);
    struct opg_cqe *cq = (struct opg_cqe *)(wq + po->ctrl->depth);
    cl_uint opcode = p->with_imm ? OPG_WQE_RDMA_WRITE_IMM : OPG_WQE_RDMA_WRITE;
    cl_ulong remote = p->remote_addr;
    cl_int e = clSetKernelArgSVMPointer(po->k, 0, po->ctrl);
    e |= clSetKernelArgSVMPointer(po->k, 1, wq);
    e |= clSetKernelArgSVMPointer(po->k, 2, cq);
    e |= clSetKernelArgSVMPointer(po->k, 3, po->resume);
    e |= clSetKernelArg(po->k, 4, sizeof(cl_uint), &p->iters);
    e |= clSetKernelArg(po->k, 5, sizeof opcode, &opcode);
    e |= clSetKernelArg(po->k, 6, sizeof(cl_uint), &p->size);
    e |= clSetKernelArg(po->k, 7, sizeof(cl_uint), &p->slots);
    e |= clSetKernelArg(po->k, 8, sizeof remote, &remote);
    e |= clSetKernelArg(po->k, 9, sizeof(cl_uint), &p->rkey);
    return e == CL_SUCCESS ? OP_OK : OP_ERR_INVAL;
}

/* A launch that posts nothing: drivers compile a kernel for its work-group
 * size at its first launch (PoCL: tens of ms), which would otherwise count
 * as posting time. */
static op_status_t warm_up(struct op_gpu_poster *po)
{
    cl_uint none = 0;
    size_t global = po->p.threads;
    cl_int e = clSetKernelArg(po->k, 4, sizeof none, &none);
    if (e == CL_SUCCESS)
        e = clEnqueueNDRangeKernel(po->cl->q, po->k, 1, NULL, &global, &po->group, 0, NULL, NULL);
    if (e == CL_SUCCESS)
        e = clFinish(po->cl->q);
    if (e == CL_SUCCESS)
        e = clSetKernelArg(po->k, 4, sizeof(cl_uint), &po->p.iters);
    return e == CL_SUCCESS ? OP_OK : OP_ERR_IO;
}

op_status_t op_gpu_poster_create(struct op_gpu_cl *cl, void *wq, const struct op_gpu_post_params *p,
                                 struct op_gpu_poster **out, char *why, size_t why_len)
{
    struct opg_ctrl *ctrl = wq;
    size_t group = p->group ? p->group : (p->threads < DEFAULT_GROUP ? p->threads : DEFAULT_GROUP);
    op_status_t st = check_params(p, ctrl->depth, group, why, why_len);
    if (st != OP_OK)
        return st;
    struct op_gpu_poster *po = calloc(1, sizeof(*po));
    if (po == NULL)
        return OP_ERR_NOMEM;
    *po = (struct op_gpu_poster){.cl = cl, .ctrl = ctrl, .p = *p, .group = group};
    cl_int err;
    /* one kernel per mode: PoCL 3.1 mishandles barriers under a branch on a
     * kernel argument (work-item 0's commit then ran in every work-item) */
    po->k = clCreateKernel(cl->prog, p->mode == OP_GPU_MODE_BATCH ? "opg_post_batch"
                                                                 : "opg_post_thread", &err);
    po->resume = op_gpu_svm_alloc(cl, (size_t)p->threads * sizeof(uint32_t));
    if (err != CL_SUCCESS || po->resume == NULL || set_args(po) != OP_OK) {
        op_gpu_poster_destroy(po);
        return refuse(why, why_len, OP_ERR_NOMEM, "cannot set up the posting kernel (%d)", err);
    }
    memset(po->resume, 0, (size_t)p->threads * sizeof(uint32_t));
    if (warm_up(po) != OP_OK) {
        op_gpu_poster_destroy(po);
        return refuse(why, why_len, OP_ERR_IO, "the posting kernel does not run");
    }
    *out = po;
    return OP_OK;
}

static void finish_launch(struct op_gpu_poster *po)
{
    cl_ulong a = 0, b = 0;
    clGetEventProfilingInfo(po->running, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
    clGetEventProfilingInfo(po->running, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
    po->st.device_ns += b > a ? b - a : 0;
    po->st.last_end_ns = op_now_ns();
    clReleaseEvent(po->running);
    po->running = NULL;
}

void op_gpu_poster_destroy(struct op_gpu_poster *po)
{
    if (po == NULL)
        return;
    if (po->running != NULL)
        op_gpu_poster_stop(po);
    op_gpu_svm_free(po->cl, po->resume);
    if (po->k)
        clReleaseKernel(po->k);
    free(po);
}

static bool all_posted(const struct op_gpu_poster *po)
{
    for (uint32_t g = 0; g < po->p.threads; g++)
        if (po->resume[g] < po->p.iters)
            return false;
    return true;
}

/* Launch only when a whole work-group's slots are free: a launch into a
 * full queue would end at once and be launched again, round and round. */
static bool room_for_group(const struct op_gpu_poster *po)
{
    uint32_t bell = atomic_load_explicit(&po->ctrl->doorbell, memory_order_acquire);
    uint32_t released = atomic_load_explicit(&po->ctrl->released, memory_order_acquire);
    return po->ctrl->depth - (bell - released) >= po->group;
}

int op_gpu_poster_step(struct op_gpu_poster *po)
{
    if (po->running != NULL) {
        cl_int s = CL_QUEUED;
        clGetEventInfo(po->running, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, NULL);
        if (s < 0)
            return OP_ERR_IO;
        if (s != CL_COMPLETE)
            return 0;
        finish_launch(po);
    }
    po->st.dev_errors = atomic_load_explicit(&po->ctrl->dev_errors, memory_order_relaxed);
    po->st.first_error = atomic_load_explicit(&po->ctrl->first_error, memory_order_relaxed);
    if (po->stopped || po->st.dev_errors > 0 || all_posted(po))
        return 1;
    if (!room_for_group(po))
        return 0;
    size_t global = po->p.threads;
    if (po->st.launches++ == 0)
        po->st.first_launch_ns = op_now_ns();
    if (clEnqueueNDRangeKernel(po->cl->q, po->k, 1, NULL, &global, &po->group, 0, NULL,
                               &po->running) != CL_SUCCESS)
        return OP_ERR_IO;
    clFlush(po->cl->q);
    return 0;
}

void op_gpu_poster_stop(struct op_gpu_poster *po)
{
    atomic_store_explicit(&po->ctrl->stop, 1, memory_order_relaxed);
    po->stopped = true;
    if (po->running != NULL) {
        clWaitForEvents(1, &po->running);
        finish_launch(po);
    }
}

void op_gpu_poster_stats(const struct op_gpu_poster *po, struct op_gpu_poster_stats *s)
{
    *s = po->st;
}

#define TOUCH_ITEMS 64

struct op_gpu_toucher {
    struct op_gpu_cl *cl;
    cl_kernel k;
    uint32_t *sink;
    cl_event running;
    uint64_t passes;
};

op_status_t op_gpu_toucher_create(struct op_gpu_cl *cl, const void *svm, size_t len,
                                  struct op_gpu_toucher **out)
{
    struct op_gpu_toucher *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return OP_ERR_NOMEM;
    t->cl = cl;
    cl_int err;
    cl_uint words = (cl_uint)(len / 4 < UINT32_MAX ? len / 4 : UINT32_MAX);
    t->k = clCreateKernel(cl->prog, "opg_touch", &err);
    t->sink = op_gpu_svm_alloc(cl, TOUCH_ITEMS * sizeof(uint32_t));
    if (err != CL_SUCCESS || t->sink == NULL ||
        clSetKernelArgSVMPointer(t->k, 0, svm) != CL_SUCCESS ||
        clSetKernelArg(t->k, 1, sizeof words, &words) != CL_SUCCESS ||
        clSetKernelArgSVMPointer(t->k, 2, t->sink) != CL_SUCCESS) {
        op_gpu_toucher_destroy(t);
        return OP_ERR_INVAL;
    }
    *out = t;
    return OP_OK;
}

uint64_t op_gpu_toucher_step(struct op_gpu_toucher *t)
{
    if (t->running != NULL) {
        cl_int s = CL_QUEUED;
        clGetEventInfo(t->running, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, NULL);
        if (s != CL_COMPLETE && s >= 0)
            return t->passes;
        clReleaseEvent(t->running);
        t->running = NULL;
        t->passes += s == CL_COMPLETE;
    }
    size_t global = TOUCH_ITEMS;
    if (clEnqueueNDRangeKernel(t->cl->q, t->k, 1, NULL, &global, NULL, 0, NULL, &t->running) ==
        CL_SUCCESS)
        clFlush(t->cl->q);
    else
        t->running = NULL;
    return t->passes;
}

void op_gpu_toucher_destroy(struct op_gpu_toucher *t)
{
    if (t == NULL)
        return;
    if (t->running != NULL) {
        clWaitForEvents(1, &t->running);
        clReleaseEvent(t->running);
    }
    op_gpu_svm_free(t->cl, t->sink);
    if (t->k)
        clReleaseKernel(t->k);
    free(t);
}
