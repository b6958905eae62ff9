/* The subsampling stems in front of a Conformer encoder: mel frames
 * [t][mels] → encoder input rows [t'][stride].
 *
 * dw_striding (NeMo's, Parakeet): conv 3×3/2 from 1 to C channels + ReLU, then
 * [depthwise 3×3/2 → pointwise → ReLU] twice, flatten (channel-major) and a
 * linear to d; 8× in time (gpu/subsample.h has the kernels). Weights are
 * transcribe.cpp's "enc.pre_encode.conv.{0,2,3,5,6}" and "enc.pre_encode.out". */
#ifndef STENO_NN_SUBSAMPLING_H
#define STENO_NN_SUBSAMPLING_H

#include "gpu/gpu.h"
#include "gpu/linear.h"
#include "io/gguf.h"

typedef struct {
  uint32_t channels, mels, d;
  gpu_buffer *w0, *b0, *w2, *b2, *w5, *b5; /* 3×3 convs: [9][C], [C] */
  gpu_linear pw3, pw6;                     /* pointwise convs (ReLU) */
  gpu_linear out;                          /* [d][C·F/8] */
} dw_subsampling;

/* Its intermediate images, sized for up to `frames` mel frames. */
typedef struct {
  uint32_t frames;
  gpu_buffer *a, *b, *c, *d, *flat;
} dw_subsampling_scratch;

int dw_subsampling_load(gpu_device *dev, const gguf_file *f, uint32_t channels, uint32_t mels,
                        uint32_t d, dw_subsampling *s);
void dw_subsampling_free(dw_subsampling *s);

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

#endif
