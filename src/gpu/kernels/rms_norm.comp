#version 450
// rms_norm (portable): RMSNorm over groups of a row, optionally gated, as
// Nemotron-H computes it (NemotronHRMSNorm, NemotronHRMSNormGated):
//   v = x            (plain)    or  v = x · silu(z)   (GATED)
//   y = w · v / sqrt(mean over the group of v² + eps)
// x  f32 (binding 0): row i at x_off + i·x_stride, n values
// z  f32 (binding 1): the gate, row i at z_off + i·z_stride (GATED only)
// w  [n] f32 (binding 2)
// y  f32 (binding 3): row i at y_off + i·y_stride; may be x (in place: each
//    invocation writes only the values it read)
// n a multiple of `group`. Workgroups: (rows folded to ≤ 65535, n / group);
// f32 sums through a shared-memory tree of WG (spec constant 0, a power of two).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
const uint WG = gl_WorkGroupSize.x;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Z { float z[]; };
layout(std430, binding = 2) readonly buffer W { float w[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows, n, group, gated;
  float eps;
  uint x_off, x_stride, z_off, z_stride, y_off, y_stride;
} p;

#include "wg_sum.glsl"

float value(uint row, uint j) {
  float v = x[p.x_off + row * p.x_stride + j];
  if (p.gated != 0) {
    float g = z[p.z_off + row * p.z_stride + j];
    v *= g / (1.0 + exp(-g));
  }
  return v;
}

void main() {
  uint tid = gl_LocalInvocationID.x, first = gl_WorkGroupID.y * p.group;
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    float ss = 0.0;
    for (uint j = tid; j < p.group; j += WG) {
      float v = value(row, first + j);
      ss += v * v;
    }
    float scale = inversesqrt(wg_sum(ss) / float(p.group) + p.eps);
    for (uint j = tid; j < p.group; j += WG)
      y[p.y_off + row * p.y_stride + first + j] = w[first + j] * (value(row, first + j) * scale);
  }
}
