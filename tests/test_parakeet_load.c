/* Parakeet's loader on files the tests write themselves in the published
 * layout: a faithful copy loads and decodes as the original; F16 and Q8_0
 * copies load and stay close; a missing tensor, a misshaped tensor, a key of
 * the wrong type and an unknown architecture are errors that name the culprit. */
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "load_check.h"
#include "models/parakeet/parakeet.h"
#include "steno.h"

/* What to change while copying. */
typedef struct {
  const char *drop;       /* tensor left out */
  const char *misshape;   /* tensor written with its first dim one smaller */
  const char *retype_key; /* UINT32 key written as INT32 */
  const char *arch;       /* general.architecture */
  uint32_t linear_type;   /* 2-D weights with ne[0] % 32 == 0 converted to this */
} change;

/* The keys a change rewrites. */
static bool edit_key(gguf_writer *w, const gguf_kv *kv, const void *ctx) {
  const change *c = ctx;
  const char *k = kv->key;
  if (c->arch && !strcmp(k, "general.architecture")) return gw_str(w, k, c->arch), true;
  if (c->retype_key && !strcmp(k, c->retype_key)) return gw_i32(w, k, (int32_t)kv->v.u32[0]), true;
  return false;
}

static bool is_linear(const gguf_tensor *t) {
  /* The layers the published files quantize: 2-D weights of the encoder and joint. */
  return t->n_dims == 2 && t->ne[0] % 32 == 0 && strstr(t->name, ".weight") &&
         (strstr(t->name, "enc.blocks.") || strstr(t->name, "joint.") || strstr(t->name, "out.weight"));
}

/* The changes as the tests' writer takes them. */
static gw_edit edit(const change *c) {
  return (gw_edit){.key = edit_key, .ctx = c, .drop = c->drop, .misshape = c->misshape,
                   .linear_type = c->linear_type == GGUF_TYPE_F32 ? 0 : c->linear_type,
                   .is_linear = is_linear};
}

static int load(const gguf_file *f, bool *made) {
  parakeet *m = NULL;
  int st = parakeet_load(test_device(), f, &m);
  *made = m != NULL;
  parakeet_free(m);
  return st;
}

/* Loading fails with a message that contains `want`. */
static void load_fails(const gguf_file *src, const change *c, const char *want) {
  lc_load_fails(src, edit(c), load, 0, want);
}

/* Loads the rewritten file and decodes the reference clip; returns the encoder output. */
static float *run_copy(const gguf_file *src, const change *c, const float *pcm, size_t n,
                       dec_tokens *toks, uint32_t *t) {
  uint8_t *bytes;
  gguf_file *f = lc_rewrite(src, edit(c), &bytes);
  parakeet *m = NULL;
  float *enc = NULL, *head = NULL, *mel = NULL;
  size_t frames, valid;
  parakeet_session *s = NULL;
  if (f) CHECK_OK(parakeet_load(test_device(), f, &m));
  if (m) CHECK_OK(parakeet_session_new(m, &s));
  if (s) CHECK_OK(parakeet_features(m, pcm, n, &mel, &frames, &valid));
  if (mel) CHECK_OK(parakeet_forward(s, mel, (uint32_t)valid, &enc, &head, t));
  if (head) CHECK_OK(parakeet_decode(m, head, *t, toks));
  free(mel);
  free(head);
  parakeet_session_free(s);
  parakeet_free(m);
  gguf_close(f);
  free(bytes);
  return enc;
}

int main(void) {
  test_device();
  gguf_file *src, *ref;
  fixture_open("parakeet_tdt_tiny", &src, &ref);
  const gguf_tensor *pcm = ref ? gguf_tensor_find(ref, "speech.pcm") : NULL;
  const gguf_kv *ids = ref ? gguf_find(ref, "ref.speech.tokens") : NULL;
  CHECK(pcm && ids, "reference clip");
  if (!src || !pcm || !ids) return check_done();

  /* A faithful copy decodes exactly as the reference. */
  change same = {.linear_type = GGUF_TYPE_F32};
  dec_tokens toks = {0};
  uint32_t t = 0;
  float *enc = run_copy(src, &same, pcm->data, pcm->nelem, &toks, &t);
  bool equal = toks.n == ids->n;
  for (size_t i = 0; equal && i < toks.n; i++) equal = toks.v[i].id == ids->v.i32[i];
  CHECK(equal, "copy: %zu tokens, reference %zu", toks.n, ids->n);
  dec_free(&toks);

  /* F16 and Q8_0 linear layers (as the published quantized files): the same
   * loader path, an encoder output close to the F32 one. */
  uint32_t types[] = {GGUF_TYPE_F16, GGUF_TYPE_BF16, GGUF_TYPE_Q8_0};
  float tol[] = {2e-2f, 1e-1f, 1e-1f};
  const char *tname[] = {"F16", "BF16", "Q8_0"};
  for (int i = 0; i < 3 && enc; i++) {
    change q = {.linear_type = types[i]};
    uint32_t tq = 0;
    float *e = run_copy(src, &q, pcm->data, pcm->nelem, &toks, &tq);
    char what[64];
    snprintf(what, sizeof what, "%s copy: encoder output vs F32", tname[i]);
    if (e && tq == t) check_close(what, e, enc, (size_t)t * 64, tol[i]);
    CHECK(tq == t, "%s copy: %u frames", tname[i], tq);
    free(e);
    dec_free(&toks);
  }
  free(enc);

  change missing = {.drop = "enc.blocks.1.attn.linear_k.weight"};
  load_fails(src, &missing, "enc.blocks.1.attn.linear_k.weight");
  change misshaped = {.misshape = "enc.blocks.0.ff1.linear1.weight"};
  load_fails(src, &misshaped, "enc.blocks.0.ff1.linear1.weight");
  change bad_type = {.retype_key = "stt.parakeet.encoder.n_heads"};
  load_fails(src, &bad_type, "stt.parakeet.encoder.n_heads");
  change no_joint = {.drop = "joint.out.bias"};
  load_fails(src, &no_joint, "joint.out.bias");
  change no_vocab = {.drop = "pred.lstm.1.Wh"};
  load_fails(src, &no_vocab, "pred.lstm.1.Wh");
  gguf_close(src);
  gguf_close(ref);
  return check_done();
}
