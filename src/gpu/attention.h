/* Softmax and multi-head attention on the GPU, the portable way: all scores
 * of all heads in a caller's scratch buffer (scores, softmax, values: three
 * dispatches). Plain scaled dot-product attention with an optional key mask,
 * and NeMo's relative-position attention (Transformer-XL, biases u and v).
 * The scratch is heads·t² f32, one buffer within the device's storage buffer
 * range: with the usual 4 GiB, t up to about 16000 frames for 4 heads, 11000
 * for 8. */
#ifndef STENO_GPU_ATTENTION_H
#define STENO_GPU_ATTENTION_H

#include "gpu/gpu.h"

/* Rows of f32 in a buffer: row r starts at float offset + r·stride. A slice
 * names one part of a wider row, e.g. k in a fused q|k|v projection. */
typedef struct {
  gpu_buffer *buf;
  uint32_t offset; /* floats before row 0: the column where the part starts */
  uint32_t stride; /* floats from one row to the next */
} gpu_attn_slice;

/* One attention call. Each of q, k, v, qv, o is [t][heads·head_dim] at its
 * slice; head h is columns h·head_dim .. (h+1)·head_dim − 1 of it. */
typedef struct {
  gpu_attn_slice q;    /* queries (q+u for relative attention) */
  gpu_attn_slice k, v; /* keys and values; rows of v must be finite, even masked ones */
  gpu_attn_slice o;    /* output (apart from q, k, v); only heads·head_dim columns are written */
  gpu_buffer *mask;    /* t uint32, 0 = key ignored; NULL: all keys count */
  gpu_buffer *scores;  /* scratch of gpu_attention_scratch(t, heads) floats */
  uint32_t t, heads, head_dim;
  float scale;         /* scores are scale·q·k; 0 means 1/√head_dim */
  /* Relative attention only (gpu_rel_attention), else zeros: */
  gpu_attn_slice qv;   /* q+v */
  gpu_attn_slice pos;  /* projected positions, 2t − 1 rows; row r is position t − 1 − r */
  /* Chunked attention (NeMo's chunked_limited), 0: none. Key j counts for
   * query i only when j/chunk is in [i/chunk − left_chunks, i/chunk]. */
  uint32_t chunk, left_chunks;
  /* A padded batch (portable kernels only), 0 or 1: one clip. Clip n is rows
   * n·t .. n·t + t − 1 of q, k, v, qv and o, of which the first lens[n] ≤ t
   * (lens: batch uint32) are its own; keys past them are ignored, query rows
   * past them get finite values that mean nothing; pos is shared (relative
   * position j − i within a clip), scores hold batch·heads·t² floats. */
  uint32_t batch;
  gpu_buffer *lens;
  /* flash_mm's subgroups a workgroup: 4 or 8 (the device-open probe runs
   * both); anything else, 0 by default, chosen by the grid. */
  uint32_t flash_subgroups;
} gpu_attn;

/* Floats of scores scratch an attention over t frames needs: heads·t², and
 * after them the tensor-core path's row partials, heads·t·⌈t/128⌉·2 (a
 * batch of n clips: n times this). */
size_t gpu_attention_scratch(uint32_t t, uint32_t heads);

/* The same on device d for plain attention (gpu_attention) over heads of
 * head_dim: 1 where flash attention (no scores) is used, as it is where its
 * probe passed and gpu_set_fast is on; relative and chunked attention need the full size. */
size_t gpu_attention_scratch_on(const gpu_device *d, uint32_t t, uint32_t heads,
                                uint32_t head_dim);

/* The kernels a call takes (chosen by gpu_attention and gpu_rel_attention
 * from the device's fast kernels and the call's shape): the portable three
 * (scores, softmax, values), flash.comp, flash_tc.comp, or the tensor-core
 * attention with hi + lo products: flash_mm.comp (one dispatch, no scores;
 * head sizes up to 64, no chunked mask) or scores and values as two products
 * with the softmax folded into them (attention_scores_tc, attention_values_tc;
 * the scratch must hold the row partials as well). */
typedef enum {
  GPU_ATTN_PORTABLE,
  GPU_ATTN_FLASH,
  GPU_ATTN_FLASH_TC,
  GPU_ATTN_MM,
  GPU_ATTN_FLASH_MM
} gpu_attn_path;
gpu_attn_path gpu_attention_path(const gpu_device *d, const gpu_attn *a, bool relative);

/* y[r] = softmax(scale · x[r]) over `cols` values of `rows` rows, the row's
 * max subtracted first; y may be x (the same slice: in place). */
void gpu_softmax(gpu_rec *rec, gpu_attn_slice x, gpu_attn_slice y, uint32_t rows, uint32_t cols,
                 float scale);

/* o_i = Σ_j softmax_j(scale · q_i·k_j) · v_j per head, over the keys the
 * mask keeps; a query whose keys are all masked gets o_i = 0. */
void gpu_attention(gpu_rec *rec, const gpu_attn *a);

/* As gpu_attention with score(i, j) = scale · ((q+u)_i·k_j + (q+v)_i·pos[j − i + t − 1])
 * (NeMo's RelPositionMultiHeadAttention); a->q is q+u, a->qv is q+v. */
void gpu_rel_attention(gpu_rec *rec, const gpu_attn *a);

/* flash_tc (flash attention on the tensor cores, where its probe passed)
 * with `kb` keys per block (16 or 32) and flash_tc.comp's SKIP bits (parts
 * left out): bench/attention_speed's experiments, wrong results for skip ≠ 0.
 * gpu_attention and gpu_rel_attention choose their path themselves. */
void gpu_flash_tc_experiment(gpu_rec *rec, const gpu_attn *a, bool relative, uint32_t kb,
                             uint32_t skip);

/* The tensor-core attention's precision (the two products' and flash_mm's)
 * for later recordings, in this process: 3 (the default: scores and values
 * each as hi + lo f16 products), 2 (hi + lo scores, f16 probabilities and
 * values) or 1 (f16 alone): bench/attention_speed's experiments and
 * test_attention. */
void gpu_attention_mm_precision(uint32_t level);
uint32_t gpu_attention_mm_precision_now(void);
/* Whether the tensor-core attention may take flash_mm for later recordings,
 * in this process (on by default; off: the two products), for benchmarks and
 * tests. */
void gpu_attention_mm_flash(bool on);
/* flash_mm's shapes for later recordings, in this process, for benchmarks
 * and tests: their count, and shape i chosen (0, the default: 8 subgroups of
 * 16 queries, or 4 where 8 would make few workgroups, the next key block
 * loaded ahead); returns its name. */
uint32_t gpu_attention_mm_flash_shapes(void);
const char *gpu_attention_mm_flash_shape(uint32_t shape);
/* The tensor-core attention's tiles for later recordings, in this process:
 * attention_scores_tc's and attention_values_tc's, each from 0 (the default)
 * to its count − 1, for benchmarks and tests. */
void gpu_attention_mm_tile(uint32_t scores, uint32_t values);
/* The pairs of tiles a benchmark or test walks: pair 0 the defaults, then
 * each other scores tile with the default values tile, then each other
 * values tile with the default scores tile; pair i's into *scores, *values. */
uint32_t gpu_attention_mm_tile_pairs(void);
void gpu_attention_mm_tile_pair(uint32_t i, uint32_t *scores, uint32_t *values);

#endif
