/* Parakeet: the forward pass (one recorded GPU submission) and decoding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/timer.h"
#include "decode/ctc.h"
#include "models/parakeet/parakeet.h"

uint32_t parakeet_encoder_frames(const parakeet *m, uint32_t valid) {
  return dw_subsampling_out(&m->sub, valid);
}

int parakeet_features(const parakeet *m, const float *pcm, size_t n, float **mel, size_t *frames,
                      size_t *valid) {
  *mel = NULL;
  *frames = mel_frames(&m->mel, n);
  *valid = 0;
  float *x = mem_alloc(*frames, (size_t)m->c.mels * sizeof *x);
  if (!x) return STENO_ERR_NOMEM;
  int st = mel_compute(&m->mel, pcm, n, x, valid);
  if (st) {
    free(x);
    return st;
  }
  *mel = x;
  return 0;
}

/* Grows the arena to hold `frames` mel frames (the warm path allocates nothing). */
static int arena_fit(parakeet_session *s, uint32_t frames) {
  parakeet_arena *a = &s->arena;
  if (frames <= a->frames) return 0;
  parakeet_arena_free(a);
  const parakeet *m = s->m;
  size_t T8 = parakeet_encoder_frames(m, frames), f = sizeof(float);
  gpu_device *dev = m->dev;
  int st = gpu_buffer_new(dev, frames * (size_t)m->c.mels * f, &a->mel);
  if (!st && m->prompt.n)
    st = gpu_buffer_new(dev, T8 * gpu_linear_width(&m->prompt.in) * f, &a->prompt_hidden);
  if (!st && m->prompt.n)
    st = gpu_buffer_new(dev, T8 * gpu_linear_width(&m->prompt.out) * f, &a->prompt_out);
  if (!st) st = dw_subsampling_scratch_new(dev, &m->sub, frames, &a->sub);
  if (!st) st = gpu_buffer_new(dev, T8 * gpu_linear_width(&m->head) * f, &a->head);
  if (!st) st = conformer_scratch_new(dev, &m->c.dims, (uint32_t)T8, &a->enc);
  if (st) {
    parakeet_arena_free(a);
    return st;
  }
  a->frames = frames;
  return 0;
}

void parakeet_record_head(parakeet_session *s, gpu_buffer *x, uint32_t stride, uint32_t t,
                          gpu_buffer *hidden, gpu_buffer *out, gpu_buffer *head) {
  const parakeet *m = s->m;
  if (m->prompt.n) {
    /* enc' = W2·ReLU(W0·[enc ; onehot] + b0) + b2: the one-hot is in prompt_in's bias. */
    gpu_gemm_strided(s->rec, x, stride, &s->prompt_in, hidden, t, GPU_EPI_RELU, 0);
    gpu_gemm_strided(s->rec, hidden, gpu_linear_width(&s->prompt_in), &m->prompt.out, out, t,
                     GPU_EPI_BIAS, 0);
    x = out;
    stride = gpu_linear_width(&m->prompt.out);
  }
  gpu_gemm_strided(s->rec, x, stride, &m->head, head, t, GPU_EPI_BIAS, 0);
}

int parakeet_download_rows(gpu_buffer *b, uint32_t stride, uint32_t t, uint32_t d, float **out) {
  *out = NULL;
  float *rows = mem_alloc((size_t)t * stride, sizeof *rows), *e = mem_alloc((size_t)t * d, sizeof *e);
  int st = rows && e ? gpu_download(b, 0, rows, (size_t)t * stride * sizeof *rows) : STENO_ERR_NOMEM;
  for (uint32_t r = 0; !st && r < t; r++)
    memcpy(e + (size_t)r * d, rows + (size_t)r * stride, d * sizeof *e);
  free(rows);
  if (st) free(e);
  else *out = e;
  return st;
}

int parakeet_upload_pcm(parakeet_session *s, const float *const *pcm, const size_t *n,
                        uint32_t clips, size_t room) {
  const parakeet *m = s->m;
  if (!m->gmel) return err_set(STENO_ERR_INVALID, "parakeet: no GPU features on this device");
  size_t total = 0;
  for (uint32_t i = 0; i < clips; i++) {
    if (n[i] > UINT32_MAX - total)
      return err_set(STENO_ERR_INVALID, "parakeet: %u clips too long", clips);
    total += n[i];
  }
  size_t floats = gpu_logmel_input_floats(clips, total);
  if (floats > UINT32_MAX) return err_set(STENO_ERR_INVALID, "parakeet: %u clips too long", clips);
  void *host;
  TRY(gpu_input_map(m->dev, &s->pcm, floats * sizeof(float), room * sizeof(float), &host));
  gpu_logmel_input(m->gmel, pcm, n, clips, host);
  return 0;
}

/* parakeet_forward from mel frames on the host, or (mel NULL) from the n
 * samples pcm whose features the GPU makes. */
static int forward(parakeet_session *s, const float *mel, const float *pcm, size_t n,
                   uint32_t valid, float **enc, float **head, uint32_t *t_out) {
  if (enc) *enc = NULL;
  if (head) *head = NULL;
  *t_out = 0;
  if (valid < 2) return err_set(STENO_ERR_INVALID, "parakeet: %u mel frames is too few", valid);
  const parakeet *m = s->m;
  TRY(arena_fit(s, valid));
  parakeet_arena *a = &s->arena;
  uint32_t t = parakeet_encoder_frames(m, valid), d = m->c.dims.d;
  TRY(parakeet_session_prompt(s));
  if (mel) TRY(gpu_upload(a->mel, 0, mel, (size_t)valid * m->c.mels * sizeof *mel));
  else TRY(parakeet_upload_pcm(s, &pcm, &n, 1,
                               gpu_logmel_input_floats(1, ((size_t)a->frames + 1) * m->mel.c.hop)));
  TRY(conformer_positions_kept(&m->c.dims, t, &a->enc));
  TRY(gpu_rec_begin(s->rec));
  if (!mel) gpu_logmel_record(s->rec, m->gmel, gpu_input_record(s->rec, &s->pcm), 1, valid, a->mel);
  TRY(conformer_project_positions(s->rec, &m->c.dims, m->blocks, m->c.layers, &a->enc, t));
  float scale = m->c.xscaling ? sqrtf((float)d) : 0;
  dw_subsampling_forward(s->rec, &m->sub, &a->sub, a->mel, valid, a->enc.x, scale);
  TRY(conformer_forward(s->rec, &m->c.dims, m->blocks, m->c.layers, &a->enc, t));
  uint32_t S = a->enc.stride, width = gpu_linear_width(&m->head);
  parakeet_record_head(s, a->enc.x, S, t, a->prompt_hidden, a->prompt_out, a->head);
  TRY(gpu_rec_run(s->rec));
  conformer_keep_positions(&a->enc);

  float *h = NULL, *e = NULL;
  int st = 0;
  if (head) {
    h = mem_alloc((size_t)t * width, sizeof *h);
    st = h ? gpu_download(a->head, 0, h, (size_t)t * width * sizeof *h) : STENO_ERR_NOMEM;
  }
  if (!st && enc) st = parakeet_download_rows(a->enc.x, S, t, d, &e);
  if (st) {
    free(h);
    free(e);
    return st;
  }
  if (enc) *enc = e;
  if (head) *head = h;
  *t_out = t;
  return 0;
}

int parakeet_forward(parakeet_session *s, const float *mel, uint32_t valid, float **enc, float **head,
                     uint32_t *t) {
  if (!mel) return err_set(STENO_ERR_INVALID, "parakeet: no mel frames");
  return forward(s, mel, NULL, 0, valid, enc, head, t);
}

int parakeet_forward_pcm(parakeet_session *s, const float *pcm, size_t n, float **enc, float **head,
                         uint32_t *t) {
  size_t valid = n / (size_t)s->m->mel.c.hop;
  if (!pcm || valid > UINT32_MAX) return err_set(STENO_ERR_INVALID, "parakeet: %zu samples", n);
  return forward(s, NULL, pcm, n, (uint32_t)valid, enc, head, t);
}

/* Greedy decoding of the head's output on the host; stop is polled during a
 * transducer search. */
static int decode_host(const parakeet *m, const float *head, uint32_t t,
                       const transducer_abort *stop, dec_tokens *out) {
  uint32_t width = gpu_linear_width(&m->head);
  if (m->c.head == HEAD_CTC) return ctc_greedy(head, (int)t, (int)m->c.classes, (int)width, out);
  return transducer_greedy(&m->dec, head, (int)t, (int)width, stop, out);
}

/* The same search on the device, from the arena's copy of the head. */
static int decode_gpu(parakeet_session *s, uint32_t t, const transducer_abort *stop,
                      dec_tokens *out) {
  if (!s->search) return err_set(STENO_ERR_INVALID, "parakeet: no GPU transducer decoder");
  uint32_t width = gpu_linear_width(&s->m->head);
  return gpu_transducer_greedy(s->search, s->arena.head, t, width, stop, out);
}

int parakeet_decode(const parakeet *m, const float *head, uint32_t t, dec_tokens *out) {
  return decode_host(m, head, t, NULL, out);
}

int parakeet_decode_gpu(parakeet_session *s, uint32_t t, dec_tokens *out) {
  return decode_gpu(s, t, NULL, out);
}

/* Transducers decode on a GPU (gpu_transducer_search_used). */
bool parakeet_decode_on_gpu(const parakeet_session *s) { return gpu_transducer_search_used(s->search); }

int parakeet_decode_rows(parakeet_session *s, gpu_buffer *head_gpu, const float *head,
                         uint32_t t, const transducer_abort *stop, dec_tokens *out) {
  if (!head_gpu) return decode_host(s->m, head, t, stop, out);
  if (!s->search) return err_set(STENO_ERR_INVALID, "parakeet: no GPU transducer decoder");
  return gpu_transducer_greedy(s->search, head_gpu, t, gpu_linear_width(&s->m->head), stop, out);
}

int parakeet_transcribe(parakeet_session *s, const float *pcm, size_t n,
                        const transducer_abort *stop, steno_result **out) {
  *out = NULL;
  const parakeet *m = s->m;
  double seconds = (double)n / m->mel.c.sample_rate;
  /* Too short for two mel frames: no speech to find. */
  if (n / (size_t)m->mel.c.hop < 2) return result_empty(seconds, out);
  float *mel = NULL, *head = NULL;
  size_t frames, valid;
  uint32_t t;
  double t0 = time_now();
  /* Features on the GPU: made in the encoder's submission (its stage's time). */
  if (!m->gmel) TRY(parakeet_features(m, pcm, n, &mel, &frames, &valid));
  double t1 = time_now();
  bool gpu = parakeet_decode_on_gpu(s);
  int st = m->gmel ? parakeet_forward_pcm(s, pcm, n, NULL, gpu ? NULL : &head, &t)
                   : parakeet_forward(s, mel, (uint32_t)valid, NULL, gpu ? NULL : &head, &t);
  free(mel);
  if (st) return st;
  double t2 = time_now();
  dec_tokens toks = {0};
  if (!(st = transducer_check_abort(stop)))
    st = gpu ? decode_gpu(s, t, stop, &toks) : decode_host(m, head, t, stop, &toks);
  free(head);
  double ms_per_frame = 1000.0 * 8 * m->mel.c.hop / m->mel.c.sample_rate;
  if (!st) st = result_from_tokens(&m->vocab, &toks, ms_per_frame, 0, seconds, out);
  dec_free(&toks);
  if (!st)
    (*out)->timings = (steno_timings){(t1 - t0) * 1e3, (t2 - t1) * 1e3, (time_now() - t2) * 1e3};
  return st;
}
