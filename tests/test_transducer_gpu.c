/* The GPU transducer search (nn/transducer_gpu.c, rnnt_*.comp) against the CPU
 * one (decode/transducer.c, the plain C reference) on random weights: RNN-T
 * and TDT, one to three LSTM layers, the three joint activations, the 0.6B
 * models' widths; every GPU way (steps, the persistent rnnt_search, the grid's
 * rnnt_grid), one clip and batches. Tokens, frames and durations exactly; confidences to 1e-4.
 * Random weights decode degenerately (many symbols per frame, the
 * max_symbols cap): every rule of the search gets exercised. Also: both
 * searches stop when the caller's abort callback asks, and refuse a
 * max_symbols outside 1 .. TRANSDUCER_MAX_SYMBOLS. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "base/half.h"
#include "check.h"
#include "decode/transducer.h"
#include "nn/transducer_gpu.h"
#include "gpu_test.h"
#include "steno.h"

static float *random_weights(size_t n, float scale, uint32_t seed) {
  float *v = malloc(n * sizeof *v);
  check_random(v, n, seed);
  for (size_t i = 0; v && i < n; i++) v[i] *= scale;
  return v;
}

/* Whether model_new rounds the matrices (wx, wh, pred_w, out_w) to f16, as an
 * F16 file's are: the persistent kernel then reads them in f16. */
static bool test_f16;

static float *matrix(size_t n, float scale, uint32_t seed) {
  float *v = random_weights(n, scale, seed);
  for (size_t i = 0; test_f16 && v && i < n; i++) v[i] = f16_to_f32(f32_to_f16(v[i]));
  return v;
}

/* A random decoder and encoder projection (stride joint + 3, as the GPU head
 * pads); what it allocated is in keep[0 .. *k). */
typedef struct {
  transducer m;
  float *keep[8 + 3 * TRANSDUCER_MAX_LAYERS];
  int k;
  float *enc;
  uint32_t stride;
  gpu_buffer *genc;
} model;

static const int durs[] = {0, 1, 2, 3, 4};

/* blank_boost is added to the blank's logit bias, dur0_boost to duration 0's:
 * blanks of duration 0 (which still advance one frame), runs of tokens of
 * duration 0 up to the max_symbols cap, or (blank_boost −1e4) no blank at all. */
static void model_new(model *x, int hidden, int layers, int joint, int vocab, int n_dur,
                      joint_act act, int max_symbols, int t, uint32_t seed, float blank_boost,
                      float dur0_boost) {
  *x = (model){.m = {.vocab = vocab, .hidden = hidden, .layers = layers, .joint = joint, .act = act,
                     .durations = n_dur ? durs : NULL, .n_durations = n_dur,
                     .max_symbols = max_symbols, .threads = 1}};
  transducer *m = &x->m;
  size_t H = (size_t)hidden, J = (size_t)joint, R = (size_t)(vocab + n_dur);
  float sh = 1.0f / sqrtf((float)H), sj = 2.0f / sqrtf((float)J);
  m->embed = x->keep[x->k++] = random_weights((size_t)vocab * H, 1.0f, seed + 1);
  for (int l = 0; l < layers; l++) {
    m->wx[l] = x->keep[x->k++] = matrix(4 * H * H, sh, seed + 10 + l);
    m->wh[l] = x->keep[x->k++] = matrix(4 * H * H, sh, seed + 20 + l);
    m->b[l] = x->keep[x->k++] = random_weights(4 * H, 0.5f, seed + 30 + l);
  }
  m->pred_w = x->keep[x->k++] = matrix(J * H, sh, seed + 2);
  m->pred_b = x->keep[x->k++] = random_weights(J, 0.5f, seed + 3);
  m->out_w = x->keep[x->k++] = matrix(R * J, sj, seed + 4);
  float *out_b = x->keep[x->k++] = random_weights(R, 0.5f, seed + 5);
  out_b[vocab - 1] += blank_boost;
  if (n_dur) out_b[vocab] += dur0_boost;
  m->out_b = out_b;
  x->stride = (uint32_t)J + 3;
  x->enc = x->keep[x->k++] = random_weights((size_t)t * x->stride, 1.0f, seed + 6);
  CHECK_OK(gpu_buffer_from(test_device(), x->enc, (size_t)t * x->stride * sizeof *x->enc, &x->genc));
}

static void model_free(model *x) {
  gpu_buffer_free(x->genc);
  for (int i = 0; i < x->k; i++) free(x->keep[i]);
}

/* Frames where the search kept max_symbols tokens of duration 0 (the cap
 * moved it on); CHECKs that no frame kept more. */
static int cap_hits(const char *what, const dec_tokens *d, int max_symbols) {
  int hits = 0;
  for (size_t i = 0, j; i < d->n; i = j) {
    int zero = 0;
    for (j = i; j < d->n && d->v[j].frame == d->v[i].frame; j++) zero += d->v[j].frames == 0;
    CHECK(zero <= max_symbols, "%s: %d tokens of duration 0 at frame %d", what, zero, d->v[i].frame);
    hits += zero == max_symbols;
  }
  return hits;
}

/* The largest |Δ| of the confidences where got has want's tokens, frames and
 * durations; CHECKs that it has. */
static double compare(const char *what, const char *how, const dec_tokens *want, const dec_tokens *got) {
  bool same = want->n == got->n;
  double worst = 0;
  for (size_t i = 0; same && i < want->n; i++) {
    same = want->v[i].id == got->v[i].id && want->v[i].frame == got->v[i].frame &&
           want->v[i].frames == got->v[i].frames;
    worst = fmax(worst, fabs((double)want->v[i].p - got->v[i].p));
  }
  CHECK(same, "%s (%s): GPU %zu tokens, CPU %zu (or ids/frames/durations differ)", what, how, got->n,
        want->n);
  CHECK(worst <= 1e-4, "%s (%s): confidences off by %.2e", what, how, worst);
  return worst;
}

/* The GPU searches: steps in whole chunks, steps in parts (a submission
 * each, stopped by the state a finished part copied out), the persistent
 * kernel, then rnnt_grid — each by its normal schedule where it passed its
 * probe, else (lavapipe, whose loop cap fails the probes) forced, with few
 * enough steps per dispatch for that cap (each step of the wide models
 * loops ~10 000 times): the grid on one workgroup (more would spin, and the
 * spins count against the cap), 8 rounds a dispatch, and only for small
 * models and batches (its one workgroup does a round's every block). */
enum { STEPS, PARTS, PERSISTENT, GRID, MODES };
static const char *const mode_name[MODES] = {"steps", "steps in parts", "persistent", "grid"};

/* Sets s to the mode; false where it is skipped here. */
static bool set_mode(gpu_transducer_search *s, const gpu_transducer *g, int mode, int hidden, int clips) {
  static const gpu_search_mode modes[MODES] = {GPU_SEARCH_STEPS, GPU_SEARCH_STEPS, GPU_SEARCH_PERSISTENT,
                                               GPU_SEARCH_GRID};
  gpu_transducer_search_force(s, 0);
  gpu_transducer_search_grid(s, 0, 0, 0);
  gpu_transducer_search_split(s, mode == PARTS);
  gpu_transducer_search_mode(s, modes[mode]);
  if (mode == PERSISTENT && !gpu_transducer_persistent(g)) gpu_transducer_search_force(s, hidden <= 64 ? 16 : 1);
  if (mode == GRID && !gpu_transducer_grid(g)) {
    if (hidden > 64 || clips > 8) return false;
    gpu_transducer_search_grid(s, 1, 8, 1u << 18);
  }
  return true;
}

static const char first_case[] = "TDT small";

/* The f16 copy of the matrices (made by the first persistent search) is
 * there exactly where model_new rounded them. */
static void f16_taken(const char *what, const gpu_transducer *g) {
  CHECK(gpu_transducer_f16(g) == test_f16, "%s: f16 matrices %s", what,
        test_f16 ? "not taken" : "taken");
}

/* CPU and GPU searches agree, both GPU ways; returns the frames where the
 * cap moved the search on. */
static int one(const char *what, int hidden, int layers, int joint, int vocab, int n_dur,
               joint_act act, int max_symbols, int t, uint32_t seed, float blank_boost,
               float dur0_boost) {
  model x;
  model_new(&x, hidden, layers, joint, vocab, n_dur, act, max_symbols, t, seed, blank_boost, dur0_boost);
  dec_tokens want = {0};
  CHECK_OK(transducer_greedy(&x.m, x.enc, t, (int)x.stride, NULL, &want));
  gpu_transducer *g = NULL;
  gpu_transducer_search *s = NULL;
  CHECK_OK(gpu_transducer_new(test_device(), &x.m, &g));
  CHECK(g, "%s: no GPU decoder", what);
  if (g) CHECK_OK(gpu_transducer_search_new(g, &s));
  if (g && what == first_case)
    printf("rnnt_search %s its probe here, rnnt_grid %s\n", gpu_transducer_persistent(g) ? "passed" : "failed",
           gpu_transducer_grid(g) ? "passed" : "failed");
  double worst[MODES] = {0};
  for (int mode = 0; s && x.genc && mode < MODES; mode++) {
    if (!set_mode(s, g, mode, hidden, 1)) continue;
    dec_tokens got = {0}, again = {0};
    CHECK_OK(gpu_transducer_greedy(s, x.genc, (uint32_t)t, x.stride, NULL, &got));
    worst[mode] = compare(what, mode_name[mode], &want, &got);
    /* Again on the same search: nothing of the last one stays behind (not
     * for the wide models' forced persistent search: ~0.3 s a step here). */
    if (hidden <= 64 || gpu_transducer_persistent(g) || mode < PERSISTENT) {
      CHECK_OK(gpu_transducer_greedy(s, x.genc, (uint32_t)t, x.stride, NULL, &again));
      compare(what, mode_name[mode], &want, &again);
    }
    dec_free(&got), dec_free(&again);
  }
  if (s && x.genc) f16_taken(what, g);
  int hits = n_dur ? cap_hits(what, &want, max_symbols) : 0;
  printf("%-34s %4zu tokens over %3d frames (%d cap hits), confidences max |Δ| %.1e / %.1e / %.1e / %.1e\n",
         what, want.n, t, hits, worst[STEPS], worst[PARTS], worst[PERSISTENT], worst[GRID]);
  CHECK(!s || gpu_transducer_search_aborts(s) == 0, "%s: a grid search gave up", what);
  dec_free(&want);
  gpu_transducer_search_free(s);
  gpu_transducer_free(g);
  model_free(&x);
  return hits;
}

/* A batch of n clips of different lengths (clip i: lens[i] frames at row
 * i·rows of one encoder buffer, the rest of its rows padding) against the
 * CPU search of each clip alone, both GPU ways, and (persistent) a second
 * time in the same search with fewer clips. */
static void batch(const char *what, int hidden, int joint, int vocab, int n_dur, int max_symbols,
                  const int *lens, int n, uint32_t seed, float blank_boost, float dur0_boost) {
  enum { MAX_CLIPS = 300 };
  int rows = 0;
  for (int i = 0; i < n; i++) rows = lens[i] > rows ? lens[i] : rows;
  model x;
  model_new(&x, hidden, 2, joint, vocab, n_dur, JOINT_RELU, max_symbols, rows * n, seed, blank_boost,
            dur0_boost);
  dec_tokens want[MAX_CLIPS] = {{0}};
  gpu_transducer_clip clips[MAX_CLIPS];
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    clips[i] = (gpu_transducer_clip){(uint32_t)(i * rows), (uint32_t)lens[i]};
    CHECK_OK(transducer_greedy(&x.m, x.enc + (size_t)i * rows * x.stride, lens[i], (int)x.stride, NULL,
                               &want[i]));
    total += want[i].n;
  }
  gpu_transducer *g = NULL;
  gpu_transducer_search *s = NULL;
  CHECK_OK(gpu_transducer_new(test_device(), &x.m, &g));
  if (g) CHECK_OK(gpu_transducer_search_new(g, &s));
  double worst = 0;
  for (int mode = 0; s && x.genc && mode < MODES; mode++) {
    if (!set_mode(s, g, mode, hidden, n)) continue;
    for (int k = n; k >= 1; k -= n > 1 ? n - 1 : 1) { /* all clips, then the first alone */
      dec_tokens got[MAX_CLIPS] = {{0}};
      CHECK_OK(gpu_transducer_search_batch(s, x.genc, x.stride, clips, k, NULL, got));
      for (int i = 0; i < k; i++) {
        worst = fmax(worst, compare(what, mode_name[mode], &want[i], &got[i]));
        dec_free(&got[i]);
      }
    }
  }
  if (s && x.genc) f16_taken(what, g);
  printf("%-34s %d clips, %4zu tokens (confidences max |Δ| %.1e)\n", what, n, total, worst);
  for (int i = 0; i < n; i++) dec_free(&want[i]);
  gpu_transducer_search_free(s);
  gpu_transducer_free(g);
  model_free(&x);
}

/* A grid search whose workgroups give up waiting at once (no spins: the
 * first to reach a barrier before the others did gives up) is searched again
 * in steps: the same tokens, and one abort counted where the workgroups
 * cannot all have arrived (lavapipe runs 64 of them on a few threads, one
 * after another: the first waits alone). */
static void grid_gives_up(void) {
  model x;
  model_new(&x, 32, 1, 48, 41, 5, JOINT_RELU, 10, 30, 850, 0, 0);
  dec_tokens want = {0}, got = {0};
  CHECK_OK(transducer_greedy(&x.m, x.enc, 30, (int)x.stride, NULL, &want));
  gpu_transducer *g = NULL;
  gpu_transducer_search *s = NULL;
  CHECK_OK(gpu_transducer_new(test_device(), &x.m, &g));
  if (g) CHECK_OK(gpu_transducer_search_new(g, &s));
  if (s) {
    gpu_transducer_search_grid(s, 64, 8, 0);
    CHECK_OK(gpu_transducer_greedy(s, x.genc, 30, x.stride, NULL, &got));
    compare("grid giving up", "grid, then steps", &want, &got);
    uint32_t aborts = gpu_transducer_search_aborts(s);
    if (!gpu_transducer_grid(g)) CHECK(aborts == 1, "64 workgroups without spins: %u aborts", aborts);
    printf("grid of 64 workgroups that never wait: %u abort(s), %zu tokens as the CPU's\n", aborts, got.n);
  }
  dec_free(&want), dec_free(&got);
  gpu_transducer_search_free(s);
  gpu_transducer_free(g);
  model_free(&x);
}

/* Ties: a joint whose output weights are all 0 and whose biases put the
 * largest logit at rows 3, 20 and 39 (three of rnnt_joint's blocks of 16
 * rows; 32-row blocks hold two of them) picks the first, row 3, every time
 * on the CPU and every GPU way (the blocks' summaries keep the first of a
 * block's largest, then the lowest row across blocks). */
static void ties(void) {
  enum { T = 6, CAP = 4 };
  model x;
  model_new(&x, 32, 1, 48, 41, 5, JOINT_RELU, CAP, T, 870, 0, 0);
  float *ow = (float *)x.m.out_w, *ob = (float *)x.m.out_b;
  for (int i = 0; i < (41 + 5) * 48; i++) ow[i] = 0;
  for (int i = 0; i < 41 + 5; i++) ob[i] = i == 3 || i == 20 || i == 39 ? 1.0f : i == 41 ? 2.0f : 0;
  dec_tokens want = {0};
  CHECK_OK(transducer_greedy(&x.m, x.enc, T, (int)x.stride, NULL, &want));
  bool threes = want.n == (size_t)T * CAP;
  for (size_t i = 0; i < want.n; i++) threes = threes && want.v[i].id == 3;
  CHECK(threes, "ties: the CPU search did not pick row 3 %d times (%zu tokens)", T * CAP, want.n);
  gpu_transducer *g = NULL;
  gpu_transducer_search *s = NULL;
  CHECK_OK(gpu_transducer_new(test_device(), &x.m, &g));
  if (g) CHECK_OK(gpu_transducer_search_new(g, &s));
  for (int mode = 0; s && mode < MODES; mode++) {
    if (!set_mode(s, g, mode, 32, 1)) continue;
    dec_tokens got = {0};
    CHECK_OK(gpu_transducer_greedy(s, x.genc, T, x.stride, NULL, &got));
    compare("ties", mode_name[mode], &want, &got);
    dec_free(&got);
  }
  printf("ties: row 3 of three equal largest logits, %zu times\n", want.n);
  dec_free(&want);
  gpu_transducer_search_free(s);
  gpu_transducer_free(g);
  model_free(&x);
}

/* Counts its calls; asks to stop at the third. */
static int stop_at_third(void *user) {
  int *calls = user;
  return ++*calls >= 3;
}

/* A search that never meets a blank (max_symbols · t steps, 300 000 here)
 * stops at the abort callback's third "yes, stop" check: STENO_ERR_ABORTED
 * after at most 3 polls' worth of steps, on the CPU and both GPU ways. */
static void aborts(void) {
  enum { T = 3000, CAP = TRANSDUCER_MAX_SYMBOLS };
  model x;
  model_new(&x, 32, 1, 48, 41, 5, JOINT_RELU, CAP, T, 800, -1e4f, 50.0f);
  int calls = 0;
  transducer_abort stop = {stop_at_third, &calls};
  dec_tokens cpu = {0};
  CHECK(transducer_greedy(&x.m, x.enc, T, (int)x.stride, &stop, &cpu) == STENO_ERR_ABORTED,
        "CPU search not aborted");
  CHECK(calls == 3 && cpu.n <= 3 * TRANSDUCER_POLL_STEPS,
        "CPU search: %d abort checks, %zu tokens before stopping", calls, cpu.n);
  gpu_transducer *g = NULL;
  gpu_transducer_search *s = NULL;
  CHECK_OK(gpu_transducer_new(test_device(), &x.m, &g));
  if (g) CHECK_OK(gpu_transducer_search_new(g, &s));
  for (int mode = 0; s && mode < MODES; mode++) {
    dec_tokens gpu = {0};
    set_mode(s, g, mode, 32, 1);
    calls = 0;
    CHECK(gpu_transducer_greedy(s, x.genc, T, x.stride, &stop, &gpu) == STENO_ERR_ABORTED,
          "GPU search (%s) not aborted", mode_name[mode]);
    CHECK(calls == 3, "GPU search (%s): %d abort checks", mode_name[mode], calls);
    dec_free(&gpu);
  }
  printf("abort: CPU stopped after %zu tokens, GPU after 3 chunks\n", cpu.n);
  dec_free(&cpu);
  gpu_transducer_search_free(s);
  gpu_transducer_free(g);
  model_free(&x);
}

/* A max_symbols of 0 or beyond TRANSDUCER_MAX_SYMBOLS (a crafted file's 2^31 − 1
 * among them) is refused by both searches, and the step bound neither
 * overflows nor goes unbounded. */
static void bad_max_symbols(void) {
  static const int bad[] = {0, -1, TRANSDUCER_MAX_SYMBOLS + 1, INT_MAX};
  model x;
  model_new(&x, 32, 1, 48, 41, 5, JOINT_RELU, 10, 4, 900, 0, 0);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    x.m.max_symbols = bad[i];
    dec_tokens d = {0};
    CHECK(transducer_greedy(&x.m, x.enc, 4, (int)x.stride, NULL, &d) == STENO_ERR_INVALID,
          "CPU search took max_symbols %d", bad[i]);
    gpu_transducer *g = NULL;
    CHECK(gpu_transducer_new(test_device(), &x.m, &g) == STENO_ERR_INVALID && !g,
          "GPU search took max_symbols %d", bad[i]);
    CHECK(transducer_max_steps(bad[i], INT32_MAX) == 0, "a step bound for max_symbols %d", bad[i]);
    dec_free(&d);
  }
  CHECK(transducer_max_steps(TRANSDUCER_MAX_SYMBOLS, INT32_MAX) == (int64_t)TRANSDUCER_MAX_SYMBOLS * INT32_MAX,
        "the largest step bound overflows");
  model_free(&x);
}

/* A batch that does not fit its encoder buffer, a negative count, a stride
 * below the joint width: STENO_ERR_INVALID, nothing searched. */
static void bad_batches(void) {
  model x;
  model_new(&x, 32, 1, 48, 41, 5, JOINT_RELU, 10, 6, 950, 0, 0);
  gpu_transducer *g = NULL;
  gpu_transducer_search *s = NULL;
  CHECK_OK(gpu_transducer_new(test_device(), &x.m, &g));
  if (g) CHECK_OK(gpu_transducer_search_new(g, &s));
  static const gpu_transducer_clip past[] = {{0, 3}, {4, 3}}, huge[] = {{UINT32_MAX, 2}};
  dec_tokens d[2] = {{0}};
  for (int mode = 0; s && mode < MODES; mode++) {
    set_mode(s, g, mode, 32, 2);
    CHECK(gpu_transducer_search_batch(s, x.genc, x.stride, past, 2, NULL, d) == STENO_ERR_INVALID,
          "%s: a clip past the buffer's rows searched", mode_name[mode]);
    CHECK(gpu_transducer_search_batch(s, x.genc, x.stride, huge, 1, NULL, d) == STENO_ERR_INVALID,
          "%s: a clip at row 2^32 - 1 searched", mode_name[mode]);
    CHECK(gpu_transducer_search_batch(s, x.genc, x.stride, past, -1, NULL, d) == STENO_ERR_INVALID,
          "%s: -1 clips searched", mode_name[mode]);
    CHECK(gpu_transducer_search_batch(s, x.genc, 40, past, 1, NULL, d) == STENO_ERR_INVALID,
          "%s: a stride below the joint width searched", mode_name[mode]);
    CHECK(d[0].n == 0 && d[1].n == 0, "%s: tokens from a refused batch", mode_name[mode]);
  }
  dec_free(&d[0]), dec_free(&d[1]);
  gpu_transducer_search_free(s);
  gpu_transducer_free(g);
  model_free(&x);
}

int main(void) {
  test_device();
  one(first_case, 32, 1, 48, 41, 5, JOINT_RELU, 10, 30, 100, 0, 0);
  one("TDT small, blanks of duration 0", 32, 1, 48, 41, 5, JOINT_RELU, 10, 30, 150, 0.9f, 3.6f);
  /* Duration 0 wins almost everywhere: runs of tokens at one frame end at the cap. */
  int hits = one("TDT small, the cap binds", 32, 1, 48, 41, 5, JOINT_RELU, 4, 30, 160, 0, 1.5f);
  CHECK(hits >= 3, "TDT cap case: the max_symbols cap moved the search on %d times", hits);
  one("RNN-T small, 3 symbols per frame", 32, 2, 48, 41, 0, JOINT_RELU, 3, 30, 200, 0, 0);
  one("RNN-T small, many blanks", 32, 2, 48, 41, 0, JOINT_RELU, 3, 30, 250, 0.9f, 0);
  one("TDT 3 layers, tanh", 24, 3, 40, 70, 5, JOINT_TANH, 10, 25, 300, 0, 0);
  one("RNN-T sigmoid, odd widths", 37, 2, 53, 300, 0, JOINT_SIGMOID, 5, 17, 400, 0, 0);
  one("TDT 0.6B v2 widths", 640, 2, 640, 1025, 5, JOINT_RELU, 10, 5, 500, 0, 0);
  one("RNN-T 1.1B widths, step cap", 640, 2, 640, 1025, 0, JOINT_RELU, 2, 5, 600, 0, 0);
  /* Mostly blanks over many frames: runs of blanks picked in one dispatch
   * from rnnt_joint's window of frames, TDT's jumps crossing its edge. */
  one("TDT blank-heavy, 200 frames", 32, 1, 48, 41, 5, JOINT_RELU, 10, 200, 750, 0.6f, 0);
  one("RNN-T blank-heavy, 200 frames", 32, 2, 48, 41, 0, JOINT_RELU, 3, 200, 760, 0.9f, 0);
  /* No frames: nothing to search. */
  one("TDT, no frames", 32, 1, 48, 41, 5, JOINT_RELU, 10, 0, 700, 0, 0);
  /* Batches: B = 5 (then 1), 3, 2 clips; the real hidden sizes (640: Parakeet,
   * 320: GigaAM), the cap binding, blank-heavy and token-only joints, a
   * Nemotron-sized vocabulary; a clip of no frames among others. */
  static const int five[] = {3, 5, 1, 4, 2}, four[] = {6, 2, 9, 4}, three[] = {2, 1, 3},
                   two[] = {1, 2}, gap[] = {4, 0, 3};
  batch("batch small TDT", 32, 48, 41, 5, 10, five, 5, 1000, 0, 0);
  batch("batch small TDT, the cap binds", 32, 48, 41, 5, 3, four, 4, 1010, 0, 6.0f);
  batch("batch small RNN-T, an empty clip", 32, 48, 41, 0, 3, gap, 3, 1050, 0, 0);
  batch("batch TDT 640, the cap binds", 640, 640, 1025, 5, 2, three, 3, 1100, 0, 6.0f);
  batch("batch TDT 640, blank-heavy", 640, 640, 1025, 5, 10, four, 4, 1200, 0.6f, 0);
  batch("batch RNN-T 320, no blanks", 320, 320, 1025, 0, 2, three, 3, 1300, -1e4f, 0);
  batch("batch TDT 640, 13 000 classes", 640, 640, 13000, 5, 10, two, 2, 1400, 0, 0);
  /* More clips than one steps search takes (256): two turns, clips of 0 to
   * 12 frames. */
  static int many[300];
  for (int i = 0; i < 300; i++) many[i] = (i * 7) % 13;
  batch("batch small TDT, 300 clips", 32, 48, 41, 5, 4, many, 300, 1500, 0, 1.0f);
  /* Matrices that are exactly f16 (an F16 file's): the persistent kernel
   * reads them in f16 (16-byte rows, and odd widths one value at a time). */
  test_f16 = true;
  one("TDT small, f16 matrices", 32, 1, 48, 41, 5, JOINT_RELU, 10, 30, 2000, 0, 0);
  one("RNN-T sigmoid, odd widths, f16", 37, 2, 53, 300, 0, JOINT_SIGMOID, 5, 17, 2100, 0, 0);
  one("TDT 0.6B v2 widths, f16", 640, 2, 640, 1025, 5, JOINT_RELU, 10, 5, 500, 0, 0);
  batch("batch small TDT, f16 matrices", 32, 48, 41, 5, 10, five, 5, 2300, 0, 0);
  batch("batch TDT 640, f16 matrices", 640, 640, 1025, 5, 2, three, 3, 2400, 0, 6.0f);
  test_f16 = false;
  aborts();
  grid_gives_up();
  ties();
  bad_max_symbols();
  bad_batches();
  /* Too wide for the kernels: the CPU path decodes those. */
  transducer wide = {.vocab = 10, .hidden = 4096, .layers = 1, .joint = 64, .max_symbols = 10};
  gpu_transducer *g = (gpu_transducer *)1;
  CHECK_OK(gpu_transducer_new(test_device(), &wide, &g));
  CHECK(!g, "hidden 4096 accepted");
  return check_done();
}
