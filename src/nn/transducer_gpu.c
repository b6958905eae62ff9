/* Greedy transducer decoding on the GPU: per step the joint and pick (one
 * dispatch), one LSTM dispatch per layer and the predictor projection, recorded
 * in chunks of steps; each kernel does nothing once the search is done, so a
 * chunk may run past the end. */
#include "nn/transducer_gpu.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"

enum { ST_DONE, ST_STEP, ST_LEFT, ST_SYMBOLS, ST_EMIT, ST_CUR, ST_TOK, ST_OUT, ST_ROOM, ST_COUNT, ST_WORDS };
/* Steps in the first chunk; each next chunk doubles, up to the last. */
enum { CHUNK_FIRST = 32, CHUNK_LAST = 512 };

/* The weights, read-only once uploaded. */
struct gpu_transducer {
  gpu_device *dev;
  int vocab, hidden, layers, joint, n_dur, max_symbols, act;
  gpu_buffer *embed, *wx[TRANSDUCER_MAX_LAYERS], *wh[TRANSDUCER_MAX_LAYERS],
      *b[TRANSDUCER_MAX_LAYERS], *pred_w, *pred_b, *out_w, *out_b, *dur;
};

/* What one search writes. */
struct gpu_transducer_search {
  const gpu_transducer *g;
  gpu_rec *rec;
  gpu_buffer *state, *h, *c, *p, *logits, *out; /* out: room for `room` tokens */
  uint32_t room;
};

void gpu_transducer_free(gpu_transducer *g) {
  if (!g) return;
  gpu_buffer *all[] = {g->embed, g->pred_w, g->pred_b, g->out_w, g->out_b, g->dur};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) gpu_buffer_free(all[i]);
  for (int l = 0; l < TRANSDUCER_MAX_LAYERS; l++) {
    gpu_buffer_free(g->wx[l]);
    gpu_buffer_free(g->wh[l]);
    gpu_buffer_free(g->b[l]);
  }
  free(g);
}

void gpu_transducer_search_free(gpu_transducer_search *s) {
  if (!s) return;
  gpu_buffer *all[] = {s->state, s->h, s->c, s->p, s->logits, s->out};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) gpu_buffer_free(all[i]);
  gpu_rec_free(s->rec);
  free(s);
}

int gpu_transducer_search_new(const gpu_transducer *g, gpu_transducer_search **out) {
  *out = NULL;
  gpu_transducer_search *s = mem_alloc(1, sizeof *s);
  if (!s) return STENO_ERR_NOMEM;
  s->g = g;
  size_t H = (size_t)g->hidden, hc = 2 * (size_t)g->layers * H * sizeof(float);
  gpu_device *d = g->dev;
  int st = gpu_buffer_new(d, ST_WORDS * 4, &s->state);
  if (!st) st = gpu_buffer_new(d, hc, &s->h);
  if (!st) st = gpu_buffer_new(d, hc, &s->c);
  if (!st) st = gpu_buffer_new(d, (size_t)g->joint * sizeof(float), &s->p);
  if (!st) st = gpu_buffer_new(d, (size_t)(g->vocab + g->n_dur) * sizeof(float), &s->logits);
  if (!st) st = gpu_rec_new(d, &s->rec);
  if (st) {
    gpu_transducer_search_free(s);
    return st;
  }
  gpu_rec_profile(s->rec, "transducer search");
  *out = s;
  return 0;
}

static int upload_all(gpu_transducer *g, const transducer *m) {
  size_t H = (size_t)m->hidden, J = (size_t)m->joint, R = (size_t)(m->vocab + m->n_durations);
  gpu_device *d = g->dev;
  TRY(gpu_buffer_from(d, m->embed, (size_t)m->vocab * H * sizeof(float), &g->embed));
  for (int l = 0; l < m->layers; l++) {
    TRY(gpu_buffer_from(d, m->wx[l], 4 * H * H * sizeof(float), &g->wx[l]));
    TRY(gpu_buffer_from(d, m->wh[l], 4 * H * H * sizeof(float), &g->wh[l]));
    TRY(gpu_buffer_from(d, m->b[l], 4 * H * sizeof(float), &g->b[l]));
  }
  TRY(gpu_buffer_from(d, m->pred_w, J * H * sizeof(float), &g->pred_w));
  TRY(gpu_buffer_from(d, m->pred_b, J * sizeof(float), &g->pred_b));
  TRY(gpu_buffer_from(d, m->out_w, R * J * sizeof(float), &g->out_w));
  TRY(gpu_buffer_from(d, m->out_b, R * sizeof(float), &g->out_b));
  int none = 1;
  TRY(gpu_buffer_from(d, m->durations ? (const void *)m->durations : &none,
                      (m->durations ? (size_t)m->n_durations : 1) * sizeof(int), &g->dur));
  return 0;
}

int gpu_transducer_new(gpu_device *dev, const transducer *m, gpu_transducer **out) {
  *out = NULL;
  if (transducer_max_steps(m->max_symbols, 1) == 0)
    return err_set(STENO_ERR_INVALID, "transducer with %d symbols per frame (1 to %d)", m->max_symbols,
                   TRANSDUCER_MAX_SYMBOLS);
  if (m->hidden < 1 || m->hidden > 2048 || m->joint < 1 || m->joint > 4096 || m->layers < 1 ||
      m->layers > TRANSDUCER_MAX_LAYERS || m->vocab < 2)
    return 0;
  gpu_transducer *g = mem_alloc(1, sizeof *g);
  if (!g) return STENO_ERR_NOMEM;
  *g = (gpu_transducer){.dev = dev, .vocab = m->vocab, .hidden = m->hidden, .layers = m->layers,
                        .joint = m->joint, .n_dur = m->durations ? m->n_durations : 0,
                        .max_symbols = m->max_symbols, .act = (int)m->act};
  int st = upload_all(g, m);
  if (st) {
    gpu_transducer_free(g);
    return st;
  }
  *out = g;
  return 0;
}

/* The LSTM on the token in state[ST_TOK] and the predictor projection (both
 * do nothing unless state[ST_EMIT]). */
static void record_predict(gpu_transducer_search *s) {
  const gpu_transducer *g = s->g;
  uint32_t H = (uint32_t)g->hidden, L = (uint32_t)g->layers;
  gpu_kernel *lstm = gpu_rec_kernel(s->rec, "rnnt_lstm", NULL, 0);
  gpu_kernel *pred = gpu_rec_kernel(s->rec, "rnnt_pred", NULL, 0);
  for (uint32_t l = 0; l < L; l++) {
    uint32_t push[3] = {H, l, L};
    gpu_buffer *b[] = {s->state, g->embed, g->wx[l], g->wh[l], g->b[l], s->h, s->c};
    gpu_dispatch(s->rec, lstm, b, 7, push, sizeof push, (H + 3) / 4, 1, 1); /* 4 units each */
  }
  uint32_t push[3] = {H, (uint32_t)g->joint, L};
  gpu_buffer *b[] = {s->state, g->pred_w, g->pred_b, s->h, s->p};
  gpu_dispatch(s->rec, pred, b, 5, push, sizeof push, ((uint32_t)g->joint + 31) / 32, 1, 1);
}

static void record_steps(gpu_transducer_search *s, gpu_buffer *enc, uint32_t t, uint32_t stride,
                         int n) {
  const gpu_transducer *g = s->g;
  uint32_t R = (uint32_t)(g->vocab + g->n_dur);
  gpu_kernel *joint = gpu_rec_kernel(s->rec, "rnnt_joint", NULL, 0);
  uint32_t push[8] = {stride, (uint32_t)g->joint, R, (uint32_t)g->act,
                      t, (uint32_t)g->vocab, (uint32_t)g->n_dur, (uint32_t)g->max_symbols};
  gpu_buffer *b[] = {s->state, enc, s->p, g->out_w, g->out_b, s->logits, g->dur, s->out};
  for (int i = 0; i < n; i++) {
    gpu_dispatch(s->rec, joint, b, 8, push, sizeof push, (R + 31) / 32, 1, 1);
    record_predict(s);
  }
}

/* Room for every token a search over t frames can emit. */
static int fit(gpu_transducer_search *s, uint32_t room) {
  if (s->out && s->room >= room) return 0;
  gpu_buffer_free(s->out);
  s->out = NULL;
  TRY(gpu_buffer_new(s->g->dev, (size_t)room * 16, &s->out));
  s->room = room;
  return 0;
}

int gpu_transducer_greedy(gpu_transducer_search *s, gpu_buffer *enc, uint32_t t, uint32_t stride,
                          const transducer_abort *stop, dec_tokens *out) {
  const gpu_transducer *g = s->g;
  uint64_t steps = (uint64_t)transducer_max_steps(g->max_symbols, t);
  if (steps > (1u << 26) || (uint64_t)t * stride > gpu_buffer_size(enc) / sizeof(float))
    return err_set(STENO_ERR_INVALID, "transducer search over %u frames of %u", t, stride);
  uint32_t room = steps > 0 ? (uint32_t)steps : 1;
  TRY(fit(s, room));
  uint32_t st[ST_WORDS] = {0};
  st[ST_DONE] = !(t > 0 && steps > 0);
  st[ST_LEFT] = steps > 0 ? (uint32_t)steps - 1 : 0;
  st[ST_EMIT] = 1; /* the search starts from the blank token fed to a zero state */
  st[ST_TOK] = (uint32_t)g->vocab - 1;
  st[ST_ROOM] = room;
  size_t hc = 2 * (size_t)g->layers * g->hidden * sizeof(float);
  float *zeros = mem_alloc(hc / sizeof(float), sizeof(float));
  if (!zeros) return STENO_ERR_NOMEM;
  memset(zeros, 0, hc);
  int rc = gpu_upload(s->state, 0, st, sizeof st);
  if (!rc) rc = gpu_upload(s->h, 0, zeros, hc);
  if (!rc) rc = gpu_upload(s->c, 0, zeros, hc);
  free(zeros);
  for (int chunk = CHUNK_FIRST, first = 1; !rc && !st[ST_DONE]; first = 0) {
    if ((rc = transducer_check_abort(stop)) || (rc = gpu_rec_begin(s->rec))) break;
    if (first) record_predict(s);
    record_steps(s, enc, t, stride, chunk);
    if ((rc = gpu_rec_run(s->rec)) || (rc = gpu_download(s->state, 0, st, sizeof st))) break;
    if (chunk < CHUNK_LAST) chunk *= 2;
  }
  uint32_t n = st[ST_OUT] < room ? st[ST_OUT] : room;
  uint32_t *rec = rc || !n ? NULL : mem_alloc((size_t)n * 4, sizeof *rec);
  if (!rc && n && !rec) rc = STENO_ERR_NOMEM;
  if (!rc && n) rc = gpu_download(s->out, 0, rec, (size_t)n * 16);
  for (uint32_t i = 0; !rc && i < n; i++) {
    dec_token d = {.id = (int)rec[4 * i], .frame = (int)rec[4 * i + 1], .frames = (int)rec[4 * i + 2]};
    memcpy(&d.p, &rec[4 * i + 3], sizeof d.p);
    rc = dec_push(out, d);
  }
  free(rec);
  return rc;
}
