#version 450
// pack (portable): f32 pairs → f16 pairs (one word each), for the K/V cache
// and for gemm_tc's a in f16 (linear.c, CLAMP 1):
//   y[dst + r·dst_stride + i] = f16(x[s]) | f16(x[s + 1]) << 16,
//   s = src + r·src_stride + 2i,   for i < pairs, r < rows
// x  f32 (binding 0); y  words (binding 1). Rounds to nearest even
// (packHalf2x16). One invocation per word, workgroups of 256 along the row
// and one row per workgroup y, more words and rows in loops past the
// workgroup counts.
layout(local_size_x = 256) in;
// CLAMP 1: x clamped to ±65504 first, as gemm_tc rounds a (for its a in f16).
layout(constant_id = 0) const uint CLAMP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };

layout(push_constant) uniform Push {
  uint rows, pairs, src, src_stride, dst, dst_stride;
} p;

void main() {
  for (uint r = gl_WorkGroupID.y; r < p.rows; r += gl_NumWorkGroups.y)
    for (uint i = gl_GlobalInvocationID.x; i < p.pairs; i += gl_NumWorkGroups.x * 256) {
      uint s = p.src + r * p.src_stride + 2 * i;
      vec2 v = vec2(x[s], x[s + 1]);
      y[p.dst + r * p.dst_stride + i] = packHalf2x16(CLAMP == 1 ? clamp(v, -65504.0, 65504.0) : v);
    }
}
