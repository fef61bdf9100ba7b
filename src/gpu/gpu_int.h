/* What a GPU compute API provides to src/gpu (internal; do not include
 * outside src/gpu). dev.c runs the posting protocol (launch, bounded
 * waits, resume, stop) once for every API; cl.c and vk.c each fill a
 * table of these operations, cl_none.c and vk_none.c refuse when offpath
 * was built without the API. */
#ifndef OFFPATH_GPU_INT_H
#define OFFPATH_GPU_INT_H

#include <stdarg.h>

#include "offpath/gpu.h"

enum opg_kernel { OPG_K_THREAD, OPG_K_BATCH, OPG_K_TOUCH };

/* A buffer a kernel uses: a range of one of the backend's shared
 * allocations. Posting kernels: ctrl, wqe[], cqe[], resume[]; touch: the
 * buffer, sink[]. */
struct opg_bind {
    void *ptr;
    size_t len;
};
#define OPG_MAX_BINDS 4

/* The scalar arguments of one launch. */
struct opg_args {
    uint32_t iters, opcode, size, slots, rkey;
    uint64_t remote_addr;
    uint32_t words; /* touch: 32-bit words to read */
};

struct opg_backend {
    op_status_t (*open)(unsigned platform, unsigned device, enum op_gpu_mem mem, void **impl,
                        char *why, size_t len);
    void (*close)(void *impl);
    const char *(*device_name)(const void *impl);
    const char *(*driver_name)(const void *impl);
    void *(*alloc)(void *impl, size_t len);
    void (*free)(void *impl, void *p);
    /* global work-items in groups of group (0: the driver's choice) */
    op_status_t (*kernel_create)(void *impl, enum opg_kernel kind, const struct opg_bind *b,
                                 unsigned nb, uint32_t global, uint32_t group, void **k,
                                 char *why, size_t len);
    op_status_t (*launch)(void *k, const struct opg_args *a); /* non-blocking */
    /* 1: the launch ended (device_ns: its device time), 0: running, <0: failed */
    int (*kernel_done)(void *k, uint64_t *device_ns);
    op_status_t (*wait)(void *k, uint64_t *device_ns); /* for the running launch */
    void (*kernel_destroy)(void *k);
    int (*list)(struct op_gpu_info *out, int max);
};

extern const struct opg_backend opg_backend_cl, opg_backend_vk;

op_status_t opg_refuse(char *why, size_t len, op_status_t st, const char *fmt, ...)
    OP_PRINTF(4, 5);

#endif
