/* Moonshine sessions: a copy of the model's struct sharing its weights, with
 * its own recorder, decoder blocks (their KV caches) and activations. The
 * encoder's buffers grow to the longest clip seen (the warm path allocates
 * nothing). */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/attention.h"
#include "gpu/decode.h"
#include "models/moonshine/moonshine.h"

static uint32_t pad64(uint32_t n) { return (n + 63) / 64 * 64; }

/* Streaming: frames of frame_len (the tail zero-padded), then two convs of stride 2. */
static uint32_t streaming_frames(const moonshine *m, size_t n) {
  size_t f = (n + m->c.frame_len - 1) / m->c.frame_len, t = ((f + 1) / 2 + 1) / 2;
  return t > UINT32_MAX / 8 ? 0 : (uint32_t)t;
}

uint32_t moonshine_frames(const moonshine *m, size_t n) {
  if (m->c.streaming) return streaming_frames(m, n);
  if (n < 127) return 0;
  size_t t1 = (n - 127) / 64 + 1;
  if (t1 < 7) return 0;
  size_t t2 = (t1 - 7) / 3 + 1;
  if (t2 < 3) return 0;
  size_t t = (t2 - 3) / 2 + 1;
  return t > UINT32_MAX / 4 ? 0 : (uint32_t)t;
}

static void free_frames(moonshine_arena *a) {
  gpu_buffer *b[] = {a->pcm, a->col0,   a->s0,  a->col1, a->s1,   a->col2, a->x, a->h,
                     a->o,   a->wide,   a->scores, a->enc, a->kv, a->rope, a->ad};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) gpu_buffer_free(b[i]);
  a->pcm = a->col0 = a->s0 = a->col1 = a->s1 = a->col2 = a->x = a->h = a->o = a->wide = NULL;
  a->scores = a->enc = a->kv = a->rope = a->ad = NULL;
  a->frames = 0, a->samples = 0;
}

/* The RoPE table for positions 0..n−1. */
static int rope(moonshine *m, uint32_t n) {
  float *t;
  TRY(tf_rope_table(n, m->c.rot, m->c.theta, &t));
  int st = gpu_buffer_from(m->dev, t, (size_t)n * m->c.rot * sizeof *t, &m->a.rope);
  free(t);
  return st;
}

/* Rows of the stem's stages for n samples: Moonshine's three convs, or
 * Streaming's frames and its two causal convs (im2col pads both sides, so
 * its column buffers hold a few more rows than are used). */
static void stem_rows(const moonshine *m, size_t n, size_t rows[3], size_t cols[3]) {
  if (m->c.streaming) {
    size_t f = (n + m->c.frame_len - 1) / m->c.frame_len, f1 = (f + 1) / 2;
    rows[0] = f, cols[0] = (f + 3) / 2 + 1; /* frames; conv1's im2col rows */
    rows[1] = f1, cols[1] = (f1 + 3) / 2 + 1;
    rows[2] = 0, cols[2] = 0;
    return;
  }
  size_t t1 = (n - 127) / 64 + 1, t2 = (t1 - 7) / 3 + 1;
  rows[0] = t1, cols[0] = t1, rows[1] = t2, cols[1] = t2, rows[2] = cols[2] = moonshine_frames(m, n);
}

/* Buffers for n samples (t frames): the stem's, the encoder's, the cross caches. */
int moonshine_grow(moonshine *m, size_t n, uint32_t t) {
  const moonshine_config *c = &m->c;
  moonshine_arena *a = &m->a;
  if (n <= a->samples && t <= a->frames) return 0;
  free_frames(a);
  for (uint32_t i = 0; i < c->dec_layers; i++) gpu_buffer_free(m->dec[i].cross_cache), m->dec[i].cross_cache = NULL;
  uint32_t ea = c->enc_heads * c->enc_hd, S = pad64(c->enc_d > ea ? c->enc_d : ea);
  size_t wide = pad64(3 * ea) > pad64(c->enc_ff) ? pad64(3 * ea) : pad64(c->enc_ff), r[3], cr[3];
  stem_rows(m, n, r, cr);
  uint64_t range = gpu_device_info(m->dev)->max_storage_buffer_range, limit = (uint64_t)512 << 20;
  uint64_t per_head = (uint64_t)gpu_attention_scratch(t, 1) * sizeof(float);
  if (range && range < limit) limit = range;
  a->att_heads = c->enc_heads;
  while (a->att_heads > 1 && (uint64_t)a->att_heads * per_head > limit) a->att_heads--;
  while (c->enc_heads % a->att_heads) a->att_heads--;
  bool st = c->streaming;
  struct {
    gpu_buffer **b;
    size_t floats;
  } bufs[] = {{&a->pcm, st ? r[0] * c->frame_len : n},
              {&a->col0, st ? 1 : r[0] * m->conv0.wk},
              {&a->s0, r[0] * m->conv0.n},
              {&a->col1, cr[1 - st] * m->conv1.wk},
              {&a->s1, r[1] * m->conv1.n},
              {&a->col2, (st ? cr[1] : t) * m->conv2.wk},
              {&a->x, (size_t)t * S},
              {&a->h, (size_t)t * S},
              {&a->o, (size_t)t * S},
              {&a->wide, t * wide},
              {&a->scores, st ? 1 : gpu_attention_scratch(t, a->att_heads)},
              {&a->enc, (size_t)t * S},
              {&a->kv, (size_t)t * gpu_linear_width(&m->dec[0].cross_kv)},
              {&a->ad, st && c->has_proj ? (size_t)t * m->proj.n : 1}};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    TRY(gpu_buffer_new(m->dev, (bufs[i].floats ? bufs[i].floats : 1) * sizeof(float), bufs[i].b));
  for (uint32_t i = 0; i < c->dec_layers; i++)
    TRY(gpu_buffer_new(m->dev, (size_t)t * c->d * 4, &m->dec[i].cross_cache));
  TRY(rope(m, t > c->max_pos ? t : c->max_pos));
  a->samples = n, a->frames = t;
  return 0;
}

/* The decoder's buffers and self caches (of max_pos rows). */
static int decoder_arena(moonshine *m) {
  const moonshine_config *c = &m->c;
  moonshine_arena *a = &m->a;
  uint32_t hd = c->d / c->dec_heads;
  struct {
    gpu_buffer **b;
    size_t floats;
  } bufs[] = {{&a->dx, pad64(c->d)},
              {&a->dh, pad64(c->d)},
              {&a->dqkv, pad64(3 * c->d)},
              {&a->datt, pad64(c->d)},
              {&a->dff, gpu_linear_width(&m->dec[0].fc1)},
              {&a->logits, c->streaming ? m->head.n : m->embed.n},
              {&a->att_scratch, gpu_attend_scratch(c->max_pos, c->dec_heads, hd)}};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    TRY(gpu_buffer_new(m->dev, (bufs[i].floats ? bufs[i].floats : 1) * sizeof(float), bufs[i].b));
  for (uint32_t i = 0; i < c->dec_layers; i++)
    TRY(gpu_buffer_new(m->dev, (size_t)c->max_pos * c->d * 4, &m->dec[i].self_cache));
  a->host_logits = mem_alloc(c->vocab, sizeof *a->host_logits);
  return a->host_logits ? 0 : STENO_ERR_NOMEM;
}

void moonshine_session_free(moonshine *s) {
  if (!s) return;
  moonshine_arena *a = &s->a;
  free_frames(a);
  gpu_buffer *b[] = {a->dx, a->dh, a->dqkv, a->datt, a->dff, a->logits, a->att_scratch};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) gpu_buffer_free(b[i]);
  free(a->host_logits);
  gpu_rec_free(s->rec);
  for (uint32_t i = 0; s->dec && i < s->c.dec_layers; i++)
    gpu_buffer_free(s->dec[i].self_cache), gpu_buffer_free(s->dec[i].cross_cache);
  free(s->dec);
  free(s);
}

int moonshine_session_new(const moonshine *m, moonshine **out) {
  *out = NULL;
  moonshine *s = mem_alloc(1, sizeof *s);
  if (!s) return STENO_ERR_NOMEM;
  *s = *m; /* the weights' handles, shared */
  s->model = m;
  s->a = (moonshine_arena){0};
  s->frames = 0;
  s->dec = mem_alloc(m->c.dec_layers, sizeof *s->dec); /* blocks with caches of its own */
  int st = s->dec ? 0 : STENO_ERR_NOMEM;
  if (!st) memcpy(s->dec, m->dec, m->c.dec_layers * sizeof *s->dec);
  if (!st) st = decoder_arena(s);
  if (!st) st = gpu_rec_new(s->dev, &s->rec);
  if (st) {
    moonshine_session_free(s);
    return st;
  }
  gpu_rec_profile(s->rec, "moonshine");
  *out = s;
  return 0;
}
