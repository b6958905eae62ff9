/* moe: Nemotron-H's router (sigmoid scores, correction bias, group top-k,
 * normalisation, scaling) and the routed experts' GEMVs, against plain C on
 * random data, in every weight type, at the tiny fixture's shapes and at
 * Nemotron 3.5 Transcribe's (hidden 2688, experts of 1856, 128 experts top-6
 * for the router), one pair at a time and grouped by expert; the unchosen
 * experts' weights are NaN (F32), so a kernel that read them would fail; bad
 * shapes are errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/moe.h"
#include "gpu_test.h"
#include "quant.h"
#include "steno.h"

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The router of one row (ties: lower index, as the kernel). */
static void ref_route(const gpu_router *r, const float *logit, const float *bias, uint32_t *idx,
                      float *wts) {
  uint32_t E = r->experts, per = E / r->n_group;
  float q[1024], gs[64];
  bool keep[64] = {0}, taken[1024] = {0};
  for (uint32_t e = 0; e < E; e++) q[e] = sigmoid(logit[e]) + bias[e];
  for (uint32_t g = 0; g < r->n_group; g++) {
    float a = -INFINITY, b = -INFINITY;
    for (uint32_t e = g * per; e < (g + 1) * per; e++)
      if (q[e] > a) b = a, a = q[e];
      else if (q[e] > b) b = q[e];
    gs[g] = a + b;
  }
  for (uint32_t j = 0; j < r->topk_group; j++) {
    int best = -1;
    for (uint32_t g = 0; g < r->n_group; g++)
      if (!keep[g] && (best < 0 || gs[g] > gs[best])) best = (int)g;
    keep[best] = true;
  }
  double sum = 0;
  for (uint32_t j = 0; j < r->k; j++) {
    int best = -1;
    for (uint32_t e = 0; e < E; e++)
      if (keep[e / per] && !taken[e] && (best < 0 || q[e] > q[best])) best = (int)e;
    taken[best] = true;
    idx[j] = (uint32_t)best;
    sum += sigmoid(logit[best]);
  }
  for (uint32_t j = 0; j < r->k; j++)
    wts[j] = (float)(sigmoid(logit[idx[j]]) / (r->norm ? sum + 1e-20 : 1.0) * r->scale);
}

/* ties: logits on a few levels and no bias, so equal scores meet (lower index first). */
static void route_case_ties(gpu_router r, uint32_t rows, bool ties) {
  uint32_t stride = r.experts + 3;
  float *logit = test_random((size_t)rows * stride, 51), *bias = test_random(r.experts, 52);
  for (size_t i = 0; i < (size_t)rows * stride; i++) logit[i] = ties ? roundf(logit[i] * 2) : logit[i] * 4;
  for (uint32_t e = 0; e < r.experts; e++) bias[e] = ties ? 0.0f : bias[e] * 0.2f;
  uint32_t *want_i = calloc((size_t)rows * r.k, sizeof *want_i);
  float *want_w = test_floats((size_t)rows * r.k);
  for (uint32_t i = 0; i < rows; i++)
    ref_route(&r, logit + 2 + (size_t)i * stride, bias, want_i + i * r.k, want_w + i * r.k);
  gpu_buffer *lb = test_upload(logit, (size_t)rows * stride), *bb = test_upload(bias, r.experts);
  gpu_buffer *ib = test_random_buffer((size_t)rows * r.k, 53);
  gpu_buffer *wb = test_random_buffer((size_t)rows * r.k, 54);
  gpu_rec *rec = test_rec();
  gpu_moe_route(rec, &r, lb, 2, stride, bb, ib, wb, rows);
  float *got_w = test_run_read(rec, wb, (size_t)rows * r.k);
  uint32_t *got_i = calloc((size_t)rows * r.k, sizeof *got_i);
  CHECK_OK(gpu_download(ib, 0, got_i, (size_t)rows * r.k * sizeof *got_i));
  size_t wrong = 0;
  for (size_t i = 0; i < (size_t)rows * r.k; i++) wrong += got_i[i] != want_i[i];
  CHECK(wrong == 0, "moe_route %u experts top %u (groups %u keep %u): %zu of %zu choices differ",
        r.experts, r.k, r.n_group, r.topk_group, wrong, (size_t)rows * r.k);
  check_close("moe_route weights", got_w, want_w, (size_t)rows * r.k, KERNEL_TOL);
  gpu_buffer_free(lb), gpu_buffer_free(bb), gpu_buffer_free(ib), gpu_buffer_free(wb);
  gpu_rec_free(rec);
  free(logit), free(bias), free(want_i), free(want_w), free(got_w), free(got_i);
}

/* E experts of `per` rows × k in type t: the stacked layer, and the values the
 * kernel sees (decoded); experts not in `used` get NaN weights where t is F32. */
static gpu_linear stacked(gpu_wtype t, uint32_t E, uint32_t per, uint32_t k, const bool *used,
                          uint32_t seed, float **values) {
  size_t n = (size_t)E * per * k;
  float *w = test_random(n, seed);
  for (uint32_t e = 0; e < E; e++)
    if (!used[e] && t == GPU_F32)
      for (size_t i = 0; i < (size_t)per * k; i++) w[(size_t)e * per * k + i] = NAN;
  uint8_t *bytes = quant_encode(t, w, n);
  *values = test_floats(n);
  quant_decode(t, bytes, n, *values);
  gpu_linear l;
  gpu_weight part = {bytes, E * per};
  CHECK_OK(gpu_linear_new(test_device(), t, k, &part, 1, NULL, 0, &l));
  free(bytes), free(w);
  return l;
}

/* up then down for `rows` rows routed to k of E experts (H inputs, I per expert), one
 * pair at a time or grouped by expert. */
static void route_case(gpu_router r, uint32_t rows) { route_case_ties(r, rows, false); }

static void experts_case_at(gpu_wtype t, uint32_t rows, uint32_t E, uint32_t k, uint32_t H,
                            uint32_t I, bool grouped, uint32_t x_off) {
  uint32_t xs = H + 4, n = rows * k;
  uint32_t *idx = calloc(n, sizeof *idx);
  bool used[256] = {0};
  for (uint32_t r = 0; r < rows; r++) /* distinct experts per row, some never chosen */
    for (uint32_t j = 0; j < k; j++) idx[r * k + j] = (r * 3 + j) % (E - 1), used[idx[r * k + j]] = true;
  float *upv, *downv, *x = test_random((size_t)rows * xs, 61), *wts = test_random(n, 62);
  float *c0 = test_random((size_t)rows * xs, 63);
  gpu_linear up = stacked(t, E, I, H, used, 64, &upv), down = stacked(t, E, H, I, used, 65, &downv);
  float *h = test_floats((size_t)n * I), *want = test_floats((size_t)rows * xs);
  memcpy(want, c0, (size_t)rows * xs * sizeof *want);
  for (uint32_t p = 0; p < n; p++)
    for (uint32_t i = 0; i < I; i++) {
      double s = 0;
      for (uint32_t j = 0; j < H; j++)
        s += (double)upv[((size_t)idx[p] * I + i) * H + j] * x[(size_t)(p / k) * xs + x_off + j];
      h[(size_t)p * I + i] = s > 0 ? (float)(s * s) : 0.0f;
    }
  for (uint32_t r = 0; r < rows; r++)
    for (uint32_t o = 0; o < H; o++) {
      double s = 0;
      for (uint32_t j = 0; j < k; j++) {
        uint32_t p = r * k + j;
        double d = 0;
        for (uint32_t i = 0; i < I; i++)
          d += (double)downv[((size_t)idx[p] * H + o) * I + i] * h[(size_t)p * I + i];
        s += wts[p] * d;
      }
      want[(size_t)r * xs + 2 + o] += (float)s;
    }
  gpu_buffer *xb = test_upload(x, (size_t)rows * xs), *wb = test_upload(wts, n);
  gpu_buffer *cb = test_upload(c0, (size_t)rows * xs), *hb = test_random_buffer((size_t)n * I, 66);
  gpu_buffer *ib;
  CHECK_OK(gpu_buffer_from(test_device(), idx, n * sizeof *idx, &ib));
  gpu_buffer *lb = test_random_buffer((size_t)E * rows, 67), *nb = test_random_buffer(E, 68);
  gpu_buffer *yb = test_random_buffer((size_t)n * H, 69);
  gpu_rec *rec = test_rec();
  if (grouped) {
    gpu_moe_lists(rec, E, k, ib, lb, nb, rows);
    gpu_moe_up_grouped(rec, &up, I, k, xb, x_off, xs, lb, nb, hb, rows);
    gpu_moe_down_grouped(rec, &down, H, k, hb, lb, nb, wb, yb, cb, 2, xs, rows);
  } else {
    gpu_moe_up(rec, &up, I, k, xb, x_off, xs, ib, hb, rows);
    gpu_moe_down(rec, &down, H, k, hb, ib, wb, cb, 2, xs, rows);
  }
  float *got = test_run_read(rec, cb, (size_t)rows * xs), *got_h = test_floats((size_t)n * I);
  CHECK_OK(gpu_download(hb, 0, got_h, (size_t)n * I * sizeof *got_h));
  char what[128];
  /* Grouped F16/BF16 experts take moe_tc where gemm_tc passed (the up stage on
   * aligned token rows, the down stage always): inputs rounded to f16, as
   * gemm_tc (10× test_gemm's A16_TOL for sums of sums; the H200 showed 5.8e-4). */
  gpu_device *dev = test_device();
  bool tc = grouped && (t == GPU_F16 || t == GPU_BF16) && gpu_using_fast(dev) &&
            gpu_gemm_variant_ok(dev, GPU_GEMM_TC64);
  float tol = tc ? 2e-3f : 1e-4f;
  const char *how = grouped ? (tc ? " grouped (tensor cores where aligned)" : " grouped") : "";
  snprintf(what, sizeof what, "moe_up%s %s %u rows × top %u of %u, %u → %u", how, quant_names[t],
           rows, k, E, H, I);
  check_close(what, got_h, h, (size_t)n * I, tol);
  snprintf(what, sizeof what, "moe_down%s %s %u rows, %u → %u", how, quant_names[t], rows, I, H);
  check_close(what, got, want, (size_t)rows * xs, tol);
  gpu_linear_free(&up), gpu_linear_free(&down);
  gpu_buffer_free(xb), gpu_buffer_free(wb), gpu_buffer_free(cb), gpu_buffer_free(hb);
  gpu_buffer_free(ib), gpu_buffer_free(lb), gpu_buffer_free(nb), gpu_buffer_free(yb);
  gpu_rec_free(rec);
  free(idx), free(upv), free(downv), free(x), free(wts), free(c0), free(h), free(want);
  free(got), free(got_h);
}

static void experts_case(gpu_wtype t, uint32_t rows, uint32_t E, uint32_t k, uint32_t H,
                         uint32_t I, bool grouped) {
  experts_case_at(t, rows, E, k, H, I, grouped, 1);
}

static void bad_shapes(void) {
  gpu_buffer *a = test_random_buffer(256, 71), *b = test_random_buffer(256, 72);
  gpu_buffer *c = test_random_buffer(256, 73);
  gpu_rec *rec = test_rec();
  gpu_router r = {8, 2, 3, 1, true, 1}; /* 8 experts in 3 groups */
  gpu_moe_route(rec, &r, a, 0, 8, b, c, a, 4);
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "moe_route with 8 experts in 3 groups runs");
  CHECK_OK(gpu_rec_begin(rec));
  gpu_router r2 = {8, 5, 2, 1, true, 1}; /* 5 of the 4 experts one group keeps */
  gpu_moe_route(rec, &r2, a, 0, 8, b, c, a, 4);
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "moe_route choosing 5 of 4 runs");
  CHECK_OK(gpu_rec_begin(rec));
  bool used[4] = {1, 1, 1, 1};
  float *v;
  gpu_linear up = stacked(GPU_F32, 4, 10, 32, used, 74, &v);
  gpu_moe_up(rec, &up, 12, 2, a, 0, 32, b, c, 1); /* 40 rows are not experts of 12 */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "moe_up with 40 rows in experts of 12 runs");
  CHECK_OK(gpu_rec_begin(rec));
  gpu_moe_up(rec, &up, 10, 2, a, 0, 32, b, c, 20); /* h needs 400 floats, c holds 256 */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "moe_up into a short buffer runs");
  gpu_linear_free(&up);
  free(v);
  gpu_rec_free(rec);
  gpu_buffer_free(a), gpu_buffer_free(b), gpu_buffer_free(c);
}

int main(void) {
  test_device();
  route_case((gpu_router){8, 2, 2, 1, true, 2.5f}, 11);   /* the fixture */
  route_case((gpu_router){128, 6, 1, 1, true, 2.5f}, 9);  /* Nemotron 3.5 Transcribe */
  route_case((gpu_router){64, 4, 8, 3, false, 1.0f}, 70); /* groups, unnormalised */
  route_case_ties((gpu_router){128, 6, 1, 1, true, 2.5f}, 9, true);  /* 5 score levels: ties everywhere */
  route_case_ties((gpu_router){64, 4, 8, 3, false, 1.0f}, 20, true);
  for (int g = 0; g < 2; g++) {
    for (gpu_wtype t = GPU_F32; t <= GPU_Q8_0; t++) experts_case(t, 11, 8, 2, 64, 32, g);
    experts_case(GPU_BF16, 2, 7, 6, 2688, 1856 / 8, g); /* the real widths, fewer, narrower experts */
  }
  experts_case(GPU_Q8_0, 1, 3, 2, 2688, 1856, false); /* one token (never grouped), full-size experts */
  /* Grouped, with more pairs per expert than one batch (8) and experts no row chose. */
  experts_case(GPU_F32, 45, 8, 2, 64, 32, true);
  /* Aligned token rows as Nemotron-H's (offset 0): moe_tc where gemm_tc passed,
   * with lists longer than its 64-pair tile, a partial column tile, and experts
   * no row chose. */
  for (gpu_wtype t = GPU_F16; t <= GPU_BF16; t++) {
    experts_case_at(t, 150, 8, 3, 64, 96, true, 0);
    experts_case_at(t, 40, 7, 6, 2688, 1856 / 8, true, 0);
  }
  experts_case(GPU_BF16, 40, 16, 6, 256, 96, true);
  bad_shapes();
  return check_done();
}
