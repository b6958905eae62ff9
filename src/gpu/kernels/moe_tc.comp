#version 450
// moe_tc (fast, tensor cores through NV cooperative matrices): moe_grouped's
// contract — the routed experts of many tokens, grouped by expert — as one
// GEMM per expert on gemm_tc's tile (same staging, double buffering, 16×16×16
// f16 products accumulated in f32; see gemm_tc.comp). Workgroup (x, y, z):
// columns x·BN.., the expert's pairs y·BM.. of its list, expert z; a
// workgroup past the expert's count returns at once.
//   STAGE 0 (up):   h[q][i] = relu(W[e·rows + i] · x[q / K])²   for q in e's list
//   STAGE 1 (down): y[q][i] = W[e·rows + i] · h[q]
// x / h  f32 (binding 0): STAGE 0 token rows at a_off + t·a_stride; STAGE 1
//        h rows of k values. Rounded to f16 when staged; STAGE 1 first scaled
//        by 2^-8 (relu² outputs pass f16's 65504 from |up| ≥ 256; 2^-8 moves
//        that to 4096) and the sums scaled back.
// list [E][cap], count [E] (bindings 1, 2): moe_lists' output
// out  f32 (binding 3): [pairs][rows]
// W    F16 or BF16 [E·rows][wk] (binding 4; BF16 rounded to f16 when staged,
//      as gemm_tc does). Needs k % 8 == 0, a_off and a_stride % 4 == 0.
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 5) in;
layout(constant_id = 0) const uint WTYPE = 1; // W_F16 or W_BF16
layout(constant_id = 1) const uint SG_M = 2;
layout(constant_id = 2) const uint SG_N = 4;
layout(constant_id = 3) const uint TM = 4;
layout(constant_id = 4) const uint TN = 2;
layout(constant_id = 5) const uint THREADS = 256; // 32 · SG_M · SG_N
layout(constant_id = 6) const uint STAGE = 0;

layout(std430, binding = 0) readonly buffer A { vec4 a4[]; };
layout(std430, binding = 1) readonly buffer List { uint list[]; };
layout(std430, binding = 2) readonly buffer Count { uint count[]; };
layout(std430, binding = 3) writeonly buffer Out { float o[]; };
layout(std430, binding = 4) readonly buffer W { uvec4 w8[]; };

layout(push_constant) uniform Push {
  uint K, rows, k, wk, cap, a_off, a_stride;
} p;

const uint BM = SG_M * TM * 16, BN = SG_N * TN * 16, BK = 32;
const uint ROW = BK / 8 + 1;
const uint STAGE_WORDS = (BM + BN) * ROW;
const uint AL = BM * (BK / 8) / THREADS, BL = BN * (BK / 8) / THREADS;
const float A_SCALE = STAGE == 0 ? 1.0 : 1.0 / 256.0;
const uint NONE = 0xffffffffu;
shared uvec4 sm[2 * STAGE_WORDS];

vec4 ra[2 * AL];
uvec4 rb[BL];

// The vec4 index of the input row of the expert's pair j (NONE past its count).
uint a_at(uint e, uint n, uint j) {
  if (j >= n) return NONE;
  uint q = list[e * p.cap + j];
  return (STAGE == 0 ? p.a_off + (q / p.K) * p.a_stride : q * p.k) / 4;
}

void fetch(uint e, uint n, uint row0, uint col0, uint k0) {
  uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint i = 0; i < AL; i++) {
    uint c = tid + i * THREADS, kk = k0 + 8 * (c % 4), at = a_at(e, n, row0 + c / 4);
    bool in_a = at != NONE && kk < p.k;
    ra[2 * i] = in_a ? a4[at + kk / 4] : vec4(0.0);
    ra[2 * i + 1] = in_a ? a4[at + kk / 4 + 1] : vec4(0.0);
  }
  [[unroll]] for (uint i = 0; i < BL; i++) {
    uint c = tid + i * THREADS, col = col0 + c / 4, kk = k0 + 8 * (c % 4);
    rb[i] = col < p.rows && kk < p.k ? w8[((e * p.rows + col) * p.wk + kk) / 8] : uvec4(0);
  }
}

uint pack_f16(vec2 v) { return packHalf2x16(clamp(v * A_SCALE, -65504.0, 65504.0)); }

void stage(uint s) {
  uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint i = 0; i < AL; i++) {
    uint c = tid + i * THREADS;
    vec4 x = ra[2 * i], y = ra[2 * i + 1];
    sm[s * STAGE_WORDS + (c / 4) * ROW + c % 4] =
        uvec4(pack_f16(x.xy), pack_f16(x.zw), pack_f16(y.xy), pack_f16(y.zw));
  }
  [[unroll]] for (uint i = 0; i < BL; i++) {
    uint c = tid + i * THREADS;
    uvec4 v = rb[i];
    if (WTYPE == W_BF16)
      v = uvec4(bf16_to_f16_pair(v.x), bf16_to_f16_pair(v.y), bf16_to_f16_pair(v.z),
                bf16_to_f16_pair(v.w));
    sm[s * STAGE_WORDS + (BM + c / 4) * ROW + c % 4] = v;
  }
}

void main() {
  uint tid = gl_LocalInvocationID.x, sg = tid / 32, lane = tid % 32;
  uint e = gl_WorkGroupID.z, n = min(count[e], p.cap);
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  if (row0 >= n) return; // the whole workgroup: no barrier is skipped by part of it
  uint wr = (sg / SG_N) * TM * 16, wc = (sg % SG_N) * TN * 16;
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[TM * TN];
  [[unroll]] for (uint i = 0; i < TM * TN; i++) acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  fetch(e, n, row0, col0, 0);
  stage(0);
  barrier();
  uint s = 0;
  for (uint k0 = 0; k0 < p.k; k0 += BK) {
    bool more = k0 + BK < p.k;
    if (more) fetch(e, n, row0, col0, k0 + BK);
    [[unroll]] for (uint kk = 0; kk < BK / 8; kk += 2) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[TM], fb[TN];
      [[unroll]] for (uint i = 0; i < TM; i++)
        coopMatLoadNV(fa[i], sm, s * STAGE_WORDS + (wr + 16 * i) * ROW + kk, ROW, false);
      [[unroll]] for (uint j = 0; j < TN; j++)
        coopMatLoadNV(fb[j], sm, s * STAGE_WORDS + (BM + wc + 16 * j) * ROW + kk, ROW, true);
      [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN; j++) acc[i * TN + j] = coopMatMulAddNV(fa[i], fb[j], acc[i * TN + j]);
    }
    if (more) stage(s ^ 1);
    barrier();
    s ^= 1;
  }

  // Out through shared memory, as gemm_tc: per subgroup 16 rows × 16·TN floats.
  uint base = sg * 64 * TN;
  [[unroll]] for (uint i = 0; i < TM; i++) {
    [[unroll]] for (uint j = 0; j < TN; j++) coopMatStoreNV(acc[i * TN + j], sm, base + 4 * j, 4 * TN, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint c = lane; c < 256 * TN; c += 32) {
      uint j = row0 + wr + 16 * i + c / (16 * TN), col = col0 + wc + c % (16 * TN);
      if (j >= n || col >= p.rows) continue;
      float v = uintBitsToFloat(sm[base + c / 4][c % 4]) / A_SCALE;
      uint q = list[e * p.cap + j];
      o[q * p.rows + col] = STAGE == 0 ? max(v, 0.0) * max(v, 0.0) : v;
    }
    subgroupBarrier();
  }
}
