/* GGUF reader (v3; v2 has the same layout and is accepted too). The file is
 * memory-mapped read-only and everything in it is checked once, at open:
 * every count, length and offset against the file's size, with overflow-safe
 * arithmetic. After a successful open, every pointer below is in bounds.
 *
 * Metadata values are copied out of the file (strings NUL-terminated, numbers
 * aligned), so they can be read directly; tensor data stays in the mapping.
 * Layout: ggml/docs/gguf.md and ggml/src/gguf.cpp. */
#ifndef STENO_IO_GGUF_H
#define STENO_IO_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/types.h"

/* Metadata value types, as stored. */
enum {
  GGUF_VAL_UINT8 = 0,
  GGUF_VAL_INT8 = 1,
  GGUF_VAL_UINT16 = 2,
  GGUF_VAL_INT16 = 3,
  GGUF_VAL_UINT32 = 4,
  GGUF_VAL_INT32 = 5,
  GGUF_VAL_FLOAT32 = 6,
  GGUF_VAL_BOOL = 7,
  GGUF_VAL_STRING = 8,
  GGUF_VAL_ARRAY = 9,
  GGUF_VAL_UINT64 = 10,
  GGUF_VAL_INT64 = 11,
  GGUF_VAL_FLOAT64 = 12,
  GGUF_VAL_COUNT = 13,
};

#define GGUF_DEFAULT_ALIGNMENT 32

/* A string value: NUL-terminated copy, with its length (it may hold NULs). */
typedef struct gguf_str {
  const char *s;
  size_t len;
} gguf_str;

/* One metadata key and its value. A scalar is an array of one element. */
typedef struct gguf_kv {
  const char *key;
  uint32_t type;      /* GGUF_VAL_*; GGUF_VAL_ARRAY for arrays */
  uint32_t elem_type; /* the element type; equal to type for scalars */
  size_t n;           /* element count (1 for a scalar) */
  union {             /* the elements, read through the member for elem_type */
    const void *data;
    const uint8_t *u8;
    const int8_t *i8;
    const uint16_t *u16;
    const int16_t *i16;
    const uint32_t *u32;
    const int32_t *i32;
    const uint64_t *u64;
    const int64_t *i64;
    const float *f32;
    const double *f64;
    const bool *b;
    const gguf_str *str;
  } v;
} gguf_kv;

/* One tensor. Dims past n_dims are 1. */
typedef struct gguf_tensor {
  const char *name;
  uint32_t type;      /* GGUF_TYPE_* (its traits are known) */
  uint32_t n_dims;    /* 1..4 */
  uint64_t ne[4];     /* dims, fastest-varying first */
  uint64_t nelem;     /* product of ne */
  uint64_t offset;    /* from the start of the data section, as stored */
  const void *data;   /* in the mapping; aligned to the file's alignment */
  size_t nbytes;
} gguf_tensor;

/* An open file. Read the public fields; the rest is private. */
typedef struct gguf_file {
  const char *name;       /* the path (or the name given), for messages */
  uint32_t version;       /* 2 or 3 */
  uint32_t alignment;     /* general.alignment, or 32 */
  const uint8_t *base;    /* the whole file */
  size_t size;            /* its length in bytes */
  size_t data_offset;     /* where the data section starts */
  size_t n_kv;
  gguf_kv *kv;            /* in file order */
  size_t n_tensors;
  gguf_tensor *tensors;   /* in file order */
  /* private */
  const gguf_kv **kv_by_key;
  const gguf_tensor **tensor_by_name;
  struct gguf_chunk *pool;
  bool mapped;
} gguf_file;

/* Maps and checks the file at `path`. STENO_ERR_IO when it cannot be opened or
 * mapped, STENO_ERR_FORMAT when it is not a valid GGUF file. */
int gguf_open(gguf_file **out, const char *path);

/* Checks a GGUF image in memory, which must outlive the file object (it is not
 * copied). `name` is used in messages (NULL: "<memory>"). */
int gguf_open_memory(gguf_file **out, const void *data, size_t size, const char *name);

/* Unmaps and frees f (NULL is fine); every pointer into it dies with it. */
void gguf_close(gguf_file *f);

/* The name of a value type ("UINT32", ...), or "unknown". */
const char *gguf_val_type_name(uint32_t type);

/* ---- metadata ---- */

/* The value of `key`, or NULL. */
const gguf_kv *gguf_find(const gguf_file *f, const char *key);

/* Typed getters: the key must exist and have exactly this type (UINT32 is not
 * INT32), or STENO_ERR_FORMAT with a message naming the key. The gguf_opt_*
 * forms return STENO_OK and leave *out alone when the key is absent. */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
int gguf_get_i32(const gguf_file *f, const char *key, int32_t *out);
int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out);
int gguf_get_f32(const gguf_file *f, const char *key, float *out);
int gguf_get_bool(const gguf_file *f, const char *key, bool *out);
int gguf_get_str(const gguf_file *f, const char *key, const char **out);
int gguf_opt_u32(const gguf_file *f, const char *key, uint32_t *out);
int gguf_opt_i32(const gguf_file *f, const char *key, int32_t *out);
int gguf_opt_u64(const gguf_file *f, const char *key, uint64_t *out);
int gguf_opt_f32(const gguf_file *f, const char *key, float *out);
int gguf_opt_bool(const gguf_file *f, const char *key, bool *out);
int gguf_opt_str(const gguf_file *f, const char *key, const char **out);

/* An array of elem_type elements: *out is its kv (read (*out)->n and
 * (*out)->v.f32, ->v.str[i].s, ...). The opt form sets *out to NULL when absent. */
int gguf_get_arr(const gguf_file *f, const char *key, uint32_t elem_type, const gguf_kv **out);
int gguf_opt_arr(const gguf_file *f, const char *key, uint32_t elem_type, const gguf_kv **out);

/* ---- tensors ---- */

/* The tensor called `name`, or NULL. */
const gguf_tensor *gguf_tensor_find(const gguf_file *f, const char *name);

/* The tensor called `name`, checked: its type must be in `types` (a mask of
 * GGUF_MASK(type) bits) and its shape ne[0..n_dims) (n_dims ≤ 4; a negative
 * entry matches any size). Trailing dims of 1 are ignored on both sides, as
 * ggml's writer drops them. STENO_ERR_FORMAT naming the tensor otherwise. */
int gguf_tensor_get(const gguf_file *f, const char *name, uint64_t types, int n_dims,
                    const int64_t *ne, const gguf_tensor **out);

/* Dequantizes all of t into out (t->nelem floats). STENO_ERR_UNSUPPORTED for a
 * type that has no dequantization yet. */
int gguf_tensor_to_f32(const gguf_tensor *t, float *out);

#endif
