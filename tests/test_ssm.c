/* ssm: Nemotron-H's RMSNorm (plain and gated per group), Mamba-2's causal
 * conv1d with its state and the selective scan with its state, against plain C
 * on random data: a prompt from a fresh state, then tokens one at a time going
 * on from the state it left (as a decoder runs them), at the tiny fixture's
 * shapes and at Nemotron 3.5 Transcribe's (4096 = 64 heads × 64 dims, 8 groups
 * of 128 states, conv over 6144 channels); bad shapes are errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/ssm.h"
#include "gpu_test.h"
#include "steno.h"

static void free_bufs(gpu_buffer **b, int n) {
  for (int i = 0; i < n; i++) gpu_buffer_free(b[i]);
}

/* ---- RMSNorm ---- */

static void ref_rms(const float *x, const float *z, const float *w, size_t n, size_t group,
                    float eps, float *y) {
  for (size_t g0 = 0; g0 < n; g0 += group) {
    double ss = 0;
    float v[4096];
    for (size_t j = 0; j < group; j++) {
      v[j] = z ? x[g0 + j] * ref_silu(z[g0 + j]) : x[g0 + j];
      ss += (double)v[j] * v[j];
    }
    float s = (float)(1.0 / sqrt(ss / (double)group + eps));
    for (size_t j = 0; j < group; j++) y[g0 + j] = w[g0 + j] * (v[j] * s);
  }
}

/* rows of n (in rows of stride `stride` at offset 3), gated or not, in place or not. */
static void rms_case(uint32_t rows, uint32_t n, uint32_t group, bool gated, bool in_place) {
  uint32_t stride = n + 5, off = 3;
  size_t len = off + (size_t)rows * stride;
  float *x = test_random(len, 11), *z = test_random(len, 12), *w = test_random(n, 13);
  float *y0 = in_place ? x : test_random(len, 14), *want = test_floats(len);
  for (size_t i = 0; i < len; i++) z[i] *= 4, x[i] *= 3;
  memcpy(want, y0, len * sizeof *want);
  for (uint32_t r = 0; r < rows; r++)
    ref_rms(x + off + r * stride, gated ? z + off + r * stride : NULL, w, n, group, 1e-5f,
            want + off + r * stride);
  gpu_buffer *xb = test_upload(x, len), *zb = test_upload(z, len), *wb = test_upload(w, n);
  gpu_buffer *yb = in_place ? xb : test_upload(y0, len);
  gpu_rec *rec = test_rec();
  gpu_rms_norm(rec, xb, off, stride, gated ? zb : NULL, off, stride, wb, 1e-5f, group, yb, off,
               stride, rows, n);
  float *got = test_run_read(rec, yb, len);
  char what[128];
  snprintf(what, sizeof what, "rms_norm %u×%u group %u%s%s", rows, n, group,
           gated ? " gated" : "", in_place ? " in place" : "");
  check_close(what, got, want, len, KERNEL_TOL);
  gpu_buffer *bufs[] = {xb, zb, wb};
  free_bufs(bufs, 3);
  if (!in_place) gpu_buffer_free(yb);
  gpu_rec_free(rec);
  free(x), free(z), free(w), free(got), free(want);
  if (!in_place) free(y0);
}

/* ---- conv ---- */

/* y rows and the new state for t rows of x after the state (k−1 rows of ch). */
static void ref_conv(const float *x, size_t t, size_t ch, size_t k, const float *w, const float *b,
                     float *state, float *y) {
  size_t h = k - 1;
  float *u = test_floats((h + t) * ch);
  memcpy(u, state, h * ch * sizeof *u);
  memcpy(u + h * ch, x, t * ch * sizeof *u);
  for (size_t r = 0; r < t; r++)
    for (size_t c = 0; c < ch; c++) {
      double acc = b[c];
      for (size_t j = 0; j < k; j++) acc += (double)w[c * k + j] * u[(r + j) * ch + c];
      y[r * ch + c] = ref_silu((float)acc);
    }
  memcpy(state, u + t * ch, h * ch * sizeof *u);
  free(u);
}

/* A prompt of t rows from a fresh state, then `steps` rows one at a time. */
static void conv_case(uint32_t t, uint32_t steps, uint32_t ch, uint32_t k) {
  uint32_t n = t + steps, h = k - 1;
  float *x = test_random((size_t)n * ch, 21), *w = test_random((size_t)ch * k, 22);
  float *b = test_random(ch, 23), *state = test_floats((size_t)h * ch);
  float *want = test_floats((size_t)n * ch);
  ref_conv(x, t, ch, k, w, b, state, want);
  for (uint32_t s = 0; s < steps; s++)
    ref_conv(x + (size_t)(t + s) * ch, 1, ch, k, w, b, state, want + (size_t)(t + s) * ch);
  float *junk = test_random((size_t)h * ch, 24); /* fresh must not read it */
  gpu_conv_state cs = {test_upload(w, (size_t)ch * k), test_upload(b, ch),
                       test_upload(junk, (size_t)h * ch), ch, k};
  gpu_buffer *xb = test_upload(x, (size_t)n * ch), *yb = test_random_buffer((size_t)n * ch, 25);
  gpu_rec *rec = test_rec();
  gpu_ssm_conv(rec, &cs, true, xb, 0, ch, yb, 0, ch, t);
  for (uint32_t s = 0; s < steps; s++)
    gpu_ssm_conv(rec, &cs, false, xb, (t + s) * ch, ch, yb, (t + s) * ch, ch, 1);
  float *got = test_run_read(rec, yb, (size_t)n * ch), *gs = test_floats((size_t)h * ch);
  CHECK_OK(gpu_download(cs.state, 0, gs, (size_t)h * ch * sizeof *gs));
  char what[128];
  snprintf(what, sizeof what, "ssm_conv %u rows + %u steps, %u channels, k %u", t, steps, ch, k);
  check_close(what, got, want, (size_t)n * ch, KERNEL_TOL);
  check_close("ssm_conv state", gs, state, (size_t)h * ch, KERNEL_TOL);
  gpu_buffer *bufs[] = {cs.w, cs.b, cs.state, xb, yb};
  free_bufs(bufs, 5);
  gpu_rec_free(rec);
  free(x), free(w), free(b), free(state), free(want), free(junk), free(got), free(gs);
}

/* ---- scan ---- */

typedef struct {
  uint32_t heads, P, N, groups;
} scan_shape;

static float softplus(float v) { return v > 20 ? v : log1pf(expf(v)); }

/* Rows of u (x | B | C, stride us) and dt (stride ds) through the recurrence. */
static void ref_scan(const scan_shape *s, const float *par, float dt_min, const float *u,
                     size_t us, size_t b_col, size_t c_col, const float *dt, size_t ds, size_t t,
                     float *state, float *y, size_t ys) {
  size_t per = s->heads / s->groups;
  for (size_t r = 0; r < t; r++)
    for (size_t h = 0; h < s->heads; h++) {
      float d = softplus(dt[r * ds + h] + par[2 * s->heads + h]);
      if (d < dt_min) d = dt_min;
      float dA = expf(-d * expf(par[h]));
      size_t g = h / per;
      for (size_t p = 0; p < s->P; p++) {
        float xv = u[r * us + h * s->P + p];
        float *st = state + (h * s->P + p) * s->N;
        double acc = 0;
        for (size_t n = 0; n < s->N; n++) {
          st[n] = st[n] * dA + d * u[r * us + b_col + g * s->N + n] * xv;
          acc += (double)st[n] * u[r * us + c_col + g * s->N + n];
        }
        y[r * ys + h * s->P + p] = (float)acc + par[s->heads + h] * xv;
      }
    }
}

/* A prompt of t rows (dt clamped at dt_min) from a fresh state, then `steps`
 * single rows unclamped; u rows carry 7 extra columns and dt sits in its own
 * wider rows, as in the model's buffers. */
static void scan_case(scan_shape s, uint32_t t, uint32_t steps, float dt_min) {
  uint32_t n = t + steps, xd = s.heads * s.P, gn = s.groups * s.N;
  uint32_t b_col = xd, c_col = xd + gn, us = xd + 2 * gn + 7, ds = s.heads + 3;
  size_t sn = (size_t)xd * s.N;
  float *u = test_random((size_t)n * us, 31), *dt = test_random((size_t)n * ds, 32);
  float *par = test_random(3 * s.heads, 33), *state = test_floats(sn);
  for (size_t i = 0; i < (size_t)n * ds; i++) dt[i] = 3 * dt[i] - 2.5f; /* some under dt_min */
  for (uint32_t h = 0; h < s.heads; h++) par[h] = logf(1.0f + h % 8);
  float *want = test_floats((size_t)n * xd);
  ref_scan(&s, par, dt_min, u, us, b_col, c_col, dt, ds, t, state, want, xd);
  for (uint32_t i = t; i < n; i++)
    ref_scan(&s, par, 0, u + (size_t)i * us, us, b_col, c_col, dt + (size_t)i * ds, ds, 1, state,
             want + (size_t)i * xd, xd);
  float *junk = test_random(sn, 34);
  gpu_scan_state ss = {test_upload(par, 3 * s.heads), test_upload(junk, sn), s.heads, s.P, s.N,
                       s.groups};
  gpu_buffer *ub = test_upload(u, (size_t)n * us), *db = test_upload(dt, (size_t)n * ds);
  gpu_buffer *yb = test_random_buffer((size_t)n * xd, 35);
  gpu_rec *rec = test_rec();
  gpu_ssm_scan(rec, &ss, true, dt_min, ub, 0, us, b_col, c_col, db, 0, ds, yb, 0, xd, t);
  for (uint32_t i = t; i < n; i++)
    gpu_ssm_scan(rec, &ss, false, 0, ub, i * us, us, b_col, c_col, db, i * ds, ds, yb, i * xd, xd,
                 1);
  float *got = test_run_read(rec, yb, (size_t)n * xd), *gs = test_floats(sn);
  CHECK_OK(gpu_download(ss.state, 0, gs, sn * sizeof *gs));
  char what[160];
  snprintf(what, sizeof what, "ssm_scan %u rows + %u steps, %u heads × %u, %u groups × %u states",
           t, steps, s.heads, s.P, s.groups, s.N);
  check_close(what, got, want, (size_t)n * xd, 1e-4f);
  check_close("ssm_scan state", gs, state, sn, 1e-4f);
  gpu_buffer *bufs[] = {ss.par, ss.state, ub, db, yb};
  free_bufs(bufs, 5);
  gpu_rec_free(rec);
  free(u), free(dt), free(par), free(state), free(want), free(junk), free(got), free(gs);
}

static void bad_shapes(void) {
  gpu_buffer *a = test_random_buffer(256, 41), *b = test_random_buffer(256, 42);
  gpu_rec *rec = test_rec();
  gpu_rms_norm(rec, a, 0, 64, NULL, 0, 0, b, 1e-5f, 48, a, 0, 64, 2, 64); /* 64 % 48 */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "rms_norm with a bad group runs");
  CHECK_OK(gpu_rec_begin(rec));
  gpu_conv_state cs = {b, b, a, 64, 9}; /* k 9 > 8 */
  gpu_ssm_conv(rec, &cs, true, a, 0, 64, b, 0, 64, 1);
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "ssm_conv with k 9 runs");
  CHECK_OK(gpu_rec_begin(rec));
  gpu_scan_state ss = {b, a, 4, 16, 16, 3}; /* 4 heads in 3 groups */
  gpu_ssm_scan(rec, &ss, true, 0, a, 0, 64, 64, 112, b, 0, 4, b, 0, 64, 1);
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "ssm_scan with 4 heads in 3 groups runs");
  CHECK_OK(gpu_rec_begin(rec));
  gpu_scan_state big = {b, a, 4, 16, 16, 2}; /* the state needs 1024 floats, a holds 256 */
  gpu_ssm_scan(rec, &big, true, 0, b, 0, 128, 64, 96, b, 0, 4, a, 0, 64, 1);
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "ssm_scan with a short state runs");
  gpu_rec_free(rec);
  gpu_buffer_free(a);
  gpu_buffer_free(b);
}

int main(void) {
  test_device();
  rms_case(11, 64, 64, false, false);    /* the fixture's block norms */
  rms_case(11, 64, 32, true, true);      /* its gated norm: 2 groups, in place */
  rms_case(3, 2688, 2688, false, true);  /* Nemotron 3.5 Transcribe's hidden size */
  rms_case(5, 4096, 512, true, false);   /* its gated norm: 8 groups of 512 */
  conv_case(11, 5, 128, 4);              /* the fixture: 64 + 2·2·16 channels */
  conv_case(2, 3, 100, 4);               /* a prompt shorter than the kernel */
  conv_case(37, 4, 6144, 4);             /* Nemotron 3.5 Transcribe */
  scan_case((scan_shape){4, 16, 16, 2}, 11, 5, 0.02f);
  scan_case((scan_shape){64, 64, 128, 8}, 20, 3, 1e-3f);
  scan_case((scan_shape){6, 10, 40, 3}, 3, 2, 0.05f); /* P not a multiple of 4, N of 32 */
  bad_shapes();
  return check_done();
}
