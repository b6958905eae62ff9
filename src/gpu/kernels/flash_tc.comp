#version 450
// flash_tc (fast attention on the tensor cores, NV cooperative matrices):
// the contract of gpu_attention / gpu_rel_attention with no t² buffer,
//   s(i, j) = scale · (q_i·k_j [+ (q+v)_i·pos[j − i + t − 1] with RELATIVE])
//   o_i = Σ_j softmax_j(s(i, ·)) · v_j over the keys kept; 0 if none,
// from f16 copies of q, k, v, q+v and pos (attention.c packs them into the
// scores scratch first, rounded to nearest) and f16 probabilities for the
// P·V products (f32 sums): about 1e-3 of the largest output off the f32
// path (flash attention in half precision, as PyTorch's in bf16).
//
// h16     binding 0: the f16 copies, 8 halves per uvec4: row i of q at
//         h16[qh + i·row ..] (row = heads·head_dim/8), likewise k, v, qv (rows
//         c·t + i of clip c with BATCH) and pos (2t − 1 rows, shared by clips)
// mask    [t] uint (binding 5, read when `masked`): 0 = key ignored
// o       f32 (binding 6): row i of head h at o_off + (c·t + i)·o_stride + h·head_dim
// lens    [clips] uint (binding 7, BATCH = 1): clip c's keys are its first lens[c]
//
// Each subgroup (32 lanes; 4 per workgroup, independent: no workgroup
// barrier) owns 16 queries of one head (gl_WorkGroupID.y: the head, or
// clip·heads + head), their q (and q+v) in HD/16 f16 matrices loaded once,
// and walks the keys in blocks of KB (spec constant 3), each matrix loaded
// straight from h16 (L2 serves the rows the other subgroups read too), the
// next block's k and v while this block's are worked on.
// Nothing is read outside the copies: the last query tile and the last key
// block are moved back to end at t (t ≥ KB, attention.c checks), the keys a
// moved block repeats are skipped, and the rows a moved tile repeats are
// written twice with the same values.
// Two passes over the keys: the first finds each query's max and softmax
// sum (s in f32 from the tensor cores, stored to the subgroup's shared
// scratch and read back by two lanes per query, half the block each); the
// second recomputes the same scores bit for bit, writes p = exp(s − max)/sum
// as f16 and adds P·V into HD/16 f32 accumulators. Two passes instead of an
// online rescale: these matrices cannot be scaled row by row.
// RELATIVE: the band of pos rows a tile and a block reach (KB + 16 rows from
// j0 − qi0 − 16 + t) times q+v; lane (r, c) reads it at c − r + 15 (the
// Transformer-XL shift, done by addressing). The band's last row may be the
// one past pos's end: attention.c leaves a row there.
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint RELATIVE = 0;
layout(constant_id = 1) const uint HD = 64; // a multiple of 16 up to 128
layout(constant_id = 2) const uint BATCH = 0;
layout(constant_id = 3) const uint KB = 32; // 16 or 32
// Timing experiments only (bench/attention_speed: the result is then wrong):
// bits skip 1 the lanes' softmax, 2 the score products, 4 the P·V products,
// 16 the first pass. 0 in steno.
layout(constant_id = 4) const uint SKIP = 0;

layout(std430, binding = 0) readonly buffer H16 { uvec4 h16[]; };
layout(std430, binding = 5) readonly buffer Mask { uint mask[]; };
layout(std430, binding = 6) writeonly buffer O { float o[]; };
layout(std430, binding = 7) readonly buffer Lens { uint lens[]; };

layout(push_constant) uniform Push {
  uint t, head_dim;
  float scale;
  uint masked;
  uint qh, kh, vh, qvh, ph, row; // uvec4 units
  uint o_off, o_stride, heads;
} p;

const uint ND = HD / 16;
// A subgroup's scratch in uvec4: scores (f32), the pos band (f32), the
// probabilities (f16), rows padded by one uvec4 (and read by each lane with
// its columns rotated) so that the 16 rows do not share banks.
const uint SSW = KB / 4 + 1, BDW = RELATIVE * ((KB + 16) / 4 + 1), PPW = KB / 8 + 1;
const uint SCR = 16 * (SSW + BDW + PPW);
shared uvec4 sm[4 * SCR];
shared vec2 ml[128];

float f32_at(uint base, uint w, uint r, uint c) { return uintBitsToFloat(sm[base + r * w + c / 4][c % 4]); }

// Block j0's k matrices (transposed) into fkn, and with `v` its v matrices into fvn.
#define LOAD_KV(j0, v)                                                                        \
  {                                                                                           \
    uint at_ = (rb + (j0)) * p.row + c8;                                                      \
    [[unroll]] for (uint n_ = 0; n_ < KB / 16; n_++) [[unroll]] for (uint d_ = 0; d_ < ND; d_++) { \
      coopMatLoadNV(fkn[n_ * ND + d_], h16, p.kh + at_ + 16 * n_ * p.row + 2 * d_, p.row, true); \
      if (v) coopMatLoadNV(fvn[n_ * ND + d_], h16, p.vh + at_ + 16 * n_ * p.row + 2 * d_, p.row, false); \
    }                                                                                         \
  }

void main() {
  uint tid = gl_LocalInvocationID.x, sg = tid / 32, lane = tid % 32;
  uint z = gl_WorkGroupID.y, h = BATCH != 0 ? z % p.heads : z, clip = BATCH != 0 ? z / p.heads : 0;
  uint first = gl_WorkGroupID.x * 64 + 16 * sg;
  if (first >= p.t) return; // past the last tile (subgroups are independent)
  uint qi0 = min(first, p.t - 16), rb = clip * p.t, c8 = h * p.head_dim / 8;
  uint len = BATCH != 0 ? min(lens[clip], p.t) : p.t;
  uint ss = sg * SCR, bd = ss + 16 * SSW, pp = bd + 16 * BDW;

  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fq[ND], fqv[ND];
  [[unroll]] for (uint d = 0; d < ND; d++) {
    coopMatLoadNV(fq[d], h16, p.qh + (rb + qi0) * p.row + c8 + 2 * d, p.row, false);
    if (RELATIVE != 0) coopMatLoadNV(fqv[d], h16, p.qvh + (rb + qi0) * p.row + c8 + 2 * d, p.row, false);
  }

  // Lane (r, half): query qi0 + r, columns c0 .. c0 + KB/2 − 1 of each block.
  uint r = lane % 16, c0 = (lane / 16) * (KB / 2);
  float m = -3.0e38, l = 0.0, inv = 0.0;
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[ND];
  [[unroll]] for (uint d = 0; d < ND; d++) acc[d] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  // The next block's k (and v) matrices are loaded while this block is worked on.
  const uint NF = KB / 16 * ND;
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fkn[NF], fvn[NF], fk[NF], fv[NF];
  uint pass0 = (SKIP & 16) != 0 ? 1 : 0;
  LOAD_KV(0, pass0 == 1);
  for (uint pass = pass0; pass < 2; pass++) {
    for (uint jb = 0; jb < len; jb += KB) {
      uint j0 = min(jb, p.t - KB); // keys j0 .. jb − 1 were this pass's last block's
      [[unroll]] for (uint f = 0; f < NF; f++) {
        fk[f] = fkn[f];
        if (pass == 1) fv[f] = fvn[f];
      }
      bool next_pass = jb + KB >= len;
      if (!(next_pass && pass == 1)) LOAD_KV(next_pass ? 0 : min(jb + KB, p.t - KB), next_pass || pass == 1);
      // Scores of the subgroup's 16 queries × KB keys, and the pos band.
      if ((SKIP & 2) == 0) {
        [[unroll]] for (uint n = 0; n < KB / 16; n++) {
          fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> s = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
          [[unroll]] for (uint d = 0; d < ND; d++) s = coopMatMulAddNV(fq[d], fk[n * ND + d], s);
          coopMatStoreNV(s, sm, ss + 4 * n, SSW, false);
        }
        if (RELATIVE != 0) {
          uint pr = (j0 + p.t - 16 - qi0) * p.row + c8;
          [[unroll]] for (uint n = 0; n < KB / 16 + 1; n++) {
            fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> s = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
            [[unroll]] for (uint d = 0; d < ND; d++) {
              fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fp;
              coopMatLoadNV(fp, h16, p.ph + pr + 16 * n * p.row + 2 * d, p.row, true);
              s = coopMatMulAddNV(fqv[d], fp, s);
            }
            coopMatStoreNV(s, sm, bd + 4 * n, BDW, false);
          }
        }
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();

      if (pass == 0) {
        for (uint x = 0; x < KB / 2 && (SKIP & 1) == 0; x++) {
          uint c = c0 + (x + r) % (KB / 2), j = j0 + c;
          if (j < jb || j >= len || (p.masked != 0 && mask[j] == 0)) continue;
          float s = f32_at(ss, SSW, r, c);
          if (RELATIVE != 0) s += f32_at(bd, BDW, r, c + 15 - r);
          s *= p.scale;
          if (s > m) {
            l = l * exp(m - s) + 1.0;
            m = s;
          } else {
            l += exp(s - m);
          }
        }
        subgroupBarrier(); // the scratch is read before the next block's scores
        continue;
      }
      for (uint x = 0; x < KB / 4; x++) {
        uint cp = c0 + 2 * ((x + r) % (KB / 4));
        vec2 w = vec2(0.0);
        [[unroll]] for (uint y = 0; y < 2 && (SKIP & 1) == 0; y++) {
          uint c = cp + y, j = j0 + c;
          if (j < jb || j >= len || (p.masked != 0 && mask[j] == 0)) continue;
          float s = f32_at(ss, SSW, r, c);
          if (RELATIVE != 0) s += f32_at(bd, BDW, r, c + 15 - r);
          w[y] = exp(s * p.scale - m) * inv;
        }
        sm[pp + r * PPW + cp / 8][(cp % 8) / 2] = packHalf2x16(w);
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[unroll]] for (uint kk = 0; kk < KB / 16 && (SKIP & 4) == 0; kk++) {
        fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fp;
        coopMatLoadNV(fp, sm, pp + 2 * kk, PPW, false);
        [[unroll]] for (uint d = 0; d < ND; d++) acc[d] = coopMatMulAddNV(fp, fv[kk * ND + d], acc[d]);
      }
      subgroupBarrier(); // P is read before the next block's are written
    }
    if (pass == 0) { // the two halves of each query's row: one max and sum
      ml[tid] = vec2(m, l);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      vec2 other = ml[tid ^ 16];
      float mx = max(m, other.x);
      float sum = l * exp(m - mx) + other.y * exp(other.x - mx);
      m = mx;
      inv = sum > 0.0 ? 1.0 / sum : 0.0;
    }
  }

  // Out through the subgroup's scratch, 16×16 at a time.
  [[unroll]] for (uint d = 0; d < ND; d++) {
    coopMatStoreNV(acc[d], sm, ss, 4, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint e = lane; e < 256; e += 32) {
      uint row = e / 16, cc = e % 16, i = qi0 + row;
      o[p.o_off + (rb + i) * p.o_stride + h * p.head_dim + 16 * d + cc] = f32_at(ss, 4, row, cc);
    }
    subgroupBarrier();
  }
}
