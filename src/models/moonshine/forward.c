/* Moonshine on the GPU: the conv stem and encoder over the whole clip (one
 * recorded submission, ending with every layer's cross K/V packed to f16), and
 * the decoder fed one token after another against its f16 self-attention cache.
 * Moonshine Streaming's front (frames, CMVN, asinh on the host; linear and
 * causal convs on the GPU) and adapter are here too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/conv.h"
#include "gpu/decode.h"
#include "gpu/elementwise.h"
#include "models/moonshine/moonshine.h"

static uint32_t pad64(uint32_t n) { return (n + 63) / 64 * 64; }

/* conv1 (no bias) → tanh → GroupNorm → conv2 + GELU → conv3 + GELU into x. */
static void record_stem(moonshine *m, size_t n, uint32_t t) {
  moonshine_arena *a = &m->a;
  const moonshine_config *c = &m->c;
  gpu_rec *rec = m->rec;
  uint32_t t1 = (uint32_t)((n - 127) / 64 + 1), t2 = (t1 - 7) / 3 + 1;
  gpu_im2col(rec, a->pcm, 0, 1, a->col0, m->conv0.wk, (uint32_t)n, 1, (gpu_conv1d){127, 64, 0});
  gpu_gemm_strided(rec, a->col0, m->conv0.wk, &m->conv0, a->s0, t1, GPU_EPI_BIAS, 0);
  gpu_group_norm(rec, a->s0, 0, m->conv0.n, &m->stem_norm, a->s0, 0, m->conv0.n, t1, c->d, true);
  gpu_im2col(rec, a->s0, 0, m->conv0.n, a->col1, m->conv1.wk, t1, c->d, (gpu_conv1d){7, 3, 0});
  gpu_gemm_strided(rec, a->col1, m->conv1.wk, &m->conv1, a->s1, t2, GPU_EPI_GELU, 0);
  gpu_im2col(rec, a->s1, 0, m->conv1.n, a->col2, m->conv2.wk, t2, 2 * c->d, (gpu_conv1d){3, 2, 0});
  gpu_gemm_strided(rec, a->col2, m->conv2.wk, &m->conv2, a->x, t, GPU_EPI_GELU, 0);
}

/* Streaming: the frames' linear + SiLU, causal conv 5/2 + SiLU, causal conv 5/2 into x. */
static void record_embedder(moonshine *m, uint32_t frames, uint32_t t) {
  moonshine_arena *a = &m->a;
  const moonshine_config *c = &m->c;
  gpu_rec *rec = m->rec;
  uint32_t f1 = (frames + 1) / 2;
  gpu_gemm_strided(rec, a->pcm, c->frame_len, &m->conv0, a->s0, frames, GPU_EPI_SILU, 0);
  /* A causal conv is im2col with pad 4 (the first output row sees x[−4..0]): the rows
   * past ⌈t/2⌉ that its right padding adds are computed by no GEMM. */
  gpu_im2col(rec, a->s0, 0, m->conv0.n, a->col1, m->conv1.wk, frames, c->enc_d, (gpu_conv1d){5, 2, 4});
  gpu_gemm_strided(rec, a->col1, m->conv1.wk, &m->conv1, a->s1, f1, GPU_EPI_SILU, 0);
  gpu_im2col(rec, a->s1, 0, m->conv1.n, a->col2, m->conv2.wk, f1, 2 * c->enc_d, (gpu_conv1d){5, 2, 4});
  gpu_gemm_strided(rec, a->col2, m->conv2.wk, &m->conv2, a->x, t, GPU_EPI_BIAS, 0);
}

/* t rows of d from a [t][S] buffer. */
static int read_rows(gpu_buffer *b, uint32_t t, uint32_t d, uint32_t S, float *out) {
  float *rows = mem_alloc((size_t)t * S, sizeof *rows);
  if (!rows) return STENO_ERR_NOMEM;
  int st = gpu_download(b, 0, rows, (size_t)t * S * sizeof *rows);
  for (uint32_t r = 0; !st && r < t; r++) memcpy(out + (size_t)r * d, rows + (size_t)r * S, d * sizeof *out);
  free(rows);
  return st;
}

int moonshine_frontend(const moonshine *m, const float *pcm, size_t n, float **out,
                       uint32_t *frames) {
  uint32_t L = m->c.frame_len;
  size_t f = (n + L - 1) / L;
  float *x = mem_alloc(f * L, sizeof *x);
  if (!x) return STENO_ERR_NOMEM;
  memcpy(x, pcm, n * sizeof *pcm); /* the tail's zeros from mem_alloc */
  for (size_t i = 0; i < f; i++) {
    float *r = x + i * L;
    double mean = 0, var = 0;
    for (uint32_t j = 0; j < L; j++) mean += r[j];
    mean /= L;
    for (uint32_t j = 0; j < L; j++) var += (r[j] - mean) * (r[j] - mean);
    double rms = sqrt(var / L + m->c.cmvn_eps);
    for (uint32_t j = 0; j < L; j++) r[j] = asinhf(m->c.k * (float)((r[j] - mean) / rms));
  }
  *out = x, *frames = (uint32_t)f;
  return 0;
}

/* The blocks over t frames of x (Streaming: each layer's sliding window). */
static void record_blocks(moonshine *m, uint32_t t, uint32_t S) {
  moonshine_arena *a = &m->a;
  const moonshine_config *c = &m->c;
  gpu_rope r = {a->rope, c->rot, 0};
  tf_enc_scratch s = {.stride = S, .x = a->x, .h = a->h, .o = a->o, .wide = a->wide,
                      .scores = a->scores, .att_heads = a->att_heads, .rope = &r};
  for (uint32_t i = 0; i < c->enc_layers; i++) {
    if (c->streaming) s.left = c->window[2 * i], s.right = c->window[2 * i + 1];
    tf_enc_forward(m->rec, &m->enc_dims, m->enc, c->enc_layers, i, &s, t, &m->enc_ln, a->enc);
  }
}

/* Streaming's adapter: enc += positions 0..t−1, then the projection into ad. */
static gpu_buffer *record_adapter(moonshine *m, uint32_t t, uint32_t S, uint32_t *stride) {
  moonshine_arena *a = &m->a;
  const moonshine_config *c = &m->c;
  gpu_add(m->rec, a->enc, 0, S, m->pos, 0, c->enc_d, a->enc, 0, S, t, c->enc_d);
  *stride = S;
  if (!c->has_proj) return a->enc;
  gpu_gemm_strided(m->rec, a->enc, S, &m->proj, a->ad, t, GPU_EPI_BIAS, 0);
  *stride = m->proj.n;
  return a->ad;
}

int moonshine_encode(moonshine *m, const float *pcm, size_t n, float *stem, float *enc,
                     float *adapter) {
  const moonshine_config *c = &m->c;
  uint32_t t = moonshine_frames(m, n), ea = c->enc_heads * c->enc_hd;
  uint32_t S = pad64(c->enc_d > ea ? c->enc_d : ea), frames = 0;
  if (!t)
    return err_set(STENO_ERR_INVALID, "moonshine: %zu samples give no encoder frame", n);
  if (n > UINT32_MAX / 2 || (c->streaming && t > c->max_pos))
    return err_set(STENO_ERR_INVALID, "moonshine: %zu samples (%u frames; the adapter has %u)", n,
                   t, c->max_pos);
  TRY(moonshine_grow(m, n, t));
  moonshine_arena *a = &m->a;
  if (c->streaming) {
    float *x;
    TRY(moonshine_frontend(m, pcm, n, &x, &frames));
    int st = gpu_upload(a->pcm, 0, x, (size_t)frames * c->frame_len * sizeof *x);
    free(x);
    TRY(st);
  } else {
    TRY(gpu_upload(a->pcm, 0, pcm, n * sizeof *pcm));
  }
  TRY(gpu_rec_begin(m->rec));
  if (c->streaming) record_embedder(m, frames, t);
  else record_stem(m, n, t);
  if (stem) { /* a submission of its own, to read the stem before the blocks */
    TRY(gpu_rec_run(m->rec));
    TRY(read_rows(a->x, t, c->enc_d, S, stem));
    TRY(gpu_rec_begin(m->rec));
  }
  record_blocks(m, t, S);
  if (enc && c->streaming) { /* the adapter adds to enc in place: read it first */
    TRY(gpu_rec_run(m->rec));
    TRY(read_rows(a->enc, t, c->enc_d, S, enc));
    TRY(gpu_rec_begin(m->rec));
  }
  uint32_t cs = S;
  gpu_buffer *cross = c->streaming ? record_adapter(m, t, S, &cs) : a->enc;
  tf_cross_kv(m->rec, &m->dec_dims, m->dec, c->dec_layers, cross, cs, a->kv, t);
  TRY(gpu_rec_run(m->rec));
  m->frames = t;
  if (enc && !c->streaming) TRY(read_rows(a->enc, t, c->enc_d, S, enc));
  return adapter && c->streaming ? read_rows(cross, t, c->d, cs, adapter) : 0;
}

int moonshine_feed(moonshine *m, int id, uint32_t pos, float *logits) {
  const moonshine_config *c = &m->c;
  moonshine_arena *a = &m->a;
  if (!m->frames) return err_set(STENO_ERR_INVALID, "moonshine: feed before encode");
  if (pos >= c->max_pos || id < 0 || (uint32_t)id >= c->vocab)
    return err_set(STENO_ERR_INVALID, "moonshine: token %d at position %u (%u tokens, %u positions)",
                   id, pos, c->vocab, c->max_pos);
  TRY(gpu_rec_begin(m->rec));
  gpu_embed(m->rec, &m->embed, (uint32_t)id, NULL, 0, a->dx, 0);
  tf_dec_scratch s = {.x = a->dx, .h = a->dh, .qkv = a->dqkv, .att = a->datt, .ff = a->dff,
                      .att_scratch = a->att_scratch, .rope_table = a->rope};
  for (uint32_t i = 0; i < c->dec_layers; i++)
    tf_dec_forward(m->rec, &m->dec_dims, &m->dec[i], &s, pos, m->frames);
  if (logits) {
    gpu_layer_norm(m->rec, a->dx, 0, c->d, &m->dec_ln, a->dh, 0, c->d, 1, c->d, NULL, NULL);
    gpu_gemv(m->rec, a->dh, 0, c->streaming ? &m->head : &m->embed, a->logits, 0, GPU_EPI_BIAS, 0);
  }
  TRY(gpu_rec_run(m->rec));
  return logits ? gpu_download(a->logits, 0, logits, (size_t)c->vocab * sizeof *logits) : 0;
}
