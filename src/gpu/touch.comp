#version 450
/* --gpu_touch (opg_touch in post.cl): the invocations read every word of a
 * buffer; the xor goes to sink so the loads cannot be dropped. */
layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer Buf { uint words[]; };
layout(std430, set = 0, binding = 1) buffer Sink { uint sink[]; };
layout(push_constant) uniform Args { uint n; } a;

void main()
{
    uint gid = gl_GlobalInvocationID.x, n = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint acc = 0;
    for (uint i = gid; i < a.n; i += n)
        acc ^= words[i];
    sink[gid] = acc;
}
