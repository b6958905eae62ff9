/* The convolutions of NeMo's "dw_striding" subsampling (Parakeet, Canary):
 * conv 3×3/2 from 1 to ch channels + ReLU, then [depthwise 3×3/2 → pointwise
 * (a gpu_gemm) → ReLU] twice, then flatten into the output linear. Images are
 * [time][frequency][channel] f32; every 3×3 conv has stride 2 and padding 1,
 * so a side of n becomes gpu_halve(n). Weights are [9][ch], tap k = 3·dt + df
 * (dt over time, df over frequency): PyTorch's [ch][1][3][3] transposed.
 *
 * The first feature maps are too large to keep whole for long audio, so the
 * convs run in chunks of output rows: for rows t0..t0+rows of the second
 * depthwise conv, gpu_first_depthwise(…, t0, 2·rows + 1) makes the 2·rows + 1
 * rows of the first depthwise conv it needs into a chunk buffer, a pointwise
 * GEMM + ReLU maps that chunk, and gpu_depthwise(…, t0, rows) reads it. */
#ifndef STENO_GPU_SUBSAMPLE_H
#define STENO_GPU_SUBSAMPLE_H

#include "gpu/gpu.h"

/* The side after one 3×3 stride-2 padding-1 conv: ⌈n/2⌉. */
static inline uint32_t gpu_halve(uint32_t n) { return n / 2 + n % 2; }

/* The side after one causal conv (NeMo's CausalConv2D: 2 before, 1 after): ⌊n/2⌋ + 1. */
static inline uint32_t gpu_halve_causal(uint32_t n) { return n / 2 + 1; }

/* Depthwise 3×3/2 conv + bias (w [9][ch], b [ch]) of the image [t][f][ch] into output rows
 * t0..t0+rows of y [⌈t/2⌉][⌈f/2⌉][ch]. x holds the image's rows from 2·t0 − 1 on (at t0 = 0
 * its row 0 is padding, never read); x_stride (≥ ch) floats from one pixel of x to the next. */
void gpu_depthwise(gpu_rec *rec, gpu_buffer *x, uint32_t x_stride, gpu_buffer *w, gpu_buffer *b,
                   gpu_buffer *y, uint32_t t, uint32_t f, uint32_t ch, uint32_t t0, uint32_t rows);

/* The first conv (1 → ch, w0 [9][ch] + b0, ReLU) fused into the depthwise conv (w, b) after it,
 * over mel [t][f]; the ReLU image [⌈t/2⌉][⌈f/2⌉][ch] is never stored. y gets `rows` rows of
 * [⌈⌈f/2⌉/2⌉][ch]: the depthwise output rows 2·t0 − 1 on, zeros where past either end. */
void gpu_first_depthwise(gpu_rec *rec, gpu_buffer *mel, gpu_buffer *w0, gpu_buffer *b0,
                         gpu_buffer *w, gpu_buffer *b, gpu_buffer *y, uint32_t t, uint32_t f,
                         uint32_t ch, uint32_t t0, uint32_t rows);

/* The same two with NeMo's CausalConv2D padding (cache-aware streaming
 * models): 2 before and 1 after on both axes, so a side of n becomes
 * gpu_halve_causal(n), and the rows x and y hold start at 2·t0 − 2. */
void gpu_depthwise_causal(gpu_rec *rec, gpu_buffer *x, uint32_t x_stride, gpu_buffer *w,
                          gpu_buffer *b, gpu_buffer *y, uint32_t t, uint32_t f, uint32_t ch,
                          uint32_t t0, uint32_t rows);
void gpu_first_depthwise_causal(gpu_rec *rec, gpu_buffer *mel, gpu_buffer *w0, gpu_buffer *b0,
                                gpu_buffer *w, gpu_buffer *b, gpu_buffer *y, uint32_t t,
                                uint32_t f, uint32_t ch, uint32_t t0, uint32_t rows);

/* Several clips in one dispatch (transformers' padded batch): clip i's input
 * image starts x_clip floats after clip i − 1's and its output y_clip after;
 * the image has t rows of room (the longest clip's) and lens[i] ≤ t rows of
 * its own (uint32: mel frames for gpu_first_depthwise_batch, the input
 * image's rows for gpu_depthwise_batch). Output rows past a clip's own
 * ⌈lens[i]/2⌉ (first: ⌈⌈lens[i]/2⌉/2⌉) are written as 0: what the reference's
 * masked subsampling leaves there. Non-causal, from row 0 (t0 = 0). */
typedef struct {
  uint32_t batch;
  gpu_buffer *lens;
  uint32_t x_clip, y_clip;
} gpu_subsample_batch;

void gpu_depthwise_batch(gpu_rec *rec, gpu_buffer *x, uint32_t x_stride, gpu_buffer *w,
                         gpu_buffer *b, gpu_buffer *y, uint32_t t, uint32_t f, uint32_t ch,
                         uint32_t rows, const gpu_subsample_batch *bt);
void gpu_first_depthwise_batch(gpu_rec *rec, gpu_buffer *mel, gpu_buffer *w0, gpu_buffer *b0,
                               gpu_buffer *w, gpu_buffer *b, gpu_buffer *y, uint32_t t,
                               uint32_t f, uint32_t ch, uint32_t rows,
                               const gpu_subsample_batch *bt);

/* Whether the depthwise convs may take their CPU-device shape (4 channels an
 * invocation, vec4 reads; on by default, used on CPU devices only): off runs
 * the one-channel shape there too, for tests. */
void gpu_subsample_vec(bool on);

/* x [t][f][ch] (pixel stride x_stride ≥ ch) → y [t][ch·f], channel-major: y[r][c·f + j] =
 * x[r][j][c], as NeMo's x.transpose(1, 2).reshape(b, t, c·f). */
void gpu_flatten(gpu_rec *rec, gpu_buffer *x, uint32_t x_stride, gpu_buffer *y, uint32_t t,
                 uint32_t f, uint32_t ch);

#endif
