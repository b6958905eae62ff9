/* steno_model_params through the public API: the defaults, the threads a
 * transcription's CPU work may use (and the same tokens whatever their
 * number), and bad values refused with a message
 * (the device choice and fast policy in detail: test_runtime). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio_test.h"
#include "base/pool.h"
#include "check.h"
#include "steno.h"

static const char model[] = "models/steno-en-tiny-ctc.gguf";

/* Called inside the transcription: the workers its pools would start (at
 * the first piece's progress). */
static void seen_workers(float done, void *user) {
  (void)done;
  if (*(int *)user < 0) *(int *)user = pool_default_workers();
}

/* threads = 1: no worker thread during the call, and the caller's own
 * default again after it. */
static void threads(void) {
  steno_model_params p = *test_params();
  p.threads = 1;
  steno_model *m = NULL;
  CHECK_OK(steno_model_load(model, &p, &m));
  if (!m) return;
  float pcm[16000] = {0};
  pcm[100] = 0.5f;
  int workers = -1;
  steno_transcribe_params tp = steno_transcribe_default_params();
  tp.progress = seen_workers;
  tp.progress_user = &workers;
  steno_result *r = NULL;
  int before = pool_default_workers();
  CHECK_OK(steno_transcribe(m, pcm, 16000, &tp, &r));
  CHECK(workers == 0, "threads 1: %d workers inside the call", workers);
  CHECK(pool_default_workers() == before, "after the call: %d workers, %d before", pool_default_workers(), before);
  steno_result_free(r);
  steno_model_free(m);
}

/* One model per thread count transcribes the same 25 s (the speech clip over
 * and over, with pauses: 25 of the gate's 1 s chunks): threads 1 runs the gate
 * and the features alone, 4 on the session's workers, twice (the second call
 * reuses them). Every token's id, time and confidence must be the same. */
static void threads_agree(void) {
  size_t ns;
  float *speech = test_speech(&ns);
  size_t n = 25 * 16000;
  float *x = calloc(n, sizeof *x);
  for (size_t at = 0; at + ns <= n; at += ns + 8000)
    for (size_t i = 0; i < ns; i++) x[at + i] = speech[i];
  const int counts[] = {1, 4};
  steno_result *first = NULL;
  for (int c = 0; c < 2; c++) {
    steno_model_params p = *test_params();
    p.threads = counts[c];
    steno_model *m = NULL;
    CHECK_OK(steno_model_load(model, &p, &m));
    for (int call = 0; m && call < c + 1; call++) {
      steno_result *r = NULL;
      CHECK_OK(steno_transcribe(m, x, n, NULL, &r));
      if (!r) continue;
      if (!first) {
        first = r;
        CHECK(steno_result_token_count(r) > 10, "25 s of speech: %zu tokens", steno_result_token_count(r));
        continue;
      }
      bool same = !strcmp(steno_result_text(r), steno_result_text(first)) &&
                  steno_result_token_count(r) == steno_result_token_count(first);
      for (size_t i = 0; same && i < steno_result_token_count(r); i++) {
        steno_token a = steno_result_token(r, i), b = steno_result_token(first, i);
        same = a.id == b.id && a.start_ms == b.start_ms && a.end_ms == b.end_ms && a.p == b.p;
      }
      CHECK(same, "threads %d, call %d: not what threads 1 gave", counts[c], call + 1);
      steno_result_free(r);
    }
    steno_model_free(m);
  }
  steno_result_free(first);
  free(x), free(speech);
}

/* A bad value is refused before anything is opened, with what was wrong. */
static void refused(const char *what, steno_model_params p, int status, const char *message) {
  steno_model *m = NULL;
  int st = steno_model_load(model, &p, &m);
  CHECK(st == status && !m, "%s: status %d", what, st);
  CHECK(strstr(steno_last_error(), message) != NULL, "%s: message '%s'", what, steno_last_error());
  steno_model_free(m);
}

int main(void) {
  steno_model_params d = steno_model_default_params();
  CHECK(d.device == -1 && !d.device_name && d.fast == STENO_FAST_AUTO && !d.cache_dir && !d.no_cache &&
            !d.threads,
        "defaults");
  threads();
  threads_agree();
  steno_model_params p = d;
  p.threads = -1;
  refused("threads -1", p, STENO_ERR_INVALID, "threads -1");
  p = d, p.device = 1000;
  refused("device 1000", p, STENO_ERR_GPU, "device 1000: there");
  p = d, p.device_name = "no device is called this";
  refused("device name", p, STENO_ERR_GPU, "no device is called this");
  p = d, p.fast = -1;
  refused("fast -1", p, STENO_ERR_INVALID, "fast -1");
  p = d, p.no_cache = 4;
  refused("no_cache 4", p, STENO_ERR_INVALID, "no_cache");
  steno_model *m = NULL;
  CHECK_OK(steno_model_load(model, NULL, &m)); /* NULL: the defaults */
  steno_model_free(m);
  return check_done();
}
