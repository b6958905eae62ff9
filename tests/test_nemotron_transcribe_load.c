/* Nemotron 3.5 Transcribe's audio-module loader on rewritten copies of the
 * tiny fixture: a faithful copy gives the original's embeddings, F16, BF16 and
 * Q8_0 copies stay close; a missing or misshaped tensor, a key of the wrong type and
 * absurd values are errors naming the culprit; audio too short to frame is an
 * error, not a crash. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "load_check.h"
#include "models/nemotron_transcribe/nemotron_transcribe.h"
#include "steno.h"

#define K "nemotron3_5_transcribe."

typedef struct {
  const char *drop, *misshape;
  const char *retype_key;    /* UINT32 written as INT32 */
  const char *u32_key;       /* written with u32_value */
  uint32_t u32_value;
  const char *u32_key2;      /* a second one, with u32_value2 */
  uint32_t u32_value2;
  const char *ids_key;       /* an INT32 array whose first id becomes first_id */
  int32_t first_id;
  const char *empty_str_key; /* a STRING array written as one empty string */
  const char *f32_key;       /* written with f32_value */
  float f32_value;
  uint32_t linear_type;
} change;

static bool edit_key(gguf_writer *w, const gguf_kv *kv, const void *ctx) {
  const change *c = ctx;
  const char *k = kv->key;
  if (c->retype_key && !strcmp(k, c->retype_key)) return gw_i32(w, k, (int32_t)kv->v.u32[0]), true;
  if (c->u32_key && !strcmp(k, c->u32_key)) return gw_u32(w, k, c->u32_value), true;
  if (c->u32_key2 && !strcmp(k, c->u32_key2)) return gw_u32(w, k, c->u32_value2), true;
  if (c->f32_key && !strcmp(k, c->f32_key)) return gw_f32(w, k, c->f32_value), true;
  if (c->empty_str_key && !strcmp(k, c->empty_str_key))
    return gw_arr_str(w, k, (const char *const[]){""}, 1), true;
  if (c->ids_key && !strcmp(k, c->ids_key)) {
    int32_t *v = malloc(kv->n * sizeof *v);
    memcpy(v, kv->v.i32, kv->n * sizeof *v);
    v[0] = c->first_id;
    gw_arr(w, k, GGUF_VAL_INT32, v, kv->n);
    free(v);
    return true;
  }
  return false;
}

static bool is_linear(const gguf_tensor *t) {
  return t->n_dims == 2 && t->ne[0] % 32 == 0 && strstr(t->name, ".weight") &&
         !strstr(t->name, "norm") && strncmp(t->name, "frontend.", 9);
}

/* The changes as the tests' writer takes them. */
static gw_edit edit(const change *c) {
  return (gw_edit){.key = edit_key, .ctx = c, .drop = c->drop, .misshape = c->misshape,
                   .linear_type = c->linear_type, .is_linear = is_linear};
}

static int load(const gguf_file *f, bool *made) {
  nt_model *m = NULL;
  int st = nt_load(test_device(), f, &m);
  *made = m != NULL;
  nt_free(m);
  return st;
}

/* Loading fails with a message that contains `want`. */
static void load_fails(const gguf_file *src, const change *c, const char *want) {
  lc_load_fails(src, edit(c), load, 0, want);
}

/* The embeddings of the first second of the reference clip. */
static float *embeds(const gguf_file *f, const float *pcm, size_t n, size_t *count) {
  nt_model *m = NULL;
  CHECK_OK(nt_load(test_device(), f, &m));
  if (!m) return NULL;
  nt_audio a;
  float *out = NULL;
  int st = nt_audio_run(m, pcm, n, &a);
  CHECK(st == 0, "audio run: %s", steno_last_error());
  if (!st) {
    *count = (size_t)a.t * m->c.d_lm;
    out = malloc(*count * sizeof *out);
    memcpy(out, a.embeds, *count * sizeof *out);
    nt_audio_free(&a);
  }
  nt_free(m);
  return out;
}

/* A copy with its linear weights as `type` gives embeddings within tol. */
static void near_copy(const gguf_file *src, const float *pcm, size_t n, const float *want, size_t n0,
                      uint32_t type, const char *what, float tol) {
  change c = {.linear_type = type};
  uint8_t *b;
  size_t n1 = 0;
  gguf_file *f = lc_rewrite(src, edit(&c), &b);
  float *got = f ? embeds(f, pcm, n, &n1) : NULL;
  CHECK(got && n1 == n0, "%s copy ran", what);
  if (got && n1 == n0) check_close(what, got, want, n0, tol);
  free(got);
  gguf_close(f);
  free(b);
}

static void copies(const gguf_file *src, const float *pcm, size_t n) {
  size_t n0 = 0, n1 = 0;
  float *want = embeds(src, pcm, n, &n0);
  change same = {0};
  uint8_t *b1;
  gguf_file *f1 = lc_rewrite(src, edit(&same), &b1);
  float *got = f1 ? embeds(f1, pcm, n, &n1) : NULL;
  CHECK(want && got && n1 == n0 && !memcmp(want, got, n0 * sizeof *want),
        "a faithful copy gives other embeddings");
  if (want) {
    near_copy(src, pcm, n, want, n0, GGUF_TYPE_F16, "F16 copy", 2e-2f);
    near_copy(src, pcm, n, want, n0, GGUF_TYPE_BF16, "BF16 copy", 5e-2f);
    near_copy(src, pcm, n, want, n0, GGUF_TYPE_Q8_0, "Q8_0 copy", 5e-2f);
  }
  free(want), free(got);
  gguf_close(f1);
  free(b1);
}

static void bad_files(const gguf_file *src) {
  load_fails(src, &(change){.drop = "asr.layers.1.attn.w_qkv.weight"}, "asr.layers.1.attn.w_qkv.weight");
  load_fails(src, &(change){.drop = "diar.sf.learnable_sil_emb"}, "diar.sf.learnable_sil_emb");
  load_fails(src, &(change){.drop = "frontend.filterbank"}, "frontend.filterbank");
  load_fails(src, &(change){.misshape = "diar.sf.subpixel_upsample.weight"},
             "diar.sf.subpixel_upsample.weight");
  load_fails(src, &(change){.misshape = "asr.layers.0.attn.q_norm.weight"},
             "asr.layers.0.attn.q_norm.weight");
  load_fails(src, &(change){.misshape = "asr.pre_encode.proj.weight"}, "asr.pre_encode.proj.weight");
  load_fails(src, &(change){.retype_key = K "asr.hidden_size"}, K "asr.hidden_size");
  load_fails(src, &(change){.u32_key = K "asr.num_attention_heads", .u32_value = 3}, "asr. tower");
  load_fails(src, &(change){.u32_key = K "asr.num_attention_heads", .u32_value = 0}, "asr. tower");
  load_fails(src, &(change){.u32_key = K "diar.speaker_cache_length", .u32_value = 5},
             "diarization settings");
  load_fails(src, &(change){.u32_key = K "diar.chunk_right_context", .u32_value = 12},
             "diarization settings");
  /* fuzz_load: (1 + silence frames) · speakers wrapped to 0 (UINT32_MAX loaded; 2^30 made
   * the speaker budget's float-to-unsigned cast undefined) */
  load_fails(src, &(change){.u32_key = K "diar.speaker_cache_silence_frames_per_speaker",
                            .u32_value = UINT32_MAX}, "diarization settings");
  load_fails(src, &(change){.u32_key = K "diar.speaker_cache_silence_frames_per_speaker",
                            .u32_value = 1u << 30}, "diarization settings");
  load_fails(src, &(change){.u32_key = K "frontend.num_mel_bins", .u32_value = 80}, "frontend of 80 mels");
  load_fails(src, &(change){.u32_key = K "diar.subsampling_factor", .u32_value = 4}, "towers disagree");
  load_fails(src, &(change){.f32_key = K "audio.speaker_activity_threshold", .f32_value = NAN},
             "diarization settings");
  load_fails(src, &(change){.f32_key = K "asr.partial_rotary_factor", .f32_value = 0.01f},
             "rope 0 dims");
  load_fails(src, &(change){.u32_key = K "frontend.sample_rate", .u32_value = 8000}, "sample rate 8000");
  /* fuzz_load: values the old loader took that failed only at run time (a
   * buffer over the device's limit, a token past the decoder's table) */
  load_fails(src, &(change){.u32_key = K "diar.chunk_length", .u32_value = 4000,
                            .u32_key2 = K "diar.chunk_left_context", .u32_value2 = 1000},
             "chunk_left_context 1000 and chunk_right_context 3: a run of 5003 frames (at most 4096)");
  load_fails(src, &(change){.u32_key = K "diar.fifo_length", .u32_value = 100000},
             "diar.fifo_length 100000 with speaker_cache_length 12 and a chunk run of 18: a "
             "diarization run of 100030 frames (at most 4096)");
  load_fails(src, &(change){.u32_key = K "diar.chunk_length", .u32_value = 3000},
             "wts.upsampling_factor 2 on runs of 3006 frames: a word timestamp run of 6012 (at "
             "most 4096)");
  load_fails(src, &(change){.ids_key = K "prompt.prefix_ids", .first_id = 5000},
             "'" K "prompt.prefix_ids' holds id 5000 (ids 0 to 319");
  load_fails(src, &(change){.ids_key = K "prompt.instruction.head_ids", .first_id = 1 << 30},
             "'" K "prompt.instruction.head_ids' holds id 1073741824 (ids 0 to 319");
  load_fails(src, &(change){.u32_key = K "audio_token_id", .u32_value = 1u << 31},
             K "audio_token_id 2147483648: past the 321 ids of tokenizer.ggml.tokens");
  load_fails(src, &(change){.u32_key = K "audio_token_id", .u32_value = 321},
             K "audio_token_id 321: past the 321 ids of tokenizer.ggml.tokens");
  load_fails(src, &(change){.u32_key = K "lm.vocab_size", .u32_value = 0}, K "lm.vocab_size 0");
  /* the alignment vocabulary (word times) */
  load_fails(src, &(change){.u32_key = K "wts.unk_token_id", .u32_value = 18},
             K "wts.unk_token_id 18 of 18 pieces");
  load_fails(src, &(change){.u32_key = K "wts.blank_token_id", .u32_value = 3},
             K "wts.blank_token_id 3 of 20 classes (the last expected)");
  load_fails(src, &(change){.u32_key = K "wts.merges", .u32_value = 1}, K "wts.merges");
  load_fails(src, &(change){.empty_str_key = K "wts.dropped_tokens"},
             K "wts.dropped_tokens' holds an empty or NUL string");
  load_fails(src, &(change){.drop = "wts.upsample.bias"}, "wts.upsample.bias");
  load_fails(src, &(change){.misshape = "wts.head.weight"}, "wts.head.weight");
  load_fails(src, &(change){.u32_key = K "wts.hidden_size", .u32_value = 64}, "word timestamp head");
}

int main(void) {
  gguf_file *f = NULL, *ref = NULL;
  fixture_open("nemotron_transcribe_tiny", &f, &ref);
  const gguf_tensor *pcm = ref ? gguf_tensor_find(ref, "pcm") : NULL;
  CHECK(pcm && pcm->nelem > 16000, "reference pcm");
  if (f && pcm) {
    copies(f, pcm->data, 16000);
    bad_files(f);
    nt_model *m = NULL;
    CHECK_OK(nt_load(test_device(), f, &m));
    nt_audio a;
    CHECK(m && nt_audio_run(m, pcm->data, 200, &a) != 0, "200 samples ran");
    CHECK(strstr(steno_last_error(), "too short") != NULL, "message '%s'", steno_last_error());
    nt_free(m);
  }
  gguf_close(f);
  gguf_close(ref);
  return check_done();
}
