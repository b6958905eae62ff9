/* Parakeet parity with transformers: tiny random-init CTC, TDT and RNN-T models
 * (tests/fixtures, made by scripts/dump_parakeet.py) — log-mel, encoder
 * output, head output, token ids, frames and durations, and the text. The
 * TDT cap fixture's tokens are NeMo's (max_symbols per frame), which differ
 * from transformers' generate() (no cap), also stored: both searches give
 * NeMo's. A TDT file with a max_symbols of 0 or 2^31 is refused at load.
 * Then the same from the samples with the features made on the GPU
 * (STENO_FEATURES=gpu: logmel.comp) where the device offers it: the GPU's
 * log-mel against the reference's, the head, and the tokens exactly; also on
 * a device opened with STENO_NO_MAP=1 (the samples copied in the submission,
 * as on a discrete GPU). */
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

/* Log-mel, absolute. transformers computes the STFT in f32: on the synthetic
 * clip (pure tones, many near-empty bins) its own values are up to 1.9e-4 away
 * from the exact (f64) features, so that clip gets a looser bound. */
#define MEL_TOL 1e-4f
#define MEL_TOL_SYNTH 2.5e-4f
#define ENC_TOL 1e-3f /* relative to max(1, max|want|) */

/* Whether tk holds exactly the tokens, frames and durations of the reference's
 * `prefix`tokens, `prefix`token_frames and `prefix`token_durations keys of clip
 * `name`; *found: whether those keys exist. */
static bool same_tokens(const dec_tokens *tk, const gguf_file *ref, const char *name, const char *prefix,
                        bool *found) {
  char k[3][160];
  snprintf(k[0], sizeof k[0], "ref.%s.%stokens", name, prefix);
  snprintf(k[1], sizeof k[1], "ref.%s.%stoken_frames", name, prefix);
  snprintf(k[2], sizeof k[2], "ref.%s.%stoken_durations", name, prefix);
  const gguf_kv *ids = gguf_find(ref, k[0]), *at = gguf_find(ref, k[1]), *dur = gguf_find(ref, k[2]);
  *found = ids && at && dur;
  bool same = *found && tk->n == ids->n && at->n == ids->n && dur->n == ids->n;
  for (size_t i = 0; same && i < tk->n; i++)
    same = tk->v[i].id == ids->v.i32[i] && tk->v[i].frame == at->v.i32[i] &&
           tk->v[i].frames == dur->v.i32[i];
  return same;
}

/* Clips where the reference keeps transformers' generate() tokens, and steno's
 * (NeMo's) differ from them: the cap fixture's demonstration. */
static int generate_differs;

static void clip(parakeet_session *s, const gguf_file *ref, const char *name, const char *model) {
  const parakeet *m = s->m;
  char what[256];
  size_t n_pcm, n_mel, n_enc, n_head;
  const float *pcm = ref_tensor(ref, name, "pcm", &n_pcm);
  const float *ref_mel = ref_tensor(ref, name, "mel", &n_mel);
  const float *ref_enc = ref_tensor(ref, name, "encoder_out", &n_enc);
  bool ctc = m->c.head == HEAD_CTC;
  const float *ref_head = ref_tensor(ref, name, ctc ? "logits" : "enc_proj", &n_head);
  if (!pcm || !ref_mel || !ref_enc || !ref_head) return;

  /* Frontend: every frame, the zeroed last one included. */
  float *mel;
  size_t frames, valid;
  CHECK_OK(parakeet_features(m, pcm, n_pcm, &mel, &frames, &valid));
  uint32_t F = m->c.mels;
  CHECK(frames * F == n_mel && valid == ref_key(ref, name, "n_frames_valid")->v.u32[0],
        "%s: %zu frames (%zu valid), reference %zu", name, frames, valid, n_mel / F);
  snprintf(what, sizeof what, "%s %s: log-mel", model, name);
  float mel_tol = strcmp(name, "synth") ? MEL_TOL : MEL_TOL_SYNTH;
  if (frames * F == n_mel) check_abs(what, mel, ref_mel, n_mel, mel_tol);
  printf("%s max |Δ| %.2e\n", what, frames * F == n_mel ? max_abs(mel, ref_mel, n_mel) : -1.0);

  /* Encoder and head on the reference's features. */
  float *enc, *head;
  uint32_t t;
  CHECK_OK(parakeet_forward(s, ref_mel, (uint32_t)valid, &enc, &head, &t));
  uint32_t d = m->c.dims.d, t_ref = ref_key(ref, name, "t_enc_valid")->v.u32[0];
  CHECK(t == t_ref, "%s: %u encoder frames, reference %u", name, t, t_ref);
  if (t == t_ref && enc) {
    snprintf(what, sizeof what, "%s %s: encoder output", model, name);
    check_close(what, enc, ref_enc, (size_t)t * d, ENC_TOL);
    printf("%s max |Δ| %.2e\n", what, max_abs(enc, ref_enc, (size_t)t * d));
    uint32_t cols = (uint32_t)(n_head / ref_key(ref, name, "t_enc")->v.u32[0]);
    uint32_t width = gpu_linear_width(&m->head);
    float *h = test_floats((size_t)t * cols);
    for (uint32_t r = 0; r < t; r++) memcpy(h + (size_t)r * cols, head + (size_t)r * width, cols * sizeof *h);
    snprintf(what, sizeof what, "%s %s: %s", model, name, ctc ? "CTC logits" : "joint encoder projection");
    check_close(what, h, ref_head, (size_t)t * cols, ENC_TOL);
    printf("%s max |Δ| %.2e\n", what, max_abs(h, ref_head, (size_t)t * cols));
    free(h);
  }

  /* Tokens: ids, frames and durations exactly, from the CPU search and (for
   * transducers) the GPU one; their confidences agree to 1e-4. */
  dec_tokens toks = {0}, gtoks = {0};
  if (head) CHECK_OK(parakeet_decode(m, head, t, &toks));
  if (head && !ctc) {
    CHECK(m->gdec, "%s: no GPU transducer decoder", model);
    if (m->gdec) CHECK_OK(parakeet_decode_gpu(s, t, &gtoks));
    double worst = 0;
    for (size_t i = 0; i < toks.n && i < gtoks.n; i++) {
      double dp = fabs((double)toks.v[i].p - gtoks.v[i].p);
      if (dp > worst) worst = dp;
    }
    CHECK(worst <= 1e-4, "%s %s: GPU confidences off by %.2e", model, name, worst);
    printf("%s %s: GPU search %zu tokens, confidences max |Δ| %.2e\n", model, name, gtoks.n, worst);
  }
  const gguf_kv *ids = ref_key(ref, name, "tokens"), *at = ref_key(ref, name, "token_frames"),
                *dur = ref_key(ref, name, "token_durations");
  for (int gpu = 0; ids && at && dur && gpu <= !ctc; gpu++) {
    const dec_tokens *tk = gpu ? &gtoks : &toks;
    bool found, same = same_tokens(tk, ref, name, "", &found);
    CHECK(same, "%s %s (%s search): %zu tokens, reference %zu (or ids/frames/durations differ)",
          model, name, gpu ? "GPU" : "CPU", tk->n, ids->n);
    bool gen_same = same_tokens(tk, ref, name, "generate.", &found);
    CHECK(!gen_same, "%s %s (%s search): transformers' uncapped decode, not NeMo's", model, name,
          gpu ? "GPU" : "CPU");
    generate_differs += found && !gen_same && gpu == !ctc;
    if (!same)
      for (size_t i = 0; i < tk->n || i < ids->n; i++)
        fprintf(stderr, "  [%zu] got %d@%d+%d  want %d@%d+%d\n", i, i < tk->n ? tk->v[i].id : -1,
                i < tk->n ? tk->v[i].frame : -1, i < tk->n ? tk->v[i].frames : -1,
                i < ids->n ? ids->v.i32[i] : -1, i < at->n ? at->v.i32[i] : -1,
                i < dur->n ? dur->v.i32[i] : -1);
  }
  dec_free(&toks);
  dec_free(&gtoks);

  /* End to end from the samples, as the API runs it. */
  steno_result *r = NULL;
  CHECK_OK(parakeet_transcribe(s, pcm, n_pcm, NULL, &r));
  const gguf_kv *text = ref_key(ref, name, "text");
  if (r && text)
    CHECK(!strcmp(steno_result_text(r), text->v.str[0].s), "%s %s: text '%s', reference '%s'",
          model, name, steno_result_text(r), text->v.str[0].s);
  steno_result_free(r);
  free(mel);
  free(enc);
  free(head);
}

static void model(const char *file) {
  gguf_file *f, *ref;
  fixture_open(file, &f, &ref);
  parakeet *m = NULL;
  parakeet_session *s = NULL;
  if (f) CHECK_OK(parakeet_load(test_device(), f, &m));
  if (m) CHECK_OK(parakeet_session_new(m, &s));
  const gguf_kv *clips = ref ? gguf_find(ref, "ref.clips") : NULL;
  for (size_t i = 0; s && clips && i < clips->n; i++) clip(s, ref, clips->v.str[i].s, file);
  parakeet_session_free(s);
  parakeet_free(m);
  gguf_close(f);
  gguf_close(ref);
}

/* Writes `stt.parakeet.tdt.max_symbols` as the uint32 in ctx. */
static bool set_max_symbols(gguf_writer *w, const gguf_kv *kv, const void *ctx) {
  if (strcmp(kv->key, "stt.parakeet.tdt.max_symbols")) return false;
  gw_u32(w, kv->key, *(const uint32_t *)ctx);
  return true;
}

/* From the samples with the features on the GPU (m->gmel): its log-mel (read
 * back from the arena) within the CPU frontend's bound of the reference's,
 * the head within ENC_TOL, and the tokens of both searches exactly. */
static void clip_gpu_features(parakeet_session *s, const gguf_file *ref, const char *name,
                              const char *model) {
  const parakeet *m = s->m;
  size_t n_pcm, n_mel, n_head;
  const float *pcm = ref_tensor(ref, name, "pcm", &n_pcm);
  const float *ref_mel = ref_tensor(ref, name, "mel", &n_mel);
  bool ctc = m->c.head == HEAD_CTC;
  const float *ref_head = ref_tensor(ref, name, ctc ? "logits" : "enc_proj", &n_head);
  if (!pcm || !ref_mel || !ref_head) return;
  float *head = NULL;
  uint32_t t = 0, F = m->c.mels, valid = (uint32_t)(n_pcm / m->mel.c.hop);
  CHECK_OK(parakeet_forward_pcm(s, pcm, n_pcm, NULL, &head, &t));
  char what[256];
  float *mel = test_floats((size_t)valid * F);
  CHECK_OK(gpu_download(s->arena.mel, 0, mel, (size_t)valid * F * sizeof *mel));
  snprintf(what, sizeof what, "%s %s: log-mel on the GPU", model, name);
  check_abs(what, mel, ref_mel, (size_t)valid * F, strcmp(name, "synth") ? MEL_TOL : MEL_TOL_SYNTH);
  printf("%s max |Δ| %.2e\n", what, max_abs(mel, ref_mel, (size_t)valid * F));
  uint32_t t_ref = ref_key(ref, name, "t_enc_valid")->v.u32[0];
  CHECK(t == t_ref, "%s: %u encoder frames, reference %u", name, t, t_ref);
  if (head && t == t_ref) {
    uint32_t cols = (uint32_t)(n_head / ref_key(ref, name, "t_enc")->v.u32[0]);
    uint32_t width = gpu_linear_width(&m->head);
    float *h = test_floats((size_t)t * cols);
    for (uint32_t r = 0; r < t; r++) memcpy(h + (size_t)r * cols, head + (size_t)r * width, cols * sizeof *h);
    snprintf(what, sizeof what, "%s %s: head from the GPU's features", model, name);
    check_close(what, h, ref_head, (size_t)t * cols, ENC_TOL);
    free(h);
  }
  dec_tokens toks[2] = {{0}};
  if (head) CHECK_OK(parakeet_decode(m, head, t, &toks[0]));
  if (head && m->gdec) CHECK_OK(parakeet_decode_gpu(s, t, &toks[1]));
  for (int gpu = 0; gpu <= (m->gdec != NULL); gpu++) {
    bool found;
    CHECK(same_tokens(&toks[gpu], ref, name, "", &found),
          "%s %s, features on the GPU (%s search): %zu tokens differ from the reference", model,
          name, gpu ? "GPU" : "CPU", toks[gpu].n);
    dec_free(&toks[gpu]);
  }
  steno_result *r = NULL;
  CHECK_OK(parakeet_transcribe(s, pcm, n_pcm, NULL, &r));
  const gguf_kv *text = ref_key(ref, name, "text");
  if (r && text)
    CHECK(!strcmp(steno_result_text(r), text->v.str[0].s),
          "%s %s, features on the GPU: text '%s', reference '%s'", model, name,
          steno_result_text(r), text->v.str[0].s);
  steno_result_free(r);
  free(mel);
  free(head);
}

/* dev: the test device, or one opened with STENO_NO_MAP=1 (a discrete GPU's
 * path: the samples written into host memory and copied in the submission). */
static void model_gpu_features(const char *file, gpu_device *dev) {
  if (!gpu_logmel_offered(dev, 512)) {
    printf("%s: the device cannot make the features (no doubles in shaders)\n", file);
    return;
  }
  gguf_file *f, *ref;
  fixture_open(file, &f, &ref);
  parakeet *m = NULL;
  parakeet_session *s = NULL;
  setenv("STENO_FEATURES", "gpu", 1);
  if (f) CHECK_OK(parakeet_load(dev, f, &m));
  unsetenv("STENO_FEATURES");
  if (m) CHECK(m->gmel, "%s: no GPU features with STENO_FEATURES=gpu", file);
  if (m && m->gmel) CHECK_OK(parakeet_session_new(m, &s));
  const gguf_kv *clips = ref ? gguf_find(ref, "ref.clips") : NULL;
  for (size_t i = 0; s && clips && i < clips->n; i++)
    clip_gpu_features(s, ref, clips->v.str[i].s, file);
  parakeet_session_free(s);
  parakeet_free(m);
  gguf_close(f);
  gguf_close(ref);
}

/* A crafted max_symbols (0: no cap, or one that makes the step bound huge)
 * is refused at load, with the key named. */
static void bad_max_symbols(void) {
  static const uint32_t bad[] = {0, TRANSDUCER_MAX_SYMBOLS + 1, 1u << 31, UINT32_MAX};
  gguf_file *src, *ref;
  fixture_open("parakeet_tdt_cap_tiny", &src, &ref);
  for (size_t i = 0; src && i < sizeof bad / sizeof *bad; i++) {
    uint8_t *bytes;
    gguf_file *f = lc_rewrite(src, (gw_edit){.key = set_max_symbols, .ctx = &bad[i]}, &bytes);
    parakeet *m = NULL;
    int st = f ? parakeet_load(test_device(), f, &m) : -1;
    CHECK(st == STENO_ERR_FORMAT && !m && strstr(steno_last_error(), "max_symbols"),
          "max_symbols %u: load gave %d (%s)", bad[i], st, steno_last_error());
    parakeet_free(m);
    gguf_close(f);
    free(bytes);
  }
  gguf_close(src);
  gguf_close(ref);
}

int main(void) {
  test_device();
  model("parakeet_ctc_tiny");
  model("parakeet_tdt_tiny");
  model("parakeet_rnnt_tiny");
  CHECK(generate_differs == 0, "%d clips differ from transformers' generate() before the cap fixture",
        generate_differs);
  model("parakeet_tdt_cap_tiny");
  CHECK(generate_differs >= 2, "the cap fixture shows NeMo and transformers differ in %d clips",
        generate_differs);
  bad_max_symbols();
  model_gpu_features("parakeet_ctc_tiny", test_device());
  model_gpu_features("parakeet_tdt_tiny", test_device());
  model_gpu_features("parakeet_rnnt_tiny", test_device());
  model_gpu_features("parakeet_tdt_cap_tiny", test_device());
  gpu_device *staged = test_staged_device();
  if (staged) model_gpu_features("parakeet_tdt_tiny", staged);
  gpu_close(staged);
  return check_done();
}
