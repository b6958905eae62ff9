/* Whisper: reading the hyperparameters, tokenizer and weights of a GGUF file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "gpu/attention.h"
#include "gpu/decode.h"
#include "nn/weights.h"
#include "models/logmel.h"
#include "models/whisper/whisper.h"

#define LN_EPS 1e-5f
#define ENC "stt.whisper.encoder."
#define DEC "stt.whisper.decoder."

static uint32_t pad64(uint32_t n) { return (n + 63) / 64 * 64; }

/* A required string key that must equal `want` (or `alt`). */
static int expect_str(const gguf_file *f, const char *key, bool required, const char *want,
                      const char *alt) {
  const char *v = want;
  TRY(required ? gguf_get_str(f, key, &v) : gguf_opt_str(f, key, &v));
  if (strcmp(v, want) && (!alt || strcmp(v, alt)))
    return err_set(STENO_ERR_UNSUPPORTED, "%s: %s is '%s' (steno reads '%s')", f->name, key, v, want);
  return 0;
}

static int shapes(const gguf_file *f, whisper_config *c) {
  uint32_t dd, mels;
  bool tie = true, scale = false;
  TRY(gguf_get_u32(f, ENC "n_layers", &c->enc_layers));
  TRY(gguf_get_u32(f, ENC "d_model", &c->d));
  TRY(gguf_get_u32(f, ENC "n_heads", &c->enc_heads));
  TRY(gguf_get_u32(f, ENC "ffn_dim", &c->enc_ff));
  TRY(gguf_get_u32(f, ENC "num_mel_bins", &c->mels));
  TRY(gguf_get_u32(f, ENC "max_source_positions", &c->n_audio_ctx));
  TRY(expect_str(f, ENC "activation", true, "gelu", NULL));
  TRY(gguf_get_u32(f, DEC "n_layers", &c->dec_layers));
  TRY(gguf_get_u32(f, DEC "d_model", &dd));
  TRY(gguf_get_u32(f, DEC "n_heads", &c->dec_heads));
  TRY(gguf_get_u32(f, DEC "ffn_dim", &c->dec_ff));
  TRY(gguf_get_u32(f, DEC "max_target_positions", &c->n_text_ctx));
  TRY(gguf_get_u32(f, DEC "vocab_size", &c->vocab));
  TRY(expect_str(f, DEC "activation", true, "gelu", NULL));
  TRY(gguf_opt_bool(f, DEC "tie_word_embeddings", &tie));
  TRY(gguf_opt_bool(f, DEC "scale_embedding", &scale));
  TRY(gguf_get_u32(f, "stt.frontend.num_mels", &mels));
  if (!tie || scale)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: an untied head or a scaled embedding", f->name);
  bool ok = dd == c->d && mels == c->mels && c->d >= 2 && c->d <= 8192 && c->enc_layers >= 1 &&
            c->enc_layers <= 256 && c->dec_layers >= 1 && c->dec_layers <= 256 &&
            c->enc_heads >= 1 && c->d % c->enc_heads == 0 && c->dec_heads >= 1 &&
            c->d % c->dec_heads == 0 && (c->d / c->dec_heads) % 2 == 0 &&
            c->d / c->dec_heads <= 256 && c->enc_ff >= 1 && c->enc_ff <= 65536 &&
            c->dec_ff >= 1 && c->dec_ff <= 65536 && c->mels >= 1 && c->mels <= 512 &&
            c->n_audio_ctx >= 1 && c->n_audio_ctx <= 16384 && c->n_text_ctx >= 4 &&
            c->n_text_ctx <= 4096 && c->vocab >= 8 && c->vocab <= (1u << 20);
  if (!ok)
    return err_set(STENO_ERR_FORMAT,
                   "%s: shapes not supported: d %u/%u, layers %u/%u, heads %u/%u, ffn %u/%u, "
                   "%u/%u mels, contexts %u/%u, vocabulary %u",
                   f->name, c->d, dd, c->enc_layers, c->dec_layers, c->enc_heads, c->dec_heads,
                   c->enc_ff, c->dec_ff, c->mels, mels, c->n_audio_ctx, c->n_text_ctx, c->vocab);
  c->win_frames = 2 * c->n_audio_ctx;
  return 0;
}

/* The blocks' sizes (Whisper's attention width is d; GELU MLPs, no rotary positions). */
static void dims(whisper *m) {
  const whisper_config *c = &m->c;
  m->enc_dims = (tf_dims){.d = c->d, .heads = c->enc_heads, .head_dim = c->d / c->enc_heads,
                          .ff = c->enc_ff, .mlp = TF_GELU};
  m->dec_dims = (tf_dims){.d = c->d, .heads = c->dec_heads, .head_dim = c->d / c->dec_heads,
                          .ff = c->dec_ff, .mlp = TF_GELU};
}

static int frontend(const gguf_file *f, whisper *m) {
  uint32_t rate, nfft, win, hop, n_samples = 0, frames = 0;
  float dither = 0;
  bool center = true;
  TRY(expect_str(f, "stt.frontend.type", true, "mel", NULL));
  TRY(expect_str(f, "stt.frontend.normalize", true, "whisper_logmel", NULL));
  TRY(expect_str(f, "stt.frontend.window", true, "hann_periodic", "hann"));
  TRY(expect_str(f, "stt.frontend.pad_mode", false, "reflect", NULL));
  TRY(expect_str(f, "stt.frontend.mel_norm", false, "slaney", NULL));
  TRY(gguf_get_u32(f, "stt.frontend.sample_rate", &rate));
  TRY(gguf_get_u32(f, "stt.frontend.n_fft", &nfft));
  TRY(gguf_get_u32(f, "stt.frontend.win_length", &win));
  TRY(gguf_get_u32(f, "stt.frontend.hop_length", &hop));
  TRY(gguf_opt_u32(f, "stt.frontend.n_samples", &n_samples));
  TRY(gguf_opt_u32(f, "stt.frontend.nb_max_frames", &frames));
  TRY(gguf_opt_f32(f, "stt.frontend.dither", &dither));
  TRY(gguf_opt_bool(f, "stt.frontend.center", &center));
  const whisper_config *c = &m->c;
  if (!n_samples) n_samples = 480000;
  if (!frames) frames = 3000;
  if (rate != 16000 || win != nfft || !center || dither != 0 || hop < 1 || nfft < 16 ||
      nfft > 8192 || frames != c->win_frames || n_samples / hop != frames)
    return err_set(STENO_ERR_UNSUPPORTED,
                   "%s: frontend of %u Hz, n_fft %u, window %u, hop %u, dither %g, center %d, "
                   "%u samples = %u frames per window (the encoder takes %u)",
                   f->name, rate, nfft, win, hop, dither, center, n_samples, frames, c->win_frames);
  uint32_t bins = nfft / 2 + 1;
  float *fb = NULL, *window = NULL;
  int st = w_host(f, "frontend.mel_filterbank", W_F32, (size_t)bins * c->mels, true, &fb);
  if (!st) st = w_host(f, "frontend.window", W_F32, nfft, true, &window);
  for (size_t i = 0; !st && i < (size_t)bins * c->mels; i++)
    if (!isfinite(fb[i])) st = err_set(STENO_ERR_FORMAT, "%s: the mel filterbank is not finite", f->name);
  if (!st) st = wmel_init(&m->mel, (int)nfft, (int)hop, (int)c->mels, n_samples, fb, window);
  free(fb);
  free(window);
  return st ? err_wrap(st, "%s: ", f->name) : 0;
}

/* The tokenizer: byte-level BPE strings, merges (for prompts) and the specials. */
static int tokenizer(const gguf_file *f, whisper *m) {
  const gguf_kv *tokens, *merges = NULL;
  TRY(expect_str(f, "tokenizer.ggml.model", true, "gpt2", NULL));
  TRY(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VAL_STRING, &tokens));
  TRY(gguf_opt_arr(f, "tokenizer.ggml.merges", GGUF_VAL_STRING, &merges));
  if (tokens->n != m->c.vocab)
    return err_set(STENO_ERR_FORMAT, "%s: %zu tokens for a vocabulary of %u", f->name, tokens->n,
                   m->c.vocab);
  size_t nm = merges ? merges->n : 0, n = tokens->n;
  const char **s = mem_alloc(n + nm + 1, sizeof *s);
  size_t *len = mem_alloc(n + nm + 1, sizeof *len);
  int st = s && len ? 0 : STENO_ERR_NOMEM;
  for (size_t i = 0; !st && i < n; i++) s[i] = tokens->v.str[i].s, len[i] = tokens->v.str[i].len;
  for (size_t i = 0; !st && i < nm; i++) s[n + i] = merges->v.str[i].s, len[n + i] = merges->v.str[i].len;
  bool by_id = false; /* set by the .bin adapter: tiktoken ranks */
  if (!st) st = gguf_opt_bool(f, "steno.bpe_ranks_are_ids", &by_id);
  if (!st) st = bpe_init(&m->tok, (int)n, s, len, false, by_id, nm, s + n, len + n);
  free(s);
  free(len);
  return st ? err_wrap(st, "%s: ", f->name) : 0;
}

/* A token id key (UINT32, or INT32 for tokenizer.ggml.*); `fallback` when absent. */
static int token_key(const gguf_file *f, const char *key, int fallback, bool required, int *out) {
  const gguf_kv *kv = gguf_find(f, key);
  *out = fallback;
  if (!kv && required) return err_set(STENO_ERR_FORMAT, "%s: key '%s' is missing", f->name, key);
  if (!kv) return 0;
  if (kv->type == GGUF_VAL_UINT32 && kv->v.u32[0] <= INT32_MAX) *out = (int)kv->v.u32[0];
  else if (kv->type == GGUF_VAL_INT32 && !strncmp(key, "tokenizer.", 10)) *out = kv->v.i32[0];
  else return err_set(STENO_ERR_FORMAT, "%s: key '%s' has type %s, expected UINT32", f->name, key,
                      gguf_val_type_name(kv->type));
  return 0;
}

static int id_list(const gguf_file *f, const char *key, uint32_t vocab, int32_t **out, size_t *n) {
  const gguf_kv *kv;
  TRY(gguf_opt_arr(f, key, GGUF_VAL_INT32, &kv));
  *out = NULL, *n = 0;
  if (!kv) return 0;
  if (!(*out = mem_alloc(kv->n + 1, sizeof **out))) return STENO_ERR_NOMEM;
  for (size_t i = 0; i < kv->n; i++) {
    if (kv->v.i32[i] < 0 || (uint32_t)kv->v.i32[i] >= vocab)
      return err_set(STENO_ERR_FORMAT, "%s: %s holds id %d of a vocabulary of %u", f->name, key,
                     kv->v.i32[i], vocab);
    (*out)[i] = kv->v.i32[i];
  }
  *n = kv->n;
  return 0;
}

static int specials(const gguf_file *f, whisper *m) {
  whisper_config *c = &m->c;
  int start, eot_literal = bpe_find(&m->tok, "<|endoftext|>");
  TRY(token_key(f, "stt.whisper.decoder_start_token_id", -1, true, &start));
  TRY(token_key(f, "stt.whisper.no_timestamps_token_id", -1, true, &c->no_timestamps));
  TRY(token_key(f, "stt.whisper.sot_token_id", start, false, &c->sot));
  TRY(token_key(f, "stt.whisper.transcribe_token_id", bpe_find(&m->tok, "<|transcribe|>"), false,
                &c->transcribe));
  TRY(token_key(f, "stt.whisper.translate_token_id", bpe_find(&m->tok, "<|translate|>"), false,
                &c->translate));
  TRY(token_key(f, "stt.whisper.prev_sot_token_id", bpe_find(&m->tok, "<|startofprev|>"), false,
                &c->prev_sot));
  TRY(token_key(f, "tokenizer.ggml.eos_token_id", eot_literal >= 0 ? eot_literal : 50257, false,
                &c->eot));
  int V = (int)c->vocab;
  if (c->sot < 0 || c->sot >= V || c->eot < 1 || c->eot >= V || c->no_timestamps < 1 ||
      c->no_timestamps + 1 >= V || c->eot >= c->no_timestamps || c->transcribe >= V ||
      c->translate >= V || c->prev_sot >= V)
    return err_set(STENO_ERR_FORMAT,
                   "%s: special tokens out of place: start %d, end %d, notimestamps %d, "
                   "transcribe %d, translate %d, startofprev %d in %d",
                   f->name, c->sot, c->eot, c->no_timestamps, c->transcribe, c->translate,
                   c->prev_sot, V);
  const gguf_kv *langs;
  TRY(gguf_opt_arr(f, "general.languages", GGUF_VAL_STRING, &langs));
  bool detect = langs && langs->n > 1, translate = detect;
  TRY(gguf_opt_bool(f, "stt.capability.lang_detect", &detect));
  TRY(gguf_opt_bool(f, "stt.capability.translate", &translate));
  c->multilingual = detect;
  for (size_t i = 0; detect && langs && i < langs->n; i++) {
    char sym[32];
    if (langs->v.str[i].len > 6 || c->n_langs == WHISPER_MAX_LANGS) continue;
    snprintf(sym, sizeof sym, "<|%s|>", langs->v.str[i].s);
    int id = bpe_find(&m->tok, sym);
    if (id < 0) continue;
    snprintf(c->lang_code[c->n_langs], sizeof c->lang_code[0], "%s", langs->v.str[i].s);
    c->lang_id[c->n_langs++] = id;
  }
  if (detect && (c->n_langs == 0 || c->transcribe < 0))
    return err_set(STENO_ERR_FORMAT,
                   "%s: a multilingual model needs general.languages with <|xx|> tokens and a "
                   "transcribe token",
                   f->name);
  c->can_translate = detect && translate && c->translate >= 0;
  TRY(id_list(f, "stt.whisper.suppress_tokens", c->vocab, &m->suppress, &m->n_suppress));
  return id_list(f, "stt.whisper.begin_suppress_tokens", c->vocab, &m->begin_suppress,
                 &m->n_begin_suppress);
}

/* ---- weights ---- */

/* One linear layer from NAME.weight (rows × k) and NAME.bias (absent for k projections). */
static int linear(whisper *m, const gguf_file *f, const char *name, int64_t rows, int64_t k,
                  bool bias, gpu_linear *out) {
  char w[160], b[160];
  snprintf(w, sizeof w, "%s.weight", name);
  snprintf(b, sizeof b, "%s.bias", name);
  float *bv = NULL;
  if (bias) TRY(w_host(f, b, W_F32, (size_t)rows, true, &bv));
  const char *names[1] = {w};
  int st = w_linear(m->dev, f, names, 1, &rows, k, W_LINEAR_TYPES, bv, bv ? (size_t)rows : 0, out);
  free(bv);
  return st;
}

/* Projections stacked along the output (q|k|v or k|v) with their biases (k: zeros). */
static int stacked(whisper *m, const gguf_file *f, const char *prefix, const char *const *parts,
                   int n, gpu_linear *out) {
  char w[3][160], b[160];
  const char *names[3];
  int64_t d = m->c.d, rows[3] = {d, d, d};
  float *bias = mem_alloc((size_t)n * d, sizeof *bias);
  if (!bias) return STENO_ERR_NOMEM;
  int st = 0;
  for (int i = 0; i < n && !st; i++) {
    snprintf(w[i], sizeof w[i], "%s.%s.weight", prefix, parts[i]);
    names[i] = w[i];
    if (!strcmp(parts[i], "k")) continue; /* Whisper's k projections have no bias */
    float *part;
    snprintf(b, sizeof b, "%s.%s.bias", prefix, parts[i]);
    st = w_host(f, b, W_F32, (size_t)d, true, &part);
    if (!st) memcpy(bias + i * d, part, (size_t)d * sizeof *bias);
    free(part);
  }
  if (!st) st = w_linear(m->dev, f, names, n, rows, d, W_LINEAR_TYPES, bias, (size_t)n * d, out);
  free(bias);
  return st;
}

/* A conv stem layer [D][in][3] as a linear layer over im2col's columns (c·3 + k). */
static int conv(whisper *m, const gguf_file *f, int i, uint32_t in, gpu_linear *out) {
  char w[64], b[64];
  snprintf(w, sizeof w, "enc.conv.%d.weight", i);
  snprintf(b, sizeof b, "enc.conv.%d.bias", i);
  uint32_t d = m->c.d;
  const int64_t ne[3] = {3, in, d};
  const gguf_tensor *t;
  TRY(gguf_tensor_get(f, w, W_CONV_TYPES, 3, ne, &t));
  float *bias;
  TRY(w_host(f, b, W_F32, d, true, &bias));
  gpu_weight part = {t->data, d};
  int st = gpu_linear_new(m->dev, t->type == GGUF_TYPE_F16 ? GPU_F16 : GPU_F32, 3 * in, &part, 1,
                          bias, d, out);
  free(bias);
  return st ? err_wrap(st, "%s: '%s': ", f->name, w) : 0;
}

static int encoder(whisper *m, const gguf_file *f) {
  const whisper_config *c = &m->c;
  char p[96], key[128];
  TRY(conv(m, f, 0, c->mels, &m->conv0));
  TRY(conv(m, f, 1, c->d, &m->conv1));
  if (!(m->enc = mem_alloc(c->enc_layers, sizeof *m->enc))) return STENO_ERR_NOMEM;
  static const char *const qkv[3] = {"q", "k", "v"};
  for (uint32_t i = 0; i < c->enc_layers; i++) {
    tf_enc_block *b = &m->enc[i];
    snprintf(p, sizeof p, "enc.blocks.%u", i);
    snprintf(key, sizeof key, "%s.norm_attn", p);
    TRY(w_norm(m->dev, f, key, c->d, LN_EPS, &b->ln_attn));
    snprintf(key, sizeof key, "%s.norm_ffn", p);
    TRY(w_norm(m->dev, f, key, c->d, LN_EPS, &b->ln_ffn));
    snprintf(key, sizeof key, "%s.attn", p);
    TRY(stacked(m, f, key, qkv, 3, &b->qkv));
    snprintf(key, sizeof key, "%s.attn.out", p);
    TRY(linear(m, f, key, c->d, c->d, true, &b->out));
    snprintf(key, sizeof key, "%s.ffn.fc1", p);
    TRY(linear(m, f, key, c->enc_ff, c->d, true, &b->fc1));
    snprintf(key, sizeof key, "%s.ffn.fc2", p);
    TRY(linear(m, f, key, c->d, c->enc_ff, true, &b->fc2));
  }
  return w_norm(m->dev, f, "enc.final_norm", c->d, LN_EPS, &m->enc_ln);
}

static int decoder(whisper *m, const gguf_file *f) {
  const whisper_config *c = &m->c;
  char p[96], key[128];
  int64_t vocab = c->vocab;
  const char *names[1] = {"dec.token_embd.weight"};
  TRY(w_linear(m->dev, f, names, 1, &vocab, c->d, W_LINEAR_TYPES, NULL, 0, &m->embed));
  TRY(w_gpu(m->dev, f, "dec.pos_emb.weight", W_F32, (size_t)c->n_text_ctx * c->d, &m->dec_pos));
  if (!(m->dec = mem_alloc(c->dec_layers, sizeof *m->dec))) return STENO_ERR_NOMEM;
  static const char *const qkv[3] = {"q", "k", "v"}, *const kv[2] = {"k", "v"};
  for (uint32_t i = 0; i < c->dec_layers; i++) {
    tf_dec_block *b = &m->dec[i];
    snprintf(p, sizeof p, "dec.blocks.%u", i);
    struct {
      const char *name;
      gpu_norm *n;
    } norms[] = {{"norm_self", &b->ln_self}, {"norm_cross", &b->ln_cross}, {"norm_ffn", &b->ln_ffn}};
    for (int k = 0; k < 3; k++) {
      snprintf(key, sizeof key, "%s.%s", p, norms[k].name);
      TRY(w_norm(m->dev, f, key, c->d, LN_EPS, norms[k].n));
    }
    snprintf(key, sizeof key, "%s.self_attn", p);
    TRY(stacked(m, f, key, qkv, 3, &b->self_qkv));
    snprintf(key, sizeof key, "%s.cross_attn", p);
    TRY(stacked(m, f, key, kv, 2, &b->cross_kv));
    snprintf(key, sizeof key, "%s.self_attn.out", p);
    TRY(linear(m, f, key, c->d, c->d, true, &b->self_out));
    snprintf(key, sizeof key, "%s.cross_attn.q", p);
    TRY(linear(m, f, key, c->d, c->d, true, &b->cross_q));
    snprintf(key, sizeof key, "%s.cross_attn.out", p);
    TRY(linear(m, f, key, c->d, c->d, true, &b->cross_out));
    snprintf(key, sizeof key, "%s.ffn.fc1", p);
    TRY(linear(m, f, key, c->dec_ff, c->d, true, &b->fc1));
    snprintf(key, sizeof key, "%s.ffn.fc2", p);
    TRY(linear(m, f, key, c->d, c->dec_ff, true, &b->fc2));
  }
  return w_norm(m->dev, f, "dec.final_norm", c->d, LN_EPS, &m->dec_ln);
}

/* Encoder positions [n_audio_ctx][stride] on the GPU (padding columns zero):
 * each window's x starts as a copy of them. */
static int positions(whisper *m, const gguf_file *f) {
  const whisper_config *c = &m->c;
  uint32_t S = pad64(c->d);
  float *p;
  TRY(w_host(f, "enc.pos_emb.weight", W_F32, (size_t)c->n_audio_ctx * c->d, true, &p));
  float *rows = mem_alloc((size_t)c->n_audio_ctx * S, sizeof *rows);
  int st = rows ? 0 : STENO_ERR_NOMEM;
  for (size_t t = 0; rows && t < c->n_audio_ctx; t++) memcpy(rows + t * S, p + t * c->d, c->d * sizeof *p);
  if (!st) st = gpu_buffer_from(m->dev, rows, (size_t)c->n_audio_ctx * S * sizeof *rows, &m->enc_pos);
  free(p);
  free(rows);
  return st;
}

/* The suppressed ids as bits for the GPU's greedy step (gpu_ts_greedy): the
 * words of every step's, then those of the first step's. */
static int blocked_bits(whisper *m) {
  uint32_t words = (m->c.vocab + 31) / 32;
  uint32_t *bits = mem_alloc(2 * (size_t)words, sizeof *bits);
  if (!bits) return STENO_ERR_NOMEM;
  const int32_t *lists[2] = {m->suppress, m->begin_suppress};
  size_t counts[2] = {m->n_suppress, m->n_begin_suppress};
  for (int l = 0; l < 2; l++)
    for (size_t i = 0; i < counts[l]; i++) {
      int32_t id = lists[l][i];
      if (id >= 0 && (uint32_t)id < m->c.vocab) bits[l * words + (uint32_t)id / 32] |= 1u << (id % 32);
    }
  int st = gpu_buffer_from(m->dev, bits, 2 * (size_t)words * sizeof *bits, &m->blocked);
  free(bits);
  m->blocked_words = words;
  return st;
}

/* A session's activations for one window and one token and its KV caches
 * (sized once: the warm path allocates nothing). */
static int arena(whisper *m) {
  const whisper_config *c = &m->c;
  whisper_arena *a = &m->a;
  gpu_device *dev = m->dev;
  size_t T = c->win_frames, t = c->n_audio_ctx, S = pad64(c->d), f = sizeof(float);
  size_t wide = pad64(3 * c->d) > pad64(c->enc_ff) ? pad64(3 * c->d) : pad64(c->enc_ff);
  size_t ctx = t > c->n_text_ctx ? t : c->n_text_ctx, hd = c->d / c->dec_heads;
  /* All heads' scores at once where one buffer holds them (and 512 MB is enough), else groups. */
  uint64_t range = gpu_device_info(dev)->max_storage_buffer_range, limit = (uint64_t)512 << 20;
  uint64_t per_head = (uint64_t)gpu_attention_scratch((uint32_t)t, 1) * f;
  if (range && range < limit) limit = range;
  m->att_heads = c->enc_heads;
  while (m->att_heads > 1 && (uint64_t)m->att_heads * per_head > limit) m->att_heads--;
  while (c->enc_heads % m->att_heads) m->att_heads--;
  struct {
    gpu_buffer **b;
    size_t floats;
  } bufs[] = {{&a->mel, T * c->mels},
              {&a->col0, T * m->conv0.wk},
              {&a->h0, T * S},
              {&a->col1, t * m->conv1.wk},
              {&a->x, t * S},
              {&a->h, t * S},
              {&a->wide, t * wide},
              {&a->o, t * S},
              {&a->enc, t * S},
              {&a->scores, gpu_attention_scratch((uint32_t)t, m->att_heads)},
              {&a->kv, t * gpu_linear_width(&m->dec[0].cross_kv)},
              {&a->dx, S},
              {&a->dh, S},
              {&a->dqkv, pad64(3 * c->d)},
              {&a->datt, S},
              {&a->dff, pad64(c->dec_ff)},
              {&a->att_scratch, gpu_attend_scratch((uint32_t)ctx, c->dec_heads, (uint32_t)hd)},
              {&a->ts_part, gpu_ts_greedy_scratch(c->vocab)}};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    TRY(gpu_buffer_new(dev, (bufs[i].floats ? bufs[i].floats : 1) * f, bufs[i].b));
  /* Logits straight into memory the host reads: no copy submission per token;
   * likewise the ids and log-probabilities the GPU's greedy steps choose. */
  TRY(gpu_buffer_readback_new(dev, (size_t)m->embed.n * f, &a->logits));
  TRY(gpu_buffer_readback_new(dev, (size_t)c->n_text_ctx * 4, &a->gen));
  TRY(gpu_buffer_readback_new(dev, (size_t)c->n_text_ctx * 4, &a->lp));
  for (uint32_t i = 0; i < c->dec_layers; i++) {
    TRY(gpu_buffer_new(dev, (size_t)c->n_text_ctx * c->d * 4, &m->dec[i].self_cache));
    TRY(gpu_buffer_new(dev, (size_t)c->n_audio_ctx * c->d * 4, &m->dec[i].cross_cache));
  }
  a->host_logits = mem_alloc(c->vocab, sizeof *a->host_logits);
  return a->host_logits ? 0 : STENO_ERR_NOMEM;
}

int whisper_load(gpu_device *dev, const gguf_file *f, whisper **out) {
  *out = NULL;
  whisper *m = mem_alloc(1, sizeof *m);
  if (!m) return STENO_ERR_NOMEM;
  m->dev = dev;
  int st = shapes(f, &m->c);
  if (!st) dims(m);
  if (!st) st = frontend(f, m);
  if (!st) st = tokenizer(f, m);
  if (!st) st = specials(f, m);
  if (!st) st = encoder(m, f);
  if (!st) st = decoder(m, f);
  if (!st) st = positions(m, f);
  if (!st) st = blocked_bits(m);
  if (!st) st = wmel_for_model(dev, &m->mel, &m->gmel);
  if (st) {
    whisper_free(m);
    return st;
  }
  *out = m;
  return 0;
}

void whisper_session_free(whisper *s) {
  if (!s) return;
  whisper_arena *a = &s->a;
  gpu_buffer *bufs[] = {a->mel, a->col0, a->h0,   a->col1, a->x,    a->h,      a->wide,
                        a->o,   a->enc,  a->scores, a->kv, a->dx,   a->dh,     a->dqkv,
                        a->datt, a->dff, a->logits, a->att_scratch, a->gen, a->lp,
                        a->ts_part, a->mel_top, a->mel_all};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) gpu_buffer_free(bufs[i]);
  free(a->host_logits);
  gpu_input_free(&a->pcm);
  gpu_rec_free(s->rec);
  gpu_rec_free(s->steps.layers[0]), gpu_rec_free(s->steps.layers[1]), gpu_rec_free(s->steps.embed);
  for (uint32_t i = 0; s->dec && i < s->c.dec_layers; i++)
    gpu_buffer_free(s->dec[i].self_cache), gpu_buffer_free(s->dec[i].cross_cache);
  free(s->dec);
  free(s);
}

int whisper_session_new(const whisper *m, whisper **out) {
  *out = NULL;
  whisper *s = mem_alloc(1, sizeof *s);
  if (!s) return STENO_ERR_NOMEM;
  *s = *m; /* the weights' handles, shared */
  s->model = m;
  s->a = (whisper_arena){0};
  s->dec = mem_alloc(m->c.dec_layers, sizeof *s->dec); /* blocks with caches of its own */
  int st = s->dec ? 0 : STENO_ERR_NOMEM;
  if (!st) memcpy(s->dec, m->dec, m->c.dec_layers * sizeof *s->dec);
  if (!st) st = arena(s);
  if (!st) st = gpu_rec_new(s->dev, &s->rec);
  for (int i = 0; i < 2 && !st; i++) st = gpu_rec_new(s->dev, &s->steps.layers[i]);
  if (!st) st = gpu_rec_new(s->dev, &s->steps.embed);
  s->steps.prepared[0] = s->steps.prepared[1] = -1;
  /* Recording ahead trades a token's ~60 dispatches of recording for a second
   * submission: on by default where the GPU is discrete (recording then costs
   * the host more than a submission), off where it shares the host's memory
   * (lavapipe: a submission costs more). STENO_WHISPER_AHEAD=0/1 overrides. */
  const char *ahead = getenv("STENO_WHISPER_AHEAD");
  s->steps.ahead = ahead && *ahead ? !strcmp(ahead, "1") : !gpu_device_info(s->dev)->unified;
  /* The greedy tier's choice on the GPU, chunks of steps without the host:
   * where the GPU is discrete (a token's round trip to the host costs ~0.25 ms
   * there); on a unified device the host's loop costs less than the steps a
   * chunk runs past the end of text. STENO_WHISPER_GREEDY=0/1 overrides. */
  const char *greedy = getenv("STENO_WHISPER_GREEDY");
  s->steps.gpu_greedy =
      greedy && *greedy ? !strcmp(greedy, "1") : !gpu_device_info(s->dev)->unified;
  if (st) {
    whisper_session_free(s);
    return st;
  }
  gpu_rec_profile(s->rec, "whisper");
  gpu_rec_profile(s->steps.layers[0], "whisper tokens (even positions)");
  gpu_rec_profile(s->steps.layers[1], "whisper tokens (odd positions)");
  gpu_rec_profile(s->steps.embed, "whisper token embeddings");
  *out = s;
  return 0;
}

void whisper_free(whisper *m) {
  if (!m) return;
  if (m->model) {
    whisper_session_free(m);
    return;
  }
  for (uint32_t i = 0; m->enc && i < m->c.enc_layers; i++) tf_enc_block_free(&m->enc[i]);
  for (uint32_t i = 0; m->dec && i < m->c.dec_layers; i++) tf_dec_block_free(&m->dec[i]);
  free(m->enc);
  free(m->dec);
  gpu_linear_free(&m->conv0), gpu_linear_free(&m->conv1), gpu_linear_free(&m->embed);
  w_norm_free(&m->enc_ln), w_norm_free(&m->dec_ln);
  gpu_buffer_free(m->dec_pos);
  gpu_buffer_free(m->enc_pos);
  gpu_buffer_free(m->blocked);
  gpu_wmel_free(m->gmel);
  wmel_free(&m->mel);
  bpe_free(&m->tok);
  free(m->suppress);
  free(m->begin_suppress);
  free(m);
}
