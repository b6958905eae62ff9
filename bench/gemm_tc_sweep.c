/* gemm_tc at few rows (the encoder of one clip: m ≈ 138), in one run. Times
 * are the best of 3 submissions of `reps` calls (each dispatch behind a
 * barrier, as gpu_dispatch records them), in µs per call and TFLOP/s; "diff"
 * is the largest difference from gpu_gemm's own choice relative to the largest
 * output (a wrong configuration shows there as WRONG).
 *   calls (default) where a call's time goes: (c) the per-dispatch floor, a
 *         1-invocation kernel (mark.comp) and an empty gemm_tc (m = 0: one
 *         workgroup), recorded the same way; (a) the 128×128 and 64×128
 *         tiles at Parakeet's shapes, k cut as gpu_gemm cuts it for each;
 *         (b) a k-scan at m × 3072 × k, k = 32…2048, no split, each tile,
 *         with the line fitted through it (µs per 32-wide k step, fixed µs
 *         per call).
 *   tiles 12 tiles × split counts 1–16 at the same shapes.
 *   big   tiles at large m (a batch of 64 clips, Whisper's 1500 rows, 4096³),
 *         one piece each (m is ignored).
 *   fit   row tiles covering m = 138 in one (144 rows) against 128, over
 *         split counts.
 *   wide  tiles of 4, 8 and 16 subgroups at large m with a in f16, one
 *         piece each (m is ignored).
 *   peak  the tensor cores' rate through NV cooperative matrices with no
 *         loads (mma_peak.comp): chains of products into 1 … 16
 *         accumulators a subgroup: 16×16 f32 and f16 accumulators, 16×8
 *         f32 ones (m is ignored).
 *   diag  gpu_gemm's tile at large m with parts of its k loop left out
 *         (gemm_tc's DIAG: the global loads, the products, the barriers;
 *         results wrong by design), to see where a step's time goes.
 *   own   gpu_gemm's own four tiles × split counts 1–16 at the same shapes.
 *   all   calls and tiles.
 * (gemm_tc's DEPTH 2 and split-k FIXUP experiments were timed with this
 * bench on the H200 and removed: docs/perf.md.)
 * Needs gemm_tc (NVIDIA cooperative matrices): on lavapipe it says so and stops.
 * Build: bench/build_benches.sh BUILD;
 * run: BUILD/gemm_tc_sweep [reps] [m] [calls|tiles|big|fit|wide|peak|diag|own|all]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/internal.h"
#include "gpu/linear.h"
#include "support/quant.h"
#include "gpu_timing.h"

static float *random_floats(size_t n, float scale) {
  float *v = malloc(n * sizeof *v);
  if (!v) exit(1);
  for (size_t i = 0; i < n; i++) v[i] = ((float)rand() / RAND_MAX * 2 - 1) * scale;
  return v;
}

typedef struct {
  uint32_t sg_m, sg_n, tm, tn, bk; /* bk 0: 32 */
} tile;

/* A problem on the GPU: a [m][k], c [m][n], F16 weights with bias, and
 * gpu_gemm's own result (ref) to compare with. */
typedef struct {
  uint32_t m, n, k;
  gpu_buffer *a, *c;
  gpu_linear l;
  float *ref, *out;
  double top, flop;
} problem;

/* One gemm_tc call with tile t and `splits` pieces of k (as gpu_gemm records
 * them: the pieces summed by gemm_reduce). */
static void record(gpu_rec *rec, const tile *t, const problem *pb, uint32_t splits, bool a16,
                   uint32_t diag) {
  gpu_device *d = gpu_rec_device(rec);
  const gpu_linear *l = &pb->l;
  uint32_t threads = 32 * t->sg_m * t->sg_n, m = pb->m;
  uint32_t bk = t->bk ? t->bk : 32;
  uint32_t spec[9] = {GPU_F16, t->sg_m, t->sg_n, t->tm, t->tn, threads, bk, a16, diag};
  uint32_t bm = t->sg_m * t->tm * 16, bn = t->sg_n * t->tn * 16;
  uint32_t kc = (l->k + splits - 1) / splits;
  kc = (kc + bk - 1) / bk * bk;
  splits = (l->k + kc - 1) / kc;
  struct {
    uint32_t m, n, k, mode;
    float alpha;
    uint32_t dual, lda, wk, splits, kc;
  } push = {m, l->n, l->k, GPU_EPI_BIAS, 1.0f, l->dual, l->k, l->wk, splits, kc};
  gpu_buffer *part = gpu_device_scratch(d, (size_t)32 << 20);
  gpu_buffer *bufs[] = {pb->a, l->bias, pb->c, l->w, l->bias, splits > 1 ? part : pb->c};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "gemm_tc", spec, diag ? 9 : a16 ? 8 : 7), bufs, 6, &push, sizeof push,
               (l->n + bn - 1) / bn, (m + bm - 1) / bm, splits);
  if (splits == 1) return;
  struct {
    uint32_t m, n, splits, mode;
    float alpha;
    uint32_t dual;
  } rpush = {m, l->n, splits, GPU_EPI_BIAS, 1.0f, l->dual};
  gpu_buffer *rbufs[] = {part, l->bias, pb->c};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "gemm_reduce", NULL, 0), rbufs, 3, &rpush, sizeof rpush,
               (l->n + 255) / 256, m, 1);
}

/* What one timed call records: gpu_gemm (t NULL) or record()'s configuration. */
typedef struct {
  const tile *t;
  uint32_t splits;
  bool a16; /* a in f16 (ATYPE 1): the problem's a buffer holds halves */
  uint32_t diag; /* gemm_tc's DIAG bits (the `diag` sweep) */
} config;

/* One call of configuration c. */
static void record_one(gpu_rec *rec, const problem *pb, const config *c) {
  if (c->t) record(rec, c->t, pb, c->splits, c->a16, c->diag);
  else gpu_gemm(rec, pb->a, &pb->l, pb->c, pb->m, GPU_EPI_BIAS, 1.0f);
}

/* gemm_tc's 16-subgroup tile with k by 64 on a in f16 (pb->a holds it; lda in
 * halves), one piece: ATYPE 1. */
static void record_f16a(gpu_rec *rec, const problem *pb, const config *unused) {
  (void)unused;
  const gpu_linear *l = &pb->l;
  uint32_t spec[8] = {GPU_F16, 4, 4, 2, 2, 512, 64, 1};
  struct {
    uint32_t m, n, k, mode;
    float alpha;
    uint32_t dual, lda, wk, splits, kc;
  } push = {pb->m, l->n, l->k, GPU_EPI_BIAS, 1.0f, l->dual, l->k, l->wk, 1, l->k};
  gpu_buffer *bufs[] = {pb->a, l->bias, pb->c, l->w, l->bias, pb->c};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "gemm_tc", spec, 8), bufs, 6, &push, sizeof push,
               (l->n + 127) / 128, (pb->m + 127) / 128, 1);
}

/* What timed() records: fn's call of pb in configuration c. */
typedef struct {
  void (*fn)(gpu_rec *, const problem *, const config *);
  const problem *pb;
  const config *c;
} timed_call;

static void record_timed(gpu_rec *rec, const void *arg) {
  const timed_call *t = arg;
  t->fn(rec, t->pb, t->c);
}

/* Best µs per call of `reps` calls per submission, each recorded by fn
 * (gpu_timing.h: warmed first). */
static double timed(gpu_device *d, void (*fn)(gpu_rec *, const problem *, const config *),
                    const problem *pb, const config *c, int reps) {
  return bench_gpu_best_us(d, record_timed, &(timed_call){fn, pb, c}, reps);
}

/* The largest difference of c from ref, relative to ref's largest value. */
static double diff_from_ref(problem *pb) {
  size_t count = (size_t)pb->m * pb->n;
  if (gpu_download(pb->c, 0, pb->out, count * 4)) exit(1);
  double diff = 0;
  for (size_t i = 0; i < count; i++) diff = fmax(diff, fabs(pb->out[i] - pb->ref[i]));
  return diff / pb->top;
}

/* pb's a as halves on the GPU (the caller frees it). */
static gpu_buffer *f16_copy_of_a(gpu_device *d, const problem *pb) {
  size_t count = (size_t)pb->m * pb->k;
  float *x = malloc(count * 4);
  if (!x || gpu_download(pb->a, 0, x, count * 4)) exit(1);
  uint8_t *h = quant_encode(GPU_F16, x, count);
  gpu_buffer *a16;
  if (!h || gpu_buffer_from(d, h, count * 2, &a16)) exit(1);
  free(h), free(x);
  return a16;
}

/* pb's a swapped for its f16 copy (gemm_tc's ATYPE 1; returns the f32 one),
 * and back (the copy freed). */
static gpu_buffer *to_f16_a(gpu_device *d, problem *pb) {
  gpu_buffer *a32 = pb->a;
  pb->a = f16_copy_of_a(d, pb);
  return a32;
}

static void back_to_f32_a(problem *pb, gpu_buffer *a32) {
  gpu_buffer_free(pb->a);
  pb->a = a32;
}

/* The 16-subgroup tile with k by 64 reading pb's a already in f16 (gemm_tc's
 * ATYPE 1: the products gpu_gemm makes, from half the bytes of a), one piece,
 * where that tile passed its probe. */
static void time_f16a(gpu_device *d, problem *pb, int reps) {
  if (!gpu_gemm_variant_ok(d, GPU_GEMM_TC128K)) return;
  gpu_buffer *a32 = to_f16_a(d, pb);
  double u = timed(d, record_f16a, pb, &(config){0}, reps);
  back_to_f32_a(pb, a32);
  double diff = diff_from_ref(pb);
  printf("  128×128 on 16 sg, k by 64, a in f16  %.1f (%.1f) [%.0e]%s\n", u, pb->flop / u * 1e-6, diff,
         diff > 1e-3 ? " WRONG" : "");
  fflush(stdout);
}

/* Uploads a random problem and times gpu_gemm's own choice on it (ref). */
static double problem_new(gpu_device *d, uint32_t m, uint32_t n, uint32_t k, int reps, problem *pb) {
  memset(pb, 0, sizeof *pb);
  pb->m = m, pb->n = n, pb->k = k, pb->flop = 2.0 * m * n * k;
  float *x = random_floats((size_t)m * k, 1.0f), *w = random_floats((size_t)n * k, 0.05f);
  float *bias = random_floats(n, 0.1f);
  uint8_t *bytes = quant_encode(GPU_F16, w, (size_t)n * k);
  pb->ref = malloc((size_t)m * n * 4), pb->out = malloc((size_t)m * n * 4);
  if (!pb->ref || !pb->out || gpu_buffer_from(d, x, (size_t)m * k * 4, &pb->a) ||
      gpu_buffer_new(d, (size_t)m * n * 4, &pb->c) ||
      gpu_linear_new(d, GPU_F16, k, &(gpu_weight){bytes, n}, 1, bias, n, &pb->l))
    exit(1);
  free(x), free(w), free(bias), free(bytes);
  double us = timed(d, record_one, pb, &(config){0}, reps);
  if (gpu_download(pb->c, 0, pb->ref, (size_t)m * n * 4)) exit(1);
  pb->top = 1e-30;
  for (size_t i = 0; i < (size_t)m * n; i++) pb->top = fmax(pb->top, fabs(pb->ref[i]));
  return us;
}

/* problem_new, then its line: the shape and gpu_gemm's own choice's time. */
static void problem_shown(gpu_device *d, uint32_t m, uint32_t n, uint32_t k, int reps, problem *pb) {
  double us = problem_new(d, m, n, k, reps, pb);
  printf("%u×%u×%u  gpu_gemm's choice %.1f µs (%.1f)\n", m, n, k, us, pb->flop / us * 1e-6);
}

static void problem_free(problem *pb) {
  gpu_linear_free(&pb->l);
  gpu_buffer_free(pb->a), gpu_buffer_free(pb->c);
  free(pb->ref), free(pb->out);
}

static const uint32_t shapes[][2] = {{3072, 1024}, {4096, 1024}, {1024, 4096}, {1024, 1024}, {2048, 1024}};

/* (a) gpu_gemm forced to each of its gemm_tc tiles, k cut as gpu_gemm
 * cuts it for that tile (gpu_gemm_plan_for). */
static void tc_shapes(gpu_device *d, uint32_t rows, int reps) {
  static const gpu_gemm_variant variants[] = {GPU_GEMM_TC128, GPU_GEMM_TC64, GPU_GEMM_TC128W,
                                              GPU_GEMM_TC128K};
  printf("(a) gpu_gemm forced to a gemm_tc tile: µs (TFLOP/s) [diff]\n");
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    problem pb;
    problem_shown(d, rows, shapes[s][0], shapes[s][1], reps, &pb);
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
      if (!gpu_gemm_variant_ok(d, variants[v])) continue;
      gpu_gemm_force(d, variants[v]);
      const gpu_gemm_tile *t = &gpu_gemm_tiles[variants[v]];
      gpu_gemm_plan plan;
      gpu_gemm_plan_for(d, &pb.l, pb.k, pb.m, &plan);
      double u = timed(d, record_one, &pb, &(config){0}, reps), diff = diff_from_ref(&pb);
      printf("  %3u×%-3u/%-2u k%-2u %u piece%s  %.1f (%.0f) [%.1e]%s\n", t->sg_m * t->tm * 16,
             t->sg_n * t->tn * 16, t->sg_m * t->sg_n, t->bk, plan.splits,
             plan.splits > 1 ? "s" : " ", u, pb.flop / u * 1e-6, diff, diff > 1e-3 ? " WRONG" : "");
      fflush(stdout);
    }
    gpu_gemm_force(d, GPU_GEMM_AUTO);
    time_f16a(d, &pb, reps);
    problem_free(&pb);
  }
}

/* (b) µs per call against k with no split: the slope is a k step's cost, the
 * intercept the call's fixed cost; least squares over k ≥ 128. */
static void k_scan(gpu_device *d, uint32_t rows, int reps) {
  static const uint32_t ks[] = {32, 64, 128, 256, 512, 1024, 2048};
  static const tile tiles[] = {{2, 4, 4, 2, 32}, {2, 2, 2, 4, 32}};
  enum { NK = sizeof ks / sizeof *ks, NC = sizeof tiles / sizeof *tiles };
  double us[NK][NC];
  printf("(b) k-scan, %u×3072×k, one piece: µs per call [diff]\n     k", rows);
  for (int c = 0; c < NC; c++) printf("   %s         ", c ? "64×128 " : "128×128");
  printf("\n");
  for (int q = 0; q < NK; q++) {
    problem pb;
    problem_new(d, rows, 3072, ks[q], reps, &pb);
    printf("%6u", ks[q]);
    for (int c = 0; c < NC; c++) {
      config cf = {&tiles[c], 1, false, 0};
      us[q][c] = timed(d, record_one, &pb, &cf, reps);
      double diff = diff_from_ref(&pb);
      printf("   %7.2f [%.0e]%s", us[q][c], diff, diff > 1e-3 ? " WRONG" : "");
    }
    printf("\n");
    fflush(stdout);
    problem_free(&pb);
  }
  for (int c = 0; c < NC; c++) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0, n = 0;
    for (int q = 0; q < NK; q++) {
      if (ks[q] < 128) continue;
      double x = ks[q] / 32.0;
      sx += x, sy += us[q][c], sxx += x * x, sxy += x * us[q][c], n++;
    }
    double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx), icpt = (sy - slope * sx) / n;
    printf("  %s: %.3f µs per k step of 32 + %.2f µs per call\n", c ? "64×128 " : "128×128", slope,
           icpt);
  }
}

/* (c) a 1-invocation dispatch (the recorder's completion mark) and an empty
 * gemm_tc (m = 0: one workgroup writes two floats), to know the floor. */
static void floor_mark(gpu_rec *rec, const problem *pb, const config *c) {
  (void)c;
  uint32_t push[2] = {0, 1};
  gpu_buffer *c_buf = pb->c;
  gpu_dispatch(rec, gpu_rec_kernel(rec, "mark", NULL, 0), &c_buf, 1, push, sizeof push, 1, 1, 1);
}

static void floor_empty_tc(gpu_rec *rec, const problem *pb, const config *c) {
  (void)c;
  uint32_t spec[6] = {GPU_F16, 2, 4, 4, 2, 256}; /* the default 128×128 tile */
  struct {
    uint32_t m, n, k, mode;
    float alpha;
    uint32_t dual, lda, wk, splits, kc;
  } push = {0, pb->l.n, pb->l.k, GPU_EPI_BIAS, 1.0f, 0, pb->l.k, pb->l.wk, 1, pb->l.k};
  gpu_buffer *bufs[] = {pb->a, pb->l.bias, pb->c, pb->l.w, pb->l.bias, pb->c};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "gemm_tc", spec, 6), bufs, 6, &push, sizeof push, 1, 1, 1);
}

static void dispatch_floor(gpu_device *d, uint32_t rows, int reps) {
  problem pb;
  problem_new(d, rows, 1024, 64, reps, &pb);
  printf("(c) per-dispatch floor: mark (1 invocation) %.2f µs, empty gemm_tc (1 workgroup) %.2f µs\n",
         timed(d, floor_mark, &pb, NULL, reps), timed(d, floor_empty_tc, &pb, NULL, reps));
  problem_free(&pb);
  /* One 64×64 workgroup alone (no other load on the GPU), then m rows × 3072
   * (48 or more workgroups), at 1, 2, 8 and 32 k steps: what a workgroup's
   * prologue and epilogue cost, and a step when nothing else runs. */
  static const tile t64 = {2, 2, 2, 2, 32};
  static const uint32_t ks[] = {32, 64, 256, 1024};
  printf("    64×64 tile, one piece: µs per call at k =");
  for (size_t q = 0; q < sizeof ks / sizeof *ks; q++) printf(" %u", ks[q]);
  printf("\n");
  const uint32_t sizes[][2] = {{64, 64}, {rows, 3072}};
  for (int z = 0; z < 2; z++) {
    printf("    %u×%u×k:", sizes[z][0], sizes[z][1]);
    for (size_t q = 0; q < sizeof ks / sizeof *ks; q++) {
      problem_new(d, sizes[z][0], sizes[z][1], ks[q], reps, &pb);
      double u = timed(d, record_one, &pb, &(config){&t64, 1, false, 0}, reps), diff = diff_from_ref(&pb);
      printf("  %.2f%s", u, diff > 1e-3 ? " WRONG" : "");
      problem_free(&pb);
    }
    printf("\n");
  }
}

/* Tiles × split counts (gemm_reduce sums the pieces) at the shapes, under
 * `title`: each tile's µs (TFLOP/s) per split count, pieces of k under 64
 * (or the tile's k step) or past the 32 MiB scratch left out. */
static void split_sweep(gpu_device *d, uint32_t rows, int reps, const char *title,
                        const tile *tiles, size_t ntiles, const uint32_t *splits, size_t nsplits) {
  printf("%s: µs (TFLOP/s)\n", title);
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    problem pb;
    problem_shown(d, rows, shapes[s][0], shapes[s][1], reps, &pb);
    for (size_t t = 0; t < ntiles; t++) {
      const tile *tl = &tiles[t];
      uint32_t least = tl->bk > 64 ? tl->bk : 64;
      printf("  %3u×%-3u k%u (%u×%u sg, %u×%u)", tl->sg_m * tl->tm * 16, tl->sg_n * tl->tn * 16,
             tl->bk, tl->sg_m, tl->sg_n, tl->tm, tl->tn);
      for (size_t q = 0; q < nsplits; q++) {
        uint32_t sp = splits[q];
        if (pb.k / sp < least || (size_t)sp * pb.m * pb.n * 4 > ((size_t)32 << 20)) continue;
        double u = timed(d, record_one, &pb, &(config){tl, sp, false, 0}, reps);
        printf("  s%u %.1f (%.0f)%s", sp, u, pb.flop / u * 1e-6,
               diff_from_ref(&pb) > 1e-3 ? " WRONG" : "");
      }
      printf("\n");
      fflush(stdout);
    }
    problem_free(&pb);
  }
}

/* Tile shapes × split counts. */
static void tile_sweep(gpu_device *d, uint32_t rows, int reps) {
  static const tile tiles[] = {{2, 4, 4, 2, 32}, {2, 2, 2, 4, 32}, {2, 2, 2, 2, 32},
                               {1, 4, 2, 2, 32}, {1, 4, 1, 2, 32}, {2, 4, 2, 2, 32},
                               {1, 2, 2, 4, 32}, {2, 2, 1, 2, 32}, {4, 2, 1, 2, 32},
                               {2, 2, 4, 4, 32}, {1, 2, 4, 4, 32}, {2, 1, 4, 4, 32}};
  static const uint32_t splits[] = {1, 2, 3, 4, 6, 8, 12, 16};
  split_sweep(d, rows, reps, "tiles × split counts", tiles, sizeof tiles / sizeof *tiles, splits,
              sizeof splits / sizeof *splits);
}

/* gpu_gemm's own tiles (its TC variants) × split counts. */
static void own_sweep(gpu_device *d, uint32_t rows, int reps) {
  static const tile tiles[] = {{4, 4, 2, 2, 64}, {4, 4, 2, 2, 32}, {2, 2, 2, 4, 32}, {2, 4, 4, 2, 32}};
  static const uint32_t splits[] = {1, 2, 3, 4, 6, 8, 16};
  split_sweep(d, rows, reps, "gpu_gemm's tiles × split counts", tiles, sizeof tiles / sizeof *tiles,
              splits, sizeof splits / sizeof *splits);
}

/* gpu_gemm on a large shape for ~2 s first: on the H200 a fresh process's
 * first seconds ran at lower clocks (docs/perf.md, tenth session: gpu_gemm's
 * own choice 139 µs there against 30 µs a few seconds later). */
static void warm_up(gpu_device *d, uint32_t rows) {
  problem pb;
  double t0 = bench_now_ms();
  problem_new(d, rows, 4096, 1024, 20, &pb);
  while (bench_now_ms() - t0 < 2000) timed(d, record_one, &pb, &(config){0}, 50);
  problem_free(&pb);
}

/* Tiles at large m with a in f16 (ATYPE 1, as gpu_gemm runs gemm_tc from
 * 1 024 rows), one piece: subgroups per workgroup (16 fill an SM alone at
 * ~116 registers; 8 or 4 leave room for a second workgroup), a subgroup's
 * share (2×2 … 4×4 matrices) and the k step. A tile runs where its shared
 * memory (one stage of (BM + BN) rows of BK + 8 halves, two where they fit)
 * and its epilogue's (SG_M·SG_N·TN·1 KiB) stay within 48 KiB. */
static void wide_sweep(gpu_device *d, int reps) {
  static const tile tiles[] = {
      {4, 4, 2, 2, 64}, {4, 4, 2, 2, 32}, {2, 4, 4, 2, 32}, {2, 4, 4, 2, 64}, {4, 2, 2, 4, 32},
      {4, 2, 2, 4, 64}, {4, 4, 4, 2, 32}, {2, 2, 4, 4, 32}, {2, 2, 4, 4, 64}, {4, 2, 4, 4, 32},
      {2, 4, 4, 4, 32}, {2, 4, 2, 2, 32}, {2, 4, 2, 2, 64}, {4, 2, 2, 2, 64}, {2, 2, 2, 2, 64},
      {4, 2, 4, 2, 32}, {2, 4, 2, 4, 32}, {4, 4, 2, 2, 64}};
  static const uint32_t big[][3] = {{4096, 4096, 4096}, {8832, 4096, 1024}, {8832, 1024, 4096},
                                    {8832, 3072, 1024}, {1500, 3840, 1280}, {1500, 5120, 1280},
                                    {1500, 1280, 5120}, {1500, 1280, 1280}};
  printf("big m, a in f16, one piece: µs (TFLOP/s) [diff from gpu_gemm's choice]\n");
  for (size_t s = 0; s < sizeof big / sizeof *big; s++) {
    problem pb;
    problem_shown(d, big[s][0], big[s][1], big[s][2], reps, &pb);
    gpu_buffer *a32 = to_f16_a(d, &pb);
    for (size_t t = 0; t < sizeof tiles / sizeof *tiles; t++) {
      const tile *tl = &tiles[t];
      uint32_t bm = tl->sg_m * tl->tm * 16, bn = tl->sg_n * tl->tn * 16;
      uint32_t stage = (bm + bn) * (tl->bk / 8 + 1) * 16, out = tl->sg_m * tl->sg_n * tl->tn * 1024;
      if (stage > 49152 || out > 49152) continue;
      double u = timed(d, record_one, &pb, &(config){tl, 1, true, 0}, reps), diff = diff_from_ref(&pb);
      printf("  %3u×%-3u k%u (%u×%u sg, %u×%u, %s)  %.1f (%.1f) [%.0e]%s\n", bm, bn, tl->bk,
             tl->sg_m, tl->sg_n, tl->tm, tl->tn, 2 * stage <= 49152 ? "2 stages" : "1 stage", u,
             pb.flop / u * 1e-6, diff, diff > 1e-3 ? " WRONG" : "");
      fflush(stdout);
    }
    back_to_f32_a(&pb, a32);
    problem_free(&pb);
  }
}

/* Row tiles that cover m = 138 in one (144 = 3 subgroups × 3 × 16, the
 * chunks of a step not a whole number of rounds on 12 subgroups) against
 * the 128-row tile gpu_gemm takes (two row tiles, the second 10 rows), each
 * over split counts: a lone 128×128 workgroup fills an SM, so 256 of them
 * run in two waves on 132 SMs. */
static void fit_sweep(gpu_device *d, uint32_t rows, int reps) {
  static const tile tiles[] = {{4, 4, 2, 2, 64}, {3, 4, 3, 2, 64}, {3, 4, 3, 2, 32},
                               {3, 2, 3, 4, 32}, {3, 2, 3, 2, 64}, {3, 2, 3, 2, 32}};
  static const uint32_t splits[] = {1, 2, 3, 4, 6, 8};
  split_sweep(d, rows, reps, "row tiles × split counts", tiles, sizeof tiles / sizeof *tiles, splits,
              sizeof splits / sizeof *splits);
}

/* Tiles at large m, one piece: a subgroup's share of a tile (TM × TN
 * matrices) against how many subgroups share its loads. Shared memory
 * (2 stages of (BM + BN) rows of 80 bytes) must stay within 48 KiB. */
static void big_sweep(gpu_device *d, int reps) {
  static const tile tiles[] = {{2, 4, 4, 2, 32}, {2, 2, 2, 4, 32}, {2, 2, 4, 4, 32},
                               {1, 2, 4, 4, 32}, {2, 1, 4, 4, 32}, {4, 2, 2, 4, 32},
                               {4, 4, 2, 2, 32}};
  static const uint32_t big[][3] = {{8832, 4096, 1024}, {8832, 1024, 4096}, {8832, 3072, 1024},
                                    {1500, 3840, 1280}, {1500, 5120, 1280}, {1500, 1280, 5120},
                                    {1500, 1280, 1280}, {4096, 4096, 4096}};
  printf("big m, one piece: µs (TFLOP/s) [diff from gpu_gemm's choice]\n");
  for (size_t s = 0; s < sizeof big / sizeof *big; s++) {
    problem pb;
    problem_shown(d, big[s][0], big[s][1], big[s][2], reps, &pb);
    for (size_t t = 0; t < sizeof tiles / sizeof *tiles; t++) {
      const tile *tl = &tiles[t];
      uint32_t bm = tl->sg_m * tl->tm * 16, bn = tl->sg_n * tl->tn * 16;
      if (2u * (bm + bn) * 80 > 49152) continue;
      double u = timed(d, record_one, &pb, &(config){tl, 1, false, 0}, reps), diff = diff_from_ref(&pb);
      printf("  %3u×%-3u (%u×%u sg, %u×%u)  %.1f (%.1f) [%.0e]%s\n", bm, bn, tl->sg_m, tl->sg_n,
             tl->tm, tl->tn, u, pb.flop / u * 1e-6, diff, diff > 1e-3 ? " WRONG" : "");
      fflush(stdout);
    }
    /* gpu_gemm forced to the 16-subgroup tile with k by 32 and by 64. */
    static const gpu_gemm_variant wide[] = {GPU_GEMM_TC128W, GPU_GEMM_TC128K};
    for (size_t v = 0; v < sizeof wide / sizeof *wide; v++) {
      if (!gpu_gemm_variant_ok(d, wide[v])) continue;
      gpu_gemm_force(d, wide[v]);
      double u = timed(d, record_one, &pb, &(config){0}, reps), diff = diff_from_ref(&pb);
      printf("  gpu_gemm, 128×128 on 16 sg, k by %u  %.1f (%.1f) [%.0e]%s\n",
             gpu_gemm_tiles[wide[v]].bk, u, pb.flop / u * 1e-6, diff,
             diff > 1e-3 ? " WRONG" : "");
      fflush(stdout);
    }
    gpu_gemm_force(d, GPU_GEMM_AUTO);
    time_f16a(d, &pb, reps);
    problem_free(&pb);
  }
}

/* mma_peak: 16 workgroups an SM's worth (132 SMs) of 8 subgroups, each
 * making `iters` products into each of its accumulators (the call timed()
 * records: peak_spec and peak_out say which and where). */
static uint32_t peak_spec[6];
static gpu_buffer *peak_out;
enum { PEAK_GROUPS = 132 * 16, PEAK_ITERS = 1024 };

static void record_peak(gpu_rec *rec, const problem *unused, const config *unused_c) {
  (void)unused, (void)unused_c;
  gpu_buffer *bufs[] = {peak_out, peak_out};
  uint32_t iters = PEAK_ITERS;
  gpu_dispatch(rec, gpu_rec_kernel(rec, "mma_peak", peak_spec, 6), bufs, 2, &iters, sizeof iters,
               PEAK_GROUPS, 1, 1);
}

static void peak_sweep(gpu_device *d, int reps) {
  if (gpu_buffer_new(d, (size_t)PEAK_GROUPS * 8 * 256 * 4, &peak_out)) exit(1);
  static const uint32_t ns[] = {1, 2, 4, 8, 16};
  printf("mma_peak: %u workgroups of 8 subgroups, %u products into each accumulator\n", PEAK_GROUPS,
         PEAK_ITERS);
  for (uint32_t kind = 0; kind < 3; kind++) /* 16×16 f32, 16×16 f16, 16×8 f32 */
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
      memcpy(peak_spec, (uint32_t[6]){ns[i], kind == 1, 256, kind == 2, 0, 9}, sizeof peak_spec);
      double us = timed(d, record_peak, NULL, NULL, reps);
      double flop = (double)PEAK_GROUPS * 8 * PEAK_ITERS * ns[i] * 2.0 * 16 * 16 * (kind == 2 ? 8 : 16);
      printf("  %2u accumulators a subgroup, %s: %9.1f µs a call, %6.1f TFLOP/s\n", ns[i],
             kind == 0 ? "16×16 f32" : kind == 1 ? "16×16 f16" : "16×8 f32", us, flop / us * 1e-6);
    }
  /* gemm_tc's inner step: 2 + 2 matrices from shared memory, 4 products. */
  static const uint32_t loads[][2] = {{1, 9}, {2, 9}, {1, 5}, {2, 5}, {1, 8}, {2, 8}, {1, 17}};
  for (size_t i = 0; i < sizeof loads / sizeof *loads; i++) {
    memcpy(peak_spec, (uint32_t[6]){4, 0, 256, 0, loads[i][0], loads[i][1]}, sizeof peak_spec);
    double us = timed(d, record_peak, NULL, NULL, reps);
    double flop = (double)PEAK_GROUPS * 8 * PEAK_ITERS * 4 * 2.0 * 16 * 16 * 16;
    printf("  2 + 2 matrices from shared memory (b %s, rows of %u words), 4 products: %9.1f µs, "
           "%6.1f TFLOP/s\n",
           loads[i][0] == 1 ? "column-major" : "row-major", loads[i][1], us, flop / us * 1e-6);
  }
  gpu_buffer_free(peak_out);
}

/* gpu_gemm's tile at large m (16 subgroups of 2×2, k by 64, a in f16) with
 * parts of the k loop left out. */
static void diag_sweep(gpu_device *d, int reps) {
  static const tile t = {4, 4, 2, 2, 64};
  static const uint32_t shapes[][3] = {{4096, 4096, 4096}, {1500, 5120, 1280}, {1500, 1280, 1280}};
  static const struct {
    uint32_t bits;
    const char *name;
  } diags[] = {{0, "whole"}, {1, "no global loads"}, {4, "no barriers"}, {5, "no loads, no barriers"},
               {0, "whole again"}};
  printf("gemm_tc 128×128 on 16 sg, k by 64, a in f16, parts left out: µs (TFLOP/s as if whole)\n");
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    problem pb;
    problem_shown(d, shapes[s][0], shapes[s][1], shapes[s][2], reps, &pb);
    gpu_buffer *a32 = to_f16_a(d, &pb);
    for (size_t i = 0; i < sizeof diags / sizeof *diags; i++) {
      double u = timed(d, record_one, &pb, &(config){&t, 1, true, diags[i].bits}, reps);
      printf("  %-28s %8.1f (%.1f)%s\n", diags[i].name, u, pb.flop / u * 1e-6,
             diags[i].bits ? "" : diff_from_ref(&pb) > 1e-3 ? " WRONG" : "");
      fflush(stdout);
    }
    back_to_f32_a(&pb, a32);
    problem_free(&pb);
  }
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 20;
  uint32_t rows = argc > 2 ? (uint32_t)atoi(argv[2]) : 138;
  const char *what = argc > 3 ? argv[3] : "calls";
  bool calls = !strcmp(what, "calls") || !strcmp(what, "all"), tiles = !strcmp(what, "tiles") || !strcmp(what, "all");
  bool bigs = !strcmp(what, "big"), fit = !strcmp(what, "fit"), wide = !strcmp(what, "wide");
  bool peak = !strcmp(what, "peak"), diag = !strcmp(what, "diag"), own = !strcmp(what, "own");
  gpu_device *d;
  if (reps < 1 || rows < 1 || !(calls || tiles || bigs || fit || wide || peak || diag || own)) {
    fprintf(stderr, "usage: gemm_tc_sweep [reps] [m] [calls|tiles|big|fit|wide|peak|diag|own|all]\n");
    return 1;
  }
  if (gpu_open(NULL, &d)) return 1;
  if (!gpu_gemm_variant_ok(d, GPU_GEMM_TC128) || !gpu_gemm_variant_ok(d, GPU_GEMM_TC64)) {
    printf("%s: gemm_tc not available\n", gpu_device_info(d)->name);
    gpu_close(d);
    return 0;
  }
  if (!gpu_device_scratch(d, (size_t)32 << 20)) return 1;
  printf("%s, m = %u, best of 3 submissions of %d calls\n", gpu_device_info(d)->name, rows, reps);
  warm_up(d, rows);
  if (calls) {
    dispatch_floor(d, rows, reps);
    tc_shapes(d, rows, reps);
    k_scan(d, rows, reps);
  }
  if (tiles) tile_sweep(d, rows, reps);
  if (bigs) big_sweep(d, reps);
  if (fit) fit_sweep(d, rows, reps);
  if (wide) wide_sweep(d, reps);
  if (peak) peak_sweep(d, reps);
  if (diag) diag_sweep(d, reps);
  if (own) own_sweep(d, rows, reps);
  gpu_close(d);
  return 0;
}
