/* Probes of the fast kernels: each runs on the device once, at open, and is
 * used only if it reports the subgroup layout it was written for and computes
 * a small problem as the portable kernel does. A driver that offers a feature
 * but gets it wrong keeps the portable path. */
#include <math.h>
#include <stdlib.h>

#include "base/half.h"
#include "base/log.h"
#include "gpu/internal.h"
#include "gpu/linear.h"

/* A 64×96·(96×64)ᵀ GEMM with F16 weights against the same math on the CPU. */
static bool gemm_probe(gpu_device *d) {
  enum { M = 70, N = 64, K = 96 };
  float a[M * K], wf[N * K], want[M * N], got[M * N], layout[2] = {0, 0};
  uint16_t wh[N * K];
  uint32_t s = 12345;
  for (int i = 0; i < M * K; i++) a[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
  for (int i = 0; i < N * K; i++) {
    wh[i] = f32_to_f16((float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f);
    wf[i] = f16_to_f32(wh[i]);
  }
  for (int r = 0; r < M; r++)
    for (int j = 0; j < N; j++) {
      double acc = 0;
      for (int x = 0; x < K; x++) acc += (double)a[r * K + x] * wf[j * K + x];
      want[r * N + j] = (float)acc;
    }
  gpu_linear l = {0};
  gpu_weight part = {wh, N};
  gpu_buffer *ab = NULL, *cb = NULL;
  gpu_rec *rec = NULL;
  bool ok = !gpu_linear_new(d, GPU_F16, K, &part, 1, NULL, 0, &l) &&
            !gpu_buffer_from(d, a, sizeof a, &ab) && !gpu_buffer_new(d, sizeof got, &cb) &&
            !gpu_rec_new(d, &rec);
  d->fast_gemm = d->use_fast = true;
  /* An empty problem writes the subgroup size and count. */
  if (ok) ok = !gpu_rec_begin(rec);
  if (ok) {
    gpu_kernel *k = gpu_rec_kernel(rec, "gemm_coop", (uint32_t[]){GPU_F16}, 1);
    gpu_buffer *bufs[] = {ab, l.bias, cb, l.w, l.bias};
    uint32_t push[8] = {0, l.n, l.k, 0, 0, 0, l.k, l.wk};
    gpu_dispatch(rec, k, bufs, 5, push, sizeof push, 1, 1, 1);
    ok = !gpu_rec_run(rec) && !gpu_download(cb, 0, layout, sizeof layout) && layout[0] == 32 &&
         layout[1] == 4;
  }
  if (ok) ok = !gpu_rec_begin(rec);
  if (ok) {
    gpu_gemm(rec, ab, &l, cb, M, GPU_EPI_BIAS, 0);
    ok = !gpu_rec_run(rec) && !gpu_download(cb, 0, got, sizeof got);
  }
  float worst = 0;
  for (int i = 0; ok && i < M * N; i++) worst = fmaxf(worst, fabsf(got[i] - want[i]));
  ok = ok && worst <= 1e-4f;
  d->fast_gemm = d->use_fast = false;
  gpu_rec_free(rec);
  gpu_buffer_free(ab);
  gpu_buffer_free(cb);
  gpu_linear_free(&l);
  log_info("fast GEMM probe: %s (subgroups %g × %g, max |error| %g)", ok ? "passed" : "failed",
           layout[1], layout[0], worst);
  return ok;
}

void gpu_probe_fast(gpu_device *d) {
  d->fast_gemm = gemm_probe(d);
}
