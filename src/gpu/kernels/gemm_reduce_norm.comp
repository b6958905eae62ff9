#version 450
// gemm_reduce_norm: gemm_reduce.comp and the LayerNorm that follows it in one
// dispatch (gpu_gemm_norm), for a split-k GEMM without dual outputs —
//   c [m][n] = epilogue(Σ_z part[z][m][n] + bias)          (gemm_reduce's)
//   y [m][cols] at rows of y_stride = LayerNorm(c's first cols columns)
// A workgroup per row (rows folded to ≤ 65535 workgroups); invocation tid
// keeps columns tid + j·WG (j < PER) in registers between the two. The
// statistics are norm.comp's, in the same order: each invocation's share
// summed in column order, then a shared-memory tree of WG (spec constant 0,
// norm.c's group size for cols) — so y is what gemm_reduce and then norm.comp
// would write. Needs n ≤ WG·PER (linear.c checks).
// NORM2 = 1 (spec constant 1): then also c's first cols columns = a second
// LayerNorm (g2, b2, eps2) of y, as norm.comp would take it from y, written
// over the v it replaces (gpu_gemm_norm2: a Conformer block's last norm and
// the next block's first, one dispatch).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint NORM2 = 0;
const uint WG = gl_WorkGroupSize.x, PER = 8;

layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) buffer C { float c[]; };
layout(std430, binding = 3) readonly buffer G { float g[]; };
layout(std430, binding = 4) readonly buffer B { float b[]; };
layout(std430, binding = 5) writeonly buffer Y { float y[]; };
layout(std430, binding = 6) readonly buffer G2 { float g2[]; };
layout(std430, binding = 7) readonly buffer B2 { float b2[]; };

layout(push_constant) uniform Push {
  uint m, n, splits, mode;
  float alpha;
  uint cols, y_stride;
  float eps, eps2;
} p;

#include "wg_sum.glsl"

void main() {
  uint tid = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < p.m; row += gl_NumWorkGroups.x) {
    float v[PER];
    float s = 0.0;
    [[unroll]] for (uint j = 0; j < PER; j++) {
      uint col = tid + j * WG;
      v[j] = 0.0;
      if (col >= p.n) continue;
      float t = 0.0;
      for (uint z = 0; z < p.splits; z++) t += part[(z * p.m + row) * p.n + col];
      uint at = row * p.n + col;
      v[j] = epilogue(p.mode, p.alpha, t + bias[col], reads_output(p.mode) ? c[at] : 0.0);
      c[at] = v[j];
      if (col < p.cols) s += v[j];
    }
    float mean = wg_sum(s) / float(p.cols), q = 0.0;
    [[unroll]] for (uint j = 0; j < PER; j++) {
      uint col = tid + j * WG;
      if (col >= p.cols) continue;
      float d = v[j] - mean;
      q += d * d;
    }
    float rstd = inversesqrt(wg_sum(q) / float(p.cols) + p.eps);
    float s2 = 0.0;
    [[unroll]] for (uint j = 0; j < PER; j++) {
      uint col = tid + j * WG;
      if (col >= p.cols) continue;
      v[j] = (v[j] - mean) * rstd * g[col] + b[col];
      y[row * p.y_stride + col] = v[j];
      s2 += v[j];
    }
    if (NORM2 == 0) continue;
    float mean2 = wg_sum(s2) / float(p.cols), q2 = 0.0;
    [[unroll]] for (uint j = 0; j < PER; j++) {
      uint col = tid + j * WG;
      if (col >= p.cols) continue;
      float d = v[j] - mean2;
      q2 += d * d;
    }
    float rstd2 = inversesqrt(wg_sum(q2) / float(p.cols) + p.eps2);
    [[unroll]] for (uint j = 0; j < PER; j++) {
      uint col = tid + j * WG;
      if (col < p.cols) c[row * p.n + col] = (v[j] - mean2) * rstd2 * g2[col] + b2[col];
    }
  }
}
