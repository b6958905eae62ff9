/* gemm: every weight type, every epilogue, zero bias, stacked weights, padded
 * outputs, dual outputs, over the row counts the models use. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "gpu/internal.h"
#include "gpu_test.h"
#include "quant.h"
#include "steno.h"

static const gpu_epi epilogues[] = {GPU_EPI_BIAS, GPU_EPI_SILU,          GPU_EPI_RELU, GPU_EPI_RESIDUAL,
                                    GPU_EPI_GELU, GPU_EPI_GELU_RESIDUAL, GPU_EPI_SCALE};

/* dot[r][j] = a[r]·W[j] in double, then rounded: the reference sum. */
static float *ref_dots(const float *a, const float *w, size_t m, size_t n, size_t k) {
  float *d = test_floats(m * n);
  for (size_t r = 0; r < m; r++)
    for (size_t j = 0; j < n; j++) {
      double s = 0;
      for (size_t x = 0; x < k; x++) s += (double)a[r * k + x] * w[j * k + x];
      d[r * n + j] = (float)s;
    }
  return d;
}

/* gemm_tc's tolerance: it rounds a to f16, so it is checked against
 * f16(a)·f16(W); the margin (10× KERNEL_TOL) allows for a GPU whose f16
 * conversion rounds a few values the other way. */
#define A16_TOL 2e-4f

/* Whether gpu_gemm runs m rows of l (rows of a lda apart) on gemm_cpu, as the device is set now. */
static bool uses_gemm_cpu(const gpu_linear *l, size_t lda, size_t m) {
  gpu_gemm_plan g;
  gpu_gemm_plan_for(test_device(), l, (uint32_t)lda, (uint32_t)m, &g);
  return g.cpu;
}

/* W [n][k] as two halves stacked, with `bias` of nbias values (0, n or n + dual). */
static void one_layer(gpu_wtype t, size_t n, size_t k, const size_t *ms, int nm, const float *bias,
                      size_t nbias, int nepi) {
  float *w = test_random(n * k, 1);
  uint8_t *bytes = quant_encode(t, w, n * k);
  float *wf = test_floats(n * k), *w16 = test_floats(n * k);
  quant_decode(t, bytes, n * k, wf);
  /* The fast kernel rounds W to f16 (F32 weights never take it). */
  for (size_t i = 0; i < n * k; i++) w16[i] = f16_round(wf[i]);
  gpu_weight parts[2] = {{bytes, (uint32_t)(n / 2)},
                         {bytes + gpu_wtype_bytes(t, n / 2 * k), (uint32_t)(n - n / 2)}};
  gpu_linear l;
  CHECK_OK(gpu_linear_new(test_device(), t, (uint32_t)k, parts, 2, bias, nbias, &l));
  size_t padded = (n + 63) / 64 * 64, dual = nbias > n ? nbias - n : 0;
  size_t width = padded + dual;
  CHECK(gpu_linear_width(&l) == width, "width %u, want %zu", gpu_linear_width(&l), width);
  /* The portable kernel, then each fast variant that passed its probe, then
   * gemm_cpu (a pass numbered GPU_GEMM_VARIANTS: fast kernels on and no
   * variant forced) where it takes this layer. */
  for (int mi = 0; mi < nm * (GPU_GEMM_VARIANTS + 1); mi++) {
    bool cpu = mi / nm == GPU_GEMM_VARIANTS;
    gpu_gemm_variant v = cpu ? GPU_GEMM_AUTO : (gpu_gemm_variant)(mi / nm);
    bool fast = v != GPU_GEMM_AUTO;
    if (fast && (t == GPU_F32 || !gpu_gemm_variant_ok(test_device(), v))) continue;
    gpu_set_fast(test_device(), fast || cpu);
    gpu_gemm_force(test_device(), v);
    size_t m = ms[mi % nm];
    if (cpu && !uses_gemm_cpu(&l, k, m)) continue;
    float *a = test_random(m * k, 3), *a16 = test_floats(m * k);
    bool round_a = fast && gpu_gemm_tiles[v].a16;
    for (size_t i = 0; i < m * k; i++) a16[i] = round_a ? f16_round(a[i]) : a[i];
    float *c0 = test_random(m * width, 4);
    float *dots = ref_dots(a16, fast ? w16 : wf, m, n, k);
    gpu_buffer *ab = test_upload(a, m * k);
    for (int e = 0; e < nepi; e++) {
      float alpha = epilogues[e] == GPU_EPI_SCALE ? 1.75f : 0.5f;
      float *want = test_floats(m * width);
      for (size_t r = 0; r < m; r++)
        for (size_t j = 0; j < width; j++) {
          size_t i = r * width + j;
          if (j >= padded) {
            want[i] = bias[n + j - padded] + dots[r * n + j - padded];
            continue;
          }
          float v = j < n ? (nbias ? bias[j] : 0) + dots[r * n + j] : 0;
          want[i] = ref_epilogue(epilogues[e], alpha, v, c0[i]);
        }
      gpu_buffer *cb = test_upload(c0, m * width);
      gpu_rec *rec = test_rec();
      gpu_gemm(rec, ab, &l, cb, (uint32_t)m, epilogues[e], alpha);
      float *got = test_run_read(rec, cb, m * width);
      char what[128];
      snprintf(what, sizeof what, "gemm%s%s %s m=%zu n=%zu k=%zu bias=%zu epilogue=%d",
               fast || cpu ? " fast " : "", fast ? gpu_gemm_tiles[v].kernel : cpu ? "gemm_cpu" : "",
               quant_names[t], m, n, k,
               nbias, epilogues[e]);
      check_close(what, got, want, m * width, round_a ? A16_TOL : KERNEL_TOL);
      free(got);
      free(want);
      gpu_rec_free(rec);
      gpu_buffer_free(cb);
    }
    gpu_buffer_free(ab);
    free(a);
    free(a16);
    free(c0);
    free(dots);
  }
  gpu_set_fast(test_device(), true);
  gpu_gemm_force(test_device(), GPU_GEMM_AUTO);
  gpu_linear_free(&l);
  free(w);
  free(bytes);
  free(wf);
  free(w16);
}

/* weights_f16 (the f16 copy gemm_tc reads, made at load): every weight
 * rounded to nearest even exactly as the host's f32_to_f16, zeros past the
 * rows and past k, values spread over f16's normal, subnormal and overflow range. */
static void to_f16(gpu_wtype t, size_t n, size_t k) {
  float *w = test_random(n * k, 9);
  for (size_t i = 0; i < n * k; i++) w[i] *= i % 5 == 0 ? 1e-5f : i % 7 == 0 ? 3e5f : 4.0f;
  uint8_t *bytes = quant_encode(t, w, n * k);
  float *wf = test_floats(n * k);
  quant_decode(t, bytes, n * k, wf);
  gpu_weight part = {bytes, (uint32_t)n};
  gpu_linear l;
  CHECK_OK(gpu_linear_new(test_device(), t, (uint32_t)k, &part, 1, NULL, 0, &l));
  size_t count = (size_t)l.n * l.wk;
  gpu_buffer *dst;
  CHECK_OK(gpu_buffer_new(test_device(), count * 2, &dst));
  gpu_rec *rec = test_rec();
  CHECK_OK(gpu_rec_begin(rec));
  gpu_weights_to_f16(rec, &l, dst);
  CHECK_OK(gpu_rec_run(rec));
  uint16_t *got = malloc(count * 2);
  CHECK_OK(gpu_download(dst, 0, got, count * 2));
  size_t bad = 0;
  for (size_t r = 0; r < l.n; r++)
    for (size_t x = 0; x < l.wk; x++) {
      uint16_t want = r < n && x < k ? f32_to_f16(wf[r * k + x]) : 0;
      bad += got[r * l.wk + x] != want;
    }
  CHECK(bad == 0, "%s %zux%zu: %zu of %zu f16 weights differ", quant_names[t], n, k, bad, count);
  gpu_rec_free(rec);
  gpu_buffer_free(dst);
  gpu_linear_free(&l);
  free(got);
  free(wf);
  free(bytes);
  free(w);
}

/* a's rows apart by more than k (a slice of a wider activation), F32
 * weights (which the fast GEMM never takes): the portable kernel, then
 * gemm_cpu where it passed its probe. lda % 4 != 0 is gemm_cpu's unaligned
 * read, k % 32 != 0 its last chunk cut at k. */
static void strided(size_t lda, size_t k) {
  const size_t n = 64, m = 37;
  float *w = test_random(n * k, 11), *a = test_random(m * lda, 12), *bias = test_random(n, 13);
  gpu_weight part = {w, (uint32_t)n};
  gpu_linear l;
  CHECK_OK(gpu_linear_new(test_device(), GPU_F32, (uint32_t)k, &part, 1, bias, n, &l));
  float *want = test_floats(m * n);
  for (size_t r = 0; r < m; r++)
    for (size_t j = 0; j < n; j++) {
      double s = bias[j];
      for (size_t x = 0; x < k; x++) s += (double)a[r * lda + x] * w[j * k + x];
      want[r * n + j] = (float)s;
    }
  float *zero = test_floats(m * n);
  gpu_buffer *ab = test_upload(a, m * lda);
  for (int fast = 0; fast < 2; fast++) {
    gpu_set_fast(test_device(), fast);
    if (fast && !uses_gemm_cpu(&l, lda, m)) continue;
    gpu_buffer *cb = test_upload(zero, m * n);
    gpu_rec *rec = test_rec();
    gpu_gemm_strided(rec, ab, (uint32_t)lda, &l, cb, (uint32_t)m, GPU_EPI_BIAS, 0);
    float *got = test_run_read(rec, cb, m * n);
    char what[64];
    snprintf(what, sizeof what, "gemm%s with lda %zu, k %zu", fast ? "_cpu" : "", lda, k);
    check_close(what, got, want, m * n, KERNEL_TOL);
    gpu_rec_free(rec);
    gpu_buffer_free(cb);
    free(got);
  }
  gpu_set_fast(test_device(), true);
  gpu_buffer_free(ab);
  gpu_linear_free(&l);
  free(w), free(a), free(bias), free(want), free(zero);
}

/* Forces variant v if it is one that splits k (the portable kernel or a
 * gemm_tc tile whose probe passed here; the tiled and cooperative kernels
 * never split k); false to skip it. */
static bool use_splitting(gpu_device *d, int v) {
  bool tc = gpu_gemm_tiles[v].bk != 0; /* gemm_tc's tiles */
  if (v != GPU_GEMM_AUTO && (!tc || !gpu_gemm_variant_ok(d, (gpu_gemm_variant)v))) return false;
  gpu_set_fast(d, v != GPU_GEMM_AUTO);
  gpu_gemm_force(d, (gpu_gemm_variant)v);
  return true;
}

/* A GEMM of no rows records nothing that runs and leaves c as it was, on
 * every kernel that splits k (its split rules divide by the tile count). */
static void no_rows(void) {
  gpu_device *d = test_device();
  const size_t n = 256, k = 4096;
  float *w = test_random(n * k, 3), *mark = test_random(n, 4), *got = test_floats(n);
  uint8_t *bytes = quant_encode(GPU_F16, w, n * k);
  gpu_linear l;
  gpu_buffer *a = test_random_buffer(k, 5), *c;
  CHECK_OK(gpu_linear_new(d, GPU_F16, (uint32_t)k, &(gpu_weight){bytes, (uint32_t)n}, 1, NULL, 0, &l));
  CHECK_OK(gpu_buffer_from(d, mark, n * sizeof *mark, &c));
  for (int v = 0; v < GPU_GEMM_VARIANTS; v++) {
    if (!use_splitting(d, v)) continue;
    gpu_rec *rec;
    CHECK_OK(gpu_rec_new(d, &rec));
    CHECK_OK(gpu_rec_begin(rec));
    gpu_gemm(rec, a, &l, c, 0, GPU_EPI_BIAS, 1.0f);
    CHECK(gpu_rec_run(rec) == 0, "variant %d: a GEMM of no rows failed: %s", v, steno_last_error());
    gpu_rec_free(rec);
    CHECK_OK(gpu_download(c, 0, got, n * sizeof *got));
    CHECK(!memcmp(got, mark, n * sizeof *got), "variant %d: a GEMM of no rows wrote its output", v);
  }
  gpu_gemm_force(d, GPU_GEMM_AUTO);
  gpu_set_fast(d, true);
  gpu_linear_free(&l);
  gpu_buffer_free(a), gpu_buffer_free(c);
  free(w), free(mark), free(got), free(bytes);
}

/* A copy of the test device for planning only (nothing runs on it) that
 * claims variant v passed its probe and forces it, every fast kernel on. */
static gpu_device planning_device(gpu_gemm_variant v) {
  gpu_device fake = *test_device();
  fake.fast_gemm = true;
  fake.gemm_ok[v] = true;
  fake.gemm_force = v;
  fake.use_fast = GPU_FAST_ALL;
  return fake;
}

/* gemm_tc's split of k by the SM count (linear.c), planned on a copy of the
 * device that claims the 16-subgroup tile with k by 64 and an H200's 132 SMs:
 * the counts measured best there (docs/perf.md, thirteenth session), one
 * piece where the tiles fill a wave, none of the split rules' divisions at no
 * rows, and the older rule (at least 256 workgroups) where the count is
 * unknown. (At 4 rows × 1280 the rule asks for 8 pieces; k by 64 makes them
 * 192 long, so 7.) Plans only: nothing runs on the copy. */
static void tc_split_rule(void) {
  gpu_device fake = planning_device(GPU_GEMM_TC128K);
  static const struct {
    uint32_t m, n, k, sms, splits;
  } cases[] = {{138, 4096, 1024, 132, 2}, {138, 3072, 1024, 132, 2}, {138, 1024, 1024, 132, 8},
               {138, 1024, 4096, 132, 8}, {138, 2048, 1024, 132, 4}, {1500, 1280, 1280, 132, 1},
               {1500, 1280, 5120, 132, 1}, {1500, 5120, 1280, 132, 1}, {4, 1280, 1280, 132, 7},
               {0, 1024, 1024, 132, 1},    {138, 4096, 1024, 0, 4}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    fake.info.sm_count = cases[i].sms;
    gpu_linear l = {.type = GPU_F16, .n = cases[i].n, .rows = cases[i].n, .k = cases[i].k, .wk = cases[i].k};
    gpu_gemm_plan g;
    gpu_gemm_plan_for(&fake, &l, cases[i].k, cases[i].m, &g);
    CHECK(g.v == GPU_GEMM_TC128K && g.splits == cases[i].splits && g.kc * g.splits >= cases[i].k &&
              g.kc * (g.splits - 1) < cases[i].k,
          "%ux%ux%u on %u SMs: variant %d in %u pieces of %u, want %u pieces", cases[i].m, cases[i].n,
          cases[i].k, cases[i].sms, (int)g.v, g.splits, g.kc, cases[i].splits);
  }
}

/* A planning device (planning_device) that claims cooperative_matrix2
 * variant v and the 16-subgroup gemm_tc tile its plans fall back to, on an
 * H200's 132 SMs. */
static gpu_device cm2_planning_device(gpu_gemm_variant v) {
  gpu_device fake = planning_device(v);
  fake.gemm_ok[GPU_GEMM_TC128W] = true;
  fake.info.sm_count = 132;
  return fake;
}

/* gemm_cm2's plans: F16 weights take it, with a in f16 and pieces for
 * gemm_reduce even in one piece; BF16 weights (it cannot convert them as it
 * loads; the H200 showed them read as f16) and outputs past the split scratch
 * take the gemm_tc tile. Plans only. */
static void cm2_plan_rules(void) {
  gpu_device fake = cm2_planning_device(GPU_GEMM_CM2);
  static const struct {
    gpu_wtype type;
    uint32_t m, n, k;
    bool cm2;
  } cases[] = {{GPU_F16, 138, 3072, 1024, true},  {GPU_F16, 1500, 1280, 1280, true},
               {GPU_BF16, 138, 3072, 1024, false}, {GPU_F16, 8832, 4096, 1024, false}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    gpu_linear l = {.type = cases[i].type, .n = cases[i].n, .rows = cases[i].n, .k = cases[i].k,
                    .wk = cases[i].k};
    gpu_gemm_plan g;
    gpu_gemm_plan_for(&fake, &l, cases[i].k, cases[i].m, &g);
    bool want = cases[i].cm2;
    /* Else the device's first gemm_tc tile for the size (the H100 passed them all). */
    gpu_gemm_variant tc = gpu_gemm_default(&fake, cases[i].m >= 512);
    CHECK(want ? g.v == GPU_GEMM_CM2 && g.a16 && g.parts : g.v == tc,
          "%ux%ux%u type %d: variant %d (a16 %d, pieces %d), want %s", cases[i].m, cases[i].n, cases[i].k,
          (int)cases[i].type, (int)g.v, g.a16, g.parts, want ? "gemm_cm2" : "the gemm_tc tile");
  }
}

/* gemm_cm2u's plans (its loads unchecked) at both its tiles: only where n
 * is a multiple of its 128 columns, k of its trip (4 steps of 64) and W's
 * rows of 8 halves, and a's f16 copy holds whole row tiles (13 107 rows of
 * 3 840 fit the copy, padded to 13 184 or 13 312 they do not; 13 056 are
 * whole tiles of 128 and of 256; 13 900 rows of 3 584 pad to 13 952, which
 * fit, for the 128-row tile and to 14 080, which do not, for the 256-row
 * one); its pieces of k are whole trips. Plans only. */
static void cm2u_plan_rules(void) {
  static const struct {
    uint32_t m, n, k, wk;
    bool tile128, tile256; /* whether each tile takes it */
  } cases[] = {{138, 3072, 1024, 1024, true, true},    {1500, 1280, 1280, 1280, true, true},
               {138, 1024, 4096, 4096, true, true},    {138, 1000, 1024, 1024, false, false},
               {138, 1024, 1000, 1000, false, false},  {138, 1024, 1024, 1028, false, false},
               {13107, 512, 3840, 3840, false, false}, {13056, 512, 3840, 3840, true, true},
               {138, 1024, 1024, 1032, true, true},    {13900, 512, 3584, 3584, true, false}};
  static const gpu_gemm_variant tiles[] = {GPU_GEMM_CM2U, GPU_GEMM_CM2UL};
  for (size_t v = 0; v < sizeof tiles / sizeof *tiles; v++) {
    gpu_device fake = cm2_planning_device(tiles[v]);
    uint32_t bm = gpu_gemm_tiles[tiles[v]].sg_m * gpu_gemm_tiles[tiles[v]].tm * 16;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      gpu_linear l = {.type = GPU_F16, .n = cases[i].n, .rows = cases[i].n, .k = cases[i].k, .wk = cases[i].wk};
      gpu_gemm_plan g;
      gpu_gemm_plan_for(&fake, &l, cases[i].k, cases[i].m, &g);
      bool want = bm == 128 ? cases[i].tile128 : cases[i].tile256;
      gpu_gemm_variant tc = gpu_gemm_default(&fake, cases[i].m >= 512);
      CHECK(want ? g.v == tiles[v] && g.bm == bm && g.a16 && g.parts && g.kc % 256 == 0 : g.v == tc,
            "%u rows a tile, %ux%ux%u (wk %u): variant %d (a16 %d, pieces %d of %u), want %s", bm, cases[i].m,
            cases[i].n, cases[i].k, cases[i].wk, (int)g.v, g.a16, g.parts, g.kc,
            want ? "gemm_cm2u" : "the gemm_tc tile");
    }
  }
}

/* Parakeet 0.6B's FFN down at an 11 s clip, 138×1024×4096: few tiles and a
 * long k, so gpu_gemm cuts k (6 pieces on the portable kernel, 48 tiles) and
 * gemm_reduce sums them; checked to split before the outputs are checked, so
 * a change to the split rule cannot quietly skip the split path here. */
static void parakeet_down(void) {
  gpu_device *d = test_device();
  const size_t n = 1024, k = 4096, m[] = {138};
  float *w = test_random(n * k, 9), *bias = test_random(n, 8);
  uint8_t *bytes = quant_encode(GPU_F16, w, n * k);
  gpu_linear l;
  CHECK_OK(gpu_linear_new(d, GPU_F16, (uint32_t)k, &(gpu_weight){bytes, (uint32_t)n}, 1, bias, n, &l));
  for (int v = 0; v < GPU_GEMM_VARIANTS; v++) {
    if (!use_splitting(d, v)) continue;
    gpu_gemm_plan g;
    gpu_gemm_plan_for(d, &l, (uint32_t)k, (uint32_t)m[0], &g);
    bool cut = g.splits > 1 && g.kc * g.splits >= k && g.kc * (g.splits - 1) < k;
    CHECK(g.v == (gpu_gemm_variant)v && cut, "%zux%zux%zu on variant %d: runs %d in %u pieces of %u",
          m[0], n, k, v, (int)g.v, g.splits, g.kc);
  }
  gpu_linear_free(&l);
  one_layer(GPU_F16, n, k, m, 1, bias, n, 2);
  free(w), free(bias), free(bytes);
}

/* A random F16 layer of n_out rows of k weights with a bias (seeds seed,
 * seed + 1), for the fused-norm tests. */
static void f16_layer(size_t n_out, size_t k, uint32_t seed, gpu_linear *l) {
  float *w = test_random(n_out * k, seed), *bias = test_random(n_out, seed + 1);
  uint8_t *bytes = quant_encode(GPU_F16, w, n_out * k);
  CHECK_OK(gpu_linear_new(test_device(), GPU_F16, (uint32_t)k, &(gpu_weight){bytes, (uint32_t)n_out},
                          1, bias, n_out, l));
  free(w), free(bias), free(bytes);
}

/* out's rows (os apart) = the LayerNorm of x's rows (xs apart) over cols
 * columns with g, b and eps, in double. */
static void layer_norm_double(const float *x, size_t xs, size_t rows, size_t cols, const float *g,
                              const float *b, double eps, float *out, size_t os) {
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * xs;
    double mean = 0, var = 0;
    for (size_t j = 0; j < cols; j++) mean += xr[j];
    mean /= (double)cols;
    for (size_t j = 0; j < cols; j++) var += (xr[j] - mean) * (xr[j] - mean);
    double rstd = 1.0 / sqrt(var / (double)cols + eps);
    for (size_t j = 0; j < cols; j++) out[r * os + j] = (float)((xr[j] - mean) * rstd * g[j] + b[j]);
  }
}

/* gpu_gemm_norm at shapes that split k (checked first, so that the fused
 * reduce is what runs): c as gpu_gemm_strided writes it (the same bits), y
 * as gpu_layer_norm writes it after (to 1e-6: the same sums in the same
 * order) and against a LayerNorm of c in double. cols < n: a padded
 * layer, whose LayerNorm reads only the real columns. */
static void fused_norm(size_t n_out, size_t k, size_t m, gpu_epi epi, float alpha) {
  gpu_device *d = test_device();
  float *g = test_random(n_out, 23), *b = test_random(n_out, 24);
  gpu_linear l;
  f16_layer(n_out, k, 21, &l);
  size_t width = gpu_linear_width(&l), ys = width + 8;
  gpu_norm nrm = {test_upload(g, n_out), test_upload(b, n_out), 1e-5f};
  float *a = test_random(m * k, 25), *c0 = test_random(m * width, 26), *y0 = test_random(m * ys, 27);
  for (int v = 0; v < GPU_GEMM_VARIANTS; v++) {
    if (!use_splitting(d, v)) continue;
    gpu_gemm_plan plan;
    gpu_gemm_plan_for(d, &l, (uint32_t)k, (uint32_t)m, &plan);
    CHECK(plan.parts, "%zux%zux%zu on variant %d: no pieces for gemm_reduce, the fused reduce untested", m,
          n_out, k, v);
    gpu_buffer *ab = test_upload(a, m * k);
    gpu_buffer *c1 = test_upload(c0, m * width), *y1 = test_upload(y0, m * ys);
    gpu_buffer *c2 = test_upload(c0, m * width), *y2 = test_upload(y0, m * ys);
    gpu_rec *rec = test_rec();
    gpu_gemm_norm(rec, ab, (uint32_t)k, &l, c1, (uint32_t)m, epi, alpha, (uint32_t)n_out, &nrm, y1,
                  (uint32_t)ys);
    gpu_gemm_strided(rec, ab, (uint32_t)k, &l, c2, (uint32_t)m, epi, alpha);
    gpu_layer_norm(rec, c2, 0, (uint32_t)width, &nrm, y2, 0, (uint32_t)ys, (uint32_t)m,
                   (uint32_t)n_out, NULL, NULL);
    float *got_y = test_run_read(rec, y1, m * ys);
    float *got_c = test_floats(m * width), *want_c = test_floats(m * width), *want_y = test_floats(m * ys);
    CHECK_OK(gpu_download(c1, 0, got_c, m * width * sizeof(float)));
    CHECK_OK(gpu_download(c2, 0, want_c, m * width * sizeof(float)));
    CHECK_OK(gpu_download(y2, 0, want_y, m * ys * sizeof(float)));
    CHECK(!memcmp(got_c, want_c, m * width * sizeof(float)), "gemm_norm %zux%zux%zu variant %d: c "
          "differs from gpu_gemm_strided's", m, n_out, k, v);
    /* y as gpu_layer_norm's to rounding: the same sums in the same order, but
     * a compiler may fuse the last multiply-adds differently in the two
     * kernels (the H200's did). */
    char what[96];
    snprintf(what, sizeof what, "gemm_norm %zux%zux%zu variant %d, y against layer_norm's", m, n_out, k, v);
    check_close(what, got_y, want_y, m * ys, 1e-6f);
    /* The LayerNorm of the c it wrote, in double; y's other columns untouched. */
    float *ref = test_floats(m * ys);
    memcpy(ref, y0, m * ys * sizeof(float));
    layer_norm_double(got_c, width, m, n_out, g, b, 1e-5, ref, ys);
    snprintf(what, sizeof what, "gemm_norm %zux%zux%zu variant %d, y", m, n_out, k, v);
    check_close(what, got_y, ref, m * ys, KERNEL_TOL);
    gpu_rec_free(rec);
    gpu_buffer *all[] = {ab, c1, y1, c2, y2};
    for (size_t i = 0; i < 5; i++) gpu_buffer_free(all[i]);
    free(got_y), free(got_c), free(want_c), free(want_y), free(ref);
  }
  gpu_buffer_free(nrm.g), gpu_buffer_free(nrm.b);
  gpu_linear_free(&l);
  free(g), free(b), free(a), free(c0), free(y0);
}

/* gpu_gemm_norm2 (a Conformer block's last LayerNorm and the next one's
 * first): y as gpu_gemm_norm writes it, then c's first cols columns as
 * gpu_layer_norm(y, n2) writes them after the unfused GEMM (to 1e-6, the
 * same sums in the same order), its other columns the GEMM's own, and c
 * against a LayerNorm of y in double. `split`: whether the plan cuts k (the
 * fused reduce) — checked, so that both ways are covered. */
static void fused_norm2(size_t n_out, size_t k, size_t m, bool split) {
  gpu_device *d = test_device();
  float *g = test_random(2 * n_out, 33), *b = test_random(2 * n_out, 34);
  gpu_linear l;
  f16_layer(n_out, k, 31, &l);
  size_t width = gpu_linear_width(&l), ys = width + 8;
  gpu_norm n1 = {test_upload(g, n_out), test_upload(b, n_out), 1e-5f};
  gpu_norm n2 = {test_upload(g + n_out, n_out), test_upload(b + n_out, n_out), 1e-3f};
  gpu_gemm_plan plan;
  gpu_gemm_plan_for(d, &l, (uint32_t)k, (uint32_t)m, &plan);
  /* gemm_cm2 (where it is the choice) always leaves its sums to the reduce */
  CHECK(plan.parts == (split || gpu_gemm_is_cm2(plan.v)), "gemm_norm2 %zux%zux%zu: %u pieces", m, n_out,
        k, plan.splits);
  float *a = test_random(m * k, 35), *c0 = test_random(m * width, 36);
  float *y0 = test_random(m * ys, 37);
  gpu_buffer *ab = test_upload(a, m * k);
  gpu_buffer *c1 = test_upload(c0, m * width), *y1 = test_upload(y0, m * ys);
  gpu_buffer *c2 = test_upload(c0, m * width), *y2 = test_upload(y0, m * ys);
  gpu_rec *rec = test_rec();
  gpu_gemm_norm2(rec, ab, (uint32_t)k, &l, c1, (uint32_t)m, GPU_EPI_RESIDUAL, 0.5f,
                 (uint32_t)n_out, &n1, y1, (uint32_t)ys, &n2);
  gpu_gemm_strided(rec, ab, (uint32_t)k, &l, c2, (uint32_t)m, GPU_EPI_RESIDUAL, 0.5f);
  gpu_layer_norm(rec, c2, 0, (uint32_t)width, &n1, y2, 0, (uint32_t)ys, (uint32_t)m,
                 (uint32_t)n_out, NULL, NULL);
  gpu_layer_norm(rec, y2, 0, (uint32_t)ys, &n2, c2, 0, (uint32_t)width, (uint32_t)m,
                 (uint32_t)n_out, NULL, NULL);
  float *got_c = test_run_read(rec, c1, m * width);
  float *got_y = test_floats(m * ys), *want_y = test_floats(m * ys);
  float *want_c = test_floats(m * width);
  CHECK_OK(gpu_download(y1, 0, got_y, m * ys * sizeof(float)));
  CHECK_OK(gpu_download(c2, 0, want_c, m * width * sizeof(float)));
  CHECK_OK(gpu_download(y2, 0, want_y, m * ys * sizeof(float)));
  char what[96];
  snprintf(what, sizeof what, "gemm_norm2 %zux%zux%zu, y", m, n_out, k);
  check_close(what, got_y, want_y, m * ys, 1e-6f);
  snprintf(what, sizeof what, "gemm_norm2 %zux%zux%zu, c", m, n_out, k);
  check_close(what, got_c, want_c, m * width, 1e-6f);
  size_t off = 0;
  for (size_t r = 0; r < m; r++)
    for (size_t j = n_out; j < width; j++) off += got_c[r * width + j] != want_c[r * width + j];
  CHECK(!off, "gemm_norm2 %zux%zux%zu: %zu padding columns of c differ", m, n_out, k, off);
  float *ref = test_floats(m * width);
  memcpy(ref, got_c, m * width * sizeof(float));
  layer_norm_double(got_y, ys, m, n_out, g + n_out, b + n_out, 1e-3, ref, width);
  snprintf(what, sizeof what, "gemm_norm2 %zux%zux%zu, c against double", m, n_out, k);
  check_close(what, got_c, ref, m * width, KERNEL_TOL);
  gpu_rec_free(rec);
  gpu_buffer *all[] = {ab, c1, y1, c2, y2, n1.g, n1.b, n2.g, n2.b};
  for (size_t i = 0; i < 9; i++) gpu_buffer_free(all[i]);
  gpu_linear_free(&l);
  free(got_c), free(got_y), free(want_c), free(want_y), free(ref);
  free(g), free(b), free(a), free(c0), free(y0);
}

/* Whether a gemm_tc tile passed its probe here (a in f16 first can only
 * be taken by one). */
static bool tc_here(gpu_device *d) {
  for (int v = 1; v < GPU_GEMM_VARIANTS; v++)
    if (gpu_gemm_tiles[v].bk && gpu_gemm_variant_ok(d, (gpu_gemm_variant)v)) return true;
  return false;
}

/* gemm_tc with a in f16 first (gpu_gemm_a16): every tile that passed its
 * probe, the same outputs bit for bit as with a read in f32 (gemm_tc rounds
 * it the same way when staging), with a's rows apart by more than k, an odd
 * row count, k split (Parakeet's FFN down) and values past f16's range
 * (clamped, as gemm_tc clamps). Checked to take the route first. */
static void a16_same(size_t m, size_t n, size_t k, size_t lda) {
  gpu_device *d = test_device();
  float *w = test_random(n * k, 31), *bias = test_random(n, 32), *a = test_random(m * lda, 33);
  a[0] = 1e6f, a[lda + 1] = -7e4f; /* past ±65504 */
  uint8_t *bytes = quant_encode(GPU_F16, w, n * k);
  gpu_linear l;
  CHECK_OK(gpu_linear_new(d, GPU_F16, (uint32_t)k, &(gpu_weight){bytes, (uint32_t)n}, 1, bias, n, &l));
  size_t width = gpu_linear_width(&l);
  gpu_buffer *ab = test_upload(a, m * lda);
  for (int v = 1; v < GPU_GEMM_VARIANTS; v++) {
    if (!use_splitting(d, v)) continue; /* gemm_tc's tiles that passed */
    if (gpu_gemm_is_cm2((gpu_gemm_variant)v)) continue; /* a in f16 always: no other way to compare */
    float *out[2];
    for (int on = 0; on < 2; on++) {
      gpu_gemm_a16(d, on ? 1 : UINT32_MAX);
      gpu_gemm_plan plan;
      gpu_gemm_plan_for(d, &l, (uint32_t)lda, (uint32_t)m, &plan);
      CHECK(plan.a16 == on, "%zux%zux%zu variant %d: a16 %d, asked %d", m, n, k, v, plan.a16, on);
      float *zero = test_floats(m * width);
      gpu_buffer *cb = test_upload(zero, m * width);
      gpu_rec *rec = test_rec();
      gpu_gemm_strided(rec, ab, (uint32_t)lda, &l, cb, (uint32_t)m, GPU_EPI_GELU, 0);
      out[on] = test_run_read(rec, cb, m * width);
      gpu_rec_free(rec);
      gpu_buffer_free(cb);
      free(zero);
    }
    CHECK(!memcmp(out[0], out[1], m * width * sizeof(float)),
          "%zux%zux%zu lda %zu variant %d: a in f16 first differs from a read in f32", m, n, k, lda, v);
    free(out[0]), free(out[1]);
  }
  gpu_gemm_a16(d, 0);
  gpu_set_fast(d, true);
  gpu_gemm_force(d, GPU_GEMM_AUTO);
  gpu_buffer_free(ab);
  gpu_linear_free(&l);
  free(w), free(bias), free(a), free(bytes);
}

int main(void) {
  for (int v = 1; v < GPU_GEMM_VARIANTS; v++) {
    const gpu_gemm_tile *t = &gpu_gemm_tiles[v];
    printf("fast GEMM %s %u×%u on %u subgroups: %s\n", t->kernel, t->sg_m * t->tm * 16,
           t->sg_n * t->tn * 16, t->sg_m * t->sg_n,
           gpu_gemm_variant_ok(test_device(), (gpu_gemm_variant)v) ? "probe passed, tested too"
                                                                   : "not available");
  }
  gpu_device *d = test_device();
  printf("GEMM for CPU devices (gemm_cpu): %s\n",
         gpu_fast_passed(d, GPU_FAST_GEMM_CPU) ? "probe passed, tested too" : "not available");
  /* On the devices it is written for, a failed probe is our bug, not the driver's. */
  if (!strcmp(gpu_device_info(d)->type, "cpu") && gpu_fast_offered(d, GPU_FAST_GEMM_CPU))
    CHECK(gpu_fast_passed(d, GPU_FAST_GEMM_CPU), "gemm_cpu failed its probe on a CPU device");
  strided(160, 96);
  strided(161, 70);
  no_rows();
  tc_split_rule();
  cm2_plan_rules();
  cm2u_plan_rules();
  if (gpu_fast_passed(d, GPU_FAST_GEMM_CPU)) { /* its grid's rows: one per 8 rows of a, ≤ 65 535 */
    float w[64 * 32] = {0};
    gpu_linear l;
    CHECK_OK(gpu_linear_new(d, GPU_F32, 32, &(gpu_weight){w, 64}, 1, NULL, 0, &l));
    gpu_set_fast(d, true);
    CHECK(uses_gemm_cpu(&l, 32, 65535 * 8), "gemm_cpu not taken at 524 280 rows");
    CHECK(!uses_gemm_cpu(&l, 32, 65535 * 8 + 1), "gemm_cpu taken past 65 535 workgroup rows");
    gpu_linear_free(&l);
  }
  const size_t n = 100, k = 96;
  const size_t ms[] = {1, 37, 70, 2100};
  float *bias = test_random(n + 64, 2);
  for (gpu_wtype t = GPU_F32; t <= GPU_Q8_0; t++) {
    one_layer(t, n, k, ms, 4, bias, n, 7);      /* with bias */
    one_layer(t, n, k, ms, 4, bias, 0, 7);      /* zero bias */
    one_layer(t, n, k, ms, 4, bias, n + 64, 7); /* dual outputs */
  }
  /* k not a multiple of 32 (a tiny model's subsampling): weights padded at upload. */
  const size_t odd[] = {37, 70};
  for (gpu_wtype t = GPU_F32; t <= GPU_BF16; t++) {
    one_layer(t, n, 24, odd, 2, bias, n, 1);
    one_layer(t, n, 40, odd, 2, bias, n + 64, 2);
  }
  /* Q8_0 split on the GPU from the file's 34-byte blocks: 39 rows of one
   * block (an odd count), the second part starting half way through a word. */
  for (int on_gpu = 0; on_gpu < 2; on_gpu++) { /* by the CPU in place where mapped, by the GPU */
    gpu_q8_split_force(test_device(), on_gpu);
    one_layer(GPU_Q8_0, 39, 32, odd, 2, bias, 39, 2);
    one_layer(GPU_Q8_0, n, 96, ms, 4, bias, n + 64, 2);
  }
  gpu_q8_split_force(test_device(), false);
  /* Few rows and a long k: the portable kernel splits k (4 pieces of 512 here,
   * 2 for the FFN below) and sums the pieces in gemm_reduce. */
  const size_t few[] = {1, 37};
  for (gpu_wtype t = GPU_F32; t <= GPU_Q8_0; t++) {
    one_layer(t, n, 2048, few, 2, bias, n, 7);
    one_layer(t, n, 2048, few, 2, bias, n + 64, 2);
  }
  to_f16(GPU_BF16, 100, 40);   /* padded rows and k */
  to_f16(GPU_BF16, 1024, 4096); /* Parakeet 0.6B's FFN down */
  to_f16(GPU_Q8_0, 100, 96);
  to_f16(GPU_Q8_0, 4096, 1024);
  /* A real layer's shape: Parakeet 0.6B's FFN. */
  const size_t big[] = {140};
  float *bias_big = test_random(4096, 7);
  for (gpu_wtype t = GPU_F32; t <= GPU_Q8_0; t++) one_layer(t, 4096, 1024, big, 1, bias_big, 4096, 1);
  parakeet_down();
  /* The split-k reduce with the LayerNorm after it (Parakeet's FFN down at
   * 11 s; a padded 100-wide layer). */
  fused_norm(1024, 4096, 138, GPU_EPI_RESIDUAL, 0.5f);
  fused_norm(100, 2048, 37, GPU_EPI_RESIDUAL, 1.0f);
  fused_norm(100, 2048, 5, GPU_EPI_BIAS, 0);
  fused_norm2(1024, 4096, 138, true);
  fused_norm2(100, 2048, 37, true);
  fused_norm2(100, 64, 37, false); /* k too short to cut: the GEMM, then two LayerNorms */
  /* gemm_tc reading a in f16 that a pack wrote first: bit for bit as from
   * f32, then the layers above again with it at every row count (where a
   * gemm_tc tile passed). */
  a16_same(37, 100, 96, 96);
  a16_same(70, 100, 96, 160);
  a16_same(138, 1024, 4096, 4096);
  a16_same(1500, 256, 1280, 1288);
  if (tc_here(test_device())) { /* elsewhere (lavapipe) these would only repeat the runs above */
    gpu_gemm_a16(test_device(), 1);
    for (gpu_wtype t = GPU_F16; t <= GPU_Q8_0; t++) one_layer(t, n, k, ms, 4, bias, n + 64, 3);
    parakeet_down();
    fused_norm(1024, 4096, 138, GPU_EPI_RESIDUAL, 0.5f);
    gpu_gemm_a16(test_device(), 0);
  }
  free(bias);
  free(bias_big);
  return check_done();
}
