/* Sortformer's streaming state on the CPU (NeMo's SortformerModules, the
 * synchronous streaming_update and _compress_spkcache; spec §4.5): the speaker
 * cache of pre-encode embeddings kept for each speaker, the FIFO of the latest
 * frames, the running mean of silent frames, and the predictions so far.
 * Embeddings are [frames][d] f32, predictions [frames][speakers]. */
#ifndef STENO_MODELS_SORTFORMER_STREAM_H
#define STENO_MODELS_SORTFORMER_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint32_t d, speakers;
  uint32_t chunk, cache, fifo, period; /* 80 ms frames: chunk_len, spkcache_len, fifo_len,
                                          spkcache_update_period */
  uint32_t lc, rc;                     /* chunk context, frames (NeMo: 1 and 1) */
} sf_stream_config;

typedef struct {
  sf_stream_config c;
  float *cache, *cache_p; /* [n_cache][d], [n_cache][speakers]; room for cache + pop */
  float *fifo, *fifo_p;   /* [n_fifo]…; room for fifo + chunk */
  uint32_t n_cache, n_fifo;
  float *sil;             /* [d]: mean embedding of the frames judged silent */
  uint64_t n_sil;
  bool compressed;        /* the cache has been compressed once */
  uint32_t compressions;
  float *out;             /* [n_out][speakers]: each chunk's predictions */
  size_t n_out, cap_out;
} sf_stream;

/* Checks c (the cache must hold (1 + 3) frames per speaker; chunk, period ≥ 1). */
int sf_stream_init(sf_stream *s, const sf_stream_config *c);
void sf_stream_free(sf_stream *s);

/* Frames the network sees at most: cache + fifo + lc + chunk + rc. */
uint32_t sf_stream_max_frames(const sf_stream_config *c);

/* One chunk: win [t_win][d] is the window's embeddings (lc frames of left
 * context, the chunk, rc of right context), preds [n_cache + n_fifo + t_win]
 * [speakers] the network's output over [cache | fifo | window]. */
int sf_stream_update(sf_stream *s, const float *win, uint32_t t_win, uint32_t lc, uint32_t rc,
                     const float *preds);

/* Keeps c.cache of the n > c.cache candidate frames emb [n][d], p [n][speakers]
 * (AOSC) into out_emb / out_p (c.cache rows each, apart from the inputs): the
 * frames each speaker speaks alone most surely, speaker by speaker in time
 * order; silent slots and picks no speaker needs get sil and zero predictions. */
int sf_compress(const sf_stream_config *c, const float *emb, const float *p, uint32_t n,
                const float *sil, float *out_emb, float *out_p);

#endif
