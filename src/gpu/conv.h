/* Convolutions over time on the GPU: im2col (a conv1d becomes a GEMM) and the
 * Conformer conv module's middle (GLU, depthwise conv, norm, SiLU). Row
 * slices are (buffer, off, stride) as in norm.h. */
#ifndef STENO_GPU_CONV_H
#define STENO_GPU_CONV_H

#include "gpu/gpu.h"
#include "gpu/norm.h"

/* A conv1d's shape along time. */
typedef struct {
  uint32_t kernel, stride, pad;
} gpu_conv1d;

/* Output rows of conv `c` over t rows: (t + 2·pad − kernel) / stride + 1, or 0. */
uint32_t gpu_conv1d_rows(gpu_conv1d c, uint32_t t);

/* col [t_out][width] = the conv's columns over x [t][ch]: col[i][c·kernel + k]
 * = x[i·stride + k − pad][c] (0 outside x), columns ch·kernel..width−1 = 0;
 * col is another buffer than x. */
void gpu_im2col(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride, gpu_buffer *col,
                uint32_t width, uint32_t t, uint32_t ch, gpu_conv1d c);

/* The norm after the depthwise conv: LayerNorm over channels, or a
 * per-channel affine x·g + b (BatchNorm folded at load; eps unused). */
typedef enum { GPU_CONV_LAYER_NORM = 0, GPU_CONV_AFFINE = 1 } gpu_conv_norm;

/* A depthwise conv1d: weight [ch][kernel] and bias [ch] (f32); odd kernel,
 * centred, or causal (kernel − 1 taps before the row, none after: the
 * cache-aware streaming models' conv_context [k − 1, 0]). */
typedef struct {
  gpu_buffer *w, *b;
  uint32_t kernel;
  bool causal;
} gpu_dwconv;

/* y [t][ch] = SiLU(norm(depthwise(GLU(h)))), h [t][2·ch] (value | gate);
 * y must not overlap h. */
void gpu_conv_glu(gpu_rec *rec, gpu_buffer *h, uint32_t h_off, uint32_t h_stride,
                  const gpu_dwconv *dw, const gpu_norm *n, gpu_conv_norm mode, gpu_buffer *y,
                  uint32_t y_off, uint32_t y_stride, uint32_t t, uint32_t ch);

/* The same over `batch` clips of seg rows each (rows clip·seg ..), clip i
 * holding lens[i] ≤ seg rows of its own (uint32) and padding after: each
 * row's conv reads only its own clip's rows, padding as 0 (transformers'
 * batched conv module zeroes padded frames before the depthwise conv). */
void gpu_conv_glu_batch(gpu_rec *rec, gpu_buffer *h, uint32_t h_off, uint32_t h_stride,
                        const gpu_dwconv *dw, const gpu_norm *n, gpu_conv_norm mode,
                        gpu_buffer *y, uint32_t y_off, uint32_t y_stride, uint32_t batch,
                        uint32_t seg, gpu_buffer *lens, uint32_t ch);

#endif
