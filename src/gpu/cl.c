/* OpenCL's table (gpu_int.h): a device with fine-grained buffer SVM, the
 * kernels of post.cl (embedded source, compiled at open), their launches
 * and profiling. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_int.h"
#include "gpu_cl_source.h"

#define NAME_MAX_ 128
#define MAX_PLATFORMS 16
#define MAX_DEVICES 16

struct cl_dev {
    cl_context ctx;
    cl_device_id dev;
    cl_command_queue q;
    cl_program prog;
    char dev_name[NAME_MAX_], plat_name[NAME_MAX_];
};

struct cl_kern {
    struct cl_dev *cl;
    cl_kernel k;
    enum opg_kernel kind;
    size_t global, group; /* group 0: the driver's choice */
    cl_event running;
};

static const char *svm_missing(cl_device_svm_capabilities svm)
{
    if (!(svm & CL_DEVICE_SVM_FINE_GRAIN_BUFFER))
        return "fine-grained buffer SVM";
    return (svm & CL_DEVICE_SVM_ATOMICS) ? NULL : "SVM atomics";
}

static op_status_t pick_device(unsigned platform, unsigned device, struct cl_dev *cl, char *why,
                               size_t len)
{
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint np = 0;
    if (clGetPlatformIDs(MAX_PLATFORMS, plats, &np) != CL_SUCCESS || np == 0)
        return opg_refuse(why, len, OP_ERR_UNSUPPORTED,
                          "no OpenCL platform (clGetPlatformIDs found none)");
    if (platform >= np)
        return opg_refuse(why, len, OP_ERR_INVAL,
                          "OpenCL platform %u: out of range (%u platforms)", platform, np);
    cl_device_id devs[MAX_DEVICES];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[platform], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs, &nd) != CL_SUCCESS ||
        device >= nd)
        return opg_refuse(why, len, OP_ERR_INVAL, "OpenCL device %u: out of range (%u devices)",
                          device, nd);
    cl->dev = devs[device];
    clGetPlatformInfo(plats[platform], CL_PLATFORM_NAME, sizeof cl->plat_name, cl->plat_name, NULL);
    clGetDeviceInfo(cl->dev, CL_DEVICE_NAME, sizeof cl->dev_name, cl->dev_name, NULL);
    cl_device_svm_capabilities svm = 0;
    clGetDeviceInfo(cl->dev, CL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm, NULL);
    const char *missing = svm_missing(svm);
    if (missing != NULL)
        return opg_refuse(why, len, OP_ERR_UNSUPPORTED,
                          "OpenCL device %s has no %s (the queue needs fine-grained buffer SVM "
                          "with atomics)", cl->dev_name, missing);
    return OP_OK;
}

/* OpenCL C 3.0 with its atomics features (PoCL), else 2.0 (drivers that
 * stop there). */
static op_status_t build(struct cl_dev *cl, char *why, size_t len)
{
    const char *src = opg_cl_source;
    cl_int err;
    cl->prog = clCreateProgramWithSource(cl->ctx, 1, &src, NULL, &err);
    if (err != CL_SUCCESS)
        return opg_refuse(why, len, OP_ERR_NOMEM, "clCreateProgramWithSource: %d", err);
    err = clBuildProgram(cl->prog, 1, &cl->dev, "-cl-std=CL3.0", NULL, NULL);
    if (err != CL_SUCCESS)
        err = clBuildProgram(cl->prog, 1, &cl->dev, "-cl-std=CL2.0", NULL, NULL);
    if (err == CL_SUCCESS)
        return OP_OK;
    char log[512] = "";
    clGetProgramBuildInfo(cl->prog, cl->dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    return opg_refuse(why, len, OP_ERR_UNSUPPORTED, "the posting kernel does not build: %.400s (%d)",
                      log, err);
}

static void cl_close(void *impl)
{
    struct cl_dev *cl = impl;
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

static op_status_t cl_open(unsigned platform, unsigned device, enum op_gpu_mem mem, void **impl,
                           char *why, size_t why_len)
{
    if (mem != OP_GPU_MEM_AUTO)
        return opg_refuse(why, why_len, OP_ERR_INVAL,
                          "OpenCL places fine-grained SVM itself: memory placement '%s' is "
                          "Vulkan's", op_gpu_mem_str(mem));
    struct cl_dev *cl = calloc(1, sizeof(*cl));
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
        st = opg_refuse(why, why_len, OP_ERR_UNSUPPORTED, "OpenCL context or queue: %d", err);
    if (st == OP_OK)
        st = build(cl, why, why_len);
    if (st != OP_OK) {
        cl_close(cl);
        return st;
    }
    *impl = cl;
    return OP_OK;
}

static const char *cl_device_name(const void *impl) { return ((const struct cl_dev *)impl)->dev_name; }
static const char *cl_driver_name(const void *impl) { return ((const struct cl_dev *)impl)->plat_name; }

static void *cl_alloc(void *impl, size_t len)
{
    cl_svm_mem_flags f = CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS;
    return clSVMAlloc(((struct cl_dev *)impl)->ctx, f, len, 64);
}

static void cl_free(void *impl, void *p) { clSVMFree(((struct cl_dev *)impl)->ctx, p); }

static void cl_kernel_destroy(void *kp)
{
    struct cl_kern *k = kp;
    if (k->running != NULL) {
        clWaitForEvents(1, &k->running);
        clReleaseEvent(k->running);
    }
    if (k->k)
        clReleaseKernel(k->k);
    free(k);
}

/* one kernel per mode: PoCL 3.1 mishandles barriers under a branch on a
 * kernel argument (work-item 0's commit then ran in every work-item) */
static op_status_t cl_kernel_create(void *impl, enum opg_kernel kind, const struct opg_bind *b,
                                    unsigned nb, uint32_t global, uint32_t group, void **out,
                                    char *why, size_t len)
{
    static const char *const names[] = {"opg_post_thread", "opg_post_batch", "opg_touch"};
    struct cl_kern *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return OP_ERR_NOMEM;
    *k = (struct cl_kern){.cl = impl, .kind = kind, .global = global, .group = group};
    cl_int err;
    k->k = clCreateKernel(k->cl->prog, names[kind], &err);
    /* the buffers are the first arguments, except touch's sink (its third) */
    for (unsigned i = 0; err == CL_SUCCESS && i < nb; i++)
        err = clSetKernelArgSVMPointer(k->k, kind == OPG_K_TOUCH && i == 1 ? 2 : i, b[i].ptr);
    if (err != CL_SUCCESS) {
        cl_kernel_destroy(k);
        return opg_refuse(why, len, OP_ERR_NOMEM, "cannot set up kernel %s (%d)", names[kind],
                          err);
    }
    *out = k;
    return OP_OK;
}

static cl_int set_scalars(struct cl_kern *k, const struct opg_args *a)
{
    if (k->kind == OPG_K_TOUCH)
        return clSetKernelArg(k->k, 1, sizeof(cl_uint), &a->words);
    cl_ulong remote = a->remote_addr;
    cl_int e = clSetKernelArg(k->k, 4, sizeof(cl_uint), &a->iters);
    e |= clSetKernelArg(k->k, 5, sizeof(cl_uint), &a->opcode);
    e |= clSetKernelArg(k->k, 6, sizeof(cl_uint), &a->size);
    e |= clSetKernelArg(k->k, 7, sizeof(cl_uint), &a->slots);
    e |= clSetKernelArg(k->k, 8, sizeof remote, &remote);
    e |= clSetKernelArg(k->k, 9, sizeof(cl_uint), &a->rkey);
    return e;
}

static op_status_t cl_launch(void *kp, const struct opg_args *a)
{
    struct cl_kern *k = kp;
    if (set_scalars(k, a) != CL_SUCCESS ||
        clEnqueueNDRangeKernel(k->cl->q, k->k, 1, NULL, &k->global, k->group ? &k->group : NULL,
                               0, NULL, &k->running) != CL_SUCCESS) {
        k->running = NULL;
        return OP_ERR_IO;
    }
    clFlush(k->cl->q);
    return OP_OK;
}

static uint64_t finish(struct cl_kern *k)
{
    cl_ulong a = 0, b = 0;
    clGetEventProfilingInfo(k->running, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
    clGetEventProfilingInfo(k->running, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
    clReleaseEvent(k->running);
    k->running = NULL;
    return b > a ? b - a : 0;
}

static int cl_done(void *kp, uint64_t *device_ns)
{
    struct cl_kern *k = kp;
    cl_int s = CL_QUEUED;
    clGetEventInfo(k->running, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, NULL);
    if (s > CL_COMPLETE)
        return 0;
    *device_ns = finish(k);
    return s == CL_COMPLETE ? 1 : -1;
}

static op_status_t cl_wait(void *kp, uint64_t *device_ns)
{
    struct cl_kern *k = kp;
    cl_int e = clWaitForEvents(1, &k->running);
    *device_ns = finish(k);
    return e == CL_SUCCESS ? OP_OK : OP_ERR_IO;
}

static void describe(cl_platform_id plat, cl_device_id dev, struct op_gpu_info *i)
{
    clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof i->driver, i->driver, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof i->name, i->name, NULL);
    cl_device_svm_capabilities svm = 0;
    clGetDeviceInfo(dev, CL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm, NULL);
    snprintf(i->memory, sizeof i->memory, "SVM:%s%s%s%s",
             svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER ? " coarse-grain-buffer" : "",
             svm & CL_DEVICE_SVM_FINE_GRAIN_BUFFER ? " fine-grain-buffer" : "",
             svm & CL_DEVICE_SVM_FINE_GRAIN_SYSTEM ? " fine-grain-system" : "",
             svm & CL_DEVICE_SVM_ATOMICS ? " atomics" : "");
    const char *missing = svm_missing(svm);
    i->can_run = missing == NULL;
    if (missing)
        snprintf(i->why, sizeof i->why, "no %s", missing);
}

static int cl_list(struct op_gpu_info *out, int max)
{
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint np = 0;
    if (clGetPlatformIDs(MAX_PLATFORMS, plats, &np) != CL_SUCCESS)
        return 0;
    int n = 0;
    for (cl_uint p = 0; p < np; p++) {
        cl_device_id devs[MAX_DEVICES];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs, &nd) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < nd; d++, n++)
            if (n < max) {
                out[n] = (struct op_gpu_info){.api = OP_GPU_API_OPENCL, .platform = p, .device = d};
                describe(plats[p], devs[d], &out[n]);
            }
    }
    return n;
}

const struct opg_backend opg_backend_cl = {
    .open = cl_open, .close = cl_close, .device_name = cl_device_name,
    .driver_name = cl_driver_name, .alloc = cl_alloc, .free = cl_free,
    .kernel_create = cl_kernel_create, .launch = cl_launch, .kernel_done = cl_done, .wait = cl_wait,
    .kernel_destroy = cl_kernel_destroy, .list = cl_list};
