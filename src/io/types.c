#include "io/types.h"

#include <string.h>

#include "base/error.h"
#include "base/half.h"

static void f32_to_f32(const void *src, float *dst, size_t n) { memcpy(dst, src, n * 4); }

static void f16_row_to_f32(const void *src, float *dst, size_t n) {
  const uint8_t *p = src;
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    dst[i] = f16_to_f32(h);
  }
}

static void bf16_row_to_f32(const void *src, float *dst, size_t n) {
  const uint8_t *p = src;
  for (size_t i = 0; i < n; i++) {
    uint16_t b;
    memcpy(&b, p + 2 * i, 2);
    dst[i] = bf16_to_f32(b);
  }
}

/* Q8_0: per 32 values an f16 scale d, then 32 int8 q; x = d·q (ggml-common.h). */
static void q8_0_to_f32(const void *src, float *dst, size_t n) {
  const uint8_t *p = src;
  for (size_t b = 0; b < n / 32; b++, p += 34) {
    uint16_t h;
    memcpy(&h, p, 2);
    float d = f16_to_f32(h);
    for (int j = 0; j < 32; j++) dst[32 * b + j] = d * (float)(int8_t)p[2 + j];
  }
}

/* Indexed by type id. Rows with to_f32 NULL have a known layout (so files using
 * them open and print) but no dequantization yet. */
static const gguf_type_traits table[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_F32] = {"F32", 1, 4, f32_to_f32},
    [GGUF_TYPE_F16] = {"F16", 1, 2, f16_row_to_f32},
    [GGUF_TYPE_BF16] = {"BF16", 1, 2, bf16_row_to_f32},
    [GGUF_TYPE_Q8_0] = {"Q8_0", 32, 34, q8_0_to_f32},
    [GGUF_TYPE_Q4_0] = {"Q4_0", 32, 18, NULL},
    [GGUF_TYPE_Q4_1] = {"Q4_1", 32, 20, NULL},
    [GGUF_TYPE_Q5_0] = {"Q5_0", 32, 22, NULL},
    [GGUF_TYPE_Q5_1] = {"Q5_1", 32, 24, NULL},
    [GGUF_TYPE_Q4_K] = {"Q4_K", 256, 144, NULL},
    [GGUF_TYPE_Q5_K] = {"Q5_K", 256, 176, NULL},
    [GGUF_TYPE_Q6_K] = {"Q6_K", 256, 210, NULL},
};

const gguf_type_traits *gguf_type_traits_of(uint32_t type) {
  if (type >= GGUF_TYPE_COUNT || !table[type].name) return NULL;
  return &table[type];
}

const char *gguf_type_name(uint32_t type) {
  const gguf_type_traits *t = gguf_type_traits_of(type);
  return t ? t->name : "unknown";
}

int gguf_type_nbytes(uint32_t type, uint64_t n, size_t *out) {
  const gguf_type_traits *t = gguf_type_traits_of(type);
  if (!t) return err_set(STENO_ERR_FORMAT, "unknown tensor type %u", type);
  if (n % t->block_size)
    return err_set(STENO_ERR_FORMAT, "%llu elements of %s are not whole blocks of %u",
                   (unsigned long long)n, t->name, t->block_size);
  uint64_t bytes;
  if (__builtin_mul_overflow(n / t->block_size, (uint64_t)t->block_bytes, &bytes) || bytes > SIZE_MAX)
    return err_set(STENO_ERR_FORMAT, "%llu elements of %s take more than SIZE_MAX bytes",
                   (unsigned long long)n, t->name);
  *out = (size_t)bytes;
  return STENO_OK;
}
