/* GigaAM: reading the hyperparameters, weights and vocabulary of a GGUF file
 * (spec §2.2, §2.3). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "models/gigaam/gigaam.h"
#include "nn/weights.h"

#define KEY "stt.gigaam."

/* The encoder's shape and attention; everything steno does not run is refused. */
static int encoder_config(const gguf_file *f, gigaam_config *c) {
  uint32_t factor, base, feat;
  const char *att, *norm;
  conformer_dims *d = &c->dims;
  TRY(gguf_get_u32(f, KEY "encoder.n_layers", &c->layers));
  TRY(gguf_get_u32(f, KEY "encoder.d_model", &d->d));
  TRY(gguf_get_u32(f, KEY "encoder.n_heads", &d->heads));
  TRY(gguf_get_u32(f, KEY "encoder.d_ff", &d->ff));
  TRY(gguf_get_u32(f, KEY "encoder.conv_kernel", &d->kernel));
  TRY(gguf_get_u32(f, KEY "encoder.subsampling_factor", &factor));
  TRY(gguf_get_u32(f, KEY "encoder.subs_kernel_size", &c->subs_kernel));
  TRY(gguf_get_u32(f, KEY "encoder.pos_emb_max_len", &base));
  TRY(gguf_get_u32(f, KEY "encoder.feat_in", &feat));
  TRY(gguf_get_str(f, KEY "encoder.self_attention_model", &att));
  TRY(gguf_get_str(f, KEY "encoder.conv_norm_type", &norm));
  TRY(gguf_get_u32(f, "stt.frontend.num_mels", &c->mels));
  if (strcmp(att, "rotary"))
    return err_set(STENO_ERR_UNSUPPORTED,
                   "%s: self_attention_model '%s' (GigaAM v3 is 'rotary'; only that is supported)",
                   f->name, att);
  if (strcmp(norm, "layer_norm"))
    return err_set(STENO_ERR_UNSUPPORTED, "%s: conv_norm_type '%s' (only 'layer_norm')", f->name,
                   norm);
  if (factor != 4)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: subsampling factor %u (only 4)", f->name, factor);
  if (c->layers < 1 || c->layers > 256 || d->heads < 1 || d->d % d->heads ||
      (d->d / d->heads) % 2 || d->d > 8192 || d->ff < 1 || d->ff > 65536 || d->kernel % 2 == 0 ||
      d->kernel > 63 || c->subs_kernel % 2 == 0 || c->subs_kernel > 63 || c->mels < 8 ||
      c->mels > 512 || feat != c->mels || base < 2)
    return err_set(STENO_ERR_FORMAT,
                   "%s: encoder shape not supported: %u layers, d %u, %u heads, ff %u, kernel %u, "
                   "subsampling kernel %u, %u mels (feat_in %u), rotary base %u",
                   f->name, c->layers, d->d, d->heads, d->ff, d->kernel, c->subs_kernel, c->mels,
                   feat, base);
  d->bias = true;
  d->conv_ln = true;
  d->rotary = true;
  d->rope_base = (float)base; /* transcribe.cpp hard-codes 5000, the published value */
  d->conv_norm_name = "conv.ln";
  return 0;
}

static int config(const gguf_file *f, gigaam_config *c) {
  const char *head;
  TRY(gguf_get_str(f, KEY "head_kind", &head));
  if (!strcmp(head, "ctc")) c->head = GIGAAM_CTC;
  else if (!strcmp(head, "rnnt")) c->head = GIGAAM_RNNT;
  else return err_set(STENO_ERR_FORMAT, "%s: unknown head_kind '%s' (ctc or rnnt)", f->name, head);
  return encoder_config(f, c);
}

/* The frontend: the file's own filterbank [mels][n_fft/2 + 1] and window [n_fft]. */
static int frontend(const gguf_file *f, gigaam *m) {
  uint32_t rate, nfft, win, hop;
  float lo, hi;
  bool center = false;
  const char *type;
  TRY(gguf_get_str(f, "stt.frontend.type", &type));
  TRY(gguf_get_u32(f, "stt.frontend.sample_rate", &rate));
  TRY(gguf_get_u32(f, "stt.frontend.n_fft", &nfft));
  TRY(gguf_get_u32(f, "stt.frontend.win_length", &win));
  TRY(gguf_get_u32(f, "stt.frontend.hop_length", &hop));
  TRY(gguf_get_f32(f, "stt.frontend.log_clamp_min", &lo));
  TRY(gguf_get_f32(f, "stt.frontend.log_clamp_max", &hi));
  TRY(gguf_opt_bool(f, "stt.frontend.center", &center));
  if (strcmp(type, "mel") || rate != 16000 || center || win != nfft || nfft < 16 || nfft > 8192 ||
      hop < 1 || hop > nfft)
    return err_set(STENO_ERR_UNSUPPORTED,
                   "%s: frontend %s at %u Hz, n_fft %u, window %u, hop %u, center %d (GigaAM's is "
                   "mel at 16000 Hz, window = n_fft, center false)",
                   f->name, type, rate, nfft, win, hop, center);
  /* The log clamp is GigaAM's constant [1e-9, 1e9] in the code (spec §2.2). */
  if (!(lo > 0 && lo < hi))
    return err_set(STENO_ERR_FORMAT, "%s: log clamp [%g, %g]", f->name, lo, hi);
  m->c.hop = hop, m->c.sample_rate = rate;
  uint32_t bins = nfft / 2 + 1, M = m->c.mels;
  const int64_t bank_ne[2] = {bins, M}, win_ne[1] = {nfft};
  const gguf_tensor *bank, *window;
  TRY(gguf_tensor_get(f, "frontend.mel_filterbank", W_F32, 2, bank_ne, &bank));
  TRY(gguf_tensor_get(f, "frontend.window", W_F32, 1, win_ne, &window));
  const float *b = bank->data, *w = window->data;
  for (size_t i = 0; i < (size_t)bins * M; i++)
    if (!(b[i] >= 0 && b[i] < 1e6f))
      return err_set(STENO_ERR_FORMAT, "%s: mel filterbank value %g", f->name, b[i]);
  for (size_t i = 0; i < nfft; i++)
    if (!(fabsf(w[i]) <= 1e3f)) return err_set(STENO_ERR_FORMAT, "%s: window value %g", f->name, w[i]);
  int st = gmel_init(&m->mel, (int)nfft, (int)hop, (int)M, b, w);
  return st ? err_wrap(st, "%s: ", f->name) : 0;
}

/* The vocabulary: `classes` − 1 pieces and blank. Char vocabularies keep
 * their pieces as they are, except the space, kept as "▁" so that words start
 * there (the text is the same). */
static int vocabulary(const gguf_file *f, gigaam *m) {
  const gguf_kv *tokens, *types = NULL;
  const char *model;
  TRY(gguf_get_str(f, "tokenizer.ggml.model", &model));
  TRY(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VAL_STRING, &tokens));
  TRY(gguf_opt_arr(f, "tokenizer.ggml.token_type", GGUF_VAL_INT32, &types));
  m->c.charwise = !strcmp(model, "char");
  if (!m->c.charwise && strcmp(model, "bpe") && strcmp(model, "unigram"))
    return err_set(STENO_ERR_FORMAT, "%s: tokenizer '%s' (char, bpe or unigram)", f->name, model);
  uint32_t V = m->c.classes;
  if (tokens->n < V - 1 || tokens->n > V)
    return err_set(STENO_ERR_FORMAT, "%s: %zu tokens for %u output classes", f->name, tokens->n, V);
  if (types && types->n != tokens->n)
    return err_set(STENO_ERR_FORMAT, "%s: %zu token types for %zu tokens", f->name, types->n,
                   tokens->n);
  TRY(vocab_init(&m->vocab, (int)tokens->n));
  for (size_t i = 0; i < tokens->n; i++) {
    int type = types ? types->v.i32[i] : TOK_NORMAL;
    const char *s = tokens->v.str[i].s;
    size_t len = tokens->v.str[i].len;
    if (m->c.charwise && type != TOK_CONTROL) type = TOK_NORMAL; /* no byte pieces */
    if (m->c.charwise && len == 1 && s[0] == ' ') s = "\xe2\x96\x81", len = 3;
    TRY(vocab_set(&m->vocab, (int)i, s, len, type));
  }
  return 0;
}

static int ctc_head(gigaam *m, const gguf_file *f) {
  uint32_t feat, V, d = m->c.dims.d;
  TRY(gguf_get_u32(f, KEY "head.feat_in", &feat));
  TRY(gguf_get_u32(f, KEY "head.num_classes", &V));
  if (feat != d || V < 2 || V > (1u << 20))
    return err_set(STENO_ERR_FORMAT, "%s: CTC head of %u inputs (d_model %u), %u classes", f->name,
                   feat, d, V);
  m->c.classes = V;
  float *bias;
  int64_t rows = V;
  const char *names[1] = {"head.ctc.weight"};
  TRY(w_host(f, "head.ctc.bias", W_F32, V, true, &bias));
  int st = w_linear(m->dev, f, names, 1, &rows, d, W_CONV_TYPES, bias, V, &m->head);
  free(bias);
  return st;
}

/* The RNN-T predictor (one LSTM layer) and joint on the host, in f32. */
static int rnnt_host(gigaam *m, const gguf_file *f, uint32_t H, uint32_t J, uint32_t V) {
  transducer *t = &m->dec;
  float **w = m->dec_weights;
  TRY(w_host(f, "pred.embed.weight", W_LINEAR_TYPES, (size_t)V * H, true, &w[0]));
  TRY(w_host(f, "pred.lstm.0.Wx", W_LINEAR_TYPES, 4 * (size_t)H * H, true, &w[1]));
  TRY(w_host(f, "pred.lstm.0.Wh", W_LINEAR_TYPES, 4 * (size_t)H * H, true, &w[2]));
  TRY(w_host(f, "pred.lstm.0.bias", W_F32, 4 * (size_t)H, true, &w[3]));
  TRY(w_host(f, "joint.pred.weight", W_LINEAR_TYPES, (size_t)J * H, true, &w[4]));
  TRY(w_host(f, "joint.pred.bias", W_F32, J, true, &w[5]));
  TRY(w_host(f, "joint.out.weight", W_LINEAR_TYPES, (size_t)V * J, true, &w[6]));
  TRY(w_host(f, "joint.out.bias", W_F32, V, true, &w[7]));
  /* GigaAM starts the predictor from a zero input (its blank embedding is the
   * padding row): the shared search feeds blank's row, so make it zero. */
  memset(w[0] + (size_t)(V - 1) * H, 0, H * sizeof *w[0]);
  *t = (transducer){.vocab = (int)V, .hidden = (int)H, .layers = 1, .joint = (int)J,
                    .act = JOINT_RELU, .max_symbols = 10, .embed = w[0], .wx = {w[1]},
                    .wh = {w[2]}, .b = {w[3]}, .pred_w = w[4], .pred_b = w[5], .out_w = w[6],
                    .out_b = w[7]};
  return 0;
}

static int rnnt_head(gigaam *m, const gguf_file *f) {
  uint32_t H, layers, V, J, classes, d = m->c.dims.d;
  TRY(gguf_get_u32(f, KEY "predictor.hidden", &H));
  TRY(gguf_get_u32(f, KEY "predictor.n_layers", &layers));
  TRY(gguf_get_u32(f, KEY "predictor.vocab", &V));
  TRY(gguf_get_u32(f, KEY "joint.hidden", &J));
  TRY(gguf_get_u32(f, KEY "joint.num_classes", &classes));
  if (layers != 1)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: %u predictor layers (GigaAM has 1)", f->name, layers);
  if (H < 1 || H > 8192 || J < 1 || J > 8192 || V < 2 || V > (1u << 20) || classes != V)
    return err_set(STENO_ERR_FORMAT, "%s: predictor %u wide, vocab %u, joint %u, %u classes",
                   f->name, H, V, J, classes);
  m->c.classes = V;
  TRY(rnnt_host(m, f, H, J, V));
  int64_t rows = J;
  const char *names[1] = {"joint.enc.weight"};
  float *bias;
  TRY(w_host(f, "joint.enc.bias", W_F32, J, true, &bias));
  int st = w_linear(m->dev, f, names, 1, &rows, d, W_LINEAR_TYPES, bias, J, &m->head);
  free(bias);
  return st ? st : gpu_transducer_new(m->dev, &m->dec, &m->gdec);
}

int gigaam_load(gpu_device *dev, const gguf_file *f, gigaam **out) {
  *out = NULL;
  gigaam *m = mem_alloc(1, sizeof *m);
  if (!m) return STENO_ERR_NOMEM;
  m->dev = dev;
  gigaam_config *c = &m->c;
  int st = config(f, c);
  if (!st) st = frontend(f, m);
  if (!st) st = conv1d_subsampling_load(dev, f, c->mels, c->dims.d, c->subs_kernel, &m->sub);
  if (!st && !(m->blocks = mem_alloc(c->layers, sizeof *m->blocks))) st = STENO_ERR_NOMEM;
  for (uint32_t i = 0; !st && i < c->layers; i++)
    st = conformer_load(dev, f, &c->dims, (int)i, &m->blocks[i]);
  if (!st) st = c->head == GIGAAM_CTC ? ctc_head(m, f) : rnnt_head(m, f);
  if (!st) st = vocabulary(f, m);
  if (st) {
    gigaam_free(m);
    return st;
  }
  *out = m;
  return 0;
}

void gigaam_free(gigaam *m) {
  if (!m) return;
  gpu_transducer_free(m->gdec);
  for (uint32_t i = 0; m->blocks && i < m->c.layers; i++) conformer_free(&m->blocks[i]);
  free(m->blocks);
  conv1d_subsampling_free(&m->sub);
  gpu_linear_free(&m->head);
  for (size_t i = 0; i < sizeof m->dec_weights / sizeof *m->dec_weights; i++) free(m->dec_weights[i]);
  gmel_free(&m->mel);
  vocab_free(&m->vocab);
  free(m);
}
