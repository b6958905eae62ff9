#include "gpu/norm.h"

#include "base/error.h"
#include "gpu/internal.h"

/* norm.comp's flags. */
#define NORM 1u
#define WRITE_Y 2u

/* norm.comp's push constants. */
typedef struct {
  uint32_t rows, n, hd, rot, pos, flags;
  float eps;
  uint32_t x_stride, y_stride, r_stride, y_off;
  uint32_t x_off[2], r_off[2];
} norm_push;

bool gpu_slice_fits(const gpu_buffer *buf, uint32_t off, uint32_t stride, uint32_t rows,
                    uint32_t cols) {
  if (!buf || rows == 0 || cols == 0 || (rows > 1 && cols > stride)) return false;
  uint64_t end = off + (uint64_t)(rows - 1) * stride + cols;
  return end <= UINT32_MAX && end <= gpu_buffer_size(buf) / sizeof(float);
}

bool gpu_slices_apart(uint32_t a_off, uint32_t a_stride, uint32_t a_cols, uint32_t b_off,
                      uint32_t b_stride, uint32_t b_cols, uint32_t rows) {
  uint64_t a_end = a_off + (uint64_t)(rows - 1) * a_stride + a_cols;
  uint64_t b_end = b_off + (uint64_t)(rows - 1) * b_stride + b_cols;
  if (a_end <= b_off || b_end <= a_off) return true;
  if (a_stride != b_stride || a_stride == 0) return false;
  /* Interleaved: b's columns, taken modulo the stride, start d after a's. */
  uint64_t s = a_stride, d = (b_off % s + s - a_off % s) % s;
  return d >= a_cols && s - d >= b_cols;
}

/* Whether writing slice b while reading slice a (rows of `cols`) is safe for
 * the row kernels: other buffers, the very same slice, or no shared element. */
static bool same_or_apart(const gpu_buffer *a, uint32_t a_off, uint32_t a_stride,
                          const gpu_buffer *b, uint32_t b_off, uint32_t b_stride, uint32_t rows,
                          uint32_t cols) {
  if (a != b || (a_off == b_off && a_stride == b_stride)) return true;
  return gpu_slices_apart(a_off, a_stride, cols, b_off, b_stride, cols, rows);
}

static bool norm_ok(const gpu_norm *n, uint32_t count) {
  return n->g && n->b && n->eps >= 0.0f && gpu_slice_fits(n->g, 0, count, 1, count) &&
         gpu_slice_fits(n->b, 0, count, 1, count);
}

static bool rope_ok(const gpu_rope *r, uint32_t rows) {
  uint64_t first = (uint64_t)r->pos * r->dim;
  return r->table && r->dim >= 2 && r->dim % 2 == 0 && first <= UINT32_MAX &&
         gpu_slice_fits(r->table, (uint32_t)first, r->dim, rows, r->dim);
}

/* Enough invocations for a segment of n values, at most 256. */
static uint32_t group_size(uint32_t n) { return n > 512 ? 256 : n > 128 ? 128 : 64; }

static void record(gpu_rec *rec, const norm_push *p, gpu_buffer *const bufs[8], uint32_t segs,
                   uint32_t zs) {
  uint32_t wg = group_size(p->n);
  gpu_kernel *k = gpu_rec_kernel(rec, "norm", &wg, 1);
  gpu_dispatch(rec, k, bufs, 8, p, sizeof *p, gpu_row_groups(p->rows), segs, zs);
}

void gpu_layer_norm(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride,
                    const gpu_norm *n, gpu_buffer *y, uint32_t y_off, uint32_t y_stride,
                    uint32_t rows, uint32_t cols, const gpu_rope *rope, gpu_buffer *yr) {
  if (rows == 0) return;
  if (!x || !y || !n || !norm_ok(n, cols) || !gpu_slice_fits(x, x_off, x_stride, rows, cols) ||
      !gpu_slice_fits(y, y_off, y_stride, rows, cols) ||
      !same_or_apart(x, x_off, x_stride, y, y_off, y_stride, rows, cols)) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "layer_norm: bad shape (%u rows of %u, x at %u stride %u, y at %u "
                              "stride %u) or norm",
                              rows, cols, x_off, x_stride, y_off, y_stride));
    return;
  }
  if (rope && (!rope_ok(rope, rows) || cols % rope->dim || !yr || yr == y ||
               !gpu_slice_fits(yr, y_off, y_stride, rows, cols) ||
               !same_or_apart(x, x_off, x_stride, yr, y_off, y_stride, rows, cols))) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "layer_norm: bad rope (head dim %u for %u columns, %u rows from "
                              "position %u) or its output",
                              rope->dim, cols, rows, rope->pos));
    return;
  }
  gpu_device *d = gpu_rec_device(rec);
  if (!rope && gpu_fast_used(d, GPU_FAST_NORM)) {
    /* norm_fast.comp: plain LayerNorm, one subgroup per row. */
    struct {
      uint32_t rows, n;
      float eps;
      uint32_t x_off, x_stride, y_off, y_stride;
    } fp = {rows, cols, n->eps, x_off, x_stride, y_off, y_stride};
    gpu_buffer *fb[] = {x, n->g, n->b, y};
    gpu_kernel *k = gpu_rec_kernel(rec, "norm_fast", NULL, 0);
    gpu_dispatch(rec, k, fb, 4, &fp, sizeof fp, gpu_subgroup_row_groups(d, rows), 1, 1);
    return;
  }
  uint32_t hd = rope ? rope->dim : cols;
  norm_push p = {.rows = rows, .n = cols, .hd = hd, .rot = rope ? hd : 0,
                 .pos = rope ? rope->pos : 0, .flags = NORM | (rope ? WRITE_Y : 0),
                 .eps = n->eps, .x_stride = x_stride, .y_stride = y_stride,
                 .r_stride = y_stride, .y_off = y_off, .x_off = {x_off, x_off},
                 .r_off = {y_off, y_off}};
  gpu_buffer *bufs[8] = {x, n->g, n->b, n->g, n->b, rope ? rope->table : x, y, rope ? yr : y};
  record(rec, &p, bufs, 1, 1);
}

void gpu_qk_norm_rope(gpu_rec *rec, gpu_buffer *qkv, uint32_t q_off, uint32_t k_off,
                      uint32_t stride, uint32_t rows, uint32_t heads, uint32_t head_dim,
                      const gpu_norm *qn, const gpu_norm *kn, const gpu_rope *rope) {
  if (rows == 0) return;
  uint64_t width = (uint64_t)heads * head_dim;
  bool shape = qkv && head_dim && width && width <= UINT32_MAX && heads <= 65535 &&
               gpu_slice_fits(qkv, q_off, stride, rows, (uint32_t)width) &&
               gpu_slice_fits(qkv, k_off, stride, rows, (uint32_t)width) &&
               gpu_slices_apart(q_off, stride, (uint32_t)width, k_off, stride, (uint32_t)width,
                                rows);
  /* One eps for both: the kernel takes one. */
  bool norms = (!qn && !kn) || (qn && kn && norm_ok(qn, head_dim) && norm_ok(kn, head_dim) &&
                                qn->eps == kn->eps);
  if (!shape || !norms || (rope && (!rope_ok(rope, rows) || rope->dim > head_dim))) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID,
                              "qk_norm_rope: bad shape (%u rows of stride %u, q at %u, k at %u, "
                              "%u heads of %u, rope %u), norms or table",
                              rows, stride, q_off, k_off, heads, head_dim, rope ? rope->dim : 0));
    return;
  }
  if (!qn && !rope) return; /* nothing to do */
  norm_push p = {.rows = rows, .n = head_dim, .hd = head_dim, .rot = rope ? rope->dim : 0,
                 .pos = rope ? rope->pos : 0, .flags = qn ? NORM : 0,
                 .eps = qn ? qn->eps : 0.0f, .x_stride = stride, .y_stride = stride,
                 .r_stride = stride, .x_off = {q_off, k_off}, .r_off = {q_off, k_off}};
  gpu_buffer *bufs[8] = {qkv, qn ? qn->g : qkv, qn ? qn->b : qkv, kn ? kn->g : qkv,
                         kn ? kn->b : qkv, rope ? rope->table : qkv, qkv, qkv};
  record(rec, &p, bufs, heads, 2);
}
