/* Nemotron 3.5 Transcribe end to end on tests/fixtures/nemotron_transcribe_tiny
 * (towers' fixture: the audio module's references and the decoder's): the clip's
 * pcm through the audio module, the default request's prompt with the audio
 * embeddings in its <|audio|> rows, and the Nemotron-H decoder give
 * transformers' generated tokens, exactly; the text is those tokens' pieces
 * with the special ones left out; the public API (steno_model_load of the file,
 * steno_transcribe) gives the same text; a user instruction (params.prompt)
 * gives the processor's prompt ids and transformers' tokens for it, exactly;
 * bad instructions and broken files are refused. */
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "load_check.h"
#include "models/nemotron_transcribe/transcribe.h"
#include "steno.h"
#include "text/bpe.h"

static const gguf_kv *ints(const gguf_file *ref, const char *key) {
  const gguf_kv *kv = NULL;
  CHECK_OK(gguf_get_arr(ref, key, GGUF_VAL_INT32, &kv));
  return kv;
}

/* The public API on the fixture file: the same text as the model's own call
 * (made printable, as every result the API gives: random tokens make control
 * characters and broken UTF-8). */
static void public_api(const float *pcm, size_t n, const char *prompt, const char *text) {
  char *want = NULL;
  CHECK_OK(utf8_printable(text, strlen(text), &want));
  char path[512];
  fixture_path(path, sizeof path, "nemotron_transcribe_tiny.gguf");
  steno_model *model = NULL;
  CHECK_OK(steno_model_load(path, test_params(), &model));
  steno_result *r = NULL;
  steno_transcribe_params p = steno_transcribe_default_params();
  p.prompt = prompt;
  if (model) CHECK_OK(steno_transcribe(model, pcm, n, &p, &r));
  if (r && want) CHECK(!strcmp(steno_result_text(r), want), "steno_transcribe: '%s', the model's '%s'",
                       steno_result_text(r), want);
  steno_result_free(r);
  steno_model_free(model);
  free(want);
}

static bool same_ids(const int *got, uint32_t n, const int32_t *want, size_t n_want) {
  bool same = got && n == n_want;
  for (uint32_t i = 0; same && i < n; i++) same = got[i] == want[i];
  return same;
}

static uint32_t audio_count(const ntx_model *m, const gguf_kv *ids) {
  uint32_t k = 0;
  for (size_t i = 0; i < ids->n; i++) k += (uint32_t)ids->v.i32[i] == m->audio->c.audio_token;
  return k;
}

/* A user instruction's prompt: the processor's ids exactly, for the reference's
 * instruction and its extra ones (added tokens, white space, scripts inside). */
static void instruction_prompts(const ntx_model *m, const gguf_file *ref) {
  const char *text = NULL;
  CHECK_OK(gguf_get_str(ref, "ref.instruction", &text));
  const gguf_kv *want = ints(ref, "ref.instruction.prompt_ids"), *extra = NULL;
  const gguf_kv *lens = ints(ref, "ref.instruction.extra_lengths");
  const gguf_kv *all = ints(ref, "ref.instruction.extra_ids");
  CHECK_OK(gguf_get_arr(ref, "ref.instruction.extra", GGUF_VAL_STRING, &extra));
  if (!text || !want || !extra || !lens || !all || lens->n != extra->n) return;
  int *ids = NULL;
  uint32_t n = 0, audio = audio_count(m, want);
  CHECK_OK(ntx_prompt_ids(m, text, audio, &ids, &n));
  CHECK(same_ids(ids, n, want->v.i32, want->n), "instruction prompt: %u ids, the processor's %zu", n,
        want->n);
  free(ids);
  size_t at = 0;
  for (size_t i = 0; i < extra->n; i++) {
    uint32_t len = (uint32_t)lens->v.i32[i];
    if (at + len > all->n) break;
    CHECK_OK(ntx_prompt_ids(m, extra->v.str[i].s, audio, &ids, &n));
    CHECK(same_ids(ids, n, all->v.i32 + at, len), "prompt of '%s': %u ids, the processor's %u",
          extra->v.str[i].s, n, len);
    free(ids);
    at += len;
  }
}

/* An instruction the model refuses with STENO_ERR_INVALID, the message naming why. */
static void bad_instruction(const ntx_model *m, const char *text, const char *want) {
  int *ids = NULL;
  uint32_t n = 0;
  int st = ntx_prompt_ids(m, text, 3, &ids, &n);
  CHECK(st == STENO_ERR_INVALID && !ids, "instruction '%.40s': status %d", text, st);
  CHECK(strstr(steno_last_error(), want) != NULL, "message '%s' does not say '%s'",
        steno_last_error(), want);
  free(ids);
}

static void bad_instructions(const ntx_model *m) {
  bad_instruction(m, "caf\xc3 \xff\xfe", "UTF-8");
  bad_instruction(m, "over long \xe0\x80\xaf", "UTF-8");
  bad_instruction(m, "two audios <|audio|> here", "audio token");
  char *huge = malloc(NTX_MAX_INSTRUCTION + 2);
  if (!huge) return;
  memset(huge, 'a', NTX_MAX_INSTRUCTION + 1);
  huge[NTX_MAX_INSTRUCTION + 1] = 0;
  bad_instruction(m, huge, "at most");
  free(huge);
}

/* The reference's instruction: transformers' greedy tokens exactly (they differ
 * from the default request's), and the public API with params.prompt gives the
 * model's own text for it. */
static void instruction_run(ntx_session *s, const float *pcm, size_t n_pcm, const gguf_file *ref,
                            const char *default_text) {
  const char *text = NULL;
  CHECK_OK(gguf_get_str(ref, "ref.instruction", &text));
  const gguf_kv *gen = ints(ref, "ref.instruction.generated_ids");
  if (!text || !gen) return;
  /* transformers' generate stops at the config's eos only; steno also at
   * <|im_end|> (the chat turn's end), which this instruction's run reaches */
  size_t want = gen->n;
  for (size_t i = 0; want == gen->n && i < gen->n; i++)
    for (int j = 0; j < s->m->n_stop; j++)
      if (gen->v.i32[i] == s->m->stop[j]) want = i + 1;
  CHECK(want < gen->n, "the instruction's reference reaches no end token: the stop goes unchecked");
  int *ids = NULL;
  uint32_t n = 0;
  CHECK_OK(ntx_generate(s, pcm, n_pcm, text, (uint32_t)gen->n, &ids, &n));
  CHECK(same_ids(ids, n, gen->v.i32, want), "instruction: %u generated tokens differ from the "
        "reference's %zu", n, want);
  free(ids);
  steno_transcribe_params p = steno_transcribe_default_params();
  p.prompt = text;
  steno_result *r = NULL;
  CHECK_OK(ntx_transcribe(s, pcm, n_pcm, &p, &r));
  if (r) public_api(pcm, n_pcm, text, steno_result_text(r));
  CHECK(r && strcmp(steno_result_text(r), default_text), "params.prompt: the default request's text");
  steno_result_free(r);
}

/* Files the end-to-end loader refuses, naming the culprit. */
typedef struct {
  const char *drop_key, *u32_key;
  uint32_t u32;
  const char *pattern; /* the pre-tokenizer pattern written in place of the file's */
} change;

static bool edit_key(gguf_writer *w, const gguf_kv *kv, const void *ctx) {
  const change *c = ctx;
  if (c->drop_key && !strcmp(kv->key, c->drop_key)) return true;
  if (c->pattern && !strcmp(kv->key, "nemotron3_5_transcribe.tokenizer.pre_regex"))
    return gw_arr_str(w, kv->key, &c->pattern, 1), true;
  if (c->u32_key && !strcmp(kv->key, c->u32_key)) return gw_u32(w, kv->key, c->u32), true;
  return false;
}

static int load(const gguf_file *f, bool *made) {
  ntx_model *m = NULL;
  int st = ntx_load(test_device(), f, &m);
  *made = m != NULL;
  ntx_free(m);
  return st;
}

static void load_fails(const gguf_file *src, const change *c, const char *misshape,
                       const char *want) {
  gw_edit e = {.key = edit_key, .ctx = c, .misshape = misshape};
  lc_load_fails(src, e, load, 0, want);
}

static void loader_errors(const gguf_file *f) {
  load_fails(f, &(change){.drop_key = "tokenizer.ggml.tokens"}, NULL, "tokenizer.ggml.tokens");
  load_fails(f, &(change){.drop_key = "nemotron3_5_transcribe.lm.layers_block_type"}, NULL,
             "layers_block_type");
  load_fails(f, &(change){.u32_key = "nemotron3_5_transcribe.lm.vocab_size", .u32 = 400}, NULL,
             "400");
  load_fails(f, &(change){0}, "lm.layers.0.mixer.in_proj.weight", "in_proj");
  load_fails(f, &(change){.drop_key = "nemotron3_5_transcribe.prompt.instruction.lead"}, NULL,
             "prompt.instruction");
  load_fails(f, &(change){.pattern = "[^a"}, NULL, "pre-tokenizer pattern");
}

int main(void) {
  gguf_file *f, *ref;
  fixture_open("nemotron_transcribe_tiny", &f, &ref);
  ntx_model *m = NULL;
  ntx_session *s = NULL;
  if (f) CHECK_OK(ntx_load(test_device(), f, &m));
  if (m) CHECK_OK(ntx_session_new(m, &s));
  const gguf_tensor *pcm = ref ? gguf_tensor_find(ref, "pcm") : NULL;
  const gguf_kv *gen = ref ? ints(ref, "ref.generated_ids") : NULL;
  if (s && pcm && gen && pcm->type == GGUF_TYPE_F32) {
    int *ids = NULL;
    uint32_t n = 0;
    CHECK_OK(ntx_generate(s, pcm->data, pcm->nelem, NULL, (uint32_t)gen->n, &ids, &n));
    CHECK(n == gen->n, "%u tokens, the reference %zu", n, gen->n);
    for (uint32_t i = 0; i < n && i < gen->n; i++)
      CHECK(ids[i] == gen->v.i32[i], "token %u: %d, the reference %d", i, ids[i], gen->v.i32[i]);
    steno_result *r = NULL;
    CHECK_OK(ntx_transcribe(s, pcm->data, pcm->nelem, NULL, &r));
    if (r) {
      /* the reference's tokens: the first 8 of the run (it goes on to its cap) */
      char *want = NULL;
      int keep[64];
      size_t k = 0;
      for (size_t i = 0; i < gen->n && i < 64; i++)
        if (!m->special[gen->v.i32[i]]) keep[k++] = gen->v.i32[i];
      CHECK_OK(bpe_decode(&m->tok, keep, k, &want));
      const char *got = steno_result_text(r);
      size_t lead = want ? strspn(want, " ") : 0;
      CHECK(want && strlen(got) > 0 && !strncmp(got, want + lead, strlen(want) - lead),
            "text '%s' does not start with the reference tokens' '%s'", got, want ? want : "");
      CHECK(steno_result_segment_count(r) == 1, "%zu segments", steno_result_segment_count(r));
      steno_timings tm = steno_result_timings(r);
      CHECK(tm.encoder_ms > 0 && tm.decoder_ms > 0, "timings %g / %g ms", tm.encoder_ms,
            tm.decoder_ms);

      public_api(pcm->data, pcm->nelem, NULL, got);
      free(want);
      instruction_run(s, pcm->data, pcm->nelem, ref, got);
    }
    steno_result_free(r);
    free(ids);
  }
  if (m && ref) instruction_prompts(m, ref);
  if (m) bad_instructions(m);
  ntx_session_free(s);
  ntx_free(m);
  if (f) loader_errors(f);
  gguf_close(f);
  gguf_close(ref);
  return check_done();
}
