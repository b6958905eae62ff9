/* One-token kernels for autoregressive decoders (Whisper, Moonshine): a
 * linear layer's single row, the token embedding, attention of one query over
 * an f16 K/V cache, and packing K/V into that cache. Offsets count floats (or
 * cache words), so each op reads and writes slices of wider buffers as is. */
#ifndef STENO_GPU_DECODE_H
#define STENO_GPU_DECODE_H

#include "gpu/linear.h"

/* c[c_off + j] = epilogue(a[a_off..+k) · W_jᵀ + b_j) for the layer's n (padded) outputs, and the
 * dual outputs at c[c_off + n + j], as gpu_gemm's one row; residual epilogues read c. */
void gpu_gemv(gpu_rec *rec, gpu_buffer *a, uint32_t a_off, const gpu_linear *l, gpu_buffer *c,
              uint32_t c_off, gpu_epi epi, float alpha);

/* c[c_off + i] = W[id][i] + pos[pos_off + i] + bias[i] for i < k: row `id` of the table `l`
 * (its [n][k] weight as n rows of k), a learned position row (pos NULL: none), the bias. */
void gpu_embed(gpu_rec *rec, const gpu_linear *l, uint32_t id, gpu_buffer *pos, uint32_t pos_off,
               gpu_buffer *c, uint32_t c_off);

/* gpu_embed of the token at ids[at] (a uint the GPU wrote: gpu_ts_greedy), an id past the
 * table taken as 0. */
void gpu_embed_from(gpu_rec *rec, const gpu_linear *l, gpu_buffer *ids, uint32_t at,
                    gpu_buffer *pos, uint32_t pos_off, gpu_buffer *c, uint32_t c_off);

/* Whisper's search rules for gpu_ts_greedy (decode/whisper.h's wsearch): `blocked` holds
 * 2·words words of bits, the ids suppressed at every step, then those suppressed at the
 * first; no_eot masks the end of text (the benchmarks' fixed token count). */
typedef struct {
  uint32_t vocab, eot, no_timestamps;
  int32_t max_initial; /* < 0: none */
  bool timestamps, no_eot;
  gpu_buffer *blocked;
  uint32_t words;
} gpu_ts_rules;

/* One greedy step on the GPU (ts_greedy.comp, two dispatches): the rules applied to
 * logits[0..vocab) with gen[0..n) the ids chosen so far, then gen[n] (uint) = the argmax
 * and lp[n] (f32) = its log-softmax, as wsearch_process, wsearch_choose (temperature 0)
 * and wsearch_logprob give them on the host, the two log Σ exp in f32. scratch holds
 * gpu_ts_greedy_scratch(vocab) words. */
void gpu_ts_greedy(gpu_rec *rec, gpu_buffer *logits, const gpu_ts_rules *r, gpu_buffer *gen,
                   gpu_buffer *lp, uint32_t n, gpu_buffer *scratch);
size_t gpu_ts_greedy_scratch(uint32_t vocab);

/* o[o_off..+heads·head_dim) = softmax(q·Kᵀ/√head_dim)·V per head for the query q[q_off..] (rounded
 * to f16) over keys 0..n−1 of the f16 cache kv: row j at word kv_off + j·heads·head_dim, K of all
 * heads (heads·head_dim/2 words) then V of all heads. head_dim even, ≤ 256. With `scratch` (of
 * gpu_attend_scratch floats) the keys are split over more workgroups; NULL: one per head. */
void gpu_attend(gpu_rec *rec, gpu_buffer *q, uint32_t q_off, gpu_buffer *kv, uint32_t kv_off,
                gpu_buffer *o, uint32_t o_off, uint32_t n, uint32_t heads, uint32_t head_dim,
                gpu_buffer *scratch);

/* Floats of scratch gpu_attend splits n keys with (n up to the cache's length). */
size_t gpu_attend_scratch(uint32_t n, uint32_t heads, uint32_t head_dim);

/* f32 pairs → f16 pairs (one word each, rounded to nearest even): y[dst + r·dst_stride + i] =
 * f16(x[s]) | f16(x[s + 1]) << 16, s = src + r·src_stride + 2i, for i < pairs, r < rows. */
void gpu_pack(gpu_rec *rec, gpu_buffer *x, uint32_t src, uint32_t src_stride, gpu_buffer *y,
              uint32_t dst, uint32_t dst_stride, uint32_t rows, uint32_t pairs);
/* The same with x clamped to ±65504 first (no infinities), as gemm_tc rounds its a. */
void gpu_pack_clamped(gpu_rec *rec, gpu_buffer *x, uint32_t src, uint32_t src_stride, gpu_buffer *y,
                      uint32_t dst, uint32_t dst_stride, uint32_t rows, uint32_t pairs);

#endif
