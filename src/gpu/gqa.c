#include "gpu/gqa.h"

#include <math.h>

#include "base/error.h"
#include "gpu/norm.h"

void gpu_copy_rows(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride, gpu_buffer *y,
                   uint32_t y_off, uint32_t y_stride, uint32_t rows, uint32_t cols) {
  if (rows == 0) return;
  if (x == y || !gpu_slice_fits(x, x_off, x_stride, rows, cols) ||
      !gpu_slice_fits(y, y_off, y_stride, rows, cols)) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "copy_rows: bad slice (%u rows of %u)", rows,
                              cols));
    return;
  }
  struct {
    uint32_t rows, cols, x_off, x_stride, y_off, y_stride;
  } p = {rows, cols, x_off, x_stride, y_off, y_stride};
  gpu_buffer *bufs[] = {x, y};
  uint32_t gx = (cols + 63) / 64;
  gpu_kernel *k = gpu_rec_kernel(rec, "copy_rows", NULL, 0);
  gpu_dispatch(rec, k, bufs, 2, &p, sizeof p, gx < 1024 ? gx : 1024, gpu_row_groups(rows), 1);
}

/* Rows of the cache at `off` (values: f32 words, or f16 halves packed two to a word). */
static bool cache_fits(const gpu_gqa *a, uint32_t off, uint32_t rows, uint64_t cols) {
  if (!a->f16) return gpu_slice_fits(a->kv, off, a->kv_stride, rows, (uint32_t)cols);
  if (off % 2 || a->kv_stride % 2 || cols % 2 || !a->kv || rows == 0 || cols > a->kv_stride) return false;
  uint64_t end = off + (uint64_t)(rows - 1) * a->kv_stride + cols; /* halves */
  return end <= UINT32_MAX && end / 2 <= gpu_buffer_size(a->kv) / 4;
}

void gpu_gqa_attend(gpu_rec *rec, const gpu_gqa *a) {
  if (a->nq == 0) return;
  uint64_t qd = (uint64_t)a->heads * a->hd, kd = (uint64_t)a->kv_heads * a->hd;
  uint64_t keys = (uint64_t)a->pos + a->nq;
  bool ok = a->hd >= 1 && a->hd <= 256 && a->kv_heads >= 1 && a->heads % a->kv_heads == 0 &&
            a->heads <= 65535 && a->nq <= 65535 && qd <= UINT32_MAX && keys <= UINT32_MAX &&
            a->o != a->q && a->o != a->kv && a->scale >= 0 &&
            gpu_slice_fits(a->q, a->q_off, a->q_stride, a->nq, (uint32_t)qd) &&
            gpu_slice_fits(a->o, a->o_off, a->o_stride, a->nq, (uint32_t)qd) &&
            cache_fits(a, a->k_off, (uint32_t)keys, kd) && cache_fits(a, a->v_off, (uint32_t)keys, kd);
  if (!ok) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "gqa_attend: bad shape or slice (%u queries at %u, %u/%u heads of %u)",
                              a->nq, a->pos, a->heads, a->kv_heads, a->hd));
    return;
  }
  float scale = a->scale ? a->scale : 1.0f / sqrtf((float)a->hd);
  struct {
    uint32_t nq, heads, kv_heads, hd, pos;
    float scale;
    uint32_t q_off, q_stride, k_off, v_off, kv_stride, o_off, o_stride;
  } p = {a->nq,      a->heads,    a->kv_heads, a->hd,    a->pos,       scale,   a->q_off,
         a->q_stride, a->k_off, a->v_off,    a->kv_stride, a->o_off, a->o_stride};
  gpu_buffer *bufs[] = {a->q, a->kv, a->o};
  uint32_t f16 = a->f16;
  gpu_kernel *k = gpu_rec_kernel(rec, "gqa_attend", &f16, 1);
  gpu_dispatch(rec, k, bufs, 3, &p, sizeof p, a->heads, a->nq, 1);
}
