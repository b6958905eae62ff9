/* Parakeet over a padded batch: many clips, one GPU encoder pass, then each
 * clip's search. The clips sit side by side in [clip][frame] rows padded to
 * the longest; the per-clip kernels (subsampling convs, attention, the conv
 * module's depthwise conv) keep to each clip's own frames as transformers'
 * attention mask makes its ParakeetEncoder do, so every clip's encoder output
 * is the one it gets alone (tests/test_batch.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/timer.h"
#include "frontend/frames.h"
#include "gpu/subsample.h"
#include "models/parakeet/parakeet.h"

/* The activation budget of one pass: min(4 GiB, device memory / 4). */
#define BATCH_BYTES_MAX ((uint64_t)4 << 30)

struct parakeet_batch {
  uint32_t clips, frames; /* room: clips of up to `frames` mel frames */
  gpu_buffer *mel, *head;
  gpu_buffer *prompt_hidden, *prompt_out;
  dw_subsampling_scratch sub;
  conformer_scratch enc;
};

bool parakeet_batchable(const parakeet *m) {
  return !m->sub.causal && !m->c.dims.rotary && !m->c.dims.chunk && !m->c.dims.causal_conv;
}

void parakeet_batch_free(parakeet_batch *b) {
  if (!b) return;
  gpu_buffer *bufs[] = {b->mel, b->head, b->prompt_hidden, b->prompt_out};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) gpu_buffer_free(bufs[i]);
  dw_subsampling_scratch_free(&b->sub);
  conformer_scratch_free(&b->enc);
  free(b);
}

static uint64_t pad64(uint64_t n) { return (n + 63) / 64 * 64; }

/* Bytes of one clip's share of a pass over `frames` mel frames, and of its
 * largest buffer (the first depthwise conv's rows, or the scores). */
static void clip_bytes(const parakeet *m, uint32_t frames, uint64_t *all, uint64_t *largest) {
  uint64_t C = m->c.channels, Cp = pad64(C), F = m->c.mels;
  uint64_t F4 = gpu_halve(gpu_halve((uint32_t)F)), F8 = gpu_halve((uint32_t)F4);
  uint64_t T4 = gpu_halve(gpu_halve(frames)), T8 = gpu_halve((uint32_t)T4), R4 = T4 + 1;
  uint64_t S = pad64(m->c.dims.d), W = pad64(4 * (uint64_t)m->c.dims.d) + m->c.dims.ff;
  uint64_t scores = (uint64_t)m->c.dims.heads * T8 * T8;
  uint64_t head = gpu_linear_width(&m->head), sub = R4 * F4 * Cp;
  uint64_t prompt = m->prompt.n ? gpu_linear_width(&m->prompt.in) + S : 0;
  uint64_t samples = m->gmel ? (uint64_t)(frames + 1) * m->mel.c.hop : 0; /* logmel's input */
  *all = 4 * (frames * F + samples + 2 * sub + 3 * T8 * F8 * Cp +
              T8 * (3 * S + W + 2 * head + prompt) + scores);
  *largest = 4 * (sub > scores ? sub : scores);
}

uint32_t parakeet_batch_fit(const parakeet *m, uint32_t frames) {
  const gpu_info *info = gpu_device_info(m->dev);
  uint64_t budget = info->device_memory / 4, range = info->max_storage_buffer_range;
  if (!budget || budget > BATCH_BYTES_MAX) budget = BATCH_BYTES_MAX;
  if (!range || range > UINT32_MAX) range = UINT32_MAX;
  uint64_t all, largest;
  clip_bytes(m, frames, &all, &largest);
  uint64_t n = budget / all, by_range = range / largest;
  if (by_range < n) n = by_range;
  return n < 1 ? 1 : n > 65535 / m->c.dims.heads ? 65535 / m->c.dims.heads : (uint32_t)n;
}

/* Grows the session's batch buffers to clips of up to `frames` mel frames. */
static int batch_fit(parakeet_session *s, uint32_t clips, uint32_t frames) {
  parakeet_batch *b = s->batch;
  if (b && clips <= b->clips && frames <= b->frames) return 0;
  const parakeet *m = s->m;
  if (b) {
    if (b->clips > clips) clips = b->clips;
    if (b->frames > frames) frames = b->frames;
  }
  /* At least the single-clip arena's length where that fits: pieces of a long
   * recording then find room from the first batch on (memory flat). */
  if (s->arena.frames > frames && clips <= parakeet_batch_fit(m, s->arena.frames))
    frames = s->arena.frames;
  parakeet_batch_free(b);
  s->batch = b = mem_alloc(1, sizeof *b);
  if (!b) return STENO_ERR_NOMEM;
  size_t T8 = parakeet_encoder_frames(m, frames), f = sizeof(float), rows = clips * T8;
  gpu_device *dev = m->dev;
  size_t width = gpu_linear_width(&m->head);
  int st = gpu_buffer_new(dev, (size_t)clips * frames * m->c.mels * f, &b->mel);
  if (!st) st = gpu_buffer_new(dev, rows * width * f, &b->head);
  if (!st && m->prompt.n)
    st = gpu_buffer_new(dev, rows * gpu_linear_width(&m->prompt.in) * f, &b->prompt_hidden);
  if (!st && m->prompt.n)
    st = gpu_buffer_new(dev, rows * gpu_linear_width(&m->prompt.out) * f, &b->prompt_out);
  if (!st) st = dw_subsampling_scratch_new_batch(dev, &m->sub, frames, clips, &b->sub);
  if (!st) st = conformer_scratch_new_batch(dev, &m->c.dims, (uint32_t)T8, clips, &b->enc);
  if (st) {
    parakeet_batch_free(b);
    s->batch = NULL;
    return st;
  }
  b->clips = clips, b->frames = frames;
  return 0;
}

/* The clips' mel frames side by side, padded with zeros to `pitch`. */
static int upload_mel(parakeet_session *s, const float *const *mel, const uint32_t *valid,
                      uint32_t clips, uint32_t pitch) {
  size_t F = s->m->c.mels, n = (size_t)clips * pitch * F;
  float *all = mem_alloc(n, sizeof *all);
  if (!all) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i < clips; i++)
    memcpy(all + (size_t)i * pitch * F, mel[i], (size_t)valid[i] * F * sizeof *all);
  int st = gpu_upload(s->batch->mel, 0, all, n * sizeof *all);
  free(all);
  return st;
}

/* Each clip's encoder rows, downloaded. */
static int download_enc(parakeet_session *s, uint32_t clips, uint32_t T, const uint32_t *t,
                        float **enc) {
  conformer_scratch *e = &s->batch->enc;
  uint32_t d = s->m->c.dims.d;
  float *rows;
  TRY(parakeet_download_rows(e->x, e->stride, clips * T, d, &rows));
  int st = 0;
  for (uint32_t i = 0; i < clips && !st; i++) {
    enc[i] = mem_alloc((size_t)t[i] * d, sizeof **enc);
    if (!enc[i]) st = STENO_ERR_NOMEM;
    else memcpy(enc[i], rows + (size_t)i * T * d, (size_t)t[i] * d * sizeof **enc);
  }
  free(rows);
  return st;
}

/* parakeet_forward_batch from the clips' mel frames (mel), or (mel NULL) from
 * their samples (pcm, n) whose features the GPU makes. */
static int forward_batch(parakeet_session *s, const float *const *mel, const float *const *pcm,
                         const size_t *n, const uint32_t *valid, uint32_t clips, float **enc,
                         uint32_t *t) {
  const parakeet *m = s->m;
  for (uint32_t i = 0; enc && i < clips; i++) enc[i] = NULL;
  if (!parakeet_batchable(m))
    return err_set(STENO_ERR_UNSUPPORTED, "parakeet: this model's encoder takes no batch");
  uint32_t pitch = 0;
  for (uint32_t i = 0; i < clips; i++) {
    if (valid[i] < 2) return err_set(STENO_ERR_INVALID, "parakeet: %u mel frames is too few", valid[i]);
    if (valid[i] > pitch) pitch = valid[i];
    t[i] = parakeet_encoder_frames(m, valid[i]);
  }
  if (clips < 2 || clips > parakeet_batch_fit(m, pitch))
    return err_set(STENO_ERR_INVALID, "parakeet: a batch of %u clips of up to %u frames", clips,
                   pitch);
  TRY(batch_fit(s, clips, pitch));
  parakeet_batch *b = s->batch;
  uint32_t T = parakeet_encoder_frames(m, pitch), S = b->enc.stride;
  TRY(parakeet_session_prompt(s));
  if (mel) TRY(upload_mel(s, mel, valid, clips, pitch));
  else TRY(parakeet_upload_pcm(s, pcm, n, clips,
                               gpu_logmel_input_floats(b->clips, (size_t)b->clips *
                                                                     (b->frames + 1) * m->mel.c.hop)));
  TRY(dw_subsampling_set_lens(&b->sub, valid, clips));
  TRY(conformer_set_lens(&b->enc, t, clips));
  TRY(conformer_positions_kept(&m->c.dims, T, &b->enc));
  TRY(gpu_rec_begin(s->rec));
  if (!mel) gpu_logmel_record(s->rec, m->gmel, gpu_input_record(s->rec, &s->pcm), clips, pitch, b->mel);
  TRY(conformer_project_positions(s->rec, &m->c.dims, m->blocks, m->c.layers, &b->enc, T));
  float scale = m->c.xscaling ? sqrtf((float)m->c.dims.d) : 0;
  dw_subsampling_forward_batch(s->rec, &m->sub, &b->sub, b->mel, pitch, clips, b->enc.x, scale);
  TRY(conformer_forward(s->rec, &m->c.dims, m->blocks, m->c.layers, &b->enc, T));
  parakeet_record_head(s, b->enc.x, S, clips * T, b->prompt_hidden, b->prompt_out, b->head);
  TRY(gpu_rec_run(s->rec));
  conformer_keep_positions(&b->enc);
  return enc ? download_enc(s, clips, T, t, enc) : 0;
}

int parakeet_forward_batch(parakeet_session *s, const float *const *mel, const uint32_t *valid,
                           uint32_t clips, float **enc, uint32_t *t) {
  if (!mel) return err_set(STENO_ERR_INVALID, "parakeet: no mel frames");
  return forward_batch(s, mel, NULL, NULL, valid, clips, enc, t);
}

int parakeet_forward_batch_pcm(parakeet_session *s, const float *const *pcm, const size_t *n,
                               uint32_t clips, float **enc, uint32_t *t) {
  uint32_t *valid = mem_alloc(clips ? clips : 1, sizeof *valid);
  if (!valid) return STENO_ERR_NOMEM;
  int st = pcm && n ? 0 : err_set(STENO_ERR_INVALID, "parakeet: no samples");
  for (uint32_t i = 0; !st && i < clips; i++) {
    size_t v = n[i] / (size_t)s->m->mel.c.hop;
    if (v > UINT32_MAX) st = err_set(STENO_ERR_INVALID, "parakeet: a clip of %zu samples", n[i]);
    valid[i] = (uint32_t)v;
  }
  if (!st) st = forward_batch(s, NULL, pcm, n, valid, clips, enc, t);
  free(valid);
  return st;
}

/* Each clip's search over its rows of the batch's head: all clips at once on
 * the GPU (gpu_transducer_search_batch), or one after another on the CPU
 * from the downloaded head. */
static int search_clips(parakeet_session *s, uint32_t k, uint32_t T, const uint32_t *t,
                        const transducer_abort *stop, dec_tokens *toks) {
  const parakeet *m = s->m;
  uint32_t W = gpu_linear_width(&m->head);
  if (parakeet_decode_on_gpu(s)) {
    gpu_transducer_clip *c = mem_alloc(k, sizeof *c);
    if (!c) return STENO_ERR_NOMEM;
    for (uint32_t j = 0; j < k; j++) c[j] = (gpu_transducer_clip){j * T, t[j]};
    int st = gpu_transducer_search_batch(s->search, s->batch->head, W, c, (int)k, stop, toks);
    free(c);
    return st;
  }
  size_t floats = (size_t)k * T * W;
  float *host = mem_alloc(floats, sizeof *host);
  int st = host ? gpu_download(s->batch->head, 0, host, floats * sizeof *host) : STENO_ERR_NOMEM;
  for (uint32_t j = 0; j < k && !st; j++)
    st = parakeet_decode_rows(s, NULL, host + (size_t)j * T * W, t[j], stop, &toks[j]);
  free(host);
  return st;
}

typedef struct {
  const parakeet *m;
  const float *const *pcm;
  const size_t *n;
  const uint32_t *idx;
  float **mel;
  uint32_t *valid;
} features_job;

static int clip_features(void *ctx, int j) {
  const features_job *f = ctx;
  size_t frames, v;
  int st = parakeet_features(f->m, f->pcm[f->idx[j]], f->n[f->idx[j]], &f->mel[j], &frames, &v);
  f->valid[j] = (uint32_t)v;
  return st;
}

int parakeet_batch_features(const parakeet *m, const float *const *pcm, const size_t *n,
                            const uint32_t *idx, uint32_t k, float **mel, uint32_t *valid) {
  for (uint32_t j = 0; j < k; j++) mel[j] = NULL, valid[j] = 0;
  if (k > INT32_MAX) return err_set(STENO_ERR_INVALID, "parakeet: features of %u clips", k);
  features_job job = {m, pcm, n, idx, mel, valid};
  return frames_run_clips((int)k, clip_features, &job);
}

/* k ≥ 2 clips (pcm[idx[j]], each ≥ 2 mel frames) in one pass, into out[idx[j]]. */
static int transcribe_group(parakeet_session *s, const float *const *pcm, const size_t *n,
                            const uint32_t *idx, uint32_t k, const transducer_abort *stop,
                            steno_result **out) {
  const parakeet *m = s->m;
  float **mel = mem_alloc(k, sizeof *mel);
  uint32_t *valid = mem_alloc(k, sizeof *valid), *t = mem_alloc(k, sizeof *t), pitch = 0;
  dec_tokens *toks = mem_alloc(k, sizeof *toks);
  int st = mel && valid && t && toks ? 0 : STENO_ERR_NOMEM;
  double t0 = time_now();
  /* Features on the GPU: made in the encoder's submission (its stage's time). */
  const float **clip = m->gmel && !st ? mem_alloc(k, sizeof *clip) : NULL;
  size_t *len = clip ? mem_alloc(k, sizeof *len) : NULL;
  if (m->gmel && !st && !len) st = STENO_ERR_NOMEM;
  for (uint32_t j = 0; len && j < k; j++) {
    clip[j] = pcm[idx[j]], len[j] = n[idx[j]];
    valid[j] = (uint32_t)(len[j] / m->mel.c.hop);
  }
  if (!st && !m->gmel) st = parakeet_batch_features(m, pcm, n, idx, k, mel, valid);
  double t1 = time_now();
  if (!st && m->gmel) st = parakeet_forward_batch_pcm(s, clip, len, k, NULL, t);
  else if (!st) st = parakeet_forward_batch(s, (const float *const *)mel, valid, k, NULL, t);
  free(clip), free(len);
  double t2 = time_now();
  for (uint32_t j = 0; !st && j < k; j++) pitch = valid[j] > pitch ? valid[j] : pitch;
  if (!st) st = transducer_check_abort(stop);
  if (!st) st = search_clips(s, k, parakeet_encoder_frames(m, pitch), t, stop, toks);
  /* Each clip's share of the stages' wall time (features side by side too). */
  double feat_ms = (t1 - t0) * 1e3 / k, enc_ms = (t2 - t1) * 1e3 / k;
  double dec_ms = (time_now() - t2) * 1e3 / k;
  double ms_per_frame = 1000.0 * 8 * m->mel.c.hop / m->mel.c.sample_rate;
  for (uint32_t j = 0; j < k && !st; j++) {
    double seconds = (double)n[idx[j]] / m->mel.c.sample_rate;
    st = result_from_tokens(&m->vocab, &toks[j], ms_per_frame, 0, seconds, &out[idx[j]]);
    if (!st) out[idx[j]]->timings = (steno_timings){feat_ms, enc_ms, dec_ms};
  }
  for (uint32_t j = 0; mel && j < k; j++) free(mel[j]);
  for (uint32_t j = 0; toks && j < k; j++) dec_free(&toks[j]);
  free(mel), free(valid), free(t), free(toks);
  return st;
}

/* The batchable clips (≥ 2 mel frames), longest first (ties in order: an
 * insertion sort, stable; qsort has no user pointer), in *idx; *k of them. */
static int order_clips(const parakeet *m, const size_t *n, size_t count, uint32_t **idx,
                       uint32_t *k) {
  *idx = mem_alloc(count ? count : 1, sizeof **idx);
  if (!*idx) return STENO_ERR_NOMEM;
  uint32_t *o = *idx, c = 0;
  for (size_t i = 0; i < count; i++) {
    if (n[i] / (size_t)m->mel.c.hop < 2) continue;
    uint32_t j = c++;
    for (; j > 0 && n[o[j - 1]] < n[i]; j--) o[j] = o[j - 1];
    o[j] = (uint32_t)i;
  }
  *k = c;
  return 0;
}

int parakeet_transcribe_batch(parakeet_session *s, const float *const *pcm, const size_t *n,
                              size_t count, const transducer_abort *stop, steno_result **out) {
  const parakeet *m = s->m;
  for (size_t i = 0; i < count; i++) out[i] = NULL;
  if (count > UINT32_MAX) return err_set(STENO_ERR_INVALID, "parakeet: %zu clips", count);
  uint32_t *idx = NULL, k = 0;
  int st = parakeet_batchable(m) ? order_clips(m, n, count, &idx, &k) : 0;
  /* Longest first: each pass takes the next clips while they fit beside the first. */
  for (uint32_t at = 0; at < k && !st;) {
    uint32_t fit = parakeet_batch_fit(m, (uint32_t)(n[idx[at]] / m->mel.c.hop));
    uint32_t g = k - at < fit ? k - at : fit;
    if (g >= 2) st = transcribe_group(s, pcm, n, idx + at, g, stop, out);
    at += g < 2 ? 1 : g;
  }
  /* The rest alone: clips too short for a frame, a pass of one, or a model
   * whose encoder takes no batch. */
  for (size_t i = 0; i < count && !st; i++)
    if (!out[i]) st = parakeet_transcribe(s, pcm[i], n[i], stop, &out[i]);
  free(idx);
  for (size_t i = 0; st && i < count; i++) {
    steno_result_free(out[i]);
    out[i] = NULL;
  }
  return st;
}
