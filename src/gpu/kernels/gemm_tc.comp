#version 450
// gemm (fast, tensor cores through NV cooperative matrices): the contract of
// gemm.comp — c = epilogue(a·Wᵀ + bias), dual outputs, padded n, split k
// (partial sums to part, added by gemm_reduce.comp) — for f16 weights.
//
// W: f16 [n][wk], 8 halves per 128-bit word (F16 weights as stored; Q8_0
//    layers get an f16 copy at load, gpu_linear's w16), or BF16 [n][wk] as
//    stored (WTYPE W_BF16), rounded to f16 when staged in shared memory as the
//    copy would be (common.glsl's f16_bits: exact for |w| in [6.1e-5, 65504]).
// a: f32, rounded to f16 (to nearest, clamped to ±65504) when staged in
//    shared memory: one f16 product per term, accumulated in f32 (16×16×16).
//    So the result is that of f16(a)·W, about 1e-4 of the largest output off
//    a·W (test_gemm's tolerance for it is 2e-4 of that, against f16(a)·W).
// Needs lda % 4 == 0 and k % 8 == 0 (128-bit loads of a; gpu_gemm_strided
// takes gemm.comp otherwise).
//
// Tile: BM × BN = (SG_M·TM·16) × (SG_N·TN·16) per workgroup of SG_M·SG_N
// subgroups of 32 lanes, each owning TM × TN accumulators. k advances BK (32
// or 64, spec constant 6) at a time through shared memory: while the tensor
// cores work on one stage, the next step's a and W are already on their way
// from global memory into registers (128-bit loads), then stored — to the
// other of two stages where two fit in 48 KiB (one barrier a step), else to
// the one stage once every subgroup has read it (two barriers a step: BK 64
// on the 128×128 tile, half the steps of BK 32 for the same loads in
// flight). A shared row is BK halves and 16 bytes of padding (80 bytes at BK
// 32: the 8 rows one 128-bit matrix-load phase reads fall in distinct banks).
// Each output sums its k terms 16 at a time in the same order whatever BK. At the
// end the accumulators leave through the same shared memory, TN side by side
// per subgroup, so a subgroup writes rows of 16·TN consecutive outputs.
// Every loop over tiles and loads is [[unroll]]: their bounds are
// specialization constants, and without the hint NVIDIA's compiler kept them
// as loops (the H200 ran 34.5 instead of 124 TFLOP/s at 4096³; docs/perf.md).
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 5) in;
layout(constant_id = 0) const uint WTYPE = 1; // W_F16, or W_BF16 (converted when staged)
layout(constant_id = 1) const uint SG_M = 2;
layout(constant_id = 2) const uint SG_N = 4;
layout(constant_id = 3) const uint TM = 4;
layout(constant_id = 4) const uint TN = 2;
layout(constant_id = 5) const uint THREADS = 256; // 32 · SG_M · SG_N
layout(constant_id = 6) const uint BK = 32;        // k per step: 32 or 64
// a's type: 0 f32 (rounded when staged), 1 f16 already (8 halves per 128-bit
// word, lda in halves: the same products, half the bytes; for experiments).
layout(constant_id = 7) const uint ATYPE = 0;
// Benchmarks only (bench/gemm_tc_sweep's `diag`; wrong results): bits that
// leave a part of the k loop out to time the rest: 1 the global loads (the
// stage gets constants), 4 the loop's barriers.
layout(constant_id = 8) const uint DIAG = 0;

layout(std430, binding = 0) readonly buffer A { vec4 a4[]; };
layout(std430, binding = 0) readonly buffer A16 { uvec4 a8[]; }; // ATYPE 1
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) buffer C { float c[]; };
layout(std430, binding = 3) readonly buffer W { uvec4 w8[]; };
layout(std430, binding = 5) writeonly buffer Part { float part[]; };

layout(push_constant) uniform Push {
  uint m, n, k, mode;
  float alpha;
  uint dual, lda, wk;
  uint splits, kc;
} p;

const uint BM = SG_M * TM * 16, BN = SG_N * TN * 16;
const uint ROW = BK / 8 + 1;         // 128-bit words per shared row (one of padding)
const uint STAGE = (BM + BN) * ROW;  // a's rows, then W's
const uint NST = 2 * STAGE * 16 <= 49152 ? 2 : 1; // stages that fit
const uint OUT = SG_M * SG_N * 64 * TN;           // the epilogue's words
const uint CW = BK / 8;              // 128-bit chunks per row and step
// Loads per invocation; where a tile's chunks are not a whole number of
// rounds (144 rows on 12 subgroups) the last round's invocations past them
// load nothing (the checks fold away where they are).
const uint AL = (BM * CW + THREADS - 1) / THREADS, BL = (BN * CW + THREADS - 1) / THREADS;
const bool A_EVEN = AL * THREADS == BM * CW, B_EVEN = BL * THREADS == BN * CW;
shared uvec4 sm[NST * STAGE > OUT ? NST * STAGE : OUT];

vec4 ra[2 * AL]; // the next step's a (f32: converted when stored)
uvec4 rh[AL];    // ... or its f16 (ATYPE 1)
uvec4 rb[BL];    // the next step's W

// Global → registers: the step at k0. Chunk e is row e / CW, k0 + 8·(e % CW).
void fetch(uint row0, uint col0, uint k0, uint kend) {
  uint tid = gl_LocalInvocationID.x;
  if ((DIAG & 1) != 0) {
    [[unroll]] for (uint i = 0; i < AL; i++) ra[2 * i] = ra[2 * i + 1] = vec4(float(k0)), rh[i] = uvec4(k0);
    [[unroll]] for (uint i = 0; i < BL; i++) rb[i] = uvec4(k0);
    return;
  }
  [[unroll]] for (uint i = 0; i < AL; i++) {
    uint e = tid + i * THREADS, row = row0 + e / CW, kk = k0 + 8 * (e % CW);
    bool in_a = row < p.m && kk < kend && (A_EVEN || e < BM * CW);
    if (ATYPE == 1) {
      rh[i] = in_a ? a8[(row * p.lda + kk) / 8] : uvec4(0);
      continue;
    }
    uint at = in_a ? (row * p.lda + kk) / 4 : 0;
    ra[2 * i] = in_a ? a4[at] : vec4(0.0);
    ra[2 * i + 1] = in_a ? a4[at + 1] : vec4(0.0);
  }
  [[unroll]] for (uint i = 0; i < BL; i++) {
    uint e = tid + i * THREADS, row = col0 + e / CW, kk = k0 + 8 * (e % CW);
    bool in_w = row < p.n && kk < kend && (B_EVEN || e < BN * CW);
    rb[i] = in_w ? w8[(row * p.wk + kk) / 8] : uvec4(0);
  }
}

uint pack_f16(vec2 v) { return packHalf2x16(clamp(v, -65504.0, 65504.0)); }

// Registers → shared stage s.
void stage(uint s) {
  uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint i = 0; i < AL; i++) {
    uint e = tid + i * THREADS;
    if (!A_EVEN && e >= BM * CW) break;
    vec4 x = ra[2 * i], y = ra[2 * i + 1];
    sm[s * STAGE + (e / CW) * ROW + e % CW] =
        ATYPE == 1 ? rh[i] : uvec4(pack_f16(x.xy), pack_f16(x.zw), pack_f16(y.xy), pack_f16(y.zw));
  }
  [[unroll]] for (uint i = 0; i < BL; i++) {
    uint e = tid + i * THREADS;
    if (!B_EVEN && e >= BN * CW) break;
    uvec4 v = rb[i];
    if (WTYPE == W_BF16)
      v = uvec4(bf16_to_f16_pair(v.x), bf16_to_f16_pair(v.y), bf16_to_f16_pair(v.z),
                bf16_to_f16_pair(v.w));
    sm[s * STAGE + (BM + e / CW) * ROW + e % CW] = v;
  }
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
  [[unroll]] for (uint i = 0; i < TM * TN; i++) acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  uint kbeg = p.splits > 1 ? gl_WorkGroupID.z * p.kc : 0;
  uint kend = p.splits > 1 ? min(kbeg + p.kc, p.k) : p.k;
  fetch(row0, col0, kbeg, kend);
  stage(0);
  barrier();
  uint s = 0;
  for (uint k0 = kbeg; k0 < kend; k0 += BK) {
    bool more = k0 + BK < kend;
    if (more) fetch(row0, col0, k0 + BK, kend);
    [[unroll]] for (uint kk = 0; kk < BK / 8; kk += 2) { // 16 halves = 2 words
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[TM], fb[TN];
      [[unroll]] for (uint i = 0; i < TM; i++)
        coopMatLoadNV(fa[i], sm, s * STAGE + (wr + 16 * i) * ROW + kk, ROW, false);
      [[unroll]] for (uint j = 0; j < TN; j++)
        coopMatLoadNV(fb[j], sm, s * STAGE + (BM + wc + 16 * j) * ROW + kk, ROW, true);
      [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN; j++) acc[i * TN + j] = coopMatMulAddNV(fa[i], fb[j], acc[i * TN + j]);
    }
    if (more) {
      if (NST == 1 && (DIAG & 4) == 0) barrier(); // every subgroup has read the stage it is about to replace
      stage(NST == 1 ? s : s ^ 1);
    }
    if ((DIAG & 4) == 0) barrier();
    if (NST == 2) s ^= 1;
  }

  // Out through shared memory: per subgroup 16 rows × 16·TN floats (64·TN words).
  uint width = p.n + p.dual, base = sg * 64 * TN;
  [[unroll]] for (uint i = 0; i < TM; i++) {
    [[unroll]] for (uint j = 0; j < TN; j++) coopMatStoreNV(acc[i * TN + j], sm, base + 4 * j, 4 * TN, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    // Unrolled: its loads (bias, the residual) can all be in flight at once.
    [[unroll]] for (uint x = 0; x < 8 * TN; x++) {
      uint e = lane + 32 * x;
      uint row = row0 + wr + 16 * i + e / (16 * TN), col = col0 + wc + e % (16 * TN);
      if (row >= p.m || col >= p.n) continue;
      float v = uintBitsToFloat(sm[base + e / 4][e % 4]);
      if (p.splits > 1) {
        part[(gl_WorkGroupID.z * p.m + row) * p.n + col] = v;
        continue;
      }
      uint at = row * width + col;
      c[at] = epilogue(p.mode, p.alpha, v + bias[col], reads_output(p.mode) ? c[at] : 0.0);
      if (col < p.dual) c[row * width + p.n + col] = v + bias[p.n + col];
    }
    subgroupBarrier(); // the next row of accumulators reuses the area
  }
}
