/* Where a Whisper decoder token's host time goes, and the per-token loop
 * before and after the changes of this bench's commit, side by side in one
 * run, reps alternating, medians:
 *  - the search at Whisper turbo's vocabulary (51866, its special ids) on
 *    synthetic logits: the rules (suppression, timestamp rules), the choice
 *    (argmax), the log-softmax (exp over the vocabulary), and reading 51866
 *    logits back from a device buffer (staged where the device is not
 *    unified, e.g. STENO_NO_MAP=1) against from a readback buffer;
 *  - per token on a Whisper GGUF (the tiny fixture by default), greedy with
 *    the end of text masked as STENO_BENCH_TOKENS does it: before = logits
 *    into a device buffer, downloaded, then the rules and the pick, serially
 *    (phases timed); after = run.c's loop: logits into a readback buffer, the
 *    log-softmax taken while the GPU computes the next token. Tokens and
 *    log-probabilities must agree bit for bit.
 *   whisper_token [tokens 32] [reps 9] [MODEL.gguf]
 * Build and run: BUILD=build-dir bench/whisper_token.sh [args]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/whisper.h"
#include "io/gguf.h"
#include "models/whisper/whisper.h"
#include "steno.h"
#include "timing.h"

static void die(const char *what) {
  fprintf(stderr, "whisper_token: %s: %s\n", what, steno_last_error());
  exit(1);
}

static void *need(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (!p) exit(1);
  return p;
}

/* ---- the search at turbo's vocabulary ---- */

enum { TURBO_V = 51866, TURBO_EOT = 50257, TURBO_NO_TS = 50364, N_SUPPRESS = 88 };

typedef struct {
  double rules, choose, logprob, dl_device, dl_readback, copy;
} search_ms;

/* Logits of a trained model's spread: most ids near 0, a few far above. */
static void fill_logits(float *x, uint32_t *s) {
  for (int i = 0; i < TURBO_V; i++) {
    *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
    x[i] = (float)(*s % 20000) / 1000.0f - 10.0f + (*s % 97 == 0 ? 12.0f : 0.0f);
  }
}

static void search(gpu_device *d, int reps) {
  int32_t suppress[N_SUPPRESS];
  for (int i = 0; i < N_SUPPRESS; i++) suppress[i] = 1 + i * 571 % TURBO_EOT;
  int32_t begin[2] = {220, TURBO_EOT};
  wsearch w = {.vocab = TURBO_V, .eot = TURBO_EOT, .no_timestamps = TURBO_NO_TS, .suppress = suppress,
               .n_suppress = N_SUPPRESS, .begin_suppress = begin, .n_begin_suppress = 2,
               .max_initial = 50, .timestamps = 1};
  /* A window 12 tokens in, after a text token: every rule has work. */
  int gen[12] = {TURBO_NO_TS + 1, 400, 401, 402, TURBO_NO_TS + 40, TURBO_NO_TS + 40, 500, 501, 502, 503, 504, 505};
  float *raw = need(TURBO_V, sizeof *raw), *x = need(TURBO_V, sizeof *x);
  uint32_t s = 2463534242u;
  fill_logits(raw, &s);
  gpu_buffer *dev_buf, *rb_buf;
  if (gpu_buffer_from(d, raw, TURBO_V * 4, &dev_buf) || gpu_buffer_readback_new(d, TURBO_V * 4, &rb_buf) ||
      gpu_upload(rb_buf, 0, raw, TURBO_V * 4))
    die("buffers");
  double *t[6];
  for (int k = 0; k < 6; k++) t[k] = need((size_t)reps, sizeof(double));
  volatile double sink = 0;
  for (int r = -1; r < reps; r++) {
    double t0 = bench_now_ms();
    if (gpu_download(dev_buf, 0, x, TURBO_V * 4)) die("download");
    double t1 = bench_now_ms();
    if (gpu_download(rb_buf, 0, x, TURBO_V * 4)) die("download");
    double t2 = bench_now_ms();
    memcpy(x, raw, TURBO_V * 4);
    double t3 = bench_now_ms();
    wsearch_process(&w, gen, 12, x);
    double t4 = bench_now_ms();
    int id = wsearch_choose(x, TURBO_V, 0, NULL);
    double t5 = bench_now_ms();
    sink += wsearch_logprob(x, TURBO_V, id);
    double t6 = bench_now_ms();
    if (r < 0) continue;
    t[0][r] = t4 - t3, t[1][r] = t5 - t4, t[2][r] = t6 - t5;
    t[3][r] = t1 - t0, t[4][r] = t2 - t1, t[5][r] = t3 - t2;
  }
  search_ms m = {bench_median(t[0], reps), bench_median(t[1], reps), bench_median(t[2], reps),
                 bench_median(t[3], reps), bench_median(t[4], reps), bench_median(t[5], reps)};
  double all = m.rules + m.choose + m.logprob;
  printf("search at vocab %d (turbo's ids), per token: rules %.3f ms, argmax %.3f ms, log-softmax %.3f ms "
         "(%.0f%% of the search)\n",
         TURBO_V, m.rules, m.choose, m.logprob, 100 * m.logprob / all);
  printf("reading %d logits back: from a device buffer %.3f ms, from a readback buffer %.3f ms "
         "(%.2fx), a plain memcpy %.3f ms\n",
         TURBO_V, m.dl_device, m.dl_readback, m.dl_device / m.dl_readback, m.copy);
  gpu_buffer_free(dev_buf), gpu_buffer_free(rb_buf);
  for (int k = 0; k < 6; k++) free(t[k]);
  free(raw), free(x);
}

/* ---- per token on a model ---- */

typedef struct {
  double start, wait, download, rules, pick;
} phases;

/* The loop before: logits downloaded from m->a.logits after each run, then the
 * rules and wsearch_pick; the phases summed into *ph. */
static void tokens_before(whisper *m, int count, int *ids, double *lp, phases *ph) {
  wsearch rules = whisper_rules(m);
  float *x = m->a.host_logits;
  int V = (int)m->c.vocab;
  if (whisper_feed(m, &m->c.sot, 1, 0, x)) die("feed");
  for (int n = 0;; n++) {
    double t0 = bench_now_ms();
    wsearch_process(&rules, ids, (size_t)n, x);
    x[m->c.eot] = -INFINITY;
    double t1 = bench_now_ms();
    ids[n] = wsearch_pick(x, V, 0, NULL, &lp[n]);
    double t2 = bench_now_ms();
    ph->rules += t1 - t0, ph->pick += t2 - t1;
    if (n + 1 == count) return;
    if (whisper_feed_start(m, &ids[n], 1, 1 + (uint32_t)n, true)) die("feed");
    double t3 = bench_now_ms();
    if (gpu_rec_wait(m->rec)) die("wait");
    double t4 = bench_now_ms();
    if (gpu_download(m->a.logits, 0, x, (size_t)V * sizeof *x)) die("download");
    double t5 = bench_now_ms();
    ph->start += t3 - t2, ph->wait += t4 - t3, ph->download += t5 - t4;
  }
}

/* The loop after, as run.c's decode_tier runs it. */
static void tokens_after(whisper *m, int count, int *ids, double *lp) {
  wsearch rules = whisper_rules(m);
  float *x = m->a.host_logits;
  int V = (int)m->c.vocab;
  if (whisper_feed(m, &m->c.sot, 1, 0, x)) die("feed");
  for (int n = 0;; n++) {
    wsearch_process(&rules, ids, (size_t)n, x);
    x[m->c.eot] = -INFINITY;
    ids[n] = wsearch_choose(x, V, 0, NULL);
    bool last = n + 1 == count;
    if (!last && whisper_feed_start(m, &ids[n], 1, 1 + (uint32_t)n, true)) die("feed");
    lp[n] = wsearch_logprob(x, V, ids[n]);
    if (last) return;
    if (whisper_feed_finish(m, x)) die("feed");
  }
}

static void tokens(gpu_device *d, const char *path, int count, int reps) {
  gguf_file *f;
  whisper *model, *m;
  if (gguf_open(&f, path) || whisper_load(d, f, &model) || whisper_session_new(model, &m)) die(path);
  if (count > (int)m->c.n_text_ctx - 1) count = (int)m->c.n_text_ctx - 1;
  float *mel = need((size_t)m->c.win_frames * m->c.mels, sizeof *mel);
  if (whisper_encode(m, mel, NULL)) die("encode");
  gpu_buffer *readback = m->a.logits, *device;
  if (gpu_buffer_new(d, gpu_buffer_size(readback), &device)) die("buffer");
  int *a = need((size_t)count, sizeof *a), *b = need((size_t)count, sizeof *b);
  double *la = need((size_t)count, sizeof *la), *lb = need((size_t)count, sizeof *lb);
  double *before = need((size_t)reps, sizeof *before), *after = need((size_t)reps, sizeof *after);
  phases sum = {0};
  int differ = 0;
  for (int r = -1; r < reps; r++) {
    phases ph = {0};
    m->a.logits = device;
    double t = bench_now_ms();
    tokens_before(m, count, a, la, &ph);
    double tb = (bench_now_ms() - t) / count;
    m->a.logits = readback;
    t = bench_now_ms();
    tokens_after(m, count, b, lb);
    double ta = (bench_now_ms() - t) / count;
    differ += memcmp(a, b, (size_t)count * sizeof *a) || memcmp(la, lb, (size_t)count * sizeof *la);
    if (r < 0) continue;
    before[r] = tb, after[r] = ta;
    sum.start += ph.start, sum.wait += ph.wait, sum.download += ph.download;
    sum.rules += ph.rules, sum.pick += ph.pick;
  }
  double all = sum.start + sum.wait + sum.download + sum.rules + sum.pick;
  printf("%s (vocab %u, %u decoder layers, %u audio frames), %d tokens, before: record+submit "
         "%.0f%%, GPU+wait %.0f%%, download %.0f%%, rules %.0f%%, pick %.0f%%\n",
         path, m->c.vocab, m->c.dec_layers, m->c.n_audio_ctx, count, 100 * sum.start / all,
         100 * sum.wait / all, 100 * sum.download / all, 100 * sum.rules / all, 100 * sum.pick / all);
  double mb = bench_median(before, reps), ma = bench_median(after, reps);
  printf("per token: before %.3f ms, after %.3f ms: %.2fx%s\n", mb, ma, mb / ma,
         differ ? "  TOKENS OR LOG-PROBABILITIES DIFFER" : ", same tokens and log-probabilities");
  gpu_buffer_free(device);
  whisper_session_free(m);
  whisper_free(model);
  gguf_close(f);
  free(mel), free(a), free(b), free(la), free(lb), free(before), free(after);
  if (differ) exit(1);
}

int main(int argc, char **argv) {
  int count = argc > 1 ? atoi(argv[1]) : 32, reps = argc > 2 ? atoi(argv[2]) : 9;
  const char *path = argc > 3 ? argv[3] : "tests/fixtures/whisper_tiny_ml.gguf";
  if (count < 1 || count > 1000 || reps < 1 || reps > 1000) {
    fprintf(stderr, "whisper_token: tokens 1..1000, reps 1..1000\n");
    return 2;
  }
  steno_model_params p = steno_model_default_params();
  gpu_device *d;
  if (gpu_open(&p, &d)) die("device");
  printf("device: %s%s\n", gpu_device_info(d)->name,
         gpu_device_info(d)->unified ? " (unified)" : " (staged transfers)");
  search(d, reps);
  tokens(d, path, count, reps);
  gpu_close(d);
  return 0;
}
