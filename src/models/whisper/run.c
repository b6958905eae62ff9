/* Whisper: the search over a clip, window by window, as transformers'
 * WhisperGenerationMixin.generate does it with OpenAI's recipe: language
 * detection on the first window, the prefix, greedy decoding with timestamp
 * rules, temperature fallback, the no-speech skip, segments and the seek. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timer.h"
#include "models/whisper/whisper.h"
#include "text/result.h"

/* OpenAI's recipe (transcribe.cpp's defaults). */
static const float TEMPERATURES[] = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
#define RATIO_MAX 2.4
#define LOGPROB_MIN -1.0
#define NO_SPEECH_MIN 0.6
#define MAX_INITIAL 50 /* the first timestamp at most 1.0 s */
#define SEED 0x5eed5eedull

wsearch whisper_rules(const whisper *m) {
  return (wsearch){.vocab = (int)m->c.vocab, .eot = m->c.eot, .no_timestamps = m->c.no_timestamps,
                   .suppress = m->suppress, .n_suppress = m->n_suppress,
                   .begin_suppress = m->begin_suppress, .n_begin_suppress = m->n_begin_suppress,
                   .max_initial = MAX_INITIAL, .timestamps = 1};
}

int whisper_features(whisper *m, const float *pcm, size_t n, float **mel, size_t *frames) {
  return wmel_compute(&m->mel, pcm, n, mel, frames);
}

int whisper_detect_language(whisper *m, int *token) {
  const whisper_config *c = &m->c;
  float *x = m->a.host_logits;
  TRY(whisper_feed(m, &c->sot, 1, 0, x));
  int best = -1;
  for (int i = 0; i < c->n_langs; i++) {
    int id = c->lang_id[i];
    if (best < 0 || x[id] > x[best] || (x[id] == x[best] && id < best)) best = id;
  }
  *token = best;
  return 0;
}

/* ---- the prefix ---- */

/* The language token of a code ("de", "DE"), or −1. */
static int language_token(const whisper_config *c, const char *code) {
  for (int i = 0; i < c->n_langs; i++) {
    const char *a = c->lang_code[i], *b = code;
    while (*a && *b && tolower((unsigned char)*a) == tolower((unsigned char)*b)) a++, b++;
    if (!*a && !*b) return c->lang_id[i];
  }
  return -1;
}

/* The prompt as transformers' get_prompt_ids encodes it: trimmed, one leading
 * space, no special tokens; the last n_text_ctx/2 − 1 tokens kept. */
static int prompt_tokens(whisper *m, const char *text, int **ids, size_t *n) {
  while (isspace((unsigned char)*text)) text++;
  size_t len = strlen(text);
  while (len && isspace((unsigned char)text[len - 1])) len--;
  for (const char *s = strstr(text, "<|"); s && s < text + len; s = strstr(s + 2, "<|")) {
    const char *e = strstr(s + 2, "|>");
    char sym[64];
    if (!e || e + 2 - s >= (long)sizeof sym) continue;
    memcpy(sym, s, (size_t)(e + 2 - s));
    sym[e + 2 - s] = 0;
    int id = bpe_find(&m->tok, sym);
    if (id >= m->c.eot)
      return err_set(STENO_ERR_INVALID, "the prompt holds the special token %s", sym);
  }
  char *spaced = mem_alloc(len + 2, 1);
  if (!spaced) return STENO_ERR_NOMEM;
  spaced[0] = ' ';
  memcpy(spaced + 1, text, len);
  int st = bpe_encode(&m->tok, spaced, ids, n);
  free(spaced);
  TRY(st);
  size_t keep = m->c.n_text_ctx / 2 - 1;
  if (*n > keep) {
    memmove(*ids, *ids + (*n - keep), keep * sizeof **ids);
    *n = keep;
  }
  return 0;
}

/* [<|startofprev|> prompt…] <|startoftranscript|> [language task]; *sot its index. */
static int build_prefix(whisper *m, const steno_transcribe_params *p, int lang, whisper_output *o,
                        size_t *sot) {
  const whisper_config *c = &m->c;
  int *prompt = NULL;
  size_t np = 0;
  if (p->prompt && *p->prompt) {
    if (c->prev_sot < 0) return err_set(STENO_ERR_UNSUPPORTED, "this model has no <|startofprev|>: no prompt");
    TRY(prompt_tokens(m, p->prompt, &prompt, &np));
  }
  o->prefix = mem_alloc(np + 4, sizeof *o->prefix);
  if (!o->prefix) return free(prompt), STENO_ERR_NOMEM;
  size_t k = 0;
  if (np) {
    o->prefix[k++] = c->prev_sot;
    memcpy(o->prefix + k, prompt, np * sizeof *prompt);
    k += np;
  }
  free(prompt);
  *sot = k;
  o->prefix[k++] = c->sot;
  if (c->multilingual) {
    o->prefix[k++] = lang;
    o->prefix[k++] = p->translate ? c->translate : c->transcribe;
  }
  o->n_prefix = k;
  if (k + 1 > c->n_text_ctx)
    return err_set(STENO_ERR_INVALID, "the prompt leaves no room in the %u positions", c->n_text_ctx);
  return 0;
}

/* ---- one window ---- */

typedef struct {
  int *tok;
  double *lp;
  size_t n, cap;
} seq;

static int seq_push(seq *s, int id, double lp) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    int *t = mem_realloc(s->tok, cap, sizeof *t);
    if (!t) return STENO_ERR_NOMEM;
    s->tok = t;
    double *l = mem_realloc(s->lp, cap, sizeof *l);
    if (!l) return STENO_ERR_NOMEM;
    s->lp = l, s->cap = cap;
  }
  s->tok[s->n] = id, s->lp[s->n++] = lp;
  return 0;
}

/* STENO_BENCH_TOKENS=N, for benchmarks against transformers'
 * generate(max_new_tokens=N, min_new_tokens=N) without temperature fallback:
 * each window is decoded by the greedy tier only (no fallback, no no-speech
 * skip) to exactly N tokens, the end of text suppressed until then, and the
 * next window starts a whole window later, so both sides do the same work.
 * *n 0 when unset; N in 1..n_text_ctx/2. */
static int bench_tokens(const whisper_config *c, size_t *n) {
  *n = 0;
  const char *v = getenv("STENO_BENCH_TOKENS");
  if (!v) return 0;
  char *end;
  long k = strtol(v, &end, 10);
  if (!*v || *end || k < 1 || (unsigned long)k > c->n_text_ctx / 2)
    return err_set(STENO_ERR_INVALID, "STENO_BENCH_TOKENS='%s': a count from 1 to %u", v,
                   c->n_text_ctx / 2);
  *n = (size_t)k;
  return 0;
}

/* The rules as gpu_ts_greedy takes them (bench: the end of text masked). */
gpu_ts_rules whisper_gpu_rules(const whisper *m, bool bench) {
  return (gpu_ts_rules){.vocab = m->c.vocab, .eot = (uint32_t)m->c.eot,
                        .no_timestamps = (uint32_t)m->c.no_timestamps, .max_initial = MAX_INITIAL,
                        .timestamps = true, .no_eot = bench, .blocked = m->blocked,
                        .words = m->blocked_words};
}

/* Greedy steps per chunk on the GPU: a short first chunk (a window may end
 * early: the steps after its end of text are computed for nothing), then 8.
 * The next chunk is recorded while the GPU runs one, and submitted once its
 * ids show no end of text, so the GPU waits for the host once a chunk. */
#define GREEDY_FIRST 4
#define GREEDY_CHUNK 8

/* The greedy tier with the choice on the GPU (whisper_greedy_*): the same
 * tokens as the loop below, the log Σ exp in f32. */
static int greedy_on_gpu(whisper *m, uint32_t np, const steno_transcribe_params *p, size_t bench,
                         seq *out) {
  const whisper_config *c = &m->c;
  gpu_ts_rules rules = whisper_gpu_rules(m, bench > 0);
  size_t steps = c->n_text_ctx - np; /* the last position's token ends it */
  if (bench && bench < steps) steps = bench;
  int ids[GREEDY_CHUNK];
  float lp[GREEDY_CHUNK];
  uint32_t next = (uint32_t)(steps < GREEDY_FIRST ? steps : GREEDY_FIRST);
  TRY(whisper_greedy_record(m, 0, &rules, np, 0, next));
  TRY(whisper_greedy_submit(m, 0));
  for (int slot = 0;; slot ^= 1) {
    uint32_t count = m->steps.count[slot], more = (uint32_t)(steps - next);
    if (more > GREEDY_CHUNK) more = GREEDY_CHUNK;
    if (more) TRY(whisper_greedy_record(m, slot ^ 1, &rules, np, next, more));
    TRY(whisper_greedy_wait(m, slot, ids, lp));
    for (uint32_t i = 0; i < count; i++) {
      TRY(seq_push(out, ids[i], lp[i]));
      if (ids[i] == c->eot || out->n == steps) return 0;
    }
    if (p->abort && p->abort(p->abort_user)) return err_set(STENO_ERR_ABORTED, "aborted");
    TRY(whisper_greedy_submit(m, slot ^ 1));
    next += more;
  }
}

/* Decodes one tier: feeds the prefix, then picks tokens until the end of text
 * or the last position (with bench > 0: exactly bench tokens, no end of text
 * before them). *no_speech from the raw logits at the SOT position. */
static int decode_tier(whisper *m, const whisper_output *o, size_t sot, float temperature,
                       uint64_t *rng, const steno_transcribe_params *p, size_t bench, seq *out,
                       double *no_speech) {
  const whisper_config *c = &m->c;
  wsearch rules = whisper_rules(m);
  float *x = m->a.host_logits;
  uint32_t np = (uint32_t)o->n_prefix;
  TRY(whisper_feed(m, o->prefix, (uint32_t)sot + 1, 0, x));
  *no_speech = wsearch_prob(x, (int)c->vocab, c->no_timestamps - 1);
  if (np > sot + 1) TRY(whisper_feed(m, o->prefix + sot + 1, np - (uint32_t)sot - 1, (uint32_t)sot + 1, x));
  out->n = 0;
  if (temperature == 0 && m->steps.gpu_greedy) return greedy_on_gpu(m, np, p, bench, out);
  if (m->steps.ahead) TRY(whisper_step_prepare(m, np));
  for (;;) {
    if (p->abort && p->abort(p->abort_user)) return err_set(STENO_ERR_ABORTED, "aborted");
    wsearch_process(&rules, out->tok, out->n, x);
    if (bench) x[c->eot] = -INFINITY;
    int id = wsearch_choose(x, (int)c->vocab, temperature, rng);
    bool last = id == c->eot || np + out->n + 1 >= c->n_text_ctx || out->n + 1 == bench;
    /* While the GPU computes the next logits, the host takes this token's
     * log-softmax (a pass of exp over the vocabulary) from x and, recording
     * ahead, records the token after it. */
    if (!last) TRY(whisper_step_start(m, id, np + (uint32_t)out->n));
    TRY(seq_push(out, id, wsearch_logprob(x, (int)c->vocab, id)));
    if (last) return 0;
    if (m->steps.ahead) TRY(whisper_step_prepare(m, np + (uint32_t)out->n));
    TRY(whisper_step_finish(m, x));
  }
}

/* The tiers of one encoded window; the accepted (or last) one into w. */
static int decode_window(whisper *m, const whisper_output *o, size_t sot, uint64_t *rng,
                         const steno_transcribe_params *p, size_t bench, whisper_window *w) {
  const whisper_config *c = &m->c;
  seq s = {0};
  int st = 0;
  size_t tiers = bench ? 1 : sizeof TEMPERATURES / sizeof *TEMPERATURES;
  for (size_t t = 0; t < tiers && !st; t++) {
    double no_speech;
    st = decode_tier(m, o, sot, TEMPERATURES[t], rng, p, bench, &s, &no_speech);
    if (st) break;
    double sum = 0;
    for (size_t i = 0; i < s.n; i++) sum += s.lp[i];
    w->temperature = TEMPERATURES[t];
    w->avg_logprob = s.n ? sum / (double)s.n : 0;
    w->ratio = wsearch_compression_ratio(s.tok, s.n, (int)c->vocab);
    w->no_speech = no_speech;
    bool fallback = w->ratio > RATIO_MAX || w->avg_logprob < LOGPROB_MIN;
    w->skipped = !bench && w->avg_logprob < LOGPROB_MIN && no_speech > NO_SPEECH_MIN;
    log_debug("whisper: window at frame %u, T %.1f: %zu tokens, ratio %.2f, logprob %.2f, "
              "no speech %.2f%s",
              w->seek, w->temperature, s.n, w->ratio, w->avg_logprob, no_speech,
              w->skipped ? " (skipped)" : fallback ? " (fallback)" : "");
    if (w->skipped || !fallback) break;
  }
  w->tokens = s.tok, w->logprob = s.lp, w->n = s.n;
  return st;
}

static int add_segments(whisper *m, whisper_output *o, size_t wi, uint32_t *advance) {
  whisper_window *w = &o->win[wi];
  wsearch rules = whisper_rules(m);
  size_t n = w->n && w->tokens[w->n - 1] == m->c.eot ? w->n - 1 : w->n;
  wseg *segs;
  size_t ns;
  TRY(wsearch_segments(&rules, w->tokens, n, w->frames, &segs, &ns, advance));
  whisper_segment *grown = mem_realloc(o->seg, o->n_seg + ns + 1, sizeof *grown);
  if (!grown) return free(segs), STENO_ERR_NOMEM;
  o->seg = grown;
  int64_t offset = (int64_t)w->seek * 10;
  for (size_t i = 0; i < ns; i++)
    o->seg[o->n_seg++] = (whisper_segment){offset + segs[i].t0_ms, offset + segs[i].t1_ms, wi,
                                           segs[i].first, segs[i].end};
  free(segs);
  return 0;
}

/* The language token: the one asked for, or the one detected on the first window. */
static int choose_language(whisper *m, const steno_transcribe_params *p, int *lang) {
  const whisper_config *c = &m->c;
  *lang = -1;
  if (p->translate && !c->can_translate)
    return err_set(STENO_ERR_UNSUPPORTED, "this model cannot translate (English-only)");
  if (!p->language || !*p->language) return 0;
  if (!c->multilingual) {
    if (strcmp(p->language, "en"))
      return err_set(STENO_ERR_UNSUPPORTED, "this model is English-only: language '%s'", p->language);
    return 0;
  }
  if ((*lang = language_token(c, p->language)) < 0) {
    char list[512] = "";
    for (int i = 0; i < c->n_langs && strlen(list) + 12 < sizeof list; i++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "", c->lang_code[i]);
    return err_set(STENO_ERR_UNSUPPORTED, "language '%s' is not one of this model's: %s",
                   p->language, list);
  }
  return 0;
}

/* The windows of `total` mel frames: mel on the host, or (NULL) the GPU's
 * features (whisper_features_gpu). */
static int run_windows(whisper *m, const float *mel, size_t total, const steno_transcribe_params *p,
                       int lang, size_t bench, whisper_output *o) {
  const whisper_config *c = &m->c;
  size_t W = c->win_frames, M = c->mels, sot = 0;
  float *window = mem_alloc(W * M, sizeof *window);
  if (!window) return STENO_ERR_NOMEM;
  uint64_t rng = SEED;
  int st = 0;
  for (size_t seek = 0; seek < total && !st;) {
    if (p->abort && p->abort(p->abort_user)) {
      st = err_set(STENO_ERR_ABORTED, "aborted");
      break;
    }
    size_t frames = total - seek < W ? total - seek : W;
    double t0 = time_now();
    if (mel) {
      memset(window, 0, W * M * sizeof *window);
      memcpy(window, mel + seek * M, frames * M * sizeof *window);
      st = whisper_encode(m, window, NULL);
    } else {
      st = whisper_encode_at(m, seek, NULL); /* the GPU's features */
    }
    double t1 = time_now();
    o->timings.encoder_ms += (t1 - t0) * 1e3;
    if (!st && !o->prefix) {
      if (lang < 0 && c->multilingual) st = whisper_detect_language(m, &lang);
      o->language = lang;
      if (!st) st = build_prefix(m, p, lang, o, &sot);
    }
    whisper_window *grown = st ? NULL : mem_realloc(o->win, o->n_win + 1, sizeof *grown);
    if (!st && !grown) st = STENO_ERR_NOMEM;
    if (st) break;
    o->win = grown;
    whisper_window *w = &o->win[o->n_win++];
    memset(w, 0, sizeof *w);
    w->seek = (uint32_t)seek, w->frames = (uint32_t)frames;
    st = decode_window(m, o, sot, &rng, p, bench, w);
    o->timings.decoder_ms += (time_now() - t1) * 1e3; /* language detection included */
    uint32_t advance = (uint32_t)frames;
    if (!st && !w->skipped) st = add_segments(m, o, o->n_win - 1, &advance);
    /* Never stand still (a window that ends at its own start would repeat
     * forever). Benchmarks move on by whole windows: the same work on both sides
     * whatever timestamps random weights pick. */
    seek += advance && !bench ? advance : frames;
  }
  free(window);
  return st;
}

int whisper_run(whisper *m, const float *pcm, size_t n, const steno_transcribe_params *p,
                whisper_output *out) {
  memset(out, 0, sizeof *out);
  out->language = -1;
  int lang;
  size_t bench;
  TRY(choose_language(m, p, &lang));
  TRY(bench_tokens(&m->c, &bench));
  float *mel = NULL;
  size_t frames;
  double t0 = time_now();
  if (m->gmel && n) TRY(whisper_features_gpu(m, pcm, n, &frames)); /* none: the padding's frames */
  else TRY(whisper_features(m, pcm, n, &mel, &frames));
  out->timings.features_ms = (time_now() - t0) * 1e3;
  int st = run_windows(m, mel, frames, p, lang, bench, out);
  free(mel);
  if (st) whisper_output_free(out);
  return st;
}

void whisper_output_free(whisper_output *o) {
  for (size_t i = 0; i < o->n_win; i++) free(o->win[i].tokens), free(o->win[i].logprob);
  free(o->win);
  free(o->seg);
  free(o->prefix);
  memset(o, 0, sizeof *o);
}

int whisper_transcribe(whisper *m, const float *pcm, size_t n, const steno_transcribe_params *p,
                       steno_result **out) {
  *out = NULL;
  whisper_output o;
  TRY(whisper_run(m, pcm, n, p, &o));
  int st = whisper_result(m, &o, (double)n / 16000.0, out);
  if (!st) (*out)->timings = o.timings;
  whisper_output_free(&o);
  return st;
}
