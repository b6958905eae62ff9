#version 450
// group_norm (portable): GroupNorm with one group (Moonshine's conv stem):
// normalizes all rows·cols values of x jointly, then a per-column affine:
//   v = TANH ? tanh(x[i][c]) : x[i][c],   mean and var over every v,
//   y[i][c] = (v − mean) / sqrt(var + eps) · g[c] + b[c]
// x f32 (binding 0) at x_off + i·x_stride + c; g, b [cols] f32 (bindings 1, 2);
// y f32 (binding 3) at y_off + i·y_stride + c. One workgroup of 256 does it
// all: the mean, then the mean of (v − mean)², each summed per invocation then
// through a shared-memory tree, in f32. Each invocation writes only values it
// read itself after both sums, so y may be x (the same slice: in place).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
const uint WG = 256;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows, cols, x_off, x_stride, y_off, y_stride, tanh_first;
  float eps;
} p;

#include "wg_sum.glsl"

float value(uint e) {
  float v = x[p.x_off + (e / p.cols) * p.x_stride + e % p.cols];
  return p.tanh_first != 0 ? tanh(clamp(v, -15.0, 15.0)) : v; // tanh(±15) is ±1 in f32; no overflow
}

void main() {
  uint tid = gl_LocalInvocationID.x, n = p.rows * p.cols;
  float s = 0.0;
  for (uint e = tid; e < n; e += WG) s += value(e);
  float mean = wg_sum(s) / float(n);
  float q = 0.0;
  for (uint e = tid; e < n; e += WG) {
    float c = value(e) - mean;
    q += c * c;
  }
  float rstd = inversesqrt(wg_sum(q) / float(n) + p.eps);
  for (uint e = tid; e < n; e += WG) {
    uint c = e % p.cols;
    y[p.y_off + (e / p.cols) * p.y_stride + c] = (value(e) - mean) * rstd * g[c] + b[c];
  }
}
