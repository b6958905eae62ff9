/* Tensor type traits: one table row per ggml tensor type (block size, bytes
 * per block, dequantization to f32), so adding a type touches one row.
 * Type ids are ggml's (ggml/include/ggml.h), as stored in GGUF tensor infos. */
#ifndef STENO_IO_TYPES_H
#define STENO_IO_TYPES_H

#include <stddef.h>
#include <stdint.h>

enum {
  GGUF_TYPE_F32 = 0,
  GGUF_TYPE_F16 = 1,
  GGUF_TYPE_Q4_0 = 2,
  GGUF_TYPE_Q4_1 = 3,
  GGUF_TYPE_Q5_0 = 6,
  GGUF_TYPE_Q5_1 = 7,
  GGUF_TYPE_Q8_0 = 8,
  GGUF_TYPE_Q4_K = 12,
  GGUF_TYPE_Q5_K = 13,
  GGUF_TYPE_Q6_K = 14,
  GGUF_TYPE_BF16 = 30,
  GGUF_TYPE_COUNT = 40, /* table size; ids at or past it are unknown */
};

/* Masks of allowed types, for gguf_tensor_get. */
#define GGUF_MASK(type) (UINT64_C(1) << (type))
#define GGUF_MASK_FLOAT (GGUF_MASK(GGUF_TYPE_F32) | GGUF_MASK(GGUF_TYPE_F16) | GGUF_MASK(GGUF_TYPE_BF16))
#define GGUF_MASK_ANY (~UINT64_C(0))

/* Dequantizes n elements (a multiple of the block size) from src to dst.
 * src may be unaligned. */
typedef void (*gguf_to_f32_fn)(const void *src, float *dst, size_t n);

typedef struct gguf_type_traits {
  const char *name;       /* "F32", "Q8_0", ... */
  uint32_t block_size;    /* elements per block; blocks run along ne[0] */
  uint32_t block_bytes;   /* bytes per block as stored */
  gguf_to_f32_fn to_f32;  /* NULL where the layout is known but not yet decoded */
} gguf_type_traits;

/* The row for a type id, or NULL for an id steno does not know. */
const gguf_type_traits *gguf_type_traits_of(uint32_t type);

/* The type's name, or "unknown". */
const char *gguf_type_name(uint32_t type);

/* Bytes that n elements of `type` take; STENO_ERR_FORMAT (with a message) for an
 * unknown type, n not a multiple of the block size, or a size past SIZE_MAX. */
int gguf_type_nbytes(uint32_t type, uint64_t n, size_t *out);

#endif
