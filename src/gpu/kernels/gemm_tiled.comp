#version 450
// gemm (fast, NV cooperative matrices, tile chosen by specialization): the
// contract and rounding of gemm_coop.comp — c = epilogue(a·Wᵀ + bias), dual
// outputs, padded n, any k; W to f16 on its way into shared memory, a split
// into f16 hi + lo, f32 accumulation — with SG_M × SG_N subgroups of 32 lanes
// per workgroup, each owning TM × TN matrices of 16×16, so large problems get
// a 128×128 tile (twice the reuse of gemm_coop's 64×64). Results leave through
// a 16×16 staging area per subgroup: shared memory stays under 48 KiB for any
// tile, and n need not be a multiple of the tile (the weight rows end at n).
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#include "common.glsl"

layout(local_size_x_id = 5) in;
layout(constant_id = 0) const uint WTYPE = 1;
layout(constant_id = 1) const uint SG_M = 2;
layout(constant_id = 2) const uint SG_N = 2;
layout(constant_id = 3) const uint TM = 2;
layout(constant_id = 4) const uint TN = 2;
layout(constant_id = 5) const uint THREADS = 128; // 32 · SG_M · SG_N

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

const uint BM = SG_M * TM * 16, BN = SG_N * TN * 16, BK = 32;
shared float16_t sa_hi[BM * BK];
shared float16_t sa_lo[BM * BK];
shared float16_t sw[BN * BK]; // [n][k]: Wᵀ column-major
shared float sc[SG_M * SG_N * 256];

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
  uint tid = gl_LocalInvocationID.x, sg = tid / 32, lane = tid % 32;
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  uint wr = (sg / SG_N) * TM * 16, wc = (sg % SG_N) * TN * 16;
  // An empty problem reports the subgroup layout: the probe wants 32 lanes × SG_M·SG_N.
  if (p.m == 0) {
    if (tid == 0) {
      c[0] = float(gl_SubgroupSize);
      c[1] = float(gl_NumSubgroups);
    }
    return;
  }
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[TM * TN];
  for (uint i = 0; i < TM * TN; i++) acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  for (uint k0 = 0; k0 < p.k; k0 += BK) {
    for (uint e = tid; e < BM * BK; e += THREADS) {
      uint r = e / BK, col = e % BK;
      float v = row0 + r < p.m && k0 + col < p.k ? a[(row0 + r) * p.lda + k0 + col] : 0.0;
      // hi: the top 11 significant bits by masking (not a float16 round trip,
      // which NVIDIA's compiler may drop), so v − hi is exact.
      float hi = uintBitsToFloat(floatBitsToUint(v) & 0xffffe000u);
      sa_hi[e] = float16_t(hi);
      sa_lo[e] = float16_t(v - hi);
    }
    for (uint e = tid; e < BN * BK / 2; e += THREADS) {
      uint r = e / (BK / 2), col = (e % (BK / 2)) * 2;
      vec2 v = col0 + r < p.n ? weights2(col0 + r, k0 + col) : vec2(0.0);
      sw[r * BK + col] = float16_t(v.x);
      sw[r * BK + col + 1] = float16_t(v.y);
    }
    barrier();
    for (uint kk = 0; kk < BK; kk += 16) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> b[TN];
      for (uint j = 0; j < TN; j++) coopMatLoadNV(b[j], sw, (wc + 16 * j) * BK + kk, BK, true);
      for (uint i = 0; i < TM; i++) {
        fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ah, al;
        coopMatLoadNV(ah, sa_hi, (wr + 16 * i) * BK + kk, BK, false);
        coopMatLoadNV(al, sa_lo, (wr + 16 * i) * BK + kk, BK, false);
        for (uint j = 0; j < TN; j++) {
          acc[i * TN + j] = coopMatMulAddNV(ah, b[j], acc[i * TN + j]);
          acc[i * TN + j] = coopMatMulAddNV(al, b[j], acc[i * TN + j]);
        }
      }
    }
    barrier();
  }

  uint width = p.n + p.dual, stage = sg * 256;
  for (uint i = 0; i < TM; i++)
    for (uint j = 0; j < TN; j++) {
      coopMatStoreNV(acc[i * TN + j], sc, stage, 16, false);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      for (uint e = lane; e < 256; e += 32) {
        uint row = row0 + wr + 16 * i + e / 16, col = col0 + wc + 16 * j + e % 16;
        if (row >= p.m || col >= p.n) continue;
        uint at = row * width + col;
        float v = sc[stage + e] + bias[col];
        c[at] = epilogue(p.mode, p.alpha, v, reads_output(p.mode) ? c[at] : 0.0);
        if (col < p.dual) c[row * width + p.n + col] = sc[stage + e] + bias[p.n + col];
      }
      subgroupBarrier(); // the next store reuses the staging area
    }
}
