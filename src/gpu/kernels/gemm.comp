#version 450
// gemm (portable): c = epilogue(a·Wᵀ + bias) for m rows of a.
//
// a      [m][k] f32, rows lda floats apart (binding 0)
// bias   [n + dual] f32 (binding 1): n biases, then `dual` second biases
// c      [m][n + dual] f32 (binding 2): read too by the residual epilogues
// W      [n][wk] in its GGUF type (binding 3): F32 words, F16 or BF16 pairs,
//        or Q8_0 as int8 (4 per word, row-major) with
// scales [n][wk/32] f16 pairs (binding 4, Q8_0 only)
// n is a multiple of 64 (rows padded with zeros: those outputs are
// epilogue(0)); wk is k rounded up to 32, the extra weights zero. The first `dual` outputs of a row are
// also written at n + j with the second bias and no epilogue (q+u and q+v).
//
// Tile: 64 rows × 64 outputs per workgroup of 256, 4×4 per invocation, k in
// steps of 16 through shared memory. W is converted to f32 exactly (no
// rounding); products accumulate in f32.
//
// Split k (splits > 1, for few rows: more workgroups in flight): workgroup z
// sums k in [z·kc, (z + 1)·kc) and writes its raw sums to
// part [z][m][n] (binding 5); gemm_reduce.comp adds them up and applies the
// bias and epilogue.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const uint WTYPE = 0;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) buffer C { float c[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };
layout(std430, binding = 4) readonly buffer Scales { uint scales[]; };
layout(std430, binding = 5) writeonly buffer Part { float part[]; };

layout(push_constant) uniform Push {
  uint m, n, k, mode;
  float alpha;
  uint dual, lda, wk;
  uint splits, kc;
} p;

const uint TILE = 64, KSTEP = 16;
shared float as[KSTEP][TILE + 1];
shared float ws[KSTEP][TILE + 1];

// Four consecutive weights W[row][col..col+3] as f32 (col % 4 == 0).
vec4 weights4(uint row, uint col) {
  uint i = row * p.wk + col;
  if (WTYPE == W_F32)
    return vec4(uintBitsToFloat(w[i]), uintBitsToFloat(w[i + 1]), uintBitsToFloat(w[i + 2]),
                uintBitsToFloat(w[i + 3]));
  if (WTYPE == W_F16 || WTYPE == W_BF16) return halves4(WTYPE, uvec2(w[i / 2], w[i / 2 + 1]));
  float d = q8_scale(scales, i / 32);
  return d * unpack_q8(w[i / 4]);
}

void main() {
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  uint tid = ty * 16 + tx;
  uint row0 = gl_WorkGroupID.y * TILE, col0 = gl_WorkGroupID.x * TILE;
  float acc[4][4];
  for (uint i = 0; i < 4; i++)
    for (uint j = 0; j < 4; j++) acc[i][j] = 0.0;

  // Loaders: each invocation brings 4 consecutive k of one row of a and of W.
  // a is cut at kend: W past it (the next split's, or the zero padding) meets zeros.
  uint lr = tid / 4, lk = (tid % 4) * 4;
  uint kbeg = p.splits > 1 ? gl_WorkGroupID.z * p.kc : 0;
  uint kend = p.splits > 1 ? min(kbeg + p.kc, p.k) : p.k;
  for (uint k0 = kbeg; k0 < kend; k0 += KSTEP) {
    uint ar = row0 + lr;
    vec4 av = vec4(0.0);
    if (ar < p.m) {
      uint i = ar * p.lda + k0 + lk;
      if (k0 + lk + 4 <= kend) av = vec4(a[i], a[i + 1], a[i + 2], a[i + 3]);
      else
        for (uint q = 0; q < 4; q++) av[q] = k0 + lk + q < kend ? a[i + q] : 0.0;
    }
    vec4 wv = weights4(col0 + lr, k0 + lk);
    for (uint q = 0; q < 4; q++) {
      as[lk + q][lr] = av[q];
      ws[lk + q][lr] = wv[q];
    }
    barrier();
    for (uint kk = 0; kk < KSTEP; kk++) {
      float ar4[4], wr4[4];
      for (uint i = 0; i < 4; i++) ar4[i] = as[kk][ty + 16 * i];
      for (uint j = 0; j < 4; j++) wr4[j] = ws[kk][tx + 16 * j];
      for (uint i = 0; i < 4; i++)
        for (uint j = 0; j < 4; j++) acc[i][j] += ar4[i] * wr4[j];
    }
    barrier();
  }

  if (p.splits > 1) {
    for (uint i = 0; i < 4; i++) {
      uint row = row0 + ty + 16 * i;
      if (row >= p.m) continue;
      for (uint j = 0; j < 4; j++)
        part[(gl_WorkGroupID.z * p.m + row) * p.n + col0 + tx + 16 * j] = acc[i][j];
    }
    return;
  }
  uint width = p.n + p.dual;
  for (uint i = 0; i < 4; i++) {
    uint row = row0 + ty + 16 * i;
    if (row >= p.m) continue;
    for (uint j = 0; j < 4; j++) {
      uint col = col0 + tx + 16 * j;
      uint at = row * width + col;
      float v = acc[i][j] + bias[col];
      c[at] = epilogue(p.mode, p.alpha, v, reads_output(p.mode) ? c[at] : 0.0);
      if (col < p.dual) c[row * width + p.n + col] = acc[i][j] + bias[p.n + col];
    }
  }
}
