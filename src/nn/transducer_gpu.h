/* Greedy transducer decoding on the GPU (RNN-T and TDT): the search of
 * decode/transducer.c's transducer_greedy with the LSTM predictor, the joint
 * and each step's choice in kernels (rnnt_joint, rnnt_lstm, rnnt_pred.comp), so the weights stay on the
 * device and the host only looks, every few hundred steps, whether the
 * search has ended. It is an nn/ block, not gpu/, because it takes decode/'s
 * transducer weights and gives its token lists; the transducer families
 * (Parakeet, GigaAM) share it. */
#ifndef STENO_NN_TRANSDUCER_GPU_H
#define STENO_NN_TRANSDUCER_GPU_H

#include "decode/tokens.h"
#include "decode/transducer.h"
#include "gpu/gpu.h"

/* The weights (read-only once made: searches may share them) and one
 * search's state and recorder (one per thread). */
typedef struct gpu_transducer gpu_transducer;
typedef struct gpu_transducer_search gpu_transducer_search;

/* Uploads m's weights (f32); STENO_ERR_INVALID for a max_symbols that
 * transducer_greedy refuses. *out stays NULL where the shapes
 * exceed the kernels' shared memory (hidden > 2048, joint > 4096): the CPU
 * path decodes those. */
int gpu_transducer_new(gpu_device *dev, const transducer *m, gpu_transducer **out);
void gpu_transducer_free(gpu_transducer *g);

/* A search's buffers for g's shapes; g must outlive it. */
int gpu_transducer_search_new(const gpu_transducer *g, gpu_transducer_search **out);
void gpu_transducer_search_free(gpu_transducer_search *s);

/* transducer_greedy over `t` frames of enc [t][stride] on the device: the
 * same tokens, frames and durations; confidences summed in f32. Polls stop
 * before each chunk of steps (at most 512: well under a second). */
int gpu_transducer_greedy(gpu_transducer_search *s, gpu_buffer *enc, uint32_t t, uint32_t stride,
                          const transducer_abort *stop, dec_tokens *out);

#endif
