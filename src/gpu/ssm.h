/* Mamba-2's kernels on the GPU (Nemotron-H's linear-attention layers) and the
 * RMSNorm it and its blocks use: RMSNorm plain or gated per group, the causal
 * depthwise conv1d with its state, and the selective scan with its state.
 * Rows are slices (buffer, off, stride) as in gpu/norm.h; offsets count floats. */
#ifndef STENO_GPU_SSM_H
#define STENO_GPU_SSM_H

#include "gpu/gpu.h"

/* y = w · v / sqrt(mean_group(v²) + eps) per group of `group` values of each of
 * `rows` rows of n, with v = x, or v = x · silu(z) when z is not NULL
 * (NemotronHRMSNorm; NemotronHRMSNormGated). y may be x (same slice). */
void gpu_rms_norm(gpu_rec *rec, gpu_buffer *x, uint32_t x_off, uint32_t x_stride, gpu_buffer *z,
                  uint32_t z_off, uint32_t z_stride, gpu_buffer *w, float eps, uint32_t group,
                  gpu_buffer *y, uint32_t y_off, uint32_t y_stride, uint32_t rows, uint32_t n);

/* A causal depthwise conv1d: ch channels, kernel k (2..8), weight [ch][k],
 * bias [ch], state [k−1][ch] (the previous k−1 input rows; fresh: zeros).
 * y row r = silu(conv of the state's rows and x's rows ≤ r); the state then
 * holds the last k−1 rows. */
typedef struct {
  gpu_buffer *w, *b, *state;
  uint32_t ch, k;
} gpu_conv_state;

void gpu_ssm_conv(gpu_rec *rec, const gpu_conv_state *c, bool fresh, gpu_buffer *x,
                  uint32_t x_off, uint32_t x_stride, gpu_buffer *y, uint32_t y_off,
                  uint32_t y_stride, uint32_t rows);

/* The selective scan of `heads` heads of P dims with N states each, B and C
 * shared by groups of heads: par holds A_log, D, dt_bias ([heads] each, in that
 * order), state [heads][P][N] (fresh: zeros). u's rows hold x [heads·P] at
 * column 0, B [groups·N] at b_col, C [groups·N] at c_col; dt's rows the raw dt
 * [heads]. dt_min: the prompt's clamp (time_step_min), 0 for a generated token
 * (see ssm_scan.comp). N ≤ 256. */
typedef struct {
  gpu_buffer *par, *state;
  uint32_t heads, P, N, groups;
} gpu_scan_state;

void gpu_ssm_scan(gpu_rec *rec, const gpu_scan_state *s, bool fresh, float dt_min, gpu_buffer *u,
                  uint32_t u_off, uint32_t u_stride, uint32_t b_col, uint32_t c_col,
                  gpu_buffer *dt, uint32_t dt_off, uint32_t dt_stride, gpu_buffer *y,
                  uint32_t y_off, uint32_t y_stride, uint32_t rows);

#endif
