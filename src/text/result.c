#include "text/result.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "text/bpe.h"

/* id's text as a new string. */
static char *piece_text(const text_vocab *v, int id) {
  size_t cap = 64;
  for (;;) {
    char *buf = mem_alloc(cap + 1, 1);
    if (!buf) return NULL;
    size_t n = vocab_append(v, id, buf, 0, cap);
    if (n <= cap) {
      buf[n] = 0;
      return buf;
    }
    free(buf);
    cap *= 4;
  }
}

/* Text of tokens [a, b) of toks (kept ids only), spaces collapsed and trimmed. */
static char *span_text(const text_vocab *v, const int *ids, size_t a, size_t b) {
  size_t cap = 16;
  for (size_t i = a; i < b; i++) cap += v->piece[ids[i]] ? strlen(v->piece[ids[i]]) + 1 : 0;
  char *raw = mem_alloc(cap + 1, 1);
  if (!raw) return NULL;
  size_t n = 0;
  for (size_t i = a; i < b && n <= cap; i++) n = vocab_append(v, ids[i], raw, n, cap);
  if (n > cap) n = cap;
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (raw[i] == ' ' && (o == 0 || raw[o - 1] == ' ')) continue;
    raw[o++] = raw[i];
  }
  while (o && raw[o - 1] == ' ') o--;
  raw[o] = 0;
  return raw;
}

/* Segments are sentences: one ends after a word that ends in sentence-final
 * punctuation, before a pause of SEGMENT_PAUSE_MS or more between words (speech
 * without punctuation), and none spans more than SEGMENT_MAX_MS (split at its
 * largest pause): a length that reads as a subtitle or a search hit, where the
 * pieces transcribed at once (60 s for Parakeet) would not. */
enum { SEGMENT_PAUSE_MS = 800, SEGMENT_MAX_MS = 30000 };

/* . ? ! … and the fullwidth 。？！ */
static bool ends_sentence(const char *word) {
  static const char *const marks[] = {".", "?", "!", "\xe2\x80\xa6", "\xe3\x80\x82", "\xef\xbc\x9f",
                                      "\xef\xbc\x81"};
  size_t n = strlen(word);
  for (size_t i = 0; i < sizeof marks / sizeof *marks; i++) {
    size_t m = strlen(marks[i]);
    if (n >= m && !memcmp(word + n - m, marks[i], m)) return true;
  }
  return false;
}

/* The split of words [a, b) (b − a ≥ 2) that ends up in the largest pause, the
 * one nearest the middle among equals. */
static size_t largest_pause(const steno_word *w, size_t a, size_t b) {
  int64_t mid = (w[a].start_ms + w[b - 1].end_ms) / 2, best = -1, near = 0;
  size_t cut = a + 1;
  for (size_t i = a + 1; i < b; i++) {
    int64_t gap = w[i].start_ms - w[i - 1].end_ms, d = w[i].start_ms > mid ? w[i].start_ms - mid : mid - w[i].start_ms;
    if (gap > best || (gap == best && d < near)) best = gap, near = d, cut = i;
  }
  return cut;
}

/* A segment over words [a, b) of r (their tokens from first[a] to first[b]),
 * in several when it spans over SEGMENT_MAX_MS. Empty text adds none. */
static int add_segment(steno_result *r, const text_vocab *v, const int *ids, const size_t *first, size_t a,
                       size_t b) {
  const steno_word *w = r->words;
  if (b - a > 1 && w[b - 1].end_ms - w[a].start_ms > SEGMENT_MAX_MS) {
    size_t cut = largest_pause(w, a, b);
    TRY(add_segment(r, v, ids, first, a, cut));
    return add_segment(r, v, ids, first, cut, b);
  }
  char *text = span_text(v, ids, first[a], first[b]);
  if (!text) return STENO_ERR_NOMEM;
  if (!text[0]) free(text);
  else r->segments[r->nsegments++] = (steno_segment){text, w[a].start_ms, w[b - 1].end_ms};
  return 0;
}

static int sentences(steno_result *r, const text_vocab *v, const int *ids, const size_t *first) {
  size_t start = 0, n = r->nwords;
  for (size_t i = 0; i < n; i++) {
    if (i > start && r->words[i].start_ms - r->words[i - 1].end_ms >= SEGMENT_PAUSE_MS) {
      TRY(add_segment(r, v, ids, first, start, i));
      start = i;
    }
    if (ends_sentence(r->words[i].text)) {
      TRY(add_segment(r, v, ids, first, start, i + 1));
      start = i + 1;
    }
  }
  return start < n ? add_segment(r, v, ids, first, start, n) : 0;
}

int result_empty(double duration, steno_result **out) {
  steno_result *r = mem_alloc(1, sizeof *r);
  if (!r || !(r->text = mem_strdup(""))) {
    free(r);
    return STENO_ERR_NOMEM;
  }
  r->duration = duration;
  *out = r;
  return 0;
}

int result_from_tokens(const text_vocab *v, const dec_tokens *toks, double ms_per_frame,
                       double offset_ms, double duration, steno_result **out) {
  *out = NULL;
  steno_result *r;
  TRY(result_empty(duration, &r));
  size_t n = 0;
  int *ids = mem_alloc(toks->n + 1, sizeof *ids);
  size_t *first = mem_alloc(toks->n + 1, sizeof *first); /* each word's first token */
  r->tokens = mem_alloc(toks->n + 1, sizeof *r->tokens);
  r->words = mem_alloc(toks->n + 1, sizeof *r->words);
  r->segments = mem_alloc(toks->n + 1, sizeof *r->segments);
  int st = ids && first && r->tokens && r->words && r->segments ? 0 : STENO_ERR_NOMEM;
  for (size_t i = 0; !st && i < toks->n; i++) {
    const dec_token *d = &toks->v[i];
    if (vocab_hidden(v, d->id)) continue;
    steno_token *t = &r->tokens[n];
    t->id = d->id;
    t->start_ms = llround(offset_ms + ms_per_frame * d->frame);
    t->end_ms = llround(offset_ms + ms_per_frame * (d->frame + d->frames));
    t->p = d->p;
    if (!(t->text = piece_text(v, d->id))) st = STENO_ERR_NOMEM;
    ids[n++] = d->id;
  }
  r->ntokens = n;
  /* Words: a new one at the first token and at every "▁" piece. */
  for (size_t a = 0; !st && a < n;) {
    size_t b = a + 1;
    while (b < n && !vocab_starts_word(v, ids[b])) b++;
    first[r->nwords] = a;
    first[r->nwords + 1] = b;
    steno_word *w = &r->words[r->nwords++];
    w->start_ms = r->tokens[a].start_ms;
    w->end_ms = r->tokens[b - 1].end_ms;
    w->p = 1.0f;
    for (size_t i = a; i < b; i++) w->p = fminf(w->p, r->tokens[i].p);
    if (!(w->text = span_text(v, ids, a, b))) st = STENO_ERR_NOMEM;
    a = b;
  }
  if (!st) {
    free(r->text);
    r->text = span_text(v, ids, 0, n);
    if (!r->text) st = STENO_ERR_NOMEM;
  }
  if (!st) st = sentences(r, v, ids, first);
  free(ids);
  free(first);
  if (st) {
    steno_result_free(r);
    return st;
  }
  *out = r;
  return 0;
}

/* p (n items of size bytes) grown by `more` items; NULL on failure. */
static void *grown(void *p, size_t n, size_t more, size_t size) {
  size_t total;
  if (!add_ok(n, more, &total)) return NULL;
  return mem_realloc(p, total ? total : 1, size);
}

/* *text replaced by its printable form (utf8_printable). */
static int clean(const char **text) {
  char *c;
  TRY(utf8_printable(*text, strlen(*text), &c));
  free((char *)*text);
  *text = c;
  return 0;
}

/* Every string of r made printable: a vocabulary is data from a file, and its
 * pieces may hold escape sequences or invalid UTF-8 that must not reach a
 * terminal or a JSON reader. */
static int result_printable(steno_result *r) {
  const char *text = r->text;
  int st = clean(&text);
  r->text = (char *)text;
  for (size_t i = 0; !st && i < r->ntokens; i++) st = clean(&r->tokens[i].text);
  for (size_t i = 0; !st && i < r->nwords; i++) st = clean(&r->words[i].text);
  for (size_t i = 0; !st && i < r->nsegments; i++) st = clean(&r->segments[i].text);
  return st;
}

int result_append(steno_result *into, steno_result *piece, int64_t offset_ms) {
  int st = result_printable(piece);
  if (st) {
    steno_result_free(piece);
    return st;
  }
  size_t a = strlen(into->text), b = strlen(piece->text);
  char *text = NULL;
  if (b) {
    text = mem_alloc(a + b + 2, 1);
    if (!text) st = STENO_ERR_NOMEM;
    else snprintf(text, a + b + 2, "%s%s%s", into->text, a ? " " : "", piece->text);
  }
  /* Reserve everything first, so a failure leaves `into` as it was. */
  steno_token *tokens = st ? NULL : grown(into->tokens, into->ntokens, piece->ntokens, sizeof *tokens);
  if (tokens) into->tokens = tokens;
  steno_word *words = tokens ? grown(into->words, into->nwords, piece->nwords, sizeof *words) : NULL;
  if (words) into->words = words;
  steno_segment *segs = words ? grown(into->segments, into->nsegments, piece->nsegments, sizeof *segs) : NULL;
  if (segs) into->segments = segs;
  if (!segs) {
    free(text);
    steno_result_free(piece);
    return STENO_ERR_NOMEM;
  }
  for (size_t i = 0; i < piece->ntokens; i++) {
    steno_token t = piece->tokens[i];
    t.start_ms += offset_ms, t.end_ms += offset_ms;
    into->tokens[into->ntokens++] = t;
  }
  for (size_t i = 0; i < piece->nwords; i++) {
    steno_word w = piece->words[i];
    w.start_ms += offset_ms, w.end_ms += offset_ms;
    into->words[into->nwords++] = w;
  }
  for (size_t i = 0; i < piece->nsegments; i++) {
    steno_segment g = piece->segments[i];
    g.start_ms += offset_ms, g.end_ms += offset_ms;
    into->segments[into->nsegments++] = g;
  }
  if (text) {
    free(into->text);
    into->text = text;
  }
  if (!into->language[0]) memcpy(into->language, piece->language, sizeof into->language);
  into->duration = offset_ms / 1000.0 + piece->duration;
  into->timings.features_ms += piece->timings.features_ms;
  into->timings.encoder_ms += piece->timings.encoder_ms;
  into->timings.decoder_ms += piece->timings.decoder_ms;
  /* The strings now belong to `into`: free only the piece's arrays. */
  piece->ntokens = piece->nwords = piece->nsegments = 0;
  steno_result_free(piece);
  return 0;
}

const char *steno_result_text(const steno_result *r) { return r->text; }
size_t steno_result_token_count(const steno_result *r) { return r->ntokens; }
size_t steno_result_word_count(const steno_result *r) { return r->nwords; }
size_t steno_result_segment_count(const steno_result *r) { return r->nsegments; }
double steno_result_duration(const steno_result *r) { return r->duration; }
steno_timings steno_result_timings(const steno_result *r) { return r->timings; }
const char *steno_result_language(const steno_result *r) { return r->language[0] ? r->language : NULL; }

steno_token steno_result_token(const steno_result *r, size_t i) {
  return i < r->ntokens ? r->tokens[i] : (steno_token){0};
}
steno_word steno_result_word(const steno_result *r, size_t i) {
  return i < r->nwords ? r->words[i] : (steno_word){0};
}
steno_segment steno_result_segment(const steno_result *r, size_t i) {
  return i < r->nsegments ? r->segments[i] : (steno_segment){0};
}

void steno_result_free(steno_result *r) {
  if (!r) return;
  for (size_t i = 0; i < r->ntokens; i++) free((char *)r->tokens[i].text);
  for (size_t i = 0; i < r->nwords; i++) free((char *)r->words[i].text);
  for (size_t i = 0; i < r->nsegments; i++) free((char *)r->segments[i].text);
  free(r->tokens);
  free(r->words);
  free(r->segments);
  free(r->turns);
  free(r->text);
  free(r);
}

size_t steno_result_turn_count(const steno_result *r) { return r->nturns; }
steno_turn steno_result_turn(const steno_result *r, size_t i) {
  return i < r->nturns ? r->turns[i] : (steno_turn){0, 0, 0};
}
