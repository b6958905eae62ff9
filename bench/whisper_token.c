/* Where a Whisper decoder token's host time goes, and the per-token loop
 * before and after the changes of this bench's commit, side by side in one
 * run, reps alternating, medians:
 *  - the search at Whisper turbo's vocabulary (51866, its special ids) on
 *    synthetic logits, the plain loops of before against decode/whisper.c:
 *    the rules (suppression, timestamp rules), the choice (argmax), the
 *    log-softmax (exp over the vocabulary); and reading 51866 logits back
 *    from a device buffer (staged where the device is not unified, e.g.
 *    STENO_NO_MAP=1) against from a readback buffer;
 *  - per token on a Whisper GGUF (the tiny fixture by default), greedy with
 *    the end of text masked as STENO_BENCH_TOKENS does it: before = logits
 *    into a device buffer, downloaded, then the plain rules and pick,
 *    serially (phases timed); after = run.c's loop: logits into a readback buffer, the
 *    log-softmax taken while the GPU computes the next token; and the same
 *    recording each token's layers ahead (STENO_WHISPER_AHEAD=1). Tokens and
 *    log-probabilities must agree bit for bit.
 *   whisper_token [tokens 32] [reps 9] [MODEL.gguf]
 * Build and run: BUILD=build-dir bench/whisper_token.sh [args]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/whisper.h"
#include "gpu/decode.h"
#include "io/gguf.h"
#include "models/whisper/whisper.h"
#include "steno.h"
#include "support/plain_scans.h"
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

/* ---- the search as it was before (decode/whisper.c at 9044f3b: fmaxf and
 * argmax loops the compiler leaves scalar), for the side by side ---- */

static void plain_mask(float *x, int from, int to) {
  for (int i = from < 0 ? 0 : from; i < to; i++) x[i] = -INFINITY;
}

static void plain_process(const wsearch *s, const int *gen, size_t n, float *x) {
  for (size_t i = 0; i < s->n_suppress; i++) x[s->suppress[i]] = -INFINITY;
  for (size_t i = 0; n == 0 && i < s->n_begin_suppress; i++) x[s->begin_suppress[i]] = -INFINITY;
  int tb = wsearch_ts_begin(s), V = s->vocab;
  x[s->no_timestamps] = -INFINITY;
  bool last = n >= 1 && gen[n - 1] >= tb, penult = n < 2 || gen[n - 2] >= tb;
  if (last) plain_mask(x, penult ? tb : 0, penult ? V : s->eot);
  int ts_last = -1;
  for (size_t i = n; i-- > 0;)
    if (gen[i] >= tb) {
      ts_last = gen[i];
      break;
    }
  if (ts_last >= 0) plain_mask(x, tb, last && !penult ? ts_last : ts_last + 1);
  if (n == 0) {
    plain_mask(x, 0, tb);
    if (tb + s->max_initial + 1 < V) plain_mask(x, tb + s->max_initial + 1, V);
  }
  float text = -INFINITY;
  for (int i = 0; i < tb; i++) text = fmaxf(text, x[i]);
  if (plain_logsumexp(x, tb, V) > text) plain_mask(x, 0, tb);
}

static int plain_pick(const float *x, int vocab, double *logprob) {
  int best = plain_argmax(x, vocab);
  *logprob = (double)x[best] - plain_logsumexp(x, 0, vocab);
  return best;
}

/* ---- the search at turbo's vocabulary ---- */

enum { TURBO_V = 51866, TURBO_EOT = 50257, TURBO_NO_TS = 50364, N_SUPPRESS = 88 };

/* Logits of a trained model's spread: most ids near 0, a few far above. */
static void fill_logits(float *x, uint32_t *s) {
  for (int i = 0; i < TURBO_V; i++) {
    *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
    x[i] = (float)(*s % 20000) / 1000.0f - 10.0f + (*s % 97 == 0 ? 12.0f : 0.0f);
  }
}

/* A window 12 tokens in, after a text token: every rule has work. */
static const int GEN[12] = {TURBO_NO_TS + 1, 400, 401, 402, TURBO_NO_TS + 40, TURBO_NO_TS + 40,
                            500, 501, 502, 503, 504, 505};

static void search(gpu_device *d, int reps) {
  int32_t suppress[N_SUPPRESS];
  for (int i = 0; i < N_SUPPRESS; i++) suppress[i] = 1 + i * 571 % TURBO_EOT;
  int32_t begin[2] = {220, TURBO_EOT};
  wsearch w = {.vocab = TURBO_V, .eot = TURBO_EOT, .no_timestamps = TURBO_NO_TS, .suppress = suppress,
               .n_suppress = N_SUPPRESS, .begin_suppress = begin, .n_begin_suppress = 2,
               .max_initial = 50, .timestamps = 1};
  float *raw = need(TURBO_V, sizeof *raw), *x = need(TURBO_V, sizeof *x), *y = need(TURBO_V, sizeof *y),
        *z = need(TURBO_V, sizeof *z);
  uint32_t s = 2463534242u;
  fill_logits(raw, &s);
  gpu_buffer *dev_buf, *rb_buf;
  if (gpu_buffer_from(d, raw, TURBO_V * 4, &dev_buf) || gpu_buffer_readback_new(d, TURBO_V * 4, &rb_buf) ||
      gpu_upload(rb_buf, 0, raw, TURBO_V * 4))
    die("buffers");
  enum { RULES0, PICK0, RULES1, CHOOSE1, LOGPROB1, DL_DEV, DL_RB, NT };
  double *t[NT], lp0 = 0, lp1 = 0;
  for (int k = 0; k < NT; k++) t[k] = need((size_t)reps, sizeof(double));
  int id0 = 0, id1 = 0, differ = 0;
  for (int r = -1; r < reps; r++) {
    double c[NT + 2];
    c[0] = bench_now_ms();
    memcpy(x, raw, TURBO_V * 4), memcpy(y, raw, TURBO_V * 4);
    c[1] = bench_now_ms();
    plain_process(&w, GEN, 12, x);
    c[2] = bench_now_ms();
    id0 = plain_pick(x, TURBO_V, &lp0);
    c[3] = bench_now_ms();
    wsearch_process(&w, GEN, 12, y);
    c[4] = bench_now_ms();
    id1 = wsearch_choose(y, TURBO_V, 0, NULL);
    c[5] = bench_now_ms();
    lp1 = wsearch_logprob(y, TURBO_V, id1);
    c[6] = bench_now_ms();
    if (gpu_download(dev_buf, 0, z, TURBO_V * 4)) die("download");
    c[7] = bench_now_ms();
    if (gpu_download(rb_buf, 0, z, TURBO_V * 4)) die("download");
    c[8] = bench_now_ms();
    differ += id0 != id1 || memcmp(&lp0, &lp1, sizeof lp0) != 0 || memcmp(x, y, TURBO_V * 4) != 0;
    if (r < 0) continue;
    for (int k = 0; k < NT; k++) t[k][r] = c[k + 2] - c[k + 1];
  }
  double m[NT];
  for (int k = 0; k < NT; k++) m[k] = bench_median(t[k], reps);
  printf("search at vocab %d (turbo's ids), per token: before: rules %.3f ms, argmax + log-softmax "
         "%.3f ms; after: rules %.3f ms (%.1fx), argmax %.3f ms, log-softmax %.3f ms (overlapped "
         "with the GPU); on the critical path %.3f -> %.3f ms (%.1fx)%s\n",
         TURBO_V, m[RULES0], m[PICK0], m[RULES1], m[RULES0] / m[RULES1], m[CHOOSE1], m[LOGPROB1],
         m[RULES0] + m[PICK0], m[RULES1] + m[CHOOSE1], (m[RULES0] + m[PICK0]) / (m[RULES1] + m[CHOOSE1]),
         differ ? "  RESULTS DIFFER" : ", same id and log-probability");
  printf("reading %d logits back: from a device buffer %.3f ms, from a readback buffer %.3f ms "
         "(%.2fx)\n",
         TURBO_V, m[DL_DEV], m[DL_RB], m[DL_DEV] / m[DL_RB]);
  gpu_buffer_free(dev_buf), gpu_buffer_free(rb_buf);
  for (int k = 0; k < NT; k++) free(t[k]);
  free(raw), free(x), free(y), free(z);
  if (differ) exit(1);
}

/* ---- per token on a model ---- */

typedef struct {
  double record, submit, wait, download, rules, pick;
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
    plain_process(&rules, ids, (size_t)n, x);
    x[m->c.eot] = -INFINITY;
    double t1 = bench_now_ms();
    ids[n] = plain_pick(x, V, &lp[n]);
    double t2 = bench_now_ms();
    ph->rules += t1 - t0, ph->pick += t2 - t1;
    if (n + 1 == count) return;
    if (gpu_rec_begin(m->rec)) die("record");
    gpu_embed(m->rec, &m->embed, (uint32_t)ids[n], m->dec_pos, (1 + (uint32_t)n) * m->c.d, m->a.dx, 0);
    tf_dec_scratch s = {.x = m->a.dx, .h = m->a.dh, .qkv = m->a.dqkv, .att = m->a.datt,
                        .ff = m->a.dff, .att_scratch = m->a.att_scratch};
    for (uint32_t i = 0; i < m->c.dec_layers; i++)
      tf_dec_forward(m->rec, &m->dec_dims, &m->dec[i], &s, 1 + (uint32_t)n, m->c.n_audio_ctx);
    gpu_layer_norm(m->rec, m->a.dx, 0, m->c.d, &m->dec_ln, m->a.dh, 0, m->c.d, 1, m->c.d, NULL, NULL);
    gpu_gemv(m->rec, m->a.dh, 0, &m->embed, m->a.logits, 0, GPU_EPI_BIAS, 0);
    double t3a = bench_now_ms();
    if (gpu_rec_submit(m->rec)) die("submit");
    double t3 = bench_now_ms();
    ph->record += t3a - t2;
    if (gpu_rec_wait(m->rec)) die("wait");
    double t4 = bench_now_ms();
    if (gpu_download(m->a.logits, 0, x, (size_t)V * sizeof *x)) die("download");
    double t5 = bench_now_ms();
    ph->submit += t3 - t3a, ph->wait += t4 - t3, ph->download += t5 - t4;
  }
}

/* The loop after, as run.c's decode_tier runs it. */
static void tokens_after(whisper *m, int count, int *ids, double *lp, bool ahead) {
  wsearch rules = whisper_rules(m);
  float *x = m->a.host_logits;
  int V = (int)m->c.vocab;
  if (whisper_feed(m, &m->c.sot, 1, 0, x) || (ahead && whisper_step_prepare(m, 1))) die("feed");
  for (int n = 0;; n++) {
    wsearch_process(&rules, ids, (size_t)n, x);
    x[m->c.eot] = -INFINITY;
    ids[n] = wsearch_choose(x, V, 0, NULL);
    bool last = n + 1 == count;
    if (!last && whisper_step_start(m, ids[n], 1 + (uint32_t)n)) die("step");
    lp[n] = wsearch_logprob(x, V, ids[n]);
    if (last) return;
    if ((ahead && whisper_step_prepare(m, 2 + (uint32_t)n)) || whisper_step_finish(m, x)) die("step");
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
  double *before = need((size_t)reps, sizeof *before), *after = need((size_t)reps, sizeof *after),
         *ahead = need((size_t)reps, sizeof *ahead);
  phases sum = {0};
  int differ = 0;
  for (int r = -1; r < reps; r++) {
    phases ph = {0};
    m->a.logits = device;
    double t = bench_now_ms();
    tokens_before(m, count, a, la, &ph);
    double tb = (bench_now_ms() - t) / count;
    m->a.logits = readback;
    double ta[2];
    for (int k = 0; k < 2; k++) {
      t = bench_now_ms();
      tokens_after(m, count, b, lb, k);
      ta[k] = (bench_now_ms() - t) / count;
      differ += memcmp(a, b, (size_t)count * sizeof *a) || memcmp(la, lb, (size_t)count * sizeof *la);
    }
    if (r < 0) continue;
    before[r] = tb, after[r] = ta[0], ahead[r] = ta[1];
    sum.record += ph.record, sum.submit += ph.submit, sum.wait += ph.wait, sum.download += ph.download;
    sum.rules += ph.rules, sum.pick += ph.pick;
  }
  double all = sum.record + sum.submit + sum.wait + sum.download + sum.rules + sum.pick;
  printf("%s (vocab %u, %u decoder layers, %u audio frames), %d tokens, before: record %.1f%%, "
         "submit %.1f%%, GPU+wait %.1f%%, download %.1f%%, rules %.1f%%, pick %.1f%%\n",
         path, m->c.vocab, m->c.dec_layers, m->c.n_audio_ctx, count, 100 * sum.record / all,
         100 * sum.submit / all, 100 * sum.wait / all, 100 * sum.download / all,
         100 * sum.rules / all, 100 * sum.pick / all);
  double mb = bench_median(before, reps), ma = bench_median(after, reps), mh = bench_median(ahead, reps);
  printf("per token: before %.3f ms, after %.3f ms (%.2fx), after recording ahead (two "
         "submissions) %.3f ms (%.2fx)%s\n",
         mb, ma, mb / ma, mh, mb / mh,
         differ ? "  TOKENS OR LOG-PROBABILITIES DIFFER" : ", same tokens and log-probabilities");
  gpu_buffer_free(device);
  whisper_session_free(m);
  whisper_free(model);
  gguf_close(f);
  free(mel), free(a), free(b), free(la), free(lb), free(before), free(after), free(ahead);
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
