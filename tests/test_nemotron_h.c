/* Nemotron-H (the decoder of Nemotron 3.5 Transcribe) against transformers on
 * tests/fixtures/nemotron_h_tiny (every block kind; scripts/dump_nemotron_h.py):
 * the residual stream after each layer and the logits of every prompt row;
 * greedy generation (the prompt in one pass, then one token at a time against
 * the Mamba-2 states and the K/V cache): each step's logits and the tokens,
 * exactly; the prompt given as embeddings (how audio is spliced in) gives the
 * same logits; BF16 / F16 / Q8_0 copies load and stay near; a missing or
 * misshaped tensor, a missing key, an unknown layer type and absurd settings
 * are errors naming the culprit. And the decoder of the Nemotron 3.5
 * Transcribe fixture (towers' converter) against its reference's tokens. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "load_check.h"
#include "models/nemotron_h/nemotron_h.h"
#include "steno.h"

#define KEYS "nemotron_h."
#define TENSORS "lm."
#define F16_TOL 1e-3f /* with the K/V cache in f16 */
#define CTX 256       /* session contexts: the prompt and the generated tokens fit */
#define MAX_PROMPT 200
/* Relative to the largest value: f32 throughout, other sum orders (worst seen 1.5e-6). */
#define TOL 1e-5f

static const float *ref_tensor(const gguf_file *ref, const char *name, size_t n) {
  const gguf_tensor *t = gguf_tensor_find(ref, name);
  CHECK(t && t->type == GGUF_TYPE_F32 && t->nelem == n, "reference tensor %s of %zu", name, n);
  return t && t->type == GGUF_TYPE_F32 && t->nelem == n ? t->data : NULL;
}

static const gguf_kv *ref_ints(const gguf_file *ref, const char *key) {
  const gguf_kv *kv = NULL;
  CHECK_OK(gguf_get_arr(ref, key, GGUF_VAL_INT32, &kv));
  return kv;
}

/* Each layer's output but the last (transformers gives the final norm's there). */
static void hidden_states(nemotron_h *m, const gguf_file *ref, const int *ids, uint32_t n) {
  float *h = test_floats((size_t)n * m->d.d);
  for (uint32_t l = 1; l < m->layers; l++) {
    nemotron_h_session *s;
    CHECK_OK(nemotron_h_session_new(m, CTX, &s));
    CHECK_OK(nemotron_h_hidden(s, ids, n, l, h));
    char name[64];
    snprintf(name, sizeof name, "prefill.hidden.%u", l - 1);
    const float *want = ref_tensor(ref, name, (size_t)n * m->d.d);
    if (want) check_close(name, h, want, (size_t)n * m->d.d, TOL);
    nemotron_h_session_free(s);
  }
  free(h);
}

/* Prompt logits of every row, from ids and from the same rows as embeddings. */
static void prefill(nemotron_h *m, const gguf_file *f, const gguf_file *ref, const int *ids,
                    uint32_t n) {
  size_t V = m->vocab, d = m->d.d;
  float *logits = test_floats(n * V), *emb = test_floats(n * d), *table = test_floats(V * d);
  const float *want = ref_tensor(ref, "prefill.logits", n * V);
  nemotron_h_session *s;
  CHECK_OK(nemotron_h_session_new(m, CTX, &s));
  CHECK_OK(nemotron_h_feed(s, ids, NULL, n, logits, true));
  if (want) check_close("prefill logits", logits, want, n * V, TOL);
  const gguf_tensor *t = gguf_tensor_find(f, TENSORS "embed_tokens.weight");
  CHECK_OK(gguf_tensor_to_f32(t, table));
  for (uint32_t i = 0; i < n; i++) memcpy(emb + i * d, table + (size_t)ids[i] * d, d * sizeof *emb);
  int mixed[MAX_PROMPT];
  for (uint32_t i = 0; i < n; i++) mixed[i] = i % 3 ? ids[i] : -1; /* some rows as embeddings */
  nemotron_h_reset(s); /* bad rows are refused before anything runs */
  int bad[2] = {ids[0], (int)V};
  CHECK(nemotron_h_feed(s, bad, NULL, 2, NULL, false) == STENO_ERR_INVALID, "token %zu ran", V);
  CHECK(nemotron_h_feed(s, NULL, NULL, 2, NULL, false) == STENO_ERR_INVALID, "no rows ran");
  CHECK(s->pos == 0, "refused rows moved the position to %u", s->pos);
  float *again = test_floats(n * V);
  CHECK_OK(nemotron_h_feed(s, mixed, emb, n, again, true));
  if (want) check_close("prefill logits, a third of the rows as embeddings", again, want, n * V, TOL);
  nemotron_h_session_free(s);
  /* The prompt in two calls (1 row, then the rest: the activations grow) gives the same. */
  CHECK_OK(nemotron_h_session_new(m, CTX, &s));
  CHECK_OK(nemotron_h_feed(s, ids, NULL, 1, NULL, false));
  CHECK_OK(nemotron_h_feed(s, ids + 1, NULL, n - 1, again, true));
  if (want) check_close("prefill logits, the prompt in two calls", again, want + V, (n - 1) * V, TOL);
  nemotron_h_session_free(s);
  free(logits), free(emb), free(table), free(again);
}

static int stop_now(void *user) { return user == NULL; }

/* generate: the prompt, then the reference's tokens one at a time; with an f32
 * K/V cache, and an f16 one (its rounding moves the logits by ~1e-3 here). */
static void generate(nemotron_h *m, const gguf_file *ref, const int *ids, uint32_t n, bool f16) {
  const gguf_kv *tokens = ref_ints(ref, "ref.tokens");
  if (!tokens) return;
  uint32_t steps = (uint32_t)tokens->n, V = m->vocab;
  float *logits = test_floats((size_t)steps * V);
  const float *want = ref_tensor(ref, "generate.logits", (size_t)steps * V);
  nemotron_h_session *s;
  CHECK_OK(nemotron_h_session_new_kv(m, CTX, f16, &s));
  CHECK_OK(nemotron_h_feed(s, ids, NULL, n, logits, false));
  for (uint32_t i = 1; i < steps; i++)
    CHECK_OK(nemotron_h_feed(s, &tokens->v.i32[i - 1], NULL, 1, logits + (size_t)i * V, false));
  if (want)
    check_close(f16 ? "generate: each step's logits, f16 cache" : "generate: each step's logits",
                logits, want, (size_t)steps * V, f16 ? F16_TOL : TOL);
  nemotron_h_reset(s);
  int out[64];
  uint32_t got = 0;
  CHECK_OK(nemotron_h_greedy(s, ids, NULL, n, steps, NULL, 0, out, &got));
  CHECK(got == steps, "greedy made %u tokens, the reference %u", got, steps);
  for (uint32_t i = 0; i < got && i < steps; i++)
    CHECK(out[i] == tokens->v.i32[i], "token %u: %d, the reference %d", i, out[i], tokens->v.i32[i]);
  nemotron_h_reset(s); /* a stop token ends it, kept */
  CHECK_OK(nemotron_h_greedy(s, ids, NULL, n, steps, &tokens->v.i32[3], 1, out, &got));
  CHECK(got == 4 && out[3] == tokens->v.i32[3], "greedy with a stop token made %u tokens", got);
  nemotron_h_reset(s); /* the abort callback is asked before each token after the first */
  s->abort = stop_now;
  CHECK(nemotron_h_greedy(s, ids, NULL, n, steps, NULL, 0, out, &got) == STENO_ERR_ABORTED &&
            got == 1, "an aborted greedy run returned after %u tokens", got);
  nemotron_h_session_free(s);
  free(logits);
}

/* ---- loader ---- */

typedef struct {
  const char *key, *str;   /* a STRING key given str (or the layer list's first entry) */
  const char *u32_key;     /* a UINT32 key given u32 */
  uint32_t u32;
  const char *drop_key;    /* a key left out */
} change;

static bool edit_key(gguf_writer *w, const gguf_kv *kv, const void *ctx) {
  const change *c = ctx;
  if (c->drop_key && !strcmp(kv->key, c->drop_key)) return true;
  if (c->u32_key && !strcmp(kv->key, c->u32_key)) return gw_u32(w, kv->key, c->u32), true;
  if (c->key && !strcmp(kv->key, c->key) && kv->type == GGUF_VAL_ARRAY) {
    const char *v[64];
    for (size_t i = 0; i < kv->n && i < 64; i++) v[i] = i ? kv->v.str[i].s : c->str;
    return gw_arr_str(w, kv->key, v, kv->n < 64 ? kv->n : 64), true;
  }
  if (c->key && !strcmp(kv->key, c->key)) return gw_str(w, kv->key, c->str), true;
  return false;
}

static uint32_t linear_to;
static bool is_linear(const gguf_tensor *t) {
  bool weight = strstr(t->name, "proj") && t->n_dims >= 2 && strstr(t->name, "conv1d") == NULL;
  return weight && (linear_to != GGUF_TYPE_Q8_0 || t->ne[0] % 32 == 0);
}

static nemotron_h *load_copy(const gguf_file *src, const gw_edit *e, uint8_t **bytes,
                             gguf_file **f) {
  *f = lc_rewrite(src, *e, bytes);
  nemotron_h *m = NULL;
  if (*f) nemotron_h_load(test_device(), *f, KEYS, TENSORS, &m);
  return m;
}

static int load(const gguf_file *f, bool *made) {
  nemotron_h *m = NULL;
  int st = nemotron_h_load(test_device(), f, KEYS, TENSORS, &m);
  *made = m != NULL;
  nemotron_h_free(m);
  return st;
}

static void load_fails(const gguf_file *src, const change *c, const char *drop,
                       const char *misshape, const char *want) {
  gw_edit e = {.key = edit_key, .ctx = c, .drop = drop, .misshape = misshape};
  lc_load_fails(src, e, load, 0, want);
}

static void loader_errors(const gguf_file *src) {
  change none = {0};
  load_fails(src, &none, TENSORS "layers.0.mixer.A_log", NULL, "layers.0.mixer.A_log");
  load_fails(src, &none, "lm_head.weight", NULL, "lm_head.weight");
  load_fails(src, &none, NULL, TENSORS "layers.3.mixer.experts.up_proj.weight", "experts.up_proj");
  load_fails(src, &none, NULL, TENSORS "layers.1.mixer.k_proj.weight", "k_proj");
  load_fails(src, &none, NULL, TENSORS "layers.4.mixer.conv1d.bias", "conv1d.bias");
  load_fails(src, &(change){.drop_key = KEYS "ssm_state_size"}, NULL, NULL, "ssm_state_size");
  load_fails(src, &(change){.key = KEYS "layers_block_type", .str = "sliding_attention"}, NULL,
             NULL, "sliding_attention");
  load_fails(src, &(change){.key = KEYS "mlp_hidden_act", .str = "gelu"}, NULL, NULL, "gelu");
  load_fails(src, &(change){.u32_key = KEYS "n_group", .u32 = 3}, NULL, NULL, "groups 3");
  load_fails(src, &(change){.u32_key = KEYS "num_key_value_heads", .u32 = 3}, NULL, NULL,
             "over 3");
  load_fails(src, &(change){.u32_key = KEYS "conv_kernel", .u32 = 0}, NULL, NULL, "kernel 0");
  load_fails(src, &(change){.u32_key = KEYS "eos_token_id", .u32 = 99999}, NULL, NULL,
             "eos_token_id");
}

/* Copies with the projections in another type load; the residual after the
 * layers before the first MoE stays near the reference (past it, a rounding can
 * change an expert choice and so a row's output entirely: the router is not
 * continuous), and the logits are finite. */
static void other_types(const gguf_file *src, const gguf_file *ref, const int *ids, uint32_t n) {
  const uint32_t types[] = {GGUF_TYPE_BF16, GGUF_TYPE_F16, GGUF_TYPE_Q8_0};
  const float tol[] = {0.01f, 0.002f, 0.03f}; /* worst seen: 0.0035, 0.00045, 0.014 */
  for (int i = 0; i < 3; i++) {
    linear_to = types[i];
    gw_edit e = {.linear_type = types[i], .is_linear = is_linear};
    uint8_t *bytes;
    gguf_file *f;
    nemotron_h *m = load_copy(src, &e, &bytes, &f);
    CHECK(m, "a %s copy does not load: %s", gguf_type_name(types[i]), steno_last_error());
    nemotron_h_session *s = NULL;
    if (m) CHECK_OK(nemotron_h_session_new(m, CTX, &s));
    uint32_t moe = 0;
    while (m && moe < m->layers && m->kind[moe] != NH_MOE) moe++;
    if (s && moe > 0 && moe < m->layers) {
      float *h = test_floats((size_t)n * m->d.d), *logits = test_floats((size_t)n * m->vocab);
      CHECK_OK(nemotron_h_hidden(s, ids, n, moe, h));
      char name[64], what[96];
      snprintf(name, sizeof name, "prefill.hidden.%u", moe - 1);
      snprintf(what, sizeof what, "residual before the first MoE, %s projections",
               gguf_type_name(types[i]));
      const float *want = ref_tensor(ref, name, (size_t)n * m->d.d);
      if (want) check_close(what, h, want, (size_t)n * m->d.d, tol[i]);
      nemotron_h_reset(s);
      CHECK_OK(nemotron_h_feed(s, ids, NULL, n, logits, true));
      size_t bad = 0;
      for (size_t j = 0; j < (size_t)n * m->vocab; j++) bad += !isfinite(logits[j]);
      CHECK(bad == 0, "%zu logits of the %s copy are not finite", bad, gguf_type_name(types[i]));
      free(h), free(logits);
    }
    nemotron_h_session_free(s);
    nemotron_h_free(m);
    gguf_close(f);
    free(bytes);
  }
}

/* The decoder of tests/fixtures/nemotron_transcribe_tiny (towers' converter and
 * reference, keys under nemotron3_5_transcribe.lm.): its prompt with the
 * <|audio|> rows replaced by the reference's projected audio embeddings gives
 * the reference's first logits, and greedy decoding its tokens (end of text
 * suppressed, as generate's min_new_tokens does there). */
static void transcribe_decoder(void) {
  gguf_file *f, *ref;
  fixture_open("nemotron_transcribe_tiny", &f, &ref);
  nemotron_h *m = NULL;
  uint32_t audio = 0;
  if (f) CHECK_OK(nemotron_h_load(test_device(), f, "nemotron3_5_transcribe.lm.", "lm.", &m));
  if (f) CHECK_OK(gguf_get_u32(f, "nemotron3_5_transcribe.audio_token_id", &audio));
  const gguf_kv *prompt = ref ? ref_ints(ref, "ref.prompt_ids") : NULL;
  const gguf_kv *gen = ref ? ref_ints(ref, "ref.generated_ids") : NULL;
  const gguf_tensor *emb = ref ? gguf_tensor_find(ref, "audio_embeds") : NULL;
  if (m && prompt && gen && emb && emb->type == GGUF_TYPE_F32 && emb->ne[0] == m->d.d) {
    uint32_t n = (uint32_t)prompt->n, V = m->vocab, d = m->d.d, used = 0;
    int *ids = calloc(n, sizeof *ids);
    float *rows = test_floats((size_t)n * d), *logits = test_floats(V);
    for (uint32_t i = 0; i < n; i++) {
      ids[i] = prompt->v.i32[i] == (int)audio ? -1 : prompt->v.i32[i];
      if (ids[i] < 0 && used < emb->ne[1])
        memcpy(rows + (size_t)i * d, (const float *)emb->data + (size_t)used++ * d, d * sizeof *rows);
    }
    uint32_t valid = 0, sub = 0; /* one audio token per encoder frame holding valid frames */
    CHECK_OK(gguf_get_u32(ref, "ref.valid_frames", &valid));
    CHECK_OK(gguf_get_u32(f, "nemotron3_5_transcribe.asr.subsampling_factor", &sub));
    CHECK(sub && used == (valid + sub - 1) / sub, "%u audio placeholders for %u valid frames", used,
          valid);
    nemotron_h_session *s;
    CHECK_OK(nemotron_h_session_new(m, n + (uint32_t)gen->n + 1, &s));
    CHECK_OK(nemotron_h_feed(s, ids, rows, n, logits, false));
    const float *want = ref_tensor(ref, "first_logits", V);
    if (want) check_close("transcribe tiny: logits after the prompt", logits, want, V, TOL);
    for (size_t i = 0; i < gen->n; i++) {
      if (m->eos >= 0) logits[m->eos] = -INFINITY;
      int best = 0;
      for (uint32_t v = 1; v < V; v++) best = logits[v] > logits[best] ? (int)v : best;
      CHECK(best == gen->v.i32[i], "transcribe tiny: token %zu is %d, the reference's %d", i, best,
            gen->v.i32[i]);
      if (i + 1 < gen->n) CHECK_OK(nemotron_h_feed(s, &gen->v.i32[i], NULL, 1, logits, false));
    }
    nemotron_h_session_free(s);
    free(ids), free(rows), free(logits);
  }
  nemotron_h_free(m);
  gguf_close(f);
  gguf_close(ref);
}

int main(void) {
  gguf_file *f, *ref;
  fixture_open("nemotron_h_tiny", &f, &ref);
  nemotron_h *m = NULL;
  if (f) CHECK_OK(nemotron_h_load(test_device(), f, KEYS, TENSORS, &m));
  const gguf_kv *prompt = ref ? ref_ints(ref, "ref.prompt") : NULL;
  if (m && prompt && prompt->n <= MAX_PROMPT) {
    uint32_t n = (uint32_t)prompt->n;
    hidden_states(m, ref, prompt->v.i32, n);
    prefill(m, f, ref, prompt->v.i32, n);
    generate(m, ref, prompt->v.i32, n, false);
    generate(m, ref, prompt->v.i32, n, true);
    loader_errors(f);
    other_types(f, ref, prompt->v.i32, n);
  }
  nemotron_h_free(m);
  gguf_close(f);
  gguf_close(ref);
  transcribe_decoder();
  return check_done();
}
