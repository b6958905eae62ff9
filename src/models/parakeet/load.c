/* Parakeet: reading the hyperparameters, weights and vocabulary of a GGUF file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "models/logmel.h"
#include "models/parakeet/parakeet.h"
#include "nn/weights.h"

#define KEY "stt.parakeet."

/* att_context_* and streaming.* (spec 1.2): full attention, or chunked_limited
 * with causal pre_encode (Nemotron); the other styles are not run yet. */
static int attention_context(const gguf_file *f, parakeet_config *c) {
  parakeet_streaming *s = &c->stream;
  const char *style = "regular";
  s->left = s->right = -1;
  TRY(gguf_opt_i32(f, KEY "encoder.att_context_left", &s->left));
  TRY(gguf_opt_i32(f, KEY "encoder.att_context_right", &s->right));
  TRY(gguf_opt_str(f, KEY "encoder.att_context_style", &style));
  if (!strcmp(style, "regular")) {
    if (s->left != -1 || s->right != -1)
      return err_set(STENO_ERR_UNSUPPORTED,
                     "%s: local attention %d/%d is not supported yet (full attention is)",
                     f->name, s->left, s->right);
    return 0;
  }
  if (strcmp(style, "chunked_limited"))
    return err_set(strcmp(style, "chunked_limited_with_rc") ? STENO_ERR_FORMAT : STENO_ERR_UNSUPPORTED,
                   "%s: att_context_style '%s' (regular and chunked_limited are run)", f->name, style);
  if (s->left < 0 || s->left > 100000 || s->right < 0 || s->right > 1000)
    return err_set(STENO_ERR_FORMAT, "%s: chunked_limited attention context %d/%d", f->name,
                   s->left, s->right);
  const gguf_kv *choices = NULL;
  TRY(gguf_opt_arr(f, KEY "encoder.att_context_size_choices", GGUF_VAL_INT32, &choices));
  if (choices && (choices->n < 2 || choices->n % 2 || choices->v.i32[0] != s->left ||
                  choices->v.i32[1] != s->right))
    return err_set(STENO_ERR_FORMAT,
                   "%s: att_context_size_choices must be pairs starting with (%d, %d)", f->name,
                   s->left, s->right);
  s->on = true;
  TRY(gguf_opt_i32(f, KEY "encoder.streaming.pre_encode_cache_size", &s->pre_cache));
  TRY(gguf_opt_i32(f, KEY "encoder.streaming.drop_extra_pre_encoded", &s->drop));
  TRY(gguf_opt_i32(f, KEY "encoder.streaming.sampling_frames_first", &s->first));
  if (s->pre_cache < 0 || s->pre_cache > 64 || s->drop < 0 || s->drop > 16 || s->first < 0 ||
      s->first > 64)
    return err_set(STENO_ERR_FORMAT, "%s: streaming pre_encode cache %d, drop %d, first %d",
                   f->name, s->pre_cache, s->drop, s->first);
  if (!s->first) s->first = 8;
  c->dims.chunk = (uint32_t)s->right + 1;
  c->dims.left_chunks = (uint32_t)s->left / c->dims.chunk;
  return 0;
}

static int config(const gguf_file *f, parakeet_config *c) {
  uint32_t factor;
  TRY(gguf_get_u32(f, KEY "encoder.n_layers", &c->layers));
  TRY(gguf_get_u32(f, KEY "encoder.d_model", &c->dims.d));
  TRY(gguf_get_u32(f, KEY "encoder.n_heads", &c->dims.heads));
  TRY(gguf_get_u32(f, KEY "encoder.d_ff", &c->dims.ff));
  TRY(gguf_get_u32(f, KEY "encoder.conv_kernel", &c->dims.kernel));
  TRY(gguf_get_u32(f, KEY "encoder.subsampling_factor", &factor));
  TRY(gguf_get_u32(f, KEY "encoder.subsampling_channels", &c->channels));
  TRY(gguf_get_u32(f, "stt.frontend.num_mels", &c->mels));
  TRY(gguf_opt_bool(f, KEY "encoder.use_bias", &c->dims.bias));
  TRY(gguf_opt_bool(f, KEY "encoder.xscaling", &c->xscaling));
  const conformer_dims *d = &c->dims;
  if (factor != 8)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: subsampling factor %u (only 8 is supported)",
                   f->name, factor);
  if (c->layers < 1 || c->layers > 256 || d->heads < 1 || d->d % d->heads || d->d % 2 ||
      d->d > 8192 || d->ff > 65536 || d->kernel % 2 == 0 || d->kernel > 63 || c->channels < 1 ||
      c->channels > 4096 || c->mels < 8 || c->mels > 512)
    return err_set(STENO_ERR_FORMAT,
                   "%s: encoder shape not supported: %u layers, d %u, %u heads, ff %u, kernel %u, "
                   "%u channels, %u mels",
                   f->name, c->layers, d->d, d->heads, d->ff, d->kernel, c->channels, c->mels);
  int32_t cleft = -1, cright = -1;
  const char *norm = "batch_norm", *head = "tdt";
  TRY(attention_context(f, c));
  TRY(gguf_opt_i32(f, KEY "encoder.conv_context_left", &cleft));
  TRY(gguf_opt_i32(f, KEY "encoder.conv_context_right", &cright));
  TRY(gguf_opt_str(f, KEY "encoder.conv_norm_type", &norm));
  TRY(gguf_opt_str(f, KEY "head_kind", &head));
  int32_t half = (int32_t)d->kernel / 2, k1 = (int32_t)d->kernel - 1;
  bool causal = cleft == k1 && cright == 0 && d->kernel > 1;
  if (!((cleft == -1 && cright == -1) || (cleft == half && cright == half) || causal))
    return err_set(STENO_ERR_UNSUPPORTED,
                   "%s: conv context %d/%d is not supported (symmetric %d/%d or causal %d/0 are)",
                   f->name, cleft, cright, half, half, k1);
  c->causal_conv = c->dims.causal_conv = causal;
  if (strcmp(norm, "batch_norm") && strcmp(norm, "layer_norm"))
    return err_set(STENO_ERR_FORMAT, "%s: unknown conv_norm_type '%s'", f->name, norm);
  c->dims.conv_ln = !strcmp(norm, "layer_norm");
  if (!strcmp(head, "tdt")) c->head = HEAD_TDT;
  else if (!strcmp(head, "rnnt")) c->head = HEAD_RNNT;
  else if (!strcmp(head, "ctc")) c->head = HEAD_CTC;
  else return err_set(STENO_ERR_FORMAT, "%s: unknown head_kind '%s'", f->name, head);
  return 0;
}

static int frontend(const gguf_file *f, mel_frontend *m, uint32_t mels) {
  uint32_t rate, nfft, win, hop;
  float pre, fmin, fmax, dither;
  const char *type, *window, *normalize;
  TRY(gguf_get_str(f, "stt.frontend.type", &type));
  TRY(gguf_get_u32(f, "stt.frontend.sample_rate", &rate));
  TRY(gguf_get_u32(f, "stt.frontend.n_fft", &nfft));
  TRY(gguf_get_u32(f, "stt.frontend.win_length", &win));
  TRY(gguf_get_u32(f, "stt.frontend.hop_length", &hop));
  TRY(gguf_get_str(f, "stt.frontend.window", &window));
  TRY(gguf_get_str(f, "stt.frontend.normalize", &normalize));
  TRY(gguf_get_f32(f, "stt.frontend.dither", &dither));
  TRY(gguf_get_f32(f, "stt.frontend.pre_emphasis", &pre));
  TRY(gguf_get_f32(f, "stt.frontend.f_min", &fmin));
  TRY(gguf_get_f32(f, "stt.frontend.f_max", &fmax));
  if (strcmp(type, "mel") || strcmp(window, "hann"))
    return err_set(STENO_ERR_UNSUPPORTED, "%s: frontend %s with a %s window", f->name, type, window);
  if (strcmp(normalize, "per_feature") && strcmp(normalize, "none"))
    return err_set(STENO_ERR_FORMAT, "%s: unknown normalization '%s'", f->name, normalize);
  if (rate != 16000)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: sample rate %u (16000 expected)", f->name, rate);
  if (!(dither >= 0)) return err_set(STENO_ERR_FORMAT, "%s: dither %g", f->name, dither);
  /* Dither is for training only: never applied. */
  mel_config c = {.sample_rate = (int)rate, .n_fft = (int)nfft, .win_length = (int)win,
                  .hop = (int)hop, .n_mels = (int)mels, .preemphasis = pre, .f_min = fmin,
                  .f_max = fmax, .normalize = !strcmp(normalize, "per_feature")};
  int st = mel_init(m, &c);
  return st ? err_wrap(st, "%s: ", f->name) : 0;
}

static int vocabulary(const gguf_file *f, text_vocab *v, uint32_t classes) {
  const gguf_kv *tokens, *types = NULL;
  TRY(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VAL_STRING, &tokens));
  TRY(gguf_opt_arr(f, "tokenizer.ggml.token_type", GGUF_VAL_INT32, &types));
  if (tokens->n < classes || tokens->n > (1u << 24))
    return err_set(STENO_ERR_FORMAT, "%s: %zu tokens for %u output classes", f->name, tokens->n,
                   classes);
  if (types && types->n != tokens->n)
    return err_set(STENO_ERR_FORMAT, "%s: %zu token types for %zu tokens", f->name, types->n,
                   tokens->n);
  TRY(vocab_init(v, (int)tokens->n));
  for (size_t i = 0; i < tokens->n; i++) {
    int type = types ? types->v.i32[i] : 1;
    TRY(vocab_set(v, (int)i, tokens->v.str[i].s, tokens->v.str[i].len, type));
  }
  return 0;
}

/* The CTC head, or the joint's encoder projection and the host decoder. */
static int head(parakeet *m, const gguf_file *f) {
  uint32_t d = m->c.dims.d;
  float *bias = NULL;
  const char *names[1];
  if (m->c.head == HEAD_CTC) {
    const gguf_tensor *t = gguf_tensor_find(f, "head.ctc.weight");
    if (!t) return err_set(STENO_ERR_FORMAT, "%s: tensor 'head.ctc.weight' is missing", f->name);
    uint64_t v = t->n_dims == 3 ? t->ne[2] : t->ne[1];
    if (v < 2 || v > (1u << 20))
      return err_set(STENO_ERR_FORMAT, "%s: 'head.ctc.weight' has %llu classes", f->name,
                     (unsigned long long)v);
    m->c.classes = (uint32_t)v;
    int64_t rows = (int64_t)v;
    TRY(w_host(f, "head.ctc.bias", W_F32, v, true, &bias));
    names[0] = "head.ctc.weight";
    int st = w_linear(m->dev, f, names, 1, &rows, d, W_LINEAR_TYPES, bias, v, &m->head);
    free(bias);
    return st;
  }
  uint32_t hidden, layers, vocab, joint, extra = 0;
  const char *act = "relu";
  TRY(gguf_get_u32(f, KEY "predictor.hidden", &hidden));
  TRY(gguf_get_u32(f, KEY "predictor.n_layers", &layers));
  TRY(gguf_get_u32(f, KEY "predictor.vocab", &vocab));
  TRY(gguf_get_u32(f, KEY "joint.hidden", &joint));
  TRY(gguf_get_u32(f, KEY "joint.num_extra_outputs", &extra));
  TRY(gguf_opt_str(f, KEY "joint.activation", &act));
  transducer *t = &m->dec;
  if (layers < 1 || layers > TRANSDUCER_MAX_LAYERS || hidden < 1 || hidden > 8192 || vocab < 2 ||
      vocab > (1u << 20) || joint < 1 || joint > 8192 || extra > 16)
    return err_set(STENO_ERR_FORMAT, "%s: predictor %u×%u, vocab %u, joint %u, %u extra outputs",
                   f->name, layers, hidden, vocab, joint, extra);
  if (!strcmp(act, "relu")) t->act = JOINT_RELU;
  else if (!strcmp(act, "sigmoid")) t->act = JOINT_SIGMOID;
  else if (!strcmp(act, "tanh")) t->act = JOINT_TANH;
  else return err_set(STENO_ERR_FORMAT, "%s: unknown joint activation '%s'", f->name, act);
  uint32_t max_symbols = 10;
  if (m->c.head == HEAD_TDT) {
    const gguf_kv *dur;
    TRY(gguf_get_arr(f, KEY "tdt.durations", GGUF_VAL_INT32, &dur));
    TRY(gguf_opt_u32(f, KEY "tdt.max_symbols", &max_symbols));
    if (max_symbols < 1 || max_symbols > TRANSDUCER_MAX_SYMBOLS)
      return err_set(STENO_ERR_FORMAT, "%s: tdt.max_symbols %u: must be 1 to %d symbols per frame",
                     f->name, max_symbols, TRANSDUCER_MAX_SYMBOLS);
    if (dur->n != extra || extra == 0)
      return err_set(STENO_ERR_FORMAT, "%s: %zu TDT durations for %u extra outputs", f->name,
                     dur->n, extra);
    for (size_t i = 0; i < dur->n; i++) {
      if (dur->v.i32[i] < 0 || dur->v.i32[i] > 1000)
        return err_set(STENO_ERR_FORMAT, "%s: TDT duration %d", f->name, dur->v.i32[i]);
      m->durations[i] = dur->v.i32[i];
    }
    t->durations = m->durations;
    t->n_durations = (int)extra;
  } else if (extra != 0) {
    return err_set(STENO_ERR_FORMAT, "%s: an RNN-T joint with %u extra outputs", f->name, extra);
  }
  t->vocab = (int)vocab, t->hidden = (int)hidden, t->layers = (int)layers, t->joint = (int)joint;
  t->max_symbols = (int)max_symbols;
  m->c.classes = vocab;
  /* Host weights, dequantized to f32 once. */
  size_t H = hidden, V = vocab + extra;
  char key[96];
  int w = 0;
  TRY(w_host(f, "pred.embed.weight", W_LINEAR_TYPES, vocab * H, true, &m->dec_weights[w]));
  t->embed = m->dec_weights[w++];
  for (uint32_t l = 0; l < layers; l++) {
    snprintf(key, sizeof key, "pred.lstm.%u.Wx", l);
    TRY(w_host(f, key, W_LINEAR_TYPES, 4 * H * H, true, &m->dec_weights[w]));
    t->wx[l] = m->dec_weights[w++];
    snprintf(key, sizeof key, "pred.lstm.%u.Wh", l);
    TRY(w_host(f, key, W_LINEAR_TYPES, 4 * H * H, true, &m->dec_weights[w]));
    t->wh[l] = m->dec_weights[w++];
    snprintf(key, sizeof key, "pred.lstm.%u.bias", l);
    TRY(w_host(f, key, W_F32, 4 * H, true, &m->dec_weights[w]));
    t->b[l] = m->dec_weights[w++];
  }
  TRY(w_host(f, "joint.pred.weight", W_LINEAR_TYPES, joint * H, true, &m->dec_weights[w]));
  t->pred_w = m->dec_weights[w++];
  TRY(w_host(f, "joint.pred.bias", W_F32, joint, true, &m->dec_weights[w]));
  t->pred_b = m->dec_weights[w++];
  TRY(w_host(f, "joint.out.weight", W_LINEAR_TYPES, V * joint, true, &m->dec_weights[w]));
  t->out_w = m->dec_weights[w++];
  TRY(w_host(f, "joint.out.bias", W_F32, V, true, &m->dec_weights[w]));
  t->out_b = m->dec_weights[w++];
  int64_t rows = joint;
  TRY(w_host(f, "joint.enc.bias", W_F32, joint, true, &bias));
  names[0] = "joint.enc.weight";
  int st = w_linear(m->dev, f, names, 1, &rows, d, W_LINEAR_TYPES, bias, joint, &m->head);
  free(bias);
  return st;
}

/* The dictionary copied out of the file, which steno_model_load closes. */
static int prompt_dictionary(parakeet_prompt *p, const gguf_kv *locales, const gguf_kv *indices) {
  p->locales = mem_alloc(locales->n, sizeof *p->locales);
  p->slots = mem_alloc(locales->n, sizeof *p->slots);
  if (!p->locales || !p->slots) return STENO_ERR_NOMEM;
  p->n_locales = locales->n;
  for (size_t i = 0; i < locales->n; i++) {
    p->slots[i] = (uint32_t)indices->v.i32[i];
    if (!(p->locales[i] = mem_strdup(locales->v.str[i].s))) return STENO_ERR_NOMEM;
  }
  return 0;
}

/* The prompt dictionary (locales → slots) and the auto slot, checked. */
static int prompt_keys(const gguf_file *f, parakeet_prompt *p) {
  const char *act = "relu";
  const gguf_kv *locales, *indices;
  p->auto_id = UINT32_MAX;
  TRY(gguf_get_u32(f, KEY "prompt.hidden", &p->hidden));
  TRY(gguf_opt_str(f, KEY "prompt.activation", &act));
  TRY(gguf_get_arr(f, KEY "prompt.dictionary.locales", GGUF_VAL_STRING, &locales));
  TRY(gguf_get_arr(f, KEY "prompt.dictionary.indices", GGUF_VAL_INT32, &indices));
  TRY(gguf_opt_u32(f, KEY "prompt.auto_id", &p->auto_id));
  if (p->n > 4096 || p->hidden < 1 || p->hidden > 65536)
    return err_set(STENO_ERR_FORMAT, "%s: %u prompts of hidden width %u", f->name, p->n, p->hidden);
  if (strcmp(act, "relu"))
    return err_set(STENO_ERR_UNSUPPORTED, "%s: prompt activation '%s' (relu is run)", f->name, act);
  if (locales->n != indices->n || !locales->n)
    return err_set(STENO_ERR_FORMAT, "%s: %zu prompt locales for %zu indices", f->name,
                   locales->n, indices->n);
  for (size_t i = 0; i < indices->n; i++)
    if (indices->v.i32[i] < 0 || (uint32_t)indices->v.i32[i] >= p->n)
      return err_set(STENO_ERR_FORMAT, "%s: prompt index %d of '%s' is not below %u", f->name,
                     indices->v.i32[i], locales->v.str[i].s, p->n);
  if (p->auto_id != UINT32_MAX && p->auto_id >= p->n)
    return err_set(STENO_ERR_FORMAT, "%s: prompt.auto_id %u of %u prompts", f->name, p->auto_id, p->n);
  /* No auto slot: the first dictionary entry (spec 1.10). */
  if (p->auto_id == UINT32_MAX) p->auto_id = (uint32_t)indices->v.i32[0];
  return prompt_dictionary(p, locales, indices);
}

/* Splits W0 [h][d + P] into its encoder columns (a linear with b0) and, per
 * prompt, b0 + its one-hot column (the per-language bias). */
static int prompt_in(parakeet *m, const gguf_file *f, const float *w0, const float *b0) {
  parakeet_prompt *p = &m->prompt;
  size_t d = m->c.dims.d, h = p->hidden, K = d + p->n, hp = (h + 63) / 64 * 64;
  float *we = mem_alloc(h * d, sizeof *we);
  p->bias = mem_alloc(p->n * hp, sizeof *p->bias);
  if (!we || !p->bias) {
    free(we);
    return STENO_ERR_NOMEM;
  }
  for (size_t r = 0; r < h; r++) {
    memcpy(we + r * d, w0 + r * K, d * sizeof *we);
    for (size_t i = 0; i < p->n; i++) p->bias[i * hp + r] = b0[r] + w0[r * K + d + i];
  }
  gpu_weight part = {we, (uint32_t)h};
  int st = gpu_linear_new(m->dev, GPU_F32, (uint32_t)d, &part, 1, b0, h, &p->in);
  free(we);
  return st ? err_wrap(st, "%s: prompt MLP: ", f->name) : 0;
}

/* Nemotron 3.5's prompt MLP, present when stt.parakeet.prompt.num_prompts > 0. */
static int prompt(parakeet *m, const gguf_file *f) {
  parakeet_prompt *p = &m->prompt;
  TRY(gguf_opt_u32(f, KEY "prompt.num_prompts", &p->n));
  if (!p->n) return 0;
  TRY(prompt_keys(f, p));
  size_t d = m->c.dims.d, h = p->hidden;
  float *w0 = NULL, *b0 = NULL, *b2 = NULL;
  int st = w_host(f, "prompt.mlp.0.weight", W_LINEAR_TYPES, h * (d + p->n), true, &w0);
  if (!st) st = w_host(f, "prompt.mlp.0.bias", W_F32, h, true, &b0);
  if (!st) st = w_host(f, "prompt.mlp.2.bias", W_F32, d, true, &b2);
  const gguf_tensor *t = st ? NULL : gguf_tensor_find(f, "prompt.mlp.0.weight");
  if (t && (t->n_dims != 2 || t->ne[0] != d + p->n))
    st = err_set(STENO_ERR_FORMAT, "%s: 'prompt.mlp.0.weight' is not [%zu, %zu]", f->name,
                 d + p->n, h);
  if (!st) st = prompt_in(m, f, w0, b0);
  const char *names[1] = {"prompt.mlp.2.weight"};
  int64_t rows = (int64_t)d;
  if (!st) st = w_linear(m->dev, f, names, 1, &rows, (int64_t)h, W_LINEAR_TYPES, b2, d, &p->out);
  free(w0), free(b0), free(b2);
  return st;
}

int parakeet_prompt_id(const parakeet *m, const char *language, uint32_t *id) {
  const parakeet_prompt *p = &m->prompt;
  *id = p->auto_id;
  if (!language || !*language) return 0;
  for (size_t i = 0; i < p->n_locales; i++)
    if (!strcmp(p->locales[i], language)) {
      *id = p->slots[i];
      return 0;
    }
  return err_set(STENO_ERR_INVALID, "parakeet: language '%s' is not in the model's prompt dictionary",
                 language);
}

int parakeet_load(gpu_device *dev, const gguf_file *f, parakeet **out) {
  *out = NULL;
  parakeet *m = mem_alloc(1, sizeof *m);
  if (!m) return STENO_ERR_NOMEM;
  m->dev = dev;
  int st = config(f, &m->c);
  if (!st) st = frontend(f, &m->mel, m->c.mels);
  /* chunked_limited models have NeMo's causal pre_encode (spec 1.5). */
  if (!st)
    st = (m->c.stream.on ? dw_subsampling_load_causal : dw_subsampling_load)(
        dev, f, m->c.channels, m->c.mels, m->c.dims.d, &m->sub);
  if (!st && !(m->blocks = mem_alloc(m->c.layers, sizeof *m->blocks))) st = STENO_ERR_NOMEM;
  for (uint32_t i = 0; !st && i < m->c.layers; i++)
    st = conformer_load(dev, f, &m->c.dims, (int)i, &m->blocks[i]);
  if (!st) st = head(m, f);
  if (!st) st = prompt(m, f);
  if (!st) st = vocabulary(f, &m->vocab, m->c.classes - 1);
  if (!st && m->c.head != HEAD_CTC) st = gpu_transducer_new(dev, &m->dec, &m->gdec);
  if (!st) st = logmel_for_model(dev, &m->mel, &m->gmel);
  if (st) {
    parakeet_free(m);
    return st;
  }
  *out = m;
  return 0;
}

void parakeet_free(parakeet *m) {
  if (!m) return;
  gpu_transducer_free(m->gdec);
  for (uint32_t i = 0; m->blocks && i < m->c.layers; i++) conformer_free(&m->blocks[i]);
  free(m->blocks);
  dw_subsampling_free(&m->sub);
  gpu_linear_free(&m->head);
  gpu_linear_free(&m->prompt.in);
  gpu_linear_free(&m->prompt.out);
  free(m->prompt.bias);
  for (size_t i = 0; i < m->prompt.n_locales; i++) free(m->prompt.locales[i]);
  free(m->prompt.locales), free(m->prompt.slots);
  for (size_t i = 0; i < sizeof m->dec_weights / sizeof *m->dec_weights; i++) free(m->dec_weights[i]);
  gpu_logmel_free(m->gmel);
  mel_free(&m->mel);
  vocab_free(&m->vocab);
  free(m);
}
