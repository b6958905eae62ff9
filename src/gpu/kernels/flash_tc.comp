#version 450
// flash_tc (fast attention on the tensor cores, NV cooperative matrices):
// the contract of gpu_attention / gpu_rel_attention with no t² buffer,
//   s(i, j) = scale · (q_i·k_j [+ (q+v)_i·pos[j − i + t − 1] with RELATIVE])
//   o_i = Σ_j softmax_j(s(i, ·)) · v_j over the keys kept; 0 if none,
// with q, k, v, q+v and pos rounded to f16 when staged in shared memory and
// the probabilities rounded to f16 for the P·V products (f32 sums): about
// 1e-3 of the largest output off the f32 path (flash attention in half
// precision, as PyTorch's does in bf16).
//
// q, k, v, qv  f32 (bindings 0-3): row i of head h at X[X_off + (c·t + i)·X_stride
//              + h·head_dim ..] (clip c = 0 unless BATCH); qv only with RELATIVE
// pos          f32 (binding 4, RELATIVE): 2t − 1 rows, row r at pos_off + r·pos_stride
// mask         [t] uint (binding 5, read when `masked`): 0 = key ignored
// o            f32 (binding 6): like q, at o_off, o_stride
// lens         [clips] uint (binding 7, BATCH = 1): clip c's keys are its first lens[c]
// Offsets and strides are multiples of 4 floats (128-bit loads; attention.c checks).
//
// One workgroup of 4 subgroups (32 lanes each) per 64 queries of one head
// (gl_WorkGroupID.y: the head, or clip·heads + head with BATCH); a subgroup
// owns 16 queries, whose q (and q+v) stay in HD/16 f16 matrices. Keys go in
// blocks of KB (spec constant 3; attention.c picks it so that shared memory
// stays under 48 KiB), each staged in shared memory as f16; the next block's
// k and v rows are loaded into registers while one block is worked on.
// Two passes over the keys: the first finds each query's max and softmax
// sum (s in f32 from the tensor cores, stored to shared and read back by
// two lanes per query, half the block each); the second recomputes the same
// scores bit for bit, writes p = exp(s − max)/sum as f16 and adds P·V into
// HD/16 f32 accumulators. Two passes instead of an online rescale: these
// matrices cannot be scaled row by row, and the scores are the cheaper half.
// RELATIVE: the workgroup stages the pos rows its queries and the key block
// reach (KB + 63 of them); each subgroup multiplies its q+v by the KB + 16
// rows of its own diagonal band, and lane (r, c) reads the band at
// c − r + 15 (the Transformer-XL shift, done by addressing).
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint RELATIVE = 0;
layout(constant_id = 1) const uint HD = 64; // a multiple of 16 up to 128
layout(constant_id = 2) const uint BATCH = 0;
layout(constant_id = 3) const uint KB = 32; // 16, 32 or 64
// Timing experiments only (bench/attention_speed: the result is then wrong):
// bits skip 1 the lanes' softmax, 2 the score products, 4 the P·V products,
// 8 the staging of each key block, 16 the first pass. 0 in steno.
layout(constant_id = 4) const uint SKIP = 0;

layout(std430, binding = 0) readonly buffer Q { vec4 q[]; };
layout(std430, binding = 1) readonly buffer K { vec4 k[]; };
layout(std430, binding = 2) readonly buffer V { vec4 v[]; };
layout(std430, binding = 3) readonly buffer QV { vec4 qv[]; };
layout(std430, binding = 4) readonly buffer Pos { vec4 pos[]; };
layout(std430, binding = 5) readonly buffer Mask { uint mask[]; };
layout(std430, binding = 6) writeonly buffer O { float o[]; };
layout(std430, binding = 7) readonly buffer Lens { uint lens[]; };

layout(push_constant) uniform Push {
  uint t, head_dim;
  float scale;
  uint masked;
  uint q_off, q_stride, k_off, k_stride, v_off, v_stride;
  uint qv_off, qv_stride, pos_off, pos_stride, o_off, o_stride;
  uint heads; // BATCH
} p;

const uint BQ = 64, THREADS = 128, ND = HD / 16;
const uint D8 = HD / 8, ROWW = D8 + 1;       // uvec4 (8 halves) per row, one of padding
const uint PR = RELATIVE * (KB + BQ);        // pos rows staged (KB + 63 used)
const uint KS = 0, VS = KB * ROWW, PS = 2 * KB * ROWW;
const uint STAGED = (2 * KB + PR) * ROWW;    // ≥ 64 rows: q and q+v are staged here first
// Rows of the f32 scratch are padded by one uvec4, and lane r reads its
// row's columns rotated by r: unpadded rows of 256 bytes put all 16 rows'
// same column in one bank (the H200 ran KB = 64 2.6× slower than KB = 16).
const uint SSW = KB / 4 + 1;                 // uvec4 per row of a subgroup's scores (f32)
const uint BDW = RELATIVE * ((KB + 16) / 4 + 1); // ... of its pos band (f32)
const uint PPW = KB / 8 + 1;                 // ... of its probabilities (f16)
const uint SCR = 16 * (SSW + BDW + PPW);     // a subgroup's scratch
shared uvec4 sm[STAGED + 4 * SCR];
shared vec2 ml[THREADS];

// The next key block's rows of k (and v), loaded while this block is worked
// on: NCH chunks of 8 values per invocation.
const uint NCH = (KB * D8 + THREADS - 1) / THREADS;
vec4 rk[2 * NCH], rv[2 * NCH];

uint pk(vec2 x) { return packHalf2x16(clamp(x, -65504.0, 65504.0)); }
uvec4 pk8(vec4 x, vec4 y) { return uvec4(pk(x.xy), pk(x.zw), pk(y.xy), pk(y.zw)); }

// `n` rows of buf from row g0 of the clip (rows at `lim` and past: zeros) to sm[dst ..].
#define STAGE(buf, off, stride, g0, lim, n, dst)                                        \
  for (uint e = tid; e < (n) * D8; e += THREADS) {                                     \
    uint r_ = e / D8, c8 = e % D8, g = (g0) + r_;                                      \
    uvec4 w_ = uvec4(0);                                                               \
    if (g < (lim)) {                                                                   \
      uint at = ((off) + (rb + g) * (stride) + col) / 4 + 2 * c8;                      \
      w_ = pk8(buf[at], buf[at + 1]);                                                  \
    }                                                                                  \
    sm[(dst) + r_ * ROWW + c8] = w_;                                                   \
  }

float f32_at(uint base, uint w, uint r, uint c) { return uintBitsToFloat(sm[base + r * w + c / 4][c % 4]); }

void fetch_kv(uint tid, uint rb, uint col, uint len, uint j0, bool with_v) {
  [[unroll]] for (uint i = 0; i < NCH; i++) {
    uint e = tid + i * THREADS, r_ = e / D8, c8 = e % D8, g = j0 + r_;
    bool in_ = e < KB * D8 && g < len;
    uint ka = in_ ? (p.k_off + (rb + g) * p.k_stride + col) / 4 + 2 * c8 : 0;
    rk[2 * i] = in_ ? k[ka] : vec4(0.0);
    rk[2 * i + 1] = in_ ? k[ka + 1] : vec4(0.0);
    if (with_v) {
      uint va = in_ ? (p.v_off + (rb + g) * p.v_stride + col) / 4 + 2 * c8 : 0;
      rv[2 * i] = in_ ? v[va] : vec4(0.0);
      rv[2 * i + 1] = in_ ? v[va + 1] : vec4(0.0);
    }
  }
}

void store_kv(uint tid, bool with_v) {
  [[unroll]] for (uint i = 0; i < NCH; i++) {
    uint e = tid + i * THREADS, r_ = e / D8, c8 = e % D8;
    if (e >= KB * D8) continue;
    sm[KS + r_ * ROWW + c8] = pk8(rk[2 * i], rk[2 * i + 1]);
    if (with_v) sm[VS + r_ * ROWW + c8] = pk8(rv[2 * i], rv[2 * i + 1]);
  }
}

void main() {
  uint tid = gl_LocalInvocationID.x, sg = tid / 32, lane = tid % 32;
  uint z = gl_WorkGroupID.y, h = BATCH != 0 ? z % p.heads : z, clip = BATCH != 0 ? z / p.heads : 0;
  uint i0 = gl_WorkGroupID.x * BQ, qi0 = i0 + 16 * sg;
  uint col = h * p.head_dim, rb = clip * p.t, len = BATCH != 0 ? min(lens[clip], p.t) : p.t;
  uint scr = STAGED + sg * SCR, ss = scr, bd = ss + 16 * SSW, pp = bd + 16 * BDW;

  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fq[ND], fqv[ND];
  STAGE(q, p.q_off, p.q_stride, i0, p.t, BQ, 0);
  barrier();
  [[unroll]] for (uint d = 0; d < ND; d++) coopMatLoadNV(fq[d], sm, 16 * sg * ROWW + 2 * d, ROWW, false);
  barrier();
  if (RELATIVE != 0) {
    STAGE(qv, p.qv_off, p.qv_stride, i0, p.t, BQ, 0);
    barrier();
    [[unroll]] for (uint d = 0; d < ND; d++) coopMatLoadNV(fqv[d], sm, 16 * sg * ROWW + 2 * d, ROWW, false);
    barrier();
  }

  // Lane (r, half): query qi0 + r, columns c0 .. c0 + KB/2 − 1 of each block.
  uint r = lane % 16, c0 = (lane / 16) * (KB / 2);
  float m = -3.0e38, l = 0.0, inv = 0.0;
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[ND];
  [[unroll]] for (uint d = 0; d < ND; d++) acc[d] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  uint pass0 = (SKIP & 16) != 0 ? 1 : 0;
  fetch_kv(tid, rb, col, len, 0, pass0 == 1);
  for (uint pass = pass0; pass < 2; pass++) {
    for (uint j0 = 0; j0 < len; j0 += KB) {
      barrier(); // the previous block's rows are no longer read
      if ((SKIP & 8) != 0 && j0 == 0) fetch_kv(tid, rb, col, len, j0, pass == 1);
      if ((SKIP & 8) == 0 || j0 == 0) store_kv(tid, pass == 1);
      if (RELATIVE != 0 && ((SKIP & 8) == 0 || j0 == 0)) {
        // Window rows j0 − i0 − 63 + t − 1 ..: (i, j) reads row 63 − (i − i0) + (j − j0).
        int base = int(j0) - int(i0) - 64 + int(p.t);
        for (uint e = tid; e < PR * D8; e += THREADS) {
          uint r_ = e / D8, c8 = e % D8;
          int pr = base + int(r_);
          uvec4 w_ = uvec4(0);
          if (pr >= 0 && pr < int(2 * p.t - 1)) {
            uint at = (p.pos_off + uint(pr) * p.pos_stride + col) / 4 + 2 * c8;
            w_ = pk8(pos[at], pos[at + 1]);
          }
          sm[PS + r_ * ROWW + c8] = w_;
        }
      }
      barrier();
      // The next block (of this pass, else the second pass's first) on its way.
      bool last = j0 + KB >= len;
      if ((SKIP & 8) == 0 && !(last && pass == 1)) fetch_kv(tid, rb, col, len, last ? 0 : j0 + KB, last || pass == 1);

      // Scores of the subgroup's 16 queries × KB keys, and the pos band.
      if ((SKIP & 2) == 0) {
      [[unroll]] for (uint n = 0; n < KB / 16; n++) {
        fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> s = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
        [[unroll]] for (uint d = 0; d < ND; d++) {
          fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fk;
          coopMatLoadNV(fk, sm, KS + 16 * n * ROWW + 2 * d, ROWW, true);
          s = coopMatMulAddNV(fq[d], fk, s);
        }
        coopMatStoreNV(s, sm, ss + 4 * n, SSW, false);
      }
      if (RELATIVE != 0) {
        // The band starts at window row 48 − 16·sg: (qi0 + r, j0 + c) is band column c − r + 15.
        [[unroll]] for (uint n = 0; n < KB / 16 + 1; n++) {
          fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> s = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
          [[unroll]] for (uint d = 0; d < ND; d++) {
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fp;
            coopMatLoadNV(fp, sm, PS + (48 - 16 * sg + 16 * n) * ROWW + 2 * d, ROWW, true);
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
          if (j >= len || (p.masked != 0 && mask[j] == 0)) continue;
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
        continue;
      }
      for (uint x = 0; x < KB / 4; x++) {
        uint cp = c0 + 2 * ((x + r) % (KB / 4));
        vec2 w = vec2(0.0);
        [[unroll]] for (uint y = 0; y < 2 && (SKIP & 1) == 0; y++) {
          uint c = cp + y, j = j0 + c;
          if (j >= len || (p.masked != 0 && mask[j] == 0)) continue;
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
        [[unroll]] for (uint d = 0; d < ND; d++) {
          fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fv;
          coopMatLoadNV(fv, sm, VS + 16 * kk * ROWW + 2 * d, ROWW, false);
          acc[d] = coopMatMulAddNV(fp, fv, acc[d]);
        }
      }
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
      if (i < p.t) o[p.o_off + (rb + i) * p.o_stride + col + 16 * d + cc] = f32_at(ss, 4, row, cc);
    }
    subgroupBarrier();
  }
}
