#version 450
// norm (portable): LayerNorm over segments of rows, then rotate-half RoPE on
// the first `rot` dims of each head within the segment. Serves both
// gpu_layer_norm (a segment is a whole row; rot = 0, or rot = head_dim with
// the unrotated values also written to y) and gpu_qk_norm_rope (a segment is
// one head of q or k, normalized or not, rotated in place).
//
// x      f32 (binding 0): segment s of row i starts at x_off[z] + i·x_stride + s·n
// g0, b0 [n] f32 (bindings 1, 2): LayerNorm weight and bias where z = 0
// g1, b1 [n] f32 (bindings 3, 4): the same where z = 1 (the k heads)
// table  [positions][cos rot/2 | sin rot/2] f32 (binding 5): row i uses pos + i
// y      f32 (binding 6): the normalized values, unrotated (only with WRITE_Y),
//        at y_off + i·y_stride + s·n
// r      f32 (binding 7): the normalized values rotated, at r_off[z] + i·r_stride + s·n
// Workgroups: (rows folded to ≤ 65535, segments per row, 1 or 2 for q/k).
//
// Within a head of hd dims, for d < rot/2: r_d = y_d·cos − y_{d+rot/2}·sin and
// r_{d+rot/2} = y_{d+rot/2}·cos + y_d·sin; dims from rot on pass through.
// Statistics: mean, then the mean of (x − mean)², in f32 through a shared-memory
// tree (workgroup size WG, a power of two, spec constant 0). Each invocation
// reads the x of exactly the outputs it writes after the statistics, so r may
// be x itself (in place).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
const uint WG = gl_WorkGroupSize.x;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer G0 { float g0[]; };
layout(std430, binding = 2) readonly buffer B0 { float b0[]; };
layout(std430, binding = 3) readonly buffer G1 { float g1[]; };
layout(std430, binding = 4) readonly buffer B1 { float b1[]; };
layout(std430, binding = 5) readonly buffer Table { float table[]; };
layout(std430, binding = 6) writeonly buffer Y { float y[]; };
layout(std430, binding = 7) writeonly buffer R { float r[]; };

const uint NORM = 1, WRITE_Y = 2; // flags

layout(push_constant) uniform Push {
  uint rows, n, hd, rot; // segment length n (a multiple of hd), head dims, rotated dims
  uint pos, flags;
  float eps;
  uint x_stride, y_stride, r_stride, y_off;
  uint x_off[2];
  uint r_off[2];
} p;

#include "wg_sum.glsl"

float normed(uint at, uint d, float mean, float rstd) {
  float v = x[at + d];
  if ((p.flags & NORM) == 0) return v;
  bool k = gl_WorkGroupID.z == 1;
  return (v - mean) * rstd * (k ? g1[d] : g0[d]) + (k ? b1[d] : b0[d]);
}

void main() {
  uint tid = gl_LocalInvocationID.x, seg = gl_WorkGroupID.y, z = gl_WorkGroupID.z;
  uint half_ = p.rot / 2, tail = p.hd - p.rot, heads = p.n / p.hd;
  uint pairs = heads * half_, items = pairs + heads * tail;
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    uint xa = p.x_off[z] + row * p.x_stride + seg * p.n;
    uint ya = p.y_off + row * p.y_stride + seg * p.n;
    uint ra = p.r_off[z] + row * p.r_stride + seg * p.n;
    float mean = 0.0, rstd = 1.0;
    if ((p.flags & NORM) != 0) {
      float s = 0.0;
      for (uint i = tid; i < p.n; i += WG) s += x[xa + i];
      mean = wg_sum(s) / float(p.n);
      float v = 0.0;
      for (uint i = tid; i < p.n; i += WG) {
        float c = x[xa + i] - mean;
        v += c * c;
      }
      rstd = inversesqrt(wg_sum(v) / float(p.n) + p.eps);
    }
    // Items: the rotated pairs of every head, then every head's other dims.
    for (uint e = tid; e < items; e += WG) {
      if (e >= pairs) {
        uint q = e - pairs;
        uint d = q / tail * p.hd + p.rot + q % tail;
        float v = normed(xa, d, mean, rstd);
        if ((p.flags & WRITE_Y) != 0) y[ya + d] = v;
        r[ra + d] = v;
        continue;
      }
      uint j = e % half_, d0 = e / half_ * p.hd + j, d1 = d0 + half_;
      float v0 = normed(xa, d0, mean, rstd), v1 = normed(xa, d1, mean, rstd);
      uint t = (p.pos + row) * p.rot + j;
      float c = table[t], s = table[t + half_];
      if ((p.flags & WRITE_Y) != 0) {
        y[ya + d0] = v0;
        y[ya + d1] = v1;
      }
      r[ra + d0] = v0 * c - v1 * s;
      r[ra + d1] = v1 * c + v0 * s;
    }
  }
}
