/* f16 and bf16 conversions, rounding to nearest even as the GPU and PyTorch do. */
#ifndef STENO_BASE_HALF_H
#define STENO_BASE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static inline float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    /* zero or subnormal: man · 2^-24 */
    float f = (float)man * (1.0f / 16777216.0f);
    return sign ? -f : f;
  }
  return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds past 65504 */
  if (a < 0x38800000u) {
    /* subnormal or zero in f16: round a · 2^24 to an integer, ties to even */
    float m = f32_from_bits(a) * 16777216.0f;
    uint32_t q = (uint32_t)m;
    float r = m - (float)q;
    if (r > 0.5f || (r == 0.5f && (q & 1))) q++;
    return (uint16_t)(sign | q);
  }
  uint32_t rounded = a + 0xfffu + ((a >> 13) & 1);
  return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

static inline float f16_round(float f) { return f16_to_f32(f32_to_f16(f)); }

static inline float bf16_to_f32(uint16_t b) { return f32_from_bits((uint32_t)b << 16); }

static inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

#endif
