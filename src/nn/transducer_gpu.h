/* Greedy transducer decoding on the GPU (RNN-T and TDT): the search of
 * decode/transducer.c's transducer_greedy with the LSTM predictor, the joint
 * and each step's choice in kernels, so the weights stay on the device and
 * the host only looks, every few hundred steps, whether the search has
 * ended. Three ways to run it: "steps" (rnnt_joint, rnnt_lstm, rnnt_pred.comp:
 * ~4 dispatches per step, each product spread over many workgroups, a row
 * of them per clip of a batch), "grid" (rnnt_grid.comp: the same work, up to
 * 512 rounds of it in one dispatch whose workgroups meet at barriers over
 * the grid) and "persistent" (rnnt_search.comp: one workgroup per clip
 * looping over up to 512 steps per dispatch, a batch of clips at once). It
 * is an nn/ block, not gpu/, because it takes decode/'s transducer weights
 * and gives its token lists; the transducer families (Parakeet, GigaAM)
 * share it. */
#ifndef STENO_NN_TRANSDUCER_GPU_H
#define STENO_NN_TRANSDUCER_GPU_H

#include "decode/tokens.h"
#include "decode/transducer.h"
#include "gpu/gpu.h"

/* The weights (read-only once made: searches may share them) and one
 * search's state and recorder (one per thread). */
typedef struct gpu_transducer gpu_transducer;
typedef struct gpu_transducer_search gpu_transducer_search;

/* Which kernels search. AUTO: persistent for a batch of
 * GPU_SEARCH_AUTO_BATCH clips or more (one workgroup streams the weights
 * slower than the steps path's many: docs/perf.md), steps otherwise (grid
 * instead where GPU_SEARCH_AUTO_GRID and it passed its probe). The environment's
 * STENO_SEARCH=persistent|grid|steps|chunks sets a search's mode when it is
 * made (for A/B runs; chunks: steps in whole chunks, never in parts), and
 * STENO_SEARCH_GROUPS the grid's workgroups (128) when a decoder is made;
 * persistent and grid fall back to steps where the kernel does not fit the
 * device's limits or failed its probe, and a grid search whose workgroups
 * did not all run at once is searched again in steps. */
typedef enum { GPU_SEARCH_AUTO, GPU_SEARCH_STEPS, GPU_SEARCH_PERSISTENT, GPU_SEARCH_GRID } gpu_search_mode;
/* H200, random 0.6B TDT, 11 s clips, steps advancing every clip of a batch
 * each step (rnnt_lstm 4 clips a workgroup), search stage in steps against
 * persistent: 8 clips 15.7 against 52.1 ms, 16 clips 25.1 against 52.1, 64
 * clips 82.9 against 56.1 (docs/perf.md): steps grow ~1.2 ms a clip, the
 * persistent kernel (a workgroup per clip) stays near 52–56 ms. */
#define GPU_SEARCH_AUTO_BATCH 40
/* H200, random 0.6B TDT, 11 s clip, search stage, grid (128 workgroups)
 * against steps, same call (docs/perf.md, tenth session, 892afbf: the
 * barrier's counts read with plain loads): the plain file (1 029 rounds, a
 * token each) 38.1 / 38.0 against 39.2 / 39.8 ms, the speech-rate file 2.18 /
 * 2.08 against 2.68 / 2.51, the 10-minute file 858 against 879, batches of 4
 * and 8 clips 58.7 / 102.6 against 64.8 / 102.8: so the grid is the default
 * where its probe passes (cb47eda's grid, atomics at every barrier, had been
 * a few per cent either way). */
#define GPU_SEARCH_AUTO_GRID 1

/* Uploads m's weights (f32, packed in one buffer); STENO_ERR_INVALID for a
 * max_symbols that transducer_greedy refuses. *out stays NULL where the
 * shapes exceed the kernels' shared memory (hidden > 2048, joint > 4096) or
 * the weights one storage buffer: the CPU path decodes those. m must stay
 * while *out does: the first persistent search reads its matrices again
 * (their f16 copy). */
int gpu_transducer_new(gpu_device *dev, const transducer *m, gpu_transducer **out);
void gpu_transducer_free(gpu_transducer *g);

/* A search's buffers for g's shapes; g must outlive it. */
int gpu_transducer_search_new(const gpu_transducer *g, gpu_transducer_search **out);
void gpu_transducer_search_free(gpu_transducer_search *s);
void gpu_transducer_search_mode(gpu_transducer_search *s, gpu_search_mode mode);
/* Whether a model's calls search with s (NULL: none made, the host
 * searches): STENO_DECODER=cpu or gpu decides; by default a GPU searches,
 * but where the device is a CPU (lavapipe) the host does: the tiny RNN-T
 * fixture's search took 41–48 ms a call there on the device against 0.4 ms
 * on the host (docs/perf.md, sixteenth session). */
bool gpu_transducer_search_used(const gpu_transducer_search *s);
/* Whether the persistent kernel fits this decoder on its device and passed
 * its probe there (a search of 256 steps in one dispatch, run on the first
 * call, once per device in a process: lavapipe, which cuts long loops off,
 * fails it and searches in steps). */
bool gpu_transducer_persistent(const gpu_transducer *g);
/* Whether the persistent kernel reads the matrices in f16 (every value of
 * them exactly an f16, as an F16 file's are; the copy is made by the first
 * persistent search, so false before one). */
bool gpu_transducer_f16(const gpu_transducer *g);
/* For tests: the persistent kernel whether or not it passed its probe (only
 * where it fits), at most `budget` steps per dispatch; 0 undoes it. */
void gpu_transducer_search_force(gpu_transducer_search *s, uint32_t budget);
/* Whether rnnt_grid passed its probe on g's device with g's workgroups (a
 * search of 256 rounds in one dispatch, none of its barriers given up;
 * run on first use, once per device in a process; lavapipe, which cuts
 * long loops off, fails it). */
bool gpu_transducer_grid(const gpu_transducer *g);
/* For tests: steps searches in rnnt_grid dispatches of `groups` workgroups
 * whether or not it passed its probe, `rounds` per dispatch (0: 512), a
 * barrier's wait given up after `spins` atomic reads; groups 0 undoes it. */
void gpu_transducer_search_grid(gpu_transducer_search *s, uint32_t groups, uint32_t rounds, uint32_t spins);
/* Grid searches of s that gave up waiting and were searched again in steps. */
uint32_t gpu_transducer_search_aborts(const gpu_transducer_search *s);
/* Steps searches in parts (one submission each, stopped once one finished
 * says the search ended) or in whole chunks; the default is the recorder's:
 * parts on a discrete GPU (STENO_SPLIT overrides). */
void gpu_transducer_search_split(gpu_transducer_search *s, bool on);

/* transducer_greedy over `t` frames of enc [t][stride] on the device: the
 * same tokens, frames and durations; confidences summed in f32. Polls stop
 * before each chunk of steps (at most 512: well under a second). */
int gpu_transducer_greedy(gpu_transducer_search *s, gpu_buffer *enc, uint32_t t, uint32_t stride,
                          const transducer_abort *stop, dec_tokens *out);

/* One clip of a batch: its frames are enc rows first .. first + t − 1. */
typedef struct {
  uint32_t first, t;
} gpu_transducer_clip;

/* transducer_greedy over each of n clips of enc (rows of `stride`, clips
 * anywhere in it, e.g. [n][t_max] padded), the tokens of clip i appended to
 * out[i]: the same tokens as n separate searches. Persistent mode searches
 * all clips in one dispatch per chunk of steps; steps mode advances every
 * clip (up to 256 at once) in each step's dispatches.
 * Polls stop before each chunk. */
int gpu_transducer_search_batch(gpu_transducer_search *s, gpu_buffer *enc, uint32_t stride,
                                const gpu_transducer_clip *clips, int n, const transducer_abort *stop,
                                dec_tokens *out);

#endif
