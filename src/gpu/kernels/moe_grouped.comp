#version 450
// moe_grouped (portable): the routed experts' GEMVs for many tokens, grouped by
// expert so that a workgroup reads its rows of an expert's weights once per
// batch of up to PB pairs instead of once per pair (moe_experts.comp's layout
// and weight types: a gpu_linear of E·rows rows, expert e's row i at e·rows + i):
//   STAGE 0 (up):   h[q][i] = relu(W[e·rows + i] · x[q / K])²      for q in e's list
//   STAGE 1 (down): y[q][i] = W[e·rows + i] · h[q]                  (moe_combine sums them)
// x      f32 (binding 0): STAGE 0 token rows at a_off + t·a_stride; STAGE 1 h, k
//        values per pair
// list   [E][cap] uint, count [E] uint (bindings 1, 2): moe_lists' output
// out    f32 (binding 3): [pairs][rows]
// W, Q8_0 scales (bindings 4, 5)
// Workgroup (rows in blocks of 8, expert): 32 lanes per row, 4 weights each in
// steps of 128; every weight read is used for all pairs of the batch; a
// shared-memory tree per row and pair. f32 sums.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 32, local_size_y = 8) in;
layout(constant_id = 0) const uint WTYPE = 0;
layout(constant_id = 1) const uint STAGE = 0;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer List { uint list[]; };
layout(std430, binding = 2) readonly buffer Count { uint count[]; };
layout(std430, binding = 3) writeonly buffer Out { float o[]; };
layout(std430, binding = 4) readonly buffer W { uint w[]; };
layout(std430, binding = 5) readonly buffer Scales { uint scales[]; };

layout(push_constant) uniform Push {
  uint K, rows, k, wk, cap;
  uint a_off, a_stride;
} p;

const uint ROWS = 8, LANES = 32, PB = 8;
shared float red[ROWS][PB][LANES];

vec4 weights4(uint row, uint col) {
  uint i = row * p.wk + col;
  if (WTYPE == W_F32)
    return vec4(uintBitsToFloat(w[i]), uintBitsToFloat(w[i + 1]), uintBitsToFloat(w[i + 2]),
                uintBitsToFloat(w[i + 3]));
  if (WTYPE == W_F16 || WTYPE == W_BF16) return halves4(WTYPE, uvec2(w[i / 2], w[i / 2 + 1]));
  return q8_scale(scales, i / 32) * unpack_q8(w[i / 4]);
}

// Where pair q's input row starts.
uint input_row(uint q) { return STAGE == 0 ? p.a_off + (q / p.K) * p.a_stride : q * p.k; }

vec4 input4(uint base, uint x) {
  vec4 v;
  for (uint e = 0; e < 4; e++) v[e] = x + e < p.k ? a[base + x + e] : 0.0;
  return v;
}

void main() {
  uint lane = gl_LocalInvocationID.x, y = gl_LocalInvocationID.y, e = gl_WorkGroupID.y;
  uint n = count[e];
  for (uint row0 = gl_WorkGroupID.x * ROWS; row0 < p.rows; row0 += gl_NumWorkGroups.x * ROWS) {
    uint i = min(row0 + y, p.rows - 1), wrow = e * p.rows + i; // past the end: result unused
    for (uint b0 = 0; b0 < n; b0 += PB) {
      uint nb = min(PB, n - b0);
      uint base[PB];
      float part[PB];
      for (uint j = 0; j < PB; j++) {
        base[j] = j < nb ? input_row(list[e * p.cap + b0 + j]) : 0;
        part[j] = 0.0;
      }
      for (uint x = 4 * lane; x < p.wk; x += 4 * LANES) {
        vec4 wv = weights4(wrow, x);
        for (uint j = 0; j < PB; j++)
          if (j < nb) part[j] += dot(input4(base[j], x), wv);
      }
      for (uint j = 0; j < PB; j++) red[y][j][lane] = part[j];
      barrier();
      for (uint s = LANES / 2; s > 0; s >>= 1) {
        if (lane < s)
          for (uint j = 0; j < PB; j++) red[y][j][lane] += red[y][j][lane + s];
        barrier();
      }
      if (lane < nb && row0 + y < p.rows) {
        float v = red[y][lane][0];
        uint q = list[e * p.cap + b0 + lane];
        o[q * p.rows + i] = STAGE == 0 ? max(v, 0.0) * max(v, 0.0) : v;
      }
      barrier(); // red is refilled by the next batch
    }
  }
}
