#version 450
// attention_scores (fast, tensor cores through NV cooperative matrices) with
// the softmax's row statistics: the first of the two dispatches of plain
// attention on the tensor cores (attention_values_tc.comp is the second) —
//   s[z][i][j] = scale · q_i·k_j over head h's head_dim columns
// for the kept keys, −1e30 for the others: keys the key mask drops (binding
// 2, read when masked: mask[j] = 0), keys past lens[clip] with BATCH = 1
// (binding 5) and keys outside the chunked mask (attention_scores.comp's).
// z is the head, or clip·heads + head with BATCH; s at binding 4 is
// [z][t][t] from float 0.
//
// Row partials: for each row z·t + i (i < t) and each key tile x (this
// workgroup's BN keys, x = gl_WorkGroupID.x of tiles = ⌈t/BN⌉), the pair
//   s[part_off + ((z·t + i)·tiles + x)·2 ..] = (m, Σ exp(s_ij − m))
// over the tile's kept keys, m their largest score; a tile with no kept key
// gives (−3e38, 0). attention_values_tc combines a row's pairs into the
// softmax's max and sum (softmax.comp's, up to the order of the sums).
//
// q, k  f32 (clamped to ±65504), each split when staged in shared memory
//       into hi (its top 11 significant bits) and lo = f16(x − hi): a score is
//       hi_q·hi_k + lo_q·hi_k + hi_q·lo_k, three f16 products per term summed
//       in f32 (16×16×16), about 2^-22 of |q|·|k| off the f32 score instead of
//       the 1e-3 of f16(q)·f16(k) alone. The softmax exponentiates a score's
//       error: with f16 q and k alone a test model's greedy tokens left the f32
//       reference's (test_whisper on the H200; docs/perf.md).
// Needs (attention.c checks): head_dim a multiple of 16 up to 128, q_off,
//       q_stride, k_off, k_stride multiples of 4 (128-bit loads); subgroups
//       of 32 with shuffles.
//
// gemm_tc.comp's scheme with a = the tile's queries and W = its keys, k =
// head_dim: a tile of BM queries × BN keys of one head per workgroup of
// SG_M·SG_N subgroups of 32 lanes, each owning TM × TN accumulators; head_dim
// in steps of 32, each staged once as hi and lo of q and k (one stage: two
// would not fit in 48 KiB; two barriers a step) and multiplied three times
// from there (hi·hi, lo·hi, hi·lo); the next step's q and k are loaded into
// registers while the tensor cores work. Shared rows of 32 halves and one
// 128-bit word of padding. The scores leave through the same shared memory, TN
// accumulators side by side per subgroup: a row of 16·TN scores is 4·TN
// lanes of 4 consecutive scores, stored 128 bits at a time where t is a
// multiple of 4 (else one float at a time, bounds-checked); those lanes'
// shuffles give the row's partial over the subgroup's 16·TN keys, and the
// SG_N subgroups' partials of a row are combined through shared memory into
// the tile's. Queries and keys past t are read as 0 and not written.
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 6) in;
layout(constant_id = 0) const uint BATCH = 0;
// Products per head_dim step: 3 (hi·hi, lo·hi, hi·lo); 1 leaves the lo ones
// out (f16 scores alone), for accuracy experiments.
layout(constant_id = 1) const uint PASSES = 3;
// The tile (attention.c's mm_tiles): SG_M × SG_N subgroups, each TM × TN
// accumulators; SG_N·TN·16 = 128 keys (a row's partials come one pair per
// 128 keys), SG_M·TM·16 queries, and at least one 128-bit chunk of q per
// invocation and step (SG_M·TM·16·4 ≥ THREADS).
layout(constant_id = 2) const uint SG_M = 4;
layout(constant_id = 3) const uint SG_N = 4;
layout(constant_id = 4) const uint TM = 2;
layout(constant_id = 5) const uint TN = 2;
layout(constant_id = 6) const uint THREADS = 512; // 32 · SG_M · SG_N

layout(std430, binding = 0) readonly buffer Q { vec4 q4[]; };
layout(std430, binding = 1) readonly buffer K { vec4 k4[]; };
layout(std430, binding = 2) readonly buffer Mask { uint mask[]; };
layout(std430, binding = 4) writeonly buffer S { float s[]; };
layout(std430, binding = 4) writeonly buffer S4 { vec4 s4[]; }; // the same buffer, 128 bits at a time
layout(std430, binding = 5) readonly buffer Lens { uint lens[]; };

layout(push_constant) uniform Push {
  uint t, head_dim;
  float scale;
  uint q_off, q_stride, k_off, k_stride;
  uint chunk, left_chunks;
  uint heads; // BATCH = 1
  uint masked, part_off;
} p;

// Whether key j (< len) counts for query i: the chunked mask and the key mask.
bool kept(uint i, uint j) {
  if (p.masked != 0 && mask[j] == 0) return false;
  if (p.chunk == 0) return true;
  uint ci = i / p.chunk, cj = j / p.chunk;
  return cj <= ci && ci - cj <= p.left_chunks;
}

const uint BM = SG_M * TM * 16, BN = SG_N * TN * 16, BK = 32; // queries × 128 keys
const uint ROW = BK / 8 + 1;        // 128-bit words per shared row (one of padding)
const uint QH = BM * ROW, KH = BN * ROW; // a half (hi or lo) of the queries' rows, of the keys'
const uint STAGE = 2 * (QH + KH);        // q hi, q lo, k hi, k lo
const uint QL = BM * (BK / 8) / THREADS, KL = BN * (BK / 8) / THREADS; // chunks of 8 per invocation
const uint RW = 4 * TN;              // lanes of a subgroup's row of 16·TN scores
const float NONE = -3.0e38;          // a partial's max over no kept key
shared uvec4 sm[STAGE];
shared vec2 part[BM * SG_N]; // (max, sum) of each row over each subgroup's 16·TN keys

vec4 rq[2 * QL], rk[2 * KL]; // the next step's q and k (f32: rounded when staged)

// Global → registers: head_dim columns d0 .. d0 + 31 of query rows i0 .. and
// key rows j0 .. of clip rows rb ... Chunk e is row e / 4, columns d0 + 8·(e % 4)
// (all 8 inside head_dim or all outside: head_dim is a multiple of 16).
void fetch(uint i0, uint j0, uint rb, uint col, uint d0) {
  uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint x = 0; x < QL; x++) {
    uint e = tid + x * THREADS, i = i0 + e / 4, d = d0 + 8 * (e % 4);
    bool in_q = i < p.t && d < p.head_dim;
    uint at = in_q ? (p.q_off + (rb + i) * p.q_stride + col + d) / 4 : 0;
    rq[2 * x] = in_q ? q4[at] : vec4(0.0);
    rq[2 * x + 1] = in_q ? q4[at + 1] : vec4(0.0);
  }
  [[unroll]] for (uint x = 0; x < KL; x++) {
    uint e = tid + x * THREADS, j = j0 + e / 4, d = d0 + 8 * (e % 4);
    bool in_k = j < p.t && d < p.head_dim;
    uint at = in_k ? (p.k_off + (rb + j) * p.k_stride + col + d) / 4 : 0;
    rk[2 * x] = in_k ? k4[at] : vec4(0.0);
    rk[2 * x + 1] = in_k ? k4[at + 1] : vec4(0.0);
  }
}

// Registers → the shared stage: q and k each as hi and lo.
void stage() {
  uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint x = 0; x < QL; x++) {
    uint e = tid + x * THREADS, r = (e / 4) * ROW + e % 4;
    sm[r] = pack8_hi(rq[2 * x], rq[2 * x + 1]);
    sm[QH + r] = pack8_lo(rq[2 * x], rq[2 * x + 1]);
  }
  [[unroll]] for (uint x = 0; x < KL; x++) {
    uint e = tid + x * THREADS, r = (e / 4) * ROW + e % 4;
    sm[2 * QH + r] = pack8_hi(rk[2 * x], rk[2 * x + 1]);
    sm[2 * QH + KH + r] = pack8_lo(rk[2 * x], rk[2 * x + 1]);
  }
}

void main() {
  uint tid = gl_LocalInvocationID.x, sg = tid / 32, lane = tid % 32;
  uint i0 = gl_WorkGroupID.y * BM, j0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
  uint h = BATCH == 1 ? z % p.heads : z, clip = BATCH == 1 ? z / p.heads : 0;
  uint col = h * p.head_dim, rb = clip * p.t, len = BATCH == 1 ? lens[clip] : p.t;
  uint wr = (sg / SG_N) * TM * 16, wc = (sg % SG_N) * TN * 16;
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[TM * TN];
  [[unroll]] for (uint x = 0; x < TM * TN; x++) acc[x] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  fetch(i0, j0, rb, col, 0);
  stage();
  barrier();
  for (uint d0 = 0; d0 < p.head_dim; d0 += BK) {
    bool more = d0 + BK < p.head_dim;
    // The stage is in shared memory: the registers take the next step.
    if (more) fetch(i0, j0, rb, col, d0 + BK);
    [[unroll]] for (uint kk = 0; kk < BK / 8; kk += 2) { // 16 halves = 2 words
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fkh[TN], fkl[TN], fqh, fql;
      [[unroll]] for (uint b = 0; b < TN; b++) {
        coopMatLoadNV(fkh[b], sm, 2 * QH + (wc + 16 * b) * ROW + kk, ROW, true);
        if (PASSES > 1) coopMatLoadNV(fkl[b], sm, 2 * QH + KH + (wc + 16 * b) * ROW + kk, ROW, true);
      }
      [[unroll]] for (uint a = 0; a < TM; a++) {
        coopMatLoadNV(fqh, sm, (wr + 16 * a) * ROW + kk, ROW, false);
        [[unroll]] for (uint b = 0; b < TN; b++) acc[a * TN + b] = coopMatMulAddNV(fqh, fkh[b], acc[a * TN + b]);
        if (PASSES > 1) {
          coopMatLoadNV(fql, sm, QH + (wr + 16 * a) * ROW + kk, ROW, false);
          [[unroll]] for (uint b = 0; b < TN; b++) {
            acc[a * TN + b] = coopMatMulAddNV(fql, fkh[b], acc[a * TN + b]);
            acc[a * TN + b] = coopMatMulAddNV(fqh, fkl[b], acc[a * TN + b]);
          }
        }
      }
    }
    barrier(); // every subgroup has read the stage
    if (more) {
      stage();
      barrier();
    }
  }

  // Out through shared memory: per subgroup 16 rows × 16·TN floats (64·TN words).
  uint base = sg * 64 * TN;
  bool vec = (p.t & 3u) == 0u; // rows start on 128-bit words
  [[unroll]] for (uint a = 0; a < TM; a++) {
    [[unroll]] for (uint b = 0; b < TN; b++) coopMatStoreNV(acc[a * TN + b], sm, base + 4 * b, 4 * TN, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint x = 0; x < 2 * TN; x++) { // 4 rows of RW lanes each
      uint e = lane + 32 * x, r = 16 * a + e / RW;
      uint i = i0 + wr + r, j = j0 + wc + 4 * (e % RW);
      vec4 v = uintBitsToFloat(sm[base + e]), sc;
      bvec4 keep;
      float mx = NONE;
      [[unroll]] for (uint y = 0; y < 4; y++) {
        keep[y] = i < p.t && j + y < len && kept(i, j + y);
        sc[y] = keep[y] ? p.scale * v[y] : -1e30;
        if (keep[y]) mx = max(mx, sc[y]);
      }
      if (vec) {
        if (i < p.t && j < p.t) s4[((z * p.t + i) * p.t + j) / 4] = sc;
      } else {
        [[unroll]] for (uint y = 0; y < 4; y++)
          if (i < p.t && j + y < p.t) s[(z * p.t + i) * p.t + j + y] = sc[y];
      }
      // The row's max and sum over the subgroup's keys: the RW lanes of the row.
      [[unroll]] for (uint m = 1; m < RW; m <<= 1) mx = max(mx, subgroupShuffleXor(mx, m));
      float sum = 0.0;
      [[unroll]] for (uint y = 0; y < 4; y++)
        if (keep[y]) sum += exp(sc[y] - mx);
      [[unroll]] for (uint m = 1; m < RW; m <<= 1) sum += subgroupShuffleXor(sum, m);
      if (e % RW == 0) part[(wr + r) * SG_N + sg % SG_N] = vec2(mx, sum);
    }
    subgroupBarrier(); // the next row of accumulators reuses the area
  }

  // The tile's partial of each row: its SG_N subgroups' combined.
  barrier();
  if (tid < BM && i0 + tid < p.t) {
    float m = NONE, sum = 0.0;
    [[unroll]] for (uint n = 0; n < SG_N; n++) m = max(m, part[tid * SG_N + n].x);
    [[unroll]] for (uint n = 0; n < SG_N; n++) sum += part[tid * SG_N + n].y * exp(part[tid * SG_N + n].x - m);
    uint at = p.part_off + ((z * p.t + i0 + tid) * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 2;
    s[at] = m;
    s[at + 1] = sum;
  }
}
