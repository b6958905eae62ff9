/* Sortformer: features, the network per chunk (GPU, with the head on the CPU),
 * the streaming run over a whole recording, and speaker turns. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/timer.h"
#include "models/sortformer/sortformer.h"
#include "text/result.h"

#define SUB 8 /* mel frames per diarization frame */

int sortformer_features(const sortformer *m, const float *pcm, size_t n, float **mel,
                        size_t *frames) {
  *mel = NULL;
  *frames = 0;
  size_t all = mel_frames(&m->mel, n), valid;
  float *x = mem_alloc(all, (size_t)m->c.mels * sizeof *x);
  if (!x) return STENO_ERR_NOMEM;
  int st = mel_compute(&m->mel, pcm, n, x, &valid);
  if (st) {
    free(x);
    return st;
  }
  /* ceil(n/hop) frames (spec §4.3): the zeroed last frame only when n is not a multiple of hop. */
  *frames = n / (size_t)m->mel.c.hop + (n % (size_t)m->mel.c.hop != 0);
  *mel = x;
  return 0;
}

/* Grows the arena to windows of mel_frames and concatenations of frames. */
static int arena_fit(sortformer_session *s, uint32_t mel_frames, uint32_t frames) {
  sortformer_arena *a = &s->arena;
  const sortformer *m = s->m;
  gpu_device *dev = m->dev;
  size_t f = sizeof(float);
  if (mel_frames > a->mel_frames) {
    gpu_buffer_free(a->mel), gpu_buffer_free(a->emb);
    dw_subsampling_scratch_free(&a->sub);
    a->mel = a->emb = NULL;
    a->mel_frames = 0;
    size_t t = dw_subsampling_frames(mel_frames), w = gpu_linear_width(&m->sub.out);
    TRY(gpu_buffer_new(dev, (size_t)mel_frames * m->c.mels * f, &a->mel));
    TRY(gpu_buffer_new(dev, t * w * f, &a->emb));
    TRY(dw_subsampling_scratch_new(dev, &m->sub, mel_frames, &a->sub));
    a->mel_frames = mel_frames;
  }
  if (frames > a->frames) {
    conformer_scratch_free(&a->enc);
    postln_scratch_free(&a->tf);
    a->frames = 0;
    TRY(conformer_scratch_new(dev, &m->c.dims, frames, &a->enc));
    TRY(postln_scratch_new(dev, &m->c.tf, frames, &a->tf));
    a->frames = frames;
  }
  return 0;
}

/* n rows of d floats from a buffer whose rows are stride apart. */
static int download_rows(gpu_buffer *b, uint32_t n, uint32_t d, uint32_t stride, float **out) {
  float *rows = mem_alloc((size_t)n * stride, sizeof *rows), *x = mem_alloc((size_t)n * d, sizeof *x);
  int st = rows && x ? gpu_download(b, 0, rows, (size_t)n * stride * sizeof *rows) : STENO_ERR_NOMEM;
  for (uint32_t r = 0; !st && r < n; r++)
    memcpy(x + (size_t)r * d, rows + (size_t)r * stride, d * sizeof *x);
  free(rows);
  if (st) free(x);
  *out = st ? NULL : x;
  return st;
}

int sortformer_embed(sortformer_session *s, const float *mel, uint32_t tm, float **emb,
                     uint32_t *t) {
  *emb = NULL;
  *t = 0;
  const sortformer *m = s->m;
  if (tm < 1) return err_set(STENO_ERR_INVALID, "sortformer: an empty mel window");
  TRY(arena_fit(s, tm, 0));
  sortformer_arena *a = &s->arena;
  TRY(gpu_upload(a->mel, 0, mel, (size_t)tm * m->c.mels * sizeof *mel));
  TRY(gpu_rec_begin(s->rec));
  dw_subsampling_forward(s->rec, &m->sub, &a->sub, a->mel, tm, a->emb, 0);
  TRY(gpu_rec_run(s->rec));
  uint32_t n = dw_subsampling_frames(tm);
  TRY(download_rows(a->emb, n, m->c.dims.d, gpu_linear_width(&m->sub.out), emb));
  *t = n;
  return 0;
}

/* forward_speaker_sigmoids on the host (4 outputs from d: too small for the GPU
 * to pay): p = σ(W2·ReLU(W1·ReLU(x) + b1) + b2). */
static int head(const sortformer *m, const float *x, uint32_t t, float *p) {
  uint32_t D = m->c.tf.d, K = m->c.speakers;
  float *r = mem_alloc(2 * (size_t)D, sizeof *r), *h = r + D;
  if (!r) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i < t; i++) {
    for (uint32_t j = 0; j < D; j++) r[j] = fmaxf(x[(size_t)i * D + j], 0);
    for (uint32_t o = 0; o < D; o++) {
      float acc = m->fc1_b[o];
      for (uint32_t j = 0; j < D; j++) acc += m->fc1_w[(size_t)o * D + j] * r[j];
      h[o] = fmaxf(acc, 0);
    }
    for (uint32_t k = 0; k < K; k++) {
      float acc = m->head_b[k];
      for (uint32_t j = 0; j < D; j++) acc += m->head_w[(size_t)k * D + j] * h[j];
      p[(size_t)i * K + k] = 1.0f / (1.0f + expf(-acc));
    }
  }
  free(r);
  return 0;
}

/* Uploads x [t][d] · √d (NeMo's xscaling, applied to the concatenation) into enc.x. */
static int upload_scaled(sortformer_session *s, const float *x, uint32_t t) {
  const sortformer *m = s->m;
  uint32_t d = m->c.dims.d, S = s->arena.enc.stride;
  float scale = sqrtf((float)d), *rows = mem_alloc((size_t)t * S, sizeof *rows);
  if (!rows) return STENO_ERR_NOMEM;
  for (uint32_t r = 0; r < t; r++)
    for (uint32_t j = 0; j < d; j++) rows[(size_t)r * S + j] = x[(size_t)r * d + j] * scale;
  int st = gpu_upload(s->arena.enc.x, 0, rows, (size_t)t * S * sizeof *rows);
  free(rows);
  return st;
}

int sortformer_infer(sortformer_session *s, const float *x, uint32_t t, float **enc, float **preds) {
  if (enc) *enc = NULL;
  *preds = NULL;
  const sortformer *m = s->m;
  if (t < 1) return err_set(STENO_ERR_INVALID, "sortformer: no frames to infer");
  TRY(arena_fit(s, 0, t));
  sortformer_arena *a = &s->arena;
  TRY(upload_scaled(s, x, t));
  TRY(conformer_positions_kept(&m->c.dims, t, &a->enc));
  TRY(gpu_rec_begin(s->rec));
  TRY(conformer_project_positions(s->rec, &m->c.dims, m->blocks, m->c.layers, &a->enc, t));
  TRY(conformer_forward(s->rec, &m->c.dims, m->blocks, m->c.layers, &a->enc, t));
  gpu_gemm_strided(s->rec, a->enc.x, a->enc.stride, &m->proj, a->tf.x, t, GPU_EPI_BIAS, 0);
  for (uint32_t i = 0; i < m->c.tf_layers; i++) postln_forward(s->rec, &m->c.tf, &m->tf[i], &a->tf, t);
  TRY(gpu_rec_run(s->rec));
  conformer_keep_positions(&a->enc);
  float *y = NULL, *e = NULL, *p = mem_alloc((size_t)t * m->c.speakers, sizeof *p);
  int st = p ? download_rows(a->tf.x, t, m->c.tf.d, a->tf.stride, &y) : STENO_ERR_NOMEM;
  if (!st && enc) st = download_rows(a->enc.x, t, m->c.dims.d, a->enc.stride, &e);
  if (!st) st = head(m, y, t, p);
  free(y);
  if (st) {
    free(p);
    return st;
  }
  if (enc) *enc = e;
  *preds = p;
  return 0;
}

/* The mel window of one chunk (NeMo's streaming_feat_loader). */
typedef struct {
  uint32_t lo, hi; /* mel frames [lo, hi) */
  uint32_t lc, rc; /* context in diarization frames */
  uint32_t end;    /* the chunk's last mel frame + 1 */
} sf_window;

static sf_window window_at(const sf_stream_config *c, uint32_t start, uint32_t frames) {
  uint32_t left = c->lc * SUB < start ? c->lc * SUB : start;
  uint32_t end = start + c->chunk * SUB < frames ? start + c->chunk * SUB : frames;
  uint32_t right = c->rc * SUB < frames - end ? c->rc * SUB : frames - end;
  /* left is whole frames; a short right context at the end rounds up */
  return (sf_window){start - left, end + right, (left + SUB / 2) / SUB, (right + SUB - 1) / SUB, end};
}

/* [cache | fifo | win] into one [t][d] array. */
static float *concat(const sf_stream *st, const float *win, uint32_t t_win, uint32_t *t) {
  size_t d = st->c.d;
  *t = st->n_cache + st->n_fifo + t_win;
  float *x = mem_alloc(*t, d * sizeof *x);
  if (!x) return NULL;
  memcpy(x, st->cache, st->n_cache * d * sizeof *x);
  memcpy(x + st->n_cache * d, st->fifo, st->n_fifo * d * sizeof *x);
  memcpy(x + (st->n_cache + st->n_fifo) * d, win, t_win * d * sizeof *x);
  return x;
}

/* One chunk: embed its window, run the network over the concatenation, update. */
static int stream_chunk(sortformer_session *s, sf_stream *st, const float *mel, sf_window w,
                        uint32_t index, const sortformer_watch *watch) {
  uint32_t F = s->m->c.mels, t_win, t_cat;
  float *emb, *x, *enc = NULL, *p = NULL;
  TRY(sortformer_embed(s, mel + (size_t)w.lo * F, w.hi - w.lo, &emb, &t_win));
  int e = STENO_ERR_NOMEM, rc = (x = concat(st, emb, t_win, &t_cat)) ? 0 : e;
  if (!rc) rc = sortformer_infer(s, x, t_cat, watch && watch->chunk ? &enc : NULL, &p);
  if (!rc && watch && watch->chunk)
    watch->chunk(watch->user, index, st, emb, t_win, w.lc, w.rc, enc, p, t_cat);
  if (!rc) rc = sf_stream_update(st, emb, t_win, w.lc, w.rc, p);
  free(emb), free(x), free(enc), free(p);
  return rc;
}

int sortformer_stream_run(sortformer_session *s, const float *mel, uint32_t frames,
                          const sortformer_watch *w, float **preds, uint32_t *t) {
  *preds = NULL;
  *t = 0;
  const sortformer *m = s->m;
  sf_stream st;
  TRY(sf_stream_init(&st, &m->c.stream));
  /* The largest window and concatenation up front: the warm path allocates no GPU memory. */
  int rc = arena_fit(s, (m->c.stream.lc + m->c.stream.chunk + m->c.stream.rc) * SUB,
                     sf_stream_max_frames(&m->c.stream));
  uint32_t index = 0;
  for (uint32_t start = 0; !rc && start < frames; index++) {
    if (w && w->abort && w->abort(w->abort_user)) rc = err_set(STENO_ERR_ABORTED, "aborted");
    sf_window win = window_at(&m->c.stream, start, frames);
    if (!rc) rc = stream_chunk(s, &st, mel, win, index, w);
    start = win.end;
  }
  /* NeMo keeps ⌈frames/8⌉ rows of the chunks' predictions. */
  uint32_t n = (frames + SUB - 1) / SUB;
  if (!rc && st.n_out < n)
    rc = err_set(STENO_ERR_INVALID, "sortformer: %zu frames of predictions for %u", st.n_out, n);
  if (!rc) {
    *preds = st.out;
    *t = n;
    st.out = NULL;
  }
  sf_stream_free(&st);
  return rc;
}

int sortformer_turns(const float *preds, uint32_t t, uint32_t speakers, double ms_per_frame,
                     steno_turn **turns, size_t *n) {
  *turns = NULL;
  *n = 0;
  size_t cap = 0;
  for (uint32_t k = 0; k < speakers; k++) {
    uint32_t on = UINT32_MAX;
    for (uint32_t i = 0; i <= t; i++) {
      bool active = i < t && preds[(size_t)i * speakers + k] > 0.5f;
      if (active && on == UINT32_MAX) on = i;
      if (active || on == UINT32_MAX) continue;
      if (*n == cap) {
        steno_turn *g = mem_realloc(*turns, cap = cap ? 2 * cap : 16, sizeof *g);
        if (!g) {
          free(*turns), *turns = NULL, *n = 0;
          return STENO_ERR_NOMEM;
        }
        *turns = g;
      }
      (*turns)[(*n)++] = (steno_turn){(int)k + 1, llround(on * ms_per_frame), llround(i * ms_per_frame)};
      on = UINT32_MAX;
    }
  }
  return 0;
}

int sortformer_diarize(sortformer_session *s, const float *pcm, size_t n, steno_abort_fn abort,
                       void *abort_user, steno_result **out) {
  *out = NULL;
  const sortformer *m = s->m;
  double seconds = (double)n / m->mel.c.sample_rate;
  /* Too short for two mel frames: nobody speaks. */
  if (n / (size_t)m->mel.c.hop < 2) return result_empty(seconds, out);
  double t0 = time_now();
  float *mel, *preds = NULL;
  size_t frames;
  uint32_t t;
  TRY(sortformer_features(m, pcm, n, &mel, &frames));
  double t1 = time_now();
  sortformer_watch w = {.abort = abort, .abort_user = abort_user};
  int st = sortformer_stream_run(s, mel, (uint32_t)frames, &w, &preds, &t);
  free(mel);
  steno_turn *turns = NULL;
  size_t nturns = 0;
  double ms = 1000.0 * m->c.frame_hop / m->mel.c.sample_rate;
  if (!st) st = sortformer_turns(preds, t, m->c.speakers, ms, &turns, &nturns);
  free(preds);
  if (!st) st = result_empty(seconds, out);
  if (st) {
    free(turns);
    return st;
  }
  (*out)->turns = turns;
  (*out)->nturns = nturns;
  (*out)->timings = (steno_timings){(t1 - t0) * 1e3, (time_now() - t1) * 1e3, 0};
  return 0;
}
