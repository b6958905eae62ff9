#include "gpu/elementwise.h"

#include "base/error.h"

#define GROUP 256 /* swiglu.comp's workgroup */

static uint32_t capped(uint64_t n) { return n < 65535 ? (uint32_t)n : 65535; }

void gpu_swiglu(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride, gpu_buffer *y,
                uint32_t y_off, uint32_t y_stride, uint32_t rows, uint32_t n) {
  if (!rows || !n) return;
  bool same = x == y && x_off == y_off && x_stride == y_stride;
  bool ok = n <= UINT32_MAX / 2 && gpu_slice_fits(x, x_off, x_stride, rows, 2 * n) &&
            gpu_slice_fits(y, y_off, y_stride, rows, n) &&
            (x != y || same || gpu_slices_apart(x_off, x_stride, 2 * n, y_off, y_stride, n, rows));
  if (!ok) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "swiglu: bad slices (%u rows of 2·%u at %u/%u into %u/%u)", rows, n,
                              x_off, x_stride, y_off, y_stride));
    return;
  }
  gpu_kernel *k = gpu_rec_kernel(rec, "swiglu", NULL, 0);
  uint32_t push[6] = {rows, n, x_off, x_stride, y_off, y_stride};
  gpu_buffer *bufs[] = {x, y};
  gpu_dispatch(rec, k, bufs, 2, push, sizeof push, capped((n + (uint64_t)GROUP - 1) / GROUP),
               capped(rows), 1);
}

void gpu_group_norm(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride,
                    const gpu_norm *n, gpu_buffer *y, uint32_t y_off, uint32_t y_stride,
                    uint32_t rows, uint32_t cols, bool tanh_first) {
  bool same = x == y && x_off == y_off && x_stride == y_stride;
  bool ok = rows && cols && (uint64_t)rows * cols <= UINT32_MAX && n && n->g && n->b &&
            n->eps >= 0.0f && gpu_slice_fits(n->g, 0, cols, 1, cols) &&
            gpu_slice_fits(n->b, 0, cols, 1, cols) && gpu_slice_fits(x, x_off, x_stride, rows, cols) &&
            gpu_slice_fits(y, y_off, y_stride, rows, cols) &&
            (x != y || same || gpu_slices_apart(x_off, x_stride, cols, y_off, y_stride, cols, rows));
  if (!ok) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "group_norm: bad slices or norm (%u rows of %u at %u/%u into %u/%u)",
                              rows, cols, x_off, x_stride, y_off, y_stride));
    return;
  }
  gpu_kernel *k = gpu_rec_kernel(rec, "group_norm", NULL, 0);
  struct {
    uint32_t rows, cols, x_off, x_stride, y_off, y_stride, tanh_first;
    float eps;
  } push = {rows, cols, x_off, x_stride, y_off, y_stride, tanh_first, n->eps};
  gpu_buffer *bufs[] = {x, n->g, n->b, y};
  gpu_dispatch(rec, k, bufs, 4, &push, sizeof push, 1, 1, 1);
}

/* Whether y may be written while x is read: other buffers, the same slice, or apart. */
static bool writable(const gpu_buffer *x, uint32_t x_off, uint32_t x_stride, const gpu_buffer *y,
                     uint32_t y_off, uint32_t y_stride, uint32_t rows, uint32_t n) {
  return x != y || (x_off == y_off && x_stride == y_stride) ||
         gpu_slices_apart(x_off, x_stride, n, y_off, y_stride, n, rows);
}

void gpu_add(gpu_rec *rec, gpu_buffer *a, uint32_t a_off, uint32_t a_stride, gpu_buffer *b,
             uint32_t b_off, uint32_t b_stride, gpu_buffer *y, uint32_t y_off, uint32_t y_stride,
             uint32_t rows, uint32_t n) {
  if (!rows || !n) return;
  bool ok = gpu_slice_fits(a, a_off, a_stride, rows, n) && gpu_slice_fits(b, b_off, b_stride, rows, n) &&
            gpu_slice_fits(y, y_off, y_stride, rows, n) &&
            writable(a, a_off, a_stride, y, y_off, y_stride, rows, n) &&
            writable(b, b_off, b_stride, y, y_off, y_stride, rows, n);
  if (!ok) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "add: bad slices (%u rows of %u)", rows, n));
    return;
  }
  gpu_kernel *k = gpu_rec_kernel(rec, "add_rows", NULL, 0);
  uint32_t push[8] = {rows, n, a_off, a_stride, b_off, b_stride, y_off, y_stride};
  gpu_buffer *bufs[] = {a, b, y};
  gpu_dispatch(rec, k, bufs, 3, push, sizeof push, capped((n + (uint64_t)GROUP - 1) / GROUP),
               capped(rows), 1);
}
