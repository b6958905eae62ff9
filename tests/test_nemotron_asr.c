/* Nemotron 3.5 ASR Streaming parity with transformers, offline: a tiny
 * random-init Nemotron3_5AsrForRNNT (tests/fixtures/nemotron_asr_tiny*, made by
 * scripts/dump_nemotron_asr.py) run over the whole utterance under the
 * chunked_limited mask, with causal pre_encode and depthwise convs, a
 * LayerNorm conv module and the language prompt MLP: log-mel, encoder
 * output, joint encoder projection for two prompts (auto, de), tokens and
 * frames exactly from the CPU and GPU searches, and the text. Then the
 * loader's checks of the streaming and prompt keys. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_ref.h"
#include "gguf_write.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "load_check.h"
#include "models/parakeet/parakeet.h"
#include "steno.h"

#define MEL_TOL 2e-4f /* absolute, on unnormalised log-mel down to −17: transformers' f32 STFT */
#define ENC_TOL 1e-3f /* relative to max(1, max|want|) */

static const float *tensor(const gguf_file *ref, const char *name, size_t *n) {
  const gguf_tensor *t = gguf_tensor_find(ref, name);
  CHECK(t && t->type == GGUF_TYPE_F32, "reference tensor %s", name);
  if (!t) return NULL;
  *n = t->nelem;
  return t->data;
}

static const gguf_kv *key(const gguf_file *ref, const char *run, const char *what) {
  char name[128];
  snprintf(name, sizeof name, "ref.%s.%s", run, what);
  const gguf_kv *kv = gguf_find(ref, name);
  CHECK(kv != NULL, "reference key %s", name);
  return kv;
}

/* Whether tk holds exactly the run's tokens and frames; prints both if not. */
static bool same_tokens(const dec_tokens *tk, const gguf_file *ref, const char *run) {
  const gguf_kv *ids = key(ref, run, "tokens"), *at = key(ref, run, "token_frames");
  bool same = ids && at && tk->n == ids->n;
  for (size_t i = 0; same && i < tk->n; i++)
    same = tk->v[i].id == ids->v.i32[i] && tk->v[i].frame == at->v.i32[i];
  if (!same && ids && at)
    for (size_t i = 0; i < tk->n || i < ids->n; i++)
      fprintf(stderr, "  [%zu] got %d@%d want %d@%d\n", i, i < tk->n ? tk->v[i].id : -1,
              i < tk->n ? tk->v[i].frame : -1, i < ids->n ? ids->v.i32[i] : -1,
              i < at->n ? at->v.i32[i] : -1);
  return same;
}

/* The frontend on the clip: every valid frame (transformers' features of the utterance). */
static void frontend(const parakeet *m, const gguf_file *ref) {
  size_t n_pcm, n_mel, frames, valid;
  const float *pcm = tensor(ref, "speech.pcm", &n_pcm), *want = tensor(ref, "speech.mel", &n_mel);
  float *mel;
  if (!pcm || !want) return;
  CHECK_OK(parakeet_features(m, pcm, n_pcm, &mel, &frames, &valid));
  uint32_t F = m->c.mels;
  CHECK(valid * F == n_mel, "%zu valid frames, reference %zu", valid, n_mel / F);
  if (valid * F == n_mel) {
    check_abs("nemotron log-mel", mel, want, n_mel, MEL_TOL);
    printf("nemotron log-mel max |Δ| %.2e\n", max_abs(mel, want, n_mel));
  }
  free(mel);
}

/* One offline run: the reference's features through the encoder, the prompt
 * of `language` (NULL: auto) and the joint's projection, then both searches. */
static void offline(parakeet_session *s, const gguf_file *ref, const char *run,
                    const char *language) {
  const parakeet *m = s->m;
  char name[96], what[160];
  size_t n_mel, n_enc, n_proj;
  const float *mel = tensor(ref, "speech.mel", &n_mel);
  snprintf(name, sizeof name, "%s.encoder_out", run);
  const float *want_enc = tensor(ref, name, &n_enc);
  snprintf(name, sizeof name, "%s.enc_proj", run);
  const float *want_proj = tensor(ref, name, &n_proj);
  if (!mel || !want_enc || !want_proj) return;
  s->language = language;
  float *enc, *head;
  uint32_t t, d = m->c.dims.d, width = gpu_linear_width(&m->head);
  CHECK_OK(parakeet_forward(s, mel, (uint32_t)(n_mel / m->c.mels), &enc, &head, &t));
  const gguf_kv *t_ref = key(ref, run, "t_enc");
  CHECK(t_ref && t == t_ref->v.u32[0] && (size_t)t * d == n_enc, "%s: %u encoder frames", run, t);
  if (!enc || !t_ref || t != t_ref->v.u32[0]) return;
  snprintf(what, sizeof what, "nemotron %s: encoder output", run);
  check_close(what, enc, want_enc, n_enc, ENC_TOL);
  printf("%s max |Δ| %.2e\n", what, max_abs(enc, want_enc, n_enc));
  uint32_t cols = (uint32_t)(n_proj / t);
  float *proj = test_floats(n_proj);
  for (uint32_t r = 0; r < t; r++) memcpy(proj + (size_t)r * cols, head + (size_t)r * width, cols * sizeof *proj);
  snprintf(what, sizeof what, "nemotron %s: prompt MLP + joint encoder projection", run);
  check_close(what, proj, want_proj, n_proj, ENC_TOL);
  printf("%s max |Δ| %.2e\n", what, max_abs(proj, want_proj, n_proj));

  dec_tokens cpu = {0}, gpu = {0};
  CHECK_OK(parakeet_decode(m, head, t, &cpu));
  CHECK(same_tokens(&cpu, ref, run), "nemotron %s: CPU search tokens/frames differ", run);
  CHECK(m->gdec != NULL, "no GPU search");
  if (m->gdec) {
    CHECK_OK(parakeet_decode_gpu(s, t, &gpu));
    CHECK(same_tokens(&gpu, ref, run), "nemotron %s: GPU search tokens/frames differ", run);
  }
  printf("nemotron %s: %zu tokens (CPU), %zu (GPU)\n", run, cpu.n, gpu.n);
  dec_free(&cpu), dec_free(&gpu);
  free(proj), free(enc), free(head);
}

/* End to end from the samples, as the API runs it: the reference's text. */
static void transcribe(parakeet_session *s, const gguf_file *ref, const char *run,
                       const char *language) {
  size_t n_pcm;
  const float *pcm = tensor(ref, "speech.pcm", &n_pcm);
  const gguf_kv *text = key(ref, run, "text");
  if (!pcm || !text) return;
  s->language = language;
  steno_result *r = NULL;
  CHECK_OK(parakeet_transcribe(s, pcm, n_pcm, NULL, &r));
  if (r)
    CHECK(!strcmp(steno_result_text(r), text->v.str[0].s), "nemotron %s: text '%s', reference '%s'",
          run, steno_result_text(r), text->v.str[0].s);
  steno_result_free(r);
}

/* An unknown language is an error naming it; "en-US" and "en" share a slot. */
static void languages(const parakeet *m) {
  uint32_t a, b;
  CHECK_OK(parakeet_prompt_id(m, "en-US", &a));
  CHECK_OK(parakeet_prompt_id(m, "en", &b));
  CHECK(a == 0 && b == 0, "en-US -> %u, en -> %u", a, b);
  CHECK_OK(parakeet_prompt_id(m, NULL, &a));
  CHECK(a == m->prompt.auto_id, "no hint -> %u, auto is %u", a, m->prompt.auto_id);
  CHECK(parakeet_prompt_id(m, "xx-YY", &a) == STENO_ERR_INVALID && strstr(steno_last_error(), "xx-YY"),
        "unknown language: %s", steno_last_error());
}

/* The same with the model's file closed, as steno_model_load leaves it: the
 * dictionary pointed into the file (fuzz_load: a use after free under ASan). */
static void languages_after_close(void) {
  gguf_file *f = NULL, *ref = NULL;
  parakeet *m = NULL;
  fixture_open("nemotron_asr_tiny", &f, &ref);
  if (f) CHECK_OK(parakeet_load(test_device(), f, &m));
  gguf_close(f);
  gguf_close(ref);
  if (m) languages(m);
  parakeet_free(m);
}

/* Rewrites one key of the model file (type and value from ctx) and loads it. */
typedef struct {
  const char *key;
  int kind; /* 0: i32, 1: str, 2: i32 array, 3: u32 */
  int32_t i;
  const char *s;
  const int32_t *arr;
  size_t n;
} edit;

static bool apply(gguf_writer *w, const gguf_kv *kv, const void *ctx) {
  const edit *e = ctx;
  if (strcmp(kv->key, e->key)) return false;
  if (e->kind == 0) gw_i32(w, kv->key, e->i);
  else if (e->kind == 1) gw_str(w, kv->key, e->s);
  else if (e->kind == 2) gw_arr(w, kv->key, GGUF_VAL_INT32, e->arr, e->n);
  else gw_u32(w, kv->key, (uint32_t)e->i);
  return true;
}

static void bad_key(const gguf_file *src, edit e, int want, const char *words) {
  uint8_t *bytes;
  gguf_file *f = lc_rewrite(src, (gw_edit){.key = apply, .ctx = &e}, &bytes);
  parakeet *m = NULL;
  int st = f ? parakeet_load(test_device(), f, &m) : -1;
  CHECK(st == want && !m && strstr(steno_last_error(), words), "%s: load gave %d (%s)", e.key, st,
        steno_last_error());
  parakeet_free(m);
  gguf_close(f);
  free(bytes);
}

/* A prompt tensor left out or of the wrong shape. */
static void bad_tensor(const gguf_file *src, const char *drop, const char *misshape) {
  uint8_t *bytes;
  gguf_file *f = lc_rewrite(src, (gw_edit){.drop = drop, .misshape = misshape}, &bytes);
  parakeet *m = NULL;
  int st = f ? parakeet_load(test_device(), f, &m) : -1;
  const char *name = drop ? drop : misshape;
  CHECK(st == STENO_ERR_FORMAT && !m && strstr(steno_last_error(), name), "%s: load gave %d (%s)",
        name, st, steno_last_error());
  parakeet_free(m);
  gguf_close(f);
  free(bytes);
}

static void bad_files(const gguf_file *src) {
  bad_tensor(src, "prompt.mlp.0.weight", NULL);
  bad_tensor(src, NULL, "prompt.mlp.0.weight");
  bad_tensor(src, NULL, "prompt.mlp.2.weight");
  bad_tensor(src, NULL, "enc.pre_encode.out.weight"); /* 16 columns, not the causal 17 */
  static const int32_t wrong_pair[] = {8, 1, 8, 3}, odd[] = {8, 3, 8};
  const char *e = "stt.parakeet.encoder.", *p = "stt.parakeet.prompt.";
  char k[8][96];
  snprintf(k[0], 96, "%satt_context_style", e);
  snprintf(k[1], 96, "%satt_context_size_choices", e);
  snprintf(k[2], 96, "%sconv_context_left", e);
  snprintf(k[3], 96, "%satt_context_right", e);
  snprintf(k[4], 96, "%sstreaming.drop_extra_pre_encoded", e);
  snprintf(k[5], 96, "%sauto_id", p);
  snprintf(k[6], 96, "%sdictionary.indices", p);
  snprintf(k[7], 96, "%sactivation", p);
  static const int32_t big_index[] = {0, 0, 1, 1, 2, 99};
  bad_key(src, (edit){k[0], 1, 0, "chunked_limited_with_rc", 0, 0}, STENO_ERR_UNSUPPORTED, "with_rc");
  bad_key(src, (edit){k[0], 1, 0, "sideways", 0, 0}, STENO_ERR_FORMAT, "sideways");
  bad_key(src, (edit){k[1], 2, 0, 0, wrong_pair, 4}, STENO_ERR_FORMAT, "choices");
  bad_key(src, (edit){k[1], 2, 0, 0, odd, 3}, STENO_ERR_FORMAT, "choices");
  bad_key(src, (edit){k[2], 0, 3, 0, 0, 0}, STENO_ERR_UNSUPPORTED, "conv context");
  bad_key(src, (edit){k[3], 0, -5, 0, 0, 0}, STENO_ERR_FORMAT, "context");
  bad_key(src, (edit){k[4], 0, 1000, 0, 0, 0}, STENO_ERR_FORMAT, "drop");
  bad_key(src, (edit){k[5], 3, 8, 0, 0, 0}, STENO_ERR_FORMAT, "auto_id");
  bad_key(src, (edit){k[6], 2, 0, 0, big_index, 6}, STENO_ERR_FORMAT, "prompt index");
  bad_key(src, (edit){k[7], 1, 0, "gelu", 0, 0}, STENO_ERR_UNSUPPORTED, "gelu");
}

int main(void) {
  test_device();
  gguf_file *f, *ref;
  fixture_open("nemotron_asr_tiny", &f, &ref);
  parakeet *m = NULL;
  parakeet_session *s = NULL;
  if (f) CHECK_OK(parakeet_load(test_device(), f, &m));
  if (m) {
    CHECK(m->c.stream.on && m->c.dims.chunk == 4 && m->c.dims.left_chunks == 2 && m->c.causal_conv &&
              m->sub.causal && m->prompt.n == 8,
          "streaming geometry: chunk %u, %u left, prompts %u", m->c.dims.chunk,
          m->c.dims.left_chunks, m->prompt.n);
    CHECK_OK(parakeet_session_new(m, &s));
  }
  if (s && ref) {
    frontend(m, ref);
    offline(s, ref, "auto", NULL);
    offline(s, ref, "de", "de");
    offline(s, ref, "auto", "auto");
    transcribe(s, ref, "de", "de-DE");
    transcribe(s, ref, "auto", NULL);
    languages(m);
  }
  languages_after_close();
  if (f) bad_files(f);
  parakeet_session_free(s);
  parakeet_free(m);
  gguf_close(f);
  gguf_close(ref);
  return check_done();
}
