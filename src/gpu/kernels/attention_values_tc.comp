#version 450
// attention_values (fast, tensor cores through NV cooperative matrices) with
// the softmax folded in: the second of the two dispatches of plain attention
// on the tensor cores, after attention_scores_tc.comp —
//   o_i = Σ_j P_ij · v_j per head, P_ij = exp(s_ij − m_i) / l_i,
// m_i and l_i the row's max and Σ exp(s − m_i) over its kept keys, combined
// from attention_scores_tc's row partials (one pair per key tile of KT);
// excluded keys' scores are −1e30 there, so their P is exactly 0, and a row
// with no kept key (l_i = 0) has P = 0 everywhere and o_i = 0 (softmax.comp's
// rows whose columns are all masked). The batch (BATCH = 1, lens at binding
// 3) as attention_values.comp. z is the head, or clip·heads + head with BATCH.
//
// s     f32 (binding 0): the scores [z][t][t] from float 0, the partials
//       (max, sum) of row z·t + i and key tile x at part_off + ((z·t + i)·
//       tiles + x)·2
// P, v  P in f32 (exp and the division as softmax.comp), then P and v
//       (clamped to ±65504) each split when staged in shared memory into hi
//       (its top 11 significant bits) and lo = f16(x − hi), as
//       attention_scores_tc splits q and k: an output is
//       Σ hi_P·hi_v + lo_P·hi_v + hi_P·lo_v, three f16 products per term
//       summed in f32 (16×16×16). With P and v rounded to f16 alone, outputs
//       were ~3e-4 of the largest off the f32 ones (H200), enough to move a
//       test model's greedy tokens (test_whisper).
// HD    (spec constant 1) = head_dim, a multiple of 16 up to 128: a workgroup
//       owns all of a head's columns, so s is read once.
// Needs (attention.c checks): v_off and v_stride multiples of 4 (128-bit
//       loads). s is read 128 bits at a time where t is a multiple of 4, else
//       one float at a time.
// Keys: 0 .. len − 1 (len = lens[clip] with BATCH, else t); v rows past len
//       read as 0 (a padded clip's rows are never touched), and s past len
//       as −1e30 (P = 0).
//
// gemm_tc.comp's scheme with a = P's rows and W = v (k = keys, row-major):
// a tile of BM queries × HD columns per workgroup of SGS subgroups of 32
// lanes, each owning 16·TM queries × HD columns (TM·HD/16 accumulators); keys
// in steps of 32, each staged once as hi and lo of P and v (P made from s, its
// exp taken once) and multiplied three times from there (hi·hi, lo·hi,
// hi·lo). Two alternating stages where they fit in 48 KiB (BM 64, HD ≤ 64), one
// barrier a step; else one stage, two barriers a step. The next step's s
// and v are loaded into registers while the tensor cores work. Shared rows:
// P's of 32 halves, v's of HD halves, each with one 128-bit word of padding.
// The outputs leave through the same shared memory, a subgroup's HD/16
// accumulators side by side: it writes rows of HD floats.
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 5) in;
layout(constant_id = 0) const uint BATCH = 0;
layout(constant_id = 1) const uint HD = 64;
// Products per key step: 3 (hi·hi, lo·hi, hi·lo); 1 leaves the lo ones out
// (P and v in f16 alone), for accuracy experiments.
layout(constant_id = 2) const uint PASSES = 3;
// The tile (attention.c's values tiles): SGS subgroups, each TM (1 or 2)
// blocks of 16 queries × HD columns: BM = 16·SGS·TM queries a workgroup.
layout(constant_id = 3) const uint SGS = 4;
layout(constant_id = 4) const uint TM = 1;
layout(constant_id = 5) const uint THREADS = 128; // 32 · SGS

layout(std430, binding = 0) readonly buffer P { float pw[]; }; // the scores and partials
layout(std430, binding = 0) readonly buffer P4 { vec4 pw4[]; }; // the same buffer, 128 bits at a time
layout(std430, binding = 1) readonly buffer V { vec4 v4[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };
layout(std430, binding = 3) readonly buffer Lens { uint lens[]; };

layout(push_constant) uniform Push {
  uint t, head_dim;
  uint v_off, v_stride, o_off, o_stride;
  uint heads; // BATCH = 1
  uint part_off, tiles;
} p;

const uint BM = 16 * SGS * TM, BK = 32, ND = HD / 16;
const uint PROW = BK / 8 + 1, VROW = HD / 8 + 1; // 128-bit words per shared row
const uint PH = BM * PROW, VH = BK * VROW;       // a half (hi or lo) of P's rows, of v's
const uint STAGE = 2 * (PH + VH);                // P hi, P lo, v hi, v lo
const uint NST = 2 * STAGE * 16 + 8 * BM <= 49152 ? 2 : 1; // stages that fit beside row_max, row_inv
const uint PL = BM * (BK / 8) / THREADS;         // p chunks of 8 per invocation
const uint VC = BK * (HD / 8), VL = (VC + THREADS - 1) / THREADS; // v chunks of 8
const uint OUT = SGS * 64 * ND;                  // the subgroups' 16 × HD floats, in words
const float NOT_KEY = -1e30; // s of a key past len: P = 0
shared uvec4 sm[NST * STAGE > OUT ? NST * STAGE : OUT];
shared float row_max[BM], row_inv[BM]; // m_i, 1/l_i (0, 0 for a row with no kept key)

vec4 rp[2 * PL], rv[2 * VL]; // the next step's s and v (f32: P made and rounded when staged)

// Global → registers: keys j0 .. j0 + 31. p chunk e is query row i0 + e / 4,
// keys j0 + 8·(e % 4) ..; v chunk e is key row j0 + e / (HD/8), columns
// 8·(e % (HD/8)) ...
void fetch(uint i0, uint j0, uint z, uint rb, uint col, uint len) {
  uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint x = 0; x < PL; x++) {
    uint e = tid + x * THREADS, i = i0 + e / 4, j = j0 + 8 * (e % 4);
    uint at = i < p.t ? (z * p.t + i) * p.t + j : 0;
    if ((p.t & 3u) == 0u) { // j and t multiples of 4: each vec4 is all in the row or all out
      rp[2 * x] = i < p.t && j < len ? pw4[at / 4] : vec4(NOT_KEY);
      rp[2 * x + 1] = i < p.t && j + 4 < len ? pw4[at / 4 + 1] : vec4(NOT_KEY);
    } else {
      [[unroll]] for (uint y = 0; y < 8; y++)
        rp[2 * x + y / 4][y % 4] = i < p.t && j + y < len ? pw[at + y] : NOT_KEY;
    }
  }
  [[unroll]] for (uint x = 0; x < VL; x++) {
    uint e = tid + x * THREADS, j = j0 + e / (HD / 8), c = 8 * (e % (HD / 8));
    bool in_v = e < VC && j < len;
    uint at = in_v ? (p.v_off + (rb + j) * p.v_stride + col + c) / 4 : 0;
    rv[2 * x] = in_v ? v4[at] : vec4(0.0);
    rv[2 * x + 1] = in_v ? v4[at + 1] : vec4(0.0);
  }
}

// Row i0 + r's max and 1/sum over all its key tiles' partials.
void row_stats(uint i0, uint z) {
  uint r = gl_LocalInvocationID.x, i = i0 + r;
  if (r >= BM) return;
  float m = -3.0e38, sum = 0.0;
  if (i < p.t) {
    uint at = p.part_off + (z * p.t + i) * p.tiles * 2;
    for (uint x = 0; x < p.tiles; x++) m = max(m, pw[at + 2 * x]);
    for (uint x = 0; x < p.tiles; x++) sum += pw[at + 2 * x + 1] * exp(pw[at + 2 * x] - m);
  }
  row_max[r] = sum > 0.0 ? m : 0.0; // exp(NOT_KEY − 0) · 0 = 0 on a row with no kept key
  row_inv[r] = sum > 0.0 ? 1.0 / sum : 0.0;
}

// Registers → shared stage st: s made into P (softmax.comp's exp(s − m) · (1/l)),
// P and v each as hi and lo.
void stage(uint st) {
  uint tid = gl_LocalInvocationID.x, at = st * STAGE;
  [[unroll]] for (uint x = 0; x < PL; x++) {
    uint e = tid + x * THREADS, r = (e / 4) * PROW + e % 4;
    float m = row_max[e / 4], inv = row_inv[e / 4];
    vec4 p0 = exp(rp[2 * x] - m) * inv, p1 = exp(rp[2 * x + 1] - m) * inv;
    sm[at + r] = pack8_hi(p0, p1);
    sm[at + PH + r] = pack8_lo(p0, p1);
  }
  [[unroll]] for (uint x = 0; x < VL; x++) {
    uint e = tid + x * THREADS, r = (e / (HD / 8)) * VROW + e % (HD / 8);
    if (e < VC) {
      sm[at + 2 * PH + r] = pack8_hi(rv[2 * x], rv[2 * x + 1]);
      sm[at + 2 * PH + VH + r] = pack8_lo(rv[2 * x], rv[2 * x + 1]);
    }
  }
}

void main() {
  uint tid = gl_LocalInvocationID.x, sg = tid / 32, lane = tid % 32;
  uint i0 = gl_WorkGroupID.y * BM, z = gl_WorkGroupID.z;
  uint h = BATCH == 1 ? z % p.heads : z, clip = BATCH == 1 ? z / p.heads : 0;
  uint col = h * p.head_dim, rb = clip * p.t, len = BATCH == 1 ? lens[clip] : p.t;
  uint wr = 16 * TM * sg; // the subgroup's first query row in the tile
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[TM * ND];
  [[unroll]] for (uint n = 0; n < TM * ND; n++) acc[n] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  fetch(i0, 0, z, rb, col, len);
  row_stats(i0, z);
  barrier();
  stage(0);
  barrier();
  uint st = 0, steps = (len + BK - 1) / BK;
  for (uint it = 0; it < steps; it++) {
    uint j0 = it * BK, at = st * STAGE;
    bool more = j0 + BK < len;
    // The stage is in shared memory: the registers take the next step.
    if (more) fetch(i0, j0 + BK, z, rb, col, len);
    [[unroll]] for (uint kk = 0; kk < BK / 8; kk += 2) { // keys 8·kk .. 8·kk + 15 of the step
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ph[TM], pl[TM], vh[ND], vl[ND];
      [[unroll]] for (uint a = 0; a < TM; a++)
        coopMatLoadNV(ph[a], sm, at + (wr + 16 * a) * PROW + kk, PROW, false);
      [[unroll]] for (uint n = 0; n < ND; n++)
        coopMatLoadNV(vh[n], sm, at + 2 * PH + 8 * kk * VROW + 2 * n, VROW, false);
      [[unroll]] for (uint a = 0; a < TM; a++)
        [[unroll]] for (uint n = 0; n < ND; n++)
          acc[a * ND + n] = coopMatMulAddNV(ph[a], vh[n], acc[a * ND + n]);
      if (PASSES > 1) {
        [[unroll]] for (uint a = 0; a < TM; a++)
          coopMatLoadNV(pl[a], sm, at + PH + (wr + 16 * a) * PROW + kk, PROW, false);
        [[unroll]] for (uint n = 0; n < ND; n++)
          coopMatLoadNV(vl[n], sm, at + 2 * PH + VH + 8 * kk * VROW + 2 * n, VROW, false);
        [[unroll]] for (uint a = 0; a < TM; a++)
          [[unroll]] for (uint n = 0; n < ND; n++) {
            acc[a * ND + n] = coopMatMulAddNV(pl[a], vh[n], acc[a * ND + n]);
            acc[a * ND + n] = coopMatMulAddNV(ph[a], vl[n], acc[a * ND + n]);
          }
      }
    }
    if (more) {
      if (NST == 1) barrier(); // every subgroup has read the stage it is about to replace
      stage(NST == 1 ? st : st ^ 1);
    }
    barrier();
    if (NST == 2) st ^= 1;
  }

  // Out through shared memory: per subgroup 16 rows × HD floats (4·HD words)
  // at a time, one block of rows after another.
  uint base = sg * 64 * ND;
  [[unroll]] for (uint a = 0; a < TM; a++) {
    [[unroll]] for (uint n = 0; n < ND; n++)
      coopMatStoreNV(acc[a * ND + n], sm, base + 4 * n, 4 * ND, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint x = 0; x < 8 * ND; x++) {
      uint e = lane + 32 * x, i = i0 + wr + 16 * a + e / HD, c = e % HD;
      if (i < p.t) o[p.o_off + (rb + i) * p.o_stride + col + c] = uintBitsToFloat(sm[base + e / 4][e % 4]);
    }
    subgroupBarrier(); // the next block of rows reuses the area
  }
}
