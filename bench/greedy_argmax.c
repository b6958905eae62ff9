/* Greedy decoding's argmax on the GPU against reading the logits back and
 * taking it on the CPU (what nemotron_h_greedy did before), side by side in
 * one run, reps alternating, the median of each:
 *  - the step alone at the vocabularies 131072 (Nemotron 3.5 Transcribe),
 *    51866 (Whisper), 32768: a submission, then a read of [vocab] floats and
 *    the C loop, against argmax.comp in the submission and a read of the id;
 *  - per generated token on a Nemotron-H GGUF (the tiny fixture by default):
 *    nemotron_h_feed with logits and the C loop, against nemotron_h_greedy
 *    (their tokens must agree).
 *   greedy_argmax [tokens 32] [reps 9] [MODEL.gguf [KEYS TENSORS]]
 * Build and run: BUILD=build-dir bench/greedy_argmax.sh [args]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/argmax.h"
#include "io/gguf.h"
#include "models/nemotron_h/nemotron_h.h"
#include "steno.h"
#include "timing.h"

static void die(const char *what) {
  fprintf(stderr, "greedy_argmax: %s: %s\n", what, steno_last_error());
  exit(1);
}

static int cpu_argmax(const float *x, uint32_t n) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return (int)best;
}

/* The step alone at vocabulary v: ms per step, before and after. */
static void step(gpu_device *d, uint32_t v, int reps) {
  float *x = malloc(v * sizeof *x);
  double *before = calloc((size_t)reps, sizeof *before), *after = calloc((size_t)reps, sizeof *after);
  if (!x || !before || !after) exit(1);
  uint32_t s = 2463534242u;
  for (uint32_t i = 0; i < v; i++) s ^= s << 13, s ^= s >> 17, s ^= s << 5, x[i] = (float)s;
  gpu_buffer *logits, *id, *scratch;
  gpu_rec *rec;
  if (gpu_buffer_from(d, x, v * sizeof *x, &logits) || gpu_argmax_ids_new(d, 1, &id) ||
      gpu_buffer_new(d, gpu_argmax_scratch(1, v) * 4, &scratch) || gpu_rec_new(d, &rec))
    die("buffers");
  int a = 0, b = 0;
  for (int r = -1; r < reps; r++) { /* r = −1: warm-up */
    double t = bench_now_ms();
    if (gpu_rec_begin(rec) || gpu_rec_run(rec) || gpu_download(logits, 0, x, v * sizeof *x)) die("before");
    a = cpu_argmax(x, v);
    if (r >= 0) before[r] = bench_now_ms() - t;
    t = bench_now_ms();
    uint32_t got;
    if (gpu_rec_begin(rec)) die("after");
    gpu_argmax(rec, logits, 0, v, 1, v, id, 0, scratch);
    if (gpu_rec_run(rec) || gpu_download(id, 0, &got, sizeof got)) die("after");
    b = (int)got;
    if (r >= 0) after[r] = bench_now_ms() - t;
  }
  double mb = bench_median(before, reps), ma = bench_median(after, reps);
  printf("vocab %6u: read back + C loop %.3f ms, GPU argmax %.3f ms: %.2fx%s\n", v, mb, ma, mb / ma,
         a == b ? "" : "  IDS DIFFER");
  gpu_rec_free(rec);
  gpu_buffer_free(scratch), gpu_buffer_free(id), gpu_buffer_free(logits);
  free(x), free(before), free(after);
}

/* `count` tokens after ids[0..n) by reading the logits back (the old greedy). */
static void greedy_cpu(nemotron_h_session *s, const int *ids, uint32_t n, uint32_t count, int *out,
                       float *logits) {
  if (nemotron_h_feed(s, ids, NULL, n, logits, false)) die("feed");
  for (uint32_t i = 0; i < count; i++) {
    out[i] = cpu_argmax(logits, s->m->vocab);
    if (i + 1 < count && nemotron_h_feed(s, &out[i], NULL, 1, logits, false)) die("feed");
  }
}

/* Per generated token on the model: ms, before and after. */
static void tokens(gpu_device *d, const char *path, const char *keys, const char *tensors,
                   uint32_t count, int reps) {
  gguf_file *f;
  nemotron_h *m;
  nemotron_h_session *s;
  if (gguf_open(&f, path) || nemotron_h_load(d, f, keys, tensors, &m)) die(path);
  if (nemotron_h_session_new(m, 8 + count, &s)) die("session");
  int ids[8] = {3, 17, 5, 9, 11, 4, 8, 6}, *a = calloc(count, sizeof *a), *b = calloc(count, sizeof *b);
  float *logits = malloc(m->vocab * sizeof *logits);
  double *before = calloc((size_t)reps, sizeof *before), *after = calloc((size_t)reps, sizeof *after);
  if (!a || !b || !logits || !before || !after) exit(1);
  for (int i = 0; i < 8; i++) ids[i] %= (int)m->vocab;
  int differ = 0;
  for (int r = -1; r < reps; r++) {
    nemotron_h_reset(s);
    double t = bench_now_ms();
    greedy_cpu(s, ids, 8, count, a, logits);
    if (r >= 0) before[r] = (bench_now_ms() - t) / count;
    nemotron_h_reset(s);
    uint32_t got;
    t = bench_now_ms();
    if (nemotron_h_greedy(s, ids, NULL, 8, count, NULL, 0, b, &got) || got != count) die("greedy");
    if (r >= 0) after[r] = (bench_now_ms() - t) / count;
    differ += memcmp(a, b, count * sizeof *a) != 0;
  }
  double mb = bench_median(before, reps), ma = bench_median(after, reps);
  printf("%s (vocab %u), %u tokens after 8: read back + C loop %.3f ms/token, GPU argmax %.3f "
         "ms/token: %.2fx%s\n",
         path, m->vocab, count, mb, ma, mb / ma, differ ? "  TOKENS DIFFER" : ", same tokens");
  nemotron_h_session_free(s);
  nemotron_h_free(m);
  gguf_close(f);
  free(a), free(b), free(logits), free(before), free(after);
}

int main(int argc, char **argv) {
  uint32_t count = argc > 1 ? (uint32_t)atoi(argv[1]) : 32;
  int reps = argc > 2 ? atoi(argv[2]) : 9;
  const char *path = argc > 3 ? argv[3] : "tests/fixtures/nemotron_h_tiny.gguf";
  const char *keys = argc > 5 ? argv[4] : "nemotron_h.", *tensors = argc > 5 ? argv[5] : "lm.";
  if (count < 1 || count > 1000 || reps < 1 || reps > 1000) {
    fprintf(stderr, "greedy_argmax: tokens 1..1000, reps 1..1000\n");
    return 2;
  }
  steno_model_params p = steno_model_default_params();
  gpu_device *d;
  if (gpu_open(&p, &d)) die("device");
  printf("device: %s\n", gpu_device_info(d)->name);
  const uint32_t vocabs[] = {131072, 51866, 32768};
  for (int i = 0; i < 3; i++) step(d, vocabs[i], reps);
  tokens(d, path, keys, tensors, count, reps);
  gpu_close(d);
  return 0;
}
