#version 450
// gemm (fast, NV cooperative matrices): the same contract as gemm.comp —
// c = epilogue(a·Wᵀ + bias), dual outputs, padded n, any k — for F16, BF16
// and Q8_0 weights (F32 weights stay on the portable f32 kernel).
//
// Rounding: W is converted to f16 on its way into shared memory (exact for
// F16; BF16 values outside f16's range lose precision; Q8_0's d·q is rounded
// to f16, as ggml does). a is split into f16 hi + lo parts, both multiplied,
// so it keeps ~21 bits (within f16's exponent range: |a| ≥ 2^-14 for hi). Products accumulate in f32 (16×16×16 tiles).
//
// Tile: 64 rows × 64 outputs per workgroup of 4 subgroups of 32 lanes (the
// probe checks the lane count); each subgroup owns 32×32 = 2×2 matrices.
// k advances 32 at a time through shared memory.
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#include "common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint WTYPE = 1;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) buffer C { float c[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };
layout(std430, binding = 4) readonly buffer Scales { uint scales[]; };

layout(push_constant) uniform Push {
  uint m, n, k, mode;
  float alpha;
  uint dual, lda, wk;
} p;

const uint BM = 64, BN = 64, BK = 32;
shared float16_t sa_hi[BM * BK];
shared float16_t sa_lo[BM * BK];
shared float16_t sw[BN * BK]; // [n][k]: Wᵀ column-major
shared float sc[BM * BN];

// Two consecutive weights W[row][col], W[row][col + 1] (col even) as f32.
vec2 weights2(uint row, uint col) {
  uint i = row * p.wk + col;
  if (WTYPE == W_F16) return unpackHalf2x16(w[i / 2]);
  if (WTYPE == W_BF16) return unpack_bf16(w[i / 2]);
  float d = q8_scale(scales, i / 32);
  vec4 q = unpack_q8(w[i / 4]);
  return d * ((i & 2) == 0 ? q.xy : q.zw);
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint sg = tid / 32;
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  uint wr = (sg / 2) * 32, wc = (sg % 2) * 32;
  // An empty problem reports the subgroup layout: the probe wants 32 lanes × 4.
  if (p.m == 0) {
    if (tid == 0) {
      c[0] = float(gl_SubgroupSize);
      c[1] = float(gl_NumSubgroups);
    }
    return;
  }
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][2];
  for (uint i = 0; i < 2; i++)
    for (uint j = 0; j < 2; j++) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  for (uint k0 = 0; k0 < p.k; k0 += BK) {
    for (uint e = tid; e < BM * BK; e += 128) {
      uint r = e / BK, col = e % BK;
      float v = row0 + r < p.m && k0 + col < p.k ? a[(row0 + r) * p.lda + k0 + col] : 0.0;
      // hi keeps the top 11 significant bits by masking the bits (a float16
      // round trip may be optimized away: NVIDIA's compiler did that in attend),
      // so v − hi is exact and lo holds the rest.
      float hi = uintBitsToFloat(floatBitsToUint(v) & 0xffffe000u);
      sa_hi[e] = float16_t(hi);
      sa_lo[e] = float16_t(v - hi);
    }
    for (uint e = tid; e < BN * BK / 2; e += 128) {
      uint r = e / (BK / 2), col = (e % (BK / 2)) * 2;
      vec2 v = weights2(col0 + r, k0 + col);
      sw[r * BK + col] = float16_t(v.x);
      sw[r * BK + col + 1] = float16_t(v.y);
    }
    barrier();
    for (uint kk = 0; kk < BK; kk += 16) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ah[2], al[2], b[2];
      for (uint i = 0; i < 2; i++) {
        coopMatLoadNV(ah[i], sa_hi, (wr + 16 * i) * BK + kk, BK, false);
        coopMatLoadNV(al[i], sa_lo, (wr + 16 * i) * BK + kk, BK, false);
      }
      for (uint j = 0; j < 2; j++) coopMatLoadNV(b[j], sw, (wc + 16 * j) * BK + kk, BK, true);
      for (uint i = 0; i < 2; i++)
        for (uint j = 0; j < 2; j++) {
          acc[i][j] = coopMatMulAddNV(ah[i], b[j], acc[i][j]);
          acc[i][j] = coopMatMulAddNV(al[i], b[j], acc[i][j]);
        }
    }
    barrier();
  }
  for (uint i = 0; i < 2; i++)
    for (uint j = 0; j < 2; j++)
      coopMatStoreNV(acc[i][j], sc, (wr + 16 * i) * BN + wc + 16 * j, BN, false);
  barrier();

  uint width = p.n + p.dual;
  for (uint e = tid; e < BM * BN; e += 128) {
    uint row = row0 + e / BN, col = col0 + e % BN;
    if (row >= p.m) continue;
    uint at = row * width + col;
    float v = sc[e] + bias[col];
    c[at] = epilogue(p.mode, p.alpha, v, reads_output(p.mode) ? c[at] : 0.0);
    if (col < p.dual) c[row * width + p.n + col] = sc[e] + bias[p.n + col];
  }
}
