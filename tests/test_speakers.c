/* Speakers for a transcript (text/speakers.c) on hand-made results and turns:
 * the speaker most active over a word (ties to the lower id, a point in time,
 * no turn at all), words no turn covers, segments split where the speaker
 * changes (text, times and speakers of the pieces), Whisper-like words that
 * carry their segment's times (the segment stays whole), empty turns. */
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "check.h"
#include "text/result.h"
#include "text/speakers.h"

/* A result with words (text, start, end) and segments over word ranges. */
static steno_result *make(const char *const *text, const int64_t (*t)[2], size_t n,
                          const size_t (*seg)[2], size_t nseg) {
  steno_result *r;
  if (result_empty(10, &r)) return NULL;
  r->words = mem_alloc(n + 1, sizeof *r->words);
  r->segments = mem_alloc(nseg + 1, sizeof *r->segments);
  for (size_t i = 0; i < n; i++)
    r->words[r->nwords++] = (steno_word){mem_strdup(text[i]), t[i][0], t[i][1], 1.0f, 0};
  for (size_t j = 0; j < nseg; j++) {
    size_t a = seg[j][0], b = seg[j][1], len = 1;
    for (size_t i = a; i < b; i++) len += strlen(text[i]) + 1;
    char *s = mem_alloc(len, 1);
    for (size_t i = a; i < b; i++) strcat(strcat(s, i > a ? " " : ""), text[i]);
    r->segments[r->nsegments++] = (steno_segment){s, t[a][0], t[b - 1][1], 0};
  }
  return r;
}

static void speaker_over_cases(void) {
  const steno_turn turns[] = {{1, 0, 1000}, {2, 800, 2000}, {3, 3000, 3000}};
  CHECK(speaker_over(turns, 3, 0, 500) == 1, "inside turn 1");
  CHECK(speaker_over(turns, 3, 700, 1100) == 1, "300 ms of 1 against 300 of 2: the lower id");
  CHECK(speaker_over(turns, 3, 700, 1200) == 2, "300 ms of 1, 400 of 2");
  CHECK(speaker_over(turns, 3, 900, 900) == 1, "a point in both: the lower id");
  CHECK(speaker_over(turns, 3, 1500, 1500) == 2, "a point in turn 2");
  CHECK(speaker_over(turns, 3, 2000, 2500) == 0, "no turn");
  CHECK(speaker_over(turns, 3, 3000, 3000) == 0, "an empty turn covers no point");
  CHECK(speaker_over(NULL, 0, 0, 100) == 0, "no turns at all");
}

static void split_cases(void) {
  const char *const text[] = {"hello", "there", "how", "are", "you", "fine."};
  const int64_t t[][2] = {{0, 400}, {500, 900}, {1500, 1800}, {1900, 2100}, {2200, 2500},
                          {4000, 4500}};
  const size_t seg[][2] = {{0, 5}, {5, 6}};
  steno_result *r = make(text, t, 6, seg, 2);
  const steno_turn turns[] = {{2, 0, 1000}, {1, 1400, 2600}};
  CHECK_OK(result_add_speakers(r, turns, 2));
  const int want_w[] = {2, 2, 1, 1, 1, 1}; /* "fine." is in no turn: the word before's */
  for (size_t i = 0; i < 6; i++)
    CHECK(r->words[i].speaker == want_w[i], "word %zu: speaker %d, want %d", i, r->words[i].speaker,
          want_w[i]);
  CHECK(r->nsegments == 3, "%zu segments, want 3", r->nsegments);
  if (r->nsegments == 3) {
    steno_segment *s = r->segments;
    CHECK(!strcmp(s[0].text, "hello there") && s[0].start_ms == 0 && s[0].end_ms == 900 &&
              s[0].speaker == 2, "segment 0: '%s' %lld-%lld speaker %d", s[0].text,
          (long long)s[0].start_ms, (long long)s[0].end_ms, s[0].speaker);
    CHECK(!strcmp(s[1].text, "how are you") && s[1].start_ms == 1500 && s[1].end_ms == 2500 &&
              s[1].speaker == 1, "segment 1: '%s' speaker %d", s[1].text, s[1].speaker);
    CHECK(!strcmp(s[2].text, "fine.") && s[2].speaker == 1, "segment 2: '%s' speaker %d",
          s[2].text, s[2].speaker);
  }
  CHECK(steno_result_turn_count(r) == 2 && steno_result_turn(r, 1).speaker == 1, "turns copied");
  steno_result_free(r);
}

/* Whisper's words carry their segment's times: each segment keeps its text. */
static void whisper_like(void) {
  const char *const text[] = {"one", "two", "three", "four"};
  const int64_t t[][2] = {{0, 2000}, {0, 2000}, {2000, 5000}, {2000, 5000}};
  const size_t seg[][2] = {{0, 2}, {2, 4}};
  steno_result *r = make(text, t, 4, seg, 2);
  const steno_turn turns[] = {{1, 0, 1500}, {2, 1500, 5000}};
  CHECK_OK(result_add_speakers(r, turns, 2));
  CHECK(r->nsegments == 2 && !strcmp(r->segments[0].text, "one two") &&
            r->segments[0].speaker == 1 && r->segments[1].speaker == 2,
        "whisper-like segments: %zu", r->nsegments);
  steno_result_free(r);
}

/* Leading words before any turn take the first speaker after them; no turns: 0. */
static void uncovered(void) {
  const char *const text[] = {"a", "b", "c"};
  const int64_t t[][2] = {{0, 100}, {200, 300}, {1000, 1100}};
  const size_t seg[][2] = {{0, 3}};
  steno_result *r = make(text, t, 3, seg, 1);
  const steno_turn turns[] = {{3, 900, 1200}};
  CHECK_OK(result_add_speakers(r, turns, 1));
  CHECK(r->words[0].speaker == 3 && r->words[1].speaker == 3 && r->nsegments == 1 &&
            r->segments[0].speaker == 3 && !strcmp(r->segments[0].text, "a b c"),
        "leading words: %d %d, %zu segments", r->words[0].speaker, r->words[1].speaker, r->nsegments);
  CHECK_OK(result_add_speakers(r, NULL, 0));
  CHECK(r->words[2].speaker == 0 && r->segments[0].speaker == 0 && r->nturns == 0, "no turns");
  steno_result_free(r);
}

int main(void) {
  speaker_over_cases();
  split_cases();
  whisper_like();
  uncovered();
  return check_done();
}
