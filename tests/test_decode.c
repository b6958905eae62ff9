/* gemv, embed, attend, pack: the seed's gemv_and_embed and attend_and_pack
 * tests, every weight type and epilogue, dual outputs and offsets, Whisper's
 * vocabulary head, attention at the head shapes of Whisper and Moonshine over
 * 1..1500 keys, bit-exact packing, and bad arguments; ts_greedy (Whisper's
 * greedy step) against decode/whisper.c's rules on random logits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "decode/whisper.h"
#include "gpu/decode.h"
#include "gpu_test.h"
#include "quant.h"
#include "steno.h"

static const gpu_epi epilogues[] = {GPU_EPI_BIAS, GPU_EPI_SILU,          GPU_EPI_RELU, GPU_EPI_RESIDUAL,
                                    GPU_EPI_GELU, GPU_EPI_GELU_RESIDUAL, GPU_EPI_SCALE,
                                    GPU_EPI_RELU2};
#define NEPI 8

/* A random [n][k] weight in type t (seed 1), its exact values in *wf, loaded with `nbias`
 * biases from `bias`. */
static void load(gpu_wtype t, size_t n, size_t k, const float *bias, size_t nbias, float **wf,
                 gpu_linear *l) {
  float *w = test_random(n * k, 1);
  uint8_t *bytes = quant_encode(t, w, n * k);
  quant_decode(t, bytes, n * k, w);
  *wf = w;
  gpu_weight part = {bytes, (uint32_t)n};
  CHECK_OK(gpu_linear_new(test_device(), t, (uint32_t)k, &part, 1, bias, nbias, l));
  free(bytes);
}

/* gemv of a (at a_off in its buffer) into c from c_off, for each of `nepi` epilogues. */
static void gemv_case(gpu_wtype t, size_t n, size_t k, size_t nbias, int nepi, uint32_t a_off,
                      uint32_t c_off) {
  float *bias = test_random(nbias ? nbias : 1, 2), *w;
  gpu_linear l;
  load(t, n, k, bias, nbias, &w, &l);
  size_t padded = l.n, width = gpu_linear_width(&l), dual = width - padded;
  float *a = test_random(a_off + k, 3);
  float *dots = test_floats(n);
  for (size_t j = 0; j < n; j++) {
    double s = 0;
    for (size_t x = 0; x < k; x++) s += (double)a[a_off + x] * w[j * k + x];
    dots[j] = (float)s;
  }
  float *c0 = test_random(c_off + width + 5, 4); /* 5 more values that must stay */
  gpu_buffer *ab = test_upload(a, a_off + k);
  /* gemv.comp, then gemv_fast where it passed its probe. */
  gpu_device *d = test_device();
  for (int ef = 0; ef < 2 * nepi; ef++) {
    int e = ef % nepi, fast = ef / nepi;
    if (fast && !gpu_fast_passed(d, GPU_FAST_GEMV)) break;
    gpu_set_fast(d, fast);
    gpu_epi epi = nepi == 1 ? GPU_EPI_BIAS : epilogues[e];
    float alpha = epi == GPU_EPI_SCALE ? 1.75f : 0.5f;
    float *want = test_floats(c_off + width + 5);
    memcpy(want, c0, (c_off + width + 5) * sizeof *want);
    for (size_t j = 0; j < padded; j++) {
      float v = j < n ? (nbias ? bias[j] : 0) + dots[j] : 0;
      want[c_off + j] = ref_epilogue(epi, alpha, v, c0[c_off + j]);
    }
    for (size_t j = 0; j < dual; j++) want[c_off + padded + j] = bias[n + j] + dots[j];
    gpu_buffer *cb = test_upload(c0, c_off + width + 5);
    gpu_rec *rec = test_rec();
    gpu_gemv(rec, ab, a_off, &l, cb, c_off, epi, alpha);
    float *got = test_run_read(rec, cb, c_off + width + 5);
    char what[128];
    snprintf(what, sizeof what, "gemv%s %s n=%zu k=%zu bias=%zu epilogue=%d a_off=%u c_off=%u",
             fast ? "_fast" : "", quant_names[t], n, k, nbias, epi, a_off, c_off);
    check_close(what, got, want, c_off + width + 5, KERNEL_TOL);
    free(got);
    free(want);
    gpu_rec_free(rec);
    gpu_buffer_free(cb);
  }
  gpu_set_fast(d, true);
  gpu_buffer_free(ab);
  gpu_linear_free(&l);
  free(a);
  free(bias);
  free(dots);
  free(c0);
  free(w);
}

/* The seed's embed: row 7 + pos[k..2k) + bias; then without positions, into c at 10. */
static void embed_case(gpu_wtype t, size_t k) {
  const size_t n = 100;
  float *bias = test_random(n, 2), *pos = test_random(2 * k, 6), *w;
  gpu_linear l;
  load(t, n, k, bias, n, &w, &l);
  gpu_buffer *pb = test_upload(pos, 2 * k);
  float *want = test_floats(10 + k);
  for (size_t i = 0; i < k; i++) want[i] = w[7 * k + i] + pos[k + i] + bias[i];
  gpu_buffer *cb = test_upload(want, 10 + k); /* overwritten below */
  gpu_rec *rec = test_rec();
  gpu_embed(rec, &l, 7, pb, (uint32_t)k, cb, 0);
  float *got = test_run_read(rec, cb, k);
  char what[64];
  snprintf(what, sizeof what, "embed %s k=%zu token 7 + positions", quant_names[t], k);
  check_close(what, got, want, k, KERNEL_TOL);
  free(got);

  for (size_t i = 0; i < 10; i++) want[i] = -5.0f;
  for (size_t i = 0; i < k; i++) want[10 + i] = w[99 * k + i] + bias[i];
  CHECK_OK(gpu_upload(cb, 0, want, 10 * sizeof *want));
  gpu_rec_begin(rec);
  gpu_embed(rec, &l, 99, NULL, 0, cb, 10);
  got = test_run_read(rec, cb, 10 + k);
  snprintf(what, sizeof what, "embed %s k=%zu token 99, no positions, at 10", quant_names[t], k);
  check_close(what, got, want, 10 + k, KERNEL_TOL);
  free(got);

  /* The token from a buffer of ids: ids[2] = 42; an id past the table is row 0. */
  uint32_t idv[4] = {5, 99, 42, 1000};
  gpu_buffer *ib;
  CHECK_OK(gpu_buffer_from(test_device(), idv, sizeof idv, &ib));
  for (int at = 2; at < 4; at++) {
    uint32_t row = at == 2 ? 42 : 0;
    for (size_t i = 0; i < k; i++) want[i] = w[row * k + i] + pos[i] + bias[i];
    gpu_rec_begin(rec);
    gpu_embed_from(rec, &l, ib, (uint32_t)at, pb, 0, cb, 0);
    got = test_run_read(rec, cb, k);
    snprintf(what, sizeof what, "embed %s k=%zu, token ids[%d] = %u", quant_names[t], k, at, idv[at]);
    check_close(what, got, want, k, KERNEL_TOL);
    free(got);
  }
  gpu_rec_begin(rec);
  gpu_embed_from(rec, &l, ib, 4, pb, 0, cb, 0); /* ids holds 4 */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "embed from ids[4] of 4 accepted");
  gpu_buffer_free(ib);
  gpu_rec_free(rec);
  gpu_buffer_free(pb);
  gpu_buffer_free(cb);
  gpu_linear_free(&l);
  free(bias);
  free(pos);
  free(w);
  free(want);
}

/* attend over a cache filled by gpu_pack from random f32 (K/V rows growing with j when `grow`, so
 * later blocks raise the running max); reference as the seed: q and K/V rounded to f16. */
static void attend_case(size_t heads, size_t hd, const uint32_t *ns, int nn, uint32_t off,
                        int grow) {
  size_t d = heads * hd, maxn = ns[nn - 1];
  float *kv = test_random(maxn * 2 * d, 7), *q = test_random(off + d, 8);
  for (size_t j = 0; grow && j < maxn; j++)
    for (size_t i = 0; i < 2 * d; i++) kv[j * 2 * d + i] *= 1.0f + (float)j / 64;
  gpu_buffer *qb = test_upload(q, off + d), *xb = test_upload(kv, maxn * 2 * d);
  gpu_buffer *cache = test_random_buffer(off + maxn * d, 9);
  gpu_buffer *scratch = test_random_buffer(gpu_attend_scratch((uint32_t)maxn, heads, hd), 11);
  float *o0 = test_random(off + d + 3, 10);
  for (int ni = 0; ni < nn; ni++) {
    size_t n = ns[ni];
    float *want = test_floats(off + d + 3);
    memcpy(want, o0, (off + d + 3) * sizeof *want);
    float *s = test_floats(n);
    for (size_t h = 0; h < heads; h++) {
      float mx = -INFINITY, sum = 0;
      for (size_t j = 0; j < n; j++) {
        float dot = 0;
        for (size_t c = 0; c < hd; c++)
          dot += f16_round(q[off + h * hd + c]) * f16_round(kv[j * 2 * d + h * hd + c]);
        s[j] = dot / sqrtf((float)hd);
        mx = fmaxf(mx, s[j]);
      }
      for (size_t j = 0; j < n; j++) sum += s[j] = expf(s[j] - mx);
      for (size_t c = 0; c < hd; c++) {
        float v = 0;
        for (size_t j = 0; j < n; j++) v += s[j] * f16_round(kv[j * 2 * d + d + h * hd + c]);
        want[off + h * hd + c] = v / sum;
      }
    }
    for (int split = 0; split < 2; split++) {
      gpu_buffer *ob = test_upload(o0, off + d + 3);
      gpu_rec *rec = test_rec();
      gpu_pack(rec, xb, 0, 0, cache, off, 0, 1, (uint32_t)(maxn * d));
      gpu_attend(rec, qb, off, cache, off, ob, off, (uint32_t)n, (uint32_t)heads, (uint32_t)hd,
                 split ? scratch : NULL);
      float *got = test_run_read(rec, ob, off + d + 3);
      char what[128];
      snprintf(what, sizeof what, "attend heads=%zu head_dim=%zu n=%zu offsets=%u%s%s", heads, hd,
               n, off, grow ? " growing" : "", split ? " split" : "");
      check_close(what, got, want, off + d + 3, KERNEL_TOL);
      free(got);
      gpu_rec_free(rec);
      gpu_buffer_free(ob);
    }
    free(want);
    free(s);
  }
  gpu_buffer_free(scratch);
  gpu_buffer_free(qb);
  gpu_buffer_free(xb);
  gpu_buffer_free(cache);
  free(kv);
  free(q);
  free(o0);
}

/* pack is bit-exact: `rows` rows of `pairs` from x[src + r·ss..] to y[dst + r·ds..], every other
 * word untouched. */
static void pack_case(const float *x, size_t nx, uint32_t rows, uint32_t pairs, uint32_t src,
                      uint32_t ss, uint32_t dst, uint32_t ds, bool clamp) {
  size_t ny = dst + (size_t)(rows - 1) * ds + pairs + 4;
  uint32_t *y0 = malloc(ny * 4), *want = malloc(ny * 4), *got = malloc(ny * 4);
  for (size_t i = 0; i < ny; i++) want[i] = y0[i] = 0xdeadbeefu + (uint32_t)i;
  for (size_t r = 0; r < rows; r++)
    for (size_t i = 0; i < pairs; i++) {
      const float *v = x + src + r * ss + 2 * i;
      float v0 = clamp ? fminf(fmaxf(v[0], -65504.0f), 65504.0f) : v[0];
      float v1 = clamp ? fminf(fmaxf(v[1], -65504.0f), 65504.0f) : v[1];
      want[dst + r * ds + i] = f32_to_f16(v0) | (uint32_t)f32_to_f16(v1) << 16;
    }
  gpu_buffer *xb = test_upload(x, nx), *yb;
  CHECK_OK(gpu_buffer_from(test_device(), y0, ny * 4, &yb));
  gpu_rec *rec = test_rec();
  if (clamp) gpu_pack_clamped(rec, xb, src, ss, yb, dst, ds, rows, pairs);
  else gpu_pack(rec, xb, src, ss, yb, dst, ds, rows, pairs);
  CHECK_OK(gpu_rec_run(rec));
  CHECK_OK(gpu_download(yb, 0, got, ny * 4));
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < ny; i++)
    if (got[i] != want[i] && !bad++) first = i;
  CHECK(!bad, "pack%s %u×%u from %u/%u to %u/%u: %zu words off, first [%zu] %08x want %08x",
        clamp ? " clamped" : "", rows, pairs, src, ss, dst, ds, bad, first, got[first], want[first]);
  gpu_rec_free(rec);
  gpu_buffer_free(xb);
  gpu_buffer_free(yb);
  free(y0);
  free(want);
  free(got);
}

static void pack_cases(void) {
  float *x = test_random(20000, 7);
  pack_case(x, 20000, 1, 10, 3, 0, 5, 0, false);         /* the seed's */
  pack_case(x, 20000, 7, 10, 3, 31, 5, 13, false);       /* rows of a wider buffer */
  pack_case(x, 20000, 3, 3000, 1, 6001, 2, 3001, false); /* more than a workgroup per row */
  /* Ties to even (1 + 2⁻¹¹ → 1, 1 + 3·2⁻¹¹ → 1 + 2⁻⁹), f16's least normal, a subnormal. */
  float ties[8] = {1.0f + 0x1p-11f, 1.0f + 0x3p-11f, -1.0f - 0x1p-11f, 2048.0f + 1.0f,
                   0x1p-14f, 0x1p-20f, -0.0f, 65504.0f};
  pack_case(ties, 8, 1, 4, 0, 0, 0, 0, false);
  /* Clamped (gemm_tc's a in f16): past ±65504 → ±65504, not infinity; the rest as above. */
  float big[8] = {1e6f, -7e4f, 65520.0f, -65505.0f, 65504.0f, 1.5f, -0.0f, 0x1p-20f};
  pack_case(big, 8, 1, 4, 0, 0, 0, 0, true);
  pack_case(ties, 8, 1, 4, 0, 0, 0, 0, true);
  pack_case(x, 20000, 7, 10, 3, 31, 5, 13, true);
  free(x);
}

/* ---- ts_greedy ---- */

/* A vocabulary for ts_greedy's cases: Whisper's multilingual ids, or a small one. */
typedef struct {
  int vocab, eot, no_ts;
} ts_vocab;

/* One step: logits x, the ids gen[0..n), every-step and first-step suppression lists, the
 * end of text masked or not. The GPU's id must be the host's (wsearch_process, then
 * wsearch_choose at T = 0) and its log-probability within 1e-5 of the host's (double;
 * NaN where the host's is). */
static void ts_case(const char *what, const ts_vocab *v, const float *x, const int *gen, uint32_t n,
                    bool no_eot) {
  static const int32_t sup[] = {1, 2, 7, 90, 220}, begin[] = {220, 3};
  int V = v->vocab;
  wsearch rules = {.vocab = V, .eot = v->eot, .no_timestamps = v->no_ts, .suppress = sup,
                   .n_suppress = 5, .begin_suppress = begin, .n_begin_suppress = 2,
                   .max_initial = 50, .timestamps = 1};
  float *h = test_floats((size_t)V);
  memcpy(h, x, (size_t)V * sizeof *h);
  wsearch_process(&rules, gen, n, h);
  if (no_eot) h[v->eot] = -INFINITY;
  int want = wsearch_choose(h, V, 0, NULL);
  double want_lp = wsearch_logprob(h, V, want);

  uint32_t words = ((uint32_t)V + 31) / 32;
  uint32_t *bits = calloc(2 * (size_t)words, sizeof *bits), *g = calloc(n + 1, sizeof *g);
  for (int i = 0; i < 5; i++) bits[sup[i] / 32] |= 1u << (sup[i] % 32);
  for (int i = 0; i < 2; i++) bits[words + (uint32_t)begin[i] / 32] |= 1u << (begin[i] % 32);
  for (uint32_t i = 0; i < n; i++) g[i] = (uint32_t)gen[i];
  g[n] = 0xdeadu;
  gpu_device *d = test_device();
  gpu_buffer *xb = test_upload(x, (size_t)V), *bb, *gb, *lb = test_upload(h, n + 1);
  CHECK_OK(gpu_buffer_from(d, bits, 2 * (size_t)words * 4, &bb));
  CHECK_OK(gpu_buffer_from(d, g, (n + 1) * 4, &gb));
  gpu_ts_rules r = {.vocab = (uint32_t)V, .eot = (uint32_t)v->eot, .no_timestamps = (uint32_t)v->no_ts,
                    .max_initial = 50, .timestamps = true, .no_eot = no_eot, .blocked = bb,
                    .words = words};
  gpu_buffer *scratch = test_random_buffer(gpu_ts_greedy_scratch((uint32_t)V), 77);
  gpu_rec *rec = test_rec();
  gpu_ts_greedy(rec, xb, &r, gb, lb, n, scratch);
  CHECK_OK(gpu_rec_run(rec));
  uint32_t got = 0;
  float got_lp = 0;
  CHECK_OK(gpu_download(gb, (size_t)n * 4, &got, 4));
  CHECK_OK(gpu_download(lb, (size_t)n * 4, &got_lp, 4));
  CHECK(got == (uint32_t)want, "ts_greedy %s (n %u): id %u, host %d", what, n, got, want);
  CHECK((isnan(got_lp) && isnan(want_lp)) || fabs(got_lp - want_lp) <= 1e-5 * (1 + fabs(want_lp)),
        "ts_greedy %s (n %u): log-probability %.7g, host %.7g", what, n, got_lp, want_lp);
  gpu_rec_free(rec);
  gpu_buffer_free(xb), gpu_buffer_free(bb), gpu_buffer_free(gb), gpu_buffer_free(lb);
  gpu_buffer_free(scratch);
  free(h), free(bits), free(g);
}

/* Random logits (scale s) with the timestamps' raised by ts_bias. */
static float *ts_logits(const ts_vocab *v, float s, float ts_bias, uint32_t seed) {
  float *x = test_random((size_t)v->vocab, seed);
  for (int i = 0; i < v->vocab; i++) x[i] = s * x[i] + (i > v->no_ts ? ts_bias : 0);
  return x;
}

static void ts_greedy_cases(void) {
  const ts_vocab vocabs[] = {{51866, 50257, 50363}, {300, 200, 210}};
  for (int vi = 0; vi < 2; vi++) {
    const ts_vocab *v = &vocabs[vi];
    int tb = v->no_ts + 1, V = v->vocab;
    int text[] = {100, 150, 11}, open[] = {tb + 5, 100, tb + 10}, closed[] = {100, tb + 7, tb + 9};
    int one_ts[] = {tb + 3};
    for (uint32_t seed = 1; seed <= 3; seed++) {
      float *x = ts_logits(v, 5, 0, seed), *hot = ts_logits(v, 1, 2, seed + 10);
      ts_case("first step", v, x, NULL, 0, false);
      ts_case("first step, timestamps likely", v, hot, NULL, 0, false);
      ts_case("text so far", v, x, text, 3, false);
      ts_case("text so far, timestamps likely", v, hot, text, 3, false);
      ts_case("an open pair", v, x, open, 3, false);
      ts_case("a closed pair", v, x, closed, 3, false);
      ts_case("a closed pair, timestamps likely", v, hot, closed, 3, false);
      ts_case("one timestamp", v, hot, one_ts, 1, false);
      x[v->eot] = 100;
      ts_case("end of text best", v, x, text, 3, false);
      ts_case("end of text best, masked", v, x, text, 3, true);
      x[40] = x[60] = x[296] = 200; /* a tie: the lowest id (296: 40's invocation again) */
      ts_case("a tie", v, x, text, 3, false);
      if (V > 3000) {
        x[2100] = x[3100] = 300; /* ... in other workgroups */
        ts_case("a tie across workgroups", v, x, text, 3, false);
      }
      free(x), free(hot);
    }
    /* A history longer than the workgroup: its last timestamp at 270. */
    int *gen = calloc(300, sizeof *gen);
    for (int i = 0; i < 300; i++) gen[i] = 100 + i % 50;
    gen[10] = tb + 1, gen[270] = tb + 40, gen[271] = 120;
    float *x = ts_logits(v, 1, 3, 9);
    ts_case("300 ids, the last timestamp at 270", v, x, gen, 272, false);
    gen[271] = tb + 41;
    ts_case("300 ids ending in a closed pair", v, x, gen, 272, false);
    /* Everything suppressed but a NaN at 0, then a NaN elsewhere. */
    for (int i = 0; i < V; i++) x[i] = -INFINITY;
    x[0] = NAN;
    ts_case("x[0] NaN, the rest masked", v, x, text, 3, false);
    x[0] = 1, x[5] = NAN;
    ts_case("a NaN skipped", v, x, text, 3, false);
    free(x), free(gen);
  }
}

/* Bad shapes become an error from gpu_rec_run, with nothing dispatched. */
static void bad_arguments(void) {
  float *bias = test_random(100, 2), *w;
  gpu_linear l;
  load(GPU_F16, 100, 96, bias, 100, &w, &l);
  gpu_buffer *small = test_random_buffer(64, 50), *big = test_random_buffer(1 << 16, 51);
  gpu_rec *rec = test_rec();
  gpu_gemv(rec, big, 0, &l, small, 0, GPU_EPI_BIAS, 0); /* c holds 64 < 128 */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "gemv into a small c accepted");
  gpu_rec_begin(rec);
  gpu_gemv(rec, small, 0, &l, big, 0, GPU_EPI_BIAS, 0); /* a holds 64 < 96 */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "gemv from a small a accepted");
  gpu_rec_begin(rec);
  gpu_embed(rec, &l, 100, NULL, 0, big, 0); /* token past the table */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "embed of token 100 of 100 accepted");
  gpu_rec_begin(rec);
  gpu_attend(rec, big, 0, big, 0, big, 0, 10, 2, 41, NULL); /* odd head_dim */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "attend with head_dim 41 accepted");
  gpu_rec_begin(rec);
  gpu_attend(rec, big, 0, big, 0, big, 0, 0, 2, 40, NULL); /* no keys */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "attend over 0 keys accepted");
  gpu_rec_begin(rec);
  gpu_attend(rec, big, 0, small, 0, big, 0, 10, 2, 40, NULL); /* cache holds 64 < 800 */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "attend over a small cache accepted");
  gpu_rec_begin(rec);
  gpu_attend(rec, big, 0, big, 0, big, 0, 300, 2, 40, small); /* scratch holds 64 < 168 */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "attend with a small scratch accepted");
  gpu_rec_begin(rec);
  gpu_pack(rec, big, 0, 0, small, 60, 0, 1, 5); /* past y's end */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "pack past the end accepted");
  CHECK(gpu_rec_dispatches(rec) == 0, "%d dispatches", gpu_rec_dispatches(rec));
  gpu_rec_free(rec);
  gpu_buffer_free(small);
  gpu_buffer_free(big);
  gpu_linear_free(&l);
  free(bias);
  free(w);
}

int main(void) {
  gpu_device *d = test_device();
  printf("gemv (subgroups): %s\n", gpu_fast_passed(d, GPU_FAST_GEMV) ? "probe passed, tested too"
                                   : gpu_fast_offered(d, GPU_FAST_GEMV) ? "probe FAILED"
                                                                          : "not offered");
  /* Subgroup arithmetic is all it needs: where offered, a failed probe is our bug. */
  if (gpu_fast_offered(d, GPU_FAST_GEMV))
    CHECK(gpu_fast_passed(d, GPU_FAST_GEMV), "gemv_fast failed its probe");
  for (gpu_wtype t = GPU_F32; t <= GPU_Q8_0; t++) {
    gemv_case(t, 100, 96, 100, NEPI, 0, 3); /* the seed's: outputs from 3 on */
    gemv_case(t, 100, 96, 0, 1, 5, 0);      /* zero bias, a at 5 */
    gemv_case(t, 100, 96, 164, 1, 0, 7);    /* dual outputs */
    gemv_case(t, 4096, 1024, 4096, NEPI, 0, 0);
    embed_case(t, 96);
    if (t == GPU_Q8_0) continue; /* Q8_0 rows are whole blocks of 32 */
    gemv_case(t, 100, 37, 100, NEPI, 1, 0); /* rows stored padded to 64 weights */
    gemv_case(t, 70, 162, 70, 1, 0, 0);
    gemv_case(t, 64, 70, 128, NEPI, 3, 64); /* gemv_fast's probe: a from 3, the last chunk cut */
    embed_case(t, 37);
  }
  gemv_case(GPU_F16, 51866, 1280, 0, 1, 0, 0); /* Whisper's vocabulary head */

  const uint32_t seed_ns[] = {1, 37, 300, 1500}, block_ns[] = {255, 256, 257, 600};
  attend_case(2, 40, seed_ns, 4, 0, 0); /* the seed's */
  attend_case(6, 64, seed_ns, 4, 0, 0);
  attend_case(20, 64, seed_ns, 4, 0, 0);
  attend_case(20, 128, seed_ns, 4, 0, 0);
  attend_case(2, 128, block_ns, 4, 33, 0);
  attend_case(6, 40, block_ns, 4, 0, 1);
  attend_case(20, 64, seed_ns + 3, 1, 0, 1);
  pack_cases();
  ts_greedy_cases();
  bad_arguments();
  return check_done();
}
