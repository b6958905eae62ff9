/* Moonshine and Moonshine Streaming parity with transformers on tiny
 * random-init models (tests/fixtures/moonshine{,_streaming}_tiny, made by
 * scripts/dump_moonshine.py): the stem's output, the encoder output (and
 * Streaming's adapter output), the first-step logits, the greedy tokens
 * (ending in </s> on the speech clip, cut at the cap on the noise clip: the
 * positions for Moonshine, the duration budget for Streaming) and the text,
 * through the stages and the public API; loader errors on files the test
 * rewrites from the fixtures. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "load_check.h"
#include "models/moonshine/moonshine.h"
#include "steno.h"

#define STEM_TOL 1e-4f  /* relative to max(1, max|want|): f32 convs and GroupNorm */
#define ENC_TOL 1e-3f
#define LOGIT_TOL 1e-3f /* the f16 K/V caches move logits by ~1e-4 of their range */

/* Prints the largest |got − want| relative to max(1, max|want|). */
static void report(const char *what, const float *got, const float *want, size_t n) {
  float e = 0, top = 1;
  for (size_t i = 0; i < n; i++) e = fmaxf(e, fabsf(got[i] - want[i])), top = fmaxf(top, fabsf(want[i]));
  printf("%s: max |Δ| %.2e of %.2f\n", what, e, top);
}

static float *clip(const gguf_file *ref, const char *run, size_t *n) {
  char key[64];
  snprintf(key, sizeof key, "ref.%s.pcm", run);
  const gguf_kv *kv = gguf_find(ref, key);
  CHECK(kv && kv->elem_type == GGUF_VAL_INT16, "%s", key);
  if (!kv) return NULL;
  float *x = test_floats(kv->n);
  for (size_t i = 0; i < kv->n; i++) x[i] = kv->v.i16[i] / 32768.0f;
  *n = kv->n;
  return x;
}

static const float *tensor(const gguf_file *ref, const char *run, const char *what, size_t n) {
  char name[64];
  snprintf(name, sizeof name, "%s.%s", run, what);
  const gguf_tensor *t = gguf_tensor_find(ref, name);
  CHECK(t && t->type == GGUF_TYPE_F32 && t->nelem == n, "reference tensor %s of %zu", name, n);
  return t && t->nelem == n ? t->data : NULL;
}

/* The reference tokens without </s>, and whether it ended there. */
static const gguf_kv *ref_tokens(const gguf_file *ref, const char *run, size_t *n, bool *eos) {
  char key[64];
  snprintf(key, sizeof key, "ref.%s.tokens", run);
  const gguf_kv *kv = gguf_find(ref, key);
  CHECK(kv && kv->elem_type == GGUF_VAL_INT32, "%s", key);
  if (!kv) return NULL;
  *eos = kv->n && kv->v.i32[kv->n - 1] == 2;
  *n = kv->n - *eos;
  return kv;
}

static void check_run(moonshine *s, const gguf_file *ref, const char *run) {
  size_t n;
  float *pcm = clip(ref, run, &n);
  if (!pcm) return;
  uint32_t t = moonshine_frames(s, n), d = s->c.enc_d, V = s->c.vocab;
  float *stem = test_floats((size_t)t * d), *enc = test_floats((size_t)t * d), *lg = test_floats(V);
  float *ad = s->c.streaming ? test_floats((size_t)t * s->c.d) : NULL;
  char what[96];
  CHECK_OK(moonshine_encode(s, pcm, n, stem, enc, ad));
  const float *want = tensor(ref, run, "stem", (size_t)t * d);
  snprintf(what, sizeof what, "%s: stem", run);
  if (want) check_close(what, stem, want, (size_t)t * d, STEM_TOL), report(what, stem, want, (size_t)t * d);
  want = tensor(ref, run, "encoder_out", (size_t)t * d);
  snprintf(what, sizeof what, "%s: encoder output", run);
  if (want) check_close(what, enc, want, (size_t)t * d, ENC_TOL), report(what, enc, want, (size_t)t * d);
  if (ad) {
    want = tensor(ref, run, "adapter", (size_t)t * s->c.d);
    snprintf(what, sizeof what, "%s: adapter output", run);
    if (want) check_close(what, ad, want, (size_t)t * s->c.d, ENC_TOL), report(what, ad, want, (size_t)t * s->c.d);
  }
  CHECK_OK(moonshine_feed(s, s->c.bos, 0, lg));
  want = tensor(ref, run, "logits0", V);
  snprintf(what, sizeof what, "%s: first logits", run);
  if (want) check_close(what, lg, want, V, LOGIT_TOL), report(what, lg, want, V);
  size_t nt = 0;
  bool eos = false, truncated = true;
  const gguf_kv *kv = ref_tokens(ref, run, &nt, &eos);
  dec_tokens toks = {0};
  CHECK_OK(moonshine_decode(s, NULL, &toks, &truncated));
  bool same = kv && toks.n == nt;
  for (size_t i = 0; same && i < nt; i++) same = toks.v[i].id == kv->v.i32[i];
  CHECK(same, "%s: %zu tokens differ from the reference's %zu", run, toks.n, nt);
  CHECK(truncated == !eos, "%s: truncated %d, reference ended with </s>: %d", run, truncated, eos);
  printf("%s: %u frames, %zu tokens%s\n", run, t, toks.n, truncated ? " (cap)" : "");
  dec_free(&toks);
  char key[64];
  snprintf(key, sizeof key, "ref.%s.text", run);
  const gguf_kv *text = gguf_find(ref, key);
  steno_result *r = NULL;
  CHECK_OK(moonshine_transcribe(s, pcm, n, NULL, &r));
  if (r && text)
    CHECK(!strcmp(steno_result_text(r), text->v.str[0].s), "%s: text '%s', reference '%s'", run,
          steno_result_text(r), text->v.str[0].s);
  if (r) {
    steno_segment sg = steno_result_segment(r, 0);
    CHECK(steno_result_segment_count(r) == 1 && sg.start_ms == 0 &&
              llabs(sg.end_ms - (int64_t)(n / 16)) <= 1,
          "%s: one segment over the clip (%zu, %lld-%lld ms)", run, steno_result_segment_count(r),
          (long long)sg.start_ms, (long long)sg.end_ms);
  }
  steno_result_free(r);
  free(stem), free(enc), free(lg), free(pcm), free(ad);
}

/* What a stream hook relies on (spec §4.6): Streaming's encoder frames over a
 * prefix of the audio equal the whole clip's, up to the frames whose right
 * windows reach past the prefix (Σ max(0, R − 1) of them). */
static void check_growing(moonshine *s, const gguf_file *ref) {
  size_t n;
  float *pcm = clip(ref, "speech", &n);
  if (!pcm) return;
  uint32_t T = moonshine_frames(s, n), d = s->c.enc_d, lag = 0;
  for (uint32_t i = 0; i < s->c.enc_layers; i++) lag += s->c.window[2 * i + 1] ? s->c.window[2 * i + 1] - 1 : 0;
  float *all = test_floats((size_t)T * d), *part = test_floats((size_t)T * d);
  CHECK_OK(moonshine_encode(s, pcm, n, NULL, all, NULL));
  for (size_t k = 1; k <= 3; k++) {
    size_t m = n * k / 4 / 320 * 320 + (k == 2 ? 80 : 0); /* a frame past a 20 ms boundary too */
    uint32_t t = moonshine_frames(s, m);
    CHECK_OK(moonshine_encode(s, pcm, m, NULL, part, NULL));
    char what[96];
    snprintf(what, sizeof what, "growing input: %u of %u frames", t - lag, T);
    check_close(what, part, all, (size_t)(t - lag) * d, 1e-5f);
    bool differs = false; /* and the lagging frames do see the future */
    for (size_t i = (size_t)(t - lag) * d; i < (size_t)t * d; i++) differs |= part[i] != all[i];
    CHECK(!lag || differs, "%s: the last %u frames ignore what follows", what, lag);
  }
  free(all), free(part), free(pcm);
}

/* The speech run through the public API (its energy gate skips the steady noise). */
static void check_api(const char *name, const gguf_file *ref) {
  char path[512], file[96];
  snprintf(file, sizeof file, "%s.gguf", name);
  fixture_path(path, sizeof path, file);
  steno_model *m = NULL;
  CHECK_OK(steno_model_load(path, test_params(), &m));
  static const char *const runs[] = {"speech"};
  for (int i = 0; m && i < 1; i++) {
    size_t n;
    float *pcm = clip(ref, runs[i], &n);
    char key[64];
    snprintf(key, sizeof key, "ref.%s.text", runs[i]);
    const gguf_kv *text = gguf_find(ref, key);
    steno_result *r = NULL;
    steno_transcribe_params p = steno_transcribe_default_params();
    CHECK_OK(pcm ? steno_transcribe(m, pcm, n, &p, &r) : -1);
    if (r && text)
      CHECK(!strcmp(steno_result_text(r), text->v.str[0].s), "%s: API text '%s', reference '%s'",
            runs[i], steno_result_text(r), text->v.str[0].s);
    if (r) {
      CHECK(steno_result_segment_count(r) >= 1, "%s: no segment", runs[i]);
      steno_segment sg = steno_result_segment(r, 0);
      CHECK(sg.start_ms == 0, "%s: the first segment starts at the clip's start", runs[i]);
    }
    steno_result_free(r);
    free(pcm);
  }
  steno_model_free(m);
}

/* ---- loader errors and quantized copies ---- */

typedef struct {
  const char *drop, *misshape, *retype_key, *str_key, *str_value, *u32_key;
  uint32_t u32_value;
  const char *drop_key;
  uint32_t linear_type;
} change;

static bool edit_key(gguf_writer *w, const gguf_kv *kv, const void *ctx) {
  const change *c = ctx;
  const char *k = kv->key;
  if (c->retype_key && !strcmp(k, c->retype_key)) return gw_i32(w, k, (int32_t)kv->v.u32[0]), true;
  if (c->str_key && !strcmp(k, c->str_key)) return gw_str(w, k, c->str_value), true;
  if (c->u32_key && !strcmp(k, c->u32_key)) return gw_u32(w, k, c->u32_value), true;
  return c->drop_key && !strcmp(k, c->drop_key);
}

/* The blocks' 2-D weights (the fixtures' widths of 40 and 48 allow F16, not Q8_0). */
static bool is_linear(const gguf_tensor *t) {
  return t->n_dims == 2 && strstr(t->name, ".blocks.") && strstr(t->name, ".weight") &&
         !strstr(t->name, "norm");
}

/* The changes as the tests' writer takes them. */
static gw_edit edit(const change *c) {
  return (gw_edit){.key = edit_key, .ctx = c, .drop = c->drop, .misshape = c->misshape,
                   .linear_type = c->linear_type, .is_linear = is_linear};
}

static int load(const gguf_file *f, bool *made) {
  moonshine *m = NULL;
  int st = moonshine_load(test_device(), f, &m);
  *made = m != NULL;
  moonshine_free(m);
  return st;
}

/* Loading fails with a message that contains `want`. */
static void load_fails(const gguf_file *src, const change *c, const char *want) {
  lc_load_fails(src, edit(c), load, 0, want);
}

static void loader_errors(const gguf_file *src) {
  change c[] = {{.drop = "dec.blocks.1.cross_attn.k.weight"},
                {.drop = "enc.conv.norm.bias"},
                {.misshape = "enc.blocks.0.ffn.fc1.weight"},
                {.misshape = "dec.blocks.0.self_attn.q.weight"},
                {.retype_key = "stt.moonshine.encoder.n_heads"},
                {.str_key = "stt.moonshine.decoder.activation", .str_value = "gelu"},
                {.str_key = "stt.frontend.type", .str_value = "mel"},
                {.u32_key = "stt.moonshine.decoder.vocab_size", .u32_value = 32768},
                {.u32_key = "stt.moonshine.eos_token_id", .u32_value = 100000},
                {.u32_key = "stt.moonshine.encoder.n_heads", .u32_value = 3},
                {.u32_key = "stt.moonshine.decoder.max_position_embeddings", .u32_value = 0}};
  const char *want[] = {"dec.blocks.1.cross_attn.k.weight", "enc.conv.norm.bias",
                        "enc.blocks.0.ffn.fc1.weight", "dec.blocks.0.self_attn.q.weight",
                        "stt.moonshine.encoder.n_heads", "stt.moonshine.decoder.activation",
                        "stt.frontend.type", "tokens", "stt.moonshine.eos_token_id",
                        "heads", "shapes"};
  for (size_t i = 0; i < sizeof c / sizeof *c; i++) load_fails(src, &c[i], want[i]);
}

#define MSK "stt.moonshine_streaming."

static void streaming_loader_errors(const gguf_file *src) {
  change c[] = {{.drop = "dec.lm_head.weight"},
                {.drop = "enc.embedder.comp.log_k"},
                {.drop = "adapter.proj.weight"},
                {.misshape = "adapter.pos_emb.weight"},
                {.misshape = "enc.embedder.conv1.weight"},
                {.misshape = "enc.blocks.1.attn.q.weight"},
                {.u32_key = "stt.moonshine_streaming.encoder.n_layers", .u32_value = 2},
                {.u32_key = "stt.moonshine_streaming.encoder.frame_len", .u32_value = 0},
                {.str_key = "stt.moonshine_streaming.encoder.activation", .str_value = "relu"},
                {.retype_key = "stt.moonshine_streaming.decoder.head_dim"},
                /* fuzz_load: 2^28 + 2 heads of 16 wrapped to 32 dims and loaded */
                {.u32_key = MSK "decoder.n_heads", .u32_value = (1u << 28) + 2,
                 .drop_key = MSK "decoder.n_kv_heads"},
                {.u32_key = MSK "encoder.n_heads", .u32_value = (1u << 28) + 2,
                 .drop_key = MSK "encoder.n_kv_heads"}};
  const char *want[] = {"dec.lm_head.weight", "enc.embedder.comp.log_k", "adapter.proj.weight",
                        "adapter.pos_emb.weight", "enc.embedder.conv1.weight",
                        "enc.blocks.1.attn.q.weight", "sliding_windows", "frames of 0 samples",
                        "stt.moonshine_streaming.encoder.activation",
                        "stt.moonshine_streaming.decoder.head_dim", "268435458 heads",
                        "268435458 heads"};
  for (size_t i = 0; i < sizeof c / sizeof *c; i++) load_fails(src, &c[i], want[i]);
}

/* An F16 copy of the blocks' weights (the q/k rows reordered as f16 bytes): its
 * encoder output and first logits stay near the F32 model's. */
static void f16_copy(const gguf_file *src, const gguf_file *ref) {
  size_t n;
  float *pcm = clip(ref, "speech", &n);
  float *out[2][2] = {{NULL, NULL}, {NULL, NULL}};
  size_t ne = 0, nv = 0;
  for (int copy = 0; copy < 2 && pcm; copy++) {
    change c = {.linear_type = copy ? GGUF_TYPE_F16 : 0};
    uint8_t *bytes;
    gguf_file *f = lc_rewrite(src, edit(&c), &bytes);
    moonshine *m = NULL, *s = NULL;
    if (f) CHECK_OK(moonshine_load(test_device(), f, &m));
    if (m) CHECK_OK(moonshine_session_new(m, &s));
    if (s) {
      ne = (size_t)moonshine_frames(s, n) * s->c.enc_d, nv = s->c.vocab;
      out[copy][0] = test_floats(ne), out[copy][1] = test_floats(nv);
      CHECK_OK(moonshine_encode(s, pcm, n, NULL, out[copy][0], NULL));
      CHECK_OK(moonshine_feed(s, s->c.bos, 0, out[copy][1]));
    }
    moonshine_session_free(s);
    moonshine_free(m);
    gguf_close(f);
    free(bytes);
  }
  if (out[0][0] && out[1][0]) {
    check_close("F16 copy: encoder output vs F32", out[1][0], out[0][0], ne, 1e-2f);
    check_close("F16 copy: first logits vs F32", out[1][1], out[0][1], nv, 1e-2f);
    report("F16 copy: encoder output vs F32", out[1][0], out[0][0], ne);
    report("F16 copy: first logits vs F32", out[1][1], out[0][1], nv);
  }
  for (int i = 0; i < 4; i++) free(out[i / 2][i % 2]);
  free(pcm);
}

/* One fixture: the stages on both clips (the first again, in grown buffers),
 * bad calls, the public API, the loader's errors. */
static void check_model(const char *name, void (*errors)(const gguf_file *)) {
  gguf_file *model = NULL, *ref = NULL;
  fixture_open(name, &model, &ref);
  moonshine *m = NULL, *s = NULL;
  if (model) CHECK_OK(moonshine_load(test_device(), model, &m));
  if (m) CHECK_OK(moonshine_session_new(m, &s));
  if (s && ref) {
    printf("%s:\n", name);
    check_run(s, ref, "speech");
    check_run(s, ref, "noise");
    check_run(s, ref, "speech");
    if (s->c.streaming) check_growing(s, ref);
    float one[1000] = {0};
    CHECK(moonshine_encode(s, one, s->c.streaming ? 0 : 500, NULL, NULL, NULL) == STENO_ERR_INVALID,
          "%s: too few samples encoded", name);
    CHECK(moonshine_feed(s, 1, s->c.max_pos, NULL) == STENO_ERR_INVALID, "feed past the cap");
  }
  moonshine_session_free(s);
  moonshine_free(m);
  if (ref) check_api(name, ref);
  if (model && ref) f16_copy(model, ref);
  if (model) errors(model);
  gguf_close(model);
  gguf_close(ref);
}

int main(void) {
  test_device();
  check_model("moonshine_tiny", loader_errors);
  check_model("moonshine_streaming_tiny", streaming_loader_errors);
  return check_done();
}
