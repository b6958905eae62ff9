/* Streaming: Nemotron's cache-aware streaming gives the reference's streaming
 * tokens and frames (tests/fixtures/nemotron_asr_tiny.ref.gguf, run "stream")
 * however the audio is cut; the resumable transducer search gives the whole
 * search's tokens over any cut; the public steno_stream API gives, for every
 * cut, the final result a one-shot transcription gives (the window loop of
 * Parakeet and Whisper) or the native stream's (Nemotron), with firm text
 * that only grows. */
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "io/gguf.h"
#include "models/parakeet/parakeet.h"
#include "steno.h"

static const float *tensor(const gguf_file *ref, const char *name, size_t *n) {
  const gguf_tensor *t = gguf_tensor_find(ref, name);
  CHECK(t && t->type == GGUF_TYPE_F32, "reference tensor %s", name);
  if (!t) return NULL;
  *n = t->nelem;
  return t->data;
}

/* Whether tk holds exactly the reference's streaming tokens and frames. */
static bool same_stream_tokens(const dec_tokens *tk, const gguf_file *ref, const char *what) {
  const gguf_kv *ids = gguf_find(ref, "ref.stream.tokens"), *at = gguf_find(ref, "ref.stream.token_frames");
  CHECK(ids && at, "reference stream tokens");
  bool same = ids && at && tk->n == ids->n;
  for (size_t i = 0; same && i < tk->n; i++)
    same = tk->v[i].id == ids->v.i32[i] && tk->v[i].frame == at->v.i32[i];
  if (!same && ids && at) {
    fprintf(stderr, "%s:\n", what);
    for (size_t i = 0; i < tk->n || i < ids->n; i++)
      fprintf(stderr, "  [%zu] got %d@%d want %d@%d\n", i, i < tk->n ? tk->v[i].id : -1,
              i < tk->n ? tk->v[i].frame : -1, i < ids->n ? ids->v.i32[i] : -1,
              i < at->n ? at->v.i32[i] : -1);
  }
  return same;
}

/* Tokens of a result as dec_tokens (ids and frames from the 80 ms times). */
static void result_tokens(const steno_result *r, dec_tokens *out) {
  for (size_t i = 0; i < steno_result_token_count(r); i++) {
    steno_token t = steno_result_token(r, i);
    dec_token d = {.id = t.id, .frame = (int)(t.start_ms / 80)};
    CHECK_OK(dec_push(out, d));
  }
}

/* The clip fed in pieces of `cut` samples (0: all at once); the tokens after
 * every piece are a prefix of the final ones, which are the reference's. */
static void nemotron_cut(parakeet_session *s, const gguf_file *ref, size_t cut) {
  size_t n;
  const float *pcm = tensor(ref, "speech.pcm", &n);
  if (!pcm) return;
  char what[64];
  snprintf(what, sizeof what, "nemotron stream, pieces of %zu samples", cut);
  s->language = NULL;
  CHECK_OK(parakeet_stream_begin(s, NULL));
  if (!s->stream) return;
  size_t seen = 0, grew = 0;
  for (size_t at = 0; at < n;) {
    size_t k = cut && n - at > cut ? cut : n - at;
    CHECK_OK(parakeet_stream_feed(s, pcm + at, k));
    at += k;
    steno_result *r = NULL;
    CHECK_OK(parakeet_stream_result(s, &r));
    size_t now = r ? steno_result_token_count(r) : 0;
    CHECK(now >= seen, "%s: tokens went from %zu to %zu", what, seen, now);
    grew += now > seen;
    seen = now;
    steno_result_free(r);
  }
  steno_result *r = NULL;
  CHECK_OK(parakeet_stream_finish(s, &r));
  dec_tokens tk = {0};
  if (r) result_tokens(r, &tk);
  /* Control pieces are not listed in a result: compare the stream's own tokens. */
  CHECK(same_stream_tokens(parakeet_stream_tokens(s), ref, what), "%s: tokens differ from the reference", what);
  const gguf_kv *text = gguf_find(ref, "ref.stream.text");
  if (r && text)
    CHECK(!strcmp(steno_result_text(r), text->v.str[0].s), "%s: text '%s', reference '%s'", what,
          steno_result_text(r), text->v.str[0].s);
  if (cut && cut < n / 4) CHECK(grew >= 3, "%s: tokens arrived in %zu steps before the end", what, grew);
  printf("%s: %zu tokens, %zu before the end in %zu steps\n", what, tk.n, seen, grew);
  dec_free(&tk);
  steno_result_free(r);
  parakeet_stream_end(s);
}

static void nemotron(void) {
  gguf_file *f, *ref;
  fixture_open("nemotron_asr_tiny", &f, &ref);
  parakeet *m = NULL;
  parakeet_session *s = NULL;
  if (f) CHECK_OK(parakeet_load(test_device(), f, &m));
  if (m) CHECK_OK(parakeet_session_new(m, &s));
  static const size_t cuts[] = {0, 1000, 160, 4097, 5120};
  for (size_t i = 0; s && ref && i < sizeof cuts / sizeof *cuts; i++) nemotron_cut(s, ref, cuts[i]);
  parakeet_session_free(s);
  parakeet_free(m);
  gguf_close(f);
  gguf_close(ref);
}

/* The resumable search fed a clip's head in pieces gives transducer_greedy's
 * tokens (TDT: durations carry over pieces; RNN-T). */
static void search_cuts(const char *fixture, const char *clip) {
  gguf_file *f, *ref;
  fixture_open(fixture, &f, &ref);
  parakeet *m = NULL;
  parakeet_session *s = NULL;
  if (f) CHECK_OK(parakeet_load(test_device(), f, &m));
  if (m) CHECK_OK(parakeet_session_new(m, &s));
  char name[64];
  snprintf(name, sizeof name, "%s.mel", clip);
  size_t n_mel;
  const float *mel = s && ref ? tensor(ref, name, &n_mel) : NULL;
  float *head = NULL;
  uint32_t t = 0, width = m ? gpu_linear_width(&m->head) : 0;
  const gguf_kv *valid = ref ? gguf_find(ref, "ref.speech.n_frames_valid") : NULL;
  if (mel && valid) CHECK_OK(parakeet_forward(s, mel, valid->v.u32[0], NULL, &head, &t));
  dec_tokens whole = {0};
  if (head) CHECK_OK(transducer_greedy(&m->dec, head, (int)t, (int)width, NULL, &whole));
  static const int cuts[] = {1, 2, 3, 7, 1000};
  for (size_t c = 0; head && c < sizeof cuts / sizeof *cuts; c++) {
    transducer_stream *ts;
    dec_tokens tk = {0};
    CHECK_OK(transducer_stream_new(&m->dec, &ts));
    for (int at = 0; at < (int)t; at += cuts[c]) {
      int k = (int)t - at < cuts[c] ? (int)t - at : cuts[c];
      CHECK_OK(transducer_stream_feed(ts, head + (size_t)at * width, k, (int)width, NULL, &tk));
    }
    bool same = tk.n == whole.n && whole.n > 0;
    for (size_t i = 0; same && i < tk.n; i++)
      same = tk.v[i].id == whole.v[i].id && tk.v[i].frame == whole.v[i].frame &&
             tk.v[i].frames == whole.v[i].frames && tk.v[i].p == whole.v[i].p;
    CHECK(same, "%s: the search in pieces of %d frames: %zu tokens, whole %zu", fixture, cuts[c],
          tk.n, whole.n);
    dec_free(&tk);
    transducer_stream_free(ts);
  }
  printf("%s: the search in pieces gives the whole one's %zu tokens\n", fixture, whole.n);
  dec_free(&whole);
  free(head);
  parakeet_session_free(s);
  parakeet_free(m);
  gguf_close(f);
  gguf_close(ref);
}

/* Feeds pcm to a stream in pieces of `cut`; checks the firm text only grows;
 * returns the final result. */
static steno_result *api_stream(steno_model *m, const float *pcm, size_t n, size_t cut,
                                const steno_stream_params *p, int *native, size_t *updates) {
  steno_stream *st = NULL;
  CHECK_OK(steno_stream_open(m, p, &st));
  if (!st) return NULL;
  *native = steno_stream_native(st);
  char *last = strdup("");
  *updates = 0;
  for (size_t at = 0; at < n; at += cut) {
    size_t k = n - at < cut ? n - at : cut;
    CHECK_OK(steno_stream_feed(st, pcm + at, k));
    const char *firm = NULL, *tent = NULL;
    CHECK_OK(steno_stream_text(st, &firm, &tent));
    if (!firm || !tent) break;
    CHECK(!strncmp(firm, last, strlen(last)), "firm text '%s' does not extend '%s'", firm, last);
    *updates += strlen(firm) > strlen(last) || *tent;
    free(last);
    last = strdup(firm);
  }
  free(last);
  steno_result *r = NULL;
  CHECK_OK(steno_stream_finish(st, &r));
  steno_stream_free(st);
  return r;
}

/* The public API over a fixture: every cut gives the one-shot result (window
 * loop) or the native stream's text. */
static void api(const char *fixture, bool native) {
  char file[128], path[512];
  snprintf(file, sizeof file, "%s.gguf", fixture);
  fixture_path(path, sizeof path, file);
  steno_model *m = NULL;
  CHECK_OK(steno_model_load(path, test_params(), &m));
  gguf_file *f, *ref; /* the speech clip (the same espeak-ng clip as the other fixtures') */
  fixture_open("nemotron_asr_tiny", &f, &ref);
  size_t n = 0;
  const float *pcm = ref ? tensor(ref, "speech.pcm", &n) : NULL;
  if (!m || !pcm) goto done;
  steno_result *once = NULL;
  CHECK_OK(steno_transcribe(m, pcm, n, NULL, &once));
  const gguf_kv *stream_text = gguf_find(ref, "ref.stream.text");
  const char *want = native && stream_text ? stream_text->v.str[0].s : once ? steno_result_text(once) : "";
  steno_stream_params p = steno_stream_default_params();
  p.window_seconds = 5, p.update_seconds = 0.5, p.tentative_seconds = 0.5;
  static const size_t cuts[] = {46400, 1600, 4001, 160};
  for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
    int is_native = -1;
    size_t updates = 0;
    steno_result *r = api_stream(m, pcm, n, cuts[c], &p, &is_native, &updates);
    CHECK(is_native == native, "%s: native %d", fixture, is_native);
    if (r)
      CHECK(!strcmp(steno_result_text(r), want), "%s, pieces of %zu: final '%s', want '%s'", fixture,
            cuts[c], steno_result_text(r), want);
    if (cuts[c] < n / 4) CHECK(updates >= 2, "%s, pieces of %zu: text before the end in %zu updates", fixture, cuts[c], updates);
    printf("%s, pieces of %zu: final text as %s, text before the end in %zu updates\n", fixture,
           cuts[c], native ? "the reference's stream" : "steno_transcribe", updates);
    steno_result_free(r);
  }
  steno_result_free(once);
done:
  steno_model_free(m);
  gguf_close(f);
  gguf_close(ref);
}

/* Bad arguments: NULLs and absurd parameters are errors, not crashes. */
static void bad_calls(void) {
  steno_stream *st = NULL;
  CHECK(steno_stream_open(NULL, NULL, &st) == STENO_ERR_INVALID && !st, "NULL model");
  char path[512];
  fixture_path(path, sizeof path, "parakeet_tdt_tiny.gguf");
  steno_model *m = NULL;
  CHECK_OK(steno_model_load(path, test_params(), &m));
  steno_stream_params p = steno_stream_default_params();
  p.window_seconds = 0.1;
  CHECK(steno_stream_open(m, &p, &st) == STENO_ERR_INVALID && !st, "a 0.1 s window accepted");
  p = steno_stream_default_params();
  p.update_seconds = -1;
  CHECK(steno_stream_open(m, &p, &st) == STENO_ERR_INVALID && !st, "a negative update accepted");
  CHECK_OK(steno_stream_open(m, NULL, &st));
  float nan[2] = {0, 0.0f / 0.0f};
  CHECK(steno_stream_feed(st, nan, 2) == STENO_ERR_INVALID, "a NaN sample accepted");
  CHECK(steno_stream_feed(st, NULL, 5) == STENO_ERR_INVALID, "NULL samples accepted");
  steno_result *r = NULL;
  CHECK_OK(steno_stream_finish(st, &r)); /* no audio: an empty result */
  CHECK(r && !strcmp(steno_result_text(r), ""), "empty stream: '%s'", r ? steno_result_text(r) : "?");
  steno_result_free(r);
  steno_stream_free(st);
  steno_stream_free(NULL);
  steno_model_free(m);
}

int main(void) {
  test_device();
  nemotron();
  search_cuts("parakeet_tdt_tiny", "speech");
  search_cuts("parakeet_rnnt_tiny", "speech");
  api("nemotron_asr_tiny", true);
  api("parakeet_tdt_tiny", false);
  api("whisper_tiny_en", false);
  bad_calls();
  return check_done();
}
