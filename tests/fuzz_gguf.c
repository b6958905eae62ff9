/* libFuzzer target: any bytes through gguf_open_memory; on success, walk every
 * key and tensor the way `steno info` and the loaders do, and dequantize the
 * small tensors, so every pointer the reader hands out is exercised. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void walk_kv(const gguf_file *f, const gguf_kv *kv) {
  if (gguf_find(f, kv->key) == NULL) abort(); /* every key must be found again */
  uint32_t u32;
  const char *s;
  const gguf_kv *a;
  (void)gguf_get_u32(f, kv->key, &u32);
  (void)gguf_get_str(f, kv->key, &s);
  (void)gguf_get_arr(f, kv->key, kv->elem_type, &a);
  for (size_t i = 0; i < kv->n; i++) {
    switch (kv->elem_type) {
      case GGUF_VAL_STRING: sink += kv->v.str[i].len + (uint8_t)kv->v.str[i].s[kv->v.str[i].len]; break;
      case GGUF_VAL_BOOL: sink += kv->v.b[i]; break;
      case GGUF_VAL_UINT8: case GGUF_VAL_INT8: sink += kv->v.u8[i]; break;
      case GGUF_VAL_UINT16: case GGUF_VAL_INT16: sink += kv->v.u16[i]; break;
      case GGUF_VAL_UINT32: case GGUF_VAL_INT32: case GGUF_VAL_FLOAT32: sink += kv->v.u32[i]; break;
      default: sink += kv->v.u64[i]; break;
    }
  }
}

static void walk_tensor(const gguf_file *f, const gguf_tensor *t) {
  if (gguf_tensor_find(f, t->name) != t) abort(); /* names are unique */
  const gguf_tensor *g;
  int64_t ne[4] = {(int64_t)t->ne[0], (int64_t)t->ne[1], (int64_t)t->ne[2], (int64_t)t->ne[3]};
  if (gguf_tensor_get(f, t->name, GGUF_MASK_ANY, (int)t->n_dims, ne, &g) || g != t) abort();
  const uint8_t *p = t->data;
  if (p < f->base || t->nbytes > f->size || (size_t)(p - f->base) > f->size - t->nbytes) abort();
  if (t->nbytes) sink += p[0] + p[t->nbytes - 1];
  if (t->nelem <= 4096) {
    float *out = malloc((size_t)t->nelem * sizeof *out + 1);
    if (out) {
      (void)gguf_tensor_to_f32(t, out);
      free(out);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gguf_file *f;
  if (gguf_open_memory(&f, data, size, "fuzz.gguf")) return 0;
  for (size_t i = 0; i < f->n_kv; i++) walk_kv(f, &f->kv[i]);
  for (size_t i = 0; i < f->n_tensors; i++) walk_tensor(f, &f->tensors[i]);
  gguf_close(f);
  return 0;
}
