/* The posting kernels: GPUNetIO's persistent kernel in OpenCL C. Each
 * work-item posts one RDMA WRITE per iteration into the work queue
 * (wq_layout.h, which the build puts ahead of this text). It never spins
 * for long: when the queue has no free slot after OPG_ROOM_LOOKS looks,
 * the work-item (thread mode) or the work-group (batch mode) saves its
 * next iteration in resume[] and the kernel ends; the host launches it
 * again once the engine freed slots. A CPU device runs the work-items of
 * a group one after another on one thread, so a long spin there would
 * only burn the core the engine needs. */

#if defined(__opencl_c_atomic_scope_all_devices)
#define OPG_SCOPE memory_scope_all_svm_devices
#else
#define OPG_SCOPE memory_scope_device /* PoCL: its SVM is host memory, the host sees it */
#endif
#define OPG_ROOM_LOOKS 64

static bool opg_has_room(__global struct opg_ctrl *ctrl, uint last_ticket, uint depth)
{
    for (uint k = 0; k < OPG_ROOM_LOOKS; k++) {
        if (atomic_load_explicit(&ctrl->stop, memory_order_relaxed, OPG_SCOPE))
            return false;
        uint released = atomic_load_explicit(&ctrl->released, memory_order_acquire, OPG_SCOPE);
        if (last_ticket - released < depth)
            return true;
    }
    return false;
}

/* The completion of this work-item's previous write, if the engine wrote
 * it: an error stops the work-item (as a CUDA thread checking its CQ). */
static bool opg_prev_failed(__global struct opg_ctrl *ctrl, __global struct opg_cqe *cq,
                            uint ticket, uint depth)
{
    __global struct opg_cqe *c = &cq[ticket & (depth - 1)];
    if (atomic_load_explicit(&c->seq, memory_order_acquire, OPG_SCOPE) != ticket + 1 ||
        c->status == 0)
        return false;
    atomic_fetch_add_explicit(&ctrl->dev_errors, 1u, memory_order_relaxed, OPG_SCOPE);
    uint none = 0;
    atomic_compare_exchange_strong_explicit(&ctrl->first_error, &none, c->status,
                                            memory_order_relaxed, memory_order_relaxed, OPG_SCOPE);
    return true;
}

static void opg_fill(__global struct opg_wqe *w, uint ticket, uint opcode, uint size, uint slots,
                     ulong remote_addr, uint rkey)
{
    ulong off = (ulong)(ticket % slots) * size;
    w->opcode = opcode;
    w->length = size;
    w->rkey = rkey;
    w->local_offset = off;
    w->remote_addr = remote_addr + off;
    w->imm = ticket;
    w->flags = 0;
    atomic_store_explicit(&w->seq, ticket + 1, memory_order_release, OPG_SCOPE);
}

/* Thread mode: every work-item checks room, posts and rings alone. */
__kernel void opg_post_thread(__global struct opg_ctrl *ctrl, __global struct opg_wqe *wq,
                              __global struct opg_cqe *cq, __global uint *resume, uint iters,
                              uint opcode, uint size, uint slots, ulong remote_addr, uint rkey)
{
    uint gid = get_global_id(0), threads = get_global_size(0);
    uint depth = ctrl->depth;
    for (uint i = resume[gid]; i < iters; i++) {
        uint ticket = i * threads + gid;
        if ((i > 0 && opg_prev_failed(ctrl, cq, ticket - threads, depth)) ||
            !opg_has_room(ctrl, ticket, depth))
            break;
        opg_fill(&wq[ticket & (depth - 1)], ticket, opcode, size, slots, remote_addr, rkey);
        atomic_fetch_add_explicit(&ctrl->doorbell, 1u, memory_order_release, OPG_SCOPE);
        resume[gid] = i + 1;
    }
}

/* Batch mode (GPUNetIO's): work-item 0 decides for the group whether the
 * iteration fits, every work-item writes its WQE, and after a barrier
 * work-item 0 alone rings the doorbell for the whole group. Progress is
 * saved after every iteration: CPU devices split a loop with barriers
 * into regions, and a value carried out of it is not reliably the one
 * the work-item reached. Every work-item runs the bounded look for room
 * (the same loop in uniform control flow) and work-item 0's answer
 * decides, as in post_batch.comp: a loop under `lid == 0` between
 * barriers is valid OpenCL and PoCL runs it right, but Mesa's llvmpipe
 * (lavapipe's, and rusticl's for OpenCL) broke the group's barriers with
 * it in the Vulkan shader (docs/gpu.md). */
__kernel void opg_post_batch(__global struct opg_ctrl *ctrl, __global struct opg_wqe *wq,
                             __global struct opg_cqe *cq, __global uint *resume, uint iters,
                             uint opcode, uint size, uint slots, ulong remote_addr, uint rkey)
{
    __local uint go;
    uint gid = get_global_id(0), lid = get_local_id(0);
    uint threads = get_global_size(0), group = get_local_size(0);
    uint depth = ctrl->depth;
    for (uint i = resume[gid]; i < iters; i++) {
        uint ticket = i * threads + gid;
        /* the group's last ticket of this iteration must fit */
        bool fits = opg_has_room(ctrl, ticket - lid + group - 1, depth);
        if (lid == 0)
            go = (i == 0 || !opg_prev_failed(ctrl, cq, ticket - threads, depth)) && fits;
        barrier(CLK_LOCAL_MEM_FENCE);
        bool room = go != 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (!room)
            break;
        opg_fill(&wq[ticket & (depth - 1)], ticket, opcode, size, slots, remote_addr, rkey);
        barrier(CLK_GLOBAL_MEM_FENCE); /* every WQE of the group written */
        if (lid == 0)
            atomic_fetch_add_explicit(&ctrl->doorbell, group, memory_order_release, OPG_SCOPE);
        resume[gid] = i + 1;
    }
}

/* --gpu_touch: the device reads every word of a buffer (perftest touches
 * GPU memory the same way, to test accesses during a transfer); the xor
 * goes to sink so the loads cannot be dropped. */
__kernel void opg_touch(__global const uint *buf, uint words, __global uint *sink)
{
    uint gid = get_global_id(0), n = get_global_size(0);
    uint acc = 0;
    for (uint i = gid; i < words; i += n)
        acc ^= buf[i];
    sink[gid] = acc;
}
