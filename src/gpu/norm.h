/* Row normalizations on the GPU: LayerNorm (optionally with a RoPE-rotated
 * copy) and the per-head q/k LayerNorm + partial RoPE of packed q|k|v rows.
 *
 * A row slice is (buffer, off, stride): element (i, j) is float number
 * off + i·stride + j of the buffer, so an op can read or write some columns of
 * a wider row (a GEMM output of width n + dual) without a copy. */
#ifndef STENO_GPU_NORM_H
#define STENO_GPU_NORM_H

#include "gpu/gpu.h"

/* A LayerNorm's weight and bias ([n] f32 each) and epsilon. */
typedef struct {
  gpu_buffer *g, *b;
  float eps;
} gpu_norm;

/* A RoPE table: row p holds dim/2 cosines then dim/2 sines (f32) for
 * position p; the op's row i uses table row pos + i. */
typedef struct {
  gpu_buffer *table;
  uint32_t dim; /* rotated dims per head (the table's row stride) */
  uint32_t pos; /* position of the op's first row */
} gpu_rope;

/* y = (x − mean)/sqrt(var + eps)·g + b over `rows` rows of `cols`; with `rope`,
 * yr (same off and stride as y) gets y rotated per head of rope->dim dims. */
void gpu_layer_norm(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride,
                    const gpu_norm *n, gpu_buffer *y, uint32_t y_off, uint32_t y_stride,
                    uint32_t rows, uint32_t cols, const gpu_rope *rope, gpu_buffer *yr);

/* In place on `rows` packed rows of `stride` floats, q at q_off and k at k_off
 * (heads × head_dim each): per-head LayerNorm with qn / kn (both NULL: none),
 * then RoPE on the first rope->dim dims of each head (rope NULL: none). */
void gpu_qk_norm_rope(gpu_rec *rec, gpu_buffer *qkv, uint32_t q_off, uint32_t k_off,
                      uint32_t stride, uint32_t rows, uint32_t heads, uint32_t head_dim,
                      const gpu_norm *qn, const gpu_norm *kn, const gpu_rope *rope);

/* ---- row slices (shared by the row ops in norm.c and conv.c) ---- */

/* Whether `rows` rows of `cols` at (off, stride) lie inside `buf`, with
 * cols ≤ stride (or one row) and every index below 2^32. */
bool gpu_slice_fits(const gpu_buffer *buf, uint32_t off, uint32_t stride, uint32_t rows,
                    uint32_t cols);

/* Whether two slices of `rows` rows (cols a_cols and b_cols) of one buffer
 * share no element. */
bool gpu_slices_apart(uint32_t a_off, uint32_t a_stride, uint32_t a_cols, uint32_t b_off,
                      uint32_t b_stride, uint32_t b_cols, uint32_t rows);

/* Workgroups along x for `rows` rows: the kernels loop over the rest. */
static inline uint32_t gpu_row_groups(uint32_t rows) { return rows < 65535 ? rows : 65535; }

#endif
