/* Streaming transcription: audio fed as it arrives, text as it firms up.
 *
 * A family with native streaming (cache-aware Nemotron) decodes each chunk
 * once: all its text is firm. Every other model goes through a window loop
 * here: after each `update` of new audio the recent audio (from where the
 * firm text ends, at most `window` long) is transcribed again; words that end
 * before the last `tentative` seconds and came out the same in two runs in a
 * row become firm, the rest is tentative. The stream keeps the audio, and its
 * final result is one transcription of all of it: exactly what a one-shot
 * steno_transcribe gives. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "base/error.h"
#include "base/mem.h"

#define RATE 16000

typedef struct {
  char *text;
  int64_t start_ms, end_ms;
} word;

struct steno_stream {
  steno_session *session;
  steno_stream_params p;
  char *language; /* the params' copy */
  bool native;
  /* The window loop: all audio fed, where the firm text's audio ends, the
   * samples seen by the last run, its words after the firm ones. */
  float *pcm;
  size_t n, cap, firm_end, last_run;
  word *words;
  size_t n_words;
  char *firm, *tentative; /* what steno_stream_text returns */
};

steno_stream_params steno_stream_default_params(void) {
  steno_stream_params p = {0};
  p.window_seconds = 30;
  p.update_seconds = 1;
  p.tentative_seconds = 2;
  return p;
}

static void words_free(steno_stream *s) {
  for (size_t i = 0; i < s->n_words; i++) free(s->words[i].text);
  free(s->words);
  s->words = NULL;
  s->n_words = 0;
}

void steno_stream_free(steno_stream *s) {
  if (!s) return;
  if (s->native) s->session->m->fam->stream_end(s->session->impl);
  steno_session_free(s->session);
  words_free(s);
  free(s->pcm), free(s->firm), free(s->tentative), free(s->language);
  free(s);
}

/* The family's native stream, if it has one for this model. */
static int try_native(steno_stream *s) {
  const family *f = s->session->m->fam;
  if (!f->stream_begin) return 0;
  int st = f->stream_begin(s->session->impl, &s->p);
  if (st == STENO_ERR_UNSUPPORTED) return 0; /* the window loop instead */
  s->native = !st;
  return st;
}

static int check_params(const steno_stream_params *p) {
  if (!(p->window_seconds >= 5 && p->window_seconds <= 3600) ||
      !(p->update_seconds > 0 && p->update_seconds <= p->window_seconds) ||
      !(p->tentative_seconds >= 0 && p->tentative_seconds < p->window_seconds))
    return err_set(STENO_ERR_INVALID,
                   "steno_stream_open: window %g s (5 to 3600), update %g s (above 0, at most the "
                   "window), tentative %g s (0 to below the window)",
                   p->window_seconds, p->update_seconds, p->tentative_seconds);
  return 0;
}

int steno_stream_open(steno_model *m, const steno_stream_params *params, steno_stream **out) {
  if (!out) return err_set(STENO_ERR_INVALID, "steno_stream_open: NULL argument");
  *out = NULL;
  if (!m) return err_set(STENO_ERR_INVALID, "steno_stream_open: NULL model");
  steno_stream_params p = params ? *params : steno_stream_default_params();
  TRY(check_params(&p));
  steno_stream *s = mem_alloc(1, sizeof *s);
  if (!s) return STENO_ERR_NOMEM;
  s->p = p;
  int st = 0;
  if (p.language && !(s->language = strdup(p.language))) st = STENO_ERR_NOMEM;
  s->p.language = s->language;
  if (!st) st = steno_session_new(m, &s->session);
  if (!st) st = try_native(s);
  if (!st && !(s->firm = strdup("")) ) st = STENO_ERR_NOMEM;
  if (!st && !(s->tentative = strdup(""))) st = STENO_ERR_NOMEM;
  if (st) {
    steno_stream_free(s);
    return st;
  }
  *out = s;
  return 0;
}

int steno_stream_native(const steno_stream *s) { return s && s->native; }

/* The one-shot params of the window loop's runs. */
static steno_transcribe_params run_params(const steno_stream *s) {
  steno_transcribe_params tp = steno_transcribe_default_params();
  tp.language = s->p.language;
  tp.abort = s->p.abort;
  tp.abort_user = s->p.abort_user;
  return tp;
}

/* Appends " text" (no space before the first) to *dst. */
static int append(char **dst, const char *text) {
  size_t a = strlen(*dst), b = strlen(text);
  if (!b) return 0;
  char *p = realloc(*dst, a + b + 2);
  if (!p) return STENO_ERR_NOMEM;
  if (a) p[a++] = ' ';
  memcpy(p + a, text, b + 1);
  *dst = p;
  return 0;
}

/* The run's words, times from the start of the audio. */
static int run_words(const steno_result *r, int64_t offset_ms, word **out, size_t *count) {
  size_t n = steno_result_word_count(r);
  *out = NULL, *count = 0;
  if (!n) return 0;
  word *w = mem_alloc(n, sizeof *w);
  if (!w) return STENO_ERR_NOMEM;
  for (size_t i = 0; i < n; i++) {
    steno_word x = steno_result_word(r, i);
    w[i] = (word){strdup(x.text), x.start_ms + offset_ms, x.end_ms + offset_ms};
    if (!w[i].text) {
      *out = w, *count = i;
      return STENO_ERR_NOMEM;
    }
  }
  *out = w, *count = n;
  return 0;
}

/* Words that end before the tentative tail and match the last run's at the
 * same place (text, start within 160 ms) become firm; the next run starts
 * between the last firm word and the word after it. */
static int firm_up(steno_stream *s, word *w, size_t n);

/* Frees a run's words. */
static void drop_words(word *w, size_t n) {
  for (size_t i = 0; i < n; i++) free(w[i].text);
  free(w);
}

static int firm_words(steno_stream *s, word *w, size_t n) {
  int st = firm_up(s, w, n);
  if (st) drop_words(w, n);
  return st;
}

static int firm_up(steno_stream *s, word *w, size_t n) {
  int64_t cutoff = (int64_t)(s->n * 1000 / RATE) - (int64_t)(s->p.tentative_seconds * 1000);
  size_t k = 0;
  while (k < n && k < s->n_words && w[k].end_ms <= cutoff && !strcmp(w[k].text, s->words[k].text) &&
         llabs(w[k].start_ms - s->words[k].start_ms) <= 160)
    k++;
  for (size_t i = 0; i < k; i++) TRY(append(&s->firm, w[i].text));
  if (k) {
    int64_t end = k < n ? (w[k - 1].end_ms + w[k].start_ms) / 2 : w[k - 1].end_ms;
    size_t at = (size_t)(end * RATE / 1000);
    if (at > s->firm_end && at <= s->n) s->firm_end = at;
  }
  char *t = strdup("");
  if (!t) return STENO_ERR_NOMEM;
  for (size_t i = k; i < n; i++) TRY(append(&t, w[i].text));
  free(s->tentative);
  s->tentative = t;
  /* The words after the firm ones are what the next run is compared with. */
  words_free(s);
  for (size_t i = 0; i < k; i++) free(w[i].text);
  memmove(w, w + k, (n - k) * sizeof *w);
  s->words = w, s->n_words = n - k;
  return 0;
}

/* One run of the window loop over the audio after the firm text's. */
static int update(steno_stream *s) {
  size_t window = (size_t)(s->p.window_seconds * RATE), from = s->firm_end;
  if (s->n - from > window) from = s->n - window;
  s->last_run = s->n;
  if (s->n - from < RATE / 2) return 0; /* under half a second: wait for more */
  steno_transcribe_params tp = run_params(s);
  steno_result *r = NULL;
  TRY(steno_session_transcribe(s->session, s->pcm + from, s->n - from, &tp, &r));
  word *w;
  size_t n;
  int st = run_words(r, (int64_t)from * 1000 / RATE, &w, &n);
  steno_result_free(r);
  if (!st) return firm_words(s, w, n);
  drop_words(w, n);
  return st;
}

int steno_stream_feed(steno_stream *s, const float *pcm, size_t n) {
  if (!s || (!pcm && n)) return err_set(STENO_ERR_INVALID, "steno_stream_feed: NULL argument");
  for (size_t i = 0; i < n; i++)
    if (!(pcm[i] >= -1e4f && pcm[i] <= 1e4f))
      return err_set(STENO_ERR_INVALID, "steno_stream_feed: sample %zu is %g", i, pcm[i]);
  if (s->native) { /* its features on the session's workers, as a whole call's */
    api_call call = api_call_begin(s->session);
    int st = s->session->m->fam->stream_feed(s->session->impl, pcm, n);
    api_call_end(call);
    return st;
  }
  if (s->n + n > s->cap) {
    size_t cap = s->cap ? s->cap : RATE * 8;
    while (cap < s->n + n) cap *= 2;
    float *p = realloc(s->pcm, cap * sizeof *p);
    if (!p) return err_set(STENO_ERR_NOMEM, "steno_stream_feed: %zu samples", cap);
    s->pcm = p, s->cap = cap;
  }
  memcpy(s->pcm + s->n, pcm, n * sizeof *pcm);
  s->n += n;
  if (s->n - s->last_run >= (size_t)(s->p.update_seconds * RATE)) return update(s);
  return 0;
}

int steno_stream_text(steno_stream *s, const char **firm, const char **tentative) {
  if (!s || !firm || !tentative) return err_set(STENO_ERR_INVALID, "steno_stream_text: NULL argument");
  if (s->native) {
    steno_result *r = NULL;
    TRY(s->session->m->fam->stream_result(s->session->impl, &r));
    char *t = strdup(steno_result_text(r));
    steno_result_free(r);
    if (!t) return STENO_ERR_NOMEM;
    free(s->firm);
    s->firm = t;
  }
  *firm = s->firm;
  *tentative = s->tentative;
  return 0;
}

int steno_stream_finish(steno_stream *s, steno_result **out) {
  if (!s || !out) return err_set(STENO_ERR_INVALID, "steno_stream_finish: NULL argument");
  *out = NULL;
  if (s->native) {
    api_call call = api_call_begin(s->session);
    int st = s->session->m->fam->stream_finish(s->session->impl, out);
    api_call_end(call);
    return st;
  }
  static const float none = 0;
  steno_transcribe_params tp = run_params(s);
  return steno_session_transcribe(s->session, s->pcm ? s->pcm : &none, s->n, &tp, out);
}
