/* Whisper: a run's segments as the public result. Text is the bytes of the
 * text tokens (ids below the end of text) made valid UTF-8 as transformers
 * decodes them; tokens and words carry their segment's times (Whisper's
 * timestamps are per segment). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "models/whisper/whisper.h"
#include "text/result.h"

/* Trims ASCII whitespace in place (Python's str.strip for these texts). */
static void trim(char *s) {
  size_t n = strlen(s), a = 0;
  while (a < n && strchr(" \t\n\r\v\f", s[a])) a++;
  while (n > a && strchr(" \t\n\r\v\f", s[n - 1])) n--;
  memmove(s, s + a, n - a);
  s[n - a] = 0;
}

/* The text ids of window tokens [first, end), appended to ids[*n]. */
static void text_ids(const whisper *m, const whisper_window *w, size_t first, size_t end, int *ids,
                     size_t *n) {
  for (size_t i = first; i < end; i++)
    if (w->tokens[i] < m->c.eot) ids[(*n)++] = w->tokens[i];
}

static int decode_trimmed(const whisper *m, const int *ids, size_t n, char **out) {
  TRY(bpe_decode(&m->tok, ids, n, out));
  trim(*out);
  return 0;
}

/* Tokens and words of one segment. */
static int segment_tokens(const whisper *m, const whisper_output *o, const whisper_segment *g,
                          steno_result *r) {
  const whisper_window *w = &o->win[g->window];
  size_t word_start = r->ntokens;
  for (size_t i = g->first; i < g->end; i++) {
    int id = w->tokens[i];
    if (id >= m->c.eot) continue;
    steno_token *k = &r->tokens[r->ntokens];
    TRY(bpe_decode(&m->tok, &id, 1, (char **)&k->text));
    k->id = id, k->start_ms = g->t0_ms, k->end_ms = g->t1_ms, k->p = (float)exp(w->logprob[i]);
    r->ntokens++;
  }
  /* Words: a new one where a token's bytes begin with a space. */
  for (size_t a = word_start; a < r->ntokens;) {
    size_t b = a + 1;
    while (b < r->ntokens && r->tokens[b].text[0] != ' ') b++;
    int *ids = mem_alloc(b - a, sizeof *ids);
    if (!ids) return STENO_ERR_NOMEM;
    float p = 1.0f;
    for (size_t i = a; i < b; i++) ids[i - a] = r->tokens[i].id, p = fminf(p, r->tokens[i].p);
    steno_word *wd = &r->words[r->nwords];
    int st = decode_trimmed(m, ids, b - a, (char **)&wd->text);
    free(ids);
    TRY(st);
    wd->start_ms = g->t0_ms, wd->end_ms = g->t1_ms, wd->p = p;
    r->nwords++;
    a = b;
  }
  return 0;
}

/* The code of the run's language token: an English-only model speaks "en". */
static void language_code(const whisper_config *c, int token, char *code, size_t cap) {
  if (!c->multilingual) snprintf(code, cap, "en");
  for (int i = 0; c->multilingual && i < c->n_langs; i++)
    if (c->lang_id[i] == token) snprintf(code, cap, "%s", c->lang_code[i]);
}

int whisper_result(const whisper *m, const whisper_output *o, double seconds, steno_result **out) {
  *out = NULL;
  steno_result *r;
  TRY(result_empty(seconds, &r));
  language_code(&m->c, o->language, r->language, sizeof r->language);
  size_t total = 0;
  for (size_t i = 0; i < o->n_seg; i++) total += o->seg[i].end - o->seg[i].first;
  int *all = mem_alloc(total + 1, sizeof *all), *ids = mem_alloc(total + 1, sizeof *ids);
  r->tokens = mem_alloc(total + 1, sizeof *r->tokens);
  r->words = mem_alloc(total + 1, sizeof *r->words);
  r->segments = mem_alloc(o->n_seg + 1, sizeof *r->segments);
  int st = all && ids && r->tokens && r->words && r->segments ? 0 : STENO_ERR_NOMEM;
  size_t n_all = 0;
  for (size_t i = 0; !st && i < o->n_seg; i++) {
    const whisper_segment *g = &o->seg[i];
    size_t n = 0;
    text_ids(m, &o->win[g->window], g->first, g->end, ids, &n);
    memcpy(all + n_all, ids, n * sizeof *ids);
    n_all += n;
    char *text;
    st = decode_trimmed(m, ids, n, &text);
    if (st) break;
    if (!text[0]) {
      free(text); /* a segment without text (silence) is not listed */
      continue;
    }
    r->segments[r->nsegments++] = (steno_segment){text, g->t0_ms, g->t1_ms};
    st = segment_tokens(m, o, g, r);
  }
  if (!st) {
    free(r->text);
    r->text = NULL;
    st = decode_trimmed(m, all, n_all, &r->text);
  }
  free(all);
  free(ids);
  if (st) {
    steno_result_free(r);
    return st;
  }
  *out = r;
  return 0;
}
