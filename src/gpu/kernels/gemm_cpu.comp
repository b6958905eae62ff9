#version 450
// gemm_cpu (fast variant for CPU drivers such as lavapipe; subgroup
// arithmetic): gemm.comp's product c = epilogue(a·Wᵀ + bias), with its
// bindings, push constants and layouts (see there), no shared memory and no
// barriers.
//
// A CPU driver runs a subgroup as the lanes of a SIMD vector, and lavapipe
// makes every buffer or shared-memory read a loop over the lanes (bounds
// checked): reads, not arithmetic, are its cost. gemm.comp reads two values
// for every two products; here one workgroup is one subgroup, owns R rows ×
// C outputs and walks k with each lane taking 4 consecutive k of every chunk
// of 4·LANES: a read of 4 values of each of its R rows and 4 weights of each
// of its C columns feeds 4·R·C products. The lanes' partial sums are added
// by subgroupAdd at the end, and each lane writes every LANES-th output. W
// is converted to f32 exactly (Q8_0: scale times int8, as gemm.comp); sums
// in f32. No split k (p.splits is 1: a CPU has few cores to fill).
//
// ALIGNED (a's rows start at multiples of 4 floats: lda % 4 == 0) reads a
// 4 floats at a time; else one at a time.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint WTYPE = 0;
layout(constant_id = 1) const uint R = 4; // rows of a per workgroup
layout(constant_id = 2) const uint C = 4; // outputs per workgroup
layout(constant_id = 3) const uint LANES = 8; // the subgroup's size
layout(constant_id = 4) const bool ALIGNED = true;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) buffer Out { float c[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };
layout(std430, binding = 3) readonly buffer W2 { uvec2 w2[]; };
layout(std430, binding = 3) readonly buffer W4 { uvec4 w4[]; };
layout(std430, binding = 4) readonly buffer Scales { uint scales[]; };

layout(push_constant) uniform Push {
  uint m, n, k, mode;
  float alpha;
  uint dual, lda, wk;
} p;

// W[row][i..i+3] as f32 (i % 4 == 0; rows are wk long, wk % 32 == 0).
vec4 weights4(uint row, uint i) {
  uint at = row * p.wk + i;
  if (WTYPE == W_F32) return uintBitsToFloat(w4[at / 4]);
  if (WTYPE == W_F16 || WTYPE == W_BF16) return halves4(WTYPE, w2[at / 4]);
  return q8_scale(scales, at / 32) * unpack_q8(w[at / 4]);
}

// a[row][i..i+3], zeros from k on (i % 4 == 0).
vec4 row4(uint row, uint i, bool whole) {
  uint at = row * p.lda + i;
  if (ALIGNED && whole) return a4[at / 4];
  vec4 v = vec4(0.0);
  for (uint q = 0; q < 4; q++)
    if (i + q < p.k) v[q] = a[at + q];
  return v;
}

void main() {
  uint lane = gl_LocalInvocationID.x;
  uint row0 = gl_WorkGroupID.y * R, col0 = gl_WorkGroupID.x * C;
  // Rows past m read the last row and are not written.
  uint last = p.m - 1;
  float acc[R][C];
  for (uint r = 0; r < R; r++)
    for (uint j = 0; j < C; j++) acc[r][j] = 0.0;
  const uint CHUNK = 4 * LANES;
  uint whole = p.k / CHUNK * CHUNK;
  for (uint kb = 0; kb < p.k; kb += CHUNK) {
    uint i = kb + 4 * lane;
    if (kb >= whole && i >= p.k) continue; // the last chunk's lanes past k
    vec4 wv[C];
    for (uint j = 0; j < C; j++) wv[j] = weights4(col0 + j, i);
    for (uint r = 0; r < R; r++) {
      vec4 av = row4(min(row0 + r, last), i, kb < whole);
      for (uint j = 0; j < C; j++) acc[r][j] += dot(av, wv[j]);
    }
  }

  // The sums, then each lane writes every LANES-th output (r·C + j): one
  // store loop writes LANES outputs instead of one.
  float sum[R * C];
  for (uint r = 0; r < R; r++)
    for (uint j = 0; j < C; j++) sum[r * C + j] = subgroupAdd(acc[r][j]);
  uint width = p.n + p.dual;
  for (uint o = 0; o < R * C; o += LANES) {
    float s = sum[o];
    for (uint q = 1; q < LANES && o + q < R * C; q++) s = lane == q ? sum[o + q] : s;
    uint at = o + lane, row = row0 + at / C, col = col0 + at % C;
    if (at >= R * C || row >= p.m) continue;
    uint i = row * width + col;
    c[i] = epilogue(p.mode, p.alpha, s + bias[col], reads_output(p.mode) ? c[i] : 0.0);
    if (col < p.dual) c[row * width + p.n + col] = s + bias[p.n + col];
  }
}
