/* The subsampling stems in front of a Conformer encoder: mel frames
 * [t][mels] → encoder input rows [t'][stride].
 *
 * dw_striding (NeMo's, Parakeet): conv 3×3/2 from 1 to C channels + ReLU, then
 * [depthwise 3×3/2 → pointwise → ReLU] twice, flatten (channel-major) and a
 * linear to d; 8× in time (gpu/subsample.h has the kernels). Weights are
 * transcribe.cpp's "enc.pre_encode.conv.{0,2,3,5,6}" and "enc.pre_encode.out".
 *
 * conv1d (GigaAM v3): [Conv1d(kernel k, stride 2, padding (k − 1)/2) + ReLU]
 * twice, mels → d → d channels over time, 4× in time, no output linear; the
 * convs run as im2col + GEMM. Weights "enc.pre_encode.conv.{0,2}.{weight,bias}"
 * ([k, in, d] in ne order). */
#ifndef STENO_NN_SUBSAMPLING_H
#define STENO_NN_SUBSAMPLING_H

#include "gpu/gpu.h"
#include "gpu/linear.h"
#include "io/gguf.h"

typedef struct {
  uint32_t channels, mels, d;
  bool causal; /* NeMo's CausalConv2D (chunked_limited models): pad 2 before, 1 after */
  gpu_buffer *w0, *b0, *w2, *b2, *w5, *b5; /* 3×3 convs: [9][C], [C] */
  gpu_linear pw3, pw6;                     /* pointwise convs (ReLU) */
  gpu_linear out;                          /* [d][C·F/8] */
} dw_subsampling;

/* Its intermediate images, sized for up to `frames` mel frames (a batch:
 * `batch` clips of up to `frames` each, and their lengths at two stages). */
typedef struct {
  uint32_t frames, batch;
  gpu_buffer *a, *b, *c, *d, *flat;
  gpu_buffer *lens0, *lens4; /* batch: mel frames, rows after two convs */
} dw_subsampling_scratch;

int dw_subsampling_load(gpu_device *dev, const gguf_file *f, uint32_t channels, uint32_t mels,
                        uint32_t d, dw_subsampling *s);
void dw_subsampling_free(dw_subsampling *s);

/* The same with causal convs: a side of n becomes ⌊n/2⌋ + 1 (128 mels → 17). */
int dw_subsampling_load_causal(gpu_device *dev, const gguf_file *f, uint32_t channels,
                               uint32_t mels, uint32_t d, dw_subsampling *s);

/* Encoder frames after subsampling `valid` mel frames with s's padding. */
uint32_t dw_subsampling_out(const dw_subsampling *s, uint32_t valid);

/* Encoder frames after subsampling `valid` mel frames: ⌈⌈⌈valid/2⌉/2⌉/2⌉. */
uint32_t dw_subsampling_frames(uint32_t valid);

int dw_subsampling_scratch_new(gpu_device *dev, const dw_subsampling *s, uint32_t frames,
                               dw_subsampling_scratch *out);
void dw_subsampling_scratch_free(dw_subsampling_scratch *s);

/* Records mel [tm][mels] → x [dw_subsampling_frames(tm)][stride ≥ d]; the
 * output linear's result is multiplied by `scale` (NeMo's xscaling: √d), or
 * not when scale is 0. */
void dw_subsampling_forward(gpu_rec *rec, const dw_subsampling *s, dw_subsampling_scratch *sc,
                            gpu_buffer *mel, uint32_t tm, gpu_buffer *x, float scale);

/* A padded batch (non-causal stems): room for `batch` clips of up to
 * `frames` mel frames each. */
int dw_subsampling_scratch_new_batch(gpu_device *dev, const dw_subsampling *s, uint32_t frames,
                                     uint32_t batch, dw_subsampling_scratch *out);

/* The clips' own mel frames (1 ≤ valid[i] ≤ the pass's pitch) for the next
 * dw_subsampling_forward_batch. */
int dw_subsampling_set_lens(dw_subsampling_scratch *sc, const uint32_t *valid, uint32_t clips);

/* Records `clips` clips of mel [clips][pitch][mels] (clip i's first valid[i]
 * frames its own) → x [clips · dw_subsampling_frames(pitch)][stride], clip i
 * at rows i · dw_subsampling_frames(pitch) ..; each clip's own rows are what
 * dw_subsampling_forward gives for that clip alone (transformers' masked
 * subsampling: every conv's output zeroed past the clip's running length). */
void dw_subsampling_forward_batch(gpu_rec *rec, const dw_subsampling *s,
                                  dw_subsampling_scratch *sc, gpu_buffer *mel, uint32_t pitch,
                                  uint32_t clips, gpu_buffer *x, float scale);

typedef struct {
  uint32_t mels, d, kernel;
  gpu_linear conv0, conv2; /* over im2col's columns (channel·kernel + tap), ReLU */
} conv1d_subsampling;

typedef struct {
  uint32_t frames;
  gpu_buffer *col0, *h, *col1; /* columns of conv0, its output [t/2][stride], columns of conv2 */
} conv1d_subsampling_scratch;

int conv1d_subsampling_load(gpu_device *dev, const gguf_file *f, uint32_t mels, uint32_t d,
                            uint32_t kernel, conv1d_subsampling *s);
void conv1d_subsampling_free(conv1d_subsampling *s);

/* Encoder frames after `valid` mel frames: f(f(valid)), f(n) = ⌊(n − 1)/2⌋ + 1
 * (odd kernel, padding (k − 1)/2); 0 for 0. */
uint32_t conv1d_subsampling_frames(const conv1d_subsampling *s, uint32_t valid);

int conv1d_subsampling_scratch_new(gpu_device *dev, const conv1d_subsampling *s, uint32_t frames,
                                   conv1d_subsampling_scratch *out);
void conv1d_subsampling_scratch_free(conv1d_subsampling_scratch *s);

/* Records mel [tm][mels] → x [conv1d_subsampling_frames(tm)][d padded to 64]
 * (the Conformer scratch's stride). */
void conv1d_subsampling_forward(gpu_rec *rec, const conv1d_subsampling *s,
                                conv1d_subsampling_scratch *sc, gpu_buffer *mel, uint32_t tm,
                                gpu_buffer *x);

#endif
