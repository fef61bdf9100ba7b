/* offpath gpu: GPU-initiated RDMA writes (GPUNetIO's model) on a standard
 * GPU compute API, OpenCL or Vulkan. Device code (OpenCL C, src/gpu/post.cl;
 * GLSL compute shaders, src/gpu/post_*.comp) fills work-queue entries in
 * shared memory (fine-grained buffer SVM, host-coherent memory) while it runs and
 * rings a doorbell; a host-side engine, playing the NIC, takes each entry,
 * checks it (device memory is untrusted input), posts it as an RDMA WRITE
 * on an RC queue pair of offpath/rdma.h and writes the completion back for
 * the device to poll. docs/gpu.md has the queue protocol.
 *
 * The engine is pure (plain memory in, WRs and completions out: unit tests
 * drive it without a device); the device glue (op_gpu_open, op_gpu_poster_*)
 * runs the device code on PoCL's CPU device and Mesa's lavapipe here and on
 * a vendor's driver on a GPU. Built without an API, op_gpu_open says so. */
#ifndef OFFPATH_GPU_H
#define OFFPATH_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "offpath/common.h"
#include "offpath/io.h"
#include "offpath/rdma.h"

/* wr_ids of the engine's WRs carry this bit (the ticket below it), so a QP
 * may carry CPU-posted WRs too: op_gpu_engine_complete takes only its own. */
#define OP_GPU_WRID_TAG (1ull << 63)
#define OP_GPU_MAX_DEPTH (1u << 20)

/* ---- the work queue: its memory, formatted for depth entries (a power of
 * two, 2..OP_GPU_MAX_DEPTH); mem must be 64-byte aligned */
OP_API size_t op_gpu_wq_bytes(uint32_t depth);
OP_API op_status_t op_gpu_wq_format(void *mem, size_t len, uint32_t depth);

/* ---- the engine (the NIC's side) */
struct op_gpu_engine;
struct op_gpu_engine_config {
    void *wq;                /* formatted by op_gpu_wq_format */
    struct op_rdma_qp *qp;   /* RC, in RTS */
    struct op_rdma_mr *mr;   /* covers the local data buffer */
    const void *data;        /* the local data buffer: WQE offsets are into it */
    size_t data_len;
};
OP_API op_status_t op_gpu_engine_create(const struct op_gpu_engine_config *cfg,
                                        struct op_gpu_engine **out);
OP_API void op_gpu_engine_destroy(struct op_gpu_engine *eng);
/* Takes up to budget committed entries: each is checked and posted, or
 * completed at once with the error that rejects it. Stops early when the
 * QP's send queue is full (back-pressure: the entry waits, and the device
 * waits for its slot). Returns the entries taken. */
OP_API int op_gpu_engine_poll(struct op_gpu_engine *eng, int budget, uint64_t now,
                              struct op_txq *out);
/* A completion from the QP's send CQ: true if it was the engine's (its CQE
 * is then written for the device), false if it belongs to someone else. */
OP_API bool op_gpu_engine_complete(struct op_gpu_engine *eng, const struct op_rdma_wc *wc);
/* Every committed entry taken and completed. */
OP_API bool op_gpu_engine_idle(const struct op_gpu_engine *eng);
/* The first error completion written (status, 0: none) and its cause. */
OP_API unsigned op_gpu_engine_first_error(const struct op_gpu_engine *eng, const char **cause);

#define OP_GPU_ENGINE_COUNTERS(X)                                                                  \
    X(taken)          /* entries read from the queue */                                            \
    X(posted)         /* WRs posted to the QP */                                                   \
    X(completed)      /* CQEs written */                                                           \
    X(errors)         /* CQEs with an error status */                                              \
    X(reject_opcode)  /* not an RDMA WRITE opcode, or flags set */                                 \
    X(reject_range)   /* local offset + length outside the data buffer */                          \
    X(reject_post)    /* the QP refused the WR */                                                  \
    X(backpressure)   /* the QP's send queue was full */                                           \
    X(not_ready)      /* the doorbell counted an entry whose seq was not yet written */            \
    X(bad_doorbell)   /* the doorbell ran more than depth entries ahead */
enum op_gpu_engine_counter {
#define OP_GPU_ENUM_(n) OP_GPU_C_##n,
    OP_GPU_ENGINE_COUNTERS(OP_GPU_ENUM_)
#undef OP_GPU_ENUM_
        OP_GPU_C_COUNT_
};
OP_API const char *op_gpu_engine_counter_name(unsigned c);
OP_API const uint64_t *op_gpu_engine_counters(const struct op_gpu_engine *eng);

/* ---- a device of a GPU compute API and memory it shares with the host */
enum op_gpu_api { OP_GPU_API_OPENCL, OP_GPU_API_VULKAN };
#define OP_GPU_API_COUNT 2
OP_API const char *op_gpu_api_str(enum op_gpu_api api); /* "opencl", "vulkan" */
OP_API const char *op_gpu_api_title(enum op_gpu_api api); /* "OpenCL", "Vulkan" */

/* Where the shared memory lives (Vulkan; OpenCL's SVM is placed by its
 * driver and takes AUTO only). On a discrete GPU, DEVICE is its memory seen
 * through the BAR (the device's stores are local, the host's reads cross
 * PCIe uncached); HOST is system memory the device reaches over PCIe (the
 * host engine reads it from its caches). AUTO: a type the host caches
 * (device-local too where one is, as on integrated GPUs and lavapipe),
 * else device-local, else any host-visible coherent type. */
enum op_gpu_mem { OP_GPU_MEM_AUTO, OP_GPU_MEM_DEVICE, OP_GPU_MEM_HOST };
OP_API const char *op_gpu_mem_str(enum op_gpu_mem mem); /* "auto", "device", "host" */

struct op_gpu_dev;
/* OpenCL: platform and device indices as perftest's --use_opencl=<p>,<d>;
 * Vulkan: platform 0, device the physical device's index. Refused with
 * OP_ERR_UNSUPPORTED when the API is missing (no platform or device, or
 * built without it) or the device lacks what the queue needs (or a memory
 * type of the placement asked for): why names what (tests skip on "no
 * OpenCL platform" / "no Vulkan device"). */
OP_API op_status_t op_gpu_open(enum op_gpu_api api, unsigned platform, unsigned device,
                               enum op_gpu_mem mem, struct op_gpu_dev **out, char *why,
                               size_t why_len);
OP_API void op_gpu_close(struct op_gpu_dev *dev);
OP_API enum op_gpu_api op_gpu_dev_api(const struct op_gpu_dev *dev);
OP_API const char *op_gpu_device_name(const struct op_gpu_dev *dev); /* "llvmpipe (...)" */
OP_API const char *op_gpu_driver_name(const struct op_gpu_dev *dev); /* platform or driver */
/* Memory the device and the host share while device code runs (OpenCL:
 * fine-grained buffer SVM with atomics; Vulkan: a host-visible, coherent
 * memory type, persistently mapped), 64-byte aligned; NULL if none. */
OP_API void *op_gpu_alloc(struct op_gpu_dev *dev, size_t len);
OP_API void op_gpu_free(struct op_gpu_dev *dev, void *p);

/* `offpath gpu list`: every device of every API built in. */
struct op_gpu_info {
    enum op_gpu_api api;
    unsigned platform, device; /* what op_gpu_open takes */
    char name[128];
    char driver[160];
    char memory[256]; /* the memory types (Vulkan) or SVM capabilities (OpenCL) */
    bool can_run;     /* the work queue runs on it */
    char why[200];    /* if not: what is missing */
};
/* Fills up to max entries; returns how many devices there are (may be
 * more than max). */
OP_API int op_gpu_list(struct op_gpu_info *out, int max);
/* The list as text (a device per block) or one JSON object; returns how
 * many devices can run the queue. */
OP_API int op_gpu_list_report(FILE *out, bool json);

enum op_gpu_mode { OP_GPU_MODE_THREAD, OP_GPU_MODE_BATCH };
OP_API const char *op_gpu_mode_str(enum op_gpu_mode m);

/* What every work-item posts: iters writes of size bytes; work-item g's
 * write of iteration i is ticket i * threads + g and moves slot
 * (ticket % slots): local [slot * size, +size) to remote_addr + slot * size. */
struct op_gpu_post_params {
    uint32_t threads; /* work-items; a multiple of group when above it */
    uint32_t group;   /* work-group size (0: min(threads, 256)) */
    enum op_gpu_mode mode;
    uint32_t iters;
    uint32_t size;
    uint32_t slots;
    uint64_t remote_addr;
    uint32_t rkey;
    bool with_imm; /* RDMA WRITE WITH IMM, the ticket as immediate */
};

/* The persistent posting kernel (OpenCL) or compute dispatch (Vulkan) on
 * a work queue in shared memory; the same protocol on both APIs. It never
 * waits long: a work-item that finds no free slot after a bounded number
 * of looks ends the launch with its next iteration saved, and
 * op_gpu_poster_step launches it again once the engine freed slots. */
struct op_gpu_poster;
OP_API op_status_t op_gpu_poster_create(struct op_gpu_dev *dev, void *wq,
                                        const struct op_gpu_post_params *p,
                                        struct op_gpu_poster **out, char *why, size_t why_len);
OP_API void op_gpu_poster_destroy(struct op_gpu_poster *po);
/* Non-blocking: 1 when every work-item posted all its writes (or stopped
 * after op_gpu_poster_stop, or after an error completion it saw), 0 while
 * it runs or waits for slots, an error if a launch failed. */
OP_API int op_gpu_poster_step(struct op_gpu_poster *po);
/* Asks the running kernel to stop at its next iteration and waits for it. */
OP_API void op_gpu_poster_stop(struct op_gpu_poster *po);

struct op_gpu_poster_stats {
    uint64_t launches;
    uint64_t device_ns;   /* kernel execution time, summed over launches */
    uint64_t first_launch_ns, last_end_ns; /* host clock */
    uint32_t dev_errors;  /* error completions the device code saw */
    uint32_t first_error; /* its status */
    uint32_t group;       /* the work-group size it runs with */
};
OP_API void op_gpu_poster_stats(const struct op_gpu_poster *po, struct op_gpu_poster_stats *s);

/* Device reads of a whole shared buffer (perftest's --gpu_touch): a pass
 * is one launch of a kernel that reads every 32-bit word. */
struct op_gpu_toucher;
OP_API op_status_t op_gpu_toucher_create(struct op_gpu_dev *dev, const void *mem, size_t len,
                                         struct op_gpu_toucher **out);
/* Non-blocking: starts a pass when none runs; returns the passes finished. */
OP_API uint64_t op_gpu_toucher_step(struct op_gpu_toucher *t);
/* Waits for the running pass and counts it; returns the passes finished. */
OP_API uint64_t op_gpu_toucher_finish(struct op_gpu_toucher *t);
/* Waits for the running pass, then frees. */
OP_API void op_gpu_toucher_destroy(struct op_gpu_toucher *t);

#endif
