// Shared by the kernels: weight types, unpacking, activations and the GEMM
// epilogues. Included, never compiled on its own.

// Weight types (the specialization constant WTYPE); same order as gpu_wtype.
const uint W_F32 = 0, W_F16 = 1, W_BF16 = 2, W_Q8_0 = 3;

// Two bf16 in a word → f32 (low half first).
vec2 unpack_bf16(uint v) { return vec2(uintBitsToFloat(v << 16), uintBitsToFloat(v & 0xffff0000u)); }

// Four 16-bit weights in two words (low half first) → f32: bf16 where wtype
// is W_BF16, else f16.
vec4 halves4(uint wtype, uvec2 h) {
  if (wtype == W_BF16) return vec4(unpack_bf16(h.x), unpack_bf16(h.y));
  return vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
}

// f32 → f16 bits, to nearest with ties to even, by integer operations only
// (as base/half.h's f32_to_f16: the result does not hang on the driver's
// conversion, which may flush f16 subnormals).
uint f16_bits(float f) {
  uint u = floatBitsToUint(f);
  uint sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) { // f16 subnormal or zero: a · 2^24 rounded to an integer, ties to even
    float m = uintBitsToFloat(a) * 16777216.0;
    uint q = uint(m);
    float r = m - float(q);
    if (r > 0.5 || (r == 0.5 && (q & 1u) != 0u)) q++;
    return sign | q;
  }
  return sign | ((a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u) >> 13);
}

// Two bf16 in a word → two f16 in a word (the same rounding).
uint bf16_to_f16_pair(uint v) {
  vec2 f = unpack_bf16(v);
  return f16_bits(f.x) | (f16_bits(f.y) << 16);
}

// Four int8 in a word → f32 (lowest byte first).
vec4 unpack_q8(uint v) {
  int s = int(v);
  return vec4(bitfieldExtract(s, 0, 8), bitfieldExtract(s, 8, 8), bitfieldExtract(s, 16, 8),
              bitfieldExtract(s, 24, 8));
}

// f16 value number `i` of a buffer of packed f16 pairs.
#define q8_scale(buf, i) (unpackHalf2x16(buf[(i) / 2])[(i) % 2])

float silu(float x) { return x / (1.0 + exp(-x)); }

// erf by Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7).
float erf_approx(float x) {
  float z = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * z);
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
                   0.254829592) * t * exp(-z * z);
  return x < 0.0 ? -y : y;
}

float gelu(float x) { return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752)); }

// GEMM epilogues (gpu_epilogue): v = a·Wᵀ + b; old = the output's current value.
const uint E_BIAS = 0, E_SILU = 1, E_RELU = 2, E_RESIDUAL = 3, E_GELU = 4, E_GELU_RESIDUAL = 5,
           E_SCALE = 6, E_RELU2 = 7;

bool reads_output(uint mode) { return mode == E_RESIDUAL || mode == E_GELU_RESIDUAL; }

float epilogue(uint mode, float alpha, float v, float old) {
  if (mode == E_SILU) return silu(v);
  if (mode == E_RELU) return max(v, 0.0);
  if (mode == E_RESIDUAL) return old + alpha * v;
  if (mode == E_GELU) return gelu(v);
  if (mode == E_GELU_RESIDUAL) return old + gelu(v);
  if (mode == E_SCALE) return alpha * v;
  if (mode == E_RELU2) return max(v, 0.0) * max(v, 0.0);
  return v;
}

// An f32 pair split for tensor-core products in f16 (the attention kernels'
// hi + lo): hi = its top 11 significant bits (exact in f16 in its normal
// range), lo = v − hi (exact in f32, kept by f16 to 2^-11 of itself), so that
// hi_a·hi_b + lo_a·hi_b + hi_a·lo_b is about 2^-22 of |a|·|b| off a·b. hi is
// cut from the bits, not rounded through f16 and back: NVIDIA's compiler
// folds that round trip (unpackHalf2x16(packHalf2x16(x)), or through
// float16_t) into x, even for a precise variable, and lo came out 0 (the
// H200; docs/perf.md). Values are clamped to ±65504 first.
uint pack_hi(vec2 v) {
  vec2 c = clamp(v, -65504.0, 65504.0);
  return packHalf2x16(uintBitsToFloat(floatBitsToUint(c) & 0xffffe000u));
}
uint pack_lo(vec2 v) {
  vec2 c = clamp(v, -65504.0, 65504.0);
  return packHalf2x16(c - uintBitsToFloat(floatBitsToUint(c) & 0xffffe000u));
}
uvec4 pack8_hi(vec4 x, vec4 y) { return uvec4(pack_hi(x.xy), pack_hi(x.zw), pack_hi(y.xy), pack_hi(y.zw)); }
uvec4 pack8_lo(vec4 x, vec4 y) { return uvec4(pack_lo(x.xy), pack_lo(x.zw), pack_lo(y.xy), pack_lo(y.zw)); }
// The same 8 values rounded to f16 (to nearest; clamped to ±65504): one
// product a term where hi + lo would make three.
uvec4 pack8_f16(vec4 x, vec4 y) {
  vec4 cx = clamp(x, -65504.0, 65504.0), cy = clamp(y, -65504.0, 65504.0);
  return uvec4(packHalf2x16(cx.xy), packHalf2x16(cx.zw), packHalf2x16(cy.xy), packHalf2x16(cy.zw));
}
