/* The GGUF reader: round trips through the test writer (every value type,
 * arrays, alignments, every tensor type's to_f32), the checked getters, and
 * many malformed files, each of which must fail cleanly with a message that
 * says what is wrong. Set STENO_TEST_VERBOSE=1 to see the messages. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/half.h"
#include "check.h"
#include "gguf_write.h"
#include "io/gguf.h"
#include "io/types.h"
#include "steno.h"

#define NE(...) ((const int64_t[]){__VA_ARGS__})

static int verbose;

/* ---- helpers ---- */

static void build(const gguf_writer *w, uint8_t **p, size_t *n) { gw_write(w, p, n); }

/* Offset just past the first occurrence of string s in p (the field after a
 * key or tensor name); aborts the test if absent. */
static size_t after(const uint8_t *p, size_t n, const char *s) {
  size_t len = strlen(s);
  for (size_t i = 0; i + len <= n; i++)
    if (!memcmp(p + i, s, len)) return i + len;
  fprintf(stderr, "test bug: '%s' not in the file\n", s);
  abort();
}

/* Restores the damaged copy q from the valid file p (both n bytes). */
#define RESET() memcpy(q, p, n)

static void put_u32(uint8_t *p, size_t at, uint32_t v) { memcpy(p + at, &v, 4); }
static void put_u64(uint8_t *p, size_t at, uint64_t v) { memcpy(p + at, &v, 8); }

/* Opening p must fail with STENO_ERR_FORMAT and a message containing `word`. */
static void expect_fail_(const uint8_t *p, size_t n, const char *word, const char *what, int line) {
  gguf_file *f = (gguf_file *)1;
  int st = gguf_open_memory(&f, p, n, "bad.gguf");
  const char *msg = steno_last_error();
  check_count++;
  if (st != STENO_ERR_FORMAT || f != NULL || !strstr(msg, word) || !strstr(msg, "bad.gguf")) {
    check_failures++;
    fprintf(stderr, "test_gguf.c:%d: %s: status %d, message '%s' (wanted '%s')\n", line, what, st,
            msg, word);
  } else if (verbose) {
    printf("  %-28s %s\n", what, msg);
  }
  if (st == STENO_OK) gguf_close(f);
}
#define expect_fail(p, n, word, what) expect_fail_(p, n, word, what, __LINE__)

static void fill(float *x, size_t n, uint32_t seed) { check_random(x, n, seed); }

/* A small valid file: a few keys, an F32 [8, 2] and an F16 [8] tensor. */
static gguf_writer *small_file(void) {
  gguf_writer *w = gw_new();
  float x[16];
  fill(x, 16, 1);
  gw_str(w, "general.architecture", "toy");
  gw_u32(w, "toy.width", 8);
  gw_arr(w, "toy.list", GGUF_VAL_INT32, (const int32_t[]){1, 2, 3}, 3);
  gw_tensor_f32(w, "tensor.a", GGUF_TYPE_F32, 2, NE(8, 2), x);
  gw_tensor_f32(w, "tensor.b", GGUF_TYPE_F16, 1, NE(8), x);
  return w;
}

static void small_bytes(uint8_t **p, size_t *n) {
  gguf_writer *w = small_file();
  build(w, p, n);
  gw_free(w);
}

/* ---- round trips ---- */

static void test_values(void) {
  gguf_writer *w = gw_new();
  gw_u8(w, "v.u8", 250);
  gw_i8(w, "v.i8", -120);
  gw_u16(w, "v.u16", 65000);
  gw_i16(w, "v.i16", -32000);
  gw_u32(w, "v.u32", 4000000000u);
  gw_i32(w, "v.i32", -2000000000);
  gw_u64(w, "v.u64", UINT64_MAX - 1);
  gw_i64(w, "v.i64", INT64_MIN + 1);
  gw_f32(w, "v.f32", 0.97f);
  gw_f64(w, "v.f64", 1e-300);
  gw_bool(w, "v.true", true);
  gw_bool(w, "v.false", false);
  gw_str(w, "v.str", "héllo ▁world");
  gw_str(w, "v.empty", "");
  gw_arr(w, "a.u8", GGUF_VAL_UINT8, (const uint8_t[]){1, 2, 255}, 3);
  gw_arr(w, "a.i8", GGUF_VAL_INT8, (const int8_t[]){-1, 0, 127}, 3);
  gw_arr(w, "a.u16", GGUF_VAL_UINT16, (const uint16_t[]){7, 65535}, 2);
  gw_arr(w, "a.i16", GGUF_VAL_INT16, (const int16_t[]){-7, 32767}, 2);
  gw_arr(w, "a.u32", GGUF_VAL_UINT32, (const uint32_t[]){1, 4294967295u}, 2);
  gw_arr(w, "a.i32", GGUF_VAL_INT32, (const int32_t[]){-5, 5, 6}, 3);
  gw_arr(w, "a.u64", GGUF_VAL_UINT64, (const uint64_t[]){UINT64_MAX}, 1);
  gw_arr(w, "a.i64", GGUF_VAL_INT64, (const int64_t[]){INT64_MIN, -1}, 2);
  gw_arr(w, "a.f32", GGUF_VAL_FLOAT32, (const float[]){0.5f, -1.25f, 3e38f}, 3);
  gw_arr(w, "a.f64", GGUF_VAL_FLOAT64, (const double[]){0.1, -2.5}, 2);
  gw_arr(w, "a.bool", GGUF_VAL_BOOL, (const uint8_t[]){1, 0, 2}, 3);
  gw_arr(w, "a.empty", GGUF_VAL_FLOAT32, NULL, 0);
  const char *toks[] = {"<unk>", "▁the", "", "<0x0A>", "a\"b"};
  gw_arr_str(w, "a.str", toks, 5);
  uint8_t *p;
  size_t n;
  build(w, &p, &n);
  gw_free(w);

  gguf_file *f = NULL;
  CHECK_OK(gguf_open_memory(&f, p, n, "values.gguf"));
  if (!f) {
    free(p);
    return;
  }
  CHECK(f->n_kv == 27 && f->n_tensors == 0 && f->version == 3, "counts %zu %zu", f->n_kv, f->n_tensors);
  CHECK(f->alignment == 32, "default alignment %u", f->alignment);
  CHECK(!strcmp(f->kv[0].key, "v.u8"), "file order kept: %s", f->kv[0].key);

  const gguf_kv *kv;
  kv = gguf_find(f, "v.u8");
  CHECK(kv && kv->type == GGUF_VAL_UINT8 && kv->n == 1 && kv->v.u8[0] == 250, "u8");
  kv = gguf_find(f, "v.i8");
  CHECK(kv && kv->type == GGUF_VAL_INT8 && kv->v.i8[0] == -120, "i8");
  kv = gguf_find(f, "v.u16");
  CHECK(kv && kv->type == GGUF_VAL_UINT16 && kv->v.u16[0] == 65000, "u16");
  kv = gguf_find(f, "v.i16");
  CHECK(kv && kv->type == GGUF_VAL_INT16 && kv->v.i16[0] == -32000, "i16");
  kv = gguf_find(f, "v.i64");
  CHECK(kv && kv->type == GGUF_VAL_INT64 && kv->v.i64[0] == INT64_MIN + 1, "i64");
  kv = gguf_find(f, "v.f64");
  CHECK(kv && kv->type == GGUF_VAL_FLOAT64 && kv->v.f64[0] == 1e-300, "f64");
  CHECK(gguf_find(f, "v.nope") == NULL, "absent key");

  uint32_t u32 = 0;
  int32_t i32 = 0;
  uint64_t u64 = 0;
  float f32 = 0;
  bool b = false;
  const char *s = NULL;
  CHECK_OK(gguf_get_u32(f, "v.u32", &u32));
  CHECK(u32 == 4000000000u, "u32 %u", u32);
  CHECK_OK(gguf_get_i32(f, "v.i32", &i32));
  CHECK(i32 == -2000000000, "i32 %d", i32);
  CHECK_OK(gguf_get_u64(f, "v.u64", &u64));
  CHECK(u64 == UINT64_MAX - 1, "u64");
  CHECK_OK(gguf_get_f32(f, "v.f32", &f32));
  CHECK(f32 == 0.97f, "f32 %g", f32);
  CHECK_OK(gguf_get_bool(f, "v.true", &b));
  CHECK(b, "true");
  CHECK_OK(gguf_get_bool(f, "v.false", &b));
  CHECK(!b, "false");
  CHECK_OK(gguf_get_str(f, "v.str", &s));
  CHECK(s && !strcmp(s, "héllo ▁world"), "str '%s'", s ? s : "(null)");
  CHECK_OK(gguf_get_str(f, "v.empty", &s));
  CHECK(s && !strcmp(s, ""), "empty str");

  /* optional forms: absent leaves the default, present reads it */
  u32 = 77;
  CHECK_OK(gguf_opt_u32(f, "v.absent", &u32));
  CHECK(u32 == 77, "opt default kept %u", u32);
  CHECK_OK(gguf_opt_u32(f, "v.u32", &u32));
  CHECK(u32 == 4000000000u, "opt present");
  s = "default";
  CHECK_OK(gguf_opt_str(f, "v.absent", &s));
  CHECK(!strcmp(s, "default"), "opt str default");
  i32 = 3;
  CHECK_OK(gguf_opt_i32(f, "v.absent", &i32));
  CHECK_OK(gguf_opt_u64(f, "v.absent", &u64));
  CHECK_OK(gguf_opt_f32(f, "v.absent", &f32));
  CHECK_OK(gguf_opt_bool(f, "v.absent", &b));
  CHECK(i32 == 3, "opt i32 default");

  /* exact types: UINT32 is not INT32, a scalar is not an array */
  int st = gguf_get_u32(f, "v.i32", &u32);
  CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "v.i32") &&
            strstr(steno_last_error(), "is INT32, expected UINT32"),
        "%d %s", st, steno_last_error());
  st = gguf_opt_i32(f, "v.u32", &i32);
  CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "is UINT32, expected INT32"),
        "opt wrong type: %s", steno_last_error());
  st = gguf_get_f32(f, "v.f64", &f32);
  CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "FLOAT64"), "%s", steno_last_error());
  st = gguf_get_str(f, "a.str", &s);
  CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "an array of STRING"), "%s",
        steno_last_error());
  st = gguf_get_u32(f, "v.missing", &u32);
  CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "'v.missing' missing") &&
            strstr(steno_last_error(), "values.gguf"),
        "%s", steno_last_error());
  st = gguf_get_bool(f, "v.u8", &b);
  CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "expected BOOL"), "%s", steno_last_error());

  /* arrays */
  const gguf_kv *a;
  CHECK_OK(gguf_get_arr(f, "a.u8", GGUF_VAL_UINT8, &a));
  CHECK(a && a->n == 3 && a->v.u8[2] == 255, "a.u8");
  CHECK_OK(gguf_get_arr(f, "a.i8", GGUF_VAL_INT8, &a));
  CHECK(a && a->v.i8[0] == -1 && a->v.i8[2] == 127, "a.i8");
  CHECK_OK(gguf_get_arr(f, "a.u16", GGUF_VAL_UINT16, &a));
  CHECK(a && a->n == 2 && a->v.u16[1] == 65535, "a.u16");
  CHECK_OK(gguf_get_arr(f, "a.i16", GGUF_VAL_INT16, &a));
  CHECK(a && a->v.i16[0] == -7, "a.i16");
  CHECK_OK(gguf_get_arr(f, "a.u32", GGUF_VAL_UINT32, &a));
  CHECK(a && a->v.u32[1] == 4294967295u, "a.u32");
  CHECK_OK(gguf_get_arr(f, "a.i32", GGUF_VAL_INT32, &a));
  CHECK(a && a->n == 3 && a->v.i32[0] == -5 && a->v.i32[2] == 6, "a.i32");
  CHECK_OK(gguf_get_arr(f, "a.u64", GGUF_VAL_UINT64, &a));
  CHECK(a && a->v.u64[0] == UINT64_MAX, "a.u64");
  CHECK_OK(gguf_get_arr(f, "a.i64", GGUF_VAL_INT64, &a));
  CHECK(a && a->v.i64[0] == INT64_MIN && a->v.i64[1] == -1, "a.i64");
  CHECK_OK(gguf_get_arr(f, "a.f32", GGUF_VAL_FLOAT32, &a));
  CHECK(a && a->v.f32[0] == 0.5f && a->v.f32[1] == -1.25f && a->v.f32[2] == 3e38f, "a.f32");
  CHECK_OK(gguf_get_arr(f, "a.f64", GGUF_VAL_FLOAT64, &a));
  CHECK(a && a->v.f64[0] == 0.1 && a->v.f64[1] == -2.5, "a.f64");
  CHECK_OK(gguf_get_arr(f, "a.bool", GGUF_VAL_BOOL, &a));
  CHECK(a && a->v.b[0] && !a->v.b[1] && a->v.b[2], "a.bool (non-zero reads as true)");
  CHECK_OK(gguf_get_arr(f, "a.empty", GGUF_VAL_FLOAT32, &a));
  CHECK(a && a->n == 0, "empty array");
  CHECK_OK(gguf_get_arr(f, "a.str", GGUF_VAL_STRING, &a));
  CHECK(a && a->n == 5, "a.str count");
  for (size_t i = 0; a && i < 5; i++)
    CHECK(!strcmp(a->v.str[i].s, toks[i]) && a->v.str[i].len == strlen(toks[i]), "token %zu", i);
  st = gguf_get_arr(f, "a.i32", GGUF_VAL_UINT32, &a);
  CHECK(st == STENO_ERR_FORMAT && a == NULL &&
            strstr(steno_last_error(), "is an array of INT32, expected an array of UINT32"),
        "%s", steno_last_error());
  st = gguf_get_arr(f, "v.u32", GGUF_VAL_UINT32, &a);
  CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "is UINT32"), "%s", steno_last_error());
  CHECK_OK(gguf_opt_arr(f, "a.absent", GGUF_VAL_STRING, &a));
  CHECK(a == NULL, "opt arr absent");
  CHECK(gguf_get_arr(f, "a.absent", GGUF_VAL_STRING, &a) == STENO_ERR_FORMAT, "arr missing");

  gguf_close(f);
  free(p);
}

/* Tensors land aligned at alignment 32 (default) and 64, and read back. */
static void test_alignment(uint32_t alignment, bool set_key) {
  gguf_writer *w = gw_new();
  if (set_key) gw_set_alignment(w, alignment);
  gw_str(w, "general.architecture", "toy");
  float x[3 * 5], y[7], z[64];
  fill(x, 15, 2);
  fill(y, 7, 3);
  fill(z, 64, 4);
  gw_tensor_f32(w, "x", GGUF_TYPE_F32, 2, NE(3, 5), x);
  gw_tensor_f32(w, "y", GGUF_TYPE_F32, 1, NE(7), y);
  gw_tensor_f32(w, "z", GGUF_TYPE_F32, 4, NE(2, 2, 2, 8), z);
  uint8_t *p;
  size_t n;
  build(w, &p, &n);
  gw_free(w);
  gguf_file *f = NULL;
  CHECK_OK(gguf_open_memory(&f, p, n, NULL));
  if (f) {
    CHECK(f->alignment == alignment, "alignment %u, want %u", f->alignment, alignment);
    CHECK(f->data_offset % alignment == 0, "data offset %zu", f->data_offset);
    const float *want[] = {x, y, z};
    for (size_t i = 0; i < 3; i++) {
      const gguf_tensor *t = &f->tensors[i];
      CHECK((size_t)((const uint8_t *)t->data - p) % alignment == 0, "tensor %s at %zu", t->name,
            (size_t)((const uint8_t *)t->data - p));
      float out[64];
      CHECK_OK(gguf_tensor_to_f32(t, out));
      check_close(t->name, out, want[i], t->nelem, 0);
    }
    const gguf_tensor *t = gguf_tensor_find(f, "z");
    CHECK(t && t->n_dims == 4 && t->ne[3] == 8 && t->nelem == 64 && t->nbytes == 256, "z shape");
    CHECK(gguf_tensor_find(f, "w") == NULL, "absent tensor");
    gguf_close(f);
  }
  free(p);
}

/* The traits table and the byte-count helper. */
static void test_traits(void) {
  const gguf_type_traits *t = gguf_type_traits_of(GGUF_TYPE_Q8_0);
  CHECK(t && t->block_size == 32 && t->block_bytes == 34 && !strcmp(t->name, "Q8_0"), "Q8_0 row");
  t = gguf_type_traits_of(GGUF_TYPE_BF16);
  CHECK(t && t->block_size == 1 && t->block_bytes == 2 && t->to_f32, "BF16 row");
  t = gguf_type_traits_of(GGUF_TYPE_Q6_K);
  CHECK(t && t->block_size == 256 && t->block_bytes == 210, "Q6_K row (layout only)");
  CHECK(gguf_type_traits_of(4) == NULL && gguf_type_traits_of(39) == NULL &&
            gguf_type_traits_of(40) == NULL && gguf_type_traits_of(UINT32_MAX) == NULL,
        "unknown ids");
  CHECK(!strcmp(gguf_type_name(GGUF_TYPE_F16), "F16") && !strcmp(gguf_type_name(77), "unknown"),
        "names");
  size_t bytes = 0;
  CHECK_OK(gguf_type_nbytes(GGUF_TYPE_Q8_0, 64, &bytes));
  CHECK(bytes == 68, "Q8_0 64 -> %zu", bytes);
  CHECK_OK(gguf_type_nbytes(GGUF_TYPE_F32, 0, &bytes));
  CHECK(bytes == 0, "zero elements");
  CHECK(gguf_type_nbytes(GGUF_TYPE_Q8_0, 33, &bytes) == STENO_ERR_FORMAT &&
            strstr(steno_last_error(), "block"),
        "33 Q8_0: %s", steno_last_error());
  CHECK(gguf_type_nbytes(GGUF_TYPE_F32, UINT64_C(1) << 62, &bytes) == STENO_ERR_FORMAT,
        "F32 2^62 overflows");
  CHECK(gguf_type_nbytes(99, 1, &bytes) == STENO_ERR_FORMAT &&
            strstr(steno_last_error(), "unknown tensor type 99"),
        "%s", steno_last_error());
}

/* Each type's to_f32 against values worked out by hand. */
static void test_to_f32(void) {
  const uint16_t h[] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x8000, 0x3555, 0x0400};
  const float hv[] = {1.0f, -2.0f, 0.5f, 65504.0f, 5.9604645e-8f, -0.0f, 0.333251953125f, 6.1035156e-5f};
  const uint16_t bf[] = {0x3f80, 0xc040, 0x3e80, 0x4049, 0x0000, 0xff80, 0x7f7f, 0x0001};
  const float bv[] = {1.0f, -3.0f, 0.25f, 3.140625f, 0.0f, -INFINITY, 3.3895314e38f, 9.1835e-41f};
  /* Q8_0: block 0 has d = 0.5 and q = j - 16; block 1 has d = -0.25 and q = 127 - 8j */
  uint8_t q[2 * 34];
  float qv[64];
  uint16_t d0 = 0x3800, d1 = 0xb400;
  memcpy(q, &d0, 2);
  memcpy(q + 34, &d1, 2);
  for (int j = 0; j < 32; j++) {
    q[2 + j] = (uint8_t)(int8_t)(j - 16);
    q[36 + j] = (uint8_t)(int8_t)(127 - 8 * j);
    qv[j] = 0.5f * (float)(j - 16);
    qv[32 + j] = -0.25f * (float)(127 - 8 * j);
  }
  const float fv[] = {1.5f, -0.0f, 1e-45f, -3.4e38f};

  gguf_writer *w = gw_new();
  gw_tensor(w, "f16", GGUF_TYPE_F16, 1, NE(8), h, sizeof h);
  gw_tensor(w, "bf16", GGUF_TYPE_BF16, 2, NE(4, 2), bf, sizeof bf);
  gw_tensor(w, "q8", GGUF_TYPE_Q8_0, 2, NE(32, 2), q, sizeof q);
  gw_tensor(w, "f32", GGUF_TYPE_F32, 1, NE(4), fv, sizeof fv);
  uint8_t q4k[144] = {0};
  gw_tensor(w, "q4k", GGUF_TYPE_Q4_K, 1, NE(256), q4k, sizeof q4k);
  uint8_t *p;
  size_t n;
  build(w, &p, &n);
  gw_free(w);
  gguf_file *f = NULL;
  CHECK_OK(gguf_open_memory(&f, p, n, "types.gguf"));
  if (f) {
    float out[64];
    const gguf_tensor *t;
    CHECK_OK(gguf_tensor_get(f, "f16", GGUF_MASK_FLOAT, 1, NE(8), &t));
    if (t && !gguf_tensor_to_f32(t, out)) {
      check_close("f16", out, hv, 8, 0);
      CHECK(signbit(out[5]), "f16 -0 keeps its sign");
    }
    CHECK_OK(gguf_tensor_get(f, "bf16", GGUF_MASK(GGUF_TYPE_BF16), 2, NE(4, 2), &t));
    if (t && !gguf_tensor_to_f32(t, out))
      for (int i = 0; i < 8; i++) CHECK(out[i] == bv[i] || (i == 7 && fabsf(out[i] - bv[i]) < 1e-44f), "bf16[%d] %g", i, out[i]);
    CHECK_OK(gguf_tensor_get(f, "q8", GGUF_MASK(GGUF_TYPE_Q8_0), 2, NE(32, 2), &t));
    if (t && !gguf_tensor_to_f32(t, out)) check_close("q8_0", out, qv, 64, 0);
    CHECK_OK(gguf_tensor_get(f, "f32", GGUF_MASK(GGUF_TYPE_F32), 1, NE(4), &t));
    if (t && !gguf_tensor_to_f32(t, out)) CHECK(!memcmp(out, fv, sizeof fv), "f32 bit-exact");
    t = gguf_tensor_find(f, "q4k");
    CHECK(t && t->type == GGUF_TYPE_Q4_K && t->nbytes == 144, "Q4_K opens (layout known)");
    if (t) {
      int st = gguf_tensor_to_f32(t, out);
      CHECK(st == STENO_ERR_UNSUPPORTED && strstr(steno_last_error(), "Q4_K"), "%d %s", st,
            steno_last_error());
    }
    gguf_close(f);
  }
  free(p);
}

/* The f32 → type conversions of the writer, back through the reader. */
static void test_writer_conversions(void) {
  enum { N = 4 * 64 };
  float x[N], back[N], want[N];
  fill(x, N, 5);
  x[7] = 0.0f;
  for (int i = 64; i < 96; i++) x[i] = 0.0f; /* an all-zero Q8_0 block: d = 0 */
  gguf_writer *w = gw_new();
  gw_set_alignment(w, 64);
  const uint32_t types[] = {GGUF_TYPE_F32, GGUF_TYPE_F16, GGUF_TYPE_BF16, GGUF_TYPE_Q8_0};
  const char *names[] = {"w.f32", "w.f16", "w.bf16", "w.q8_0"};
  for (int k = 0; k < 4; k++) gw_tensor_f32(w, names[k], types[k], 2, NE(64, 4), x);
  uint8_t *p;
  size_t n;
  build(w, &p, &n);
  gw_free(w);
  gguf_file *f = NULL;
  CHECK_OK(gguf_open_memory(&f, p, n, NULL));
  for (int k = 0; f && k < 4; k++) {
    const gguf_tensor *t;
    CHECK_OK(gguf_tensor_get(f, names[k], GGUF_MASK_ANY, 2, NE(64, 4), &t));
    if (!t) continue;
    CHECK_OK(gguf_tensor_to_f32(t, back));
    for (int i = 0; i < N; i++) {
      if (types[k] == GGUF_TYPE_F32) want[i] = x[i];
      if (types[k] == GGUF_TYPE_F16) want[i] = f16_round(x[i]);
      if (types[k] == GGUF_TYPE_BF16) want[i] = bf16_to_f32(f32_to_bf16(x[i]));
    }
    if (types[k] == GGUF_TYPE_Q8_0) {
      /* recompute ggml's reference rounding independently */
      for (int b = 0; b < N / 32; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f, ds = f16_round(d);
        for (int j = 0; j < 32; j++) want[32 * b + j] = ds * roundf(x[32 * b + j] * id);
      }
    }
    check_close(names[k], back, want, N, 0);
    if (types[k] == GGUF_TYPE_Q8_0) check_close("q8_0 vs f32", back, x, N, 1.0f / 127.0f);
  }
  gguf_close(f);
  free(p);
}

static void test_tensor_get(void) {
  gguf_writer *w = gw_new();
  float x[64] = {0};
  gw_tensor_f32(w, "enc.w", GGUF_TYPE_F16, 2, NE(8, 4), x);
  gw_tensor_f32(w, "enc.b", GGUF_TYPE_F32, 1, NE(8), x);
  gw_tensor_f32(w, "enc.q", GGUF_TYPE_Q8_0, 2, NE(32, 2), x);
  gw_tensor_f32(w, "enc.col", GGUF_TYPE_F32, 2, NE(8, 1), x);
  uint8_t *p;
  size_t n;
  build(w, &p, &n);
  gw_free(w);
  gguf_file *f = NULL;
  CHECK_OK(gguf_open_memory(&f, p, n, "model.gguf"));
  if (f) {
    const gguf_tensor *t = NULL;
    CHECK_OK(gguf_tensor_get(f, "enc.w", GGUF_MASK_FLOAT, 2, NE(8, 4), &t));
    CHECK(t && t->type == GGUF_TYPE_F16 && t->nelem == 32 && t->nbytes == 64, "enc.w");
    CHECK_OK(gguf_tensor_get(f, "enc.w", GGUF_MASK_FLOAT, 2, NE(8, -1), &t));
    CHECK(t != NULL, "wildcard dim");
    /* trailing dims of 1 are ignored on both sides */
    CHECK_OK(gguf_tensor_get(f, "enc.b", GGUF_MASK_FLOAT, 2, NE(8, 1), &t));
    CHECK_OK(gguf_tensor_get(f, "enc.col", GGUF_MASK_FLOAT, 1, NE(8), &t));

    int st = gguf_tensor_get(f, "enc.x", GGUF_MASK_FLOAT, 1, NE(8), &t);
    CHECK(st == STENO_ERR_FORMAT && t == NULL &&
              strstr(steno_last_error(), "model.gguf: tensor 'enc.x' missing"),
          "%s", steno_last_error());
    st = gguf_tensor_get(f, "enc.w", GGUF_MASK_FLOAT, 2, NE(4, 8), &t);
    CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "'enc.w' has shape [8, 4], expected [4, 8]"),
          "%s", steno_last_error());
    st = gguf_tensor_get(f, "enc.w", GGUF_MASK_FLOAT, 3, NE(8, 4, 2), &t);
    CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "shape"), "%s", steno_last_error());
    st = gguf_tensor_get(f, "enc.w", GGUF_MASK_FLOAT, 1, NE(-1), &t);
    CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "expected [*]"), "%s", steno_last_error());
    st = gguf_tensor_get(f, "enc.q", GGUF_MASK_FLOAT, 2, NE(32, 2), &t);
    CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "'enc.q' is Q8_0, expected F32, F16 or BF16"),
          "%s", steno_last_error());
    st = gguf_tensor_get(f, "enc.w", GGUF_MASK(GGUF_TYPE_F32), 2, NE(8, 4), &t);
    CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "is F16, expected F32"), "%s",
          steno_last_error());
    st = gguf_tensor_get(f, "enc.w", GGUF_MASK_FLOAT, 5, NE(8, 4, 1, 1, 1), &t);
    CHECK(st == STENO_ERR_INVALID, "n_dims 5 is a caller bug: %d", st);
    gguf_close(f);
  }
  free(p);
}

/* ---- files on disk and steno_file_print ---- */

static void tmp_path(char *buf, size_t n, const char *what) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, n, "%s/steno_test_gguf_%d_%s", dir && *dir ? dir : "/tmp", (int)getpid(), what);
}

static void test_files(void) {
  char path[512], dir[512], empty[512];
  tmp_path(path, sizeof path, "ok.gguf");
  tmp_path(dir, sizeof dir, "dir");
  tmp_path(empty, sizeof empty, "empty.gguf");

  gguf_writer *w = small_file();
  const char *toks[12] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"};
  gw_arr_str(w, "tokenizer.ggml.tokens", toks, 12);
  gw_str(w, "general.description", "a string of more than sixty-four bytes, which the listing cuts off after sixty-four");
  gw_bool(w, "toy.flag", true);
  CHECK(gw_write_file(w, path) == 0, "write %s", path);
  gw_free(w);

  gguf_file *f = NULL;
  CHECK_OK(gguf_open(&f, path));
  if (f) {
    CHECK(!strcmp(f->name, path) && f->n_tensors == 2 && f->n_kv == 6, "mapped file");
    const gguf_tensor *t;
    CHECK_OK(gguf_tensor_get(f, "tensor.a", GGUF_MASK(GGUF_TYPE_F32), 2, NE(8, 2), &t));
    float x[16], want[16];
    fill(want, 16, 1);
    if (t && !gguf_tensor_to_f32(t, x)) check_close("mapped tensor.a", x, want, 16, 0);
    gguf_close(f);
  }

  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  CHECK_OK(steno_file_print(path, out));
  fclose(out);
  if (verbose) fputs(text, stdout);
  const char *want[] = {
      "GGUF v3",
      "alignment 32",
      "general.architecture: STRING = \"toy\"\n",
      "toy.width: UINT32 = 8\n",
      "toy.list: [3] INT32 = 1, 2, 3\n",
      "toy.flag: BOOL = true\n",
      "tokenizer.ggml.tokens: [12] STRING = \"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", ... (+4 more)\n",
      "cuts o\"... (83 bytes)",
      "tensor.a",
      "[8, 2]",
      "[8]",
      "F16",
      "2 tensors, 80 bytes",
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    CHECK(text && strstr(text, want[i]), "listing lacks '%s':\n%s", want[i], text ? text : "");
  free(text);

  /* failures: missing file, a directory, an empty file, a bad file */
  out = fopen("/dev/null", "w");
  int st = gguf_open(&f, "/nonexistent/steno.gguf");
  CHECK(st == STENO_ERR_IO && f == NULL && strstr(steno_last_error(), "cannot open"), "%s",
        steno_last_error());
  st = steno_file_print("/nonexistent/steno.gguf", out);
  CHECK(st == STENO_ERR_IO, "print missing: %d", st);
  CHECK(mkdir(dir, 0700) == 0, "mkdir");
  st = gguf_open(&f, dir);
  CHECK(st == STENO_ERR_IO && strstr(steno_last_error(), "not a regular file"), "%s", steno_last_error());
  FILE *e = fopen(empty, "w");
  if (e) fclose(e);
  st = gguf_open(&f, empty);
  CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), "empty file"), "%s", steno_last_error());
  st = steno_file_print(empty, out);
  CHECK(st == STENO_ERR_FORMAT, "print empty: %d", st);
  if (truncate(path, 100) == 0) {
    st = steno_file_print(path, out);
    CHECK(st == STENO_ERR_FORMAT && strstr(steno_last_error(), path), "print truncated: %s",
          steno_last_error());
  }
  fclose(out);
  remove(path);
  remove(empty);
  rmdir(dir);
}

/* ---- malformed files ---- */

/* Every strict prefix of a valid file fails cleanly. */
static void test_truncation(void) {
  uint8_t *p;
  size_t n;
  small_bytes(&p, &n);
  gguf_file *f = NULL;
  CHECK_OK(gguf_open_memory(&f, p, n, NULL));
  gguf_close(f);
  int bad = 0;
  for (size_t len = 0; len < n; len++) {
    uint8_t *cut = malloc(len ? len : 1); /* exact size, so ASan sees any overread */
    memcpy(cut, p, len);
    int st = gguf_open_memory(&f, len ? cut : NULL, len, "cut.gguf");
    const char *m = steno_last_error();
    bool words = strstr(m, "truncated") || strstr(m, "past end") || strstr(m, "empty") ||
                 strstr(m, "not a GGUF");
    if (st != STENO_ERR_FORMAT || f || !words) {
      if (bad++ < 5) fprintf(stderr, "prefix %zu of %zu: status %d, '%s'\n", len, n, st, m);
    }
    if (!st) gguf_close(f);
    free(cut);
  }
  CHECK(bad == 0, "%d of %zu prefixes did not fail cleanly", bad, n);
  free(p);
}

/* Offsets in the small file's tensor info of `name`. */
typedef struct info_at {
  size_t n_dims, ne0, type, offset;
} info_at;

static info_at info(const uint8_t *p, size_t n, const char *name, uint32_t n_dims) {
  size_t at = after(p, n, name);
  return (info_at){at, at + 4, at + 4 + 8 * n_dims, at + 8 + 8 * n_dims};
}

static void test_header(void) {
  uint8_t *p, *q;
  size_t n;
  small_bytes(&p, &n);
  q = malloc(n);
  RESET();
  memcpy(q, "GGML", 4);
  expect_fail(q, n, "not a GGUF file", "bad magic");
  expect_fail(q, 3, "not a GGUF file", "3 bytes");
  expect_fail((const uint8_t *)"", 0, "empty", "empty");
  RESET();
  put_u32(q, 4, 1);
  expect_fail(q, n, "version 1", "version 1");
  put_u32(q, 4, 4);
  expect_fail(q, n, "version 4", "version 4");
  put_u32(q, 4, 0);
  expect_fail(q, n, "version 0", "version 0");
  put_u32(q, 4, 0x03000000);
  expect_fail(q, n, "big-endian", "big-endian");
  RESET();
  put_u32(q, 4, 2); /* v2 has the same layout */
  gguf_file *f = NULL;
  CHECK_OK(gguf_open_memory(&f, q, n, NULL));
  CHECK(f && f->version == 2, "v2 accepted");
  gguf_close(f);

  RESET();
  put_u64(q, 8, UINT64_C(1) << 62);
  expect_fail(q, n, "tensor count 4611686018427387904", "absurd tensor count");
  put_u64(q, 8, 3);
  expect_fail(q, n, "tensor", "one tensor too many");
  RESET();
  put_u64(q, 16, UINT64_C(1) << 62);
  expect_fail(q, n, "key count 4611686018427387904", "absurd key count");
  put_u64(q, 16, UINT64_MAX);
  expect_fail(q, n, "key count", "key count 2^64-1");
  RESET();
  put_u64(q, 16, 4); /* one more key than there is: the tensor infos are read as a key */
  expect_fail(q, n, "truncated", "one key too many");
  free(q);
  free(p);
}

static void test_bad_keys(void) {
  uint8_t *p, *q;
  size_t n;
  small_bytes(&p, &n);
  q = malloc(n);
  RESET();
  put_u64(q, 24, UINT64_C(1) << 62); /* the first key's name length */
  expect_fail(q, n, "truncated: key name of 4611686018427387904 bytes", "absurd key length");
  RESET();
  put_u64(q, 24, 0);
  expect_fail(q, n, "key #0", "empty key");
  RESET();
  q[24 + 8 + 3] = 0; /* "gen\0ral.architecture" */
  expect_fail(q, n, "NUL", "NUL in key");
  RESET();
  size_t v = after(q, n, "general.architecture");
  put_u64(q, v + 4, UINT64_C(1) << 62);
  expect_fail(q, n, "key 'general.architecture': file truncated: string of 4611686018427387904", "absurd string length");
  put_u64(q, v + 4, UINT64_MAX);
  expect_fail(q, n, "truncated", "string length 2^64-1");
  RESET();
  put_u32(q, v, 13);
  expect_fail(q, n, "unknown value type 13", "value type 13");
  put_u32(q, v, UINT32_MAX);
  expect_fail(q, n, "unknown value type", "value type 2^32-1");
  RESET();
  size_t a = after(q, n, "toy.list"); /* type, element type, count */
  put_u64(q, a + 8, UINT64_C(1) << 62);
  expect_fail(q, n, "key 'toy.list': file truncated or corrupt: 4611686018427387904 INT32", "absurd array length");
  put_u64(q, a + 8, 4);
  expect_fail(q, n, "truncated", "array one too long");
  RESET();
  put_u32(q, a + 4, GGUF_VAL_ARRAY);
  expect_fail(q, n, "nested arrays", "nested array");
  put_u32(q, a + 4, 77);
  expect_fail(q, n, "unknown array element type 77", "array element type 77");
  free(q);
  free(p);

  /* duplicate keys, written as such */
  gguf_writer *w = gw_new();
  gw_u32(w, "dup.key", 1);
  gw_str(w, "other", "x");
  gw_i32(w, "dup.key", 2);
  build(w, &p, &n);
  gw_free(w);
  expect_fail(p, n, "key 'dup.key' appears twice (#0 and #2)", "duplicate key");
  free(p);

  /* general.alignment: UINT32, a power of two */
  const uint32_t bad[] = {0, 3, 48, 0x80000001u};
  for (size_t i = 0; i < 4; i++) {
    w = small_file();
    gw_u32(w, "general.alignment", bad[i]);
    build(w, &p, &n);
    gw_free(w);
    expect_fail(p, n, "not a power of two", "bad alignment");
    free(p);
  }
  w = small_file();
  gw_i32(w, "general.alignment", 32);
  build(w, &p, &n);
  gw_free(w);
  expect_fail(p, n, "'general.alignment': is INT32, must be UINT32", "alignment INT32");
  free(p);
}

static void test_bad_tensors(void) {
  uint8_t *p, *q;
  size_t n;
  small_bytes(&p, &n);
  q = malloc(n);
  info_at a = info(p, n, "tensor.a", 2), b = info(p, n, "tensor.b", 1);

  RESET();
  put_u32(q, a.n_dims, 0);
  expect_fail(q, n, "tensor 'tensor.a' (#0): n_dims is 0", "n_dims 0");
  put_u32(q, a.n_dims, 5);
  expect_fail(q, n, "n_dims is 5", "n_dims 5");
  RESET();
  put_u32(q, a.type, 99);
  expect_fail(q, n, "unknown tensor type 99", "tensor type 99");
  put_u32(q, a.type, 4); /* a retired ggml id */
  expect_fail(q, n, "unknown tensor type 4", "tensor type 4");
  RESET();
  put_u64(q, a.ne0, UINT64_C(1) << 32);
  put_u64(q, a.ne0 + 8, UINT64_C(1) << 32);
  expect_fail(q, n, "element count overflows", "ne product overflow");
  RESET();
  put_u64(q, a.ne0, UINT64_C(1) << 63);
  expect_fail(q, n, "negative", "ne negative");
  RESET();
  put_u64(q, a.ne0, UINT64_C(1) << 61);
  put_u64(q, a.ne0 + 8, 2); /* 2^62 F32 elements: more bytes than size_t holds */
  expect_fail(q, n, "SIZE_MAX", "byte count overflow");
  RESET();
  put_u64(q, a.ne0, 1000);
  expect_fail(q, n, "past end of file", "tensor grows past the end");
  RESET();
  put_u32(q, a.type, GGUF_TYPE_Q8_0); /* ne[0] = 8 is not whole blocks of 32 */
  expect_fail(q, n, "ne[0] = 8 is not a multiple of the Q8_0 block size 32", "partial Q8_0 block");

  RESET();
  uint64_t off;
  memcpy(&off, q + b.offset, 8);
  put_u64(q, b.offset, off + 4);
  expect_fail(q, n, "tensor 'tensor.b' (#1): offset 68 is not a multiple of the alignment 32", "unaligned offset");
  put_u64(q, b.offset, off + 4096);
  expect_fail(q, n, "tensor 'tensor.b' (#1): data [", "offset past the end");
  expect_fail(q, n, "past end of file", "offset past the end (words)");
  put_u64(q, b.offset, UINT64_MAX - 31);
  expect_fail(q, n, "overflows", "offset near 2^64");
  RESET();
  put_u64(q, b.offset, 32); /* tensor.a is [0, 64) */
  expect_fail(q, n, "overlaps tensor 'tensor.a' (#0) [0, 64)", "overlap");
  put_u64(q, b.offset, 0);
  expect_fail(q, n, "overlaps", "same offset");
  RESET();
  memcpy(q + b.n_dims - 1, "a", 1); /* "tensor.b" becomes a second "tensor.a" */
  expect_fail(q, n, "tensor 'tensor.a' appears twice (#0 and #1)", "duplicate tensor name");
  RESET();
  put_u64(q, b.n_dims - 16, 0); /* tensor.b's name length */
  expect_fail(q, n, "empty tensor name", "empty tensor name");
  free(q);
  free(p);

  /* a tensor of zero elements is allowed, and overlaps nothing */
  gguf_writer *w = gw_new();
  float x[8] = {0};
  gw_tensor_f32(w, "full", GGUF_TYPE_F32, 1, NE(8), x);
  gw_tensor(w, "empty", GGUF_TYPE_F32, 2, NE(0, 4), NULL, 0);
  build(w, &p, &n);
  gw_free(w);
  gguf_file *f = NULL;
  CHECK_OK(gguf_open_memory(&f, p, n, NULL));
  CHECK(f && f->tensors[1].nelem == 0 && f->tensors[1].nbytes == 0, "empty tensor");
  gguf_close(f);
  free(p);
}

/* Random damage to a valid file: whatever the reader says, it must not crash
 * (ASan/UBSan builds check the reads) and a failure must carry a message. */
static void test_random_damage(void) {
  uint8_t *p;
  size_t n;
  small_bytes(&p, &n);
  uint8_t *q = malloc(n);
  uint32_t s = 12345;
  int opened = 0, failed = 0, silent = 0;
  for (int iter = 0; iter < 20000; iter++) {
    memcpy(q, p, n);
    int flips = 1 + iter % 4;
    for (int k = 0; k < flips; k++) {
      s ^= s << 13, s ^= s >> 17, s ^= s << 5;
      size_t at = s % n;
      q[at] = (uint8_t)(iter & 1 ? s >> 8 : q[at] ^ (1u << (s >> 24) % 8));
    }
    gguf_file *f = NULL;
    int st = gguf_open_memory(&f, q, n, "x");
    if (st == STENO_OK) {
      opened++;
      for (size_t i = 0; i < f->n_tensors; i++) {
        float out[64];
        if (f->tensors[i].nelem <= 64) (void)gguf_tensor_to_f32(&f->tensors[i], out);
      }
      gguf_close(f);
    } else {
      failed++;
      silent += steno_last_error()[0] == 0;
    }
  }
  CHECK(silent == 0, "%d failures without a message", silent);
  CHECK(failed > 0, "damage never detected (%d opened)", opened);
  if (verbose) printf("  random damage: %d opened, %d failed\n", opened, failed);
  free(q);
  free(p);
}

int main(void) {
  verbose = getenv("STENO_TEST_VERBOSE") != NULL;
  test_values();
  test_alignment(32, false);
  test_alignment(32, true);
  test_alignment(64, true);
  test_alignment(256, true);
  test_traits();
  test_to_f32();
  test_writer_conversions();
  test_tensor_get();
  test_files();
  test_truncation();
  test_header();
  test_bad_keys();
  test_bad_tensors();
  test_random_damage();
  return check_done();
}
