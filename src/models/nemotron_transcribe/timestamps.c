/* The word timestamp encoder and head of Nemotron 3.5 Transcribe
 * (transformers' Nemotron3_5TranscribeWordTimestampModel and
 * word_timestamp_head, run by get_word_timestamp_logits in the ASR chunks):
 * the logits a CTC alignment of the transcript reads for word times. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/conv.h"
#include "gpu/gqa.h"
#include "models/nemotron_transcribe/arena.h"
#include "nn/weights.h"

#define KEY "nemotron3_5_transcribe."

/* The transposed conv (kernel = stride = factor) as a linear layer: weight
 * [d_in][d_out][factor] (PyTorch order) to rows j·d_out + o, with the bias
 * of channel o repeated for every sub-frame j. */
static int upsampler(nt_model *m, const gguf_file *f, uint32_t d, uint32_t u) {
  float *w = NULL, *b = NULL, *rows = mem_alloc((size_t)u * d * d, sizeof *rows);
  float *bias = mem_alloc((size_t)u * d, sizeof *bias);
  int st = rows && bias ? 0 : STENO_ERR_NOMEM;
  if (!st) st = w_host(f, "wts.upsample.weight", W_CONV_TYPES, (size_t)d * d * u, true, &w);
  if (!st) st = w_host(f, "wts.upsample.bias", W_F32, d, true, &b);
  for (uint32_t c = 0; !st && c < d; c++)
    for (uint32_t o = 0; o < d; o++)
      for (uint32_t j = 0; j < u; j++)
        rows[((size_t)j * d + o) * d + c] = w[((size_t)c * d + o) * u + j];
  for (uint32_t j = 0; !st && j < u; j++) memcpy(bias + (size_t)j * d, b, d * sizeof *bias);
  gpu_weight part = {rows, u * d};
  if (!st) st = gpu_linear_new(m->dev, GPU_F32, d, &part, 1, bias, (size_t)u * d, &m->wts.up);
  free(w), free(b), free(rows), free(bias);
  return st;
}

/* The classifier twice: with its bias (on the upsampled rows) and without
 * (on the scaled final norm, added). */
static int classifier(nt_model *m, const gguf_file *f, uint32_t d, uint32_t v) {
  const char *names[1] = {"wts.head.weight"};
  int64_t rows = v;
  float *bias;
  TRY(w_host(f, "wts.head.bias", W_F32, v, true, &bias));
  int st = w_linear(m->dev, f, names, 1, &rows, d, W_CONV_TYPES | W_LINEAR_TYPES, bias, v,
                    &m->wts.head);
  free(bias);
  if (!st) st = w_linear(m->dev, f, names, 1, &rows, d, W_CONV_TYPES | W_LINEAR_TYPES, NULL, 0,
                         &m->wts.head_nb);
  return st;
}

int nt_wts_load(nt_model *m, const gguf_file *f) {
  nt_wts *w = &m->wts;
  if (!gguf_find(f, KEY "wts.hidden_size")) return 0;
  renc_dims d = {0};
  TRY(nt_tower_keys(f, "wts.", true, &d, NULL, NULL));
  TRY(gguf_get_u32(f, KEY "wts.upsampling_factor", &w->factor));
  TRY(gguf_get_u32(f, KEY "wts.vocab_size", &w->classes));
  TRY(gguf_get_f32(f, KEY "wts.residual_scale", &w->scale));
  if (d.d != m->c.d || w->factor < 1 || w->factor > 16 || w->classes < 2 ||
      w->classes > (1u << 20) || !isfinite(w->scale))
    return err_set(STENO_ERR_FORMAT,
                   "%s: word timestamp head: width %u for %u-wide states, upsampling %u, %u "
                   "classes, scale %g",
                   f->name, d.d, m->c.d, w->factor, w->classes, w->scale);
  d.max_t = (m->c.chunk + m->c.left + m->c.right) * w->factor; /* both bounded: no wrap */
  if (d.max_t > NT_MAX_RUN)
    return err_set(STENO_ERR_FORMAT,
                   "%s: " KEY "wts.upsampling_factor %u on runs of %u frames: a word timestamp "
                   "run of %u (at most %d)",
                   f->name, w->factor, m->c.chunk + m->c.left + m->c.right, d.max_t, NT_MAX_RUN);
  uint32_t blank = w->classes - 1;
  if (gguf_find(f, KEY "wts.blank_token_id")) TRY(gguf_get_u32(f, KEY "wts.blank_token_id", &blank));
  if (blank != w->classes - 1) /* the processor takes the last class as the blank */
    return err_set(STENO_ERR_FORMAT, "%s: " KEY "wts.blank_token_id %u of %u classes (the last "
                   "expected)", f->name, blank, w->classes);
  TRY(renc_load(m->dev, f, "wts.", &d, &w->enc));
  TRY(upsampler(m, f, d.d, w->factor));
  TRY(classifier(m, f, d.d, w->classes));
  return nt_pieces_load(f, blank, &w->pieces);
}

void nt_wts_free(nt_wts *w) {
  renc_free(&w->enc);
  gpu_linear_free(&w->up);
  gpu_linear_free(&w->head);
  gpu_linear_free(&w->head_nb);
  nt_pieces_free(&w->pieces);
  memset(w, 0, sizeof *w);
}

/* Records one chunk of n frames whose kept ones are [first, first + len):
 * upsampling, the encoder, logits = head(up) + scale · head(final norm). */
static void wts_record(const nt_model *m, gpu_rec *rec, wts_bufs *b, uint32_t n, uint32_t first,
                       uint32_t len) {
  const nt_wts *w = &m->wts;
  uint32_t d = m->c.d, u = w->factor, r = n * u;
  gpu_gemm_strided(rec, b->in, d, &w->up, b->up, n, GPU_EPI_BIAS, 0);
  /* Rows of u·d as u rows of d, then padded to the encoder's row width (twice:
   * the encoder overwrites its copy, the residual needs the other). */
  gpu_im2col(rec, b->up, 0, gpu_linear_width(&w->up), b->packed, u * d, n, u * d,
             (gpu_conv1d){1, 1, 0});
  gpu_im2col(rec, b->packed, 0, d, b->rows, b->S, r, d, (gpu_conv1d){1, 1, 0});
  gpu_im2col(rec, b->packed, 0, d, b->s.x, b->s.stride, r, d, (gpu_conv1d){1, 1, 0});
  renc_record(rec, &w->enc, &b->s, r, true, first * u, len * u, b->ln, first * u * b->S, b->S);
  gpu_gemm_strided(rec, b->rows, b->S, &w->head, b->logits, r, GPU_EPI_BIAS, 0);
  gpu_gemm_strided(rec, b->ln, b->S, &w->head_nb, b->logits, r, GPU_EPI_RESIDUAL, w->scale);
}

/* Which classes of each row to keep: all (cols NULL: logits) or the columns
 * cols[0..n) of the log-softmaxed row (word times read only the blank and the
 * transcript's pieces of a head of ~24k classes). */
typedef struct {
  const int *cols;
  uint32_t n;
} wts_cols;

/* One chunk: its rows copied out of the clip's states (in a->asr_out), run,
 * and its kept rows' logits into out. Chunks without padding read the
 * all-ones mask. */
static int wts_chunk(nt_arena *a, nt_chunk k, uint32_t valid, wts_cols keep, float *out) {
  const nt_model *m = a->m;
  const nt_wts *w = &m->wts;
  wts_bufs *b = a->wts;
  float *host = a->wts_host;
  uint32_t ctx = k.ctx, start = k.start, end = k.end;
  uint32_t d = m->c.d, u = w->factor, n = k.ctx_end - ctx, V = w->classes;
  bool padded = (uint64_t)(k.ctx_end - 1) * m->c.sub >= valid;
  b->s.mask = padded ? a->wts_mask : a->ones;
  if (padded) {
    uint32_t *mask = a->h.mask; /* free while the towers do not run (≥ n·u: arena.c) */
    for (uint32_t i = 0; i < n * u; i++) mask[i] = (uint64_t)(ctx + i / u) * m->c.sub < valid;
    TRY(gpu_upload(b->s.mask, 0, mask, (size_t)n * u * sizeof *mask));
  }
  TRY(gpu_rec_begin(a->rec));
  gpu_copy_rows(a->rec, a->asr_out, ctx * d, d, b->in, 0, d, n, d);
  wts_record(m, a->rec, b, n, start - ctx, end - start);
  TRY(gpu_rec_run(a->rec));
  uint32_t first = (start - ctx) * u, rows = (end - start) * u;
  TRY(gpu_download(b->logits, (size_t)first * b->lw * sizeof *host, host,
                   (size_t)rows * b->lw * sizeof *host));
  if (keep.cols)
    nt_log_softmax_cols(host, rows, V, b->lw, keep.cols, keep.n, out + (size_t)start * u * keep.n);
  for (uint32_t i = 0; !keep.cols && i < rows; i++)
    memcpy(out + ((size_t)start * u + i) * V, host + (size_t)i * b->lw, V * sizeof *out);
  return 0;
}

/* The clip's states go up once (into the towers' buffer for them). */
static int wts_run(nt_arena *a, const float *asr, uint32_t t, uint32_t valid, wts_cols keep,
                   float **logits) {
  *logits = NULL;
  const nt_model *m = a->m;
  const nt_wts *w = &m->wts;
  const nt_config *c = &m->c;
  if (!w->enc.blocks) return err_set(STENO_ERR_UNSUPPORTED, "the model has no word timestamp head");
  TRY(nt_arena_fit(a, t));
  TRY(nt_arena_wts(a));
  TRY(gpu_upload(a->asr_out, 0, asr, (size_t)t * c->d * sizeof *asr));
  float *out = mem_alloc((size_t)t * w->factor * (keep.cols ? keep.n : w->classes), sizeof *out);
  int st = out ? 0 : STENO_ERR_NOMEM;
  for (uint32_t i = 0; !st && i < t; i += c->chunk)
    st = wts_chunk(a, nt_chunk_at(c, i, t), valid, keep, out);
  if (st) free(out);
  else *logits = out;
  return st;
}

/* wts_run in an arena made and freed for it. */
static int wts_run_once(const nt_model *m, const float *asr, uint32_t t, uint32_t valid,
                        wts_cols keep, float **logits) {
  nt_arena *a;
  *logits = NULL;
  TRY(nt_arena_new(m, &a));
  int st = wts_run(a, asr, t, valid, keep, logits);
  nt_arena_free(a);
  return st;
}

/* Class indices within the head, or an error naming the first that is not. */
static int check_cols(const nt_model *m, const int *cols, uint32_t n) {
  for (uint32_t j = 0; j < n; j++)
    if (cols[j] < 0 || (uint32_t)cols[j] >= m->wts.classes)
      return err_set(STENO_ERR_INVALID, "word timestamp class %d of %u", cols[j], m->wts.classes);
  return 0;
}

int nt_word_timestamp_logits(const nt_model *m, const float *asr, uint32_t t, uint32_t valid,
                             float **logits) {
  return wts_run_once(m, asr, t, valid, (wts_cols){NULL, 0}, logits);
}

int nt_word_timestamp_logprobs(const nt_model *m, const float *asr, uint32_t t, uint32_t valid,
                               const int *cols, uint32_t n, float **logp) {
  *logp = NULL;
  TRY(check_cols(m, cols, n));
  return wts_run_once(m, asr, t, valid, (wts_cols){cols, n}, logp);
}

int nt_word_timestamp_logprobs_in(nt_arena *a, const float *asr, uint32_t t, uint32_t valid,
                                  const int *cols, uint32_t n, float **logp) {
  *logp = NULL;
  TRY(check_cols(a->m, cols, n));
  return wts_run(a, asr, t, valid, (wts_cols){cols, n}, logp);
}
