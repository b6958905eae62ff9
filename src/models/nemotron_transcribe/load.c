/* Nemotron 3.5 Transcribe: the audio module's hyperparameters and weights
 * (docs/nemotron-transcribe-gguf.md §2–5). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "models/nemotron_transcribe/nemotron_transcribe.h"
#include "nn/weights.h"

#define KEY "nemotron3_5_transcribe."

int nt_tower_keys(const gguf_file *f, const char *prefix, bool qk_norm, renc_dims *d,
                  uint32_t *mels, uint32_t *sub) {
  char k[128];
  uint32_t kv, m = 1, s = 1;
  float partial;
#define K(name) (snprintf(k, sizeof k, KEY "%s%s", prefix, name), k)
  TRY(gguf_get_u32(f, K("hidden_size"), &d->d));
  TRY(gguf_get_u32(f, K("intermediate_size"), &d->ff));
  TRY(gguf_get_u32(f, K("num_hidden_layers"), &d->layers));
  TRY(gguf_get_u32(f, K("num_attention_heads"), &d->heads));
  TRY(gguf_get_u32(f, K("num_key_value_heads"), &kv));
  if (mels) TRY(gguf_get_u32(f, K("num_mel_bins"), &m));
  if (sub) TRY(gguf_get_u32(f, K("subsampling_factor"), &s));
  TRY(gguf_get_f32(f, K("rope_theta"), &d->rope_theta));
  TRY(gguf_get_f32(f, K("partial_rotary_factor"), &partial));
  TRY(gguf_get_f32(f, K("layer_norm_epsilon"), &d->eps));
  const char *act;
  TRY(gguf_get_str(f, K("hidden_act"), &act));
#undef K
  if (strcmp(act, "gelu"))
    return err_set(STENO_ERR_UNSUPPORTED, "%s: %shidden_act '%s' (gelu expected)", f->name,
                   prefix, act);
  if (!d->heads || kv != d->heads || d->d % d->heads || s < 1 || s > 64 || m < 1 || m > 1024 ||
      !(partial > 0 && partial <= 1))
    return err_set(STENO_ERR_FORMAT,
                   "%s: %s tower: %u heads, %u kv heads, d %u, subsampling %u, %u mels, partial "
                   "rotary %g",
                   f->name, prefix, d->heads, kv, d->d, s, m, partial);
  d->rope_dim = (uint32_t)((float)(d->d / d->heads) * partial); /* int(head_dim · factor) */
  d->rope_dim -= d->rope_dim % 2;
  d->in = mels && sub ? s * m : 0;
  d->qk_norm = qk_norm;
  if (mels) *mels = m;
  if (sub) *sub = s;
  return 0;
}

/* The decoder's vocabulary (prompt ids index its table) and the audio token:
 * a C int, and a token of the tokenizer where the file has one (the prompt
 * code compares ids as ints and names the token in messages). */
static int token_keys(const gguf_file *f, nt_config *c) {
  TRY(gguf_get_u32(f, KEY "audio_token_id", &c->audio_token));
  TRY(gguf_get_u32(f, KEY "lm.vocab_size", &c->vocab));
  const gguf_kv *tokens = gguf_find(f, "tokenizer.ggml.tokens");
  uint64_t names = tokens ? tokens->n : (uint64_t)INT32_MAX + 1;
  if (c->vocab < 1 || c->vocab > (1u << 24))
    return err_set(STENO_ERR_FORMAT, "%s: " KEY "lm.vocab_size %u (1 to 2^24)", f->name, c->vocab);
  if (c->audio_token >= names)
    return err_set(STENO_ERR_FORMAT, "%s: " KEY "audio_token_id %u: past the %llu ids %s", f->name,
                   c->audio_token, (unsigned long long)names,
                   tokens ? "of tokenizer.ggml.tokens" : "an int holds");
  return 0;
}

/* The encoders' runs (one attention over all their frames) at most NT_MAX_RUN
 * frames: the speech encoder's chunk with its context, the diarization step's
 * cache, FIFO and that run. Longer ones only failed at run time, on a buffer
 * over the device's limit (fuzz_load). */
static int run_bounds(const gguf_file *f, const nt_config *c) {
  uint64_t asr = (uint64_t)c->chunk + c->left + c->right, diar = asr + c->cache + c->fifo;
  if (asr > NT_MAX_RUN)
    return err_set(STENO_ERR_FORMAT,
                   "%s: " KEY "diar.chunk_length %u with chunk_left_context %u and "
                   "chunk_right_context %u: a run of %llu frames (at most %d)",
                   f->name, c->chunk, c->left, c->right, (unsigned long long)asr, NT_MAX_RUN);
  if (diar > NT_MAX_RUN)
    return err_set(STENO_ERR_FORMAT,
                   "%s: " KEY "diar.fifo_length %u with speaker_cache_length %u and a chunk run "
                   "of %llu: a diarization run of %llu frames (at most %d)",
                   f->name, c->fifo, c->cache, (unsigned long long)asr, (unsigned long long)diar,
                   NT_MAX_RUN);
  return 0;
}

static int counts(const gguf_file *f, nt_config *c) {
  TRY(gguf_get_u32(f, KEY "diar.head_hidden_size", &c->head_d));
  TRY(gguf_get_u32(f, KEY "diar.num_speakers", &c->speakers));
  TRY(gguf_get_u32(f, KEY "diar.chunk_length", &c->chunk));
  TRY(gguf_get_u32(f, KEY "diar.chunk_left_context", &c->left));
  TRY(gguf_get_u32(f, KEY "diar.chunk_right_context", &c->right));
  TRY(gguf_get_u32(f, KEY "diar.fifo_length", &c->fifo));
  TRY(gguf_get_u32(f, KEY "diar.speaker_cache_update_period", &c->update));
  TRY(gguf_get_u32(f, KEY "diar.speaker_cache_length", &c->cache));
  TRY(gguf_get_u32(f, KEY "diar.speaker_cache_silence_frames_per_speaker", &c->sil));
  TRY(gguf_get_f32(f, KEY "diar.prediction_score_threshold", &c->pred_thr));
  TRY(gguf_get_f32(f, KEY "diar.latest_frames_score_boost", &c->latest_boost));
  TRY(gguf_get_f32(f, KEY "audio.speaker_activity_threshold", &c->threshold));
  TRY(token_keys(f, c));
  float strong, weak, minpos;
  TRY(gguf_get_f32(f, KEY "diar.strong_boost_rate", &strong));
  TRY(gguf_get_f32(f, KEY "diar.weak_boost_rate", &weak));
  TRY(gguf_get_f32(f, KEY "diar.min_positive_scores_rate", &minpos));
  if (c->speakers < 1 || c->speakers > 64 || c->head_d < 1 || c->head_d > 8192 || c->chunk < 1 ||
      c->chunk > 100000 || c->left > c->chunk * 4 || c->right >= c->chunk || c->fifo > 100000 ||
      c->update < 1 || c->update > 100000 || c->cache > 100000 || c->sil > c->cache ||
      c->cache < (1 + c->sil) * c->speakers || !(c->threshold >= 0 && c->threshold <= 1) ||
      !(c->pred_thr > 0 && c->pred_thr < 1) || !isfinite(c->latest_boost) ||
      !(strong >= 0 && strong < 100) || !(weak >= 0 && weak < 100) || !(minpos >= 0 && minpos < 100))
    return err_set(STENO_ERR_FORMAT,
                   "%s: diarization settings not valid: %u speakers, head %u, chunk %u (-%u +%u), "
                   "FIFO %u, update %u, cache %u with %u silence slots, thresholds %g/%g",
                   f->name, c->speakers, c->head_d, c->chunk, c->left, c->right, c->fifo,
                   c->update, c->cache, c->sil, c->threshold, c->pred_thr);
  TRY(run_bounds(f, c));
  uint32_t budget = c->cache / c->speakers - c->sil;
  c->min_pos = (uint32_t)floor(budget * (double)minpos);
  c->n_strong = (uint32_t)floor(budget * (double)strong);
  c->n_weak = (uint32_t)floor(budget * (double)weak);
  return 0;
}

static int config(const gguf_file *f, nt_config *c, renc_dims *asr, renc_dims *diar) {
  uint32_t dmels, dsub;
  TRY(nt_tower_keys(f, "asr.", true, asr, &c->mels, &c->sub));
  TRY(nt_tower_keys(f, "diar.", false, diar, &dmels, &dsub));
  TRY(counts(f, c));
  if (dmels != c->mels || dsub != c->sub)
    return err_set(STENO_ERR_FORMAT, "%s: the towers disagree: %u/%u mels, subsampling %u/%u",
                   f->name, c->mels, dmels, c->sub, dsub);
  c->d = asr->d;
  c->dd = diar->d;
  /* The longest runs: a chunk with its context; the diarization step also
   * sees the whole speaker cache and FIFO. */
  asr->max_t = c->chunk + c->left + c->right;
  diar->max_t = c->cache + c->fifo + c->chunk + c->left + c->right;
  return 0;
}

static int frontend(const gguf_file *f, nt_model *m) {
  uint32_t rate, nfft, win, hop, mels;
  float pre, guard;
  TRY(gguf_get_u32(f, KEY "frontend.sample_rate", &rate));
  TRY(gguf_get_u32(f, KEY "frontend.n_fft", &nfft));
  TRY(gguf_get_u32(f, KEY "frontend.win_length", &win));
  TRY(gguf_get_u32(f, KEY "frontend.hop_length", &hop));
  TRY(gguf_get_u32(f, KEY "frontend.num_mel_bins", &mels));
  TRY(gguf_get_f32(f, KEY "frontend.preemphasis", &pre));
  TRY(gguf_get_f32(f, KEY "frontend.log_zero_guard", &guard));
  if (rate != 16000)
    return err_set(STENO_ERR_UNSUPPORTED, "%s: sample rate %u (16000 expected)", f->name, rate);
  if (mels != m->c.mels || guard != 0x1p-24f || !(pre >= 0 && pre < 1) || nfft > 8192 ||
      win > nfft || win < 2)
    return err_set(STENO_ERR_FORMAT,
                   "%s: frontend of %u mels for %u-mel encoders, log guard %g (2^-24 expected), "
                   "pre-emphasis %g, n_fft %u, window %u",
                   f->name, mels, m->c.mels, guard, pre, nfft, win);
  float *window = NULL, *bank = NULL;
  int st = w_host(f, "frontend.window", W_F32, win, true, &window);
  if (!st) st = w_host(f, "frontend.filterbank", W_F32, (size_t)mels * (nfft / 2 + 1), true, &bank);
  mel_config c = {.sample_rate = (int)rate, .n_fft = (int)nfft, .win_length = (int)win,
                  .hop = (int)hop, .n_mels = (int)mels, .preemphasis = pre, .f_min = 0,
                  .f_max = (float)rate / 2, .normalize = false, .window = window, .filters = bank};
  if (!st) st = mel_init(&m->mel, &c);
  free(window);
  free(bank);
  return st ? err_wrap(st, "%s: ", f->name) : 0;
}

static int linear(const nt_model *m, const gguf_file *f, const char *name, uint32_t rows,
                  uint32_t k, gpu_linear *out) {
  char w[96], b[96];
  snprintf(w, sizeof w, "%s.weight", name);
  snprintf(b, sizeof b, "%s.bias", name);
  const char *names[1] = {w};
  float *bias;
  TRY(w_host(f, b, W_F32, rows, true, &bias));
  int64_t r = rows;
  int st = w_linear(m->dev, f, names, 1, &r, k, W_LINEAR_TYPES, bias, rows, out);
  free(bias);
  return st;
}

/* The diarization head: projection, sub-pixel upsampling conv (k3, as an
 * im2col GEMM), the two classifier layers, and the silence embedding. */
static int diar_head(nt_model *m, const gguf_file *f) {
  const nt_config *c = &m->c;
  uint32_t h = c->head_d, up = c->sub * h;
  TRY(linear(m, f, "diar.sf.encoder_proj", h, c->dd, &m->sf_proj));
  const int64_t ne[3] = {3, h, up};
  const gguf_tensor *t;
  TRY(gguf_tensor_get(f, "diar.sf.subpixel_upsample.weight", W_CONV_TYPES, 3, ne, &t));
  float *bias;
  TRY(w_host(f, "diar.sf.subpixel_upsample.bias", W_F32, up, true, &bias));
  gpu_weight part = {t->data, up};
  int st = gpu_linear_new(m->dev, t->type == GGUF_TYPE_F16 ? GPU_F16 : GPU_F32, 3 * h, &part, 1,
                          bias, up, &m->sf_up);
  free(bias);
  if (st) return err_wrap(st, "%s: 'diar.sf.subpixel_upsample.weight': ", f->name);
  TRY(linear(m, f, "diar.sf.first_hidden_to_hidden", h, h, &m->sf_dense));
  TRY(linear(m, f, "diar.sf.single_hidden_to_spks", c->speakers, h, &m->sf_out));
  return w_host(f, "diar.sf.learnable_sil_emb", W_F32, c->dd, true, &m->sil_emb);
}

/* Row p of the speaker table: sin at even columns 2i and cos at 2i + 1 of
 * p·exp(2i·(−ln 10⁴ / d)), in f32 as transformers computes it; stored as a
 * layer of d outputs over the speakers' activities. */
static int speaker_table(nt_model *m) {
  uint32_t d = m->c.d, n = m->c.speakers;
  float *w = mem_alloc((size_t)d * n, sizeof *w);
  if (!w) return STENO_ERR_NOMEM;
  float scale = (float)(-(log(10000.0) / d));
  for (uint32_t i = 0; 2 * i < d; i++) {
    float inv = expf((float)(2 * i) * scale);
    for (uint32_t p = 0; p < n; p++) {
      float a = (float)p * inv;
      w[(size_t)(2 * i) * n + p] = sinf(a);
      if (2 * i + 1 < d) w[(size_t)(2 * i + 1) * n + p] = cosf(a);
    }
  }
  gpu_weight part = {w, d};
  int st = gpu_linear_new(m->dev, GPU_F32, n, &part, 1, NULL, 0, &m->spk_table);
  free(w);
  return st;
}

static int weights(nt_model *m, const gguf_file *f, const renc_dims *asr, const renc_dims *diar) {
  TRY(frontend(f, m));
  TRY(renc_load(m->dev, f, "asr.", asr, &m->asr));
  TRY(renc_load(m->dev, f, "diar.", diar, &m->diar));
  TRY(diar_head(m, f));
  TRY(w_norm(m->dev, f, "asr_norm", m->c.d, asr->eps, &m->asr_norm));
  TRY(w_norm(m->dev, f, "diar_norm", m->c.speakers, asr->eps, &m->spk_norm));
  TRY(speaker_table(m));
  const gguf_tensor *p = gguf_tensor_find(f, "proj.weight");
  if (!p || p->n_dims != 2 || p->ne[1] < 1 || p->ne[1] > 65536)
    return err_set(STENO_ERR_FORMAT, "%s: tensor 'proj.weight' is missing or not a matrix",
                   f->name);
  m->c.d_lm = (uint32_t)p->ne[1];
  return linear(m, f, "proj", m->c.d_lm, m->c.d, &m->proj);
}

/* An optional list of prompt ids (none: *v NULL, *n 0); no audio token among them. */
static int id_list(const nt_model *m, const gguf_file *f, const char *key, int32_t **v,
                   uint32_t *n) {
  const gguf_kv *kv = NULL;
  TRY(gguf_opt_arr(f, key, GGUF_VAL_INT32, &kv));
  if (!kv) return 0;
  if (kv->n > 65536) return err_set(STENO_ERR_FORMAT, "%s: '%s' has %zu ids", f->name, key, kv->n);
  *v = mem_alloc(kv->n + 1, sizeof **v);
  if (!*v) return STENO_ERR_NOMEM;
  for (size_t i = 0; i < kv->n; i++) {
    int32_t id = kv->v.i32[i];
    if (id < 0 || (uint32_t)id == m->c.audio_token || (uint32_t)id >= m->c.vocab)
      return err_set(STENO_ERR_FORMAT, "%s: '%s' holds id %d (ids 0 to %u, the audio token %u "
                     "not among them)", f->name, key, id, m->c.vocab - 1, m->c.audio_token);
    (*v)[i] = id;
  }
  *n = (uint32_t)kv->n;
  return 0;
}

static int opt_text(const gguf_file *f, const char *key, char **out) {
  const char *s = NULL;
  TRY(gguf_opt_str(f, key, &s));
  if (s && strlen(s) > 65536)
    return err_set(STENO_ERR_FORMAT, "%s: '%s' is too long", f->name, key);
  if (s && !(*out = mem_strdup(s))) return STENO_ERR_NOMEM;
  return 0;
}

/* The prompt keys (optional): the default request's ids around the audio, and
 * the pieces a user instruction goes between (docs/nemotron-transcribe-gguf.md §8). */
static int prompt_keys(nt_model *m, const gguf_file *f) {
  nt_instruction_keys *k = &m->instr;
  TRY(id_list(m, f, KEY "prompt.prefix_ids", &m->prefix, &m->n_prefix));
  TRY(id_list(m, f, KEY "prompt.suffix_ids", &m->suffix, &m->n_suffix));
  if (!m->prefix || !m->suffix) { /* one without the other: no default request */
    free(m->prefix), free(m->suffix);
    m->prefix = m->suffix = NULL;
  }
  TRY(id_list(m, f, KEY "prompt.instruction.head_ids", &k->head, &k->n_head));
  TRY(id_list(m, f, KEY "prompt.instruction.middle_ids", &k->middle, &k->n_middle));
  TRY(id_list(m, f, KEY "prompt.instruction.suffix_ids", &k->suffix, &k->n_suffix));
  TRY(opt_text(f, KEY "prompt.instruction.lead", &k->lead));
  TRY(opt_text(f, KEY "prompt.instruction.trail", &k->trail));
  if (!k->head != !k->suffix || !k->head != !k->lead || !k->head != !k->trail)
    return err_set(STENO_ERR_FORMAT, "%s: prompt.instruction.{head_ids,lead,trail,suffix_ids} "
                   "go together", f->name);
  return 0;
}

/* ids of n ints appended at v + *at. */
static void put_ids(int *v, uint32_t *at, const int32_t *ids, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) v[(*at)++] = ids[i];
}

int nt_prompt(const nt_model *m, const int *instr, uint32_t n_instr, uint32_t n_audio, int **ids,
              uint32_t *n) {
  *ids = NULL;
  const nt_instruction_keys *k = &m->instr;
  if (!instr && !m->prefix)
    return err_set(STENO_ERR_UNSUPPORTED, "the model file has no prompt keys");
  if (instr && !k->head)
    return err_set(STENO_ERR_UNSUPPORTED, "the model file has no instruction keys");
  uint64_t total = instr ? (uint64_t)k->n_head + n_instr + k->n_middle + n_audio + k->n_suffix
                         : (uint64_t)m->n_prefix + n_audio + m->n_suffix;
  if (total > (1u << 24))
    return err_set(STENO_ERR_INVALID, "a prompt of %llu ids", (unsigned long long)total);
  int *v = mem_alloc((size_t)total, sizeof *v);
  if (!v) return STENO_ERR_NOMEM;
  uint32_t at = 0;
  if (instr) {
    put_ids(v, &at, k->head, k->n_head);
    put_ids(v, &at, instr, n_instr);
    put_ids(v, &at, k->middle, k->n_middle);
  } else {
    put_ids(v, &at, m->prefix, m->n_prefix);
  }
  for (uint32_t i = 0; i < n_audio; i++) v[at++] = (int)m->c.audio_token;
  if (instr) put_ids(v, &at, k->suffix, k->n_suffix);
  else put_ids(v, &at, m->suffix, m->n_suffix);
  *ids = v;
  *n = at;
  return 0;
}

int nt_load(gpu_device *dev, const gguf_file *f, nt_model **out) {
  *out = NULL;
  nt_model *m = mem_alloc(1, sizeof *m);
  if (!m) return STENO_ERR_NOMEM;
  m->dev = dev;
  renc_dims asr = {0}, diar = {0};
  int st = config(f, &m->c, &asr, &diar);
  if (!st) st = weights(m, f, &asr, &diar);
  if (!st) st = prompt_keys(m, f);
  if (!st) st = nt_wts_load(m, f);
  if (st) {
    nt_free(m);
    return st;
  }
  *out = m;
  return 0;
}

void nt_free(nt_model *m) {
  if (!m) return;
  mel_free(&m->mel);
  renc_free(&m->asr);
  renc_free(&m->diar);
  gpu_linear_free(&m->sf_proj);
  gpu_linear_free(&m->sf_up);
  gpu_linear_free(&m->sf_dense);
  gpu_linear_free(&m->sf_out);
  free(m->sil_emb);
  w_norm_free(&m->asr_norm);
  w_norm_free(&m->spk_norm);
  gpu_linear_free(&m->spk_table);
  gpu_linear_free(&m->proj);
  free(m->prefix);
  free(m->suffix);
  free(m->instr.head), free(m->instr.middle), free(m->instr.suffix);
  free(m->instr.lead), free(m->instr.trail);
  nt_wts_free(&m->wts);
  free(m);
}
