#version 450
// conv_glu (portable): the Conformer conv module between its pointwise convs.
// For each row i < t and channel c < ch:
//   glu(s, c) = h[s][c] · sigmoid(h[s][ch + c])
//   v[i][c]   = bias[c] + Σ_k w[c][k] · glu(i + k − left, c)  (rows outside 0..t−1 are 0)
//   left = kernel/2 (centred), or kernel − 1 (causal: NeMo's conv_context [k−1, 0])
//   y[i][c]   = SiLU(norm(v[i])[c]), norm = LayerNorm over ch (g, b, eps) or v·g[c] + b[c]
//
// h    f32 (binding 0): row s at h_off + s·h_stride, 2·ch values (GLU value | gate)
// w    [ch][kernel] f32 (binding 1): the depthwise weight (PyTorch's [ch][1][kernel])
// bias [ch] f32 (binding 2)
// g, b [ch] f32 (bindings 3, 4): LayerNorm weight and bias, or the folded BatchNorm
// y    f32 (binding 5): row i at y_off + i·y_stride, ch values; must not overlap h
// BATCH = 1: the t rows are clips of seg rows each, clip n holding lens[n] ≤ seg
// rows of its own (binding 6, uint32) and padding after: the conv reads only
// the row's own clip's rows, padding as 0 (transformers zeroes padded frames
// before the depthwise conv); padded rows get values too (finite, unused).
// One workgroup of 256 per row (rows folded to ≤ 65535 workgroups). With the
// LayerNorm, v goes to y first and each invocation reads back only what it
// wrote; statistics as norm.comp's (mean, then mean of (v − mean)², f32 tree).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

const uint WG = 256;
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer H { float h[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) readonly buffer G { float g[]; };
layout(std430, binding = 4) readonly buffer B { float b[]; };
layout(std430, binding = 5) buffer Y { float y[]; };
layout(std430, binding = 6) readonly buffer Lens { uint lens[]; };
layout(constant_id = 0) const uint BATCH = 0;

const uint LAYER_NORM = 0, AFFINE = 1; // gpu_conv_norm

layout(push_constant) uniform Push {
  uint t, ch, kernel, norm;
  float eps;
  uint h_off, h_stride, y_off, y_stride;
  uint left; // taps before the row: kernel/2 (centred) or kernel − 1 (causal)
  uint seg;  // BATCH = 1: rows per clip
} p;

#include "wg_sum.glsl"

#include "conv_glu.glsl" // conv(i, c)

void main() {
  uint tid = gl_LocalInvocationID.x;
  for (uint i = gl_WorkGroupID.x; i < p.t; i += gl_NumWorkGroups.x) {
    uint ya = p.y_off + i * p.y_stride;
    if (p.norm == AFFINE) {
      for (uint c = tid; c < p.ch; c += WG) y[ya + c] = silu(conv(i, c) * g[c] + b[c]);
      continue;
    }
    float s = 0.0;
    for (uint c = tid; c < p.ch; c += WG) {
      float v = conv(i, c);
      y[ya + c] = v;
      s += v;
    }
    float mean = wg_sum(s) / float(p.ch), var = 0.0;
    for (uint c = tid; c < p.ch; c += WG) {
      float d = y[ya + c] - mean;
      var += d * d;
    }
    float rstd = inversesqrt(wg_sum(var) / float(p.ch) + p.eps);
    for (uint c = tid; c < p.ch; c += WG) y[ya + c] = silu((y[ya + c] - mean) * rstd * g[c] + b[c]);
  }
}
