/* The padded batch (models/parakeet/batch.c) against transformers' padded
 * batch on the tiny TDT fixture (scripts/dump_parakeet_batch.py): three clips
 * of 289, 112 and 156 mel frames in one encoder pass, each clip's encoder
 * output against the reference batch's rows of that clip (and against
 * steno's single-clip pass); then steno_transcribe_batch against
 * steno_transcribe of each clip alone (tokens, times, text exactly), with the
 * GPU and the CPU search, with short, repeated and reordered clips; and bad
 * calls. Then, where the device can make them, the same batch from the
 * samples with the features on the GPU (STENO_FEATURES=gpu): the encoder
 * against transformers' batch and against its own pass alone, and each
 * clip's result against its transcription alone and against the CPU
 * features' result. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "audio/split.h"
#include "fixture_ref.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "models/parakeet/parakeet.h"
#include "steno.h"
#include "text/result.h"

#define ENC_TOL 1e-3f   /* against transformers, as test_parakeet */
#define SELF_TOL 1e-5f  /* batched against steno's own single-clip pass */
#define CLIPS 3

static const gguf_tensor *tensor(const gguf_file *f, const char *clip, const char *what) {
  char name[96];
  snprintf(name, sizeof name, "%s.%s", clip, what);
  const gguf_tensor *t = gguf_tensor_find(f, name);
  CHECK(t && t->type == GGUF_TYPE_F32, "reference tensor %s", name);
  return t;
}

static const gguf_kv *key(const gguf_file *f, const char *clip, const char *what) {
  char name[96];
  snprintf(name, sizeof name, "ref.%s.%s", clip, what);
  const gguf_kv *kv = gguf_find(f, name);
  CHECK(kv != NULL, "reference key %s", name);
  return kv;
}

typedef struct {
  const char *name;
  const float *pcm, *mel, *enc;
  size_t n;
  uint32_t valid, t;
} clip_ref;

/* The three clips: their pcm from the TDT fixture's reference, the rest from
 * the batch reference. */
static bool clips_read(const gguf_file *batch, const gguf_file *ref, clip_ref *c) {
  const gguf_kv *names = gguf_find(batch, "ref.clips");
  CHECK(names && names->n == CLIPS, "ref.clips");
  if (!names || names->n != CLIPS) return false;
  for (int i = 0; i < CLIPS; i++) {
    c[i].name = names->v.str[i].s;
    const gguf_kv *from = key(batch, c[i].name, "pcm_from"), *at = key(batch, c[i].name, "pcm_clip");
    const gguf_tensor *pcm = from ? tensor(ref, from->v.str[0].s, "pcm") : NULL;
    const gguf_tensor *mel = tensor(batch, c[i].name, "mel"), *enc = tensor(batch, c[i].name, "encoder_out");
    if (!pcm || !at || at->n != 2 || !mel || !enc) return false;
    int32_t a = at->v.i32[0], b = at->v.i32[1];
    CHECK(a >= 0 && a < b && (uint64_t)b <= pcm->nelem, "pcm range %d..%d", a, b);
    c[i].pcm = (const float *)pcm->data + a, c[i].n = (size_t)(b - a);
    c[i].mel = mel->data, c[i].enc = enc->data;
    c[i].valid = key(batch, c[i].name, "n_frames_valid")->v.u32[0];
    c[i].t = key(batch, c[i].name, "t_enc_valid")->v.u32[0];
    printf("%s: %zu samples, %u mel frames, %u encoder frames; the reference's batched rows vs "
           "alone: %.2e\n",
           c[i].name, c[i].n, c[i].valid, c[i].t, key(batch, c[i].name, "batch_vs_alone")->v.f32[0]);
  }
  return true;
}

/* The encoder over the reference's features in one padded pass: each clip's
 * rows against transformers' batch, and against steno's pass over that clip
 * alone. */
static void encoder(parakeet_session *s, const clip_ref *c) {
  const float *mel[CLIPS];
  uint32_t valid[CLIPS], t[CLIPS], d = s->m->c.dims.d;
  float *enc[CLIPS];
  for (int i = 0; i < CLIPS; i++) mel[i] = c[i].mel, valid[i] = c[i].valid;
  CHECK_OK(parakeet_forward_batch(s, mel, valid, CLIPS, enc, t));
  for (int i = 0; i < CLIPS; i++) {
    char what[128];
    CHECK(t[i] == c[i].t, "%s: %u encoder frames, reference %u", c[i].name, t[i], c[i].t);
    if (t[i] != c[i].t || !enc[i]) continue;
    snprintf(what, sizeof what, "%s: batched encoder vs transformers' batch", c[i].name);
    check_close(what, enc[i], c[i].enc, (size_t)t[i] * d, ENC_TOL);
    printf("%s max |Δ| %.2e\n", what, max_abs(enc[i], c[i].enc, (size_t)t[i] * d));
    float *alone;
    uint32_t ta;
    CHECK_OK(parakeet_forward(s, c[i].mel, c[i].valid, &alone, NULL, &ta));
    snprintf(what, sizeof what, "%s: batched encoder vs steno alone", c[i].name);
    if (ta == t[i]) check_close(what, enc[i], alone, (size_t)t[i] * d, SELF_TOL);
    if (ta == t[i]) printf("%s max |Δ| %.2e\n", what, max_abs(enc[i], alone, (size_t)t[i] * d));
    free(alone);
    free(enc[i]);
  }
}

/* Whether two results have the same tokens (ids, times), text and duration. */
static bool same_result(const steno_result *a, const steno_result *b) {
  if (!a || !b || steno_result_token_count(a) != steno_result_token_count(b) ||
      strcmp(steno_result_text(a), steno_result_text(b)) ||
      steno_result_duration(a) != steno_result_duration(b))
    return false;
  for (size_t i = 0; i < steno_result_token_count(a); i++) {
    steno_token x = steno_result_token(a, i), y = steno_result_token(b, i);
    if (x.id != y.id || x.start_ms != y.start_ms || x.end_ms != y.end_ms) return false;
  }
  return true;
}

/* steno_transcribe_batch of clips (pcm[i], n[i]) against steno_transcribe of each alone. */
static void transcribe(steno_model *m, steno_session *s, const float *const *pcm, const size_t *n,
                       size_t count, const char *what) {
  steno_result *out[16];
  CHECK_OK(steno_transcribe_batch(s, pcm, n, count, NULL, out));
  size_t tokens = 0;
  for (size_t i = 0; i < count; i++) {
    steno_result *alone = NULL;
    CHECK_OK(steno_transcribe(m, pcm[i], n[i], NULL, &alone));
    CHECK(same_result(out[i], alone), "%s: clip %zu differs from its transcription alone (%s | %s)",
          what, i, out[i] ? steno_result_text(out[i]) : "-", alone ? steno_result_text(alone) : "-");
    tokens += out[i] ? steno_result_token_count(out[i]) : 0;
    steno_result_free(alone);
    steno_result_free(out[i]);
  }
  printf("%s: %zu clips, %zu tokens, each as alone\n", what, count, tokens);
}

typedef struct {
  const float *pcm;
  size_t n, at;
} source;

static int source_read(void *user, float *pcm, size_t max, size_t *got) {
  source *src = user;
  *got = src->n - src->at < max ? src->n - src->at : max;
  memcpy(pcm, src->pcm + src->at, *got * sizeof *pcm);
  src->at += *got;
  return 0;
}

/* A long recording (the three clips, four times: 22 s) in pieces of at most 5 s: what
 * steno_transcribe gives (its pieces batched four at a time) and what
 * steno_transcribe_batch gives (all pieces in one call), against the pieces
 * cut here and transcribed one by one on the internal session, joined. */
static void long_recording(steno_model *m, steno_session *ss, parakeet_session *s,
                           const clip_ref *c) {
  size_t n = 0;
  for (int r = 0; r < 4; r++)
    for (int i = 0; i < CLIPS; i++) n += c[i].n;
  float *pcm = test_floats(n);
  for (size_t r = 0, at = 0; r < 4; r++)
    for (int i = 0; i < CLIPS; i++, at += c[i - 1].n) memcpy(pcm + at, c[i].pcm, c[i].n * sizeof *pcm);
  steno_result *want = NULL, *got = NULL, *all = NULL;
  CHECK_OK(result_empty(0, &want));
  source src = {pcm, n, 0};
  splitter sp;
  CHECK_OK(split_init(&sp, 5, source_read, &src));
  int pieces = 0;
  for (;;) {
    const float *piece;
    size_t len = 0, offset;
    bool quiet;
    CHECK_OK(split_next(&sp, &piece, &len, &offset, &quiet));
    if (!len) break;
    steno_result *r = NULL;
    if (!quiet) CHECK_OK(parakeet_transcribe(s, piece, len, NULL, &r));
    if (r) CHECK_OK(result_append(want, r, (int64_t)(offset / 16)));
    pieces += !quiet;
  }
  split_free(&sp);
  want->duration = (double)n / 16000;
  steno_transcribe_params p = steno_transcribe_default_params();
  p.piece_seconds = 5;
  CHECK_OK(steno_transcribe(m, pcm, n, &p, &got));
  CHECK(same_result(got, want), "steno_transcribe of %zu samples in %d pieces: %s | %s", n, pieces,
        got ? steno_result_text(got) : "-", steno_result_text(want));
  const float *one[1] = {pcm};
  CHECK_OK(steno_transcribe_batch(ss, one, &n, 1, &p, &all));
  CHECK(same_result(all, want), "steno_transcribe_batch of one long clip: %s",
        all ? steno_result_text(all) : "-");
  printf("long recording: %d pieces, %zu tokens, as its pieces one by one\n", pieces,
         steno_result_token_count(want));
  steno_result_free(want), steno_result_free(got), steno_result_free(all);
  free(pcm);
}

static void transcriptions(parakeet_session *ps, const clip_ref *c) {
  char path[512];
  fixture_path(path, sizeof path, "parakeet_tdt_tiny.gguf");
  steno_model *m = NULL;
  steno_session *s = NULL;
  CHECK_OK(steno_model_load(path, test_params(), &m));
  if (m) CHECK_OK(steno_session_new(m, &s));
  if (!s) {
    steno_model_free(m);
    return;
  }
  const float *pcm[8] = {c[0].pcm, c[1].pcm, c[2].pcm};
  size_t n[8] = {c[0].n, c[1].n, c[2].n};
  for (int cpu = 0; cpu < 2; cpu++) {
    setenv("STENO_DECODER", cpu ? "cpu" : "gpu", 1); /* gpu: even on a CPU device */
    transcribe(m, s, pcm, n, CLIPS, cpu ? "three clips, CPU search" : "three clips, GPU search");
    /* Shortest first, a clip too short for two mel frames, one repeated, one of 0 samples. */
    const float *p2[6] = {c[1].pcm, c[0].pcm, c[0].pcm, c[2].pcm, c[0].pcm, c[1].pcm};
    size_t n2[6] = {c[1].n, 200, c[0].n, c[2].n, 0, c[1].n / 2};
    transcribe(m, s, p2, n2, 6, cpu ? "six clips, CPU search" : "six clips, GPU search");
  }
  unsetenv("STENO_DECODER");
  long_recording(m, s, ps, c);
  steno_result *out[2] = {NULL, NULL};
  CHECK(steno_transcribe_batch(s, NULL, n, 2, NULL, out) == STENO_ERR_INVALID, "NULL pcm");
  CHECK_OK(steno_transcribe_batch(s, NULL, NULL, 0, NULL, NULL));
  steno_session_free(s);
  steno_model_free(m);
}

/* parakeet_transcribe_batch with the persistent GPU search forced (all
 * clips in one dispatch per chunk of steps; lavapipe fails its probe, so it
 * is not chosen there by itself) against parakeet_transcribe per clip. */
static void persistent(parakeet_session *s, const clip_ref *c) {
  if (!s->search) return;
  gpu_transducer_search_force(s->search, 64);
  const float *pcm[CLIPS];
  size_t n[CLIPS];
  steno_result *out[CLIPS], *alone;
  for (int i = 0; i < CLIPS; i++) pcm[i] = c[i].pcm, n[i] = c[i].n;
  CHECK_OK(parakeet_transcribe_batch(s, pcm, n, CLIPS, NULL, out));
  for (int i = 0; i < CLIPS; i++) {
    CHECK_OK(parakeet_transcribe(s, pcm[i], n[i], NULL, &alone));
    CHECK(same_result(out[i], alone), "%s: the persistent batch search differs", c[i].name);
    steno_result_free(alone);
    steno_result_free(out[i]);
  }
  gpu_transducer_search_force(s->search, 0);
  printf("persistent search over the batch: each clip as alone\n");
}

/* The batch from the samples, features on the GPU (g: a model with gmel),
 * against transformers' batch, g's pass over each clip alone, and the results
 * of s (CPU features) clip by clip. */
static void gpu_features(parakeet_session *g, parakeet_session *s, const clip_ref *c) {
  const float *pcm[CLIPS];
  size_t n[CLIPS];
  uint32_t t[CLIPS], d = g->m->c.dims.d;
  float *enc[CLIPS];
  for (int i = 0; i < CLIPS; i++) pcm[i] = c[i].pcm, n[i] = c[i].n;
  CHECK_OK(parakeet_forward_batch_pcm(g, pcm, n, CLIPS, enc, t));
  for (int i = 0; i < CLIPS; i++) {
    char what[160];
    CHECK(t[i] == c[i].t, "%s: %u encoder frames, reference %u", c[i].name, t[i], c[i].t);
    if (t[i] != c[i].t || !enc[i]) continue;
    snprintf(what, sizeof what, "%s: batch from the samples (GPU features) vs transformers' batch",
             c[i].name);
    check_close(what, enc[i], c[i].enc, (size_t)t[i] * d, ENC_TOL);
    printf("%s max |Δ| %.2e\n", what, max_abs(enc[i], c[i].enc, (size_t)t[i] * d));
    float *alone = NULL;
    uint32_t ta = 0;
    CHECK_OK(parakeet_forward_pcm(g, pcm[i], n[i], &alone, NULL, &ta));
    snprintf(what, sizeof what, "%s: batch from the samples vs alone from the samples", c[i].name);
    CHECK(ta == t[i], "%s: %u frames alone", what, ta);
    if (ta == t[i] && alone) check_close(what, enc[i], alone, (size_t)t[i] * d, SELF_TOL);
    free(alone);
    free(enc[i]);
  }
  steno_result *out[CLIPS], *alone, *cpu;
  CHECK_OK(parakeet_transcribe_batch(g, pcm, n, CLIPS, NULL, out));
  for (int i = 0; i < CLIPS; i++) {
    CHECK_OK(parakeet_transcribe(g, pcm[i], n[i], NULL, &alone));
    CHECK_OK(parakeet_transcribe(s, pcm[i], n[i], NULL, &cpu));
    CHECK(same_result(out[i], alone), "%s: GPU features, batched differs from alone", c[i].name);
    CHECK(same_result(out[i], cpu), "%s: GPU features differ from the CPU's (%s | %s)", c[i].name,
          out[i] ? steno_result_text(out[i]) : "-", cpu ? steno_result_text(cpu) : "-");
    steno_result_free(alone);
    steno_result_free(cpu);
    steno_result_free(out[i]);
  }
  printf("features on the GPU: the batch as its clips alone and as the CPU's features\n");
}

/* Calls the batch refuses: a clip of one frame, one batch of one clip. */
static void bad_calls(parakeet_session *s, const clip_ref *c) {
  const float *mel[2] = {c[0].mel, c[1].mel};
  uint32_t valid[2] = {c[0].valid, 1}, t[2];
  CHECK(parakeet_forward_batch(s, mel, valid, 2, NULL, t) == STENO_ERR_INVALID, "1 mel frame");
  valid[1] = c[1].valid;
  CHECK(parakeet_forward_batch(s, mel, valid, 1, NULL, t) == STENO_ERR_INVALID, "1 clip");
  conformer_scratch e = {0};
  uint32_t lens[2] = {4, 9};
  CHECK_OK(conformer_scratch_new_batch(test_device(), &s->m->c.dims, 8, 2, &e));
  CHECK(conformer_set_lens(&e, lens, 2) == STENO_ERR_INVALID, "a clip past the room");
  CHECK(conformer_set_lens(&e, lens, 3) == STENO_ERR_INVALID, "more clips than the room");
  conformer_scratch_free(&e);
}

int main(void) {
  test_device();
  gguf_file *f, *ref, *batch = NULL;
  fixture_open("parakeet_tdt_tiny", &f, &ref);
  char path[512];
  fixture_path(path, sizeof path, "parakeet_tdt_tiny.batch.ref.gguf");
  CHECK_OK(gguf_open(&batch, path));
  clip_ref c[CLIPS];
  parakeet *m = NULL;
  parakeet_session *s = NULL;
  if (f) CHECK_OK(parakeet_load(test_device(), f, &m));
  if (m) CHECK_OK(parakeet_session_new(m, &s));
  if (s && ref && batch && clips_read(batch, ref, c)) {
    CHECK(parakeet_batchable(m) && parakeet_batch_fit(m, 289) >= CLIPS, "the model batches");
    encoder(s, c);
    bad_calls(s, c);
    persistent(s, c);
    transcriptions(s, c);
  }
  parakeet *gm = NULL;
  parakeet_session *gs = NULL;
  if (s && f && gpu_logmel_offered(test_device(), m->mel.c.n_fft)) {
    setenv("STENO_FEATURES", "gpu", 1);
    CHECK_OK(parakeet_load(test_device(), f, &gm));
    unsetenv("STENO_FEATURES");
    CHECK(gm && gm->gmel, "STENO_FEATURES=gpu: no GPU features");
    if (gm && gm->gmel) CHECK_OK(parakeet_session_new(gm, &gs));
    if (gs) gpu_features(gs, s, c);
  }
  parakeet_session_free(gs);
  parakeet_free(gm);
  parakeet_session_free(s);
  parakeet_free(m);
  gguf_close(f);
  gguf_close(ref);
  gguf_close(batch);
  return check_done();
}
