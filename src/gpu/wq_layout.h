/* The work queue as the device and the host both see it: compiled into the
 * C engine, embedded as text ahead of post.cl into the OpenCL kernel, and
 * #included by the GLSL shaders (post_*.comp, std430: the same offsets), so
 * no two can disagree on an offset. It lives in memory the device and the
 * host share while device code runs (OpenCL fine-grained buffer SVM, Vulkan
 * host-visible coherent memory): device invocations and the host engine
 * thread read and write it concurrently, ordered by release/acquire on the
 * atomic fields.
 *
 * Protocol (GPUNetIO's, docs/gpu.md):
 * - ticket k (0, 1, 2...) uses slot k % depth of wqe[] and cqe[];
 * - a work-item fills its WQE, then stores seq = k + 1 (release): only
 *   then may the engine read the entry;
 * - doorbell counts committed entries: in thread mode each work-item adds 1
 *   after its own WQE, in batch mode work-item 0 of the work-group adds the
 *   group's size after a barrier. The engine reads WQEs only below it;
 * - the engine writes the CQE of ticket k (seq = k + 1, release), and
 *   advances released past every ticket whose CQE is written: a slot is
 *   free again once released > k, as a NIC frees a send-queue slot on its
 *   completion. The device posts ticket k only when k - released < depth. */
#ifndef OFFPATH_GPU_WQ_LAYOUT_H
#define OFFPATH_GPU_WQ_LAYOUT_H

#if defined(VULKAN)
/* GLSL: 64-bit fields as two words (low first), so the shaders need no
 * shaderInt64; atomics go through the memory model's functions */
#define opg_u32 uint
#define opg_u64 uvec2
#define OPG_ATOMIC_U32 uint
#define length opg_length /* GLSL's .length() takes the name; same offset */
#elif defined(__OPENCL_VERSION__)
typedef uint opg_u32;
typedef ulong opg_u64;
#define OPG_ATOMIC_U32 atomic_uint
#define OPG_STATIC_ASSERT(c, m)
#else
#include <stdatomic.h>
#include <stdint.h>
typedef uint32_t opg_u32;
typedef uint64_t opg_u64;
#define OPG_ATOMIC_U32 _Atomic uint32_t
#define OPG_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#define OPG_WQE_RDMA_WRITE 1u
#define OPG_WQE_RDMA_WRITE_IMM 2u


/* One cache line per writer: the device writes doorbell, the engine
 * released and completed. */
struct opg_ctrl {
    OPG_ATOMIC_U32 doorbell; /* device: entries committed */
    opg_u32 pad0[15];
    OPG_ATOMIC_U32 released; /* engine: tickets below this are completed */
    OPG_ATOMIC_U32 completed; /* engine: CQEs written */
    opg_u32 pad1[14];
    OPG_ATOMIC_U32 stop;        /* host: device code stops posting */
    OPG_ATOMIC_U32 dev_errors;  /* device: error completions it saw */
    OPG_ATOMIC_U32 first_error; /* device: the first error status it saw (0: none) */
    opg_u32 depth;              /* entries; a power of two */
    opg_u32 pad2[12];
};

struct opg_wqe {
    OPG_ATOMIC_U32 seq; /* ticket + 1, stored last */
    opg_u32 opcode;     /* OPG_WQE_* */
    opg_u32 length;
    opg_u32 rkey;
    opg_u64 local_offset; /* into the registered local data buffer */
    opg_u64 remote_addr;
    opg_u32 imm;
    opg_u32 flags; /* reserved, 0 */
    opg_u32 pad[6];
};

struct opg_cqe {
    OPG_ATOMIC_U32 seq; /* ticket + 1, stored last */
    opg_u32 status;     /* enum op_rdma_wc_status (verbs' numbers) */
    opg_u32 byte_len;
    opg_u32 opcode;
};

#if !defined(VULKAN) /* GLSL refuses a lone ';' at file scope */
OPG_STATIC_ASSERT(sizeof(struct opg_ctrl) == 192, "ctrl: three cache lines");
OPG_STATIC_ASSERT(sizeof(struct opg_wqe) == 64, "a WQE is one cache line");
OPG_STATIC_ASSERT(sizeof(struct opg_cqe) == 16, "CQE");
#endif

#endif
