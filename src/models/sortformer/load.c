/* Sortformer: reading the hyperparameters and weights of a GGUF file (spec §4.1, §4.2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "models/sortformer/sortformer.h"
#include "nn/weights.h"

#define KEY "stt.sortformer."

static int encoder_config(const gguf_file *f, sortformer_config *c) {
  uint32_t factor, feat;
  const char *norm;
  TRY(gguf_get_u32(f, KEY "max_speakers", &c->speakers));
  TRY(gguf_get_u32(f, KEY "frame_hop", &c->frame_hop));
  TRY(gguf_get_u32(f, KEY "encoder.n_layers", &c->layers));
  TRY(gguf_get_u32(f, KEY "encoder.d_model", &c->dims.d));
  TRY(gguf_get_u32(f, KEY "encoder.n_heads", &c->dims.heads));
  TRY(gguf_get_u32(f, KEY "encoder.d_ff", &c->dims.ff));
  TRY(gguf_get_u32(f, KEY "encoder.conv_kernel", &c->dims.kernel));
  TRY(gguf_get_u32(f, KEY "encoder.subsampling_factor", &factor));
  TRY(gguf_get_u32(f, KEY "encoder.subsampling_channels", &c->channels));
  TRY(gguf_get_u32(f, KEY "encoder.feat_in", &feat));
  TRY(gguf_get_str(f, KEY "encoder.conv_norm_type", &norm));
  TRY(gguf_get_u32(f, "stt.frontend.num_mels", &c->mels));
  /* Not in the file: the C++ reference hard-codes biases, BatchNorm and xscaling. */
  c->dims.bias = true;
  c->dims.conv_ln = false;
  const conformer_dims *d = &c->dims;
  if (factor != 8)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: subsampling factor %u (only 8 is supported)",
                   f->name, factor);
  if (strcmp(norm, "batch_norm"))
    return err_set(STENO_ERR_UNSUPPORTED, "%s: conv_norm_type '%s' (batch_norm expected)",
                   f->name, norm);
  if (feat != c->mels)
    return err_set(STENO_ERR_FORMAT, "%s: encoder.feat_in %u but %u mels", f->name, feat, c->mels);
  if (c->speakers < 1 || c->speakers > 64 || c->layers < 1 || c->layers > 256 || d->heads < 1 ||
      d->d % d->heads || d->d % 2 || d->d > 8192 || d->ff < 1 || d->ff > 65536 ||
      d->kernel % 2 == 0 || d->kernel > 63 || c->channels < 1 || c->channels > 4096 ||
      c->mels < 8 || c->mels > 512)
    return err_set(STENO_ERR_FORMAT,
                   "%s: encoder shape not supported: %u speakers, %u layers, d %u, %u heads, "
                   "ff %u, kernel %u, %u channels, %u mels",
                   f->name, c->speakers, c->layers, d->d, d->heads, d->ff, d->kernel,
                   c->channels, c->mels);
  return 0;
}

static int transformer_config(const gguf_file *f, sortformer_config *c) {
  const char *act;
  bool pre_ln = false;
  TRY(gguf_get_u32(f, KEY "transformer.n_layers", &c->tf_layers));
  TRY(gguf_get_u32(f, KEY "transformer.d_model", &c->tf.d));
  TRY(gguf_get_u32(f, KEY "transformer.n_heads", &c->tf.heads));
  TRY(gguf_get_u32(f, KEY "transformer.d_ff", &c->tf.ff));
  TRY(gguf_get_str(f, KEY "transformer.activation", &act));
  TRY(gguf_opt_bool(f, KEY "transformer.pre_ln", &pre_ln));
  if (pre_ln)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: a pre-LN transformer (only post-LN is supported)",
                   f->name);
  if (strcmp(act, "relu"))
    return err_set(STENO_ERR_UNSUPPORTED, "%s: transformer activation '%s' (relu expected)",
                   f->name, act);
  if (c->tf_layers > 256 || c->tf.heads < 1 || c->tf.d < 1 || c->tf.d % c->tf.heads ||
      c->tf.d > 8192 || c->tf.ff < 1 || c->tf.ff > 65536)
    return err_set(STENO_ERR_FORMAT, "%s: transformer shape not supported: %u layers, d %u, "
                   "%u heads, ff %u", f->name, c->tf_layers, c->tf.d, c->tf.heads, c->tf.ff);
  sf_stream_config *s = &c->stream;
  TRY(gguf_get_u32(f, KEY "stream.chunk_len", &s->chunk));
  TRY(gguf_get_u32(f, KEY "stream.spkcache_len", &s->cache));
  TRY(gguf_get_u32(f, KEY "stream.fifo_len", &s->fifo));
  TRY(gguf_get_u32(f, KEY "stream.spkcache_update_period", &s->period));
  s->d = c->dims.d;
  s->speakers = c->speakers;
  s->lc = s->rc = 1; /* NeMo's chunk context (not stored) */
  sf_stream probe;
  int st = sf_stream_init(&probe, s); /* checks the sizes */
  sf_stream_free(&probe);
  return st ? err_wrap(st, "%s: ", f->name) : 0;
}

static int frontend(const gguf_file *f, sortformer *m) {
  uint32_t rate, nfft, win, hop;
  float pre, dither;
  const char *window, *normalize;
  TRY(gguf_get_u32(f, "stt.frontend.sample_rate", &rate));
  TRY(gguf_get_u32(f, "stt.frontend.n_fft", &nfft));
  TRY(gguf_get_u32(f, "stt.frontend.win_length", &win));
  TRY(gguf_get_u32(f, "stt.frontend.hop_length", &hop));
  TRY(gguf_get_str(f, "stt.frontend.window", &window));
  TRY(gguf_get_str(f, "stt.frontend.normalize", &normalize));
  TRY(gguf_get_f32(f, "stt.frontend.pre_emphasis", &pre));
  TRY(gguf_get_f32(f, "stt.frontend.dither", &dither));
  if (strcmp(window, "hann") || strcmp(normalize, "none"))
    return err_set(STENO_ERR_UNSUPPORTED, "%s: a %s window with normalize '%s' (hann, none expected)",
                   f->name, window, normalize);
  if (rate != 16000 || (uint64_t)hop * 8 != m->c.frame_hop)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: sample rate %u, hop %u, frame hop %u (16000, h, 8h "
                   "expected)", f->name, rate, hop, m->c.frame_hop);
  if (!(dither >= 0) || !(fabsf(pre) < 1))
    return err_set(STENO_ERR_FORMAT, "%s: dither %g, pre-emphasis %g", f->name, dither, pre);
  /* f_min and f_max are not written for Sortformer: the reference's 0 and 8000 Hz. */
  mel_config c = {.sample_rate = (int)rate, .n_fft = (int)nfft, .win_length = (int)win,
                  .hop = (int)hop, .n_mels = (int)m->c.mels, .preemphasis = pre, .f_min = 0,
                  .f_max = 8000, .normalize = false};
  int st = mel_init(&m->mel, &c);
  return st ? err_wrap(st, "%s: ", f->name) : 0;
}

/* A linear layer NAME.weight [k, rows] + NAME.bias [rows] kept on the host. */
static int host_linear(const gguf_file *f, const char *name, int64_t rows, int64_t k, float **w,
                       float **b) {
  char key[96];
  const gguf_tensor *t;
  const int64_t ne[2] = {k, rows};
  snprintf(key, sizeof key, "%s.weight", name);
  TRY(gguf_tensor_get(f, key, W_LINEAR_TYPES, 2, ne, &t));
  TRY(w_host(f, key, W_LINEAR_TYPES, (size_t)(rows * k), true, w));
  snprintf(key, sizeof key, "%s.bias", name);
  return w_host(f, key, W_F32, (size_t)rows, true, b);
}

static int weights(sortformer *m, const gguf_file *f) {
  const sortformer_config *c = &m->c;
  TRY(dw_subsampling_load(m->dev, f, c->channels, c->mels, c->dims.d, &m->sub));
  if (!(m->blocks = mem_alloc(c->layers, sizeof *m->blocks))) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i < c->layers; i++)
    TRY(conformer_load(m->dev, f, &c->dims, (int)i, &m->blocks[i]));
  float *bias;
  const char *names[1] = {"diar.encoder_proj.weight"};
  int64_t rows = c->tf.d;
  TRY(w_host(f, "diar.encoder_proj.bias", W_F32, c->tf.d, true, &bias));
  int st = w_linear(m->dev, f, names, 1, &rows, c->dims.d, W_LINEAR_TYPES, bias, c->tf.d, &m->proj);
  free(bias);
  if (st) return st;
  if (c->tf_layers && !(m->tf = mem_alloc(c->tf_layers, sizeof *m->tf))) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i < c->tf_layers; i++) TRY(postln_load(m->dev, f, &c->tf, (int)i, &m->tf[i]));
  TRY(host_linear(f, "diar.fc1", c->tf.d, c->tf.d, &m->fc1_w, &m->fc1_b));
  /* diar.spk_head (over the 2·d cache concatenation) is never used by the reference. */
  return host_linear(f, "diar.single_spk_head", c->speakers, c->tf.d, &m->head_w, &m->head_b);
}

int sortformer_load(gpu_device *dev, const gguf_file *f, sortformer **out) {
  *out = NULL;
  sortformer *m = mem_alloc(1, sizeof *m);
  if (!m) return STENO_ERR_NOMEM;
  m->dev = dev;
  int st = encoder_config(f, &m->c);
  if (!st) st = transformer_config(f, &m->c);
  if (!st) st = frontend(f, m);
  if (!st) st = weights(m, f);
  if (st) {
    sortformer_free(m);
    return st;
  }
  *out = m;
  return 0;
}

void sortformer_free(sortformer *m) {
  if (!m) return;
  dw_subsampling_free(&m->sub);
  for (uint32_t i = 0; m->blocks && i < m->c.layers; i++) conformer_free(&m->blocks[i]);
  for (uint32_t i = 0; m->tf && i < m->c.tf_layers; i++) postln_free(&m->tf[i]);
  free(m->blocks);
  free(m->tf);
  gpu_linear_free(&m->proj);
  free(m->fc1_w), free(m->fc1_b), free(m->head_w), free(m->head_b);
  mel_free(&m->mel);
  free(m);
}
