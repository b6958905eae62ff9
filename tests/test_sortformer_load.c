/* Sortformer's loader on files the test rewrites from the tiny fixture: a
 * faithful copy loads and predicts as the original, an F16 copy stays close;
 * a missing or misshaped tensor, a key of the wrong type, a pre-LN
 * transformer, another activation and absurd stream sizes are errors that
 * name the culprit (never a crash). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "load_check.h"
#include "models/sortformer/sortformer.h"
#include "steno.h"

typedef struct {
  const char *drop, *misshape;
  const char *retype_key;          /* UINT32 key written as INT32 */
  const char *u32_key;             /* UINT32 key given u32_value */
  uint32_t u32_value;
  const char *u32_key2;            /* a second one, given u32_value2 */
  uint32_t u32_value2;
  bool pre_ln;                     /* transformer.pre_ln written true */
  const char *activation;          /* transformer.activation replaced */
  uint32_t linear_type;
} change;

static bool edit_key(gguf_writer *w, const gguf_kv *kv, const void *ctx) {
  const change *c = ctx;
  const char *k = kv->key;
  if (c->retype_key && !strcmp(k, c->retype_key)) return gw_i32(w, k, (int32_t)kv->v.u32[0]), true;
  if (c->u32_key && !strcmp(k, c->u32_key)) return gw_u32(w, k, c->u32_value), true;
  if (c->u32_key2 && !strcmp(k, c->u32_key2)) return gw_u32(w, k, c->u32_value2), true;
  if (c->pre_ln && !strcmp(k, "stt.sortformer.transformer.pre_ln")) return gw_bool(w, k, true), true;
  if (c->activation && !strcmp(k, "stt.sortformer.transformer.activation"))
    return gw_str(w, k, c->activation), true;
  return false;
}

static bool is_linear(const gguf_tensor *t) {
  return t->n_dims == 2 && strstr(t->name, ".weight") &&
         (strstr(t->name, "enc.blocks.") || strstr(t->name, "tf.") || strstr(t->name, "diar."));
}

/* The changes as the tests' writer takes them. */
static gw_edit edit(const change *c) {
  return (gw_edit){.key = edit_key, .ctx = c, .drop = c->drop, .misshape = c->misshape,
                   .linear_type = c->linear_type, .is_linear = is_linear};
}

static int load(const gguf_file *f, bool *made) {
  sortformer *m = NULL;
  int st = sortformer_load(test_device(), f, &m);
  *made = m != NULL;
  sortformer_free(m);
  return st;
}

/* Loading fails with a message that contains `want`. */
static void load_fails(const gguf_file *src, const change *c, const char *want) {
  lc_load_fails(src, edit(c), load, 0, want);
}

/* The rewritten model's predictions over the first 200 ms frames of the clip. */
static float *predict(const gguf_file *src, const change *c, const float *pcm, size_t n,
                      uint32_t *t) {
  uint8_t *bytes;
  gguf_file *f = lc_rewrite(src, edit(c), &bytes);
  sortformer *m = NULL;
  sortformer_session *s = NULL;
  float *mel = NULL, *p = NULL;
  size_t frames;
  if (f) CHECK_OK(sortformer_load(test_device(), f, &m));
  if (m) CHECK_OK(sortformer_session_new(m, &s));
  if (s) CHECK_OK(sortformer_features(m, pcm, n, &mel, &frames));
  if (mel) CHECK_OK(sortformer_stream_run(s, mel, (uint32_t)frames, NULL, &p, t));
  free(mel);
  sortformer_session_free(s);
  sortformer_free(m);
  gguf_close(f);
  free(bytes);
  return p;
}

int main(void) {
  gguf_file *src = NULL, *ref = NULL;
  fixture_open("sortformer_tiny", &src, &ref);
  if (!src || !ref) return check_done();
  const gguf_tensor *pcm = gguf_tensor_find(ref, "pcm"), *want = gguf_tensor_find(ref, "preds");
  CHECK(pcm && want, "reference pcm and preds");
  if (!pcm || !want) return check_done();
  uint32_t t = 0, t16 = 0;
  float *p = predict(src, &(change){0}, pcm->data, pcm->nelem, &t);
  if (p) CHECK(t * 4 == want->nelem, "%u frames", t);
  if (p && t * 4 == want->nelem) check_abs("copy's preds", p, want->data, want->nelem, 1e-4f);
  /* The loader's F16 path through the portable kernels: on a GPU the tensor-core GEMM
   * rounds activations to f16 too (test_gemm checks it), which can flip a threshold
   * decision of this random model's speaker cache, after which the predictions part
   * ways (0.84 on the H200). */
  gpu_set_fast(test_device(), false);
  float *p16 = predict(src, &(change){.linear_type = GGUF_TYPE_F16}, pcm->data, pcm->nelem, &t16);
  gpu_set_fast(test_device(), true);
  if (p && p16 && t16 == t) {
    float worst = 0;
    for (size_t i = 0; i < want->nelem; i++) worst = fmaxf(worst, fabsf(p16[i] - p[i]));
    printf("F16 copy: preds max |Δ| %.2e\n", worst);
    CHECK(worst < 0.05f, "F16 copy's preds off by %.2e", worst);
  }
  free(p), free(p16);
  load_fails(src, &(change){.drop = "diar.single_spk_head.weight"}, "diar.single_spk_head.weight");
  load_fails(src, &(change){.drop = "enc.blocks.1.conv.bn.running_var"}, "enc.blocks.1.conv.bn.running_var");
  load_fails(src, &(change){.drop = "tf.blocks.1.norm_2.bias"}, "tf.blocks.1.norm_2.bias");
  load_fails(src, &(change){.misshape = "diar.fc1.weight"}, "diar.fc1.weight");
  load_fails(src, &(change){.misshape = "tf.blocks.0.ff.in.weight"}, "tf.blocks.0.ff.in.weight");
  load_fails(src, &(change){.misshape = "diar.encoder_proj.weight"}, "diar.encoder_proj.weight");
  load_fails(src, &(change){.retype_key = "stt.sortformer.stream.chunk_len"}, "chunk_len");
  load_fails(src, &(change){.retype_key = "stt.sortformer.max_speakers"}, "max_speakers");
  load_fails(src, &(change){.pre_ln = true}, "pre-LN");
  load_fails(src, &(change){.activation = "gelu"}, "gelu");
  load_fails(src, &(change){.u32_key = "stt.sortformer.stream.spkcache_len", .u32_value = 5}, "cache 5");
  load_fails(src, &(change){.u32_key = "stt.sortformer.stream.chunk_len", .u32_value = 0}, "chunk 0");
  load_fails(src, &(change){.u32_key = "stt.sortformer.encoder.subsampling_factor", .u32_value = 4},
             "subsampling factor 4");
  load_fails(src, &(change){.u32_key = "stt.sortformer.encoder.n_heads", .u32_value = 5}, "5 heads");
  load_fails(src, &(change){.u32_key = "stt.sortformer.transformer.n_heads", .u32_value = 0}, "0 heads");
  load_fails(src, &(change){.u32_key = "stt.sortformer.max_speakers", .u32_value = 100000},
             "100000 speakers");
  load_fails(src, &(change){.u32_key = "stt.frontend.num_mels", .u32_value = 64}, "feat_in");
  /* fuzz_load: hop 2^29 · 8 wrapped to a frame hop of 0 and loaded */
  load_fails(src, &(change){.u32_key = "stt.sortformer.frame_hop", .u32_value = 0,
                            .u32_key2 = "stt.frontend.hop_length", .u32_value2 = 1u << 29},
             "frame hop 0");
  gguf_close(src);
  gguf_close(ref);
  return check_done();
}
