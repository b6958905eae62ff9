/* whisper.cpp's legacy ggml .bin files (spec §2.11), rewritten in memory as a
 * GGUF image in the published layout, so that one loader reads both: the
 * hyperparameters become the stt.whisper.* keys, the special tokens and
 * languages follow from the vocabulary size, the raw-byte (tiktoken)
 * vocabulary gets the specials and timestamps after it, the suppress list is
 * OpenAI's non-speech list computed from that vocabulary, and the tensors are
 * renamed. The tensor payloads are copied, so a model takes its size twice in
 * host memory until it is on the GPU. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/mem.h"
#include "models/whisper/whisper.h"

#define BIN_MAGIC 0x67676d6cu /* "ggml" little-endian */
#define ALIGN 32

/* whisper.cpp's language table: language k is token sot + 1 + k. */
static const char *const LANGS[] = {
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv",
    "it", "id", "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no",
    "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr",
    "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
    "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu",
    "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
    "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"};

/* ---- reading the .bin ---- */

typedef struct {
  const uint8_t *p, *end;
  const char *name;
} reader;

static int take(reader *r, void *out, size_t n) {
  if ((size_t)(r->end - r->p) < n) return err_set(STENO_ERR_FORMAT, "%s: truncated", r->name);
  memcpy(out, r->p, n);
  r->p += n;
  return 0;
}

static int take_i32(reader *r, int32_t *v) { return take(r, v, 4); }

typedef struct {
  int32_t n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx,
      n_text_state, n_text_head, n_text_layer, n_mels, ftype;
} bin_hparams;

static int hparams(reader *r, bin_hparams *h) {
  uint32_t magic = 0;
  TRY(take(r, &magic, 4));
  if (magic != BIN_MAGIC) return err_set(STENO_ERR_FORMAT, "%s: not a whisper.cpp .bin file", r->name);
  TRY(take(r, h, sizeof *h));
  bool ok = h->n_audio_layer >= 1 && h->n_audio_layer <= 64 && h->n_text_layer >= 1 &&
            h->n_text_layer <= 64 && (h->n_mels == 80 || h->n_mels == 128) &&
            h->n_vocab >= 51864 && h->n_vocab <= 51866 && h->n_audio_head > 0 &&
            h->n_audio_state > 0 && h->n_audio_state % h->n_audio_head == 0 &&
            h->n_text_head > 0 && h->n_text_state > 0 && h->n_text_state % h->n_text_head == 0 &&
            h->n_audio_ctx >= 1 && h->n_audio_ctx <= 4096 && h->n_text_ctx >= 1 &&
            h->n_text_ctx <= 4096 && h->ftype >= 0 && h->ftype % 1000 <= 30;
  if (!ok)
    return err_set(STENO_ERR_UNSUPPORTED,
                   "%s: not a Whisper model (vocabulary %d, %d/%d layers, %d mels, states %d/%d, "
                   "heads %d/%d, contexts %d/%d, ftype %d)",
                   r->name, h->n_vocab, h->n_audio_layer, h->n_text_layer, h->n_mels,
                   h->n_audio_state, h->n_text_state, h->n_audio_head, h->n_text_head,
                   h->n_audio_ctx, h->n_text_ctx, h->ftype);
  return 0;
}

typedef struct {
  char name[257];
  uint32_t type, n_dims;
  int64_t ne[4];
  const uint8_t *data;
  size_t nbytes;
} bin_tensor;

static int tensor_record(reader *r, bin_tensor *t) {
  int32_t n_dims = 0, len = 0, type = -1;
  TRY(take_i32(r, &n_dims));
  TRY(take_i32(r, &len));
  TRY(take_i32(r, &type));
  if (n_dims < 1 || n_dims > 4 || len < 1 || len > 256 || type < 0 || !gguf_type_traits_of((uint32_t)type))
    return err_set(STENO_ERR_FORMAT, "%s: tensor record with %d dims, a %d-byte name, type %d",
                   r->name, n_dims, len, type);
  uint64_t count = 1;
  for (int i = 0; i < n_dims; i++) {
    int32_t d = 0;
    TRY(take_i32(r, &d));
    if (d < 1) return err_set(STENO_ERR_FORMAT, "%s: a tensor dimension of %d", r->name, d);
    t->ne[i] = d;
    count *= (uint64_t)d;
  }
  TRY(take(r, t->name, (size_t)len));
  t->name[len] = 0;
  t->type = (uint32_t)type, t->n_dims = (uint32_t)n_dims;
  TRY(gguf_type_nbytes(t->type, count, &t->nbytes));
  if ((size_t)(r->end - r->p) < t->nbytes)
    return err_set(STENO_ERR_FORMAT, "%s: tensor '%s' is truncated", r->name, t->name);
  t->data = r->p;
  r->p += t->nbytes;
  return 0;
}

/* ---- legacy names ---- */

static const char *const RENAME[][2] = {
    {"encoder.positional_embedding", "enc.pos_emb.weight"},
    {"encoder.conv1.weight", "enc.conv.0.weight"}, {"encoder.conv1.bias", "enc.conv.0.bias"},
    {"encoder.conv2.weight", "enc.conv.1.weight"}, {"encoder.conv2.bias", "enc.conv.1.bias"},
    {"encoder.ln_post.weight", "enc.final_norm.weight"}, {"encoder.ln_post.bias", "enc.final_norm.bias"},
    {"decoder.positional_embedding", "dec.pos_emb.weight"},
    {"decoder.token_embedding.weight", "dec.token_embd.weight"},
    {"decoder.ln.weight", "dec.final_norm.weight"}, {"decoder.ln.bias", "dec.final_norm.bias"}};

/* A block tensor's legacy stem → its encoder and decoder names (NULL: none). */
static const char *const BLOCK[][3] = {
    {"attn_ln", "norm_attn", "norm_self"},     {"attn.query", "attn.q", "self_attn.q"},
    {"attn.key", "attn.k", "self_attn.k"},     {"attn.value", "attn.v", "self_attn.v"},
    {"attn.out", "attn.out", "self_attn.out"}, {"cross_attn_ln", NULL, "norm_cross"},
    {"cross_attn.query", NULL, "cross_attn.q"}, {"cross_attn.key", NULL, "cross_attn.k"},
    {"cross_attn.value", NULL, "cross_attn.v"}, {"cross_attn.out", NULL, "cross_attn.out"},
    {"mlp_ln", "norm_ffn", "norm_ffn"},        {"mlp.0", "ffn.fc1", "ffn.fc1"},
    {"mlp.2", "ffn.fc2", "ffn.fc2"}};

/* The canonical name of a legacy one into out; false if it has none. */
static bool canonical(const char *legacy, char *out, size_t cap) {
  for (size_t i = 0; i < sizeof RENAME / sizeof *RENAME; i++)
    if (!strcmp(legacy, RENAME[i][0])) return snprintf(out, cap, "%s", RENAME[i][1]) > 0;
  bool enc = !strncmp(legacy, "encoder.blocks.", 15), dec = !strncmp(legacy, "decoder.blocks.", 15);
  if (!enc && !dec) return false;
  char *end;
  long layer = strtol(legacy + 15, &end, 10);
  if (end == legacy + 15 || *end != '.' || layer < 0 || layer > 64) return false;
  const char *rest = end + 1, *leaf = strrchr(rest, '.');
  if (!leaf || (strcmp(leaf, ".weight") && strcmp(leaf, ".bias"))) return false;
  size_t stem = (size_t)(leaf - rest);
  for (size_t i = 0; i < sizeof BLOCK / sizeof *BLOCK; i++) {
    const char *to = BLOCK[i][enc ? 1 : 2];
    if (to && strlen(BLOCK[i][0]) == stem && !strncmp(rest, BLOCK[i][0], stem))
      return snprintf(out, cap, "%s.blocks.%ld.%s%s", enc ? "enc" : "dec", layer, to, leaf) > 0;
  }
  return false;
}

/* ---- writing the GGUF image ---- */

typedef struct {
  uint8_t *p;
  size_t n, cap;
  int st;
  size_t keys; /* keys written */
} buf;

static void put(buf *b, const void *data, size_t n) {
  if (b->st) return;
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->n + n) cap *= 2;
    uint8_t *p = mem_realloc(b->p, cap, 1);
    if (!p) {
      b->st = STENO_ERR_NOMEM;
      return;
    }
    b->p = p, b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, data, n);
  b->n += n;
}

static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s, size_t n) { put_u64(b, n), put(b, s, n); }
static void key(buf *b, const char *k, uint32_t type) {
  put_str(b, k, strlen(k)), put_u32(b, type);
  b->keys++;
}
static void kv_u32(buf *b, const char *k, uint32_t v) { key(b, k, GGUF_VAL_UINT32), put_u32(b, v); }
static void kv_str(buf *b, const char *k, const char *v) { key(b, k, GGUF_VAL_STRING), put_str(b, v, strlen(v)); }
static void kv_bool(buf *b, const char *k, bool v) {
  uint8_t x = v;
  key(b, k, GGUF_VAL_BOOL), put(b, &x, 1);
}
static void kv_f32(buf *b, const char *k, float v) { key(b, k, GGUF_VAL_FLOAT32), put(b, &v, 4); }
static void kv_i32s(buf *b, const char *k, const int32_t *v, size_t n) {
  key(b, k, GGUF_VAL_ARRAY), put_u32(b, GGUF_VAL_INT32), put_u64(b, n), put(b, v, 4 * n);
}
static void kv_strs(buf *b, const char *k, char *const *v, size_t n) {
  key(b, k, GGUF_VAL_ARRAY), put_u32(b, GGUF_VAL_STRING), put_u64(b, n);
  for (size_t i = 0; i < n; i++) put_str(b, v[i], strlen(v[i]));
}

/* ---- the vocabulary ---- */

typedef struct {
  int eot, sot, n_langs, translate, transcribe, solm, prev, nospeech, notimestamps;
  bool multilingual;
} specials;

static specials compute_specials(int n_vocab) {
  specials s = {.eot = 50256, .sot = 50257, .translate = 50357, .transcribe = 50358, .solm = 50359,
                .prev = 50360, .nospeech = 50361, .notimestamps = 50362};
  s.multilingual = n_vocab >= 51865;
  s.n_langs = s.multilingual ? n_vocab - 51765 - 1 : 0;
  if (s.multilingual) {
    int dt = s.n_langs - 98;
    s.eot++, s.sot++;
    s.translate += dt, s.transcribe += dt, s.solm += dt, s.prev += dt, s.nospeech += dt;
    s.notimestamps += dt;
  }
  return s;
}

/* OpenAI's tokenizer.non_speech_tokens over this vocabulary, then the task and
 * context specials (whisper/decoding.py, _get_suppress_tokens). */
static int suppress_list(const bpe *t, const specials *s, int32_t **out, size_t *n) {
  static const char *const symbols[] = {
      "\"", "#", "(", ")", "*", "+", "/", ":", ";", "<", "=", ">", "@", "[", "\\", "]", "^", "_",
      "`", "{", "|", "}", "~", "「", "」", "『", "』", "<<", ">>", "<<<", ">>>", "--", "---", "-(",
      "-[", "('", "(\"", "((", "))", "(((", ")))", "[[", "]]", "{{", "}}", "♪♪", "♪♪♪",
      "♩", "♪", "♫", "♬", "♭", "♮", "♯"};
  const size_t n_misc = 7, ns = sizeof symbols / sizeof *symbols;
  int32_t *v = mem_alloc(4 * ns + 16, sizeof *v);
  if (!v) return STENO_ERR_NOMEM;
  size_t k = 0;
  for (size_t i = 0; i < ns + 2; i++) {
    for (int spaced = 0; spaced < 2; spaced++) {
      char text[32];
      if (i >= ns) snprintf(text, sizeof text, " %s", i == ns ? "-" : "'"); /* first tokens of " -", " '" */
      else snprintf(text, sizeof text, "%s%s", spaced ? " " : "", symbols[i]);
      int *ids;
      size_t m;
      int st = bpe_encode(t, text, &ids, &m);
      if (st) {
        free(v);
        return st;
      }
      if (m && (m == 1 || i >= ns - n_misc)) v[k++] = ids[0];
      free(ids);
      if (i >= ns) break;
    }
  }
  int extra[] = {s->transcribe, s->translate, s->sot, s->prev, s->solm, s->nospeech};
  for (size_t i = 0; i < 6; i++) v[k++] = extra[i];
  /* Sorted, without repeats, as transformers' generation configs hold them. */
  for (size_t i = 1; i < k; i++)
    for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
      int32_t x = v[j];
      v[j] = v[j - 1], v[j - 1] = x;
    }
  size_t u = 0;
  for (size_t i = 0; i < k; i++)
    if (!u || v[u - 1] != v[i]) v[u++] = v[i];
  *out = v, *n = u;
  return 0;
}

/* Token strings for every id: the base pieces in byte-unicode form, then the specials. */
static int vocabulary(reader *r, int n_vocab, const specials *s, bpe *t, char ***out) {
  int32_t count = 0;
  TRY(take_i32(r, &count));
  if (count < 1 || count > n_vocab + 64)
    return err_set(STENO_ERR_FORMAT, "%s: %d vocabulary entries for %d ids", r->name, count, n_vocab);
  int base = count < s->eot ? count : s->eot;
  const char **raw = mem_alloc((size_t)base + 1, sizeof *raw);
  size_t *len = mem_alloc((size_t)base + 1, sizeof *len);
  int st = raw && len ? 0 : STENO_ERR_NOMEM;
  for (int i = 0; !st && i < count; i++) {
    uint32_t n = 0;
    st = take(r, &n, 4);
    if (!st && n > 1024) st = err_set(STENO_ERR_FORMAT, "%s: a %u-byte vocabulary entry", r->name, n);
    if (!st && (size_t)(r->end - r->p) < n) st = err_set(STENO_ERR_FORMAT, "%s: truncated", r->name);
    if (!st && i < base) raw[i] = (const char *)r->p, len[i] = n;
    if (!st) r->p += n;
  }
  if (!st) st = bpe_init(t, base, raw, len, true, true, 0, NULL, NULL);
  free(raw);
  free(len);
  TRY(st);
  char **tok = mem_alloc((size_t)n_vocab, sizeof *tok);
  if (!tok) return STENO_ERR_NOMEM;
  *out = tok;
  char name[32];
  for (int i = 0; i < n_vocab; i++) {
    const char *lit = NULL;
    if (i < base) lit = t->sym[i];
    else if (i == s->eot) lit = "<|endoftext|>";
    else if (i == s->sot) lit = "<|startoftranscript|>";
    else if (i > s->sot && i < s->translate && i - s->sot - 1 < (int)(sizeof LANGS / sizeof *LANGS))
      snprintf(name, sizeof name, "<|%s|>", LANGS[i - s->sot - 1]), lit = name;
    else if (i == s->translate) lit = "<|translate|>";
    else if (i == s->transcribe) lit = "<|transcribe|>";
    else if (i == s->solm) lit = "<|startoflm|>";
    else if (i == s->prev) lit = "<|startofprev|>";
    else if (i == s->nospeech) lit = "<|nospeech|>";
    else if (i == s->notimestamps) lit = "<|notimestamps|>";
    else if (i > s->notimestamps) snprintf(name, sizeof name, "<|%.2f|>", (i - s->notimestamps - 1) * 0.02), lit = name;
    else snprintf(name, sizeof name, "<|unused_%d|>", i), lit = name;
    if (!(tok[i] = mem_strdup(lit))) return STENO_ERR_NOMEM;
  }
  return 0;
}

/* ---- the image ---- */

typedef struct {
  bin_hparams h;
  specials s;
  const float *filters; /* [n_mels][201] */
  char **tokens;
  int32_t *suppress;
  size_t n_suppress;
  bin_tensor *t;
  size_t nt;
} bin_model;

static void bin_model_free(bin_model *b) {
  for (int i = 0; b->tokens && i < b->h.n_vocab; i++) free(b->tokens[i]);
  free(b->tokens);
  free(b->suppress);
  free(b->t);
}

static int parse(reader *r, bin_model *b) {
  TRY(hparams(r, &b->h));
  if (b->h.n_audio_state != b->h.n_text_state)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: audio and text widths differ", r->name);
  int32_t n_mel = 0, n_fft = 0;
  TRY(take_i32(r, &n_mel));
  TRY(take_i32(r, &n_fft));
  size_t nf = (size_t)b->h.n_mels * 201;
  if (n_mel != b->h.n_mels || n_fft != 201 || (size_t)(r->end - r->p) < 4 * nf)
    return err_set(STENO_ERR_FORMAT, "%s: a %d × %d mel filterbank (expected %d × 201)", r->name,
                   n_mel, n_fft, b->h.n_mels);
  b->filters = (const float *)r->p;
  r->p += 4 * nf;
  b->s = compute_specials(b->h.n_vocab);
  bpe t;
  TRY(vocabulary(r, b->h.n_vocab, &b->s, &t, &b->tokens));
  int st = suppress_list(&t, &b->s, &b->suppress, &b->n_suppress);
  bpe_free(&t);
  TRY(st);
  size_t cap = 64;
  b->t = mem_alloc(cap, sizeof *b->t);
  while (b->t && r->p < r->end) {
    if (b->nt == cap) {
      bin_tensor *g = mem_realloc(b->t, cap *= 2, sizeof *g);
      if (!g) return STENO_ERR_NOMEM;
      b->t = g;
    }
    TRY(tensor_record(r, &b->t[b->nt]));
    for (size_t i = 0; i < b->nt; i++)
      if (!strcmp(b->t[i].name, b->t[b->nt].name))
        return err_set(STENO_ERR_FORMAT, "%s: tensor '%s' twice", r->name, b->t[i].name);
    b->nt++;
  }
  return b->t ? 0 : STENO_ERR_NOMEM;
}

static void write_keys(buf *k, const bin_model *b) {
  const bin_hparams *h = &b->h;
  const specials *s = &b->s;
  char *langs[128];
  size_t nl = 0;
  if (s->multilingual)
    for (int i = 0; i < s->n_langs && i < (int)(sizeof LANGS / sizeof *LANGS); i++) langs[nl++] = (char *)LANGS[i];
  else langs[nl++] = "en";
  int32_t begin[2] = {220, s->eot}, *types = mem_alloc((size_t)h->n_vocab, sizeof *types);
  if (!types) {
    k->st = STENO_ERR_NOMEM;
    return;
  }
  for (int i = 0; i < h->n_vocab; i++) types[i] = i >= s->eot ? 3 : 1;
  kv_str(k, "general.architecture", "whisper");
  kv_strs(k, "general.languages", langs, nl);
  kv_bool(k, "stt.capability.lang_detect", s->multilingual);
  kv_bool(k, "stt.capability.translate", s->multilingual);
  kv_u32(k, "stt.whisper.encoder.n_layers", (uint32_t)h->n_audio_layer);
  kv_u32(k, "stt.whisper.encoder.d_model", (uint32_t)h->n_audio_state);
  kv_u32(k, "stt.whisper.encoder.n_heads", (uint32_t)h->n_audio_head);
  kv_u32(k, "stt.whisper.encoder.ffn_dim", 4 * (uint32_t)h->n_audio_state);
  kv_u32(k, "stt.whisper.encoder.num_mel_bins", (uint32_t)h->n_mels);
  kv_u32(k, "stt.whisper.encoder.max_source_positions", (uint32_t)h->n_audio_ctx);
  kv_str(k, "stt.whisper.encoder.activation", "gelu");
  kv_u32(k, "stt.whisper.decoder.n_layers", (uint32_t)h->n_text_layer);
  kv_u32(k, "stt.whisper.decoder.d_model", (uint32_t)h->n_text_state);
  kv_u32(k, "stt.whisper.decoder.n_heads", (uint32_t)h->n_text_head);
  kv_u32(k, "stt.whisper.decoder.ffn_dim", 4 * (uint32_t)h->n_text_state);
  kv_u32(k, "stt.whisper.decoder.max_target_positions", (uint32_t)h->n_text_ctx);
  kv_u32(k, "stt.whisper.decoder.vocab_size", (uint32_t)h->n_vocab);
  kv_str(k, "stt.whisper.decoder.activation", "gelu");
  kv_u32(k, "stt.whisper.decoder_start_token_id", (uint32_t)s->sot);
  kv_u32(k, "stt.whisper.sot_token_id", (uint32_t)s->sot);
  kv_u32(k, "stt.whisper.no_timestamps_token_id", (uint32_t)s->notimestamps);
  kv_u32(k, "stt.whisper.prev_sot_token_id", (uint32_t)s->prev);
  if (s->multilingual) {
    kv_u32(k, "stt.whisper.transcribe_token_id", (uint32_t)s->transcribe);
    kv_u32(k, "stt.whisper.translate_token_id", (uint32_t)s->translate);
  }
  kv_i32s(k, "stt.whisper.suppress_tokens", b->suppress, b->n_suppress);
  kv_i32s(k, "stt.whisper.begin_suppress_tokens", begin, 2);
  kv_str(k, "stt.frontend.type", "mel");
  kv_u32(k, "stt.frontend.num_mels", (uint32_t)h->n_mels);
  kv_u32(k, "stt.frontend.sample_rate", 16000);
  kv_u32(k, "stt.frontend.n_fft", 400);
  kv_u32(k, "stt.frontend.win_length", 400);
  kv_u32(k, "stt.frontend.hop_length", 160);
  kv_str(k, "stt.frontend.window", "hann_periodic");
  kv_str(k, "stt.frontend.normalize", "whisper_logmel");
  kv_f32(k, "stt.frontend.f_max", 8000);
  kv_u32(k, "stt.frontend.nb_max_frames", 2 * (uint32_t)h->n_audio_ctx);
  kv_u32(k, "stt.frontend.n_samples", 2 * 160 * (uint32_t)h->n_audio_ctx);
  kv_str(k, "tokenizer.ggml.model", "gpt2");
  kv_u32(k, "tokenizer.ggml.eos_token_id", (uint32_t)s->eot);
  kv_bool(k, "steno.bpe_ranks_are_ids", true); /* tiktoken ranks: see bpe_init */
  kv_strs(k, "tokenizer.ggml.tokens", b->tokens, (size_t)h->n_vocab);
  kv_i32s(k, "tokenizer.ggml.token_type", types, (size_t)h->n_vocab);
  free(types);
}

/* One tensor info; *at advances by its aligned size. */
static void tensor_info(buf *b, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                        size_t nbytes, uint64_t *at) {
  put_str(b, name, strlen(name));
  put_u32(b, n_dims);
  for (uint32_t i = 0; i < n_dims; i++) put_u64(b, (uint64_t)ne[i]);
  put_u32(b, type);
  put_u64(b, *at);
  *at += (nbytes + ALIGN - 1) / ALIGN * ALIGN;
}

static void pad(buf *b) {
  static const uint8_t zeros[ALIGN];
  put(b, zeros, (ALIGN - b->n % ALIGN) % ALIGN);
}

static int image(const bin_model *m, const char *path, buf *out) {
  buf k = {0};
  write_keys(&k, m);
  float window[400];
  for (int i = 0; i < 400; i++) window[i] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * i / 400));
  char (*names)[96] = mem_alloc(m->nt + 1, sizeof *names);
  int st = k.st ? k.st : names ? 0 : STENO_ERR_NOMEM;
  for (size_t i = 0; !st && i < m->nt; i++)
    if (!canonical(m->t[i].name, names[i], sizeof names[i]))
      st = err_set(STENO_ERR_FORMAT, "%s: tensor '%s' has no place in a Whisper model", path, m->t[i].name);
  put(out, "GGUF", 4);
  put_u32(out, 3);
  put_u64(out, m->nt + 2);
  put_u64(out, k.keys);
  put(out, k.p, k.n);
  uint64_t at = 0;
  int64_t fb_ne[2] = {201, m->h.n_mels}, win_ne[1] = {400};
  tensor_info(out, "frontend.mel_filterbank", GGUF_TYPE_F32, 2, fb_ne, 4 * 201 * (size_t)m->h.n_mels, &at);
  tensor_info(out, "frontend.window", GGUF_TYPE_F32, 1, win_ne, sizeof window, &at);
  for (size_t i = 0; !st && i < m->nt; i++) {
    const bin_tensor *t = &m->t[i];
    int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    uint32_t nd = t->n_dims;
    if (strstr(names[i], "enc.conv.") && strstr(names[i], ".bias")) ne[0] *= ne[1], nd = 1; /* [1, D] → [D] */
    tensor_info(out, names[i], t->type, nd, ne, t->nbytes, &at);
  }
  pad(out);
  put(out, m->filters, 4 * 201 * (size_t)m->h.n_mels), pad(out);
  put(out, window, sizeof window), pad(out);
  for (size_t i = 0; !st && i < m->nt; i++) put(out, m->t[i].data, m->t[i].nbytes), pad(out);
  free(names);
  free(k.p);
  return st ? st : out->st;
}

int whisper_bin_image_memory(const uint8_t *data, size_t n, const char *name, uint8_t **out,
                             size_t *size) {
  *out = NULL, *size = 0;
  reader r = {data, data + n, name};
  bin_model m = {0};
  buf img = {0};
  int st = parse(&r, &m);
  if (!st) st = image(&m, name, &img);
  bin_model_free(&m);
  if (st) {
    free(img.p);
    return st;
  }
  *out = img.p, *size = img.n;
  return 0;
}

int whisper_bin_image(const char *path, uint8_t **out, size_t *size) {
  *out = NULL, *size = 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return err_set(STENO_ERR_IO, "%s: cannot open", path);
  struct stat sb;
  if (fstat(fd, &sb) || sb.st_size < 8) {
    close(fd);
    return err_set(STENO_ERR_FORMAT, "%s: not a whisper.cpp .bin file", path);
  }
  const uint8_t *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return err_set(STENO_ERR_IO, "%s: cannot map", path);
  int st = whisper_bin_image_memory(map, (size_t)sb.st_size, path, out, size);
  munmap((void *)map, (size_t)sb.st_size);
  return st;
}
