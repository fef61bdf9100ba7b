/* Built without OpenCL: the engine works, the device side says why not. */
#include <stdio.h>

#include "offpath/gpu.h"

op_status_t op_gpu_cl_open(unsigned platform, unsigned device, struct op_gpu_cl **out, char *why,
                           size_t why_len)
{
    (void)platform;
    (void)device;
    *out = NULL;
    snprintf(why, why_len, "no OpenCL platform: offpath was built without OpenCL (install "
                           "ocl-icd-opencl-dev, opencl-c-headers and pocl-opencl-icd, then "
                           "rebuild)");
    return OP_ERR_UNSUPPORTED;
}

void op_gpu_cl_close(struct op_gpu_cl *cl) { (void)cl; }
const char *op_gpu_cl_device_name(const struct op_gpu_cl *cl) { (void)cl; return ""; }
const char *op_gpu_cl_platform_name(const struct op_gpu_cl *cl) { (void)cl; return ""; }
void *op_gpu_svm_alloc(struct op_gpu_cl *cl, size_t len) { (void)cl; (void)len; return NULL; }
void op_gpu_svm_free(struct op_gpu_cl *cl, void *p) { (void)cl; (void)p; }

op_status_t op_gpu_poster_create(struct op_gpu_cl *cl, void *wq, const struct op_gpu_post_params *p,
                                 struct op_gpu_poster **out, char *why, size_t why_len)
{
    (void)cl;
    (void)wq;
    (void)p;
    *out = NULL;
    snprintf(why, why_len, "offpath was built without OpenCL");
    return OP_ERR_UNSUPPORTED;
}
void op_gpu_poster_destroy(struct op_gpu_poster *po) { (void)po; }
int op_gpu_poster_step(struct op_gpu_poster *po) { (void)po; return OP_ERR_UNSUPPORTED; }
void op_gpu_poster_stop(struct op_gpu_poster *po) { (void)po; }
void op_gpu_poster_stats(const struct op_gpu_poster *po, struct op_gpu_poster_stats *s)
{
    (void)po;
    *s = (struct op_gpu_poster_stats){0};
}

op_status_t op_gpu_toucher_create(struct op_gpu_cl *cl, const void *svm, size_t len,
                                  struct op_gpu_toucher **out)
{
    (void)cl;
    (void)svm;
    (void)len;
    *out = NULL;
    return OP_ERR_UNSUPPORTED;
}
uint64_t op_gpu_toucher_step(struct op_gpu_toucher *t) { (void)t; return 0; }
void op_gpu_toucher_destroy(struct op_gpu_toucher *t) { (void)t; }
