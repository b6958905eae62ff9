/* CPU transducer decoder speed: the vectorized predictor/joint against the
 * scalar reference (src/decode/transducer.c built with TRANSDUCER_SCALAR), side
 * by side in one run, on random weights of the Parakeet TDT 0.6B shapes
 * (LSTM hidden 640 × 2 layers, joint 640, 1025 classes + 5 durations).
 * Random weights emit a duration-0 token at most steps, so each call runs
 * about max_symbols · frames predictor steps. Build and run: bench/decoder_speed.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <stdbool.h>

#include "base/pool.h"
#include "decode/transducer.h"

int transducer_greedy_scalar(const transducer *m, const float *enc, int t, int stride,
                             const transducer_abort *stop, dec_tokens *out);

typedef int (*greedy_fn)(const transducer *, const float *, int, int, const transducer_abort *,
                         dec_tokens *);

static float *random_floats(size_t n, float scale, unsigned *seed) {
  float *v = malloc(n * sizeof *v);
  if (!v) exit(1);
  for (size_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    v[i] = scale * ((float)(*seed >> 8) / (float)(1u << 24) * 2 - 1);
  }
  return v;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One call's time; `out` is refilled. */
static double time_call(greedy_fn f, const transducer *m, const float *enc, int t, dec_tokens *out) {
  out->n = 0;
  double t0 = now();
  if (f(m, enc, t, m->joint, NULL, out)) exit(1);
  return now() - t0;
}

int main(int argc, char **argv) {
  int t = argc > 1 ? atoi(argv[1]) : 40, reps = argc > 2 ? atoi(argv[2]) : 3;
  if (t < 1 || reps < 1) return fprintf(stderr, "usage: decoder_speed [frames] [reps]\n"), 2;
  enum { H = 640, L = 2, J = 640, V = 1025, D = 5 };
  static const int durations[D] = {0, 1, 2, 3, 4};
  unsigned seed = 1;
  float ws = 0.04f; /* ≈ 1/√640: activations stay in range */
  transducer m = {.vocab = V, .hidden = H, .layers = L, .joint = J, .act = JOINT_RELU,
                  .durations = durations, .n_durations = D, .max_symbols = 10};
  m.embed = random_floats((size_t)V * H, 1, &seed);
  for (int l = 0; l < L; l++) {
    m.wx[l] = random_floats((size_t)4 * H * H, ws, &seed);
    m.wh[l] = random_floats((size_t)4 * H * H, ws, &seed);
    m.b[l] = random_floats((size_t)4 * H, ws, &seed);
  }
  m.pred_w = random_floats((size_t)J * H, ws, &seed);
  m.pred_b = random_floats(J, ws, &seed);
  m.out_w = random_floats((size_t)(V + D) * J, ws, &seed);
  m.out_b = random_floats(V + D, ws, &seed);
  float *enc = random_floats((size_t)t * J, 1, &seed);

  dec_tokens a = {0}, b = {0}, c = {0};
  /* Alternating calls, the best of each: the least disturbed by other load. */
  double ts = 1e30, tf = 1e30, tt = 1e30;
  transducer threaded = m;
  m.threads = 1;
  for (int r = 0; r < reps; r++) {
    double s = time_call(transducer_greedy_scalar, &m, enc, t, &a);
    double f = time_call(transducer_greedy, &m, enc, t, &b);
    double th = time_call(transducer_greedy, &threaded, enc, t, &c);
    ts = s < ts ? s : ts;
    tf = f < tf ? f : tf;
    tt = th < tt ? th : tt;
  }
  size_t same = 0;
  while (same < a.n && same < b.n && a.v[same].id == b.v[same].id && a.v[same].frame == b.v[same].frame) same++;
  bool threads_same = b.n == c.n;
  for (size_t i = 0; threads_same && i < b.n; i++)
    threads_same = b.v[i].id == c.v[i].id && b.v[i].frame == c.v[i].frame && b.v[i].p == c.v[i].p;
  printf("frames %d, tokens scalar %zu / fast %zu, first %zu identical; threaded %s\n", t, a.n, b.n,
         same, threads_same ? "identical to fast" : "DIFFERENT");
  printf("scalar %.1f ms, fast %.1f ms (%.2fx), fast on %d threads %.1f ms (%.2fx over fast)\n",
         ts * 1e3, tf * 1e3, ts / tf, pool_default_workers() + 1, tt * 1e3, tf / tt);
  if (!threads_same) return 1;
  return same == a.n && a.n == b.n ? 0 : 1;
}
