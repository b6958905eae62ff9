#version 450
// moe_experts (portable): the routed experts' GEMVs, reading only the chosen
// experts' rows of the stacked weights (a gpu_linear of E·rows rows, expert e's
// row i at e·rows + i, in its GGUF type):
//   STAGE 0 (up):   h[r·K + j][i] = relu(W[e_rj·rows + i] · x[r])²     i < rows
//   STAGE 1 (down): c[r][i] += Σ_j wt[r][j] · (W[e_rj·rows + i] · h[r·K + j])
// x      f32 (binding 0): row r at a_off + r·a_stride (STAGE 0), or h rows of
//        k values packed (STAGE 1)
// idx    [t][K] uint, wt [t][K] f32 (bindings 1, 2): moe_route's output
// c      f32 (binding 3): STAGE 0: h [t·K][rows]; STAGE 1: row r at c_off + r·c_stride
// W      [E·rows (padded)][wk] (binding 4), Q8_0 scales (binding 5): gemv.comp's layout
// Workgroup (rows in blocks of 8, t·K pairs or t rows): 32 lanes per row, 4
// weights each in steps of 128, a shared-memory tree per row; f32 sums.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 32, local_size_y = 8) in;
layout(constant_id = 0) const uint WTYPE = 0;
layout(constant_id = 1) const uint STAGE = 0;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer Idx { uint idx[]; };
layout(std430, binding = 2) readonly buffer Wt { float wt[]; };
layout(std430, binding = 3) buffer C { float c[]; };
layout(std430, binding = 4) readonly buffer W { uint w[]; };
layout(std430, binding = 5) readonly buffer Scales { uint scales[]; };

layout(push_constant) uniform Push {
  uint t, K, rows, k, wk;
  uint a_off, a_stride, c_off, c_stride;
} p;

const uint ROWS = 8, LANES = 32;
shared float red[ROWS][LANES];

vec4 weights4(uint row, uint col) {
  uint i = row * p.wk + col;
  if (WTYPE == W_F32)
    return vec4(uintBitsToFloat(w[i]), uintBitsToFloat(w[i + 1]), uintBitsToFloat(w[i + 2]),
                uintBitsToFloat(w[i + 3]));
  if (WTYPE == W_F16 || WTYPE == W_BF16) return halves4(WTYPE, uvec2(w[i / 2], w[i / 2 + 1]));
  return q8_scale(scales, i / 32) * unpack_q8(w[i / 4]);
}

// This lane's part of W[wrow] · a[base..base+k), summed over the row's lanes.
float row_dot(uint wrow, uint base, uint lane, uint y) {
  float part = 0.0;
  for (uint x = 4 * lane; x < p.wk; x += 4 * LANES) {
    vec4 av;
    for (uint e = 0; e < 4; e++) av[e] = x + e < p.k ? a[base + x + e] : 0.0;
    part += dot(av, weights4(wrow, x));
  }
  red[y][lane] = part;
  barrier();
  for (uint s = LANES / 2; s > 0; s >>= 1) {
    if (lane < s) red[y][lane] += red[y][lane + s];
    barrier();
  }
  float sum = red[y][0];
  barrier();
  return sum;
}

void main() {
  uint lane = gl_LocalInvocationID.x, y = gl_LocalInvocationID.y, z = gl_WorkGroupID.y;
  for (uint row0 = gl_WorkGroupID.x * ROWS; row0 < p.rows; row0 += gl_NumWorkGroups.x * ROWS) {
    uint i = min(row0 + y, p.rows - 1); // past the end: a valid row, result unused
    if (STAGE == 0) { // z is a (token, slot) pair
      uint r = z / p.K, e = idx[z];
      float v = row_dot(e * p.rows + i, p.a_off + r * p.a_stride, lane, y);
      if (lane == 0 && row0 + y < p.rows) c[z * p.rows + i] = max(v, 0.0) * max(v, 0.0);
    } else { // z is a token
      float sum = 0.0;
      for (uint j = 0; j < p.K; j++) {
        uint e = idx[z * p.K + j];
        sum += wt[z * p.K + j] * row_dot(e * p.rows + i, (z * p.K + j) * p.k, lane, y);
      }
      uint at = p.c_off + z * p.c_stride + i;
      if (lane == 0 && row0 + y < p.rows) c[at] += sum;
    }
  }
}
