#version 450
// conv_glu_fast: conv_glu.comp's contract (same bindings, push constants and
// math) with one subgroup per row, several rows per workgroup, the LayerNorm's
// statistics by subgroupAdd instead of a shared-memory tree. Used by
// gpu_conv_glu only after its probe passed. Workgroups of 64: row = group ·
// subgroups + subgroup, looping by the grid, so any subgroup size covers every
// row. v goes to y first and each lane reads back only what it wrote.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(local_size_x = 64) in;

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

#include "conv_glu.glsl" // conv(i, c)

void main() {
  uint lane = gl_SubgroupInvocationID, lanes = min(gl_SubgroupSize, gl_WorkGroupSize.x);
  uint step = gl_NumWorkGroups.x * gl_NumSubgroups;
  for (uint i = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; i < p.t; i += step) {
    uint ya = p.y_off + i * p.y_stride;
    if (p.norm == AFFINE) {
      for (uint c = lane; c < p.ch; c += lanes) y[ya + c] = silu(conv(i, c) * g[c] + b[c]);
      continue;
    }
    float s = 0.0;
    for (uint c = lane; c < p.ch; c += lanes) {
      float v = conv(i, c);
      y[ya + c] = v;
      s += v;
    }
    float mean = subgroupAdd(s) / float(p.ch), var = 0.0;
    for (uint c = lane; c < p.ch; c += lanes) {
      float d = y[ya + c] - mean;
      var += d * d;
    }
    float rstd = inversesqrt(subgroupAdd(var) / float(p.ch) + p.eps);
    for (uint c = lane; c < p.ch; c += lanes) y[ya + c] = silu((y[ya + c] - mean) * rstd * g[c] + b[c]);
  }
}
