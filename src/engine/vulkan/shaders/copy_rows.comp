#version 450
// rows rows of width floats from src (their starts src_stride apart, the first at
// src_offset) to dst (dst_stride apart, from dst_offset), grid-stride: the parts of
// latent attention's rows that go to other rows (a query's rotated part, the cache row's
// halves, each head's non-rotated part gathered for its own product).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 4) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Params {
    uint count, width, src_offset, src_stride, dst_offset, dst_stride;
} p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.count; i += gl_NumWorkGroups.x * 256u) {
        uint row = i / p.width, col = i % p.width;
        dst[p.dst_offset + row * p.dst_stride + col] = src[p.src_offset + row * p.src_stride + col];
    }
}
