/* libFuzzer target for the model loaders, as steno_model_load runs them but
 * from bytes: a whisper.cpp .bin is rewritten first, then the GGUF reader, the
 * family from general.architecture (or the Nemotron-H language model alone,
 * which has no family row), and the family's load (hyperparameters,
 * vocabulary, every tensor's name, type and shape, the upload) on the test
 * device (lavapipe in CI), opened once. The file is then closed, as
 * steno_model_load closes it, and a model that loaded runs once on a quarter
 * second of audio (a native stream too where the family has one; a few tokens
 * for the language model): what a loader let through must not crash the
 * forward pass, nor may the model point into its file. Any bytes load or fail
 * with a message. Half the inputs (by their last byte) load with the log-mel
 * features on the GPU (STENO_FEATURES=gpu: the kernels, their load check and
 * the fallback meet every frontend a file can describe), half on the CPU.
 *
 * Byte flips rarely land in a header among megabytes of weights, so a custom
 * mutator also rewrites valid files field by field: one to three keys changed
 * (edge values: 0, 2^31, 2^32 − 1, NaN, ∞, −1; another type; dropped; twice;
 * arrays shortened or lengthened; strings swapped for other families' words)
 * or tensors changed (a dim, the type, the name, dropped), the weights kept. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "gguf_write.h"
#include "gpu_test.h"
#include "io/gguf.h"
#include "models/family.h"
#include "models/nemotron_h/nemotron_h.h"
#include "models/whisper/whisper.h"
#include "steno.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

/* ---- loading and a first pass ---- */

#define CLIP 4000 /* samples: a quarter second at 16 kHz */

/* A random model may decode its whole budget in every fallback tier (Whisper's
 * 30 s windows: tens of seconds on lavapipe): the pass stops at the 48th poll. */
static int enough(void *user) { return ++*(unsigned *)user > 48; }

static float pcm[CLIP];

/* A native stream (cache-aware Parakeet files) over the clip in two pieces,
 * in German (a prompt dictionary's lookup); a model that cannot stream is not
 * an error here. */
static int run_stream(const family *fam, void *s) {
  steno_stream_params p = steno_stream_default_params();
  unsigned polls = 0;
  p.abort = enough, p.abort_user = &polls;
  p.language = "de";
  int st = fam->stream_begin(s, &p);
  if (st == STENO_ERR_UNSUPPORTED) return err_clear(), 0;
  if (st) return st;
  steno_result *r = NULL, *last = NULL;
  st = fam->stream_feed(s, pcm, 1000);
  if (!st) st = fam->stream_result(s, &r);
  if (!st) st = fam->stream_feed(s, pcm + 1000, CLIP - 1000);
  if (!st) st = fam->stream_finish(s, &last);
  steno_result_free(r);
  steno_result_free(last);
  fam->stream_end(s);
  return st;
}

static int run_family(const family *fam, void *impl) {
  for (size_t i = 0; i < CLIP; i++) pcm[i] = 0.3f * sinf(0.05f * (float)i + 1e-5f * (float)(i * i));
  steno_transcribe_params p = steno_transcribe_default_params();
  unsigned polls = 0;
  p.abort = enough, p.abort_user = &polls;
  steno_result *r = NULL;
  void *s;
  TRY(fam->session_new(impl, &s));
  int st = fam->transcribe(s, pcm, CLIP, &p, &r);
  if (!st && fam->stream_begin) st = run_stream(fam, s);
  steno_result_free(r);
  fam->session_free(s);
  return st;
}

/* The Nemotron-H test fixture's prefixes (tests/test_nemotron_h.c). */
static int run_lm(gpu_device *dev, gguf_file *f) {
  nemotron_h *m;
  nemotron_h_session *s = NULL;
  int ids[3] = {1, 0, 1}, out[2];
  uint32_t n_out;
  int st = nemotron_h_load(dev, f, "nemotron_h.", "lm.", &m);
  gguf_close(f); /* a model needs nothing of its file once loaded */
  if (st) return st;
  st = nemotron_h_session_new(m, 8, &s);
  if (!st) st = nemotron_h_greedy(s, ids, NULL, 3, 2, NULL, 0, out, &n_out);
  nemotron_h_session_free(s);
  nemotron_h_free(m);
  return st;
}

static int load(const uint8_t *data, size_t size) {
  gguf_file *f;
  const char *arch;
  const family *fam = NULL;
  void *impl;
  TRY(gguf_open_memory(&f, data, size, "fuzz.gguf"));
  int st = gguf_get_str(f, "general.architecture", &arch);
  if (!st && !strcmp(arch, "nemotron_h")) return run_lm(test_device(), f);
  if (!st && !(fam = family_find(arch))) st = err_set(STENO_ERR_UNSUPPORTED, "architecture %s", arch);
  if (!st) st = fam->load(test_device(), f, &impl);
  gguf_close(f); /* as steno_model_load does: what runs must not point into the file */
  if (!st) {
    st = run_family(fam, impl);
    fam->free(impl);
  }
  return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *image = NULL;
  int st = 0;
  err_clear();
  setenv("STENO_FEATURES", size && data[size - 1] & 1 ? "gpu" : "cpu", 1);
  if (size >= 4 && !memcmp(data, "lmgg", 4)) { /* whisper.cpp's magic, little-endian */
    st = whisper_bin_image_memory(data, size, "fuzz.bin", &image, &size);
    data = image;
  }
  if (!st) st = load(data, size);
  free(image);
  if (getenv("FUZZ_LOAD_VERBOSE")) fprintf(stderr, "fuzz_load: %d %s\n", st, st ? err_message() : "ran");
  if (st && !err_message()[0]) abort(); /* a failure must say why */
  return 0;
}

/* ---- the structure-aware mutator ---- */

static uint64_t rng;

static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return n ? (uint32_t)(rng % n) : 0;
}

#define COUNT(a) (uint32_t)(sizeof a / sizeof *a)

static int64_t edge_int(int64_t old) {
  static const int64_t v[] = {0, 1, 2, 3, 4, 7, 8, 16, 31, 32, 33, 64, 255, 256, 1023, 1024,
                              1025, 4096, 8192, 65535, 65536, 65537, 1 << 20, 1 << 24, INT32_MAX,
                              1LL << 31, (1LL << 31) + 1, UINT32_MAX, 1LL << 32, (1LL << 32) + 1,
                              -1, -2, INT32_MIN, INT64_MAX};
  uint64_t u = (uint64_t)old;
  switch (rnd(4)) {
    case 0: return (int64_t)(u + rnd(5) - 2);
    case 1: return rnd(2) ? (int64_t)(u * 2) : old / 2;
    case 2: return (int64_t)(u ^ (1ull << rnd(64)));
    default: return v[rnd(COUNT(v))];
  }
}

static double edge_float(double old) {
  static const double v[] = {NAN, INFINITY, -INFINITY, 0, -0.0, 1, -1, 0.5, 2, 1e-30, 1e30,
                             3.4e38, 0x1p-24, 1e-9, 1e9, 65536};
  double x = rnd(3) == 0 ? -old : rnd(2) ? old * (rnd(2) ? 10 : 0.1) : v[rnd(COUNT(v))];
  return isfinite(x) && fabs(x) > 3.4e38 ? copysign(INFINITY, x) : x;
}

static const uint8_t val_size[GGUF_VAL_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* Element i of a numeric array as int64 / double. */
static int64_t get_int(uint32_t t, const void *p, size_t i) {
  const uint8_t *b = (const uint8_t *)p + i * val_size[t];
  union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; uint64_t u64;
          int64_t i64; float f32; double f64; } u = {0};
  memcpy(&u, b, val_size[t]);
  switch (t) {
    case GGUF_VAL_UINT8: case GGUF_VAL_BOOL: return u.u8;
    case GGUF_VAL_INT8: return u.i8;
    case GGUF_VAL_UINT16: return u.u16;
    case GGUF_VAL_INT16: return u.i16;
    case GGUF_VAL_UINT32: return u.u32;
    case GGUF_VAL_INT32: return u.i32;
    case GGUF_VAL_FLOAT32: return isfinite(u.f32) && fabsf(u.f32) < 1e18f ? (int64_t)u.f32 : 0;
    case GGUF_VAL_FLOAT64: return isfinite(u.f64) && fabs(u.f64) < 1e18 ? (int64_t)u.f64 : 0;
    default: return u.i64;
  }
}

static double get_float(uint32_t t, const void *p, size_t i) {
  const uint8_t *b = (const uint8_t *)p + i * val_size[t];
  float f;
  double d;
  if (t == GGUF_VAL_FLOAT32) return memcpy(&f, b, 4), f;
  if (t == GGUF_VAL_FLOAT64) return memcpy(&d, b, 8), d;
  return (double)get_int(t, p, i);
}

/* Element i set from an integer (wrapping to the type's width) or a float. */
static void set_num(uint32_t t, void *p, size_t i, int64_t v, double x) {
  uint8_t *b = (uint8_t *)p + i * val_size[t];
  uint64_t u = (uint64_t)v;
  float f = (float)x;
  if (t == GGUF_VAL_FLOAT32) memcpy(b, &f, 4);
  else if (t == GGUF_VAL_FLOAT64) memcpy(b, &x, 8);
  else memcpy(b, &u, val_size[t]); /* little-endian: the low bytes */
}

static void put_scalar(gguf_writer *w, const char *k, uint32_t t, const void *p) {
  switch (t) {
    case GGUF_VAL_UINT8: return gw_u8(w, k, *(const uint8_t *)p);
    case GGUF_VAL_INT8: return gw_i8(w, k, *(const int8_t *)p);
    case GGUF_VAL_BOOL: return gw_bool(w, k, *(const uint8_t *)p & 1);
    default: break;
  }
  uint8_t b[8];
  memcpy(b, p, val_size[t]);
  if (t == GGUF_VAL_UINT16) return gw_u16(w, k, (uint16_t)get_int(t, b, 0));
  if (t == GGUF_VAL_INT16) return gw_i16(w, k, (int16_t)get_int(t, b, 0));
  if (t == GGUF_VAL_UINT32) return gw_u32(w, k, (uint32_t)get_int(t, b, 0));
  if (t == GGUF_VAL_INT32) return gw_i32(w, k, (int32_t)get_int(t, b, 0));
  if (t == GGUF_VAL_FLOAT32) return gw_f32(w, k, (float)get_float(t, b, 0));
  if (t == GGUF_VAL_FLOAT64) return gw_f64(w, k, get_float(t, b, 0));
  if (t == GGUF_VAL_UINT64) return gw_u64(w, k, (uint64_t)get_int(t, b, 0));
  gw_i64(w, k, get_int(t, b, 0));
}

/* A numeric key with one element changed, or its count (arrays), or its type. */
static void mutate_num(gguf_writer *w, const gguf_kv *kv) {
  static const uint32_t types[] = {GGUF_VAL_UINT32, GGUF_VAL_INT32, GGUF_VAL_UINT64,
                                   GGUF_VAL_INT64, GGUF_VAL_FLOAT32, GGUF_VAL_UINT8, GGUF_VAL_BOOL};
  bool arr = kv->type == GGUF_VAL_ARRAY;
  size_t n = kv->n, pick = rnd(4);
  uint32_t from = kv->elem_type, to = pick == 0 ? types[rnd(COUNT(types))] : from;
  if (arr && pick == 1) n = (size_t[]){0, 1, kv->n ? kv->n - 1 : 0, kv->n + 1}[rnd(4)];
  uint8_t *v = calloc(n + 1, 8);
  if (!v) abort();
  for (size_t i = 0; i < n; i++) { /* converted; past the old end: the last one again */
    size_t j = i < kv->n ? i : kv->n ? kv->n - 1 : 0;
    int64_t iv = kv->n ? get_int(from, kv->v.data, j) : 1;
    set_num(to, v, i, iv, kv->n ? get_float(from, kv->v.data, j) : 1);
  }
  if (n && pick >= 2) {
    size_t i = rnd((uint32_t)n);
    set_num(to, v, i, edge_int(get_int(to, v, i)), edge_float(get_float(to, v, i)));
  }
  if (arr) gw_arr(w, kv->key, to, v, n);
  else put_scalar(w, kv->key, to, v);
  free(v);
}

/* Words the loaders compare strings with, and the architectures. */
static const char *word(const gguf_file *f) {
  static const char *const words[] = {
      "", "x", "parakeet", "gigaam", "whisper", "moonshine", "moonshine_streaming", "sortformer",
      "nemotron3_5_transcribe", "nemotron_h", "rotary", "rel_pos", "batch_norm", "layer_norm",
      "ctc", "rnnt", "tdt", "relu", "gelu", "silu", "relu2", "mlp", "moe", "linear_attention",
      "full_attention", "bpe", "char", "unigram", "llama", "gpt2", "hann", "mel", "raw",
      "per_feature", "none", "regular", "chunked_limited", "chunked_limited_with_rc", "en",
      "\xe2\x96\x81", "<|endoftext|>",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
  const gguf_kv *kv = f->n_kv ? &f->kv[rnd((uint32_t)f->n_kv)] : NULL;
  if (rnd(3) == 0 && kv && kv->elem_type == GGUF_VAL_STRING && kv->n) return kv->v.str[rnd((uint32_t)kv->n)].s;
  return words[rnd(COUNT(words))];
}

/* A string key replaced; a string array with one element replaced or its count changed. */
static void mutate_str(gguf_writer *w, const gguf_kv *kv, const gguf_file *f) {
  if (kv->type != GGUF_VAL_ARRAY) return gw_str(w, kv->key, word(f));
  size_t n = kv->n;
  if (rnd(2)) n = (size_t[]){0, 1, kv->n ? kv->n - 1 : 0, kv->n + 1}[rnd(4)];
  const char **s = malloc((n + 1) * sizeof *s);
  if (!s) abort();
  for (size_t i = 0; i < n; i++) s[i] = i < kv->n ? kv->v.str[i].s : word(f);
  if (n == kv->n && n) s[rnd((uint32_t)n)] = word(f);
  gw_arr_str(w, kv->key, s, n);
  free(s);
}

static void mutate_kv(gguf_writer *w, const gguf_kv *kv, const gguf_file *f) {
  switch (rnd(8)) {
    case 0: return; /* dropped */
    case 1: gw_copy_kv(w, kv), gw_copy_kv(w, kv); return;
    case 2: if (kv->elem_type != GGUF_VAL_STRING) return gw_str(w, kv->key, "1"); break;
    default: break;
  }
  if (kv->elem_type == GGUF_VAL_STRING) mutate_str(w, kv, f);
  else mutate_num(w, kv);
}

static void mutate_tensor(gguf_writer *w, const gguf_tensor *t, const gguf_file *f) {
  static const uint32_t types[] = {GGUF_TYPE_F32, GGUF_TYPE_F16, GGUF_TYPE_BF16, GGUF_TYPE_Q8_0, 2, 12, 99};
  int64_t ne[4] = {1, 1, 1, 1};
  int nd = (int)t->n_dims;
  for (int d = 0; d < nd; d++) ne[d] = (int64_t)t->ne[d];
  uint32_t type = t->type;
  const char *name = t->name;
  size_t nbytes = t->nbytes;
  switch (rnd(7)) {
    case 0: return; /* dropped */
    case 1: { int d = (int)rnd((uint32_t)nd); ne[d] = edge_int(ne[d]); } break;
    case 2: nd = nd > 1 && rnd(2) ? nd - 1 : nd < 4 ? nd + 1 : 1; break;
    case 3: { int64_t x = ne[0]; ne[0] = ne[nd - 1], ne[nd - 1] = x; } break;
    case 4: type = types[rnd(COUNT(types))]; break;
    case 5: name = f->tensors[rnd((uint32_t)f->n_tensors)].name; break;
    default: nbytes /= 2; break;
  }
  gw_tensor(w, name, type, nd, ne, t->data, nbytes);
}

/* f written again with 1-3 keys or tensors changed (mostly keys: a changed
 * tensor rarely gets past its shape check); the file image in *out. */
static void rewrite(const gguf_file *f, uint8_t **out, size_t *size) {
  size_t pick[3];
  int n = 1 + (rnd(4) == 0) + (rnd(8) == 0);
  size_t total = f->n_kv + f->n_tensors;
  for (int i = 0; i < n; i++)
    pick[i] = f->n_kv && (rnd(8) || !f->n_tensors) ? rnd((uint32_t)f->n_kv)
                                                   : f->n_kv + rnd((uint32_t)f->n_tensors);
  gguf_writer *w = gw_new();
  for (size_t i = 0; i < total; i++) {
    bool hit = false;
    for (int j = 0; j < n; j++) hit |= pick[j] == i;
    if (i < f->n_kv) {
      if (hit) mutate_kv(w, &f->kv[i], f);
      else gw_copy_kv(w, &f->kv[i]);
      continue;
    }
    const gguf_tensor *t = &f->tensors[i - f->n_kv];
    int64_t ne[4];
    for (uint32_t d = 0; d < t->n_dims; d++) ne[d] = (int64_t)t->ne[d];
    if (hit) mutate_tensor(w, t, f);
    else gw_tensor(w, t->name, t->type, (int)t->n_dims, ne, t->data, t->nbytes);
  }
  gw_write(w, out, size);
  gw_free(w);
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  rng = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
  gguf_file *f = NULL;
  /* an eighth of the time, and for what does not parse: libFuzzer's byte mutations */
  if (rnd(8) == 0 || gguf_open_memory(&f, data, size, "mutate") || f->n_kv + f->n_tensors == 0) {
    gguf_close(f);
    return LLVMFuzzerMutate(data, size, max_size);
  }
  uint8_t *out;
  size_t n;
  rewrite(f, &out, &n);
  gguf_close(f);
  if (n > max_size) {
    free(out);
    return LLVMFuzzerMutate(data, size, max_size);
  }
  memcpy(data, out, n);
  free(out);
  return n;
}
