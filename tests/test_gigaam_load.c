/* GigaAM's loader on files the tests rewrite from the tiny fixtures: a
 * faithful copy decodes as the original; F16 and Q8_0 copies load and stay
 * close; a missing key or tensor, a key of the wrong type, a misshaped
 * tensor, an unknown head_kind, attention other than rotary, and absurd
 * sizes are errors that name the culprit, never a crash. */
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "load_check.h"
#include "models/gigaam/gigaam.h"
#include "steno.h"

/* What to change while copying. */
typedef struct {
  const char *drop_key;   /* key left out */
  const char *str_key;    /* STRING key rewritten to str_val */
  const char *str_val;
  const char *u32_key;    /* UINT32 key rewritten to u32_val */
  uint32_t u32_val;
  const char *retype_key; /* UINT32 key written as INT32 */
  const char *drop;       /* tensor left out */
  const char *misshape;   /* tensor written with its first dim one smaller */
  uint32_t linear_type;   /* 2-D encoder and joint weights converted to this */
} change;

static bool edit_key(gguf_writer *w, const gguf_kv *kv, const void *ctx) {
  const change *c = ctx;
  const char *k = kv->key;
  if (c->drop_key && !strcmp(k, c->drop_key)) return true;
  if (c->str_key && !strcmp(k, c->str_key)) return gw_str(w, k, c->str_val), true;
  if (c->u32_key && !strcmp(k, c->u32_key)) return gw_u32(w, k, c->u32_val), true;
  if (c->retype_key && !strcmp(k, c->retype_key)) return gw_i32(w, k, (int32_t)kv->v.u32[0]), true;
  return false;
}

static bool is_linear(const gguf_tensor *t) {
  return t->n_dims == 2 && t->ne[0] % 32 == 0 && strstr(t->name, ".weight") &&
         (strstr(t->name, "enc.blocks.") || strstr(t->name, "joint."));
}

/* The changes as the tests' writer takes them. */
static gw_edit edit(const change *c) {
  return (gw_edit){.key = edit_key, .ctx = c, .drop = c->drop, .misshape = c->misshape,
                   .linear_type = c->linear_type == GGUF_TYPE_F32 ? 0 : c->linear_type,
                   .is_linear = is_linear};
}

static int load(const gguf_file *f, bool *made) {
  gigaam *m = NULL;
  int st = gigaam_load(test_device(), f, &m);
  *made = m != NULL;
  gigaam_free(m);
  return st;
}

/* Loading fails with status `want_st` (0: any error) and a message containing `want`. */
static void load_fails(const gguf_file *src, const change *c, int want_st, const char *want) {
  lc_load_fails(src, edit(c), load, want_st, want);
}

/* Loads the rewritten file and runs the reference clip; returns the encoder output. */
static float *run_copy(const gguf_file *src, const change *c, const float *pcm, size_t n,
                       dec_tokens *toks, uint32_t *t) {
  uint8_t *bytes;
  gguf_file *f = lc_rewrite(src, edit(c), &bytes);
  gigaam *m = NULL;
  gigaam_session *s = NULL;
  float *enc = NULL, *head = NULL, *mel = NULL;
  size_t frames = 0;
  if (f) CHECK_OK(gigaam_load(test_device(), f, &m));
  if (m) CHECK_OK(gigaam_session_new(m, &s));
  if (s) CHECK_OK(gigaam_features(m, pcm, n, &mel, &frames));
  if (mel) CHECK_OK(gigaam_forward(s, mel, (uint32_t)frames, &enc, &head, t));
  if (head) CHECK_OK(gigaam_decode(m, head, *t, toks));
  free(mel);
  free(head);
  gigaam_session_free(s);
  gigaam_free(m);
  gguf_close(f);
  free(bytes);
  return enc;
}

/* A faithful copy decodes as the reference; F16, BF16 and Q8_0 copies stay close. */
static void copies(const gguf_file *src, const gguf_file *ref, uint32_t d) {
  const gguf_tensor *pcm = gguf_tensor_find(ref, "speech.pcm");
  const gguf_kv *ids = gguf_find(ref, "ref.speech.tokens");
  CHECK(pcm && ids, "reference clip");
  if (!pcm || !ids) return;
  change same = {.linear_type = GGUF_TYPE_F32};
  dec_tokens toks = {0};
  uint32_t t = 0;
  float *enc = run_copy(src, &same, pcm->data, pcm->nelem, &toks, &t);
  bool equal = toks.n == ids->n;
  for (size_t i = 0; equal && i < toks.n; i++) equal = toks.v[i].id == ids->v.i32[i];
  CHECK(equal, "copy: %zu tokens, reference %zu", toks.n, ids->n);
  dec_free(&toks);
  uint32_t types[] = {GGUF_TYPE_F16, GGUF_TYPE_BF16, GGUF_TYPE_Q8_0};
  float tol[] = {2e-2f, 1e-1f, 1e-1f};
  const char *tname[] = {"F16", "BF16", "Q8_0"};
  for (int i = 0; i < 3 && enc; i++) {
    change q = {.linear_type = types[i]};
    uint32_t tq = 0;
    float *e = run_copy(src, &q, pcm->data, pcm->nelem, &toks, &tq);
    char what[64];
    snprintf(what, sizeof what, "%s copy: encoder output vs F32", tname[i]);
    if (e && tq == t) check_close(what, e, enc, (size_t)t * d, tol[i]);
    CHECK(tq == t, "%s copy: %u frames", tname[i], tq);
    free(e);
    dec_free(&toks);
  }
  free(enc);
}

#define K "stt.gigaam."

static void bad_files(const gguf_file *ctc, const gguf_file *rnnt) {
  change c1 = {.drop_key = K "encoder.d_ff"};
  load_fails(ctc, &c1, STENO_ERR_FORMAT, K "encoder.d_ff");
  change c2 = {.str_key = K "head_kind", .str_val = "tdt"};
  load_fails(ctc, &c2, STENO_ERR_FORMAT, "head_kind 'tdt'");
  change c3 = {.str_key = K "encoder.self_attention_model", .str_val = "rel_pos"};
  load_fails(ctc, &c3, STENO_ERR_UNSUPPORTED, "rel_pos");
  change c4 = {.misshape = "enc.blocks.1.attn.linear_k.weight"};
  load_fails(ctc, &c4, STENO_ERR_FORMAT, "enc.blocks.1.attn.linear_k.weight");
  change c5 = {.misshape = "frontend.mel_filterbank"};
  load_fails(ctc, &c5, STENO_ERR_FORMAT, "frontend.mel_filterbank");
  change c6 = {.retype_key = K "encoder.n_heads"};
  load_fails(ctc, &c6, STENO_ERR_FORMAT, K "encoder.n_heads");
  change c7 = {.drop = "enc.blocks.0.conv.ln.weight"};
  load_fails(ctc, &c7, STENO_ERR_FORMAT, "enc.blocks.0.conv.ln.weight");
  change c8 = {.u32_key = K "encoder.n_heads", .u32_val = 0};
  load_fails(ctc, &c8, STENO_ERR_FORMAT, "0 heads");
  change c9 = {.u32_key = K "encoder.d_model", .u32_val = 4000000000u};
  load_fails(ctc, &c9, STENO_ERR_FORMAT, "d 4000000000");
  change c10 = {.u32_key = K "head.num_classes", .u32_val = 99};
  load_fails(ctc, &c10, STENO_ERR_FORMAT, "head.ctc");
  change c11 = {.str_key = K "encoder.conv_norm_type", .str_val = "batch_norm"};
  load_fails(ctc, &c11, STENO_ERR_UNSUPPORTED, "batch_norm");
  change c12 = {.u32_key = "stt.frontend.n_fft", .u32_val = 512};
  load_fails(ctc, &c12, STENO_ERR_UNSUPPORTED, "n_fft 512");
  change c13 = {.str_key = "tokenizer.ggml.model", .str_val = "wordpiece"};
  load_fails(ctc, &c13, STENO_ERR_FORMAT, "wordpiece");
  change r1 = {.drop = "pred.lstm.0.Wh"};
  load_fails(rnnt, &r1, STENO_ERR_FORMAT, "pred.lstm.0.Wh");
  change r2 = {.u32_key = K "joint.num_classes", .u32_val = 7};
  load_fails(rnnt, &r2, STENO_ERR_FORMAT, "7 classes");
  change r3 = {.u32_key = K "predictor.n_layers", .u32_val = 2};
  load_fails(rnnt, &r3, STENO_ERR_UNSUPPORTED, "2 predictor layers");
  change r4 = {.misshape = "joint.enc.weight"};
  load_fails(rnnt, &r4, STENO_ERR_FORMAT, "joint.enc.weight");
  change r5 = {.drop_key = "tokenizer.ggml.tokens"};
  load_fails(rnnt, &r5, STENO_ERR_FORMAT, "tokenizer.ggml.tokens");
}

int main(void) {
  test_device();
  gguf_file *ctc, *rnnt, *ref_ctc, *ref_rnnt;
  fixture_open("gigaam_ctc_tiny", &ctc, &ref_ctc);
  fixture_open("gigaam_e2e_rnnt_tiny", &rnnt, &ref_rnnt);
  if (ctc && ref_ctc) copies(ctc, ref_ctc, 48);
  if (rnnt && ref_rnnt) copies(rnnt, ref_rnnt, 40);
  if (ctc && rnnt) bad_files(ctc, rnnt);
  gguf_close(ctc);
  gguf_close(rnnt);
  gguf_close(ref_ctc);
  gguf_close(ref_rnnt);
  return check_done();
}
