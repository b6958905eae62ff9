#include "gpu/conv.h"

#include "base/error.h"
#include "gpu/internal.h"

uint32_t gpu_conv1d_rows(gpu_conv1d c, uint32_t t) {
  uint64_t span = (uint64_t)t + 2ull * c.pad;
  if (c.kernel == 0 || c.stride == 0 || span < c.kernel) return 0;
  return (uint32_t)((span - c.kernel) / c.stride + 1);
}

void gpu_im2col(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride, gpu_buffer *col,
                uint32_t width, uint32_t t, uint32_t ch, gpu_conv1d c) {
  if (t == 0) return;
  uint32_t rows = gpu_conv1d_rows(c, t);
  uint64_t k = (uint64_t)ch * c.kernel;
  if (ch == 0 || rows == 0 || k > width || width > 65535u * 256 || !x || !col || x == col ||
      !gpu_slice_fits(x, x_off, x_stride, t, ch) || !gpu_slice_fits(col, 0, width, rows, width)) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "im2col: bad shape (t %u, ch %u, kernel %u, stride %u, pad %u, "
                              "width %u, x at %u stride %u)",
                              t, ch, c.kernel, c.stride, c.pad, width, x_off, x_stride));
    return;
  }
  struct {
    uint32_t t, ch, kernel, stride, pad, x_off, x_stride, width, t_out;
  } push = {t, ch, c.kernel, c.stride, c.pad, x_off, x_stride, width, rows};
  gpu_kernel *kn = gpu_rec_kernel(rec, "im2col", NULL, 0);
  gpu_buffer *bufs[] = {x, col};
  gpu_dispatch(rec, kn, bufs, 2, &push, sizeof push, (width + 255) / 256, gpu_row_groups(rows), 1);
}

/* gpu_conv_glu over batch clips of seg rows (t = batch·seg), lens: their own
 * rows; batch 0: one clip of t rows. */
static void conv_glu(gpu_rec *rec, gpu_buffer *h, uint32_t h_off, uint32_t h_stride,
                     const gpu_dwconv *dw, const gpu_norm *n, gpu_conv_norm mode, gpu_buffer *y,
                     uint32_t y_off, uint32_t y_stride, uint32_t t, uint32_t ch, uint32_t batch,
                     uint32_t seg, gpu_buffer *lens) {
  if (t == 0) return;
  uint64_t taps = dw ? (uint64_t)ch * dw->kernel : 0;
  bool ok = h && y && dw && n && ch && ch <= UINT32_MAX / 2 && dw->kernel % 2 == 1 &&
            taps <= UINT32_MAX && dw->w && dw->b && n->g && n->b &&
            (mode == GPU_CONV_AFFINE || (mode == GPU_CONV_LAYER_NORM && n->eps >= 0.0f)) &&
            gpu_slice_fits(h, h_off, h_stride, t, 2 * ch) &&
            gpu_slice_fits(y, y_off, y_stride, t, ch) &&
            gpu_slice_fits(dw->w, 0, (uint32_t)taps, 1, (uint32_t)taps) &&
            gpu_slice_fits(dw->b, 0, ch, 1, ch) && gpu_slice_fits(n->g, 0, ch, 1, ch) &&
            gpu_slice_fits(n->b, 0, ch, 1, ch);
  /* Other rows read what a row writes: y and h may share no element. */
  if (ok && h == y) ok = gpu_slices_apart(h_off, h_stride, 2 * ch, y_off, y_stride, ch, t);
  if (ok && batch) ok = lens && seg && (uint64_t)batch * seg == t && gpu_buffer_size(lens) / 4 >= batch;
  if (!ok) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "conv_glu: bad shape (t %u, ch %u, kernel %u, h at %u stride %u, "
                              "y at %u stride %u, %u clips of %u) or weights",
                              t, ch, dw ? dw->kernel : 0, h_off, h_stride, y_off, y_stride,
                              batch, seg));
    return;
  }
  struct {
    uint32_t t, ch, kernel, norm;
    float eps;
    uint32_t h_off, h_stride, y_off, y_stride, left, seg;
  } push = {t,     ch,       dw->kernel, mode,     n->eps,
            h_off, h_stride, y_off,      y_stride, dw->causal ? dw->kernel - 1 : dw->kernel / 2,
            seg};
  gpu_device *d = gpu_rec_device(rec);
  bool fast = gpu_fast_used(d, GPU_FAST_CONV_GLU);
  uint32_t spec = 1;
  gpu_kernel *k = gpu_rec_kernel(rec, fast ? "conv_glu_fast" : "conv_glu", batch ? &spec : NULL,
                                 batch ? 1 : 0);
  gpu_buffer *bufs[] = {h, dw->w, dw->b, n->g, n->b, y, batch ? lens : h};
  uint32_t groups = fast ? gpu_subgroup_row_groups(d, t) : gpu_row_groups(t);
  gpu_dispatch(rec, k, bufs, 7, &push, sizeof push, groups, 1, 1);
}

void gpu_conv_glu(gpu_rec *rec, gpu_buffer *h, uint32_t h_off, uint32_t h_stride,
                  const gpu_dwconv *dw, const gpu_norm *n, gpu_conv_norm mode, gpu_buffer *y,
                  uint32_t y_off, uint32_t y_stride, uint32_t t, uint32_t ch) {
  conv_glu(rec, h, h_off, h_stride, dw, n, mode, y, y_off, y_stride, t, ch, 0, 0, NULL);
}

void gpu_conv_glu_batch(gpu_rec *rec, gpu_buffer *h, uint32_t h_off, uint32_t h_stride,
                        const gpu_dwconv *dw, const gpu_norm *n, gpu_conv_norm mode,
                        gpu_buffer *y, uint32_t y_off, uint32_t y_stride, uint32_t batch,
                        uint32_t seg, gpu_buffer *lens, uint32_t ch) {
  if (!batch || (uint64_t)batch * seg > UINT32_MAX) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "conv_glu: a batch of %u clips of %u rows", batch,
                              seg));
    return;
  }
  conv_glu(rec, h, h_off, h_stride, dw, n, mode, y, y_off, y_stride, batch * seg, ch, batch, seg,
           lens);
}
