#include "nn/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"

static int kernel_type(uint32_t t, gpu_wtype *out) {
  switch (t) {
    case GGUF_TYPE_F32: *out = GPU_F32; return 1;
    case GGUF_TYPE_F16: *out = GPU_F16; return 1;
    case GGUF_TYPE_BF16: *out = GPU_BF16; return 1;
    case GGUF_TYPE_Q8_0: *out = GPU_Q8_0; return 1;
    default: return 0;
  }
}

/* A weight as [k, rows] (ne order): a 1×1 conv's leading dims of 1 are dropped. */
static int matrix(const gguf_file *f, const char *name, uint64_t types, int64_t k, int64_t rows,
                  const gguf_tensor **out, uint64_t ne[2]) {
  const gguf_tensor *t = gguf_tensor_find(f, name);
  if (!t) return err_set(STENO_ERR_FORMAT, "%s: tensor '%s' is missing", f->name, name);
  if (!(types & GGUF_MASK(t->type)))
    return err_set(STENO_ERR_FORMAT, "%s: tensor '%s' has type %s, which is not allowed there",
                   f->name, name, gguf_type_name(t->type));
  uint32_t d = 0;
  while (d + 2 < t->n_dims && t->ne[d] == 1) d++;
  bool ok = d + 2 >= t->n_dims && (k <= 0 || (int64_t)t->ne[d] == k) &&
            (rows <= 0 || (int64_t)t->ne[d + 1] == rows) && t->ne[d] > 0 && t->ne[d + 1] > 0;
  if (!ok)
    return err_set(STENO_ERR_FORMAT,
                   "%s: tensor '%s' has shape [%llu, %llu, %llu, %llu], expected [%lld, %lld]",
                   f->name, name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                   (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], (long long)k,
                   (long long)rows);
  ne[0] = t->ne[d];
  ne[1] = t->ne[d + 1];
  *out = t;
  return 0;
}

int w_linear(gpu_device *dev, const gguf_file *f, const char *const *names, int n,
             const int64_t *rows, int64_t k, uint64_t types, const float *bias, size_t nbias,
             gpu_linear *out) {
  enum { MAX = 8 };
  const gguf_tensor *t[MAX];
  uint64_t ne[MAX][2];
  if (n < 1 || n > MAX) return err_set(STENO_ERR_INVALID, "w_linear: %d tensors", n);
  for (int i = 0; i < n; i++) {
    TRY(matrix(f, names[i], types, k, rows ? rows[i] : -1, &t[i], ne[i]));
    if (ne[i][0] != ne[0][0])
      return err_set(STENO_ERR_FORMAT, "%s: tensor '%s' has %llu inputs, '%s' %llu", f->name,
                     names[i], (unsigned long long)ne[i][0], names[0],
                     (unsigned long long)ne[0][0]);
  }
  uint32_t kk = (uint32_t)ne[0][0];
  gpu_weight parts[MAX];
  gpu_wtype type = GPU_F32;
  bool same = kernel_type(t[0]->type, &type);
  for (int i = 1; i < n; i++) same = same && t[i]->type == t[0]->type;
  if (same) {
    for (int i = 0; i < n; i++) parts[i] = (gpu_weight){t[i]->data, (uint32_t)ne[i][1]};
    int st = gpu_linear_new(dev, type, kk, parts, n, bias, nbias, out);
    return st ? err_wrap(st, "%s: '%s': ", f->name, names[0]) : 0;
  }
  /* Mixed or other types: dequantize everything to F32. */
  size_t total = 0;
  for (int i = 0; i < n; i++) total += t[i]->nelem;
  float *w = mem_alloc(total, sizeof *w);
  if (!w) return STENO_ERR_NOMEM;
  int st = 0;
  size_t at = 0;
  for (int i = 0; i < n && !st; i++) {
    st = gguf_tensor_to_f32(t[i], w + at);
    parts[i] = (gpu_weight){w + at, (uint32_t)ne[i][1]};
    at += t[i]->nelem;
  }
  if (!st) st = gpu_linear_new(dev, GPU_F32, kk, parts, n, bias, nbias, out);
  free(w);
  return st ? err_wrap(st, "%s: '%s': ", f->name, names[0]) : 0;
}

int w_host(const gguf_file *f, const char *name, uint64_t types, size_t count, bool required,
           float **out) {
  *out = NULL;
  const gguf_tensor *t = gguf_tensor_find(f, name);
  if (!t && !required) return 0;
  if (!t) return err_set(STENO_ERR_FORMAT, "%s: tensor '%s' is missing", f->name, name);
  if (!(types & GGUF_MASK(t->type)))
    return err_set(STENO_ERR_FORMAT, "%s: tensor '%s' has type %s, which is not allowed there",
                   f->name, name, gguf_type_name(t->type));
  if (t->nelem != count)
    return err_set(STENO_ERR_FORMAT, "%s: tensor '%s' has %llu elements, expected %zu", f->name,
                   name, (unsigned long long)t->nelem, count);
  float *x = mem_alloc(count, sizeof *x);
  if (!x) return STENO_ERR_NOMEM;
  int st = gguf_tensor_to_f32(t, x);
  if (st) {
    free(x);
    return st;
  }
  *out = x;
  return 0;
}

int w_gpu(gpu_device *dev, const gguf_file *f, const char *name, uint64_t types, size_t count,
          gpu_buffer **out) {
  float *x;
  TRY(w_host(f, name, types, count, true, &x));
  int st = gpu_buffer_from(dev, x, count * sizeof *x, out);
  free(x);
  return st;
}

int w_norm(gpu_device *dev, const gguf_file *f, const char *name, size_t n, float eps,
           gpu_norm *out) {
  char key[256];
  memset(out, 0, sizeof *out);
  out->eps = eps;
  snprintf(key, sizeof key, "%s.weight", name);
  TRY(w_gpu(dev, f, key, W_F32, n, &out->g));
  snprintf(key, sizeof key, "%s.bias", name);
  return w_gpu(dev, f, key, W_F32, n, &out->b);
}

void w_norm_free(gpu_norm *n) {
  gpu_buffer_free(n->g);
  gpu_buffer_free(n->b);
  n->g = n->b = NULL;
}
