/* Nemotron 3.5 Transcribe: audio module → prompt → Nemotron-H → text. */
#include "models/nemotron_transcribe/transcribe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/timer.h"
#include "text/result.h"

#define KEY "nemotron3_5_transcribe."
#define LM_KEYS KEY "lm."
#define CONTEXT 8192 /* tokens a session holds: 10 min of audio tokens (12.5/s) and text */

static void add_stop(ntx_model *m, int id) {
  for (int i = 0; i < m->n_stop; i++)
    if (m->stop[i] == id) return;
  if (id >= 0 && m->n_stop < NTX_MAX_STOP) m->stop[m->n_stop++] = id;
}

/* The end tokens: the LM's eos ids, the tokenizer's, and <|im_end|> (the chat turn's end). */
static int stops(const gguf_file *f, ntx_model *m) {
  const gguf_kv *eos = gguf_find(f, LM_KEYS "eos_token_id");
  for (size_t i = 0; eos && eos->elem_type == GGUF_VAL_UINT32 && i < eos->n; i++)
    if (eos->v.u32[i] < m->lm->vocab) add_stop(m, (int)eos->v.u32[i]);
  uint32_t tok_eos;
  if (gguf_find(f, "tokenizer.ggml.eos_token_id")) {
    TRY(gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &tok_eos));
    if (tok_eos < m->lm->vocab) add_stop(m, (int)tok_eos);
  }
  int im_end = bpe_find(&m->tok, "<|im_end|>");
  if (im_end >= 0 && (uint32_t)im_end < m->lm->vocab) add_stop(m, im_end);
  if (m->n_stop == 0) return err_set(STENO_ERR_FORMAT, "%s: no end token", f->name);
  return 0;
}

/* The pre-tokenizer for encoding a user instruction: the file's one Split
 * pattern (absent: GPT-2's, which bpe_init set); several are not supported yet. */
static int pre_tokenizer(const gguf_file *f, ntx_model *m) {
  const gguf_kv *re = NULL;
  TRY(gguf_opt_arr(f, KEY "tokenizer.pre_regex", GGUF_VAL_STRING, &re));
  TRY(gguf_opt_bool(f, KEY "tokenizer.ignore_merges", &m->tok.ignore_merges));
  if (!m->tok.re) {
    m->no_encode = "no BPE merges";
    return 0;
  }
  if (re && re->n > 1) m->no_encode = "a pre-tokenizer of several patterns";
  if (re && re->n == 1) {
    if (strlen(re->v.str[0].s) != re->v.str[0].len)
      return err_set(STENO_ERR_FORMAT, "%s: the pre-tokenizer pattern holds a NUL", f->name);
    TRY(bpe_set_pattern(&m->tok, re->v.str[0].s));
  }
  return 0;
}

/* The added tokens (control and user types): the processor's tokenizer matches
 * them in the text before the BPE, so an instruction may hold them. */
static int added_tokens(const gguf_kv *types, ntx_model *m) {
  if (!types) return 0;
  m->added = mem_alloc(types->n + 1, sizeof *m->added);
  if (!m->added) return STENO_ERR_NOMEM;
  for (size_t i = 0; i < types->n; i++)
    if ((types->v.i32[i] == 3 || types->v.i32[i] == 4) && m->tok.len[i] > 0)
      m->added[m->n_added++] = (int)i;
  return 0;
}

/* The BPE pieces for decoding, the merges and pre-tokenizer for encoding a
 * user instruction, and which tokens are special. */
static int tokenizer(const gguf_file *f, ntx_model *m) {
  const gguf_kv *tokens, *types = NULL, *merges = NULL;
  TRY(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VAL_STRING, &tokens));
  TRY(gguf_opt_arr(f, "tokenizer.ggml.token_type", GGUF_VAL_INT32, &types));
  TRY(gguf_opt_arr(f, "tokenizer.ggml.merges", GGUF_VAL_STRING, &merges));
  if (tokens->n < m->lm->vocab || tokens->n > (1u << 24) || (types && types->n != tokens->n))
    return err_set(STENO_ERR_FORMAT, "%s: %zu tokens (%zu types) for a vocabulary of %u", f->name,
                   tokens->n, types ? types->n : 0, m->lm->vocab);
  size_t n = tokens->n, nm = merges ? merges->n : 0;
  const char **s = mem_alloc(n + nm + 1, sizeof *s);
  size_t *len = mem_alloc(n + nm + 1, sizeof *len);
  m->special = mem_alloc(n, sizeof *m->special);
  int st = s && len && m->special ? 0 : STENO_ERR_NOMEM;
  for (size_t i = 0; !st && i < n; i++) {
    s[i] = tokens->v.str[i].s, len[i] = tokens->v.str[i].len;
    m->special[i] = types && types->v.i32[i] == 3; /* control */
  }
  for (size_t i = 0; !st && i < nm; i++)
    s[n + i] = merges->v.str[i].s, len[n + i] = merges->v.str[i].len;
  if (!st) st = bpe_init(&m->tok, (int)n, s, len, false, false, nm, s + n, len + n);
  free(s), free(len);
  if (!st) st = pre_tokenizer(f, m);
  if (!st) st = added_tokens(types, m);
  if (st) return err_wrap(st, "%s: ", f->name);
  return stops(f, m);
}

int ntx_load(gpu_device *dev, const gguf_file *f, ntx_model **out) {
  *out = NULL;
  ntx_model *m = mem_alloc(1, sizeof *m);
  if (!m) return STENO_ERR_NOMEM;
  int st = nt_load(dev, f, &m->audio);
  if (!st) st = nemotron_h_load(dev, f, LM_KEYS, "lm.", &m->lm);
  if (!st && m->audio->c.d_lm != m->lm->d.d)
    st = err_set(STENO_ERR_FORMAT, "%s: the projector gives %u values, the decoder reads %u",
                 f->name, m->audio->c.d_lm, m->lm->d.d);
  if (!st) st = tokenizer(f, m);
  if (st) {
    ntx_free(m);
    return st;
  }
  *out = m;
  return 0;
}

void ntx_free(ntx_model *m) {
  if (!m) return;
  nt_free(m->audio);
  nemotron_h_free(m->lm);
  bpe_free(&m->tok);
  free(m->special);
  free(m->added);
  free(m);
}

int ntx_session_new(const ntx_model *m, ntx_session **out) {
  *out = NULL;
  ntx_session *s = mem_alloc(1, sizeof *s);
  if (!s) return STENO_ERR_NOMEM;
  s->m = m;
  uint32_t ctx = m->lm->max_pos < CONTEXT ? m->lm->max_pos : CONTEXT;
  int st = nemotron_h_session_new(m->lm, ctx, &s->lm);
  if (!st) st = nt_arena_new(m->audio, &s->towers);
  if (st) {
    ntx_session_free(s);
    return st;
  }
  *out = s;
  return 0;
}

void ntx_session_free(ntx_session *s) {
  if (!s) return;
  nemotron_h_session_free(s->lm);
  nt_arena_free(s->towers);
  free(s);
}

/* The longest added token at s[0..n), its id and *len; -1 if none starts there. */
static int added_at(const ntx_model *m, const char *s, size_t n, size_t *len) {
  int best = -1;
  *len = 0;
  for (int i = 0; i < m->n_added; i++) {
    int id = m->added[i];
    size_t l = m->tok.len[id];
    if (l > *len && l <= n && s[0] == m->tok.bytes[id][0] && !memcmp(s, m->tok.bytes[id], l))
      best = id, *len = l;
  }
  return best;
}

/* BPE ids of text[0..n) (no added token in it) appended to out. */
static int encode_span(const ntx_model *m, const char *text, size_t n, int *out, uint32_t *at,
                       uint32_t cap) {
  if (!n) return 0;
  char *piece = mem_alloc(n + 1, 1);
  if (!piece) return STENO_ERR_NOMEM;
  memcpy(piece, text, n);
  int *ids = NULL;
  size_t k = 0;
  int st = bpe_encode(&m->tok, piece, &ids, &k);
  free(piece);
  if (!st && k > cap - *at) st = err_set(STENO_ERR_INVALID, "more than %u prompt tokens", cap);
  for (size_t i = 0; !st && i < k; i++) out[(*at)++] = ids[i];
  free(ids);
  return st;
}

/* The ids of lead + text + trail (where the request puts the instruction): the
 * added tokens matched first, leftmost and longest, the text between them BPE
 * encoded, as the processor's tokenizer does on the rendered template. */
static int encode_instruction(const ntx_model *m, const char *text, int **ids, uint32_t *n) {
  const nt_instruction_keys *k = &m->audio->instr;
  *ids = NULL, *n = 0;
  if (!k->head)
    return err_set(STENO_ERR_UNSUPPORTED, "the model file has no instruction keys (convert it "
                   "again with transformers installed): it takes no prompt");
  if (m->no_encode)
    return err_set(STENO_ERR_UNSUPPORTED, "cannot encode a prompt: %s", m->no_encode);
  size_t tn = strlen(text), total = strlen(k->lead) + tn + strlen(k->trail);
  if (tn > NTX_MAX_INSTRUCTION)
    return err_set(STENO_ERR_INVALID, "a prompt of %zu bytes (at most %d)", tn,
                   NTX_MAX_INSTRUCTION);
  char *all = mem_alloc(total + 1, 1);
  int *out = mem_alloc(total + 1, sizeof *out); /* a token is at least one byte */
  int st = all && out ? 0 : STENO_ERR_NOMEM;
  if (!st) snprintf(all, total + 1, "%s%s%s", k->lead, text, k->trail);
  uint32_t at = 0;
  size_t from = 0;
  for (size_t i = 0; !st && i <= total; i++) {
    size_t len = 0;
    int id = i < total ? added_at(m, all + i, total - i, &len) : -1;
    if (id < 0 && i < total) continue;
    st = encode_span(m, all + from, i - from, out, &at, (uint32_t)total + 1);
    if (!st && id == (int)m->audio->c.audio_token)
      st = err_set(STENO_ERR_INVALID, "the prompt holds the audio token '%s'", m->tok.sym[id]);
    if (!st && id >= 0) out[at++] = id;
    from = i + len, i += len ? len - 1 : 0;
  }
  free(all);
  if (st) return free(out), err_wrap(st, "prompt: ");
  *ids = out, *n = at;
  return 0;
}

int ntx_prompt_ids(const ntx_model *m, const char *instruction, uint32_t n_audio, int **ids,
                   uint32_t *n) {
  *ids = NULL;
  int *instr = NULL;
  uint32_t n_instr = 0;
  if (instruction) TRY(encode_instruction(m, instruction, &instr, &n_instr));
  int st = nt_prompt(m->audio, instr, n_instr, n_audio, ids, n);
  free(instr);
  return st;
}

/* The prompt's rows: ids, with −1 and the next audio embedding where <|audio|> stands. */
int ntx_prompt_rows(const ntx_model *m, const nt_audio *a, const char *instruction, int **ids,
                    float **rows, uint32_t *n) {
  *rows = NULL;
  TRY(ntx_prompt_ids(m, instruction, a->tokens, ids, n));
  uint32_t d = m->lm->d.d, used = 0;
  *rows = mem_alloc((size_t)*n * d, sizeof **rows);
  if (!*rows) return STENO_ERR_NOMEM;
  for (uint32_t i = 0; i < *n; i++)
    if ((*ids)[i] == (int)m->audio->c.audio_token && used < a->tokens) {
      (*ids)[i] = -1;
      memcpy(*rows + (size_t)i * d, a->embeds + (size_t)used++ * d, d * sizeof **rows);
    }
  if (used != a->tokens)
    return err_set(STENO_ERR_FORMAT, "nemotron transcribe: %u audio rows for %u tokens", used,
                   a->tokens);
  return 0;
}

/* ntx_generate keeping the audio module's output in *a (the caller frees it). */
static int generate(ntx_session *s, const float *pcm, size_t n, const char *instruction,
                    uint32_t max_new, int **ids, uint32_t *n_ids, nt_audio *keep) {
  const ntx_model *m = s->m;
  *ids = NULL;
  *n_ids = 0;
  nt_audio a;
  memset(&a, 0, sizeof a);
  int *prompt = NULL, *out = mem_alloc(max_new + 1, sizeof *out);
  float *rows = NULL;
  uint32_t np = 0;
  double t0 = time_now();
  int st = out ? nt_audio_run_in(s->towers, pcm, n, &a) : STENO_ERR_NOMEM;
  double t1 = time_now();
  if (!st) st = ntx_prompt_rows(m, &a, instruction, &prompt, &rows, &np);
  if (!st && (uint64_t)np + max_new > s->lm->ctx)
    st = err_set(STENO_ERR_INVALID, "nemotron transcribe: a prompt of %u tokens and %u more do "
                 "not fit the context of %u", np, max_new, s->lm->ctx);
  nemotron_h_reset(s->lm);
  if (!st) st = nemotron_h_greedy(s->lm, prompt, rows, np, max_new, m->stop, m->n_stop, out, n_ids);
  s->audio_ms = 1e3 * (t1 - t0);
  s->decoder_ms = 1e3 * (time_now() - t1);
  *keep = a;
  free(prompt), free(rows);
  if (st) {
    free(out);
    *n_ids = 0;
    return st;
  }
  *ids = out;
  return 0;
}

int ntx_generate(ntx_session *s, const float *pcm, size_t n, const char *instruction,
                 uint32_t max_new, int **ids, uint32_t *n_ids) {
  nt_audio a;
  int st = generate(s, pcm, n, instruction, max_new, ids, n_ids, &a);
  nt_audio_free(&a);
  return st;
}

/* The text of the generated ids: specials and end tokens left out, white space trimmed. */
static int text_of(const ntx_model *m, const int *ids, uint32_t n, char **text) {
  int *keep = mem_alloc(n + 1, sizeof *keep);
  if (!keep) return STENO_ERR_NOMEM;
  size_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    bool stop = false;
    for (int j = 0; j < m->n_stop; j++) stop = stop || ids[i] == m->stop[j];
    if (!stop && ids[i] >= 0 && ids[i] < m->tok.n && !m->special[ids[i]]) keep[k++] = ids[i];
  }
  int st = bpe_decode(&m->tok, keep, k, text);
  free(keep);
  if (st) return st;
  char *t = *text, *e = t + strlen(t);
  while (*t && strchr(" \t\r\n", *t)) t++; /* e.g. the newlines after an empty <think></think> */
  while (e > t && strchr(" \t\r\n", e[-1])) e--;
  memmove(*text, t, (size_t)(e - t));
  (*text)[e - t] = '\0';
  return 0;
}

int ntx_word_times(const ntx_model *m, nt_arena *towers, const nt_audio *a, const int *ids,
                   uint32_t n, nt_word **words, size_t *count) {
  *words = NULL, *count = 0;
  const nt_model *am = m->audio;
  if (!am->wts.pieces.n || !am->wts.enc.blocks) return 0;
  int *keep = mem_alloc(n + 1, sizeof *keep);
  if (!keep) return STENO_ERR_NOMEM;
  size_t k = 0;
  for (uint32_t i = 0; i < n; i++)
    if (ids[i] >= 0 && ids[i] < m->tok.n) keep[k++] = ids[i];
  char *text = NULL; /* as the processor's decode(skip_special_tokens=False) */
  float *logp = NULL;
  int *cols = NULL;
  uint32_t nc = 0;
  int st = bpe_decode(&m->tok, keep, k, &text);
  free(keep);
  if (!st) st = nt_align_classes(&am->wts.pieces, text, am->wts.classes, &cols, &nc);
  if (!st && nc)
    st = towers ? nt_word_timestamp_logprobs_in(towers, a->asr, a->t, a->valid, cols, nc, &logp)
                : nt_word_timestamp_logprobs(am, a->asr, a->t, a->valid, cols, nc, &logp);
  nt_align_input in = {logp, cols, nc, a->t * am->wts.factor, am->wts.factor, a->speaker_logits,
                       am->c.speakers, am->c.sub, a->valid, (uint32_t)am->mel.c.hop,
                       (uint32_t)am->mel.c.sample_rate};
  if (!st && nc) st = nt_align_words(&am->wts.pieces, text, &in, words, count);
  free(text), free(logp), free(cols);
  return st;
}

/* The timed words into r: milliseconds, and the speaker of a <spk:N> tag as N + 1. */
static int put_words(steno_result *r, nt_word *w, size_t n, const char *text) {
  bool tagged = false;
  for (const char *t = text; *t && !tagged; t++) tagged = !strncasecmp(t, "<spk:", 5);
  r->words = mem_alloc(n + 1, sizeof *r->words);
  if (!r->words) return STENO_ERR_NOMEM;
  for (size_t i = 0; i < n; i++, r->nwords++) {
    r->words[i] = (steno_word){w[i].text, llround(w[i].start * 1000), llround(w[i].end * 1000),
                               w[i].p, tagged && w[i].tag >= 0 ? w[i].tag + 1 : 0};
    w[i].text = NULL; /* the result owns it now */
  }
  return 0;
}

int ntx_transcribe(ntx_session *s, const float *pcm, size_t n, const steno_transcribe_params *p,
                   steno_result **out) {
  *out = NULL;
  s->lm->abort = p ? p->abort : NULL; /* asked between generated tokens */
  s->lm->abort_user = p ? p->abort_user : NULL;
  double seconds = (double)n / 16000.0;
  uint32_t max_new = 16 + (uint32_t)(8 * seconds); /* speech is ~3 tokens a second */
  int *ids;
  uint32_t n_ids;
  nt_audio a;
  int st = generate(s, pcm, n, p ? p->prompt : NULL, max_new, &ids, &n_ids, &a);
  if (st) return nt_audio_free(&a), st;
  char *text = NULL;
  steno_result *r = NULL;
  nt_word *words = NULL;
  size_t nw = 0;
  st = text_of(s->m, ids, n_ids, &text);
  if (!st) st = ntx_word_times(s->m, s->towers, &a, ids, n_ids, &words, &nw);
  free(ids);
  nt_audio_free(&a);
  if (!st) st = result_empty(seconds, &r);
  if (!st && *text) {
    r->segments = mem_alloc(1, sizeof *r->segments);
    char *seg = r->segments ? mem_strdup(text) : NULL;
    if (!seg) st = STENO_ERR_NOMEM;
    else r->segments[r->nsegments++] = (steno_segment){seg, 0, (int64_t)(seconds * 1000 + 0.5)};
  }
  if (!st && nw) st = put_words(r, words, nw, text);
  nt_words_free(words, nw);
  if (!st) {
    free(r->text), r->text = text, text = NULL;
    r->timings = (steno_timings){0, s->audio_ms, s->decoder_ms}; /* features: in the audio module's */
  }
  free(text);
  if (st) steno_result_free(r);
  else *out = r;
  return st;
}
