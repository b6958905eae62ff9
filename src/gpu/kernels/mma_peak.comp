#version 450
// mma_peak (benchmarks only: bench/gemm_tc_sweep's `peak`): the tensor
// cores' rate through NV cooperative matrices with nothing else in the way.
// Each subgroup multiplies two f16 16×16 matrices into N accumulators
// (f32, or f16 with ACC16; 16×16, or 16×8 products of 16×16 by 16×8 with
// N8) `iters` times, each product depending on the one
// before it into the same accumulator; the N chains are independent. The
// sums are written out so that nothing is optimized away.
// LOAD ≠ 0: gemm_tc's inner step instead, 2 × 2 accumulators a subgroup,
// each iteration loading 2 a matrices (row-major) and 2 b matrices from
// shared memory rows of STRIDE 128-bit words (b column-major with LOAD 1,
// as gemm_tc loads W, row-major with LOAD 2), 16 halves further each time.
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require

#define M16 fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define M32 fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define B8 fcoopmatNV<16, gl_ScopeSubgroup, 16, 8>
#define M32_8 fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>

layout(local_size_x_id = 2) in;
layout(constant_id = 0) const uint N = 8;       // accumulators a subgroup: 1 … 16
layout(constant_id = 1) const uint ACC16 = 0;   // 1: f16 accumulators
layout(constant_id = 2) const uint THREADS = 256;
layout(constant_id = 3) const uint N8 = 0;      // 1: 16×8 accumulators (f32)
layout(constant_id = 4) const uint LOAD = 0;
layout(constant_id = 5) const uint STRIDE = 9;

const uint ROWS = 128, WORDS = ROWS * STRIDE; // 128 rows of a, then 128 of b
shared uvec4 sm[LOAD != 0 ? 2 * WORDS : 1];

layout(std430, binding = 0) buffer C { float c[]; };
layout(std430, binding = 1) buffer C16 { float16_t c16[]; };

layout(push_constant) uniform Push { uint iters; } p;

void main() {
  uint sg = gl_WorkGroupID.x * (THREADS / 32) + gl_LocalInvocationID.x / 32;
  M16 a = M16(float16_t(0.001));
  M16 b = M16(float16_t(0.002) * float16_t(sg % 7));
  if (LOAD != 0) {
    for (uint e = gl_LocalInvocationID.x; e < 2 * WORDS; e += THREADS) sm[e] = uvec4(0x3c003c00u * (e & 1));
    barrier();
    uint w = gl_LocalInvocationID.x / 32, wr = (w / 4) * 32, wc = (w % 4) * 32;
    M32 acc[4];
    [[unroll]] for (uint i = 0; i < 4; i++) acc[i] = M32(0.0);
    for (uint it = 0; it < p.iters; it++) {
      uint kk = 2 * (it % (STRIDE - 1) / 2); // 16 halves at a time along the row
      M16 fa[2], fb[2];
      [[unroll]] for (uint i = 0; i < 2; i++)
        coopMatLoadNV(fa[i], sm, (wr + 16 * i) * STRIDE + kk, STRIDE, false);
      [[unroll]] for (uint j = 0; j < 2; j++)
        coopMatLoadNV(fb[j], sm, WORDS + (wc + 16 * j) * STRIDE + kk, STRIDE, LOAD == 1);
      [[unroll]] for (uint i = 0; i < 2; i++)
        [[unroll]] for (uint j = 0; j < 2; j++) acc[i * 2 + j] = coopMatMulAddNV(fa[i], fb[j], acc[i * 2 + j]);
    }
    acc[0] += acc[1] + acc[2] + acc[3];
    coopMatStoreNV(acc[0], c, sg * 256, 16, false);
  } else if (N8 != 0) {
    B8 b8 = B8(float16_t(0.002) * float16_t(sg % 7));
    M32_8 acc[N];
    [[unroll]] for (uint i = 0; i < N; i++) acc[i] = M32_8(float(i));
    for (uint it = 0; it < p.iters; it++)
      [[unroll]] for (uint i = 0; i < N; i++) acc[i] = coopMatMulAddNV(a, b8, acc[i]);
    [[unroll]] for (uint i = 1; i < N; i++) acc[0] += acc[i];
    coopMatStoreNV(acc[0], c, sg * 256, 8, false);
  } else if (ACC16 == 0) {
    M32 acc[N];
    [[unroll]] for (uint i = 0; i < N; i++) acc[i] = M32(float(i));
    for (uint it = 0; it < p.iters; it++)
      [[unroll]] for (uint i = 0; i < N; i++) acc[i] = coopMatMulAddNV(a, b, acc[i]);
    [[unroll]] for (uint i = 1; i < N; i++) acc[0] += acc[i];
    coopMatStoreNV(acc[0], c, sg * 256, 16, false);
  } else {
    M16 acc[N];
    [[unroll]] for (uint i = 0; i < N; i++) acc[i] = M16(float16_t(i));
    for (uint it = 0; it < p.iters; it++)
      [[unroll]] for (uint i = 0; i < N; i++) acc[i] = coopMatMulAddNV(a, b, acc[i]);
    [[unroll]] for (uint i = 1; i < N; i++) acc[0] += acc[i];
    coopMatStoreNV(acc[0], c16, sg * 256, 16, false);
  }
}
