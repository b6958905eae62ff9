/* Whisper's loader and options on files the test writes itself from the
 * fixture: F16, BF16 and Q8_0 copies load and stay close to the F32 model; a
 * missing or misshaped tensor, a key of the wrong type, an unknown frontend,
 * a vocabulary that does not match and special tokens out of range are errors
 * that name the culprit; options the model cannot honour (translation or a
 * language on an English-only model, a prompt holding a special token) are
 * refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "load_check.h"
#include "models/whisper/whisper.h"
#include "steno.h"

/* What to change while copying. */
typedef struct {
  const char *drop;        /* tensor left out */
  const char *misshape;    /* tensor written with its first dim one smaller */
  const char *retype_key;  /* UINT32 key written as INT32 */
  const char *str_key;     /* STRING key given str_value */
  const char *str_value;
  const char *u32_key;     /* UINT32 key given u32_value */
  uint32_t u32_value;
  const char *tensor_type_name; /* this tensor converted to tensor_type */
  uint32_t tensor_type;
  uint32_t linear_type;    /* the transformer blocks' 2-D weights converted to this */
} change;

/* The keys a change rewrites. */
static bool edit_key(gguf_writer *w, const gguf_kv *kv, const void *ctx) {
  const change *c = ctx;
  const char *k = kv->key;
  if (c->retype_key && !strcmp(k, c->retype_key)) return gw_i32(w, k, (int32_t)kv->v.u32[0]), true;
  if (c->str_key && !strcmp(k, c->str_key)) return gw_str(w, k, c->str_value), true;
  if (c->u32_key && !strcmp(k, c->u32_key)) return gw_u32(w, k, c->u32_value), true;
  return false;
}

static bool is_linear(const gguf_tensor *t) {
  return t->n_dims == 2 && t->ne[0] % 32 == 0 && strstr(t->name, ".blocks.") &&
         strstr(t->name, ".weight") && !strstr(t->name, "norm");
}

/* The changes as the tests' writer takes them. */
static gw_edit edit(const change *c) {
  return (gw_edit){.key = edit_key, .ctx = c, .drop = c->drop, .misshape = c->misshape,
                   .retype = c->tensor_type_name, .retype_to = c->tensor_type,
                   .linear_type = c->linear_type, .is_linear = is_linear};
}

static int load(const gguf_file *f, bool *made) {
  whisper *m = NULL;
  int st = whisper_load(test_device(), f, &m);
  *made = m != NULL;
  whisper_free(m);
  return st;
}

/* Loading fails with a message that contains `want`. */
static void load_fails(const gguf_file *src, const change *c, const char *want) {
  lc_load_fails(src, edit(c), load, 0, want);
}

/* Encoder output and first-step logits of a copy on the reference's window. */
static void run_copy(const gguf_file *src, const change *c, const float *mel, const gguf_kv *prefix,
                     float **enc, float **logits) {
  uint8_t *bytes;
  gguf_file *f = lc_rewrite(src, edit(c), &bytes);
  whisper *w = NULL, *m = NULL; /* the model, and a session of it */
  if (f) CHECK_OK(whisper_load(test_device(), f, &w));
  if (w) CHECK_OK(whisper_session_new(w, &m));
  if (m) {
    *enc = test_floats((size_t)m->c.n_audio_ctx * m->c.d);
    *logits = test_floats(m->c.vocab);
    CHECK_OK(whisper_encode(m, mel, *enc));
    CHECK_OK(whisper_feed(m, prefix->v.i32, (uint32_t)prefix->n, 0, *logits));
  }
  whisper_session_free(m);
  whisper_free(w);
  gguf_close(f);
  free(bytes);
}

/* The model's own log-mel of the reference clip (one window). */
static float *window_mel(const gguf_file *src, const gguf_file *ref) {
  whisper *m = NULL;
  CHECK_OK(whisper_load(test_device(), src, &m));
  const gguf_kv *pcm = gguf_find(ref, "ref.speech.pcm");
  float *mel = NULL;
  size_t frames;
  if (m && pcm) {
    float *x = test_floats(pcm->n);
    for (size_t i = 0; i < pcm->n; i++) x[i] = pcm->v.i16[i] / 32768.0f;
    CHECK_OK(whisper_features(m, x, pcm->n, &mel, &frames));
    CHECK(frames == m->c.win_frames, "one window");
    free(x);
  }
  whisper_free(m);
  return mel;
}

static void quantized_copies(const gguf_file *src, const gguf_file *ref) {
  const gguf_kv *prefix = gguf_find(ref, "ref.speech.prefix");
  float *mel = window_mel(src, ref), *enc = NULL, *logits = NULL;
  if (!mel || !prefix) return free(mel);
  change same = {0};
  run_copy(src, &same, mel, prefix, &enc, &logits);
  uint32_t types[] = {GGUF_TYPE_F16, GGUF_TYPE_BF16, GGUF_TYPE_Q8_0};
  const char *names[] = {"F16", "BF16", "Q8_0"};
  float tol[] = {1e-2f, 5e-2f, 1e-1f};
  size_t ne = 0, nv = 0;
  const gguf_tensor *e = gguf_tensor_find(ref, "speech.encoder_out");
  if (e) ne = e->nelem;
  nv = gguf_tensor_find(ref, "speech.logits") ? gguf_tensor_find(ref, "speech.logits")->nelem / 8 : 0;
  if (enc && e) check_close("F32 copy: encoder output", enc, e->data, ne, 1e-3f);
  for (int i = 0; i < 3 && enc && logits; i++) {
    change q = {.linear_type = types[i]};
    float *e2 = NULL, *l2 = NULL;
    run_copy(src, &q, mel, prefix, &e2, &l2);
    char what[96];
    snprintf(what, sizeof what, "%s copy: encoder output vs F32", names[i]);
    if (e2) check_close(what, e2, enc, ne, tol[i]);
    snprintf(what, sizeof what, "%s copy: first logits vs F32", names[i]);
    if (l2) check_close(what, l2, logits, nv, tol[i]);
    free(e2);
    free(l2);
  }
  free(enc);
  free(logits);
  free(mel);
}

static void loader_errors(const gguf_file *src) {
  change c1 = {.drop = "dec.blocks.1.cross_attn.k.weight"};
  load_fails(src, &c1, "dec.blocks.1.cross_attn.k.weight");
  change c2 = {.misshape = "enc.blocks.0.ffn.fc1.weight"};
  load_fails(src, &c2, "enc.blocks.0.ffn.fc1.weight");
  change c3 = {.retype_key = "stt.whisper.encoder.n_heads"};
  load_fails(src, &c3, "stt.whisper.encoder.n_heads");
  change c4 = {.str_key = "stt.frontend.normalize", .str_value = "per_feature"};
  load_fails(src, &c4, "stt.frontend.normalize");
  change c5 = {.u32_key = "stt.whisper.decoder.vocab_size", .u32_value = 51865};
  load_fails(src, &c5, "vocabulary");
  const gguf_kv *v = gguf_find(src, "stt.whisper.decoder.vocab_size");
  change c6 = {.u32_key = "stt.whisper.no_timestamps_token_id", .u32_value = v ? v->v.u32[0] : 0};
  load_fails(src, &c6, "special tokens");
  change c7 = {.drop = "frontend.mel_filterbank"};
  load_fails(src, &c7, "frontend.mel_filterbank");
  change c8 = {.tensor_type_name = "enc.conv.0.weight", .tensor_type = GGUF_TYPE_BF16};
  load_fails(src, &c8, "enc.conv.0.weight");
  change c9 = {.u32_key = "stt.frontend.nb_max_frames", .u32_value = 3001};
  load_fails(src, &c9, "frames per window");
}

/* Options the model cannot honour, through the public API, on the speech clip
 * (the API skips quiet pieces before a model sees them). */
static void option_errors(const char *dir, const gguf_file *ref) {
  const gguf_kv *kv = gguf_find(ref, "ref.speech.pcm");
  if (!kv) return;
  float *pcm = test_floats(kv->n);
  for (size_t i = 0; i < kv->n; i++) pcm[i] = kv->v.i16[i] / 32768.0f;
  char path[512];
  snprintf(path, sizeof path, "%s/tests/fixtures/whisper_tiny_en.gguf", dir);
  steno_model *m = NULL;
  CHECK_OK(steno_model_load(path, test_params(), &m));
  steno_result *r = NULL;
  steno_transcribe_params p = steno_transcribe_default_params();
  p.translate = 1;
  CHECK(m && steno_transcribe(m, pcm, kv->n, &p, &r) == STENO_ERR_UNSUPPORTED && !r,
        "translation on an English-only model is refused");
  p = steno_transcribe_default_params();
  p.language = "de";
  CHECK(m && steno_transcribe(m, pcm, kv->n, &p, &r) == STENO_ERR_UNSUPPORTED && !r,
        "German on an English-only model is refused");
  p.language = "en";
  CHECK_OK(m ? steno_transcribe(m, pcm, kv->n, &p, &r) : -1);
  steno_result_free(r);
  r = NULL;
  steno_model_free(m);
  snprintf(path, sizeof path, "%s/tests/fixtures/whisper_tiny_ml.gguf", dir);
  CHECK_OK(steno_model_load(path, test_params(), &m));
  p = steno_transcribe_default_params();
  p.prompt = "hello <|en|> there";
  CHECK(m && steno_transcribe(m, pcm, kv->n, &p, &r) == STENO_ERR_INVALID && !r,
        "a prompt with a special token is refused");
  CHECK(strstr(steno_last_error(), "<|en|>") != NULL, "message names the token: %s", steno_last_error());
  steno_model_free(m);
  free(pcm);
}

int main(void) {
  test_device();
  const char *dir = getenv("STENO_SOURCE_DIR");
  if (!dir) dir = ".";
  char path[512], refpath[512];
  snprintf(path, sizeof path, "%s/tests/fixtures/whisper_tiny_ml.gguf", dir);
  snprintf(refpath, sizeof refpath, "%s/tests/fixtures/whisper_tiny_ml.ref.gguf", dir);
  gguf_file *src = NULL, *ref = NULL;
  CHECK_OK(gguf_open(&src, path));
  CHECK_OK(gguf_open(&ref, refpath));
  if (src && ref) {
    quantized_copies(src, ref);
    loader_errors(src);
  }
  if (ref) option_errors(dir, ref);
  gguf_close(src);
  gguf_close(ref);
  return check_done();
}
