/* Nemotron 3.5 Transcribe's audio module against transformers 5.25 on the tiny
 * random model of scripts/dump_nemotron_transcribe.py: log-mel (the
 * checkpoint's bf16 window and filterbank), its per-feature normalization, the
 * speech encoder run in four chunks with context, the diarization model with a
 * speaker cache compressed three times, the speaker probabilities and 0/1
 * activities (exactly), the states with speaker embeddings, the projected
 * embeddings, and the word timestamp head's logits; the default request's
 * prompt; the speaker cache's FIFO rules on a hand case and its compression
 * on random cases; a session's arena reused over clips of other lengths. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "io/gguf.h"
#include "models/nemotron_transcribe/nemotron_transcribe.h"
#include "steno.h"

#define FEAT_TOL 1e-4f /* log-mel, relative to max(1, max|want|) */
#define TOL 1e-3f      /* everything after it */

static const float *ref_tensor(const gguf_file *ref, const char *name, size_t want) {
  const gguf_tensor *t = gguf_tensor_find(ref, name);
  CHECK(t && t->type == GGUF_TYPE_F32 && t->nelem == want, "reference tensor %s (%zu values)",
        name, want);
  return t && t->type == GGUF_TYPE_F32 && t->nelem == want ? t->data : NULL;
}

static uint32_t ref_u32(const gguf_file *ref, const char *key) {
  uint32_t v = 0;
  CHECK_OK(gguf_get_u32(ref, key, &v));
  return v;
}

static void compare(const char *what, const float *got, const gguf_file *ref, size_t n, float tol) {
  const float *want = ref_tensor(ref, what, n);
  if (want) check_close(what, got, want, n, tol);
}

/* The default request's ids, as the processor made them for the clip. */
static void prompt(const nt_model *m, const gguf_file *ref, uint32_t tokens) {
  const gguf_kv *want = gguf_find(ref, "ref.prompt_ids");
  int *ids = NULL;
  uint32_t n = 0;
  CHECK_OK(nt_prompt(m, NULL, 0, tokens, &ids, &n));
  bool same = want && ids && want->n == n;
  for (uint32_t i = 0; same && i < n; i++) same = ids[i] == want->v.i32[i];
  CHECK(same, "prompt of %u ids differs from the processor's %zu", n, want ? want->n : 0);
  free(ids);
}

static void parity(const nt_model *m, const gguf_file *ref) {
  const nt_config *c = &m->c;
  const gguf_tensor *pcm = gguf_tensor_find(ref, "pcm");
  CHECK(pcm && pcm->type == GGUF_TYPE_F32, "reference pcm");
  if (!pcm) return;
  nt_audio a;
  CHECK_OK(nt_audio_run(m, pcm->data, pcm->nelem, &a));
  if (!a.features) return;
  CHECK(a.valid == ref_u32(ref, "ref.valid_frames"), "valid frames %u", a.valid);
  CHECK(a.t == ref_u32(ref, "ref.encoder_frames"), "encoder frames %u", a.t);
  CHECK(a.t > 3 * c->chunk, "the clip runs %u encoder frames: not four chunks of %u", a.t, c->chunk);
  size_t F = (size_t)a.frames * c->mels, T = a.t, S = c->speakers;
  compare("features", a.features, ref, F, FEAT_TOL);
  float *norm = malloc(F * sizeof *norm);
  memcpy(norm, a.features, F * sizeof *norm);
  CHECK_OK(mel_normalize(norm, a.valid, (int)c->mels));
  compare("features_norm", norm, ref, F, FEAT_TOL * 10);
  free(norm);
  compare("asr_states", a.asr, ref, T * c->d, TOL);
  compare("speaker_logits", a.speaker_logits, ref, T * c->sub * S, TOL);
  compare("speaker_probs", a.speaker_probs, ref, T * S, TOL);
  const float *act = ref_tensor(ref, "speaker_activity", T * S);
  size_t differ = 0, active = 0;
  for (size_t i = 0; act && i < T * S; i++) differ += a.activity[i] != act[i], active += act[i] > 0;
  CHECK(act && differ == 0, "%zu of %zu speaker activities differ", differ, T * S);
  CHECK(active > 0 && active < T * S, "activities all %s: the fixture tests nothing",
        active ? "on" : "off");
  compare("audio_states", a.states, ref, T * c->d, TOL);
  compare("audio_embeds", a.embeds, ref, T * c->d_lm, TOL);
  CHECK(a.tokens == (a.valid + c->sub - 1) / c->sub, "audio tokens %u", a.tokens);
  prompt(m, ref, a.tokens);
  float *wts = NULL;
  CHECK_OK(nt_word_timestamp_logits(m, a.asr, a.t, a.valid, &wts));
  if (wts) compare("word_timestamp_logits", wts, ref, T * m->wts.factor * m->wts.classes, TOL);
  free(wts);
  nt_audio_free(&a);
}

/* The FIFO and cache moves of Sortformer's offline mode on a hand case: FIFO
 * of 4, update period 5, cache 12, chunks of 6 (no context). */
static void fifo_rules(void) {
  nt_config c = {.speakers = 2, .sub = 1, .fifo = 4, .update = 5, .cache = 12, .sil = 1,
                 .pred_thr = 0.25f, .latest_boost = 0.05f, .min_pos = 2, .n_strong = 3, .n_weak = 7};
  nt_spkcache k;
  CHECK_OK(nt_spkcache_init(&k, &c, 1));
  float in[32], probs[64], sil = -1;
  for (int i = 0; i < 32; i++) in[i] = (float)i;
  for (int i = 0; i < 64; i++) probs[i] = 0.9f;
  /* Step 1: no cache, no FIFO; 6 chunk frames overflow the FIFO of 4: 5 move. */
  CHECK_OK(nt_spkcache_update(&k, in, probs, 6, 0, 6, &sil));
  CHECK(k.n_cache == 5 && k.n_fifo == 1 && k.embeds[4] == 4 && k.fifo[0] == 5,
        "step 1: cache %u, FIFO %u", k.n_cache, k.n_fifo);
  /* Step 2: input = cache 5 | FIFO 1 | chunk 6 (values 12..17 at rows 6..11). */
  float in2[12];
  for (int i = 0; i < 12; i++) in2[i] = i < 5 ? (float)i : i == 5 ? 5.0f : (float)(6 + i);
  CHECK_OK(nt_spkcache_update(&k, in2, probs, 12, 0, 6, &sil));
  /* 7 in the FIFO: max(5, 3) = 5 move; the cache of 10 is not yet compressed. */
  CHECK(k.n_cache == 10 && k.n_fifo == 2 && !k.compressed && k.embeds[5] == 5 &&
            k.embeds[9] == 15 && k.fifo[1] == 17,
        "step 2: cache %u, FIFO %u", k.n_cache, k.n_fifo);
  /* Step 3: 5 more move: 15 frames > 12, compressed with one silence slot each. */
  float in3[18];
  for (int i = 0; i < 18; i++) in3[i] = (float)(100 + i);
  CHECK_OK(nt_spkcache_update(&k, in3, probs, 18, 0, 6, &sil));
  size_t silences = 0;
  for (uint32_t i = 0; i < k.n_cache; i++) silences += k.embeds[i] == sil;
  CHECK(k.n_cache == 12 && k.compressed && silences >= 2, "step 3: cache %u, %zu silences",
        k.n_cache, silences);
  nt_spkcache_free(&k);
}

/* Compressions of random probabilities at the tiny and the published sizes:
 * the kept frames equal transformers' _compress. */
static void compressions(const gguf_file *ref) {
  const gguf_kv *cases = gguf_find(ref, "ref.compress.cases"), *frames = gguf_find(ref, "ref.compress.frames");
  CHECK(cases && frames && cases->n % 3 == 0, "reference compressions");
  if (!cases || !frames) return;
  size_t at = 0;
  for (size_t i = 0; i < cases->n / 3; i++) {
    uint32_t L = (uint32_t)cases->v.i32[3 * i], S = (uint32_t)cases->v.i32[3 * i + 1];
    uint32_t n = (uint32_t)cases->v.i32[3 * i + 2], budget = L / S - 1;
    nt_config c = {.speakers = S, .cache = L, .sil = 1, .pred_thr = 0.25f, .latest_boost = 0.05f,
                   .min_pos = budget / 2, .n_strong = budget * 3 / 4, .n_weak = budget * 3 / 2};
    char name[64];
    snprintf(name, sizeof name, "compress.%zu.probs", i);
    const float *probs = ref_tensor(ref, name, (size_t)n * S);
    uint32_t *pick = calloc(L, sizeof *pick);
    if (probs) CHECK_OK(nt_spkcache_pick(&c, probs, n, pick));
    size_t differ = 0;
    for (uint32_t j = 0; j < L && at + j < frames->n; j++) differ += pick[j] != (uint32_t)frames->v.i32[at + j];
    CHECK(probs && at + L <= frames->n && differ == 0, "compression %zu (%u of %u frames, %u speakers): %zu of %u kept frames differ",
          i, L, n, S, differ, L);
    at += L;
    free(pick);
  }
}

/* Whether two runs gave the same bits in every output. */
static bool same_audio(const nt_model *m, const nt_audio *x, const nt_audio *y) {
  const nt_config *c = &m->c;
  size_t T = x->t, S = c->speakers, F = (size_t)x->frames * c->mels;
  if (x->t != y->t || x->frames != y->frames || x->valid != y->valid) return false;
  return !memcmp(x->features, y->features, F * sizeof(float)) &&
         !memcmp(x->asr, y->asr, T * c->d * sizeof(float)) &&
         !memcmp(x->speaker_logits, y->speaker_logits, T * c->sub * S * sizeof(float)) &&
         !memcmp(x->speaker_probs, y->speaker_probs, T * S * sizeof(float)) &&
         !memcmp(x->activity, y->activity, T * S * sizeof(float)) &&
         !memcmp(x->states, y->states, T * c->d * sizeof(float)) &&
         !memcmp(x->embeds, y->embeds, T * c->d_lm * sizeof(float));
}

/* One session's arena over clips of 2.5×, 1× and 0.4× the fixture's, then
 * 2.5× again (grown, reused shorter, reused at its size): each run's outputs
 * and word timestamp log-probabilities equal those of a fresh arena's, bit
 * for bit. */
static void arena_reuse(const nt_model *m, const float *pcm, size_t n) {
  const size_t lens[4] = {n * 5 / 2, n, n * 2 / 5, n * 5 / 2};
  float *x = malloc(lens[0] * sizeof *x);
  for (size_t i = 0; i < lens[0]; i++) x[i] = pcm[i % n] * (i < n ? 1.0f : -0.5f);
  nt_arena *a = NULL;
  CHECK_OK(nt_arena_new(m, &a));
  const int cols[3] = {0, 3, (int)m->wts.classes - 1};
  for (int r = 0; a && r < 4; r++) {
    nt_audio got, want;
    float *lg = NULL, *lw = NULL;
    CHECK_OK(nt_audio_run_in(a, x, lens[r], &got));
    CHECK_OK(nt_audio_run(m, x, lens[r], &want));
    CHECK(got.embeds && want.embeds && same_audio(m, &got, &want),
          "run %d (%zu samples) in a used arena differs from a fresh one's", r, lens[r]);
    if (got.asr) CHECK_OK(nt_word_timestamp_logprobs_in(a, got.asr, got.t, got.valid, cols, 3, &lg));
    if (want.asr) CHECK_OK(nt_word_timestamp_logprobs(m, want.asr, want.t, want.valid, cols, 3, &lw));
    size_t rows = (size_t)got.t * m->wts.factor;
    CHECK(lg && lw && !memcmp(lg, lw, rows * 3 * sizeof *lg),
          "run %d: word timestamp log-probabilities differ in a used arena", r);
    free(lg), free(lw);
    nt_audio_free(&got), nt_audio_free(&want);
  }
  nt_arena_free(a);
  free(x);
}

int main(void) {
  fifo_rules();
  gguf_file *f = NULL, *ref = NULL;
  fixture_open("nemotron_transcribe_tiny", &f, &ref);
  nt_model *m = NULL;
  if (f) CHECK_OK(nt_load(test_device(), f, &m));
  if (m && ref) parity(m, ref);
  const gguf_tensor *pcm = ref ? gguf_tensor_find(ref, "pcm") : NULL;
  if (m && pcm && pcm->type == GGUF_TYPE_F32) arena_reuse(m, pcm->data, pcm->nelem);
  if (ref) compressions(ref);
  nt_free(m);
  gguf_close(f);
  gguf_close(ref);
  return check_done();
}
