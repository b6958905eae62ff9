/* GigaAM v3 parity with the torch reference (scripts/gigaam_ref.py): tiny
 * random-init CTC, RNN-T, e2e CTC and e2e RNN-T models (tests/fixtures) —
 * log-mel, encoder output, CTC logits or the joint's encoder projection,
 * token ids and frames (CPU search, and the GPU one for RNN-T), token times
 * (40 ms frames) and the text (one leading space removed, nothing else); clips
 * under one window give an empty result, and a caller's stop is obeyed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_ref.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "models/gigaam/gigaam.h"
#include "steno.h"

/* Log-mel, absolute: ln of the power through the same filterbank; torch's f32
 * STFT against steno's f64 one. */
#define MEL_TOL 1e-3f
#define ENC_TOL 1e-3f /* relative to max(1, max|want|) */

/* Whether tk holds exactly the reference's ids and frames (all spanning 1 frame). */
static bool same_tokens(const dec_tokens *tk, const gguf_kv *ids, const gguf_kv *at) {
  bool same = tk->n == ids->n && at->n == ids->n;
  for (size_t i = 0; same && i < tk->n; i++)
    same = tk->v[i].id == ids->v.i32[i] && tk->v[i].frame == at->v.i32[i] && tk->v[i].frames == 1;
  if (!same)
    for (size_t i = 0; i < tk->n || i < ids->n; i++)
      fprintf(stderr, "  [%zu] got %d@%d  want %d@%d\n", i, i < tk->n ? tk->v[i].id : -1,
              i < tk->n ? tk->v[i].frame : -1, i < ids->n ? ids->v.i32[i] : -1,
              i < at->n ? at->v.i32[i] : -1);
  return same;
}

/* Features and the encoder on the reference's features; returns the head's output. */
static float *forward(gigaam_session *s, const gguf_file *ref, const char *name, const char *model,
                      uint32_t *t) {
  const gigaam *m = s->m;
  char what[256];
  bool ctc = m->c.head == GIGAAM_CTC;
  size_t n_pcm, n_mel, n_enc, n_head;
  const float *pcm = ref_tensor(ref, name, "pcm", &n_pcm);
  const float *ref_mel = ref_tensor(ref, name, "mel", &n_mel);
  const float *ref_enc = ref_tensor(ref, name, "encoder_out", &n_enc);
  const float *ref_head = ref_tensor(ref, name, ctc ? "logits" : "enc_proj", &n_head);
  if (!pcm || !ref_mel || !ref_enc || !ref_head) return NULL;
  float *mel = NULL, *enc = NULL, *head = NULL;
  size_t frames, F = m->c.mels;
  CHECK_OK(gigaam_features(m, pcm, n_pcm, &mel, &frames));
  CHECK(frames * F == n_mel, "%s %s: %zu mel frames, reference %zu", model, name, frames, n_mel / F);
  snprintf(what, sizeof what, "%s %s: log-mel", model, name);
  if (mel && frames * F == n_mel) {
    check_abs(what, mel, ref_mel, n_mel, MEL_TOL);
    printf("%s max |Δ| %.2e\n", what, max_abs(mel, ref_mel, n_mel));
  }
  free(mel);
  CHECK_OK(gigaam_forward(s, ref_mel, (uint32_t)(n_mel / F), &enc, &head, t));
  uint32_t d = m->c.dims.d, t_ref = ref_key(ref, name, "t_enc")->v.u32[0];
  CHECK(*t == t_ref && n_enc == (size_t)t_ref * d, "%s %s: %u encoder frames, reference %u", model,
        name, *t, t_ref);
  if (enc && *t == t_ref && n_enc == (size_t)t_ref * d) {
    snprintf(what, sizeof what, "%s %s: encoder output", model, name);
    check_close(what, enc, ref_enc, n_enc, ENC_TOL);
    printf("%s max |Δ| %.2e\n", what, max_abs(enc, ref_enc, n_enc));
    uint32_t cols = (uint32_t)(n_head / t_ref), width = gpu_linear_width(&m->head);
    float *h = test_floats(n_head);
    for (uint32_t r = 0; r < *t; r++) memcpy(h + (size_t)r * cols, head + (size_t)r * width, cols * sizeof *h);
    snprintf(what, sizeof what, "%s %s: %s", model, name, ctc ? "CTC logits" : "joint encoder projection");
    check_close(what, h, ref_head, n_head, ENC_TOL);
    printf("%s max |Δ| %.2e\n", what, max_abs(h, ref_head, n_head));
    free(h);
  }
  free(enc);
  return head;
}

static void clip(gigaam_session *s, const gguf_file *ref, const char *name, const char *model) {
  const gigaam *m = s->m;
  uint32_t t = 0;
  float *head = forward(s, ref, name, model, &t);
  const gguf_kv *ids = ref_key(ref, name, "tokens"), *at = ref_key(ref, name, "token_frames");
  const gguf_kv *text = ref_key(ref, name, "text");
  bool rnnt = m->c.head == GIGAAM_RNNT;
  for (int gpu = 0; head && ids && at && gpu <= rnnt; gpu++) {
    dec_tokens tk = {0};
    CHECK_OK(gpu ? gigaam_decode_gpu(s, t, &tk) : gigaam_decode(m, head, t, &tk));
    CHECK(same_tokens(&tk, ids, at), "%s %s (%s search): %zu tokens, reference %zu (or ids/frames differ)",
          model, name, gpu ? "GPU" : "CPU", tk.n, ids->n);
    printf("%s %s: %s search %zu tokens\n", model, name, gpu ? "GPU" : "CPU", tk.n);
    dec_free(&tk);
  }
  free(head);

  /* End to end from the samples, as the API runs it: text and token times. */
  size_t n_pcm;
  const float *pcm = ref_tensor(ref, name, "pcm", &n_pcm);
  steno_result *r = NULL;
  if (pcm) CHECK_OK(gigaam_transcribe(s, pcm, n_pcm, NULL, &r));
  if (r && text)
    CHECK(!strcmp(steno_result_text(r), text->v.str[0].s), "%s %s: text '%s', reference '%s'",
          model, name, steno_result_text(r), text->v.str[0].s);
  bool times = r && ids && at && steno_result_token_count(r) == ids->n;
  for (size_t i = 0; times && i < ids->n; i++) {
    steno_token tok = steno_result_token(r, i);
    times = tok.id == ids->v.i32[i] && tok.start_ms == 40 * at->v.i32[i] &&
            tok.end_ms == tok.start_ms + 40;
  }
  CHECK(times, "%s %s: token ids and times (40 ms a frame)", model, name);
  steno_result_free(r);
}

static int stop_now(void *user) {
  (void)user;
  return 1;
}

/* Clips shorter than one window (320 samples) give an empty result; one window
 * gives one mel frame and one encoder frame; a caller's stop ends the call. */
static void edges(gigaam_session *s, const char *model) {
  static const size_t lens[] = {0, 1, 319, 320, 321, 640, 1000};
  float *pcm = test_random(1000, 7);
  for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
    steno_result *r = NULL;
    CHECK_OK(gigaam_transcribe(s, pcm, lens[i], NULL, &r));
    if (r && lens[i] < 320)
      CHECK(!steno_result_text(r)[0] && steno_result_token_count(r) == 0, "%s: %zu samples gave text",
            model, lens[i]);
    steno_result_free(r);
  }
  transducer_abort stop = {stop_now, NULL};
  steno_result *r = NULL;
  CHECK(gigaam_transcribe(s, pcm, 1000, &stop, &r) == STENO_ERR_ABORTED && !r, "%s: stop ignored",
        model);
  free(pcm);
}

static void model(const char *file) {
  gguf_file *f, *ref;
  fixture_open(file, &f, &ref);
  gigaam *m = NULL;
  gigaam_session *s = NULL;
  if (f) CHECK_OK(gigaam_load(test_device(), f, &m));
  if (m) CHECK_OK(gigaam_session_new(m, &s));
  CHECK(!m || m->c.head == GIGAAM_CTC || m->gdec, "%s: no GPU transducer decoder", file);
  const gguf_kv *clips = ref ? gguf_find(ref, "ref.clips") : NULL;
  for (size_t i = 0; s && clips && i < clips->n; i++) clip(s, ref, clips->v.str[i].s, file);
  if (s) edges(s, file);
  gigaam_session_free(s);
  gigaam_free(m);
  gguf_close(f);
  gguf_close(ref);
}

int main(void) {
  test_device();
  model("gigaam_ctc_tiny");
  model("gigaam_rnnt_tiny");
  model("gigaam_e2e_ctc_tiny");
  model("gigaam_e2e_rnnt_tiny");
  return check_done();
}
