/* Parakeet's cache-aware streaming (Nemotron ASR Streaming; spec 1.8, the
 * transformers NemotronAsrStreaming reference): pcm in any cut → log-mel
 * frames as soon as their window is complete → chunks of 1 + 8R mel frames,
 * then 8(R + 1) with pre_encode_cache_size frames of history → the causal
 * pre_encode (its first drop_extra_pre_encoded frames dropped after the first
 * chunk) → R + 1 new encoder frames through the blocks with their caches →
 * the prompt and the joint's projection → RNN-T greedy carried across chunks.
 * At the end the last chunk is padded with zero mel frames, as transformers'
 * streaming generate requires. Tokens once decoded never change. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/gqa.h"
#include "models/parakeet/parakeet.h"
#include "nn/conformer_stream.h"

struct parakeet_stream {
  parakeet_session *s;
  const parakeet *m;
  transducer_abort stop;
  /* Geometry: encoder frames per chunk, past frames kept, mel frames of the
   * first and later chunks, history and dropped frames of the later ones. */
  uint32_t n, past, first, later, history, drop;
  /* Audio [pcm_base, pcm_base + pcm_n) and mel frames [mel_base, mel_base + mel_n). */
  float *pcm, *mel;
  size_t pcm_n, pcm_cap, mel_n, mel_cap;
  int64_t pcm_base, mel_base, samples;
  int64_t next; /* first mel frame of the next chunk's new ones */
  uint32_t chunks, hist;
  /* GPU */
  gpu_buffer *mel_buf, *sub_out, *head, *hidden, *out;
  dw_subsampling_scratch sub;
  conformer_scratch enc;
  conformer_cache *caches;
  float *rows; /* host rows: [n][stride] and the head's [n][width] */
  transducer_stream *dec;
  dec_tokens toks;
};

/* Whether the model streams natively, and its chunk geometry. */
static int geometry(const parakeet *m, parakeet_stream *st) {
  const parakeet_streaming *g = &m->c.stream;
  if (!g->on) return err_set(STENO_ERR_UNSUPPORTED, "parakeet: not a cache-aware streaming model");
  if (m->c.head != HEAD_RNNT)
    return err_set(STENO_ERR_UNSUPPORTED, "parakeet: cache-aware streaming runs RNN-T heads only");
  if (m->mel.c.normalize)
    return err_set(STENO_ERR_UNSUPPORTED, "parakeet: streaming needs unnormalized features");
  st->n = (uint32_t)g->right + 1;
  st->past = m->c.dims.left_chunks * st->n;
  st->first = (uint32_t)g->first + 8 * (uint32_t)g->right;
  st->later = 8 * st->n;
  st->history = (uint32_t)g->pre_cache;
  st->drop = (uint32_t)g->drop;
  /* The chunks must give R + 1 frames each and the past whole chunks (so the
   * window needs no mask), as the published models' [70|56, 13] and 9/2/1 do. */
  if ((uint32_t)g->left != st->past || dw_subsampling_out(&m->sub, st->first) != st->n ||
      dw_subsampling_out(&m->sub, st->history + st->later) != st->n + st->drop ||
      st->history > st->first)
    return err_set(STENO_ERR_UNSUPPORTED,
                   "parakeet: streaming geometry [%d, %d] with pre_encode cache %u, drop %u, "
                   "first %d is not one steno streams",
                   g->left, g->right, st->history, st->drop, g->first);
  return 0;
}

static int gpu_state(parakeet_stream *st) {
  const parakeet *m = st->m;
  gpu_device *dev = m->dev;
  uint32_t rows = st->past + st->n, mels = st->history + st->later, f = sizeof(float);
  if (st->first > mels) mels = st->first;
  TRY(gpu_buffer_new(dev, (size_t)mels * m->c.mels * f, &st->mel_buf));
  TRY(dw_subsampling_scratch_new(dev, &m->sub, mels, &st->sub));
  TRY(conformer_scratch_new(dev, &m->c.dims, rows, &st->enc));
  uint32_t S = st->enc.stride;
  TRY(gpu_buffer_new(dev, (size_t)(st->n + st->drop) * S * f, &st->sub_out));
  TRY(gpu_buffer_new(dev, (size_t)rows * gpu_linear_width(&m->head) * f, &st->head));
  if (m->prompt.n) {
    TRY(gpu_buffer_new(dev, (size_t)rows * gpu_linear_width(&m->prompt.in) * f, &st->hidden));
    TRY(gpu_buffer_new(dev, (size_t)rows * gpu_linear_width(&m->prompt.out) * f, &st->out));
  }
  if (!(st->caches = mem_alloc(m->c.layers, sizeof *st->caches))) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i < m->c.layers; i++)
    TRY(conformer_cache_new(dev, &m->c.dims, st->past, st->n, &st->caches[i]));
  size_t width = gpu_linear_width(&m->head);
  st->rows = mem_alloc((size_t)rows * (S > width ? S : width), sizeof *st->rows);
  if (!st->rows) return STENO_ERR_NOMEM;
  /* The window's scratch rows start finite (nothing reads them, but no NaN either). */
  TRY(gpu_upload(st->enc.x, 0, st->rows, (size_t)rows * S * f));
  return gpu_upload(st->enc.h, 0, st->rows, (size_t)rows * S * f);
}

void parakeet_stream_end(parakeet_session *s) {
  parakeet_stream *st = s->stream;
  if (!st) return;
  gpu_buffer *b[] = {st->mel_buf, st->sub_out, st->head, st->hidden, st->out};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) gpu_buffer_free(b[i]);
  dw_subsampling_scratch_free(&st->sub);
  conformer_scratch_free(&st->enc);
  for (uint32_t i = 0; st->caches && i < st->m->c.layers; i++) conformer_cache_free(&st->caches[i]);
  free(st->caches);
  transducer_stream_free(st->dec);
  dec_free(&st->toks);
  free(st->rows), free(st->pcm), free(st->mel);
  free(st);
  s->stream = NULL;
}

int parakeet_stream_begin(parakeet_session *s, const transducer_abort *stop) {
  parakeet_stream_end(s);
  parakeet_stream *st = mem_alloc(1, sizeof *st);
  if (!st) return STENO_ERR_NOMEM;
  st->s = s, st->m = s->m;
  if (stop) st->stop = *stop;
  s->stream = st;
  int rc = geometry(s->m, st);
  if (!rc) rc = parakeet_session_prompt(s);
  if (!rc) rc = gpu_state(st);
  if (!rc) rc = transducer_stream_new(&s->m->dec, &st->dec);
  if (rc) parakeet_stream_end(s);
  return rc;
}

/* Grows a float array to hold `need` (amortized). */
static int reserve(float **a, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 4096;
  while (n < need) n *= 2;
  float *p = realloc(*a, n * sizeof *p);
  if (!p) return err_set(STENO_ERR_NOMEM, "parakeet stream: %zu floats", n);
  *a = p, *cap = n;
  return 0;
}

/* Log-mel frames [mel_base + mel_n, end) from the audio kept: computed on a
 * stretch that starts two frames early, so each frame's samples and their
 * pre-emphasis are those of the whole recording (zeros past its end, as offline). */
static int mel_upto(parakeet_stream *st, int64_t end) {
  const parakeet *m = st->m;
  int64_t t0 = st->mel_base + (int64_t)st->mel_n, hop = m->mel.c.hop;
  if (end <= t0) return 0;
  int64_t from = t0 >= 2 ? (t0 - 2) * hop : 0, skip = t0 - from / hop;
  size_t len = (size_t)(st->pcm_base + (int64_t)st->pcm_n - from), F = m->c.mels;
  if (from < st->pcm_base) return err_set(STENO_ERR_INVALID, "parakeet stream: audio dropped too early");
  float *mel;
  size_t frames, valid;
  TRY(parakeet_features(m, st->pcm + (from - st->pcm_base), len, &mel, &frames, &valid));
  size_t count = (size_t)(end - t0);
  int rc = (size_t)skip + count <= frames ? reserve(&st->mel, &st->mel_cap, (st->mel_n + count) * F)
                                          : err_set(STENO_ERR_INVALID, "parakeet stream: mel frames");
  if (!rc) memcpy(st->mel + st->mel_n * F, mel + (size_t)skip * F, count * F * sizeof *mel);
  if (!rc) st->mel_n += count;
  free(mel);
  /* Keep the audio the next frame needs: from two frames before it. */
  int64_t keep = (end >= 2 ? (end - 2) * hop : 0) - st->pcm_base;
  if (!rc && keep > 0 && (size_t)keep <= st->pcm_n) {
    memmove(st->pcm, st->pcm + keep, (st->pcm_n - (size_t)keep) * sizeof *st->pcm);
    st->pcm_n -= (size_t)keep, st->pcm_base += keep;
  }
  return rc;
}

/* One chunk in one submission: `frames` mel frames (history first) → the
 * causal pre_encode, its new rows (after `drop`) into the window → the blocks
 * with their caches (slid for the next chunk) → the prompt and the joint's
 * projection; then the n new frames are decoded. */
static int chunk(parakeet_stream *st, const float *mel, uint32_t frames) {
  const parakeet *m = st->m;
  parakeet_session *s = st->s;
  uint32_t S = st->enc.stride, d = m->c.dims.d, drop = st->chunks ? st->drop : 0;
  uint32_t width = gpu_linear_width(&m->head);
  TRY(gpu_upload(st->mel_buf, 0, mel, (size_t)frames * m->c.mels * sizeof *mel));
  TRY(conformer_positions(&m->c.dims, st->hist + st->n, &st->enc));
  TRY(gpu_rec_begin(s->rec));
  float scale = m->c.xscaling ? sqrtf((float)d) : 0;
  dw_subsampling_forward(s->rec, &m->sub, &st->sub, st->mel_buf, frames, st->sub_out, scale);
  gpu_copy_rows(s->rec, st->sub_out, drop * S, S, st->enc.x, st->past * S, S, st->n, S);
  for (uint32_t i = 0; i < m->c.layers; i++) {
    conformer_forward_cached(s->rec, &m->c.dims, &m->blocks[i], &st->enc, &st->caches[i], st->hist);
    conformer_cache_slide(s->rec, &st->caches[i], S);
  }
  parakeet_record_head(s, st->enc.x, S, st->past + st->n, st->hidden, st->out, st->head);
  TRY(gpu_rec_run(s->rec));
  TRY(gpu_download(st->head, (size_t)st->past * width * sizeof(float), st->rows,
                   (size_t)st->n * width * sizeof(float)));
  st->hist = st->hist + st->n < st->past ? st->hist + st->n : st->past;
  st->chunks++;
  return transducer_stream_feed(st->dec, st->rows, (int)st->n, (int)width, &st->stop, &st->toks);
}

/* The next chunk from the kept mel frames (zero frames after `avail`, the
 * padding of the last one), then the frames no later chunk reads dropped. */
static int next_chunk(parakeet_stream *st, int64_t avail) {
  size_t F = st->m->c.mels;
  bool first = st->chunks == 0;
  uint32_t frames = first ? st->first : st->history + st->later;
  int64_t from = first ? 0 : st->next - st->history, end = from + frames;
  TRY(reserve(&st->mel, &st->mel_cap, (size_t)(end - st->mel_base) * F));
  int64_t have = st->mel_base + (int64_t)st->mel_n;
  if (avail > have) avail = have;
  if (avail < end) memset(st->mel + (size_t)(avail - st->mel_base) * F, 0, (size_t)(end - avail) * F * sizeof *st->mel);
  TRY(chunk(st, st->mel + (size_t)(from - st->mel_base) * F, frames));
  st->next = end;
  /* The next chunk's history starts `history` frames before its new ones. */
  int64_t keep = end - st->history - st->mel_base;
  if (keep > 0 && (size_t)keep <= st->mel_n) {
    memmove(st->mel, st->mel + (size_t)keep * F, (st->mel_n - (size_t)keep) * F * sizeof *st->mel);
    st->mel_n -= (size_t)keep, st->mel_base += keep;
  }
  return 0;
}

int parakeet_stream_feed(parakeet_session *s, const float *pcm, size_t n) {
  parakeet_stream *st = s->stream;
  if (!st) return err_set(STENO_ERR_INVALID, "parakeet: no stream open");
  TRY(reserve(&st->pcm, &st->pcm_cap, st->pcm_n + n));
  memcpy(st->pcm + st->pcm_n, pcm, n * sizeof *pcm);
  st->pcm_n += n, st->samples += (int64_t)n;
  /* Frame t is final once its FFT frame (t·hop ± n_fft/2) has arrived. */
  int64_t hop = st->m->mel.c.hop, half = st->m->mel.c.n_fft / 2;
  int64_t ready = st->samples >= half ? (st->samples - half) / hop + 1 : 0;
  TRY(mel_upto(st, ready));
  for (;;) {
    int64_t need = st->chunks ? st->next + st->later : st->first;
    if (ready < need) return 0;
    TRY(next_chunk(st, need));
  }
}

/* Seconds and frame length of the audio fed. */
static double seconds(const parakeet_stream *st) {
  return (double)st->samples / st->m->mel.c.sample_rate;
}

static double ms_per_frame(const parakeet *m) {
  return 1000.0 * 8 * m->mel.c.hop / m->mel.c.sample_rate;
}

int parakeet_stream_result(parakeet_session *s, steno_result **out) {
  parakeet_stream *st = s->stream;
  *out = NULL;
  if (!st) return err_set(STENO_ERR_INVALID, "parakeet: no stream open");
  return result_from_tokens(&st->m->vocab, &st->toks, ms_per_frame(st->m), 0, seconds(st), out);
}

int parakeet_stream_finish(parakeet_session *s, steno_result **out) {
  parakeet_stream *st = s->stream;
  *out = NULL;
  if (!st) return err_set(STENO_ERR_INVALID, "parakeet: no stream open");
  /* The recording's valid frames, as offline: ⌊n/hop⌋, zeros past its end. */
  int64_t valid = st->samples / st->m->mel.c.hop;
  TRY(mel_upto(st, valid));
  while (st->chunks == 0 ? valid > 0 : st->next < valid) TRY(next_chunk(st, valid));
  return parakeet_stream_result(s, out);
}

const dec_tokens *parakeet_stream_tokens(const parakeet_session *s) {
  return s->stream ? &s->stream->toks : NULL;
}
