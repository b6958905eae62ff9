#version 450
// flash_mm (fast, tensor cores through NV cooperative matrices): plain
// attention in one dispatch with no t² scores, as faithful as the two
// products of attention_scores_tc.comp and attention_values_tc.comp —
//   o_i = Σ_j softmax_j(scale · q_i·k_j) · v_j per head over the kept keys
// (keys past len and those the mask drops excluded; a row with none gets 0).
// q, k, the probabilities and v are each split into hi (the top 11 significant
// bits) and lo (common.glsl's pack_hi, pack_lo) when staged in shared memory:
// three f16 products per term (hi·hi, lo·hi, hi·lo) summed in f32. PREC
// (spec constant 5) trades that for speed: 3 (the default) as above; 2 the
// scores so, the probabilities and v rounded to f16 (one product a term); 1
// everything rounded to f16 (as fp16 attention on any GPU framework: one
// product a term in both).
//
// q, k, v  f32 (bindings 0, 1, 2): row i of head h at x_off + (c·t + i)·x_stride
//          + h·head_dim (c the clip with BATCH), offsets and strides multiples
//          of 4 (128-bit loads)
// mask     uint [t] (binding 3, read when masked): 0 = key ignored
// o        f32 (binding 4), as q
// lens     uint [clips] (binding 5, BATCH = 1): clip c's keys are its first lens[c]
//
// A workgroup takes 128 queries of one head (z: the head, or clip·heads +
// head), each of its 8 subgroups 16 of them: their q as HD/16 hi and lo
// matrices in registers, the output as HD/16 accumulators. The keys go by in
// blocks of KB = 32, staged once (k and v, hi and lo) for all eight
// subgroups while the next block's are loaded into registers. Per block a
// subgroup:
//   1. s = its 16 queries × KB keys (3·HD/16 products per 16 keys), stored to
//      its scratch;
//   2. two lanes a query (half the keys each) read their scores, take the
//      block's max, the running max m' = max(m, that), α = exp(m − m'),
//      p = exp(scale·s − m'), the running sum l = α·l + Σ p, and store p as
//      hi and lo over the scores;
//   3. scale its output rows by α unless every α is 1 (the accumulators'
//      elements are matched to their rows by a matrix of row numbers loaded
//      once: the layout is the driver's), then add P·V (three products per
//      16 keys).
// At the end the rows are divided by l and leave through the scratch.
// Needs HD ≤ 64 (shared memory: 48 KiB) and subgroups of 32 with shuffles.
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 4) in;
layout(constant_id = 0) const uint BATCH = 0;
layout(constant_id = 1) const uint HD = 64; // head_dim: 16, 32, 48 or 64
// The workgroup's subgroups (8: 128 queries), and whether the next key block
// is loaded into registers while this one is worked on (1) or after it (0:
// fewer registers).
layout(constant_id = 2) const uint SGS = 8;
layout(constant_id = 3) const uint PREFETCH = 1;
layout(constant_id = 4) const uint THREADS = 256; // 32 · SGS
layout(constant_id = 5) const uint PREC = 3;       // 3, 2 or 1: above
const bool QK_LO = PREC >= 2, PV_LO = PREC == 3; // scores, P·V with hi + lo

layout(std430, binding = 0) readonly buffer Q { vec4 q4[]; };
layout(std430, binding = 1) readonly buffer K { vec4 k4[]; };
layout(std430, binding = 2) readonly buffer V { vec4 v4[]; };
layout(std430, binding = 3) readonly buffer Mask { uint mask[]; };
layout(std430, binding = 4) writeonly buffer O { float o[]; };
layout(std430, binding = 5) readonly buffer Lens { uint lens[]; };

layout(push_constant) uniform Push {
  uint t, head_dim;
  float scale;
  uint q_off, q_stride, k_off, k_stride, v_off, v_stride, o_off, o_stride;
  uint heads; // BATCH = 1
  uint masked;
} p;

const uint BM = 16 * SGS, KB = 32, ND = HD / 16;
const uint HROW = HD / 8 + 1;           // 128-bit words per staged row of q, k or v (one of padding)
const uint KH = KB * HROW;              // a half (hi or lo) of a block's k, or of its v
const uint STAGE = 4 * KH;              // k hi, k lo, v hi, v lo
const uint SROW = KB / 4 + 1, PROW = KB / 8 + 1; // a scratch row of scores (f32), of p (f16)
// A subgroup's scratch: the scores, then p hi and p lo over them; 16 floats of α.
const uint SC = 16 * SROW > 2 * 16 * PROW ? 16 * SROW : 2 * 16 * PROW, SCR = SC + 4;
const uint QH = BM * HROW;              // q staged once (hi, lo) over the stage and the scratch
const uint AREA = STAGE + SGS * SCR > 2 * QH ? STAGE + SGS * SCR : 2 * QH;
const uint CH = KB * HD / 8, CL = (CH + THREADS - 1) / THREADS; // a block's 8-value chunks of k (of v)
const float NEG = -1.0 / 0.0;
shared uvec4 sm[AREA];

vec4 rk[2 * CL], rv[2 * CL]; // the next block's k and v

// Global → registers: keys j0 .. j0 + KB − 1 (chunk e: key j0 + e / (HD/8),
// columns 8·(e % (HD/8)) ..), 0 past len.
void fetch(uint j0, uint rb, uint col, uint len) {
  uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint x = 0; x < CL; x++) {
    uint e = tid + x * THREADS, j = j0 + e / (HD / 8), c = col + 8 * (e % (HD / 8));
    bool in_kv = j < len && e < CH;
    uint ka = in_kv ? (p.k_off + (rb + j) * p.k_stride + c) / 4 : 0;
    uint va = in_kv ? (p.v_off + (rb + j) * p.v_stride + c) / 4 : 0;
    rk[2 * x] = in_kv ? k4[ka] : vec4(0.0);
    rk[2 * x + 1] = in_kv ? k4[ka + 1] : vec4(0.0);
    rv[2 * x] = in_kv ? v4[va] : vec4(0.0);
    rv[2 * x + 1] = in_kv ? v4[va + 1] : vec4(0.0);
  }
}

// Registers → the stage: k and v each as hi and lo (or rounded to f16).
void stage() {
  uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint x = 0; x < CL; x++) {
    uint e = tid + x * THREADS, r = (e / (HD / 8)) * HROW + e % (HD / 8);
    if (e >= CH) break;
    sm[r] = QK_LO ? pack8_hi(rk[2 * x], rk[2 * x + 1]) : pack8_f16(rk[2 * x], rk[2 * x + 1]);
    if (QK_LO) sm[KH + r] = pack8_lo(rk[2 * x], rk[2 * x + 1]);
    sm[2 * KH + r] = PV_LO ? pack8_hi(rv[2 * x], rv[2 * x + 1]) : pack8_f16(rv[2 * x], rv[2 * x + 1]);
    if (PV_LO) sm[3 * KH + r] = pack8_lo(rv[2 * x], rv[2 * x + 1]);
  }
}

float f32_at(uint w, uint c) { return uintBitsToFloat(sm[w + c / 4][c % 4]); }

// Each element of accumulator a times its row's value among the 16 floats at
// word w (α, or 1/l); rows: the row map.
fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> scale_rows(fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> a,
                                                    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> rows, uint w) {
  for (int e = 0; e < a.length(); e++) a[e] *= f32_at(w, uint(rows[e]));
  return a;
}

void main() {
  uint tid = gl_LocalInvocationID.x, sg = tid / 32, lane = tid % 32;
  uint i0 = gl_WorkGroupID.y * BM, z = gl_WorkGroupID.z;
  uint h = BATCH == 1 ? z % p.heads : z, clip = BATCH == 1 ? z / p.heads : 0;
  uint col = h * p.head_dim, rb = clip * p.t, len = BATCH == 1 ? min(lens[clip], p.t) : p.t;
  uint wr = 16 * sg; // the subgroup's first query in the tile

  // q, once: staged as hi and lo, then the subgroup's rows into registers.
  [[unroll]] for (uint x = 0; x < (BM * (HD / 8) + THREADS - 1) / THREADS; x++) {
    uint e = tid + x * THREADS, i = i0 + e / (HD / 8), c = col + 8 * (e % (HD / 8));
    if (e >= BM * (HD / 8)) break;
    uint a = i < p.t ? (p.q_off + (rb + i) * p.q_stride + c) / 4 : 0;
    vec4 x0 = i < p.t ? q4[a] : vec4(0.0), x1 = i < p.t ? q4[a + 1] : vec4(0.0);
    uint r = (e / (HD / 8)) * HROW + e % (HD / 8);
    sm[r] = QK_LO ? pack8_hi(x0, x1) : pack8_f16(x0, x1);
    if (QK_LO) sm[QH + r] = pack8_lo(x0, x1);
  }
  fetch(0, rb, col, len);
  barrier();
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fqh[ND], fql[ND];
  [[unroll]] for (uint d = 0; d < ND; d++) {
    coopMatLoadNV(fqh[d], sm, wr * HROW + 2 * d, HROW, false);
    if (QK_LO) coopMatLoadNV(fql[d], sm, QH + wr * HROW + 2 * d, HROW, false);
  }
  barrier(); // q is in registers: the area is the stage and the scratch from here
  stage();
  barrier();

  uint ss = STAGE + sg * SCR, ph = ss, pl = ph + 16 * PROW, al = ss + SC;
  // Which row each of this invocation's accumulator elements is in: a matrix
  // whose element (r, c) is r, loaded as an accumulator.
  [[unroll]] for (uint x = 0; x < 8; x++) {
    uint e = lane + 32 * x;
    sm[ss + (e / 16) * 4 + (e % 16) / 4][e % 4] = floatBitsToUint(float(e / 16));
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> rows;
  coopMatLoadNV(rows, sm, ss, 4, false);
  subgroupBarrier();

  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[ND];
  [[unroll]] for (uint d = 0; d < ND; d++) acc[d] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
  // Lane (r, half): query wr + r, keys half·KB/2 .. of each block.
  uint r = lane % 16, c0 = (lane / 16) * (KB / 2);
  float m = NEG, l = 0.0;

  for (uint j0 = 0; j0 < len; j0 += KB) {
    bool more = j0 + KB < len;
    if (more && PREFETCH != 0) fetch(j0 + KB, rb, col, len);
    // 1. The scores.
    [[unroll]] for (uint n = 0; n < KB / 16; n++) {
      fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> s = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
      [[unroll]] for (uint d = 0; d < ND; d++) {
        fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> kh, kl;
        coopMatLoadNV(kh, sm, 16 * n * HROW + 2 * d, HROW, true);
        if (QK_LO) coopMatLoadNV(kl, sm, KH + 16 * n * HROW + 2 * d, HROW, true);
        s = coopMatMulAddNV(fqh[d], kh, s);
        if (QK_LO) {
          s = coopMatMulAddNV(fql[d], kh, s);
          s = coopMatMulAddNV(fqh[d], kl, s);
        }
      }
      coopMatStoreNV(s, sm, ss + 4 * n, SROW, false);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    // 2. The running max and sum, the probabilities.
    float sc[KB / 2];
    float bm = NEG;
    [[unroll]] for (uint x = 0; x < KB / 2; x++) {
      uint j = j0 + c0 + x;
      bool kept = j < len && (p.masked == 0 || mask[j] != 0);
      sc[x] = kept ? p.scale * f32_at(ss + r * SROW, c0 + x) : NEG;
      bm = max(bm, sc[x]);
    }
    bm = max(bm, subgroupShuffleXor(bm, 16));
    subgroupBarrier(); // every lane has its scores: p goes over them
    float mn = max(m, bm);
    float alpha = mn == NEG ? 1.0 : exp(m - mn), sum = 0.0;
    [[unroll]] for (uint x = 0; x < KB / 2; x += 8) {
      vec4 a, b;
      [[unroll]] for (uint y = 0; y < 4; y++) {
        a[y] = sc[x + y] == NEG ? 0.0 : exp(sc[x + y] - mn);
        b[y] = sc[x + 4 + y] == NEG ? 0.0 : exp(sc[x + 4 + y] - mn);
      }
      sum += a.x + a.y + a.z + a.w + b.x + b.y + b.z + b.w;
      uint w = r * PROW + (c0 + x) / 8;
      sm[ph + w] = PV_LO ? pack8_hi(a, b) : pack8_f16(a, b);
      if (PV_LO) sm[pl + w] = pack8_lo(a, b);
    }
    sum += subgroupShuffleXor(sum, 16);
    l = l * alpha + sum;
    m = mn;
    if (lane < 16) sm[al + r / 4][r % 4] = floatBitsToUint(alpha);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    // 3. The output rows scaled by α, then P·V.
    if (!subgroupAll(alpha == 1.0))
      [[unroll]] for (uint d = 0; d < ND; d++) acc[d] = scale_rows(acc[d], rows, al);
    [[unroll]] for (uint kk = 0; kk < KB / 16; kk++) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fph, fpl;
      coopMatLoadNV(fph, sm, ph + 2 * kk, PROW, false);
      if (PV_LO) coopMatLoadNV(fpl, sm, pl + 2 * kk, PROW, false);
      [[unroll]] for (uint d = 0; d < ND; d++) {
        fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> vh, vl;
        coopMatLoadNV(vh, sm, 2 * KH + 16 * kk * HROW + 2 * d, HROW, false);
        if (PV_LO) coopMatLoadNV(vl, sm, 3 * KH + 16 * kk * HROW + 2 * d, HROW, false);
        acc[d] = coopMatMulAddNV(fph, vh, acc[d]);
        if (PV_LO) {
          acc[d] = coopMatMulAddNV(fpl, vh, acc[d]);
          acc[d] = coopMatMulAddNV(fph, vl, acc[d]);
        }
      }
    }
    if (more) {
      if (PREFETCH == 0) fetch(j0 + KB, rb, col, len);
      barrier(); // every subgroup is done with the stage
      stage();
    }
    barrier();
  }

  // 1/l per row (0 for a row with no kept key), then out through the scratch.
  if (lane < 16) sm[al + r / 4][r % 4] = floatBitsToUint(l > 0.0 ? 1.0 / l : 0.0);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  [[unroll]] for (uint d = 0; d < ND; d++) {
    coopMatStoreNV(scale_rows(acc[d], rows, al), sm, ss, 4, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint x = 0; x < 8; x++) {
      uint e = lane + 32 * x, i = i0 + wr + e / 16;
      if (i < p.t) o[p.o_off + (rb + i) * p.o_stride + col + 16 * d + e % 16] = f32_at(ss + (e / 16) * 4, e % 16);
    }
    subgroupBarrier();
  }
}
