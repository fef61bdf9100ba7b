/* offpath gpu: GPU-initiated RDMA writes (GPUNetIO's model) on a standard
 * GPU compute API. Device code (OpenCL C, src/gpu/post.cl) fills work-queue
 * entries in shared memory (fine-grained buffer SVM) while it runs and
 * rings a doorbell; a host-side engine, playing the NIC, takes each entry,
 * checks it (device memory is untrusted input), posts it as an RDMA WRITE
 * on an RC queue pair of offpath/rdma.h and writes the completion back for
 * the device to poll. docs/gpu.md has the queue protocol.
 *
 * The engine is pure (plain memory in, WRs and completions out: unit tests
 * drive it without OpenCL); the OpenCL glue (op_gpu_cl_*, op_gpu_poster_*)
 * runs the same device code on PoCL's CPU device here and on a vendor's
 * driver on a GPU. Built without OpenCL, op_gpu_cl_open says so. */
#ifndef OFFPATH_GPU_H
#define OFFPATH_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* ---- OpenCL: a device, shared memory, the posting kernel */
struct op_gpu_cl;
/* Platform and device indices as perftest's --use_opencl=<platform>,<device>.
 * OP_ERR_UNSUPPORTED: no OpenCL platform (or built without OpenCL); why
 * says which. */
OP_API op_status_t op_gpu_cl_open(unsigned platform, unsigned device, struct op_gpu_cl **out,
                                  char *why, size_t why_len);
OP_API void op_gpu_cl_close(struct op_gpu_cl *cl);
OP_API const char *op_gpu_cl_device_name(const struct op_gpu_cl *cl); /* "pthread-haswell-..." */
/* "Portable Computing Language" */
OP_API const char *op_gpu_cl_platform_name(const struct op_gpu_cl *cl);
/* Fine-grained buffer SVM with atomics, 64-byte aligned; NULL if none. */
OP_API void *op_gpu_svm_alloc(struct op_gpu_cl *cl, size_t len);
OP_API void op_gpu_svm_free(struct op_gpu_cl *cl, void *p);

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

/* The persistent posting kernel on a work queue in SVM. It never waits
 * long: a work-item that finds no free slot after a bounded number of
 * looks ends the kernel with its next iteration saved, and
 * op_gpu_poster_step launches it again once the engine freed slots. */
struct op_gpu_poster;
OP_API op_status_t op_gpu_poster_create(struct op_gpu_cl *cl, void *wq,
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
};
OP_API void op_gpu_poster_stats(const struct op_gpu_poster *po, struct op_gpu_poster_stats *s);

/* Device reads of a whole SVM buffer (perftest's --gpu_touch): a pass is
 * one launch of a kernel that reads every 32-bit word. */
struct op_gpu_toucher;
OP_API op_status_t op_gpu_toucher_create(struct op_gpu_cl *cl, const void *svm, size_t len,
                                         struct op_gpu_toucher **out);
/* Non-blocking: starts a pass when none runs; returns the passes finished. */
OP_API uint64_t op_gpu_toucher_step(struct op_gpu_toucher *t);
/* Waits for the running pass, then frees. */
OP_API void op_gpu_toucher_destroy(struct op_gpu_toucher *t);

#endif
