/* Greedy transducer decoding on the GPU. Steps mode: per step the joint and
 * pick (one dispatch), one LSTM dispatch per layer and the predictor
 * projection, each over every clip of the batch (a row of workgroups per
 * clip), recorded in chunks of steps; each kernel does nothing for a clip
 * whose search is done, so a chunk may run past the end. Where the recorder splits
 * submissions (a discrete GPU), a chunk is recorded in parts, each its own
 * submission, and stops once a finished part says the search ended: the GPU
 * runs one part while the next is recorded. Persistent mode: one
 * rnnt_search dispatch per chunk, a workgroup per clip looping over the
 * chunk's steps. Grid mode: the steps path's work, rounds of it in one
 * rnnt_grid dispatch of workgroups that wait for one another at barriers
 * over the grid (where its probe found them all running at once). */
#include "nn/transducer_gpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "base/half.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timer.h"

/* Steps mode's state (rnnt_joint.comp): a header of ST_WORDS words, then
 * ST_WORDS per clip. */
enum { ST_SEARCHING, ST_ABORTED = 3 }; /* header: the clips still searching; a grid search gave up */
enum { ST_DONE, ST_STEP, ST_LEFT, ST_SYMBOLS, ST_EMIT, ST_CUR, ST_TOK, ST_OUT, ST_ROOM, ST_COUNT,
       ST_T, ST_FIRST, ST_BASE, ST_ROUNDS, ST_WORDS = 16 };
/* rnnt_pred.glsl's outputs a workgroup (its PR). */
enum { PRED_ROWS = 8 };
/* A block of rnnt_lstm.glsl (U units, LN invocations a gate row) or of
 * rnnt_joint.glsl (U rows, LN invocations a row). One clip waits on the
 * chain of loads each invocation makes, so it takes narrow blocks of many
 * invocations a row (H200: the plain file's search 52 → 42 ms, docs/perf.md);
 * a batch's workgroups each stage their clips' vectors first, so it takes
 * blocks twice as tall (half the workgroups staging). */
typedef struct {
  uint32_t u, ln;
} block_shape;
static const block_shape LSTM_ONE = {2, 32}, LSTM_MANY = {4, 16}, JOINT_ONE = {16, 16}, JOINT_MANY = {32, 8};
/* The most clips one steps search takes at once (more go in turns). */
enum { STEPS_CLIPS = 256 };
/* rnnt_search.comp's state words per clip. */
enum { PS_DONE, PS_STEP, PS_LEFT, PS_SYMBOLS, PS_OUT, PS_ROOM, PS_BASE, PS_T, PS_FIRST, PS_FRESH,
       PS_WORDS = 16 };
/* Steps in the first chunk; each next chunk doubles, up to the last. */
enum { CHUNK_FIRST = 32, CHUNK_LAST = 512 };
/* Steps per part, and parts per chunk, where the recorder splits. */
enum { PART_STEPS = 16, PARTS_MAX = 64 };
/* rnnt_grid: workgroups (at most one per SM of an H200), rounds per
 * dispatch, and a barrier's spins before it gives up (a read of the
 * arrivals' count from L2 each: well under a second on the H200; lavapipe
 * cuts the loop at 65 535). */
enum { GRID_GROUPS = 128, GRID_ROUNDS = 512, GRID_SPINS = 1 << 18 };
/* The rnnt_search workgroup size whose loops probe says whether rnnt_grid's
 * long loops run to the end (the probe's results are kept under it). */
enum { GRID_LOOPS_WG = 64 };
/* The TDT durations rnnt_grid takes (in the state's header words 8 .. 15). */
enum { ST_DURATIONS = 8, GRID_DURATIONS = 8 };
/* The most tokens one call's searches may hold (16 bytes each). */
#define MAX_TOKENS (1u << 26)
/* Token records (16 bytes each) a steps search copies for the host at the
 * end of every chunk, in its submission, where they all fit (one clip's
 * 60 s piece at 10 symbols a frame: 120 KB): a chunk's copy of them over
 * PCIe costs less than the separate download (a submission and a wait) it
 * saves. */
#define TOKENS_READBACK ((size_t)256 << 10)
/* A steps search's state goes in its first submission (gpu_update). */
_Static_assert(((size_t)STEPS_CLIPS + 1) * ST_WORDS * 4 <= GPU_UPDATE_MAX, "state fits an update");

/* The weights, read-only once uploaded: one buffer, packed as
 * rnnt_search.comp's header says (offsets in floats below). */
struct gpu_transducer {
  gpu_device *dev;
  int vocab, hidden, layers, joint, n_dur, max_symbols, act;
  uint32_t off_pred, off_out;  /* where pred_w and out_w start in wts */
  uint32_t pwg;                /* rnnt_search's workgroup size; 0: no fit */
  uint32_t wf;                 /* rnnt_joint's window of frames (its WF) */
  uint32_t groups;             /* rnnt_grid's workgroups (STENO_SEARCH_GROUPS, or GRID_GROUPS) */
  int grid_dur[GRID_DURATIONS]; /* the TDT durations, for rnnt_grid's state header */
  gpu_buffer *wts, *dur;
  /* The matrices (wx, wh, pred_w, out_w) again in f16 at the same element
   * offsets, where every one of their values is exactly an f16 (an F16
   * file's are): rnnt_search reads them (the same products, half the bytes
   * of a step it reads once per clip); NULL otherwise. Made from host's
   * matrices by the first persistent search (f16_ready), not at load. */
  const transducer *host;
  bool f16_tried;
  gpu_buffer *wts16;
};

/* What one search writes. */
struct gpu_transducer_search {
  const gpu_transducer *g;
  gpu_search_mode mode;
  gpu_rec *rec;
  gpu_buffer *state, *h, *c, *p, *logits, *out; /* out: room for `room` tokens */
  gpu_buffer *mirror; /* the state's header after each part (PARTS_MAX slots), for the host */
  /* Readback copies the steps search records at the end of each chunk: the
   * state, and (where room's tokens take at most TOKENS_READBACK bytes) the
   * tokens; NULL: downloaded after the search. */
  gpu_buffer *state_rb, *out_rb;
  uint32_t room;
  uint32_t lanes; /* clips the steps buffers (state, h, c, p, logits) hold */
  uint32_t active; /* clips still searching as last seen by the host (≥ 1 while recording) */
  gpu_buffer *pstate, *work; /* persistent: per clip state and scratch for `clips` clips */
  uint32_t clips;
  uint32_t budget; /* gpu_transducer_search_force: steps per dispatch (0: not forced) */
  uint32_t groups, rounds, spins; /* gpu_transducer_search_grid: forced grid (groups 0: not forced) */
  uint32_t aborts;                /* grid searches given up and searched again in steps */
};

void gpu_transducer_free(gpu_transducer *g) {
  if (!g) return;
  gpu_buffer_free(g->wts);
  gpu_buffer_free(g->wts16);
  gpu_buffer_free(g->dur);
  free(g);
}

void gpu_transducer_search_free(gpu_transducer_search *s) {
  if (!s) return;
  gpu_buffer *all[] = {s->state, s->h, s->c, s->p, s->logits, s->out, s->pstate, s->work, s->mirror,
                       s->state_rb, s->out_rb};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) gpu_buffer_free(all[i]);
  gpu_rec_free(s->rec);
  free(s);
}

static bool probed(gpu_device *dev, uint32_t wg, uint32_t groups);

bool gpu_transducer_f16(const gpu_transducer *g) { return g->wts16 != NULL; }

bool gpu_transducer_persistent(const gpu_transducer *g) { return g && g->pwg > 0 && probed(g->dev, g->pwg, 0); }

bool gpu_transducer_grid(const gpu_transducer *g) { return g && probed(g->dev, GRID_LOOPS_WG, g->groups); }

void gpu_transducer_search_mode(gpu_transducer_search *s, gpu_search_mode mode) { s->mode = mode; }

bool gpu_transducer_search_used(const gpu_transducer_search *s) {
  return s && gpu_work_here(s->g->dev, "STENO_DECODER", NULL);
}

void gpu_transducer_search_force(gpu_transducer_search *s, uint32_t budget) { s->budget = budget; }

void gpu_transducer_search_grid(gpu_transducer_search *s, uint32_t groups, uint32_t rounds, uint32_t spins) {
  s->groups = groups;
  s->rounds = rounds ? rounds : GRID_ROUNDS;
  s->spins = spins;
}

uint32_t gpu_transducer_search_aborts(const gpu_transducer_search *s) { return s->aborts; }

void gpu_transducer_search_split(gpu_transducer_search *s, bool on) { gpu_rec_split(s->rec, on); }

/* A clip's floats of rnnt_joint's logits: its window's frames of logits, then
 * each frame's block summaries (rnnt_joint.glsl's clip_floats). */
static size_t joint_floats(const gpu_transducer *g) {
  size_t rows = (size_t)(g->vocab + g->n_dur);
  return g->wf * (rows + 4 * ((rows + 15) / 16));
}

/* The steps buffers for n clips, grown as needed. */
static int fit_lanes(gpu_transducer_search *s, uint32_t n) {
  if (s->state && s->lanes >= n) return 0;
  gpu_buffer *all[] = {s->state, s->h, s->c, s->p, s->logits, s->state_rb};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) gpu_buffer_free(all[i]);
  s->state = s->h = s->c = s->p = s->logits = s->state_rb = NULL;
  s->lanes = 0;
  const gpu_transducer *g = s->g;
  size_t hc = (size_t)n * 2 * (size_t)g->layers * (size_t)g->hidden * sizeof(float);
  gpu_device *d = g->dev;
  TRY(gpu_buffer_new(d, ((size_t)n + 1) * ST_WORDS * 4, &s->state));
  TRY(gpu_buffer_readback_new(d, ((size_t)n + 1) * ST_WORDS * 4, &s->state_rb));
  TRY(gpu_buffer_new(d, hc, &s->h));
  TRY(gpu_buffer_new(d, hc, &s->c));
  TRY(gpu_buffer_new(d, (size_t)n * (size_t)g->joint * sizeof(float), &s->p));
  TRY(gpu_buffer_new(d, (size_t)n * joint_floats(g) * sizeof(float), &s->logits));
  s->lanes = n;
  return 0;
}

/* STENO_SEARCH's mode; *whole: "chunks" (steps, never in parts). */
static gpu_search_mode mode_from_env(bool *whole) {
  const char *e = getenv("STENO_SEARCH");
  *whole = e && !strcasecmp(e, "chunks");
  if (e && !strcasecmp(e, "persistent")) return GPU_SEARCH_PERSISTENT;
  if (e && !strcasecmp(e, "grid")) return GPU_SEARCH_GRID;
  if (e && (!strcasecmp(e, "steps") || *whole)) return GPU_SEARCH_STEPS;
  return GPU_SEARCH_AUTO;
}

int gpu_transducer_search_new(const gpu_transducer *g, gpu_transducer_search **out) {
  *out = NULL;
  gpu_transducer_search *s = mem_alloc(1, sizeof *s);
  if (!s) return STENO_ERR_NOMEM;
  s->g = g;
  bool whole;
  s->mode = mode_from_env(&whole);
  gpu_device *d = g->dev;
  int st = fit_lanes(s, 1);
  if (!st) st = gpu_buffer_readback_new(d, (size_t)PARTS_MAX * ST_WORDS * 4, &s->mirror);
  if (!st) st = gpu_rec_new(d, &s->rec);
  if (st) {
    gpu_transducer_search_free(s);
    return st;
  }
  gpu_rec_profile(s->rec, "transducer search");
  if (whole) gpu_rec_split(s->rec, false);
  *out = s;
  return 0;
}

/* Floats of the packed weights: embed, per layer wx, wh, b, then the
 * predictor projection and the output layer with their biases. */
static size_t packed_floats(const transducer *m, size_t *pred, size_t *out) {
  size_t H = (size_t)m->hidden, J = (size_t)m->joint, R = (size_t)(m->vocab + m->n_durations);
  *pred = (size_t)m->vocab * H + (size_t)m->layers * (8 * H * H + 4 * H);
  *out = *pred + J * H + J;
  return *out + R * J + R;
}

/* n values of w into h as f16; false where one is not exactly an f16. */
static bool f16_exact(const float *w, size_t n, uint16_t *h) {
  for (size_t i = 0; i < n; i++) {
    h[i] = f32_to_f16(w[i]);
    if (f32_bits(f16_to_f32(h[i])) != f32_bits(w[i])) return false;
  }
  return true;
}

/* g->wts16 (gpu_transducer's comment), or nothing where a matrix value is
 * not an f16. */
static int upload_f16(gpu_transducer *g) {
  const transducer *m = g->host;
  size_t H = (size_t)m->hidden, J = (size_t)m->joint, R = (size_t)(m->vocab + m->n_durations);
  size_t pred, out, all = packed_floats(m, &pred, &out);
  uint16_t *h = mem_alloc(all, sizeof *h); /* zeros where no matrix is */
  if (!h) return STENO_ERR_NOMEM;
  bool exact = true;
  size_t at = (size_t)m->vocab * H;
  for (int l = 0; exact && l < m->layers; l++, at += 8 * H * H + 4 * H)
    exact = f16_exact(m->wx[l], 4 * H * H, h + at) &&
            f16_exact(m->wh[l], 4 * H * H, h + at + 4 * H * H);
  exact = exact && f16_exact(m->pred_w, J * H, h + pred) && f16_exact(m->out_w, R * J, h + out);
  int st = exact ? gpu_buffer_from(g->dev, h, all * sizeof *h, &g->wts16) : 0;
  free(h);
  return st;
}

/* The f16 copy on the persistent search's first use, once per decoder
 * (sessions may search side by side): converting and checking the 0.6B's
 * 7.6 M matrix values takes ~40 ms on the development machine, which only
 * batches of GPU_SEARCH_AUTO_BATCH clips and more would repay at load. */
static pthread_mutex_t f16_lock = PTHREAD_MUTEX_INITIALIZER;

static int f16_ready(const gpu_transducer *cg) {
  gpu_transducer *g = (gpu_transducer *)cg; /* only the copy changes, under f16_lock */
  pthread_mutex_lock(&f16_lock);
  int st = g->f16_tried ? 0 : upload_f16(g);
  if (!st) g->f16_tried = true;
  pthread_mutex_unlock(&f16_lock);
  return st;
}

static int upload_all(gpu_transducer *g, const transducer *m) {
  size_t H = (size_t)m->hidden, J = (size_t)m->joint, R = (size_t)(m->vocab + m->n_durations);
  size_t pred, out, all = packed_floats(m, &pred, &out), at = (size_t)m->vocab * H, f = sizeof(float);
  gpu_device *d = g->dev;
  TRY(gpu_buffer_new(d, all * f, &g->wts));
  TRY(gpu_upload(g->wts, 0, m->embed, at * f));
  for (int l = 0; l < m->layers; l++, at += 8 * H * H + 4 * H) {
    TRY(gpu_upload(g->wts, at * f, m->wx[l], 4 * H * H * f));
    TRY(gpu_upload(g->wts, (at + 4 * H * H) * f, m->wh[l], 4 * H * H * f));
    TRY(gpu_upload(g->wts, (at + 8 * H * H) * f, m->b[l], 4 * H * f));
  }
  TRY(gpu_upload(g->wts, pred * f, m->pred_w, J * H * f));
  TRY(gpu_upload(g->wts, (pred + J * H) * f, m->pred_b, J * f));
  TRY(gpu_upload(g->wts, out * f, m->out_w, R * J * f));
  TRY(gpu_upload(g->wts, (out + R * J) * f, m->out_b, R * f));
  g->off_pred = (uint32_t)pred;
  g->off_out = (uint32_t)out;
  int none = 1;
  TRY(gpu_buffer_from(d, m->durations ? (const void *)m->durations : &none,
                      (m->durations ? (size_t)m->n_durations : 1) * sizeof(int), &g->dur));
  return 0;
}

/* rnnt_search's workgroup: the largest power of two ≤ 1024 whose shared
 * memory (4096 floats of vectors, 4·WG of partial sums, WG indices) fits the
 * device; none below 64 (8 rows per pass). One pipeline per device. */
static void persistent_fit(gpu_transducer *g, const gpu_info *info) {
  if (2 * g->hidden > 4096) return;
  for (uint32_t wg = 1024; wg >= 64; wg /= 2) {
    if (wg > info->max_workgroup_invocations) continue;
    if (4 * 4096 + 20 * (size_t)wg + 4 * 32 > info->max_shared_memory) continue;
    g->pwg = wg;
    return;
  }
}

/* rnnt_joint's window: up to 8 frames, as many as its shared memory holds
 * (the frames' z, WF·joint floats; their partial sums, 1 KiB a frame; 4 KiB
 * of reductions); 0 where not even one frame fits. */
static uint32_t joint_window(uint32_t joint, size_t shared) {
  size_t fixed = 4 * 256 * 4 + 64, per = 4 * (size_t)joint + 1024;
  if (shared < fixed + per) return 0;
  size_t w = (shared - fixed) / per;
  return w > 8 ? 8 : (uint32_t)w;
}

static int new_decoder(gpu_device *dev, const transducer *m, gpu_transducer **out) {
  *out = NULL;
  if (transducer_max_steps(m->max_symbols, 1) == 0)
    return err_set(STENO_ERR_INVALID, "transducer with %d symbols per frame (1 to %d)", m->max_symbols,
                   TRANSDUCER_MAX_SYMBOLS);
  if (m->hidden < 1 || m->hidden > 2048 || m->joint < 1 || m->joint > 4096 || m->layers < 1 ||
      m->layers > TRANSDUCER_MAX_LAYERS || m->vocab < 2)
    return 0;
  size_t pred, outw, bytes = packed_floats(m, &pred, &outw) * sizeof(float);
  uint64_t range = gpu_device_info(dev)->max_storage_buffer_range;
  if (bytes > UINT32_MAX || (range && bytes > range)) return 0; /* offsets are 32-bit words */
  gpu_transducer *g = mem_alloc(1, sizeof *g);
  if (!g) return STENO_ERR_NOMEM;
  *g = (gpu_transducer){.dev = dev, .vocab = m->vocab, .hidden = m->hidden, .layers = m->layers,
                        .joint = m->joint, .n_dur = m->durations ? m->n_durations : 0,
                        .max_symbols = m->max_symbols, .act = (int)m->act, .host = m};
  persistent_fit(g, gpu_device_info(dev));
  const char *e = getenv("STENO_SEARCH_GROUPS");
  long groups = e ? strtol(e, NULL, 10) : 0;
  g->groups = groups >= 1 && groups <= 65535 ? (uint32_t)groups : GRID_GROUPS;
  for (int i = 0; i < g->n_dur && i < GRID_DURATIONS; i++) g->grid_dur[i] = m->durations[i];
  g->wf = joint_window((uint32_t)g->joint, gpu_device_info(dev)->max_shared_memory);
  if (!g->wf) {
    gpu_transducer_free(g);
    return 0; /* the CPU path decodes it */
  }
  int st = upload_all(g, m);
  if (st) {
    gpu_transducer_free(g);
    return st;
  }
  *out = g;
  return 0;
}

static int probe_run(gpu_transducer *p, gpu_buffer *enc, uint32_t groups, dec_tokens *d);

/* The second half of rnnt_search's probe (the first, loops_probe: loops run
 * to the end — lavapipe stops an invocation's loops after 65 535 iterations
 * in all, which a real search's inner products pass within a few steps, and
 * which then drop terms from the sums): a search in one dispatch, with the
 * real decoder's workgroup size. The probe model's joint input is all ones
 * (enc 1, the predictor's output 0) and its output rows 1 and 2 are ones
 * over J = 4096, row 2 without its last weight but with a bias of 0.5: token
 * 1 wins (4096 to 4095.5) only where every term is summed; duration 0 always
 * wins, so the cap moves the search on. One dispatch of 256 steps (its inner
 * loop runs 512 times a step) must emit exactly PROBE_T · PROBE_SYMBOLS
 * tokens 1 of duration 0 at the right frames. Run on first use (a batch, or
 * a forced mode), once per device and workgroup size in a process. The same
 * search probes rnnt_grid (groups > 0): 256 rounds in one dispatch of
 * `groups` workgroups, every one of whose ~1 300 barriers must be met by all
 * of them (none given up). */
enum { PROBE_T = 4, PROBE_SYMBOLS = 64, PROBE_H = 8, PROBE_J = 4096, PROBE_V = 4, PROBE_R = 6 };

static bool search_probe(gpu_device *dev, uint32_t pwg, uint32_t groups) {
  static const float zero[4 * PROBE_H * PROBE_H + PROBE_J * PROBE_H] = {0};
  static const int durations[2] = {0, 1};
  static const float out_b[PROBE_R] = {0, 0, 0.5f, 0, 1, 0};
  float *out_w = calloc((size_t)PROBE_R * PROBE_J, sizeof *out_w);
  float *enc1 = malloc((size_t)PROBE_T * PROBE_J * sizeof *enc1);
  for (int i = 0; out_w && i < PROBE_J; i++) out_w[PROBE_J + i] = 1, out_w[2 * PROBE_J + i] = i + 1 < PROBE_J;
  for (int i = 0; enc1 && i < PROBE_T * PROBE_J; i++) enc1[i] = 1;
  transducer m = {.vocab = PROBE_V, .hidden = PROBE_H, .layers = 1, .joint = PROBE_J,
                  .durations = durations, .n_durations = 2, .max_symbols = PROBE_SYMBOLS,
                  .embed = zero, .wx = {zero}, .wh = {zero}, .b = {zero}, .pred_w = zero,
                  .pred_b = zero, .out_w = out_w, .out_b = out_b};
  gpu_transducer *p = NULL;
  gpu_buffer *enc = NULL;
  dec_tokens d = {0};
  bool ok = out_w && enc1 && !new_decoder(dev, &m, &p) && p && (p->pwg || groups) &&
            !gpu_buffer_from(dev, enc1, (size_t)PROBE_T * PROBE_J * sizeof(float), &enc);
  if (ok) {
    p->pwg = groups ? p->pwg : pwg;
    ok = !probe_run(p, enc, groups, &d) && d.n == PROBE_T * PROBE_SYMBOLS;
  }
  for (size_t i = 0; ok && i < d.n; i++)
    ok = d.v[i].id == 1 && d.v[i].frame == (int)(i / PROBE_SYMBOLS) && d.v[i].frames == 0;
  dec_free(&d);
  gpu_buffer_free(enc);
  gpu_transducer_free(p);
  free(out_w);
  free(enc1);
  err_clear();
  return ok;
}

/* The probe's search: every step in one dispatch; for the grid, none of
 * its barriers given up. */
static int probe_run(gpu_transducer *p, gpu_buffer *enc, uint32_t groups, dec_tokens *d) {
  gpu_transducer_search *s;
  TRY(gpu_transducer_search_new(p, &s));
  if (groups)
    gpu_transducer_search_grid(s, groups, PROBE_T * PROBE_SYMBOLS, GRID_SPINS);
  else
    gpu_transducer_search_force(s, PROBE_T * PROBE_SYMBOLS);
  int rc = gpu_transducer_greedy(s, enc, PROBE_T, PROBE_J, NULL, d);
  if (!rc && s->aborts) rc = err_set(STENO_ERR_GPU, "rnnt_grid gave up waiting");
  gpu_transducer_search_free(s);
  return rc;
}

/* The first half of the probe: rnnt_search's count_loops must count 2^18
 * iterations of a flat loop and of a nested one. */
static bool loops_probe(gpu_device *dev, uint32_t wg) {
  enum { N = 1 << 18 };
  uint32_t st[PS_WORDS] = {0};
  gpu_buffer *b = NULL;
  gpu_rec *rec = NULL;
  gpu_kernel *k = NULL;
  int rc = gpu_buffer_from(dev, st, sizeof st, &b);
  if (!rc) rc = gpu_rec_new(dev, &rec);
  if (!rc) rc = gpu_kernel_get(dev, "rnnt_search", &wg, 1, &k);
  if (!rc) rc = gpu_rec_begin(rec);
  if (!rc) {
    uint32_t push[11] = {0, 0, 0, 0, 0, 0, 0, 0, UINT32_MAX, N, 0};
    gpu_buffer *bufs[] = {b, b, b, b, b, b};
    gpu_dispatch(rec, k, bufs, 6, push, sizeof push, 1, 1, 1);
    rc = gpu_rec_run(rec);
  }
  if (!rc) rc = gpu_download(b, 0, st, sizeof st);
  gpu_rec_free(rec);
  gpu_buffer_free(b);
  return !rc && st[0] == N && st[1] == N;
}

/* Probe results by device (name, driver, API version) and workgroup size:
 * each model load would otherwise probe again (~0.4 s on lavapipe). */
static struct {
  char key[sizeof ((gpu_info *)0)->name + sizeof ((gpu_info *)0)->driver + 40];
  bool ok;
} probes[8];
static int nprobes;
static pthread_mutex_t probes_lock = PTHREAD_MUTEX_INITIALIZER;

/* Probe results by device and kernel: rnnt_search of wg invocations, or
 * (groups > 0) rnnt_grid of `groups` workgroups, which also needs loops
 * that run to the end (rnnt_search's count_loops at wg). */
static void probe_key(gpu_device *dev, uint32_t wg, uint32_t groups, char *key, size_t size) {
  const gpu_info *info = gpu_device_info(dev);
  snprintf(key, size, "%s|%s|%u|%u|%u", info->name, info->driver, info->api_version, wg, groups);
}

/* A grid search that gave up: never again on this device in this process. */
static void grid_failed(gpu_device *dev, uint32_t groups) {
  char key[sizeof probes[0].key];
  probe_key(dev, GRID_LOOPS_WG, groups, key, sizeof key);
  pthread_mutex_lock(&probes_lock);
  for (int i = 0; i < nprobes; i++)
    if (!strcmp(probes[i].key, key)) probes[i].ok = false;
  pthread_mutex_unlock(&probes_lock);
}

static bool probed(gpu_device *dev, uint32_t wg, uint32_t groups) {
  char key[sizeof probes[0].key];
  probe_key(dev, wg, groups, key, sizeof key);
  pthread_mutex_lock(&probes_lock);
  for (int i = 0; i < nprobes; i++)
    if (!strcmp(probes[i].key, key)) {
      bool ok = probes[i].ok;
      pthread_mutex_unlock(&probes_lock);
      return ok;
    }
  bool ok = loops_probe(dev, wg) && search_probe(dev, wg, groups);
  err_clear();
  if (nprobes < (int)(sizeof probes / sizeof *probes)) {
    snprintf(probes[nprobes].key, sizeof probes[nprobes].key, "%s", key);
    probes[nprobes++].ok = ok;
  }
  pthread_mutex_unlock(&probes_lock);
  return ok;
}

int gpu_transducer_new(gpu_device *dev, const transducer *m, gpu_transducer **out) {
  return new_decoder(dev, m, out);
}

/* rnnt_lstm's clips a workgroup for n clips: up to 4, as many as 4096
 * floats of their x (and of h) allow; at least 1. */
static uint32_t lstm_clips(const gpu_transducer *g, uint32_t n) {
  uint32_t c = 4096 / (uint32_t)g->hidden < 4 ? 4096 / (uint32_t)g->hidden : 4;
  c = c < n ? c : n;
  return c < 1 ? 1 : c;
}

/* The LSTM on each clip's token (ST_TOK) and the predictor projection, for
 * n clips (both do nothing for a clip unless its ST_EMIT). */
static void record_predict(gpu_transducer_search *s, uint32_t n) {
  const gpu_transducer *g = s->g;
  uint32_t H = (uint32_t)g->hidden, L = (uint32_t)g->layers;
  /* rnnt_lstm takes up to 4 clips a workgroup (each weight read once for
   * all of them), as many as 4096 floats of their x (and of h) allow, and
   * no more than the clips still searching: a group's finished clips cost
   * its workgroups their share of the work (a batch's longest clip often
   * runs on alone). */
  uint32_t cg = lstm_clips(g, n < s->active ? n : s->active);
  block_shape b1 = n > 1 ? LSTM_MANY : LSTM_ONE;
  uint32_t spec[4] = {cg, cg * H, b1.u, b1.ln};
  gpu_kernel *lstm = gpu_rec_kernel(s->rec, "rnnt_lstm", spec, 4);
  gpu_kernel *pred = gpu_rec_kernel(s->rec, "rnnt_pred", NULL, 0);
  gpu_buffer *lb[] = {s->state, g->wts, s->h, s->c};
  for (uint32_t l = 0; l < L; l++) {
    uint32_t push[5] = {H, l, L, (uint32_t)g->vocab, n};
    gpu_dispatch(s->rec, lstm, lb, 4, push, sizeof push, (H + b1.u - 1) / b1.u, (n + cg - 1) / cg, 1);
  }
  uint32_t push[4] = {H, (uint32_t)g->joint, L, g->off_pred};
  gpu_buffer *b[] = {s->state, g->wts, s->h, s->p};
  gpu_dispatch(s->rec, pred, b, 4, push, sizeof push, ((uint32_t)g->joint + PRED_ROWS - 1) / PRED_ROWS, n, 1);
}

/* `steps` steps of the search over n clips. */
static void record_steps(gpu_transducer_search *s, gpu_buffer *enc, uint32_t stride, uint32_t n,
                         int steps) {
  const gpu_transducer *g = s->g;
  uint32_t R = (uint32_t)(g->vocab + g->n_dur);
  block_shape jb = n > 1 ? JOINT_MANY : JOINT_ONE;
  uint32_t spec[4] = {g->wf, g->wf * (uint32_t)g->joint, jb.u, jb.ln};
  gpu_kernel *joint = gpu_rec_kernel(s->rec, "rnnt_joint", spec, 4);
  uint32_t push[8] = {stride, (uint32_t)g->joint, R, (uint32_t)g->act,
                      (uint32_t)g->vocab, (uint32_t)g->n_dur, (uint32_t)g->max_symbols, g->off_out};
  gpu_buffer *b[] = {s->state, enc, s->p, g->wts, s->logits, g->dur, s->out};
  for (int i = 0; i < steps; i++) {
    gpu_dispatch(s->rec, joint, b, 7, push, sizeof push, (R + jb.u - 1) / jb.u, n, 1);
    record_predict(s, n);
  }
}

/* rnnt_grid's shape for n clips: the clips per LSTM workgroup (CG, as
 * record_predict's) and the joint's window (joint_window in the shared
 * memory the LSTM's and the projection's blocks leave: x and h of CG clips
 * and their partial sums, the LSTM output and its partial sums); fewer
 * clips a workgroup where not even one frame would fit. 0: none fits. */
static uint32_t grid_shape(const gpu_transducer *g, uint32_t n, uint32_t *cg) {
  size_t shared = gpu_device_info(g->dev)->max_shared_memory, H = (size_t)g->hidden;
  if (g->n_dur > GRID_DURATIONS) return 0;
  for (uint32_t c = lstm_clips(g, n); c >= 1; c--) {
    size_t lstm = 2 * c * H * 4 + 2 * c * 16 * 16 * 4 + c * 16 * 4 + 16;
    size_t pred = H * 4 + 32 * 8 * 4, extra = lstm + pred + 64;
    uint32_t wf = shared > extra ? joint_window((uint32_t)g->joint, shared - extra) : 0;
    if (wf) {
      *cg = c;
      return wf < g->wf ? wf : g->wf;
    }
  }
  return 0;
}

/* One rnnt_grid dispatch of up to `rounds` rounds over n clips. */
static void record_grid(gpu_transducer_search *s, gpu_buffer *enc, uint32_t stride, uint32_t n,
                        uint32_t groups, uint32_t rounds, uint32_t spins) {
  const gpu_transducer *g = s->g;
  uint32_t cg = 1, wf = grid_shape(g, n, &cg), H = (uint32_t)g->hidden, J = (uint32_t)g->joint;
  /* An LSTM block per workgroup where it can (a workgroup's blocks run one
   * after another): units ⌈H / groups⌉, as many invocations a row as fit. */
  uint32_t u = (H + groups - 1) / groups;
  u = u < 1 ? 1 : u > 64 ? 64 : u;
  block_shape jb = n > 1 ? JOINT_MANY : JOINT_ONE;
  uint32_t spec[8] = {wf, wf * J, cg, H, u, 256 / (4 * u), jb.u, jb.ln};
  gpu_kernel *k = gpu_rec_kernel(s->rec, "rnnt_grid", spec, 8);
  uint32_t push[14] = {stride, J, (uint32_t)(g->vocab + g->n_dur), (uint32_t)g->act,
                       (uint32_t)g->vocab, (uint32_t)g->n_dur, (uint32_t)g->max_symbols, g->off_out,
                       H, (uint32_t)g->layers, n, g->off_pred, rounds, spins};
  gpu_buffer *b[] = {s->state, enc, s->p, g->wts, s->logits, s->out, s->h, s->c};
  gpu_dispatch(s->rec, k, b, 8, push, sizeof push, groups, 1, 1);
}

/* Room for every token a search over t frames can emit. The recorder keeps
 * its descriptor sets: they are reused only for the same buffers (by serial),
 * so a replaced buffer, ours or the caller's encoder output, is bound anew. */
static int fit(gpu_transducer_search *s, uint32_t room) {
  if (s->out && s->room >= room) return 0;
  gpu_buffer_free(s->out);
  gpu_buffer_free(s->out_rb);
  s->out = s->out_rb = NULL;
  TRY(gpu_buffer_new(s->g->dev, (size_t)room * 16, &s->out));
  if ((size_t)room * 16 <= TOKENS_READBACK)
    TRY(gpu_buffer_readback_new(s->g->dev, (size_t)room * 16, &s->out_rb));
  s->room = room;
  return 0;
}

/* A clip's search budget: room for its tokens (transducer_greedy's steps,
 * at least 1; its steps left start at room − 1), and whether it has nothing
 * to search (no frames, or no steps). */
static uint32_t clip_room(const gpu_transducer *g, uint32_t t, bool *done) {
  uint64_t steps = (uint64_t)transducer_max_steps(g->max_symbols, t);
  if (done) *done = !(t > 0 && steps > 0);
  return steps > 0 ? (uint32_t)steps : 1;
}

/* Appends the n tokens recorded at out[base ..] to d (from out_rb: the
 * search's last chunk copied them there). */
static int take_tokens(gpu_transducer_search *s, uint32_t base, uint32_t n, bool from_rb,
                       dec_tokens *d) {
  if (!n) return 0;
  uint32_t *rec = mem_alloc((size_t)n * 4, sizeof *rec);
  if (!rec) return STENO_ERR_NOMEM;
  int rc = gpu_download(from_rb ? s->out_rb : s->out, (size_t)base * 16, rec, (size_t)n * 16);
  for (uint32_t i = 0; !rc && i < n; i++) {
    dec_token t = {.id = (int)rec[4 * i], .frame = (int)rec[4 * i + 1], .frames = (int)rec[4 * i + 2]};
    memcpy(&t.p, &rec[4 * i + 3], sizeof t.p);
    rc = dec_push(d, t);
  }
  free(rec);
  return rc;
}

/* Steps (each a joint dispatch and the LSTM's) to record in the next chunk,
 * from how far the search got: the rounds it took per frame so far (a round
 * picks up to a window's run of blanks), over the frames left, and 8 to
 * spare; doubling while it has not left the first frame. Every recorded step
 * is a few dispatches the GPU runs even after the search ended (about 30 µs
 * a step on the H200, which is most of a search's time): recording a chunk
 * too long costs that, one too short a round trip (~0.3 ms). With a quarter
 * to spare the H200's 11 s search recorded 250 steps for 156 (doubling: 224). */
static int next_chunk(const uint32_t *st, uint32_t t, int chunk) {
  uint32_t frame = st[ST_STEP], taken = st[ST_ROUNDS];
  if (frame == 0 || frame >= t) return chunk < CHUNK_LAST ? 2 * chunk : CHUNK_LAST;
  double want = (double)taken / frame * (t - frame) + 8;
  return want < CHUNK_LAST ? (int)want : CHUNK_LAST;
}

/* Records a chunk as parts of PART_STEPS steps (where the recorder splits),
 * each a submission of its own (gpu_rec_flush) that ends by copying the
 * state's header into its slot of the mirror; submitting part p waits for
 * part p − 1, whose slot then says whether any clip is still searching. So
 * at most the part in flight and the one just finished run past the end, and
 * the next part is recorded while one runs. Stops there, or after PARTS_MAX
 * parts. */
static int record_parts(gpu_transducer_search *s, gpu_buffer *enc, uint32_t stride, uint32_t n,
                        const transducer_abort *stop, int *recorded) {
  for (int p = 0; p < PARTS_MAX; p++) {
    record_steps(s, enc, stride, n, PART_STEPS);
    gpu_copy(s->rec, s->state, 0, s->mirror, (size_t)p * ST_WORDS * 4, ST_WORDS * 4);
    *recorded += PART_STEPS;
    TRY(gpu_rec_flush(s->rec));
    uint32_t searching = 1;
    if (p > 0)
      TRY(gpu_download(s->mirror, ((size_t)(p - 1) * ST_WORDS + ST_SEARCHING) * 4, &searching, 4));
    if (!searching) return 0;
    if (p > 0) s->active = searching; /* for the next part's grouping */
    TRY(transducer_check_abort(stop));
  }
  return 0;
}

/* The steps search over n ≤ STEPS_CLIPS clips at once: every step advances
 * each clip still searching; with `groups` > 0 in rnnt_grid dispatches of
 * that many workgroups (*aborted, and nothing appended to out, where one
 * gave up waiting). */
static int steps_search(gpu_transducer_search *s, gpu_buffer *enc, uint32_t stride,
                        const gpu_transducer_clip *clips, uint32_t n, uint32_t groups,
                        const transducer_abort *stop, dec_tokens *out, bool *aborted) {
  const gpu_transducer *g = s->g;
  size_t words = ((size_t)n + 1) * ST_WORDS;
  uint32_t *st = mem_alloc(words, sizeof *st); /* zeros */
  if (!st) return STENO_ERR_NOMEM;
  uint32_t base = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t *c = st + (i + 1) * ST_WORDS;
    bool done;
    c[ST_ROOM] = clip_room(g, clips[i].t, &done);
    c[ST_DONE] = done;
    c[ST_LEFT] = c[ST_ROOM] - 1;
    c[ST_EMIT] = 1; /* the search starts from the blank token fed to a zero state */
    c[ST_TOK] = (uint32_t)g->vocab - 1;
    c[ST_T] = clips[i].t;
    c[ST_FIRST] = clips[i].first;
    c[ST_BASE] = base;
    base += c[ST_ROOM];
    st[ST_SEARCHING] += !c[ST_DONE];
  }
  for (int i = 0; groups && i < g->n_dur; i++) st[ST_DURATIONS + i] = (uint32_t)g->grid_dur[i];
  s->active = st[ST_SEARCHING] ? st[ST_SEARCHING] : 1;
  size_t hc = (size_t)n * 2 * (size_t)g->layers * g->hidden * sizeof(float);
  int rc = fit(s, base);
  if (!rc) rc = fit_lanes(s, n);
  /* Where a search's host time goes (STENO_LOG=debug): the GPU's share is
   * small next to the round trips on a discrete GPU. */
  double t0 = time_now(), t_rec = 0, t_run = 0, t_state = 0;
  int chunks = 0, recorded = 0;
  bool parts = !groups && gpu_rec_splits(s->rec);
  uint32_t rounds = s->groups ? s->rounds : GRID_ROUNDS, spins = s->groups ? s->spins : GRID_SPINS;
  *aborted = false;
  /* The first chunk's submission sets the state up (the words in the
   * recording, h and c filled with zeros), and each chunk's ends by copying
   * the state (and the tokens, where out_rb holds them) for the host: one
   * submission and one wait a chunk, nothing else. */
  bool tokens_rb = s->out_rb != NULL; /* fit made it for room ≥ base tokens */
  double t1 = time_now();
  /* The host's own count from the clips' done words decides the loop (the
   * header only stops parts early). */
  for (int chunk = st[ST_SEARCHING] ? CHUNK_FIRST : 0, first = 1; !rc && chunk > 0; first = 0) {
    double a = time_now();
    if ((rc = transducer_check_abort(stop)) || (rc = gpu_rec_begin(s->rec))) break;
    if (first) {
      gpu_update(s->rec, s->state, 0, st, words * 4);
      gpu_fill(s->rec, s->h, 0, hc, 0);
      gpu_fill(s->rec, s->c, 0, hc, 0);
      record_predict(s, n);
    }
    if (groups) {
      record_grid(s, enc, stride, n, groups, rounds, spins);
      recorded += (int)rounds;
    } else if (parts) {
      if ((rc = record_parts(s, enc, stride, n, stop, &recorded))) break;
    } else {
      record_steps(s, enc, stride, n, chunk);
      recorded += chunk;
    }
    gpu_copy(s->rec, s->state, 0, s->state_rb, 0, words * 4);
    if (tokens_rb) gpu_copy(s->rec, s->out, 0, s->out_rb, 0, (size_t)base * 16);
    double b = time_now();
    if ((rc = gpu_rec_run(s->rec))) break;
    double c = time_now();
    if ((rc = gpu_download(s->state_rb, 0, st, words * 4))) break;
    t_rec += b - a, t_run += c - b, t_state += time_now() - c;
    chunks++;
    if (groups && st[ST_ABORTED]) {
      *aborted = true;
      break;
    }
    int want = 0;
    s->active = st[ST_SEARCHING] ? st[ST_SEARCHING] : 1;
    for (uint32_t i = 0; i < n; i++) {
      const uint32_t *ci = st + (i + 1) * ST_WORDS;
      int next = ci[ST_DONE] ? 0 : groups ? (int)rounds : next_chunk(ci, ci[ST_T], chunk);
      want = next > want ? next : want;
    }
    chunk = want;
  }
  double t2 = time_now();
  uint32_t steps = 0, most = 0, tokens = 0;
  for (uint32_t i = 0; !rc && !*aborted && i < n; i++) {
    const uint32_t *c = st + (i + 1) * ST_WORDS;
    uint32_t taken = c[ST_ROOM] - 1 - c[ST_LEFT];
    steps = taken > steps ? taken : steps;
    most = c[ST_ROUNDS] > most ? c[ST_ROUNDS] : most;
    tokens += c[ST_OUT];
    rc = take_tokens(s, c[ST_BASE], c[ST_OUT] < c[ST_ROOM] ? c[ST_OUT] : c[ST_ROOM], tokens_rb, &out[i]);
  }
  log_debug("transducer search: %u clips (%u frames in the first), %u steps in %u rounds at most "
            "(%u tokens) in %d chunks of %d recorded%s; setup %.2f ms, recording %.2f, runs "
            "%.2f, state reads %.2f, tokens %.2f ms",
            n, clips[0].t, steps, most, tokens, chunks, recorded,
            groups ? " on the grid" : parts ? " in parts" : "",
            (t1 - t0) * 1e3, t_rec * 1e3, t_run * 1e3, t_state * 1e3, (time_now() - t2) * 1e3);
  free(st);
  return rc;
}

/* Per clip state and scratch for n clips (persistent), grown as needed. */
static int fit_clips(gpu_transducer_search *s, uint32_t n) {
  if (s->pstate && s->clips >= n) return 0;
  gpu_buffer_free(s->pstate);
  gpu_buffer_free(s->work);
  s->pstate = s->work = NULL;
  s->clips = 0;
  const gpu_transducer *g = s->g;
  size_t w = 2 * (size_t)g->layers * g->hidden + 4 * (size_t)g->hidden + (size_t)g->joint +
             (size_t)(g->vocab + g->n_dur);
  TRY(gpu_buffer_new(g->dev, (size_t)n * PS_WORDS * 4, &s->pstate));
  TRY(gpu_buffer_new(g->dev, (size_t)n * w * sizeof(float), &s->work));
  s->clips = n;
  return 0;
}

/* Records one rnnt_search dispatch of `budget` steps over n clips. */
static void record_search(gpu_transducer_search *s, gpu_buffer *enc, uint32_t stride, uint32_t n,
                          uint32_t budget) {
  const gpu_transducer *g = s->g;
  uint32_t spec[2] = {g->pwg, g->wts16 != NULL};
  gpu_kernel *k = gpu_rec_kernel(s->rec, "rnnt_search", spec, 2);
  uint32_t w = (uint32_t)(2 * g->layers * g->hidden + 4 * g->hidden + g->joint + g->vocab + g->n_dur);
  uint32_t quads = g->hidden % 4 == 0 && g->joint % 4 == 0; /* every row and offset in vec4s */
  uint32_t push[11] = {stride, (uint32_t)g->hidden, (uint32_t)g->joint, (uint32_t)g->layers,
                       (uint32_t)g->vocab, (uint32_t)g->n_dur, (uint32_t)g->act,
                       (uint32_t)g->max_symbols, budget, w, quads};
  gpu_buffer *b[] = {s->pstate, enc, g->wts, g->dur, s->work, s->out, g->wts16 ? g->wts16 : g->wts};
  gpu_dispatch(s->rec, k, b, 7, push, sizeof push, n, 1, 1);
}

/* Whether every clip's search has ended. */
static bool all_done(const uint32_t *st, int n) {
  for (int i = 0; i < n; i++)
    if (!st[i * PS_WORDS + PS_DONE]) return false;
  return true;
}

/* The persistent search over n clips: the states set up on the host, then
 * chunks of steps until every clip is done. */
static int persistent_search(gpu_transducer_search *s, gpu_buffer *enc, uint32_t stride,
                             const gpu_transducer_clip *clips, int n, const transducer_abort *stop,
                             dec_tokens *out) {
  TRY(f16_ready(s->g));
  uint32_t *st = mem_alloc((size_t)n * PS_WORDS, sizeof *st); /* zeros */
  if (!st) return STENO_ERR_NOMEM;
  uint32_t base = 0;
  for (int i = 0; i < n; i++) {
    uint32_t *c = st + (size_t)i * PS_WORDS;
    bool done;
    c[PS_ROOM] = clip_room(s->g, clips[i].t, &done);
    c[PS_DONE] = done;
    c[PS_LEFT] = c[PS_ROOM] - 1;
    c[PS_BASE] = base;
    c[PS_T] = clips[i].t;
    c[PS_FIRST] = clips[i].first;
    c[PS_FRESH] = 1;
    base += c[PS_ROOM];
  }
  int rc = fit(s, base);
  if (!rc) rc = fit_clips(s, (uint32_t)n);
  if (!rc) rc = gpu_upload(s->pstate, 0, st, (size_t)n * PS_WORDS * 4);
  for (uint32_t chunk = CHUNK_FIRST; !rc && !all_done(st, n);) {
    if ((rc = transducer_check_abort(stop)) || (rc = gpu_rec_begin(s->rec))) break;
    record_search(s, enc, stride, (uint32_t)n, s->budget ? s->budget : chunk);
    if (!(rc = gpu_rec_run(s->rec))) rc = gpu_download(s->pstate, 0, st, (size_t)n * PS_WORDS * 4);
    if (chunk < CHUNK_LAST) chunk *= 2;
  }
  for (int i = 0; !rc && i < n; i++) {
    const uint32_t *c = st + (size_t)i * PS_WORDS;
    rc = take_tokens(s, c[PS_BASE], c[PS_OUT] < c[PS_ROOM] ? c[PS_OUT] : c[PS_ROOM], false, &out[i]);
  }
  free(st);
  return rc;
}

/* rnnt_grid's workgroups for a steps search over n clips, 0 for the
 * steps kernels: forced (gpu_transducer_search_grid), or in grid mode (and
 * auto, below the persistent kernel's batches, where GPU_SEARCH_AUTO_GRID)
 * where the grid passed its probe and its blocks fit the device. */
static uint32_t grid_groups(const gpu_transducer_search *s, uint32_t n) {
  uint32_t cg;
  if (!grid_shape(s->g, n, &cg)) return 0;
  if (s->groups) return s->groups;
  bool want = s->mode == GPU_SEARCH_GRID || (GPU_SEARCH_AUTO_GRID && s->mode == GPU_SEARCH_AUTO &&
                                               n < GPU_SEARCH_AUTO_BATCH);
  return want && gpu_transducer_grid(s->g) ? s->g->groups : 0;
}

int gpu_transducer_search_batch(gpu_transducer_search *s, gpu_buffer *enc, uint32_t stride,
                                const gpu_transducer_clip *clips, int n, const transducer_abort *stop,
                                dec_tokens *out) {
  const gpu_transducer *g = s->g;
  uint64_t rows = gpu_buffer_size(enc) / sizeof(float) / (stride ? stride : 1), tokens = 0;
  if (n < 0 || n > 65535 || (n > 0 && (!clips || !out)) || stride < (uint32_t)g->joint)
    return err_set(STENO_ERR_INVALID, "transducer search over %d clips of stride %u", n, stride);
  for (int i = 0; i < n; i++) {
    tokens += clip_room(g, clips[i].t, NULL);
    if (tokens > MAX_TOKENS || (uint64_t)clips[i].first + clips[i].t > rows)
      return err_set(STENO_ERR_INVALID, "transducer search: clip %d of %u frames at row %u (%llu rows)",
                     i, clips[i].t, clips[i].first, (unsigned long long)rows);
  }
  if (n == 0) return 0;
  bool want = s->mode == GPU_SEARCH_PERSISTENT || (s->mode == GPU_SEARCH_AUTO && n >= GPU_SEARCH_AUTO_BATCH);
  bool persistent = (s->budget && g->pwg) || (want && gpu_transducer_persistent(g));
  if (persistent) return persistent_search(s, enc, stride, clips, n, stop, out);
  for (int i = 0; i < n; i += STEPS_CLIPS) {
    uint32_t k = (uint32_t)(n - i < STEPS_CLIPS ? n - i : STEPS_CLIPS), groups = grid_groups(s, k);
    bool aborted;
    TRY(steps_search(s, enc, stride, clips + i, k, groups, stop, out + i, &aborted));
    if (aborted) {
      /* Not every workgroup ran at once: never the grid again here. */
      s->aborts++;
      if (!s->groups) grid_failed(g->dev, groups);
      log_warn("transducer search: rnnt_grid's %u workgroups did not all run at once; searching in steps",
               groups);
      TRY(steps_search(s, enc, stride, clips + i, k, 0, stop, out + i, &aborted));
    }
  }
  return 0;
}

int gpu_transducer_greedy(gpu_transducer_search *s, gpu_buffer *enc, uint32_t t, uint32_t stride,
                          const transducer_abort *stop, dec_tokens *out) {
  gpu_transducer_clip clip = {0, t};
  return gpu_transducer_search_batch(s, enc, stride, &clip, 1, stop, out);
}
