/* Whisper parity with transformers: two tiny random-init models
 * (tests/fixtures/whisper_tiny_{ml,en}, made by scripts/dump_whisper.py) —
 * log-mel, encoder output, the logits of the first 8 decoder steps, the
 * detected language, and for every run (language detection, a forced language
 * with translation, a prompt, a 70 s clip through several windows) the decoder
 * prefix, every window's tokens with timestamps, the segments and their times,
 * and the text; the same through the public API. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/logmel.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "models/whisper/whisper.h"
#include "steno.h"

#define MEL_TOL 1e-4f    /* absolute, on values of about [−1, 2] */
#define ENC_TOL 1e-3f    /* relative to max(1, max|want|) */
#define LOGIT_TOL 1e-3f  /* the same; the f16 KV cache moves logits by ~5e-5 of their range */

/* Largest |got − want| over n values, and the largest |want|. */
static void report(const char *what, const float *got, const float *want, size_t n) {
  float e = 0, top = 0;
  for (size_t i = 0; i < n; i++) e = fmaxf(e, fabsf(got[i] - want[i])), top = fmaxf(top, fabsf(want[i]));
  printf("%s: max |Δ| %.2e (max |want| %.2f)\n", what, e, top);
}

static const gguf_kv *key(const gguf_file *ref, const char *run, const char *what) {
  char name[128];
  snprintf(name, sizeof name, "ref.%s.%s", run, what);
  const gguf_kv *kv = gguf_find(ref, name);
  CHECK(kv != NULL, "reference key %s", name);
  return kv;
}

static const float *tensor(const gguf_file *ref, const char *name, size_t n) {
  const gguf_tensor *t = gguf_tensor_find(ref, name);
  CHECK(t && t->type == GGUF_TYPE_F32 && t->nelem == n, "reference tensor %s of %zu", name, n);
  return t && t->nelem == n ? t->data : NULL;
}

static bool same_ints(const int *got, size_t n, const gguf_kv *want) {
  if (!want || n != want->n) return false;
  for (size_t i = 0; i < n; i++)
    if (got[i] != want->v.i32[i]) return false;
  return true;
}

static void print_ints(const char *what, const int *v, size_t n) {
  fprintf(stderr, "  %s (%zu):", what, n);
  for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", v[i]);
  fputc('\n', stderr);
}

/* The speech clip, int16 / 32768 as the dump made it. */
static float *speech(const gguf_file *ref, size_t *n) {
  const gguf_kv *kv = gguf_find(ref, "ref.speech.pcm");
  CHECK(kv && kv->elem_type == GGUF_VAL_INT16, "ref.speech.pcm");
  if (!kv) return NULL;
  float *x = test_floats(kv->n);
  for (size_t i = 0; i < kv->n; i++) x[i] = kv->v.i16[i] / 32768.0f;
  *n = kv->n;
  return x;
}

/* The 70 s clip of dump_whisper.py's long_clip, rebuilt bit for bit. */
static float *long_clip(const gguf_file *ref, size_t *n) {
  const gguf_kv *kv = gguf_find(ref, "ref.speech.pcm");
  static const size_t offsets[] = {16000, 200000, 470000, 700000, 900000, 1040000};
  size_t N = 70 * 16000;
  int32_t *x = calloc(N, sizeof *x);
  uint32_t s = 20240611;
  for (size_t i = 0; i < N; i++) {
    s = (s * 1103515245u + 12345u) & 0x7fffffffu;
    x[i] = (int32_t)((s >> 16) % 401) - 200;
  }
  for (size_t k = 0; kv && k < 6; k++)
    for (size_t i = 0; i < kv->n && offsets[k] + i < N; i++) x[offsets[k] + i] += kv->v.i16[i];
  float *pcm = test_floats(N);
  for (size_t i = 0; i < N; i++) pcm[i] = (x[i] < -32768 ? -32768 : x[i] > 32767 ? 32767 : x[i]) / 32768.0f;
  free(x);
  *n = N;
  return pcm;
}

/* Log-mel of the speech clip; returns the reference's full window [3000][mels]. */
static float *check_mel(whisper *m, const gguf_file *ref, const char *model, const float *pcm,
                        size_t n) {
  uint32_t M = m->c.mels, W = m->c.win_frames;
  const gguf_kv *frames = key(ref, "speech", "mel_frames"), *tail = key(ref, "speech", "mel_tail");
  const gguf_tensor *t = gguf_tensor_find(ref, "speech.mel");
  if (!frames || !tail || !t) return NULL;
  size_t keep = t->nelem / M;
  float *mel = NULL;
  size_t got;
  CHECK_OK(whisper_features(m, pcm, n, &mel, &got));
  CHECK(got == frames->v.u32[0] && got == W, "%s: %zu mel frames, reference %u", model, got,
        frames->v.u32[0]);
  float *want = test_floats((size_t)W * M);
  memcpy(want, t->data, keep * M * sizeof *want);
  for (size_t i = keep * M; i < (size_t)W * M; i++) want[i] = tail->v.f32[0];
  if (mel && got == W) {
    char what[128];
    snprintf(what, sizeof what, "%s speech: log-mel", model);
    check_abs(what, mel, want, (size_t)W * M, MEL_TOL);
    report(what, mel, want, (size_t)W * M);
  }
  free(mel);
  return want;
}

/* Encoder output, then the logits of the first 8 steps fed the reference's own tokens. */
static void check_forward(whisper *m, const gguf_file *ref, const char *model, const float *mel) {
  uint32_t d = m->c.d, t = m->c.n_audio_ctx, V = m->c.vocab;
  char what[128];
  float *enc = test_floats((size_t)t * d);
  CHECK_OK(whisper_encode(m, mel, enc));
  const float *want = tensor(ref, "speech.encoder_out", (size_t)t * d);
  snprintf(what, sizeof what, "%s speech: encoder output", model);
  if (want) check_close(what, enc, want, (size_t)t * d, ENC_TOL);
  if (want) report(what, enc, want, (size_t)t * d);
  /* Heads one at a time (what a device with a small buffer limit gets): the same output. */
  uint32_t heads = m->att_heads;
  m->att_heads = 1;
  CHECK_OK(whisper_encode(m, mel, enc));
  snprintf(what, sizeof what, "%s speech: encoder output, one head per attention call", model);
  if (want) check_close(what, enc, want, (size_t)t * d, ENC_TOL);
  m->att_heads = heads;
  CHECK_OK(whisper_encode(m, mel, enc));
  free(enc);

  const gguf_kv *prefix = key(ref, "speech", "prefix"), *toks = key(ref, "speech", "win_tokens");
  const float *logits = tensor(ref, "speech.logits", (size_t)8 * V);
  const gguf_tensor *sot = gguf_tensor_find(ref, "speech.sot_logits");
  float *x = test_floats(V);
  if (sot) {
    CHECK_OK(whisper_feed(m, &m->c.sot, 1, 0, x));
    snprintf(what, sizeof what, "%s speech: logits at <|startoftranscript|> (language)", model);
    check_close(what, x, sot->data, V, LOGIT_TOL);
    report(what, x, sot->data, V);
  }
  if (!prefix || !toks || !logits || toks->n < 7) return free(x);
  uint32_t np = (uint32_t)prefix->n;
  CHECK_OK(whisper_feed(m, prefix->v.i32, np, 0, x));
  for (uint32_t s = 0; s < 8; s++) {
    snprintf(what, sizeof what, "%s speech: logits of step %u", model, s);
    check_close(what, x, logits + (size_t)s * V, V, LOGIT_TOL);
    if (s == 0 || s == 7) report(what, x, logits + (size_t)s * V, V);
    if (s < 7) CHECK_OK(whisper_feed(m, &toks->v.i32[s], 1, np + s, x));
  }
  free(x);
}

/* A whole run against the reference: prefix, windows, segments, text. */
static void check_run(whisper *m, const gguf_file *ref, const char *model, const char *run,
                      const float *pcm, size_t n, const steno_transcribe_params *p) {
  whisper_output o;
  CHECK_OK(whisper_run(m, pcm, n, p, &o));
  const gguf_kv *prefix = key(ref, run, "prefix"), *toks = key(ref, run, "win_tokens"),
                *ntoks = key(ref, run, "win_ntokens"), *t0 = key(ref, run, "seg_start_ms"),
                *t1 = key(ref, run, "seg_end_ms"), *sn = key(ref, run, "seg_ntokens"),
                *st = key(ref, run, "seg_tokens"), *lang;
  char name[96];
  snprintf(name, sizeof name, "ref.%s.language_token", run);
  lang = gguf_find(ref, name);
  if (lang) CHECK(o.language == (int)lang->v.u32[0], "%s %s: language token %d, reference %u", model, run, o.language, lang->v.u32[0]);
  CHECK(same_ints(o.prefix, o.n_prefix, prefix), "%s %s: decoder prefix differs", model, run);
  if (!same_ints(o.prefix, o.n_prefix, prefix)) print_ints("got prefix", o.prefix, o.n_prefix);
  /* Every window's tokens, the end of text included. */
  size_t at = 0;
  bool windows = ntoks && toks && o.n_win == ntoks->n;
  for (size_t w = 0; windows && w < o.n_win; w++) {
    windows = o.win[w].n == (size_t)ntoks->v.i32[w] && at + o.win[w].n <= toks->n &&
              !memcmp(o.win[w].tokens, toks->v.i32 + at, o.win[w].n * sizeof(int));
    if (!windows) {
      print_ints("got window", o.win[w].tokens, o.win[w].n);
      print_ints("reference", toks->v.i32 + at, at < toks->n ? (size_t)ntoks->v.i32[w] : 0);
    }
    at += o.win[w].n;
  }
  CHECK(windows, "%s %s: %zu windows (reference %zu) or their tokens differ", model, run, o.n_win,
        ntoks ? ntoks->n : 0);
  /* Segments: times in ms and the tokens each holds. */
  bool segs = t0 && t1 && sn && st && o.n_seg == t0->n;
  size_t k = 0;
  for (size_t i = 0; segs && i < o.n_seg; i++) {
    const whisper_segment *g = &o.seg[i];
    size_t len = g->end - g->first;
    segs = g->t0_ms == t0->v.i32[i] && g->t1_ms == t1->v.i32[i] && len == (size_t)sn->v.i32[i] &&
           k + len <= st->n &&
           !memcmp(o.win[g->window].tokens + g->first, st->v.i32 + k, len * sizeof(int));
    if (!segs)
      fprintf(stderr, "  segment %zu: %lld–%lld ms, %zu tokens; reference %d–%d ms, %d tokens\n", i,
              (long long)g->t0_ms, (long long)g->t1_ms, len, t0->v.i32[i], t1->v.i32[i], sn->v.i32[i]);
    k += len;
  }
  CHECK(segs, "%s %s: %zu segments (reference %zu) or their times/tokens differ", model, run,
        o.n_seg, t0 ? t0->n : 0);
  for (size_t i = 1; i < o.n_seg; i++)
    CHECK(o.seg[i].t0_ms >= o.seg[i - 1].t0_ms && o.seg[i].t1_ms >= o.seg[i].t0_ms,
          "%s %s: segment %zu goes back in time", model, run, i);
  steno_result *r = NULL;
  CHECK_OK(whisper_result(m, &o, n / 16000.0, &r));
  const gguf_kv *text = key(ref, run, "text");
  if (r && text)
    CHECK(!strcmp(steno_result_text(r), text->v.str[0].s), "%s %s: text '%s', reference '%s'",
          model, run, steno_result_text(r), text->v.str[0].s);
  printf("%s %s: %zu windows, %zu segments, %zu tokens in the first window\n", model, run, o.n_win,
         o.n_seg, o.n_win ? o.win[0].n : 0);
  steno_result_free(r);
  whisper_output_free(&o);
}

/* The prompt's tokens as transformers' get_prompt_ids gives them. */
static void check_prompt(whisper *m, const gguf_file *ref) {
  const gguf_kv *text = key(ref, "speech_prompt", "prompt"), *ids = key(ref, "speech_prompt", "prompt_ids");
  if (!text || !ids) return;
  char buf[512];
  snprintf(buf, sizeof buf, " %s", text->v.str[0].s);
  int *got = NULL;
  size_t n = 0;
  CHECK_OK(bpe_encode(&m->tok, buf, &got, &n));
  CHECK(same_ints(got, n, ids), "prompt '%s': BPE ids differ from transformers'", text->v.str[0].s);
  if (!same_ints(got, n, ids)) print_ints("got", got, n);
  free(got);
}

/* With STENO_BENCH_TOKENS=k every window holds exactly k tokens and no end of
 * text, windows follow each other whole, and the first window's tokens are the
 * greedy reference's up to its end of text (the speech reference decodes at
 * temperature 0). */
static void bench_run(whisper *m, const gguf_file *ref, const char *model, const char *run,
                      const float *pcm, size_t n, size_t k) {
  char v[16];
  snprintf(v, sizeof v, "%zu", k);
  setenv("STENO_BENCH_TOKENS", v, 1);
  steno_transcribe_params p = steno_transcribe_default_params();
  whisper_output o;
  CHECK_OK(whisper_run(m, pcm, n, &p, &o));
  const gguf_kv *toks = key(ref, run, "win_tokens");
  CHECK(o.n_win > 0, "%s bench %zu: no window", model, k);
  for (size_t w = 0; w < o.n_win; w++) {
    CHECK(o.win[w].n == k, "%s bench: window %zu has %zu tokens, not %zu", model, w, o.win[w].n, k);
    CHECK(o.win[w].seek == w * m->c.win_frames, "%s bench: window %zu at frame %u", model, w, o.win[w].seek);
    for (size_t i = 0; i < o.win[w].n; i++)
      CHECK(o.win[w].tokens[i] != m->c.eot, "%s bench %zu: end of text at %zu", model, k, i);
  }
  for (size_t i = 0; toks && o.n_win && i < o.win[0].n && i < toks->n && toks->v.i32[i] != m->c.eot; i++)
    CHECK(o.win[0].tokens[i] == toks->v.i32[i], "%s bench %zu: token %zu is %d, greedy reference %d",
          model, k, i, o.win[0].tokens[i], toks->v.i32[i]);
  whisper_output_free(&o);
  unsetenv("STENO_BENCH_TOKENS");
}

/* 5 tokens (also over the long clip's windows), and 2 past the reference's end
 * of text (which must be suppressed);
 * values outside 1..n_text_ctx/2 are refused by name. */
static void check_bench_tokens(whisper *m, const gguf_file *ref, const char *model,
                               const float *pcm, size_t n) {
  const gguf_kv *ntoks = key(ref, "speech", "win_ntokens");
  bench_run(m, ref, model, "speech", pcm, n, 5);
  if (ntoks) bench_run(m, ref, model, "speech", pcm, n, (size_t)ntoks->v.i32[0] + 2);
  if (gguf_find(ref, "ref.long.win_tokens")) {
    size_t nl;
    float *x = long_clip(ref, &nl);
    if (x) bench_run(m, ref, model, "long", x, nl, 5);
    free(x);
  }
  char big[16];
  snprintf(big, sizeof big, "%u", m->c.n_text_ctx / 2 + 1);
  const char *bad[] = {"0", "abc", "", "5x", "-3", big};
  steno_transcribe_params p = steno_transcribe_default_params();
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    whisper_output o;
    setenv("STENO_BENCH_TOKENS", bad[i], 1);
    CHECK(whisper_run(m, pcm, n, &p, &o) == STENO_ERR_INVALID, "%s bench: '%s' is accepted",
          model, bad[i]);
    CHECK(strstr(steno_last_error(), "STENO_BENCH_TOKENS") != NULL, "message names the variable: %s",
          steno_last_error());
  }
  unsetenv("STENO_BENCH_TOKENS");
}

/* The ways run.c's greedy tier runs: the host's loop, which overlaps each
 * token's log-softmax (and, recording ahead, the next token's recording)
 * with the GPU's next token, or the choice on the GPU in chunks of steps. */
typedef enum { LOOP_HOST, LOOP_AHEAD, LOOP_GPU } loop_kind;
static const char *const loop_names[] = {"", " (recording ahead)", " (greedy on the GPU)"};

static void set_loop(whisper *m, loop_kind k) {
  m->steps.ahead = k == LOOP_AHEAD;
  m->steps.gpu_greedy = k == LOOP_GPU;
}

/* The first window's tokens must be what the plain serial loop (feed, rules,
 * pick) gives at T = 0, and their log-probabilities bit for bit the same on
 * the host, within 1e-5 on the GPU (its log Σ exp in f32). */
static void check_overlap(whisper *m, const char *model, const float *pcm, size_t n, loop_kind kind) {
  steno_transcribe_params p = steno_transcribe_default_params();
  whisper_output o;
  whisper_steps was = m->steps;
  set_loop(m, kind);
  CHECK_OK(whisper_run(m, pcm, n, &p, &o));
  m->steps.ahead = was.ahead, m->steps.gpu_greedy = was.gpu_greedy;
  if (!o.n_win || o.win[0].temperature != 0) {
    CHECK(o.n_win > 0, "%s overlap: no window", model);
    return whisper_output_free(&o);
  }
  uint32_t W = m->c.win_frames, M = m->c.mels;
  float *mel = NULL, *win = test_floats((size_t)W * M);
  size_t frames = 0;
  if (m->gmel) { /* the features whisper_run used: the GPU's */
    CHECK_OK(whisper_features_gpu(m, pcm, n, &frames));
    CHECK_OK(whisper_encode_at(m, 0, NULL));
  } else {
    CHECK_OK(whisper_features(m, pcm, n, &mel, &frames));
    memset(win, 0, (size_t)W * M * sizeof *win);
    if (mel) memcpy(win, mel, (frames < W ? frames : W) * M * sizeof *win);
    CHECK_OK(whisper_encode(m, win, NULL));
  }
  wsearch rules = whisper_rules(m);
  float *x = test_floats(m->c.vocab);
  int *ids = calloc(m->c.n_text_ctx, sizeof *ids);
  double *lp = calloc(m->c.n_text_ctx, sizeof *lp);
  uint32_t np = (uint32_t)o.n_prefix;
  size_t k = 0;
  CHECK_OK(whisper_feed(m, o.prefix, np, 0, x));
  for (;;) {
    wsearch_process(&rules, ids, k, x);
    ids[k] = wsearch_pick(x, (int)m->c.vocab, 0, NULL, &lp[k]);
    k++;
    if (ids[k - 1] == m->c.eot || np + k >= m->c.n_text_ctx) break;
    CHECK_OK(whisper_feed(m, &ids[k - 1], 1, np + (uint32_t)k - 1, x));
  }
  bool same = k == o.win[0].n && !memcmp(ids, o.win[0].tokens, k * sizeof *ids);
  double worst = 0;
  for (size_t i = 0; same && i < k; i++) {
    double d = fabs(lp[i] - o.win[0].logprob[i]);
    worst = d > worst ? d : worst;
    same = kind == LOOP_GPU ? d <= 1e-5 * (1 + fabs(lp[i])) : lp[i] == o.win[0].logprob[i];
  }
  CHECK(same,
        "%s overlap%s: the first window's %zu tokens or log-probabilities differ from the "
        "serial loop's %zu", model, loop_names[kind], o.win[0].n, k);
  if (same)
    printf("%s overlap%s: %zu tokens equal to the serial loop's, log-probabilities within %.1e\n",
           model, loop_names[kind], k, worst);
  free(mel), free(win), free(x), free(ids), free(lp);
  whisper_output_free(&o);
}

/* The step API refuses what it cannot do, and a step left unfinished is
 * waited for by the next feed (after which there is nothing to finish). */
static void check_steps(whisper *m, const char *model) {
  float *x = test_floats(m->c.vocab);
  uint32_t ctx = m->c.n_text_ctx;
  CHECK(whisper_step_finish(m, x) == STENO_ERR_INVALID, "%s: finish before start", model);
  CHECK(whisper_step_start(m, -1, 1) == STENO_ERR_INVALID, "%s: token -1", model);
  CHECK(whisper_step_start(m, (int)m->c.vocab, 1) == STENO_ERR_INVALID, "%s: token = vocab", model);
  CHECK(whisper_step_start(m, 0, ctx) == STENO_ERR_INVALID, "%s: position = n_text_ctx", model);
  CHECK(whisper_step_prepare(m, ctx) == STENO_ERR_INVALID, "%s: prepare at n_text_ctx", model);
  CHECK_OK(whisper_feed(m, &m->c.sot, 1, 0, x));
  CHECK_OK(whisper_step_prepare(m, 1));
  CHECK_OK(whisper_step_start(m, m->c.sot, 1));
  CHECK_OK(whisper_feed(m, &m->c.sot, 1, 0, x));
  CHECK(whisper_step_finish(m, x) == STENO_ERR_INVALID, "%s: finish after a feed drained the step", model);
  free(x);
}

/* Reference run `run` (its parameters by name) against its fixture. */
static void ref_run(whisper *m, const gguf_file *ref, const char *file, const char *run,
                    const float *pcm, size_t n) {
  steno_transcribe_params p = steno_transcribe_default_params();
  if (!strcmp(run, "speech_de_translate")) p.language = "de", p.translate = 1;
  if (!strcmp(run, "speech_prompt")) p.prompt = key(ref, run, "prompt")->v.str[0].s;
  if (!strcmp(run, "speech_prompt")) check_prompt(m, ref);
  if (!strcmp(run, "long")) {
    size_t nl;
    float *x = long_clip(ref, &nl);
    check_run(m, ref, file, run, x, nl, &p);
    free(x);
  } else {
    check_run(m, ref, file, run, pcm, n, &p);
  }
}

/* The GPU's log-mel (m->gmel) of the speech clip against the reference's window. */
static void check_mel_gpu(whisper *m, const gguf_file *ref, const char *model, const float *pcm,
                          size_t n) {
  uint32_t M = m->c.mels, W = m->c.win_frames;
  const gguf_kv *tail = key(ref, "speech", "mel_tail");
  const gguf_tensor *t = gguf_tensor_find(ref, "speech.mel");
  if (!tail || !t) return;
  size_t keep = t->nelem / M, frames = 0;
  CHECK_OK(whisper_features_gpu(m, pcm, n, &frames));
  CHECK(frames == W, "%s: %zu mel frames on the GPU, reference %u", model, frames, W);
  float *want = test_floats((size_t)W * M), *got = test_floats((size_t)W * M);
  memcpy(want, t->data, keep * M * sizeof *want);
  for (size_t i = keep * M; i < (size_t)W * M; i++) want[i] = tail->v.f32[0];
  if (frames == W) CHECK_OK(gpu_download(m->a.mel_all, 0, got, (size_t)W * M * sizeof *got));
  char what[128];
  snprintf(what, sizeof what, "%s speech: log-mel on the GPU", model);
  check_abs(what, got, want, (size_t)W * M, MEL_TOL);
  report(what, got, want, (size_t)W * M);
  free(want), free(got);
}

/* A model's checks on dev; gpu_features: loaded with STENO_FEATURES=gpu, its
 * log-mel, the overlap's first window and the reference runs (host loop) from
 * the GPU's features. */
static void model(const char *file, bool gpu_features, gpu_device *dev) {
  gguf_file *f, *ref;
  fixture_open(file, &f, &ref);
  whisper *w = NULL, *m = NULL; /* the model, and a session of it that runs the stages */
  if (gpu_features) setenv("STENO_FEATURES", "gpu", 1);
  if (f) CHECK_OK(whisper_load(dev, f, &w));
  unsetenv("STENO_FEATURES");
  if (w) CHECK_OK(whisper_session_new(w, &m));
  if (gpu_features && m) CHECK(m->gmel, "%s: STENO_FEATURES=gpu: no GPU features", file);
  size_t n = 0;
  float *pcm = m && ref ? speech(ref, &n) : NULL;
  if (pcm && gpu_features) {
    if (m->gmel) check_mel_gpu(m, ref, file, pcm, n);
    check_overlap(m, file, pcm, n, LOOP_HOST);
    const gguf_kv *runs = gguf_find(ref, "ref.runs");
    set_loop(m, LOOP_HOST);
    for (size_t i = 0; runs && i < runs->n; i++) ref_run(m, ref, file, runs->v.str[i].s, pcm, n);
    printf("%s: the reference runs from the GPU's features\n", file);
  } else if (pcm) {
    float *mel = check_mel(m, ref, file, pcm, n);
    if (mel) check_forward(m, ref, file, mel);
    free(mel);
    for (loop_kind k = LOOP_HOST; k <= LOOP_GPU; k++) check_overlap(m, file, pcm, n, k);
    check_steps(m, file);
  }
  /* The reference runs (and the fixed token counts) with the greedy tier on
   * the host, then on the GPU. */
  const gguf_kv *runs = ref ? gguf_find(ref, "ref.runs") : NULL;
  whisper_steps was = m ? m->steps : (whisper_steps){0};
  for (int gpu = 0; pcm && !gpu_features && gpu < 2; gpu++) {
    set_loop(m, gpu ? LOOP_GPU : LOOP_HOST);
    printf("%s: the greedy tier %s\n", file, gpu ? "on the GPU" : "on the host");
    check_bench_tokens(m, ref, file, pcm, n);
    for (size_t i = 0; runs && i < runs->n; i++) ref_run(m, ref, file, runs->v.str[i].s, pcm, n);
  }
  if (m) m->steps.ahead = was.ahead, m->steps.gpu_greedy = was.gpu_greedy;
  free(pcm);
  whisper_session_free(m);
  whisper_free(w);
  gguf_close(f);
  gguf_close(ref);
}

/* Through the public API: language and translation change the task tokens and
 * the transcript exactly as transformers' language="de", task="translate". */
static void public_api(void) {
  char path[512], refpath[512];
  const char *dir = getenv("STENO_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/tests/fixtures/whisper_tiny_ml.gguf", dir ? dir : ".");
  snprintf(refpath, sizeof refpath, "%s/tests/fixtures/whisper_tiny_ml.ref.gguf", dir ? dir : ".");
  gguf_file *ref = NULL;
  CHECK_OK(gguf_open(&ref, refpath));
  steno_model *sm = NULL;
  CHECK_OK(steno_model_load(path, test_params(), &sm));
  size_t n = 0;
  float *pcm = ref ? speech(ref, &n) : NULL;
  if (sm && pcm) {
    CHECK(!strcmp(steno_model_architecture(sm), "whisper"), "architecture");
    steno_transcribe_params p = steno_transcribe_default_params();
    p.language = "de", p.translate = 1;
    steno_result *r = NULL;
    CHECK_OK(steno_transcribe(sm, pcm, n, &p, &r));
    const gguf_kv *text = key(ref, "speech_de_translate", "text");
    char *want = NULL; /* the reference as steno.h promises a result's text: printable */
    if (r && text) CHECK_OK(utf8_printable(text->v.str[0].s, text->v.str[0].len, &want));
    if (r && want) {
      CHECK(!strcmp(steno_result_text(r), want), "API text '%s', reference '%s'", steno_result_text(r), want);
      CHECK(steno_result_segment_count(r) > 1, "API: %zu segments", steno_result_segment_count(r));
      steno_timings t = steno_result_timings(r);
      CHECK(t.features_ms > 0 && t.encoder_ms > 0 && t.decoder_ms > 0, "API timings %g %g %g ms",
            t.features_ms, t.encoder_ms, t.decoder_ms);
      for (size_t i = 0; i < steno_result_token_count(r); i++)
        CHECK(steno_result_token(r, i).p > 0 && steno_result_token(r, i).p <= 1, "token %zu p", i);
    }
    free(want);
    steno_result_free(r);
    p.language = "xx";
    CHECK(steno_transcribe(sm, pcm, n, &p, &r) == STENO_ERR_UNSUPPORTED && !r,
          "an unknown language is refused");
    CHECK(strstr(steno_last_error(), "xx") != NULL, "message names the language: %s", steno_last_error());
  }
  free(pcm);
  steno_model_free(sm);
  gguf_close(ref);
}

int main(void) {
  test_device();
  model("whisper_tiny_ml", false, test_device());
  model("whisper_tiny_en", false, test_device());
  public_api();
  if (gpu_wmel_offered(test_device(), 400)) {
    model("whisper_tiny_ml", true, test_device());
    model("whisper_tiny_en", true, test_device());
    /* A discrete GPU's path: the samples copied to the device in the features'
     * submission. */
    gpu_device *staged = test_staged_device();
    if (staged) model("whisper_tiny_en", true, staged);
    gpu_close(staged);
  } else {
    printf("the device cannot make Whisper's features (no doubles in shaders)\n");
  }
  return check_done();
}
