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
// subgroups of 32 lanes, each owning TM × TN accumulators. k advances 32 at
// a time through two shared-memory stages: while the tensor cores work on one
// stage, the next step's a and W are already on their way from global memory
// into registers (128-bit loads), then stored to the other stage — one barrier
// per step. A shared row is 32 halves and 16 bytes of padding (80 bytes: the
// 8 rows one 128-bit matrix-load phase reads fall in distinct banks). At the
// end the accumulators leave through the same shared memory, TN side by side
// per subgroup, so a subgroup writes rows of 16·TN consecutive outputs.
// Every loop over tiles and loads is [[unroll]]: their bounds are
// specialization constants, and without the hint NVIDIA's compiler kept them
// as loops (the H200 ran 34.5 instead of 124 TFLOP/s at 4096³; docs/perf.md).
//
// Experiments for few rows (specialization constants; the defaults are the
// kernel above, unchanged):
// DEPTH = 2: the loads run two steps ahead instead of one, in two register
//   sets (not a third shared stage: the 128×128 tile's three stages would
//   take 60 KiB, past the 48 KiB every device gives). While step k's MMAs run,
//   step k+1 waits in one set and step k+2's loads fill the other, so a step
//   waits for loads issued a whole step earlier. The k-loop takes DEPTH steps
//   per iteration, unrolled, so each set is addressed by a constant.
// FIXUP = 1: split k without gemm_reduce's dispatch. Each workgroup writes its
//   piece to part as before, then bumps a per-tile counter (binding 6, zeros
//   between calls); the last of the tile's pieces to arrive adds them in
//   gemm_reduce's order (z = 0, 1, ...: the same sums), applies the bias and
//   epilogue, and sets the counter back to 0. No workgroup waits for another.
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
layout(constant_id = 6) const uint DEPTH = 1;      // steps of loads in flight: 1 or 2
layout(constant_id = 7) const uint FIXUP = 0;      // 1: split k summed by the last piece

layout(std430, binding = 0) readonly buffer A { vec4 a4[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) buffer C { float c[]; };
layout(std430, binding = 3) readonly buffer W { uvec4 w8[]; };
layout(std430, binding = 5) writeonly buffer Part { float part[]; };
layout(std430, binding = 5) coherent buffer PartFix { float partf[]; }; // FIXUP: part, coherent
layout(std430, binding = 6) coherent buffer Count { uint count[]; };   // FIXUP: per tile

layout(push_constant) uniform Push {
  uint m, n, k, mode;
  float alpha;
  uint dual, lda, wk;
  uint splits, kc;
} p;

const uint BM = SG_M * TM * 16, BN = SG_N * TN * 16, BK = 32;
const uint ROW = BK / 8 + 1;         // 128-bit words per shared row (one of padding)
const uint STAGE = (BM + BN) * ROW;  // a's rows, then W's
const uint AL = BM * (BK / 8) / THREADS, BL = BN * (BK / 8) / THREADS; // loads per invocation
shared uvec4 sm[2 * STAGE];
shared bool last_piece; // FIXUP: this workgroup finishes the tile

// DEPTH register sets of coming steps, set q at [q·2·AL] and [q·BL]; `set` is
// a constant wherever fetch and stage are called.
vec4 ra[2 * AL * DEPTH]; // a (f32: converted when stored)
uvec4 rb[BL * DEPTH];    // W

// Global → register set `set`: the step at k0. Chunk e is row e / 4, k0 + 8·(e % 4).
void fetch(uint row0, uint col0, uint k0, uint kend, uint set) {
  uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint i = 0; i < AL; i++) {
    uint e = tid + i * THREADS, row = row0 + e / 4, kk = k0 + 8 * (e % 4);
    bool in_a = row < p.m && kk < kend;
    uint at = in_a ? (row * p.lda + kk) / 4 : 0;
    ra[set * 2 * AL + 2 * i] = in_a ? a4[at] : vec4(0.0);
    ra[set * 2 * AL + 2 * i + 1] = in_a ? a4[at + 1] : vec4(0.0);
  }
  [[unroll]] for (uint i = 0; i < BL; i++) {
    uint e = tid + i * THREADS, row = col0 + e / 4, kk = k0 + 8 * (e % 4);
    rb[set * BL + i] = row < p.n && kk < kend ? w8[(row * p.wk + kk) / 8] : uvec4(0);
  }
}

uint pack_f16(vec2 v) { return packHalf2x16(clamp(v, -65504.0, 65504.0)); }

// Register set `set` → shared stage s.
void stage(uint s, uint set) {
  uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint i = 0; i < AL; i++) {
    uint e = tid + i * THREADS;
    vec4 x = ra[set * 2 * AL + 2 * i], y = ra[set * 2 * AL + 2 * i + 1];
    sm[s * STAGE + (e / 4) * ROW + e % 4] =
        uvec4(pack_f16(x.xy), pack_f16(x.zw), pack_f16(y.xy), pack_f16(y.zw));
  }
  [[unroll]] for (uint i = 0; i < BL; i++) {
    uint e = tid + i * THREADS;
    uvec4 v = rb[set * BL + i];
    if (WTYPE == W_BF16)
      v = uvec4(bf16_to_f16_pair(v.x), bf16_to_f16_pair(v.y), bf16_to_f16_pair(v.z),
                bf16_to_f16_pair(v.w));
    sm[s * STAGE + (BM + e / 4) * ROW + e % 4] = v;
  }
}

// One step's MMAs: stage s's 32 columns of k (16 halves = 2 words per kk)
// into the subgroup's accumulators. A macro, not a function: acc stays a local
// array (glslang cannot pass an array of cooperative matrices sized by
// specialization constants), and DEPTH = 1's loop is today's code unchanged.
#define MMA_STEP(s)                                                                                \
  [[unroll]] for (uint kk = 0; kk < BK / 8; kk += 2) {                                             \
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[TM], fb[TN];                                       \
    [[unroll]] for (uint i = 0; i < TM; i++)                                                       \
      coopMatLoadNV(fa[i], sm, (s) * STAGE + (wr + 16 * i) * ROW + kk, ROW, false);                \
    [[unroll]] for (uint j = 0; j < TN; j++)                                                       \
      coopMatLoadNV(fb[j], sm, (s) * STAGE + (BM + wc + 16 * j) * ROW + kk, ROW, true);            \
    [[unroll]] for (uint i = 0; i < TM; i++)                                                       \
      [[unroll]] for (uint j = 0; j < TN; j++)                                                     \
        acc[i * TN + j] = coopMatMulAddNV(fa[i], fb[j], acc[i * TN + j]);                         \
  }

// The output at (row, col) from its raw sum s, as gemm_reduce.comp writes it.
void finish(uint row, uint col, float s) {
  uint width = p.n + p.dual, at = row * width + col;
  c[at] = epilogue(p.mode, p.alpha, s + bias[col], reads_output(p.mode) ? c[at] : 0.0);
  if (col < p.dual) c[row * width + p.n + col] = s + bias[p.n + col];
}

// FIXUP: after this workgroup's piece is in part, the last of the tile's
// pieces to get here sums them all (each piece's writes are made visible at
// device scope before its workgroup's atomicAdd; the last one reads after its own).
void fix_up(uint row0, uint col0) {
  memoryBarrierBuffer();
  barrier();
  uint tile = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (gl_LocalInvocationID.x == 0) {
    last_piece = atomicAdd(count[tile], 1u) == p.splits - 1;
    if (last_piece) atomicExchange(count[tile], 0u); // every piece has counted: ready for the next call
  }
  barrier();
  if (!last_piece) return;
  memoryBarrierBuffer();
  for (uint e = gl_LocalInvocationID.x; e < BM * BN; e += THREADS) {
    uint row = row0 + e / BN, col = col0 + e % BN;
    if (row >= p.m || col >= p.n) continue;
    float s = 0.0;
    for (uint z = 0; z < p.splits; z++) s += partf[(z * p.m + row) * p.n + col];
    finish(row, col, s);
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
  uint s = 0;
  if (DEPTH == 1) { // loads one step ahead
    fetch(row0, col0, kbeg, kend, 0);
    stage(0, 0);
    barrier();
    for (uint k0 = kbeg; k0 < kend; k0 += BK) {
      bool more = k0 + BK < kend;
      if (more) fetch(row0, col0, k0 + BK, kend, 0);
      MMA_STEP(s)
      if (more) stage(s ^ 1, 0);
      barrier();
      s ^= 1;
    }
  } else {
    // Step kbeg staged, the next DEPTH − 1 on their way into sets 1...; then
    // DEPTH steps per iteration, unrolled: at step kh = k0 + h·BK set h is free
    // (its step is staged) and takes step kh + DEPTH·BK's loads, and set
    // (h + 1) % DEPTH holds step kh + BK, staged after the MMAs.
    fetch(row0, col0, kbeg, kend, 0);
    stage(0, 0);
    [[unroll]] for (uint q = 1; q < DEPTH; q++)
      if (kbeg + q * BK < kend) fetch(row0, col0, kbeg + q * BK, kend, q);
    barrier();
    for (uint k0 = kbeg; k0 < kend; k0 += DEPTH * BK) {
      [[unroll]] for (uint h = 0; h < DEPTH; h++) {
        uint kh = k0 + h * BK;
        if (kh >= kend) continue;
        if (kh + DEPTH * BK < kend) fetch(row0, col0, kh + DEPTH * BK, kend, h);
        MMA_STEP(s)
        if (kh + BK < kend) stage(s ^ 1, (h + 1) % DEPTH);
        barrier();
        s ^= 1;
      }
    }
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
        uint at = (gl_WorkGroupID.z * p.m + row) * p.n + col;
        if (FIXUP == 0) part[at] = v;
        else partf[at] = v;
        continue;
      }
      uint at = row * width + col;
      c[at] = epilogue(p.mode, p.alpha, v + bias[col], reads_output(p.mode) ? c[at] : 0.0);
      if (col < p.dual) c[row * width + p.n + col] = v + bias[p.n + col];
    }
    subgroupBarrier(); // the next row of accumulators reuses the area
  }
  if (FIXUP != 0 && p.splits > 1) fix_up(row0, col0);
}
