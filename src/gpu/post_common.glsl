/* What both posting shaders share (the Vulkan side of post.cl): the queue
 * bound as three storage buffers over one allocation, the parameters as
 * push constants, and the bounded look for room. Atomics use the Vulkan
 * memory model at device scope: the WQE fields are plain stores made
 * visible by the release store of seq, as in the OpenCL kernels. The
 * buffers are coherent so no store lingers in a non-coherent cache while
 * the dispatch still runs and the host engine reads. */
#extension GL_KHR_memory_scope_semantics : require
#pragma use_vulkan_memory_model

#include "wq_layout.h"

#define OPG_ROOM_LOOKS 64
#define OPG_BUF gl_StorageSemanticsBuffer

layout(std430, set = 0, binding = 0) coherent buffer Ctrl { opg_ctrl ctrl; };
layout(std430, set = 0, binding = 1) coherent buffer Wq { opg_wqe wq[]; };
layout(std430, set = 0, binding = 2) coherent buffer Cq { opg_cqe cq[]; };
layout(std430, set = 0, binding = 3) buffer Resume { uint resume[]; };

layout(push_constant) uniform Args {
    uint iters;
    uint opcode;
    uint size;
    uint slots;
    uint rkey;
    uint pad;
    uvec2 remote_addr; /* low, high */
} a;

bool opg_has_room(uint last_ticket, uint depth)
{
    for (uint k = 0; k < OPG_ROOM_LOOKS; k++) {
        if (atomicLoad(ctrl.stop, gl_ScopeDevice, OPG_BUF, gl_SemanticsRelaxed) != 0)
            return false;
        uint released = atomicLoad(ctrl.released, gl_ScopeDevice, OPG_BUF, gl_SemanticsAcquire);
        if (last_ticket - released < depth)
            return true;
    }
    return false;
}

/* The completion of this invocation's previous write, if the engine wrote
 * it: an error stops the invocation (as a CUDA thread checking its CQ). */
bool opg_prev_failed(uint ticket, uint depth)
{
    uint s = ticket & (depth - 1);
    if (atomicLoad(cq[s].seq, gl_ScopeDevice, OPG_BUF, gl_SemanticsAcquire) != ticket + 1 ||
        cq[s].status == 0)
        return false;
    atomicAdd(ctrl.dev_errors, 1u, gl_ScopeDevice, OPG_BUF, gl_SemanticsRelaxed);
    atomicCompSwap(ctrl.first_error, 0u, cq[s].status, gl_ScopeDevice, OPG_BUF,
                   gl_SemanticsRelaxed, OPG_BUF, gl_SemanticsRelaxed);
    return true;
}

/* 64-bit offsets in two words: (ticket % slots) * size, added to the
 * remote address with carry. */
void opg_fill(uint ticket, uint depth)
{
    uint s = ticket & (depth - 1);
    uint hi, lo, carry;
    umulExtended(ticket % a.slots, a.size, hi, lo);
    wq[s].opcode = a.opcode;
    wq[s].length = a.size; /* opg_length: see wq_layout.h */
    wq[s].rkey = a.rkey;
    wq[s].local_offset = uvec2(lo, hi);
    uint rlo = uaddCarry(a.remote_addr.x, lo, carry);
    wq[s].remote_addr = uvec2(rlo, a.remote_addr.y + hi + carry);
    wq[s].imm = ticket;
    wq[s].flags = 0;
    atomicStore(wq[s].seq, ticket + 1, gl_ScopeDevice, OPG_BUF, gl_SemanticsRelease);
}
