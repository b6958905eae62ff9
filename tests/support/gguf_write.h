/* An in-memory GGUF v3 writer for tests: keys of every type, tensors from raw
 * bytes or from f32 (converted to F32, F16, BF16 or Q8_0), then the file as a
 * malloc'd buffer or on disk. It writes what it is given without judging it, so
 * tests can build malformed files too (or patch the bytes afterwards).
 * Layout: header, keys in the order added, tensor infos, padding to the
 * alignment, tensor data (each aligned; no padding after the last). Running out
 * of memory aborts: this is test code. */
#ifndef STENO_TEST_GGUF_WRITE_H
#define STENO_TEST_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/gguf.h"

typedef struct gguf_writer gguf_writer;

gguf_writer *gw_new(void);
void gw_free(gguf_writer *w);

/* Aligns the data section and tensors to `alignment` (a power of two) and
 * writes it as general.alignment (UINT32). Without it: 32 and no key. */
void gw_set_alignment(gguf_writer *w, uint32_t alignment);

/* Scalar keys. */
void gw_u8(gguf_writer *w, const char *key, uint8_t v);
void gw_i8(gguf_writer *w, const char *key, int8_t v);
void gw_u16(gguf_writer *w, const char *key, uint16_t v);
void gw_i16(gguf_writer *w, const char *key, int16_t v);
void gw_u32(gguf_writer *w, const char *key, uint32_t v);
void gw_i32(gguf_writer *w, const char *key, int32_t v);
void gw_u64(gguf_writer *w, const char *key, uint64_t v);
void gw_i64(gguf_writer *w, const char *key, int64_t v);
void gw_f32(gguf_writer *w, const char *key, float v);
void gw_f64(gguf_writer *w, const char *key, double v);
void gw_bool(gguf_writer *w, const char *key, bool v);
void gw_str(gguf_writer *w, const char *key, const char *v);

/* An array of n fixed-size elements of elem_type (GGUF_VAL_*, not STRING or
 * ARRAY), given as they are stored (BOOL: one byte each). */
void gw_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *data, size_t n);
/* An array of n strings. */
void gw_arr_str(gguf_writer *w, const char *key, const char *const *v, size_t n);

/* A key read from another file, with its type and value(s) as they are. */
void gw_copy_kv(gguf_writer *w, const gguf_kv *kv);

/* How loader tests rewrite a file: keys through `key` (which returns true when it
 * wrote the key itself; NULL or false: copied as it is), one tensor left out,
 * one written with its first dim one smaller, one converted to retype_to, and
 * every tensor is_linear picks converted to linear_type (0: none). */
typedef struct {
  bool (*key)(gguf_writer *w, const gguf_kv *kv, const void *ctx);
  const void *ctx;
  const char *drop;
  const char *misshape;
  const char *retype;
  uint32_t retype_to;
  uint32_t linear_type;
  bool (*is_linear)(const gguf_tensor *t);
} gw_edit;

/* src rewritten with `e` as a malloc'd file image of *size bytes. */
uint8_t *gw_rewrite(const gguf_file *src, const gw_edit *e, size_t *size);

/* A tensor from its stored bytes (copied). ne has n_dims entries. */
void gw_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
               const void *data, size_t nbytes);
/* A tensor from f32 values, converted to type (F32, F16, BF16 or Q8_0; ne[0]
 * must be a multiple of 32 for Q8_0) the way the published converters do. */
void gw_tensor_f32(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                   const float *x);

/* The whole file in a malloc'd buffer (free it), or written to `path`. */
void gw_write(const gguf_writer *w, uint8_t **out, size_t *size);
int gw_write_file(const gguf_writer *w, const char *path);

/* Q8_0 as ggml's quantize_row_q8_0_ref: per block of 32, d = max|x|/127 (stored
 * f16), q = round(x/d) half away from zero. n a multiple of 32; out n/32·34 bytes. */
void gw_quantize_q8_0(const float *x, void *out, size_t n);

#endif
