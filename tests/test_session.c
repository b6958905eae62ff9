/* Sessions: two sessions of one model transcribing different clips on two
 * threads at once, several rounds, give exactly what one session gives doing
 * the clips in turn (text, tokens with their times and confidences, segments);
 * the model's own session (steno_transcribe) agrees too. A model outlives its
 * sessions: steno_model_free refuses while one is open, and NULL handles are
 * STENO_ERR_INVALID. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "audio_test.h"
#include "check.h"
#include "steno.h"

enum { CLIPS = 4, ROUNDS = 3, THREADS = 2 };

static float *clip[CLIPS];
static size_t clip_n[CLIPS];

/* The speech clip, reversed, quieter, and twice over with a pause between. */
static void make_clips(void) {
  size_t n;
  float *speech = test_speech(&n);
  for (int c = 0; c < CLIPS; c++) {
    clip_n[c] = c == 3 ? 2 * n + 8000 : n;
    clip[c] = calloc(clip_n[c], sizeof(float));
  }
  for (size_t i = 0; i < n; i++) {
    clip[0][i] = speech[i];
    clip[1][i] = speech[n - 1 - i];
    clip[2][i] = 0.3f * speech[i];
    clip[3][i] = clip[3][n + 8000 + i] = speech[i];
  }
  free(speech);
}

/* Whether two results are the same in every field a caller sees. */
static bool same_result(const steno_result *a, const steno_result *b) {
  if (!a || !b || strcmp(steno_result_text(a), steno_result_text(b)) ||
      steno_result_token_count(a) != steno_result_token_count(b) ||
      steno_result_segment_count(a) != steno_result_segment_count(b))
    return false;
  for (size_t i = 0; i < steno_result_token_count(a); i++) {
    steno_token x = steno_result_token(a, i), y = steno_result_token(b, i);
    if (x.id != y.id || x.start_ms != y.start_ms || x.end_ms != y.end_ms || x.p != y.p ||
        strcmp(x.text, y.text))
      return false;
  }
  for (size_t i = 0; i < steno_result_segment_count(a); i++) {
    steno_segment x = steno_result_segment(a, i), y = steno_result_segment(b, i);
    if (x.start_ms != y.start_ms || x.end_ms != y.end_ms || strcmp(x.text, y.text)) return false;
  }
  return true;
}

typedef struct {
  steno_model *m;
  int first;                   /* clips first, first + THREADS, ... */
  steno_result *got[ROUNDS][CLIPS];
  int status;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  steno_session *s = NULL;
  w->status = steno_session_new(w->m, &s);
  for (int r = 0; !w->status && r < ROUNDS; r++)
    for (int c = w->first; !w->status && c < CLIPS; c += THREADS)
      w->status = steno_session_transcribe(s, clip[c], clip_n[c], NULL, &w->got[r][c]);
  steno_session_free(s);
  return NULL;
}

/* Two threads, a session each, against one session doing every clip in turn. */
static void concurrent(steno_model *m, const char *name, steno_result *const *want) {
  worker w[THREADS] = {0};
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){.m = m, .first = i};
    CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0, "%s: no thread", name);
  }
  int differ = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    CHECK(w[i].status == 0, "%s: thread %d: %d (%s)", name, i, w[i].status, steno_last_error());
    for (int r = 0; r < ROUNDS; r++)
      for (int c = i; c < CLIPS; c += THREADS) {
        bool same = same_result(w[i].got[r][c], want[c]);
        differ += !same;
        CHECK(same, "%s: round %d, clip %d on two threads: '%s', alone '%s'", name, r, c,
              w[i].got[r][c] ? steno_result_text(w[i].got[r][c]) : "(none)",
              steno_result_text(want[c]));
        steno_result_free(w[i].got[r][c]);
      }
  }
  for (int c = 0; c < CLIPS; c++) printf("%s clip %d: '%s'\n", name, c, steno_result_text(want[c]));
  printf("%s: %d clips x %d rounds on %d threads, %d differ from one session\n", name, CLIPS,
         ROUNDS, THREADS, differ);
}

/* The segments the callback saw. */
typedef struct {
  steno_segment seg[64];
  char *text[64];
  size_t n;
} seen;

static void on_segment(const steno_segment *s, void *user) {
  seen *v = user;
  if (v->n < 64) v->seg[v->n] = *s, v->text[v->n] = strdup(s->text);
  v->n++;
}

/* The segment callback gives exactly the result's segments, in order, over
 * several pieces (5 s pieces of the clip spoken twice). */
static void segments(steno_model *m, const char *name) {
  steno_transcribe_params p = steno_transcribe_default_params();
  p.piece_seconds = 5;
  p.segment = on_segment;
  seen v = {0};
  p.segment_user = &v;
  steno_result *r = NULL;
  CHECK_OK(steno_transcribe(m, clip[3], clip_n[3], &p, &r));
  size_t n = r ? steno_result_segment_count(r) : 0;
  CHECK(n > 1 && v.n == n, "%s: %zu segments called back, the result has %zu", name, v.n, n);
  for (size_t i = 0; i < n && i < v.n && i < 64; i++) {
    steno_segment s = steno_result_segment(r, i);
    CHECK(s.start_ms == v.seg[i].start_ms && s.end_ms == v.seg[i].end_ms && !strcmp(s.text, v.text[i]),
          "%s: segment %zu called back as %lld-%lld '%s', result %lld-%lld '%s'", name, i,
          (long long)v.seg[i].start_ms, (long long)v.seg[i].end_ms, v.text[i], (long long)s.start_ms,
          (long long)s.end_ms, s.text);
  }
  for (size_t i = 0; i < v.n && i < 64; i++) free(v.text[i]);
  steno_result_free(r);
}

/* The same tokens, times, text and segments, confidences within 1e-4: steno.h's promise
 * for a batch (on a GPU where it passes its probe, 4 clips or more go through the
 * persistent search kernel, which sums in another order than the per-step kernels). */
static bool same_batched(const steno_result *a, const steno_result *b) {
  if (!a || !b || strcmp(steno_result_text(a), steno_result_text(b)) ||
      steno_result_token_count(a) != steno_result_token_count(b) ||
      steno_result_segment_count(a) != steno_result_segment_count(b))
    return false;
  for (size_t i = 0; i < steno_result_token_count(a); i++) {
    steno_token x = steno_result_token(a, i), y = steno_result_token(b, i);
    if (x.id != y.id || x.start_ms != y.start_ms || x.end_ms != y.end_ms ||
        fabsf(x.p - y.p) > 1e-4f || strcmp(x.text, y.text))
      return false;
  }
  for (size_t i = 0; i < steno_result_segment_count(a); i++) {
    steno_segment x = steno_result_segment(a, i), y = steno_result_segment(b, i);
    if (x.start_ms != y.start_ms || x.end_ms != y.end_ms || strcmp(x.text, y.text)) return false;
  }
  return true;
}

/* A batch gives each clip's result; a bad clip fails it, leaving no result. */
static void batch(steno_model *m, const char *name, steno_result *const *want) {
  steno_session *s = NULL;
  CHECK_OK(steno_session_new(m, &s));
  steno_result *got[CLIPS];
  const float *pcm[CLIPS];
  for (int c = 0; c < CLIPS; c++) pcm[c] = clip[c];
  if (s) CHECK_OK(steno_transcribe_batch(s, pcm, clip_n, CLIPS, NULL, got));
  for (int c = 0; s && c < CLIPS; c++) {
    CHECK(same_batched(got[c], want[c]), "%s: batch clip %d differs", name, c);
    steno_result_free(got[c]);
  }
  float bad[1600] = {0};
  bad[800] = INFINITY;
  pcm[2] = bad;
  size_t n[CLIPS] = {clip_n[0], clip_n[1], 1600, clip_n[3]};
  int st = s ? steno_transcribe_batch(s, pcm, n, CLIPS, NULL, got) : -1;
  CHECK(st == STENO_ERR_INVALID && !got[0] && !got[1] && !got[2] && !got[3],
        "%s: a batch with an infinite sample gave %d", name, st);
  steno_session_free(s);
}

/* A model freed before its session stays loaded; NULL handles are refused. */
static void lifetime(steno_model *m, const char *name, const steno_result *want) {
  steno_session *s = NULL;
  steno_result *r = NULL;
  CHECK_OK(steno_session_new(m, &s));
  steno_model_free(m); /* refused: s is open */
  if (s) CHECK_OK(steno_session_transcribe(s, clip[0], clip_n[0], NULL, &r));
  CHECK(same_result(r, want), "%s: the session after a refused steno_model_free", name);
  steno_result_free(r);
  steno_session_free(s);
  steno_session *none = (steno_session *)1;
  CHECK(steno_session_new(NULL, &none) == STENO_ERR_INVALID && !none, "%s: NULL model", name);
  CHECK(steno_session_new(m, NULL) == STENO_ERR_INVALID, "%s: NULL out", name);
  r = (steno_result *)1;
  CHECK(steno_session_transcribe(NULL, clip[0], clip_n[0], NULL, &r) == STENO_ERR_INVALID && !r,
        "%s: NULL session", name);
  steno_session_free(NULL);
}

static void model(const char *file) {
  char path[4096];
  fixture_path(path, sizeof path, file);
  steno_model *m = NULL;
  CHECK_OK(steno_model_load(path, test_params(), &m));
  if (!m) return;
  steno_session *one = NULL;
  steno_result *want[CLIPS] = {0};
  CHECK_OK(steno_session_new(m, &one));
  for (int c = 0; one && c < CLIPS; c++)
    CHECK_OK(steno_session_transcribe(one, clip[c], clip_n[c], NULL, &want[c]));
  steno_session_free(one);
  for (int c = 0; c < CLIPS; c++) {
    steno_result *r = NULL;
    CHECK_OK(steno_transcribe(m, clip[c], clip_n[c], NULL, &r));
    CHECK(same_result(r, want[c]), "%s: clip %d through steno_transcribe differs", file, c);
    steno_result_free(r);
  }
  if (want[CLIPS - 1]) {
    segments(m, file);
    batch(m, file, want);
    concurrent(m, file, want);
    lifetime(m, file, want[0]);
  }
  for (int c = 0; c < CLIPS; c++) steno_result_free(want[c]);
  steno_model_free(m);
}

int main(void) {
  make_clips();
  model("parakeet_tdt_tiny.gguf");
  model("whisper_tiny_en.gguf");
  for (int c = 0; c < CLIPS; c++) free(clip[c]);
  return check_done();
}
