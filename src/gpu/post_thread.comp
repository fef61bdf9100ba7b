#version 450
/* Thread mode: every invocation checks room, posts and rings alone (the
 * same protocol as opg_post_thread in post.cl). The work-group size is
 * specialisation constant 0. */
#extension GL_GOOGLE_include_directive : require
#include "post_common.glsl"

layout(local_size_x_id = 0) in;

void main()
{
    uint gid = gl_GlobalInvocationID.x;
    uint threads = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint depth = ctrl.depth;
    for (uint i = resume[gid]; i < a.iters; i++) {
        uint ticket = i * threads + gid;
        if ((i > 0 && opg_prev_failed(ticket - threads, depth)) || !opg_has_room(ticket, depth))
            break;
        opg_fill(ticket, depth);
        atomicAdd(ctrl.doorbell, 1u, gl_ScopeDevice, OPG_BUF, gl_SemanticsRelease);
        resume[gid] = i + 1;
    }
}
