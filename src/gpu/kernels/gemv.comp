#version 450
// gemv (portable): one row of a linear layer, for decoders making one token:
//   c[c_off + j] = epilogue(a[a_off..a_off+k) · W[j] + bias[j])   for j < n
//   c[c_off + n + j] = a · W[j] + bias[n + j]                        for j < dual
// with gemm.comp's layouts and epilogues (gpu_linear):
// a      f32 (binding 0), k values from a_off
// bias   [n + dual] f32 (binding 1)
// c      f32 (binding 2): read too by the residual epilogues
// W      [n][wk] in its GGUF type (binding 3): F32 words, F16 or BF16 pairs,
//        or Q8_0 as int8 (4 per word) with
// scales [n][wk/32] f16 pairs (binding 4, Q8_0 only)
// n is a multiple of 64 (padded rows are zero: epilogue(bias = 0)); a row of
// W holds wk = k rounded up to 32 weights, zeros after k.
//
// A workgroup of 256 takes 8 rows at a time (more in a loop past the
// workgroup count), 32 invocations per row, each 4 consecutive weights in
// steps of 128 (neighbours read neighbouring words); a tree in shared memory
// sums a row's 32 partial dots. W is converted to f32 exactly (not rounded);
// products accumulate in f32.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 32, local_size_y = 8) in;
layout(constant_id = 0) const uint WTYPE = 0;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) buffer C { float c[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };
layout(std430, binding = 4) readonly buffer Scales { uint scales[]; };

layout(push_constant) uniform Push {
  uint n, k, mode;
  float alpha;
  uint dual, a_off, c_off, wk;
} p;

const uint ROWS = 8, LANES = 32;
shared float red[ROWS][LANES];

// W[row][col..col+3] as f32 (col % 4 == 0).
vec4 weights4(uint row, uint col) {
  uint i = row * p.wk + col;
  if (WTYPE == W_F32)
    return vec4(uintBitsToFloat(w[i]), uintBitsToFloat(w[i + 1]), uintBitsToFloat(w[i + 2]),
                uintBitsToFloat(w[i + 3]));
  if (WTYPE == W_F16 || WTYPE == W_BF16) return halves4(WTYPE, uvec2(w[i / 2], w[i / 2 + 1]));
  return q8_scale(scales, i / 32) * unpack_q8(w[i / 4]);
}

void main() {
  uint lane = gl_LocalInvocationID.x, y = gl_LocalInvocationID.y;
  for (uint row0 = gl_WorkGroupID.x * ROWS; row0 < p.n; row0 += gl_NumWorkGroups.x * ROWS) {
    uint row = row0 + y;
    float part = 0.0;
    if (row < p.n)
      for (uint x = 4 * lane; x < p.wk; x += 4 * LANES) {
        uint i = p.a_off + x;
        vec4 av;
        if (x + 4 <= p.k) av = vec4(a[i], a[i + 1], a[i + 2], a[i + 3]);
        else // the end of a row of k % 4 != 0: nothing of a past k is read
          for (uint e = 0; e < 4; e++) av[e] = x + e < p.k ? a[i + e] : 0.0;
        part += dot(av, weights4(row, x));
      }
    red[y][lane] = part;
    barrier();
    for (uint s = LANES / 2; s > 0; s >>= 1) {
      if (lane < s) red[y][lane] += red[y][lane + s];
      barrier();
    }
    if (lane == 0 && row < p.n) {
      float sum = red[y][0];
      uint at = p.c_off + row;
      c[at] = epilogue(p.mode, p.alpha, sum + bias[row], reads_output(p.mode) ? c[at] : 0.0);
      if (row < p.dual) c[p.c_off + p.n + row] = sum + bias[p.n + row];
    }
    barrier(); // red is refilled by the next rows
  }
}
