/* GigaAM: the forward pass (one recorded GPU submission), decoding and the result. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/timer.h"
#include "decode/ctc.h"
#include "models/gigaam/gigaam.h"

int gigaam_features(const gigaam *m, const float *pcm, size_t n, float **mel, size_t *frames) {
  return gmel_compute(&m->mel, pcm, n, mel, frames);
}

uint32_t gigaam_encoder_frames(const gigaam *m, uint32_t frames) {
  return conv1d_subsampling_frames(&m->sub, frames);
}

/* Copies t rows of `width` floats at `stride` from a GPU buffer into a new array. */
static int download_rows(gpu_buffer *b, uint32_t t, uint32_t stride, uint32_t width, float **out) {
  float *rows = mem_alloc((size_t)t * stride, sizeof *rows);
  float *x = mem_alloc((size_t)t * width, sizeof *x);
  int st = rows && x ? gpu_download(b, 0, rows, (size_t)t * stride * sizeof *rows) : STENO_ERR_NOMEM;
  for (uint32_t r = 0; !st && r < t; r++)
    memcpy(x + (size_t)r * width, rows + (size_t)r * stride, width * sizeof *x);
  free(rows);
  if (st) free(x);
  *out = st ? NULL : x;
  return st;
}

int gigaam_forward(gigaam_session *s, const float *mel, uint32_t frames, float **enc, float **head,
                   uint32_t *t_out) {
  if (enc) *enc = NULL;
  if (head) *head = NULL;
  *t_out = 0;
  const gigaam *m = s->m;
  if (frames < 1 || frames > (1u << 24))
    return err_set(STENO_ERR_INVALID, "gigaam: %u mel frames", frames);
  TRY(gigaam_arena_fit(s, frames));
  gigaam_arena *a = &s->arena;
  uint32_t t = gigaam_encoder_frames(m, frames);
  TRY(gpu_upload(a->mel, 0, mel, (size_t)frames * m->c.mels * sizeof *mel));
  TRY(conformer_positions(&m->c.dims, t, &a->enc));
  TRY(gpu_rec_begin(s->rec));
  conv1d_subsampling_forward(s->rec, &m->sub, &a->sub, a->mel, frames, a->enc.x);
  TRY(conformer_forward(s->rec, &m->c.dims, m->blocks, m->c.layers, &a->enc, t));
  uint32_t S = a->enc.stride, width = gpu_linear_width(&m->head);
  gpu_gemm_strided(s->rec, a->enc.x, S, &m->head, a->head, t, GPU_EPI_BIAS, 0);
  TRY(gpu_rec_run(s->rec));
  float *h = NULL, *e = NULL;
  int st = head ? download_rows(a->head, t, width, width, &h) : 0;
  if (!st && enc) st = download_rows(a->enc.x, t, S, m->c.dims.d, &e);
  if (st) {
    free(h);
    return st;
  }
  if (enc) *enc = e;
  if (head) *head = h;
  *t_out = t;
  return 0;
}

static int decode_host(const gigaam *m, const float *head, uint32_t t, const transducer_abort *stop,
                       dec_tokens *out) {
  uint32_t width = gpu_linear_width(&m->head);
  if (m->c.head == GIGAAM_CTC) return ctc_greedy(head, (int)t, (int)m->c.classes, (int)width, out);
  return transducer_greedy(&m->dec, head, (int)t, (int)width, stop, out);
}

static int decode_gpu(gigaam_session *s, uint32_t t, const transducer_abort *stop, dec_tokens *out) {
  if (!s->search) return err_set(STENO_ERR_INVALID, "gigaam: no GPU transducer decoder");
  return gpu_transducer_greedy(s->search, s->arena.head, t, gpu_linear_width(&s->m->head), stop,
                               out);
}

int gigaam_decode(const gigaam *m, const float *head, uint32_t t, dec_tokens *out) {
  return decode_host(m, head, t, NULL, out);
}

int gigaam_decode_gpu(gigaam_session *s, uint32_t t, dec_tokens *out) {
  return decode_gpu(s, t, NULL, out);
}

/* The text as transcribe.cpp gives it: every shown token's piece ("▁" → space),
 * one leading space removed, nothing else touched. */
static char *plain_text(const gigaam *m, const steno_result *r) {
  size_t cap = 1;
  for (size_t i = 0; i < r->ntokens; i++) cap += strlen(r->tokens[i].text);
  char *s = mem_alloc(cap, 1);
  if (!s) return NULL;
  size_t n = 0;
  for (size_t i = 0; i < r->ntokens; i++) n = vocab_append(&m->vocab, r->tokens[i].id, s, n, cap - 1);
  if (n > cap - 1) n = cap - 1;
  s[n] = 0;
  if (s[0] == ' ') memmove(s, s + 1, n);
  return s;
}

int gigaam_result(const gigaam *m, const dec_tokens *toks, double seconds, steno_result **out) {
  /* 4× subsampling of hop-sample frames: 40 ms for every published file. */
  double ms_per_frame = 4000.0 * m->c.hop / m->c.sample_rate;
  TRY(result_from_tokens(&m->vocab, toks, ms_per_frame, 0, seconds, out));
  char *text = plain_text(m, *out);
  if (!text) {
    steno_result_free(*out);
    *out = NULL;
    return STENO_ERR_NOMEM;
  }
  free((*out)->text);
  (*out)->text = text;
  return 0;
}

/* Transducers decode on a GPU (gpu_transducer_search_used). */
static bool decode_on_gpu(const gigaam_session *s) { return gpu_transducer_search_used(s->search); }

int gigaam_transcribe(gigaam_session *s, const float *pcm, size_t n, const transducer_abort *stop,
                      steno_result **out) {
  *out = NULL;
  const gigaam *m = s->m;
  double seconds = (double)n / m->c.sample_rate, t0 = time_now();
  float *mel, *head = NULL;
  size_t frames;
  uint32_t t;
  TRY(gigaam_features(m, pcm, n, &mel, &frames));
  if (frames == 0) return result_empty(seconds, out); /* under one window of samples */
  double t1 = time_now();
  bool gpu = decode_on_gpu(s);
  int st = gigaam_forward(s, mel, (uint32_t)frames, NULL, gpu ? NULL : &head, &t);
  free(mel);
  if (st) return st;
  double t2 = time_now();
  dec_tokens toks = {0};
  if (!(st = transducer_check_abort(stop)))
    st = gpu ? decode_gpu(s, t, stop, &toks) : decode_host(m, head, t, stop, &toks);
  free(head);
  if (!st) st = gigaam_result(m, &toks, seconds, out);
  dec_free(&toks);
  if (!st)
    (*out)->timings = (steno_timings){(t1 - t0) * 1e3, (t2 - t1) * 1e3, (time_now() - t2) * 1e3};
  return st;
}
