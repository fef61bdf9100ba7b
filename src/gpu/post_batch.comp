#version 450
/* Batch mode (GPUNetIO's, as opg_post_batch in post.cl): invocation 0
 * decides for the work-group whether the iteration fits, every invocation
 * writes its WQE, and after a barrier invocation 0 alone rings the doorbell
 * for the group. The loop bound is the same in every invocation of a group
 * (resume[] moves together), so the barriers are in uniform control flow.
 * Every invocation runs the bounded look for room, not invocation 0 alone:
 * Mesa 22.3's lavapipe, which runs a work-group as 8-wide chunks switched at
 * barriers, mishandled that loop under `if (lid == 0)` (the other chunks
 * kept reading a stale go and posted on past invocation 0's stop). */
#extension GL_GOOGLE_include_directive : require
#include "post_common.glsl"

layout(local_size_x_id = 0) in;

shared uint go;

void main()
{
    uint gid = gl_GlobalInvocationID.x, lid = gl_LocalInvocationID.x;
    uint threads = gl_NumWorkGroups.x * gl_WorkGroupSize.x, group = gl_WorkGroupSize.x;
    uint depth = ctrl.depth;
    for (uint i = resume[gid]; i < a.iters; i++) {
        uint ticket = i * threads + gid;
        /* the group's last ticket of this iteration must fit; every
         * invocation looks (the same loop in uniform control flow), the
         * group goes by invocation 0's answer */
        bool fits = opg_has_room(ticket - lid + group - 1, depth);
        if (lid == 0)
            go = ((i == 0 || !opg_prev_failed(ticket - threads, depth)) && fits) ? 1u : 0u;
        barrier();
        bool room = go != 0;
        barrier();
        if (!room)
            break;
        opg_fill(ticket, depth);
        /* every WQE of the group written (each also published by its seq) */
        controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, OPG_BUF,
                       gl_SemanticsAcquireRelease);
        if (lid == 0)
            atomicAdd(ctrl.doorbell, group, gl_ScopeDevice, OPG_BUF, gl_SemanticsRelease);
        resume[gid] = i + 1;
    }
}
