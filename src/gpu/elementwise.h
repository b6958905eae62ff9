/* Row ops of the Moonshine families that no other kernel covers: the gated
 * MLP's SiLU(gate)·value, the conv stem's one-group GroupNorm (after a
 * tanh) and a row add. Row slices are (buffer, off, stride) as in norm.h. */
#ifndef STENO_GPU_ELEMENTWISE_H
#define STENO_GPU_ELEMENTWISE_H

#include "gpu/norm.h"

/* y[r][i] = x[r][i] · SiLU(x[r][n + i]) for i < n, r < rows: x's rows hold
 * [value n | gate n]. y may be x at the same offset and stride (in place);
 * other overlaps are refused. */
void gpu_swiglu(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride, gpu_buffer *y,
                uint32_t y_off, uint32_t y_stride, uint32_t rows, uint32_t n);

/* GroupNorm with one group over rows × cols of x (with tanh_first: of
 * tanh(x)): every value normalized by the mean and variance of all of them,
 * then y[r][c] = · n->g[c] + n->b[c]. One workgroup: for stems of up to a few
 * million values. y may be x (the same slice). */
void gpu_group_norm(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride,
                    const gpu_norm *n, gpu_buffer *y, uint32_t y_off, uint32_t y_stride,
                    uint32_t rows, uint32_t cols, bool tanh_first);

/* y[r][i] = a[r][i] + b[r][i] for i < n, r < rows (Streaming's adapter adds
 * its positions). y may be a or b at the same offset and stride. */
void gpu_add(gpu_rec *rec, gpu_buffer *a, uint32_t a_off, uint32_t a_stride, gpu_buffer *b,
             uint32_t b_off, uint32_t b_stride, gpu_buffer *y, uint32_t y_off, uint32_t y_stride,
             uint32_t rows, uint32_t n);

#endif
