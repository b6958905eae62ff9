/* Speakers for a transcript's words and segments from a diarizer's turns. */
#include "text/speakers.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "text/result.h"

#define MAX_SPEAKERS 64

int speaker_over(const steno_turn *turns, size_t n, int64_t start_ms, int64_t end_ms) {
  int64_t active[MAX_SPEAKERS + 1] = {0};
  for (size_t i = 0; i < n; i++) {
    const steno_turn *t = &turns[i];
    if (t->speaker < 1 || t->speaker > MAX_SPEAKERS) continue;
    int64_t a = start_ms > t->start_ms ? start_ms : t->start_ms;
    int64_t b = end_ms < t->end_ms ? end_ms : t->end_ms;
    if (end_ms <= start_ms) /* a point in time: who speaks then */
      active[t->speaker] += t->start_ms <= start_ms && start_ms < t->end_ms;
    else if (b > a)
      active[t->speaker] += b - a;
  }
  int best = 0;
  for (int k = 1; k <= MAX_SPEAKERS; k++)
    if (active[k] > active[best]) best = k;
  return best;
}

/* Each word's speaker; a word no turn covers takes its neighbour's. */
static void word_speakers(steno_result *r, const steno_turn *turns, size_t n) {
  int last = 0;
  for (size_t i = 0; i < r->nwords; i++) {
    steno_word *w = &r->words[i];
    w->speaker = speaker_over(turns, n, w->start_ms, w->end_ms);
    if (!w->speaker) w->speaker = last;
    last = w->speaker;
  }
  for (size_t i = r->nwords; i-- > 1;) /* leading words before any speaker: the first after */
    if (!r->words[i - 1].speaker) r->words[i - 1].speaker = r->words[i].speaker;
  for (size_t i = 1; i < r->nwords; i++) /* a word without text: its neighbour's speaker */
    if (!r->words[i].text[0]) r->words[i].speaker = r->words[i - 1].speaker;
}

/* Words [a, b) joined by single spaces. */
static char *join(const steno_word *w, size_t a, size_t b) {
  size_t len = 1;
  for (size_t i = a; i < b; i++) len += strlen(w[i].text) + 1;
  char *s = mem_alloc(len, 1), *o = s;
  if (!s) return NULL;
  for (size_t i = a; i < b; i++) {
    size_t k = strlen(w[i].text);
    if (o > s && k) *o++ = ' ';
    memcpy(o, w[i].text, k);
    o += k;
  }
  *o = 0;
  return s;
}

/* Segment g with its words [a, b) into out: itself with its speaker when they
 * share one, else one segment per run of a speaker. */
static int split_segment(steno_segment g, const steno_word *w, size_t a, size_t b,
                         const steno_turn *turns, size_t n, steno_segment *out, size_t *nout) {
  size_t runs = 0;
  for (size_t i = a; i < b; i++) runs += i == a || w[i].speaker != w[i - 1].speaker;
  if (runs <= 1) {
    g.speaker = b > a ? w[a].speaker : speaker_over(turns, n, g.start_ms, g.end_ms);
    out[(*nout)++] = g;
    return 0;
  }
  for (size_t i = a; i < b;) {
    size_t j = i + 1;
    while (j < b && w[j].speaker == w[i].speaker) j++;
    char *text = join(w, i, j);
    if (!text) {
      free((char *)g.text);
      return STENO_ERR_NOMEM;
    }
    if (*text) out[(*nout)++] = (steno_segment){text, w[i].start_ms, w[j - 1].end_ms, w[i].speaker};
    else free(text); /* words without text (a control piece) make no segment */
    i = j;
  }
  free((char *)g.text);
  return 0;
}

int result_add_speakers(steno_result *r, const steno_turn *turns, size_t n) {
  steno_turn *copy = mem_alloc(n + 1, sizeof *copy);
  steno_segment *segs = mem_alloc(r->nsegments + r->nwords + 1, sizeof *segs);
  if (!copy || !segs) {
    free(copy), free(segs);
    return STENO_ERR_NOMEM;
  }
  if (n) memcpy(copy, turns, n * sizeof *turns);
  free(r->turns);
  r->turns = copy;
  r->nturns = n;
  word_speakers(r, turns, n);
  /* A segment's words: those in its span, in order (Whisper's words carry their
   * segment's times, so its segments keep one speaker). */
  size_t w = 0, nout = 0;
  int st = 0;
  for (size_t j = 0; j < r->nsegments; j++) {
    steno_segment g = r->segments[j];
    while (w < r->nwords && r->words[w].start_ms < g.start_ms) w++;
    size_t a = w;
    while (w < r->nwords && r->words[w].end_ms <= g.end_ms) w++;
    if (st) free((char *)g.text); /* after a failure: the rest are dropped */
    else st = split_segment(g, r->words, a, w, turns, n, segs, &nout);
  }
  free(r->segments);
  r->segments = segs;
  r->nsegments = nout;
  return st;
}
