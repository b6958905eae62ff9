#version 450
// weights_f16: a linear layer's BF16 or Q8_0 weights as the f16 copy gemm_tc
// reads ([n][wk] f16 pairs), made once at load on the GPU instead of on the
// host. Rounds to nearest, ties to even, with integer operations only, exactly
// as base/half.h's f32_to_f16 (so the result does not depend on the driver's
// conversion; common.glsl's f16_bits). One invocation per output word (two weights); the grid is
// (x, y) groups of 256 words, word = (y · groups_x + x) · 256 + local.
//   binding 0: the weights as gpu_linear holds them (BF16 [n][wk]; Q8_0 int8 [n][wk])
//   binding 1: Q8_0 scales [n][wk/32] f16 pairs (any buffer for BF16)
//   binding 2: out, [n][wk] f16 pairs
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint WTYPE = W_BF16;

layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 1) readonly buffer Scales { uint scales[]; };
layout(std430, binding = 2) writeonly buffer Out { uint o[]; };

layout(push_constant) uniform Push { uint words; } p;

void main() {
  uint word = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (word >= p.words) return;
  vec2 v;
  if (WTYPE == W_BF16) {
    v = unpack_bf16(w[word]);
  } else {
    vec4 q = unpack_q8(w[word / 2]);
    v = (word % 2 == 0 ? q.xy : q.zw) * q8_scale(scales, word * 2 / 32);
  }
  o[word] = f16_bits(v.x) | (f16_bits(v.y) << 16);
}
