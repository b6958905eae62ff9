#include "decode/transducer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/pool.h"

/* Below this many weights one thread streams the matrix faster than waking others. */
enum { THREAD_MIN_WEIGHTS = 1 << 17 };

/* y[r] = b[r] + (acc ? y[r] : 0) + W[r]·x for r < rows (W row-major
 * [rows][cols]); b may be NULL. TRANSDUCER_SCALAR keeps the one-accumulator
 * loop as the reference (bench/decoder_speed.sh times both). */
#ifdef TRANSDUCER_SCALAR
static void matvec(pool *unused, const float *w, const float *b, const float *x, int rows, int cols,
                   bool acc, float *y) {
  (void)unused;
  for (int r = 0; r < rows; r++) {
    const float *wr = w + (size_t)r * cols;
    float s = 0;
    for (int c = 0; c < cols; c++) s += wr[c] * x[c];
    y[r] = (b ? b[r] : 0) + (acc ? y[r] : 0) + s;
  }
}
#else
/* Four rows share each load of x, and each row keeps LANES independent
 * partial sums: the fixed-size inner loops are what GCC's -O2 vectorizer
 * turns into SIMD adds, and the sums no longer wait on one another. */
enum { ROWS = 4, LANES = 8 };

static void matvec_rows(const float *w, const float *x, int n, int cols, float *out) {
  float a[ROWS][LANES] = {{0}};
  int c = 0;
  for (; c + LANES <= cols; c += LANES)
    for (int i = 0; i < n; i++)
      for (int k = 0; k < LANES; k++) a[i][k] += w[(size_t)i * cols + c + k] * x[c + k];
  for (int i = 0; i < n; i++) {
    float s = 0;
    for (int k = 0; k < LANES; k++) s += a[i][k];
    for (int j = c; j < cols; j++) s += w[(size_t)i * cols + j] * x[j];
    out[i] = s;
  }
}

static void matvec_range(const float *w, const float *b, const float *x, int r0, int r1, int cols,
                         bool acc, float *y) {
  for (int r = r0; r < r1; r += ROWS) {
    int n = r1 - r < ROWS ? r1 - r : ROWS;
    float s[ROWS];
    matvec_rows(w + (size_t)r * cols, x, n, cols, s);
    for (int i = 0; i < n; i++) y[r + i] = (b ? b[r + i] : 0) + (acc ? y[r + i] : 0) + s[i];
  }
}

/* One matrix-vector product cut into row blocks for a pool's threads. The
 * blocks are whole multiples of ROWS, so each row is summed exactly as on one
 * thread. */
typedef struct {
  const float *w, *b, *x;
  float *y;
  int rows, cols, per;
  bool acc;
} matvec_job;

static void matvec_task(void *ctx, int i) {
  const matvec_job *j = ctx;
  int r0 = i * j->per, r1 = r0 + j->per < j->rows ? r0 + j->per : j->rows;
  if (r0 < r1) matvec_range(j->w, j->b, j->x, r0, r1, j->cols, j->acc, j->y);
}

/* y = W·x (+ b, + y) with pool's threads (NULL: the caller's alone). */
static void matvec(pool *mv_pool, const float *w, const float *b, const float *x, int rows, int cols,
                   bool acc, float *y) {
  if (!mv_pool || (size_t)rows * cols < THREAD_MIN_WEIGHTS) {
    matvec_range(w, b, x, 0, rows, cols, acc, y);
    return;
  }
  int tasks = pool_threads(mv_pool);
  int per = (rows + tasks - 1) / tasks;
  per = (per + ROWS - 1) / ROWS * ROWS;
  matvec_job j = {w, b, x, y, rows, cols, per, acc};
  pool_run(mv_pool, tasks, matvec_task, &j);
}
#endif

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

typedef struct {
  float *h, *c;         /* committed state [layers][hidden] */
  float *h2, *c2;       /* the state after feeding the last token (committed on emit) */
  float *out;           /* predictor output for the last token: h2 of the last layer */
  float *p;             /* Wpred·out + bpred */
  float *gates, *x;     /* scratch */
  float *z, *logits;    /* joint scratch */
  pool *threads;        /* for the large products; NULL: the caller's thread */
} pred_state;

/* Runs the LSTM on `token` from the committed state into h2/c2, and the
 * joint's predictor projection. */
static void predict(const transducer *m, pred_state *s, int token) {
  int H = m->hidden;
  memcpy(s->x, m->embed + (size_t)token * H, (size_t)H * sizeof *s->x);
  for (int l = 0; l < m->layers; l++) {
    const float *h = s->h + (size_t)l * H, *c = s->c + (size_t)l * H;
    float *h2 = s->h2 + (size_t)l * H, *c2 = s->c2 + (size_t)l * H;
    matvec(s->threads, m->wx[l], m->b[l], s->x, 4 * H, H, false, s->gates);
    matvec(s->threads, m->wh[l], NULL, h, 4 * H, H, true, s->gates);
    for (int j = 0; j < H; j++) {
      float i = sigmoid(s->gates[j]), f = sigmoid(s->gates[H + j]);
      float g = tanhf(s->gates[2 * H + j]), o = sigmoid(s->gates[3 * H + j]);
      c2[j] = f * c[j] + i * g;
      h2[j] = o * tanhf(c2[j]);
    }
    memcpy(s->x, h2, (size_t)H * sizeof *s->x);
  }
  memcpy(s->out, s->x, (size_t)H * sizeof *s->out);
  matvec(s->threads, m->pred_w, m->pred_b, s->out, m->joint, H, false, s->p);
}

static void joint(const transducer *m, pred_state *s, const float *e) {
  for (int j = 0; j < m->joint; j++) {
    float v = e[j] + s->p[j];
    s->z[j] = m->act == JOINT_RELU ? fmaxf(v, 0.0f) : m->act == JOINT_SIGMOID ? sigmoid(v) : tanhf(v);
  }
  matvec(s->threads, m->out_w, m->out_b, s->z, m->vocab + m->n_durations, m->joint, false, s->logits);
}

/* 1 − H(softmax(x)) / ln(n): transcribe.cpp's token confidence. */
static float confidence(const float *x, int n) {
  float mx = x[dec_argmax(x, n)];
  double sum = 0, ent = 0;
  for (int i = 0; i < n; i++) sum += exp((double)x[i] - mx);
  for (int i = 0; i < n; i++) {
    double p = exp((double)x[i] - mx) / sum;
    ent -= p * log(p + 1e-10);
  }
  return (float)(1.0 - ent / log((double)n));
}

int64_t transducer_max_steps(int max_symbols, int64_t t) {
  return max_symbols >= 1 && max_symbols <= TRANSDUCER_MAX_SYMBOLS && t > 0 ? max_symbols * t : 0;
}

int transducer_check_abort(const transducer_abort *stop) {
  if (stop && stop->fn && stop->fn(stop->user)) return err_set(STENO_ERR_ABORTED, "aborted");
  return 0;
}

/* The scratch of a search in one allocation, and the pool for the large
 * products. */
static int state_new(const transducer *m, pred_state *s, float **mem) {
  size_t H = (size_t)m->hidden, L = (size_t)m->layers;
  size_t floats = 4 * L * H + 2 * H + 4 * H + H + 2 * (size_t)m->joint + (size_t)(m->vocab + m->n_durations);
  float *at = *mem = mem_alloc(floats, sizeof *at);
  if (!at) return STENO_ERR_NOMEM;
  s->h = at, at += L * H;
  s->c = at, at += L * H;
  s->h2 = at, at += L * H;
  s->c2 = at, at += L * H;
  s->out = at, at += H;
  s->x = at, at += H;
  s->gates = at, at += 4 * H;
  s->p = at, at += (size_t)m->joint;
  s->z = at, at += (size_t)m->joint;
  s->logits = at;
  s->threads = NULL;
  int workers = m->threads == 1 ? 0 : m->threads > 1 ? m->threads - 1 : pool_default_workers();
  /* Threads only pay when the joint's output matrix is large (real models). */
  if (workers > 0 && (size_t)(m->vocab + m->n_durations) * m->joint >= THREAD_MIN_WEIGHTS) {
    int st = pool_new(workers, &s->threads);
    if (st) {
      free(*mem);
      return st;
    }
  }
  return 0;
}

/* Where the search goes after choosing tok with duration dur at *step, with
 * *symbols tokens already kept at this frame (NeMo's label looping: a blank
 * moves on by its duration, at least 1; a token of duration 0 stays, the
 * max_symbols-th such one moving on by 1 — the force_blank_mask of
 * GreedyBatchedTDTLabelLoopingComputer; transcribe.cpp's decode_tdt_greedy
 * does the same). RNN-T: dur is 1 for blank, 0 for a token. */
static void advance(bool blank, int dur, int cap, int *step, int *symbols) {
  int move = blank && dur == 0 ? 1 : dur;
  if (move == 0 && ++*symbols >= cap) move = 1;
  if (move) *step += move, *symbols = 0;
}

/* A search that goes on over frames fed in turn (cache-aware streaming): the
 * predictor's state, the frame it stands on (absolute; a TDT duration may
 * carry it past the frames fed so far) and the symbols kept there. */
struct transducer_stream {
  const transducer *m;
  pred_state s;
  float *mem;
  int step, symbols;
  int64_t fed; /* frames fed so far */
};

int transducer_stream_new(const transducer *m, transducer_stream **out) {
  *out = NULL;
  if (m->layers < 1 || m->layers > TRANSDUCER_MAX_LAYERS || m->vocab < 2)
    return err_set(STENO_ERR_INVALID, "transducer with %d layers, %d classes", m->layers, m->vocab);
  if (m->max_symbols < 1 || m->max_symbols > TRANSDUCER_MAX_SYMBOLS)
    return err_set(STENO_ERR_INVALID, "transducer with %d symbols per frame (1 to %d)", m->max_symbols,
                   TRANSDUCER_MAX_SYMBOLS);
  transducer_stream *ts = mem_alloc(1, sizeof *ts);
  if (!ts) return STENO_ERR_NOMEM;
  ts->m = m;
  int st = state_new(m, &ts->s, &ts->mem);
  if (st) {
    free(ts);
    return st;
  }
  /* The start token is blank, whose embedding row is zero in published models. */
  predict(m, &ts->s, m->vocab - 1);
  *out = ts;
  return 0;
}

void transducer_stream_free(transducer_stream *ts) {
  if (!ts) return;
  pool_free(ts->s.threads);
  free(ts->mem);
  free(ts);
}

int transducer_stream_feed(transducer_stream *ts, const float *enc, int t, int stride,
                           const transducer_abort *stop, dec_tokens *out) {
  const transducer *m = ts->m;
  pred_state *s = &ts->s;
  if (t < 0 || ts->fed + t > INT32_MAX)
    return err_set(STENO_ERR_INVALID, "transducer: %d frames after %lld", t, (long long)ts->fed);
  int64_t base = ts->fed, end = base + t;
  ts->fed = end;
  size_t HL = (size_t)m->hidden * m->layers;
  bool tdt = m->durations != NULL;
  int blank = m->vocab - 1, st = 0;
  int64_t steps = transducer_max_steps(m->max_symbols, t);
  for (int64_t n = 0; ts->step < end && !st && n < steps; n++) {
    if (n % TRANSDUCER_POLL_STEPS == 0 && (st = transducer_check_abort(stop))) break;
    joint(m, s, enc + (size_t)(ts->step - base) * stride);
    int tok = dec_argmax(s->logits, m->vocab);
    int dur = tdt ? m->durations[dec_argmax(s->logits + m->vocab, m->n_durations)] : 1;
    if (tok != blank) {
      dec_token d = {.id = tok, .frame = ts->step, .frames = dur, .p = confidence(s->logits, m->vocab)};
      st = dec_push(out, d);
      /* Commit the state the token was predicted from, then feed the token. */
      memcpy(s->h, s->h2, HL * sizeof *s->h);
      memcpy(s->c, s->c2, HL * sizeof *s->c);
      predict(m, s, tok);
    }
    advance(tok == blank, tdt || tok == blank ? dur : 0, m->max_symbols, &ts->step, &ts->symbols);
  }
  return st;
}

int transducer_greedy(const transducer *m, const float *enc, int t, int stride,
                      const transducer_abort *stop, dec_tokens *out) {
  transducer_stream *ts;
  TRY(transducer_stream_new(m, &ts));
  int st = transducer_stream_feed(ts, enc, t, stride, stop, out);
  transducer_stream_free(ts);
  return st;
}
