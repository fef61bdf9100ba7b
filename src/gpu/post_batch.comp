#version 450
/* Batch mode (GPUNetIO's, as opg_post_batch in post.cl): invocation 0
 * decides for the work-group whether the iteration fits, every invocation
 * writes its WQE, and after a barrier invocation 0 alone rings the doorbell
 * for the group. The loop bound is the same in every invocation of a group
 * (resume[] moves together), so the barriers are in uniform control flow. */
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
        if (lid == 0) /* the group's last ticket of this iteration must fit */
            go = ((i == 0 || !opg_prev_failed(ticket - threads, depth)) &&
                  opg_has_room(ticket + group - 1, depth)) ? 1u : 0u;
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
