#include "gguf_write.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"

/* A growing byte buffer. */
typedef struct bytes {
  uint8_t *p;
  size_t n, cap;
} bytes;

static void *xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) {
    fputs("gguf_write: out of memory\n", stderr);
    abort();
  }
  return p;
}

static void put(bytes *b, const void *src, size_t n) {
  if (b->cap - b->n < n) {
    while (b->cap - b->n < n) b->cap = b->cap ? 2 * b->cap : 256;
    b->p = xrealloc(b->p, b->cap);
  }
  if (n) memcpy(b->p + b->n, src, n);
  b->n += n;
}

static void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_str(bytes *b, const char *s) {
  size_t len = strlen(s);
  put_u64(b, len);
  put(b, s, len);
}
static void put_zeros(bytes *b, size_t n) {
  static const uint8_t zero[64];
  for (; n > sizeof zero; n -= sizeof zero) put(b, zero, sizeof zero);
  put(b, zero, n);
}

typedef struct tensor {
  char *name;
  uint32_t type;
  int n_dims;
  int64_t ne[4];
  uint8_t *data;
  size_t nbytes;
} tensor;

struct gguf_writer {
  bytes kv;          /* the serialized key-value section */
  uint64_t n_kv;
  tensor *tensors;
  size_t n_tensors;
  uint32_t alignment;
};

gguf_writer *gw_new(void) {
  gguf_writer *w = xrealloc(NULL, sizeof *w);
  memset(w, 0, sizeof *w);
  w->alignment = GGUF_DEFAULT_ALIGNMENT;
  return w;
}

void gw_free(gguf_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n_tensors; i++) {
    free(w->tensors[i].name);
    free(w->tensors[i].data);
  }
  free(w->tensors);
  free(w->kv.p);
  free(w);
}

/* key name and value type; the value follows */
static void key(gguf_writer *w, const char *k, uint32_t type) {
  put_str(&w->kv, k);
  put_u32(&w->kv, type);
  w->n_kv++;
}

#define SCALAR(fn, ctype, type)                              \
  void fn(gguf_writer *w, const char *k, ctype v) {          \
    key(w, k, type);                                         \
    put(&w->kv, &v, sizeof v);                               \
  }

SCALAR(gw_u8, uint8_t, GGUF_VAL_UINT8)
SCALAR(gw_i8, int8_t, GGUF_VAL_INT8)
SCALAR(gw_u16, uint16_t, GGUF_VAL_UINT16)
SCALAR(gw_i16, int16_t, GGUF_VAL_INT16)
SCALAR(gw_u32, uint32_t, GGUF_VAL_UINT32)
SCALAR(gw_i32, int32_t, GGUF_VAL_INT32)
SCALAR(gw_u64, uint64_t, GGUF_VAL_UINT64)
SCALAR(gw_i64, int64_t, GGUF_VAL_INT64)
SCALAR(gw_f32, float, GGUF_VAL_FLOAT32)
SCALAR(gw_f64, double, GGUF_VAL_FLOAT64)

void gw_bool(gguf_writer *w, const char *k, bool v) {
  key(w, k, GGUF_VAL_BOOL);
  uint8_t b = v;
  put(&w->kv, &b, 1);
}

void gw_str(gguf_writer *w, const char *k, const char *v) {
  key(w, k, GGUF_VAL_STRING);
  put_str(&w->kv, v);
}

void gw_set_alignment(gguf_writer *w, uint32_t alignment) {
  w->alignment = alignment;
  gw_u32(w, "general.alignment", alignment);
}

/* bytes per element as stored, for fixed-size value types */
static size_t elem_size(uint32_t type) {
  static const uint8_t size[GGUF_VAL_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  if (type >= GGUF_VAL_COUNT || !size[type]) {
    fprintf(stderr, "gw_arr: element type %u is not fixed-size\n", type);
    abort();
  }
  return size[type];
}

void gw_arr(gguf_writer *w, const char *k, uint32_t elem_type, const void *data, size_t n) {
  key(w, k, GGUF_VAL_ARRAY);
  put_u32(&w->kv, elem_type);
  put_u64(&w->kv, n);
  put(&w->kv, data, n * elem_size(elem_type));
}

void gw_arr_str(gguf_writer *w, const char *k, const char *const *v, size_t n) {
  key(w, k, GGUF_VAL_ARRAY);
  put_u32(&w->kv, GGUF_VAL_STRING);
  put_u64(&w->kv, n);
  for (size_t i = 0; i < n; i++) put_str(&w->kv, v[i]);
}

void gw_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
               const void *data, size_t nbytes) {
  w->tensors = xrealloc(w->tensors, (w->n_tensors + 1) * sizeof *w->tensors);
  tensor *t = &w->tensors[w->n_tensors++];
  memset(t, 0, sizeof *t);
  size_t len = strlen(name) + 1;
  t->name = memcpy(xrealloc(NULL, len), name, len);
  t->type = type;
  t->n_dims = n_dims;
  for (int d = 0; d < n_dims && d < 4; d++) t->ne[d] = ne[d];
  t->data = xrealloc(NULL, nbytes);
  if (nbytes) memcpy(t->data, data, nbytes);
  t->nbytes = nbytes;
}

void gw_quantize_q8_0(const float *x, void *out, size_t n) {
  uint8_t *o = out;
  for (size_t b = 0; b < n / 32; b++, x += 32, o += 34) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f;
    float id = d ? 1.0f / d : 0.0f;
    uint16_t h = f32_to_f16(d);
    memcpy(o, &h, 2);
    for (int j = 0; j < 32; j++) o[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
  }
}

void gw_tensor_f32(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                   const float *x) {
  size_t n = 1;
  for (int d = 0; d < n_dims; d++) n *= (size_t)ne[d];
  size_t nbytes = type == GGUF_TYPE_F32 ? 4 * n : type == GGUF_TYPE_Q8_0 ? n / 32 * 34 : 2 * n;
  uint8_t *p = xrealloc(NULL, nbytes);
  for (size_t i = 0; i < n && type != GGUF_TYPE_Q8_0; i++) {
    uint16_t h = type == GGUF_TYPE_F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
    if (type == GGUF_TYPE_F32)
      memcpy(p + 4 * i, &x[i], 4);
    else
      memcpy(p + 2 * i, &h, 2);
  }
  if (type == GGUF_TYPE_Q8_0) {
    if (ne[0] % 32) {
      fprintf(stderr, "gw_tensor_f32 '%s': ne[0] %lld is not a multiple of 32\n", name, (long long)ne[0]);
      abort();
    }
    gw_quantize_q8_0(x, p, n);
  } else if (type != GGUF_TYPE_F32 && type != GGUF_TYPE_F16 && type != GGUF_TYPE_BF16) {
    fprintf(stderr, "gw_tensor_f32 '%s': cannot convert to type %u\n", name, type);
    abort();
  }
  gw_tensor(w, name, type, n_dims, ne, p, nbytes);
  free(p);
}

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

void gw_write(const gguf_writer *w, uint8_t **out, size_t *size) {
  bytes b = {0};
  put(&b, "GGUF", 4);
  put_u32(&b, 3);
  put_u64(&b, w->n_tensors);
  put_u64(&b, w->n_kv);
  put(&b, w->kv.p, w->kv.n);
  size_t offset = 0;
  for (size_t i = 0; i < w->n_tensors; i++) {
    const tensor *t = &w->tensors[i];
    put_str(&b, t->name);
    put_u32(&b, (uint32_t)t->n_dims);
    for (int d = 0; d < t->n_dims && d < 4; d++) put_u64(&b, (uint64_t)t->ne[d]);
    put_u32(&b, t->type);
    offset = align_up(offset, w->alignment);
    put_u64(&b, offset);
    offset += t->nbytes;
  }
  if (w->n_tensors) put_zeros(&b, align_up(b.n, w->alignment) - b.n);
  size_t start = b.n;
  for (size_t i = 0; i < w->n_tensors; i++) {
    put_zeros(&b, align_up(b.n - start, w->alignment) - (b.n - start));
    put(&b, w->tensors[i].data, w->tensors[i].nbytes);
  }
  *out = b.p ? b.p : xrealloc(NULL, 1);
  *size = b.n;
}

int gw_write_file(const gguf_writer *w, const char *path) {
  uint8_t *p;
  size_t n;
  gw_write(w, &p, &n);
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(p, 1, n, f) == n;
  if (f && fclose(f)) ok = 0;
  free(p);
  return ok ? 0 : -1;
}

void gw_copy_kv(gguf_writer *w, const gguf_kv *kv) {
  const char *k = kv->key;
  if (kv->type == GGUF_VAL_ARRAY && kv->elem_type == GGUF_VAL_STRING) {
    const char **s = malloc((kv->n + 1) * sizeof *s);
    if (!s) abort();
    for (size_t i = 0; i < kv->n; i++) s[i] = kv->v.str[i].s;
    gw_arr_str(w, k, s, kv->n);
    free(s);
    return;
  }
  if (kv->type == GGUF_VAL_ARRAY) return gw_arr(w, k, kv->elem_type, kv->v.data, kv->n);
  switch (kv->type) {
    case GGUF_VAL_UINT8: return gw_u8(w, k, kv->v.u8[0]);
    case GGUF_VAL_INT8: return gw_i8(w, k, kv->v.i8[0]);
    case GGUF_VAL_UINT16: return gw_u16(w, k, kv->v.u16[0]);
    case GGUF_VAL_INT16: return gw_i16(w, k, kv->v.i16[0]);
    case GGUF_VAL_UINT32: return gw_u32(w, k, kv->v.u32[0]);
    case GGUF_VAL_INT32: return gw_i32(w, k, kv->v.i32[0]);
    case GGUF_VAL_UINT64: return gw_u64(w, k, kv->v.u64[0]);
    case GGUF_VAL_INT64: return gw_i64(w, k, kv->v.i64[0]);
    case GGUF_VAL_FLOAT32: return gw_f32(w, k, kv->v.f32[0]);
    case GGUF_VAL_FLOAT64: return gw_f64(w, k, kv->v.f64[0]);
    case GGUF_VAL_BOOL: return gw_bool(w, k, kv->v.b[0]);
    case GGUF_VAL_STRING: return gw_str(w, k, kv->v.str[0].s);
  }
}

uint8_t *gw_rewrite(const gguf_file *src, const gw_edit *e, size_t *size) {
  gguf_writer *w = gw_new();
  for (size_t i = 0; i < src->n_kv; i++)
    if (!e->key || !e->key(w, &src->kv[i], e->ctx)) gw_copy_kv(w, &src->kv[i]);
  for (size_t i = 0; i < src->n_tensors; i++) {
    const gguf_tensor *t = &src->tensors[i];
    if (e->drop && !strcmp(t->name, e->drop)) continue;
    int64_t ne[4];
    for (uint32_t d = 0; d < t->n_dims; d++) ne[d] = (int64_t)t->ne[d];
    bool misshape = e->misshape && !strcmp(t->name, e->misshape);
    uint32_t type = misshape                                   ? GGUF_TYPE_F32
                    : e->retype && !strcmp(t->name, e->retype) ? e->retype_to
                    : e->linear_type && e->is_linear && e->is_linear(t) ? e->linear_type
                                                               : t->type;
    if (!misshape && type == t->type) {
      gw_tensor(w, t->name, t->type, (int)t->n_dims, ne, t->data, t->nbytes);
      continue;
    }
    float *x = malloc(t->nelem * sizeof *x + 1);
    if (!x || gguf_tensor_to_f32(t, x)) abort();
    if (misshape) ne[0] -= 1;
    gw_tensor_f32(w, t->name, type, (int)t->n_dims, ne, x);
    free(x);
  }
  uint8_t *bytes;
  gw_write(w, &bytes, size);
  gw_free(w);
  return bytes;
}
