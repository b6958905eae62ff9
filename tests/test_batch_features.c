/* Parakeet's batch features (parakeet_batch_features: the clips side by side
 * on the CPU's threads) against parakeet_features of each clip alone on one
 * thread, bit for bit, on 1, 2 and 5 threads: 7 clips of different lengths
 * (cut from the tiny TDT fixture's reference audio) in a shuffled order, and
 * 2 and 3 of them (fewer clips than threads: each clip's frames get the rest).
 * Then steno_transcribe_batch of the 7 on a model of 5 threads against
 * steno_transcribe of each (tokens, times, text exactly). */
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "models/parakeet/parakeet.h"
#include "steno.h"

enum { CLIPS = 7 };

typedef struct {
  const float *pcm[CLIPS];
  size_t n[CLIPS];
} clips;

/* Cuts of the fixture's two clips: whole, halves, odd lengths, 2 mel frames. */
static bool clips_cut(const gguf_file *ref, clips *c) {
  const gguf_tensor *speech = gguf_tensor_find(ref, "speech.pcm");
  const gguf_tensor *synth = gguf_tensor_find(ref, "synth.pcm");
  CHECK(speech && synth && speech->nelem > 40000 && synth->nelem > 17000, "reference pcm");
  if (!speech || !synth || speech->nelem <= 40000 || synth->nelem <= 17000) return false;
  const float *sp = speech->data, *sy = synth->data;
  const float *from[CLIPS] = {sp, sy, sp + 1000, sy + 333, sp + 20000, sp + 7, sy + 1};
  size_t n[CLIPS] = {speech->nelem, synth->nelem, 30001, 9999, 20000, 320, 4321};
  for (int i = 0; i < CLIPS; i++) c->pcm[i] = from[i], c->n[i] = n[i];
  return true;
}

/* k clips idx[0..k) on `threads` threads against want[idx[j]] (alone, one thread). */
static void batch_vs_alone(const parakeet *m, const clips *c, const uint32_t *idx, uint32_t k,
                           int threads, float *const *want, const size_t *wframes,
                           const size_t *wvalid) {
  float *mel[CLIPS];
  uint32_t valid[CLIPS];
  int old = pool_limit_threads(threads);
  CHECK_OK(parakeet_batch_features(m, c->pcm, c->n, idx, k, mel, valid));
  pool_limit_threads(old);
  int bad = 0;
  for (uint32_t j = 0; j < k; j++) {
    uint32_t i = idx[j];
    bad += !mel[j] || valid[j] != wvalid[i] ||
           memcmp(mel[j], want[i], wframes[i] * m->c.mels * sizeof(float)) != 0;
    free(mel[j]);
  }
  CHECK(bad == 0, "%u clips on %d threads: %d clips' features differ from alone", k, threads, bad);
}

static void features(const parakeet *m, const clips *c) {
  float *want[CLIPS];
  size_t frames[CLIPS], valid[CLIPS];
  int old = pool_limit_threads(1);
  for (int i = 0; i < CLIPS; i++)
    CHECK_OK(parakeet_features(m, c->pcm[i], c->n[i], &want[i], &frames[i], &valid[i]));
  pool_limit_threads(old);
  static const uint32_t order[CLIPS] = {4, 0, 6, 2, 5, 1, 3};
  static const int threads[] = {1, 2, 5};
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
    batch_vs_alone(m, c, order, CLIPS, threads[t], want, frames, valid);
    batch_vs_alone(m, c, order + 1, 2, threads[t], want, frames, valid);
    batch_vs_alone(m, c, order + 4, 3, threads[t], want, frames, valid);
  }
  for (int i = 0; i < CLIPS; i++) free(want[i]);
  printf("batch features: %d clips (%zu to %zu samples) on 1, 2, 5 threads as alone\n", CLIPS,
         c->n[5], c->n[0]);
}

static bool same_result(const steno_result *a, const steno_result *b) {
  if (!a || !b || steno_result_token_count(a) != steno_result_token_count(b) ||
      strcmp(steno_result_text(a), steno_result_text(b)))
    return false;
  for (size_t i = 0; i < steno_result_token_count(a); i++) {
    steno_token x = steno_result_token(a, i), y = steno_result_token(b, i);
    if (x.id != y.id || x.start_ms != y.start_ms || x.end_ms != y.end_ms) return false;
  }
  return true;
}

/* The public batch on a model of 5 threads: each clip's result as alone. */
static void transcriptions(const clips *c) {
  char path[512];
  fixture_path(path, sizeof path, "parakeet_tdt_tiny.gguf");
  steno_model_params p = *test_params();
  p.threads = 5;
  steno_model *m = NULL;
  steno_session *s = NULL;
  CHECK_OK(steno_model_load(path, &p, &m));
  if (m) CHECK_OK(steno_session_new(m, &s));
  steno_result *out[CLIPS];
  if (s) CHECK_OK(steno_transcribe_batch(s, c->pcm, c->n, CLIPS, NULL, out));
  size_t tokens = 0;
  for (int i = 0; s && i < CLIPS; i++) {
    steno_result *alone = NULL;
    CHECK_OK(steno_transcribe(m, c->pcm[i], c->n[i], NULL, &alone));
    CHECK(same_result(out[i], alone), "clip %d: the batch's result differs from alone", i);
    tokens += out[i] ? steno_result_token_count(out[i]) : 0;
    steno_result_free(alone);
    steno_result_free(out[i]);
  }
  printf("steno_transcribe_batch on 5 threads: %d clips, %zu tokens, each as alone\n", CLIPS,
         tokens);
  steno_session_free(s);
  steno_model_free(m);
}

int main(void) {
  gguf_file *f, *ref;
  fixture_open("parakeet_tdt_tiny", &f, &ref);
  parakeet *m = NULL;
  clips c;
  if (f) CHECK_OK(parakeet_load(test_device(), f, &m));
  if (m && ref && clips_cut(ref, &c)) {
    features(m, &c);
    transcriptions(&c);
  }
  parakeet_free(m);
  gguf_close(f);
  gguf_close(ref);
  return check_done();
}
