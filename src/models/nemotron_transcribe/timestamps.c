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
#include "models/nemotron_transcribe/nemotron_transcribe.h"
#include "nn/weights.h"

#define KEY "nemotron3_5_transcribe."

static uint32_t pad64(uint32_t n) { return (n + 63) / 64 * 64; }

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

/* GPU buffers of one chunk (n ≤ chunk + context frames, n·factor rows). */
typedef struct {
  renc_scratch s;
  gpu_buffer *in, *up, *packed, *rows, *ln, *logits;
  uint32_t S, lw; /* floats per row of rows/ln, of logits */
} wts_bufs;

static void wts_bufs_free(wts_bufs *b) {
  renc_scratch_free(&b->s);
  gpu_buffer_free(b->in), gpu_buffer_free(b->up), gpu_buffer_free(b->packed);
  gpu_buffer_free(b->rows), gpu_buffer_free(b->ln), gpu_buffer_free(b->logits);
}

static int zeroed(gpu_device *dev, size_t count, gpu_buffer **out) {
  float *z = mem_alloc(count, sizeof *z);
  if (!z) return STENO_ERR_NOMEM;
  int st = gpu_buffer_from(dev, z, count * sizeof *z, out);
  free(z);
  return st;
}

static int wts_bufs_new(const nt_model *m, wts_bufs *b) {
  memset(b, 0, sizeof *b);
  const nt_wts *w = &m->wts;
  uint32_t d = m->c.d, n = m->c.chunk + m->c.left + m->c.right, r = n * w->factor;
  b->S = pad64(d);
  b->lw = gpu_linear_width(&w->head);
  int st = renc_scratch_new(m->dev, &w->enc, &b->s);
  if (!st) st = zeroed(m->dev, (size_t)n * d, &b->in);
  if (!st) st = zeroed(m->dev, (size_t)n * gpu_linear_width(&w->up), &b->up);
  if (!st) st = zeroed(m->dev, (size_t)r * d, &b->packed);
  if (!st) st = zeroed(m->dev, (size_t)r * b->S, &b->rows);
  if (!st) st = zeroed(m->dev, (size_t)r * b->S, &b->ln);
  if (!st) st = zeroed(m->dev, (size_t)r * b->lw, &b->logits);
  if (st) wts_bufs_free(b);
  return st;
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

/* One chunk: upload, run, and its kept rows' logits into out. */
static int wts_chunk(const nt_model *m, gpu_rec *rec, wts_bufs *b, const float *asr, nt_chunk k,
                     uint32_t valid, wts_cols keep, float *host, float *out) {
  const nt_wts *w = &m->wts;
  uint32_t ctx = k.ctx, start = k.start, end = k.end;
  uint32_t d = m->c.d, u = w->factor, n = k.ctx_end - ctx, V = w->classes;
  uint32_t *mask = mem_alloc((size_t)n * u, sizeof *mask);
  if (!mask) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i < n * u; i++) mask[i] = (uint64_t)(ctx + i / u) * m->c.sub < valid;
  int st = gpu_upload(b->s.mask, 0, mask, (size_t)n * u * sizeof *mask);
  free(mask);
  if (!st) st = gpu_upload(b->in, 0, asr + (size_t)ctx * d, (size_t)n * d * sizeof *asr);
  if (!st) st = gpu_rec_begin(rec);
  if (st) return st;
  wts_record(m, rec, b, n, start - ctx, end - start);
  TRY(gpu_rec_run(rec));
  uint32_t first = (start - ctx) * u, rows = (end - start) * u;
  TRY(gpu_download(b->logits, (size_t)first * b->lw * sizeof *host, host,
                   (size_t)rows * b->lw * sizeof *host));
  if (keep.cols)
    nt_log_softmax_cols(host, rows, V, b->lw, keep.cols, keep.n, out + (size_t)start * u * keep.n);
  for (uint32_t i = 0; !keep.cols && i < rows; i++)
    memcpy(out + ((size_t)start * u + i) * V, host + (size_t)i * b->lw, V * sizeof *out);
  return 0;
}

static int wts_run(const nt_model *m, const float *asr, uint32_t t, uint32_t valid, wts_cols keep,
                   float **logits) {
  *logits = NULL;
  const nt_wts *w = &m->wts;
  const nt_config *c = &m->c;
  if (!w->enc.blocks) return err_set(STENO_ERR_UNSUPPORTED, "the model has no word timestamp head");
  wts_bufs b;
  gpu_rec *rec = NULL;
  uint32_t rows = (c->chunk + c->left + c->right) * w->factor;
  float *out = mem_alloc((size_t)t * w->factor * (keep.cols ? keep.n : w->classes), sizeof *out);
  float *host = mem_alloc((size_t)rows * gpu_linear_width(&w->head), sizeof *host);
  int st = out && host ? wts_bufs_new(m, &b) : STENO_ERR_NOMEM;
  if (st) {
    free(out), free(host);
    return st;
  }
  st = gpu_rec_new(m->dev, &rec);
  for (uint32_t a = 0; !st && a < t; a += c->chunk)
    st = wts_chunk(m, rec, &b, asr, nt_chunk_at(c, a, t), valid, keep, host, out);
  gpu_rec_free(rec);
  wts_bufs_free(&b);
  free(host);
  if (st) free(out);
  else *logits = out;
  return st;
}

int nt_word_timestamp_logits(const nt_model *m, const float *asr, uint32_t t, uint32_t valid,
                             float **logits) {
  return wts_run(m, asr, t, valid, (wts_cols){NULL, 0}, logits);
}

int nt_word_timestamp_logprobs(const nt_model *m, const float *asr, uint32_t t, uint32_t valid,
                               const int *cols, uint32_t n, float **logp) {
  for (uint32_t j = 0; j < n; j++)
    if (cols[j] < 0 || (uint32_t)cols[j] >= m->wts.classes)
      return err_set(STENO_ERR_INVALID, "word timestamp class %d of %u", cols[j], m->wts.classes);
  return wts_run(m, asr, t, valid, (wts_cols){cols, n}, logp);
}
