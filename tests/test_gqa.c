/* gqa: causal grouped-query attention over an f32 K/V cache and the row copy
 * that fills the cache, against plain C on random data: a prompt appended at
 * position 0 and at a later position, then tokens one at a time, at the tiny
 * fixture's shapes (4 heads over 2 of 16) and Nemotron 3.5 Transcribe's (32
 * heads over 2 of 128), over more keys than one block of 128, with an f32
 * cache (rows copied) and an f16 one (rows packed: the reference rounds K and V
 * to f16 likewise); bad shapes are errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "gpu/decode.h"
#include "gpu/gqa.h"
#include "gpu_test.h"
#include "steno.h"

/* o rows for nq queries at pos.. over cache rows K/V (kd floats each). */
static void ref_attend(const float *q, size_t qs, const float *k, const float *v, size_t kd,
                       size_t nq, size_t pos, size_t heads, size_t kvh, size_t hd, float *o,
                       size_t os) {
  float scale = 1.0f / sqrtf((float)hd);
  size_t n_max = pos + nq;
  double *s = calloc(n_max, sizeof *s);
  for (size_t i = 0; i < nq; i++)
    for (size_t h = 0; h < heads; h++) {
      size_t g = h / (heads / kvh), n = pos + i + 1;
      double mx = -INFINITY, sum = 0;
      for (size_t j = 0; j < n; j++) {
        double d = 0;
        for (size_t e = 0; e < hd; e++) d += (double)q[i * qs + h * hd + e] * k[j * kd + g * hd + e];
        s[j] = d * scale;
        if (s[j] > mx) mx = s[j];
      }
      for (size_t j = 0; j < n; j++) sum += s[j] = exp(s[j] - mx);
      for (size_t e = 0; e < hd; e++) {
        double acc = 0;
        for (size_t j = 0; j < n; j++) acc += s[j] * v[j * kd + g * hd + e];
        o[i * os + h * hd + e] = (float)(acc / sum);
      }
    }
  free(s);
}

/* A prompt of t rows at position `pos` (earlier cache rows random), then
 * `steps` tokens: q|k|v rows as the fused projection gives them, keys and
 * values copied into the cache [ctx][K | V] before each attention. */
static void gqa_case(uint32_t heads, uint32_t kvh, uint32_t hd, uint32_t pos, uint32_t t,
                     uint32_t steps, bool f16) {
  uint32_t qd = heads * hd, kd = kvh * hd, w = qd + 2 * kd + 5, n = t + steps, ctx = pos + n + 3;
  float *qkv = test_random((size_t)n * w, 81), *cache = test_random((size_t)ctx * 2 * kd, 82);
  for (size_t i = 0; i < (size_t)n * w; i++) qkv[i] *= 2;
  float *want = test_floats((size_t)n * qd), *k = test_floats((size_t)ctx * kd);
  float *v = test_floats((size_t)ctx * kd);
  for (uint32_t j = 0; j < pos; j++) { /* earlier rows: whatever the cache holds */
    memcpy(k + (size_t)j * kd, cache + (size_t)j * 2 * kd, kd * sizeof *k);
    memcpy(v + (size_t)j * kd, cache + (size_t)j * 2 * kd + kd, kd * sizeof *v);
  }
  for (uint32_t j = 0; j < n; j++) {
    memcpy(k + (size_t)(pos + j) * kd, qkv + (size_t)j * w + qd, kd * sizeof *k);
    memcpy(v + (size_t)(pos + j) * kd, qkv + (size_t)j * w + qd + kd, kd * sizeof *v);
  }
  if (f16) /* the cache's values as the kernel sees them */
    for (size_t i = 0; i < (size_t)ctx * kd; i++) k[i] = f16_round(k[i]), v[i] = f16_round(v[i]);
  ref_attend(qkv, w, k, v, kd, n, pos, heads, kvh, hd, want, qd); /* row i sees keys ≤ pos + i */
  gpu_buffer *qb = test_upload(qkv, (size_t)n * w), *cb = NULL;
  if (f16) { /* [ctx][K | V] as f16 pairs: kd words a row */
    uint32_t *packed = calloc((size_t)ctx * kd, sizeof *packed);
    for (size_t i = 0; i < (size_t)ctx * kd; i++)
      packed[i] = f32_to_f16(cache[2 * i]) | (uint32_t)f32_to_f16(cache[2 * i + 1]) << 16;
    CHECK_OK(gpu_buffer_from(test_device(), packed, (size_t)ctx * kd * sizeof *packed, &cb));
    free(packed);
  } else {
    cb = test_upload(cache, (size_t)ctx * 2 * kd);
  }
  gpu_buffer *ob = test_random_buffer((size_t)n * qd, 83);
  gpu_rec *rec = test_rec();
  for (uint32_t s = 0; s <= steps; s++) {
    uint32_t first = s ? t + s - 1 : 0, rows = s ? 1 : t;
    if (f16) gpu_pack(rec, qb, first * w + qd, w, cb, (pos + first) * kd, kd, rows, kd);
    else gpu_copy_rows(rec, qb, first * w + qd, w, cb, (pos + first) * 2 * kd, 2 * kd, rows, 2 * kd);
    gpu_gqa g = {.q = qb, .q_off = first * w, .q_stride = w, .kv = cb, .k_off = 0, .v_off = kd,
                 .kv_stride = 2 * kd, .o = ob, .o_off = first * qd, .o_stride = qd, .nq = rows,
                 .pos = pos + first, .heads = heads, .kv_heads = kvh, .hd = hd, .f16 = f16};
    gpu_gqa_attend(rec, &g);
  }
  float *got = test_run_read(rec, ob, (size_t)n * qd);
  char what[128];
  snprintf(what, sizeof what, "gqa_attend %u/%u heads of %u, %u rows at %u + %u steps, %s cache",
           heads, kvh, hd, t, pos, steps, f16 ? "f16" : "f32");
  check_close(what, got, want, (size_t)n * qd, 1e-4f);
  gpu_buffer_free(qb), gpu_buffer_free(cb), gpu_buffer_free(ob);
  gpu_rec_free(rec);
  free(qkv), free(cache), free(want), free(k), free(v), free(got);
}

static void bad_shapes(void) {
  gpu_buffer *a = test_random_buffer(1024, 91), *b = test_random_buffer(1024, 92);
  gpu_rec *rec = test_rec();
  gpu_copy_rows(rec, a, 0, 64, a, 512, 64, 2, 64); /* one buffer */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "copy_rows within one buffer runs");
  CHECK_OK(gpu_rec_begin(rec));
  gpu_gqa g = {.q = a, .q_stride = 64, .kv = b, .v_off = 32, .kv_stride = 64, .o = a,
               .o_off = 512, .o_stride = 64, .nq = 1, .pos = 3, .heads = 4, .kv_heads = 3, .hd = 16};
  gpu_gqa_attend(rec, &g); /* 4 heads over 3 */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "gqa_attend with 4 heads over 3 runs");
  CHECK_OK(gpu_rec_begin(rec));
  g.o = b, g.kv_heads = 2, g.pos = 20; /* keys up to 21 need 21·64 floats of b */
  gpu_gqa_attend(rec, &g);
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "gqa_attend past its cache runs");
  CHECK_OK(gpu_rec_begin(rec));
  g.pos = 3, g.f16 = true, g.v_off = 31; /* an odd f16 offset */
  gpu_gqa_attend(rec, &g);
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "gqa_attend at an odd f16 offset runs");
  gpu_rec_free(rec);
  gpu_buffer_free(a), gpu_buffer_free(b);
}

int main(void) {
  test_device();
  for (int f16 = 0; f16 < 2; f16++) {
    gqa_case(4, 2, 16, 0, 11, 10, f16);  /* the fixture: prompt, then generated tokens */
    gqa_case(4, 2, 16, 140, 3, 2, f16);  /* a later prompt over more than one block of keys */
    gqa_case(32, 2, 128, 0, 40, 3, f16); /* Nemotron 3.5 Transcribe */
    gqa_case(32, 2, 128, 250, 5, 1, f16);
    gqa_case(6, 3, 200, 0, 9, 2, f16);   /* head dims past 128: two per invocation */
  }
  bad_shapes();
  return check_done();
}
