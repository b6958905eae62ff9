/* The piece pipeline: long audio split at its quiet moments into pieces the
 * family transcribes in turn, results joined with their offsets. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "audio/split.h"
#include "base/error.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/pool.h"
#include "base/timer.h"
#include "frontend/frames.h"
#include "text/result.h"
#include "text/speakers.h"

steno_transcribe_params steno_transcribe_default_params(void) {
  return (steno_transcribe_params){0};
}

/* The piece length: the caller's, or the family's window. A family with
 * full attention and no window of its own (0: Parakeet) gets 60 s, the
 * length wavo measured best for Parakeet (30 s pieces hallucinated, 120 s
 * ones skipped a sentence), and at most 300 s: the attention scores grow as
 * heads·t²·4 bytes with t = 12.5 frames/s, 18 MB at 60 s and 450 MB at 300 s
 * for Parakeet 0.6B's 8 heads. */
static int piece_seconds(const family *f, double want, double *out) {
  double most = f->window > 0 ? f->window : 300;
  *out = want ? want : f->window > 0 ? f->window : 60;
  if (want && !(want >= 5 && want <= most))
    return err_set(STENO_ERR_INVALID, "piece_seconds %g: must be 5 to %g s for %s", want, most, f->arch);
  return 0;
}

/* One comparison a sample (NaN fails it too), in blocks of a fixed length
 * that the compiler vectorizes at -O2; the first bad sample is looked for only
 * where there is one. */
enum { CHECK_BLOCK = 32 };
static int check_finite(const float *pcm, size_t n, size_t offset) {
  int bad = 0;
  size_t i = 0;
  for (; i + CHECK_BLOCK <= n; i += CHECK_BLOCK) {
    int b = 0;
    for (int j = 0; j < CHECK_BLOCK; j++) b |= !(fabsf(pcm[i + j]) <= 1e6f);
    bad |= b;
  }
  for (; i < n; i++) bad |= !(fabsf(pcm[i]) <= 1e6f);
  for (i = 0; bad && i < n; i++)
    if (!(fabsf(pcm[i]) <= 1e6f))
      return err_set(STENO_ERR_INVALID, "sample %zu (at %.3f s) is not a finite audio value (%g)",
                     offset + i, (double)(offset + i) / SPLIT_RATE, pcm[i]);
  return 0;
}

/* Appends r (freed) to all at `offset` samples and hands the new segments to p->segment. */
static int append_piece(steno_result *all, steno_result *r, size_t offset,
                        const steno_transcribe_params *p) {
  size_t before = steno_result_segment_count(all);
  TRY(result_append(all, r, (int64_t)(offset / (SPLIT_RATE / 1000))));
  /* With a diarizer the segments are called back once they have their speakers. */
  for (size_t i = before; p->segment && !p->diarizer && i < steno_result_segment_count(all); i++) {
    steno_segment seg = steno_result_segment(all, i);
    p->segment(&seg, p->segment_user);
  }
  return 0;
}

/* Pieces waiting for one batched call of the family (transcribe_batch): at
 * most BATCH_PIECES, their pcm copied (a splitter's piece lives until its
 * next one: 4 pieces of 60 s are 15 MB). A fixed count keeps memory flat over
 * any length (tests/test_long.c). */
#define BATCH_PIECES 4

typedef struct {
  const float *pcm[BATCH_PIECES];
  float *copy[BATCH_PIECES]; /* pcm where it is a copy (a stream's pieces), else NULL */
  size_t n[BATCH_PIECES], offset[BATCH_PIECES], count;
} pending;

static void pending_free(pending *q) {
  for (size_t i = 0; i < q->count; i++) free(q->copy[i]);
  q->count = 0;
}

/* The waiting pieces in one family call, appended to all in order. */
static int pending_flush(steno_session *session, pending *q, const steno_transcribe_params *p,
                         steno_result *all) {
  if (!q->count) return 0;
  double heard = all->duration; /* appending earlier pieces must not move it back */
  steno_result *r[BATCH_PIECES] = {0};
  int st = session->m->fam->transcribe_batch(session->impl, q->pcm, q->n, q->count, p, r);
  for (size_t i = 0; i < q->count; i++)
    if (st) steno_result_free(r[i]);
    else st = append_piece(all, r[i], q->offset[i], p);
  if (all->duration < heard) all->duration = heard;
  pending_free(q);
  return st;
}

/* One piece: transcribed at once, or (a family that batches) kept for the next
 * flush, copied where it comes from a stream (the splitter reuses its buffer). */
static int piece_take(steno_session *session, pending *q, const float *pcm, size_t n,
                      size_t offset, bool stream, const steno_transcribe_params *p,
                      steno_result *all) {
  const family *f = session->m->fam;
  if (!f->transcribe_batch) {
    steno_result *r;
    TRY(f->transcribe(session->impl, pcm, n, p, &r));
    return append_piece(all, r, offset, p);
  }
  float *copy = NULL;
  if (stream) {
    if (!(copy = mem_alloc(n ? n : 1, sizeof *copy))) return STENO_ERR_NOMEM;
    memcpy(copy, pcm, n * sizeof *copy);
  }
  q->pcm[q->count] = copy ? copy : pcm, q->copy[q->count] = copy;
  q->n[q->count] = n, q->offset[q->count++] = offset;
  return q->count == BATCH_PIECES ? pending_flush(session, q, p, all) : 0;
}

/* Splits what `read` delivers (read NULL: the n samples at pcm) into pieces
 * and transcribes them (in turn, or BATCH_PIECES at a time where the family
 * batches): quiet ones are skipped, the others' results appended with their
 * offset. total_seconds (0: unknown) is for progress only. */
static int transcribe_pieces(steno_session *session, split_read_fn read, void *user,
                             const float *pcm_in, size_t n_in, double total_seconds,
                             const steno_transcribe_params *p, steno_result **out) {
  const steno_model *m = session->m;
  double seconds;
  TRY(piece_seconds(m->fam, p->piece_seconds, &seconds));
  splitter s;
  TRY(read ? split_init(&s, seconds, read, user) : split_init_memory(&s, seconds, pcm_in, n_in));
  /* The CPU work below (gate, features, a CPU decoder) runs on this thread and
   * the session's workers. */
  api_call call = api_call_begin(session);
  steno_result *all;
  pending q = {0};
  int st = result_empty(0, &all);
  /* Where a call's time went, for STENO_LOG=debug: splitting and the gate,
   * the samples' check, the family's calls (and joining their results). */
  double t_split = 0, t_check = 0, t_model = 0, t_start = time_now();
  size_t pieces = 0, quiet_pieces = 0;
  for (;;) {
    if (!st && p->abort && p->abort(p->abort_user)) st = err_set(STENO_ERR_ABORTED, "aborted");
    const float *pcm;
    size_t n = 0, offset;
    bool quiet;
    double t0 = time_now();
    if (!st) st = split_next(&s, &pcm, &n, &offset, &quiet);
    double t1 = time_now();
    t_split += t1 - t0;
    if (!st && !n) st = pending_flush(session, &q, p, all);
    if (st || !n) {
      t_model += time_now() - t1;
      break;
    }
    pieces++, quiet_pieces += quiet;
    st = check_finite(pcm, n, offset);
    double t2 = time_now();
    t_check += t2 - t1;
    if (!st && !quiet) st = piece_take(session, &q, pcm, n, offset, read != NULL, p, all);
    t_model += time_now() - t2;
    if (st) break;
    all->duration = (double)(offset + n) / SPLIT_RATE;
    if (p->progress && total_seconds > 0) {
      double done = all->duration / total_seconds;
      p->progress(done < 0.999 ? (float)done : 0.999f, p->progress_user);
    }
  }
  pending_free(&q);
  split_free(&s);
  api_call_end(call);
  log_debug("call: %zu pieces (%zu quiet) in %.3f ms: splitting and the gate %.3f ms, the samples' "
            "check %.3f ms, the model %.3f ms", pieces, quiet_pieces, (time_now() - t_start) * 1e3,
            t_split * 1e3, t_check * 1e3, t_model * 1e3);
  if (st) {
    steno_result_free(all);
    return st;
  }
  if (p->progress) p->progress(1.0f, p->progress_user);
  *out = all;
  return 0;
}

/* The diarizer in p, checked: a diarizer model, for a model that is not one. */
static int check_diarizer(const steno_model *m, const steno_transcribe_params *p) {
  if (!p->diarizer) return 0;
  if (!p->diarizer->fam->diarizer)
    return err_set(STENO_ERR_INVALID, "the diarizer is a %s model, not a diarizer (sortformer)",
                   p->diarizer->arch);
  if (m->fam->diarizer)
    return err_set(STENO_ERR_INVALID, "a %s model is a diarizer itself: it takes no diarizer",
                   m->arch);
  return 0;
}

/* A diarizer's whole run over n samples (its speaker cache carries the speakers
 * through the whole audio). */
static int diarize(steno_session *s, const float *pcm, size_t n, const steno_transcribe_params *p,
                   steno_result **out) {
  TRY(check_finite(pcm, n, 0));
  api_call call = api_call_begin(s); /* its features on its session's workers */
  int st = s->m->fam->transcribe(s->impl, pcm, n, p, out);
  api_call_end(call);
  if (st) return st;
  if (p->progress) p->progress(1.0f, p->progress_user);
  return 0;
}

/* r's words and segments labelled by p->diarizer's turns over the same audio;
 * then the segments are called back. Frees r on failure. */
static int add_speakers(steno_result *r, const float *pcm, size_t n,
                        const steno_transcribe_params *p) {
  steno_session *ds;
  steno_result *d = NULL;
  steno_transcribe_params q = *p;
  q.progress = NULL;
  int st = api_own_session(p->diarizer, &ds);
  if (!st) st = diarize(ds, pcm, n, &q, &d);
  if (!st) st = result_add_speakers(r, d->turns, d->nturns);
  steno_result_free(d);
  for (size_t i = 0; !st && p->segment && i < r->nsegments; i++) p->segment(&r->segments[i], p->segment_user);
  if (st) steno_result_free(r);
  return st;
}

static int stream_read(void *user, float *pcm, size_t max, size_t *got) {
  return steno_audio_read(user, pcm, max, got);
}

/* A stream whose samples are also kept (for a diarizer, which takes them all). */
typedef struct {
  steno_audio *a;
  float *kept;
  size_t n, cap;
} kept_source;

static int kept_read(void *user, float *pcm, size_t max, size_t *got) {
  kept_source *k = user;
  TRY(steno_audio_read(k->a, pcm, max, got));
  if (k->n + *got > k->cap) {
    size_t cap = (k->n + *got) * 2;
    float *g = mem_realloc(k->kept, cap, sizeof *g);
    if (!g) return STENO_ERR_NOMEM;
    k->kept = g;
    k->cap = cap;
  }
  memcpy(k->kept + k->n, pcm, *got * sizeof *pcm);
  k->n += *got;
  return 0;
}

int steno_session_transcribe(steno_session *s, const float *pcm, size_t n,
                             const steno_transcribe_params *params, steno_result **out) {
  if (out) *out = NULL;
  if (!s || !out || (!pcm && n))
    return err_set(STENO_ERR_INVALID, "steno_session_transcribe: NULL argument");
  *out = NULL;
  steno_transcribe_params p = params ? *params : steno_transcribe_default_params();
  TRY(check_diarizer(s->m, &p));
  if (s->m->fam->diarizer) return diarize(s, pcm, n, &p, out);
  TRY(transcribe_pieces(s, NULL, NULL, pcm, n, (double)n / SPLIT_RATE, &p, out));
  if (!p.diarizer) return 0;
  int st = add_speakers(*out, pcm, n, &p);
  if (st) *out = NULL;
  return st;
}

int steno_session_transcribe_audio(steno_session *s, steno_audio *a,
                                   const steno_transcribe_params *params, steno_result **out) {
  if (out) *out = NULL;
  if (!s || !a || !out)
    return err_set(STENO_ERR_INVALID, "steno_session_transcribe_audio: NULL argument");
  *out = NULL;
  steno_transcribe_params p = params ? *params : steno_transcribe_default_params();
  if (!s->m->fam->diarizer && !p.diarizer)
    return transcribe_pieces(s, stream_read, a, NULL, 0, steno_audio_duration(a), &p, out);
  TRY(check_diarizer(s->m, &p));
  kept_source k = {a, NULL, 0, 0};
  int st = 0;
  if (s->m->fam->diarizer) { /* the diarizer takes the whole stream */
    float buf[16384];
    size_t got = 1;
    while (!st && got) st = kept_read(&k, buf, sizeof buf / sizeof *buf, &got);
    if (!st) st = diarize(s, k.kept, k.n, &p, out);
  } else {
    st = transcribe_pieces(s, kept_read, &k, NULL, 0, steno_audio_duration(a), &p, out);
    if (!st && (st = add_speakers(*out, k.kept, k.n, &p))) *out = NULL;
  }
  free(k.kept);
  return st;
}

/* Where clip `clip`'s non-quiet pieces (pointers into the caller's pcm) go. */
typedef struct {
  const float **pcm;
  size_t *n, *offset, *clip, count, cap;
} piece_list;

static int piece_add(piece_list *l, const float *pcm, size_t n, size_t offset, size_t clip) {
  if (l->count == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    const float **a = mem_realloc(l->pcm, cap, sizeof *a);
    if (a) l->pcm = a;
    size_t *b = a ? mem_realloc(l->n, cap, sizeof *b) : NULL;
    if (b) l->n = b;
    size_t *c = b ? mem_realloc(l->offset, cap, sizeof *c) : NULL;
    if (c) l->offset = c;
    size_t *d = c ? mem_realloc(l->clip, cap, sizeof *d) : NULL;
    if (d) l->clip = d;
    if (!d) return STENO_ERR_NOMEM;
    l->cap = cap;
  }
  l->pcm[l->count] = pcm, l->n[l->count] = n, l->offset[l->count] = offset;
  l->clip[l->count++] = clip;
  return 0;
}

/* Clip i's pieces, cut where steno_transcribe cuts them, into l (quiet ones left out). */
static int clip_pieces(const float *pcm, size_t n, size_t i, double seconds, piece_list *l) {
  splitter s;
  TRY(split_init_memory(&s, seconds, pcm, n));
  int st = 0;
  for (;;) {
    const float *piece;
    size_t len = 0, offset;
    bool quiet;
    if (!st) st = split_next(&s, &piece, &len, &offset, &quiet);
    if (st || !len) break;
    if (!(st = check_finite(piece, len, offset)) && !quiet)
      st = piece_add(l, pcm + offset, len, offset, i);
  }
  split_free(&s);
  return st;
}

static void pieces_free(piece_list *l) { free(l->pcm), free(l->n), free(l->offset), free(l->clip); }

/* Each clip's pieces into its own list, the clips side by side on the CPUs
 * (the gate's voicing test costs ~1-2 ms per 11 s of speech: 64 clips one after
 * another kept the GPU waiting), then joined in clip order. */
typedef struct {
  const float *const *pcm;
  const size_t *n;
  double seconds;
  piece_list *lists;
} pieces_job;

static int one_clip_pieces(void *ctx, int i) {
  const pieces_job *j = ctx;
  return clip_pieces(j->pcm[i], j->n[i], (size_t)i, j->seconds, &j->lists[i]);
}

static int all_pieces(const float *const *pcm, const size_t *n, size_t count, double seconds,
                      piece_list *l) {
  if (count > INT32_MAX) return err_set(STENO_ERR_INVALID, "steno_transcribe_batch: %zu clips", count);
  pieces_job j = {pcm, n, seconds, mem_alloc(count ? count : 1, sizeof *j.lists)};
  if (!j.lists) return STENO_ERR_NOMEM;
  int st = frames_run_clips((int)count, one_clip_pieces, &j);
  for (size_t i = 0; i < count; i++) {
    const piece_list *c = &j.lists[i];
    for (size_t k = 0; !st && k < c->count; k++) st = piece_add(l, c->pcm[k], c->n[k], c->offset[k], i);
    pieces_free(&j.lists[i]);
  }
  free(j.lists);
  return st;
}

/* steno_transcribe_batch where the family batches: every clip's pieces in one
 * family call (the family packs its GPU passes), joined per clip as
 * transcribe_pieces joins them. */
static int batch_all(steno_session *session, const float *const *pcm, const size_t *n,
                     size_t count, const steno_transcribe_params *p, steno_result **out) {
  const steno_model *m = session->m;
  double seconds;
  TRY(piece_seconds(m->fam, p->piece_seconds, &seconds));
  piece_list l = {0};
  steno_result **r = NULL;
  api_call call = api_call_begin(session);
  int st = all_pieces(pcm, n, count, seconds, &l);
  if (!st && p->abort && p->abort(p->abort_user)) st = err_set(STENO_ERR_ABORTED, "aborted");
  if (!st && !(r = mem_alloc(l.count ? l.count : 1, sizeof *r))) st = STENO_ERR_NOMEM;
  if (!st && l.count) st = m->fam->transcribe_batch(session->impl, l.pcm, l.n, l.count, p, r);
  for (size_t i = 0; i < count && !st; i++) st = result_empty(0, &out[i]);
  for (size_t k = 0; k < l.count; k++)
    if (st) steno_result_free(r ? r[k] : NULL);
    else st = append_piece(out[l.clip[k]], r[k], l.offset[k], p);
  for (size_t i = 0; i < count && !st; i++) out[i]->duration = (double)n[i] / SPLIT_RATE;
  api_call_end(call);
  free(r);
  pieces_free(&l);
  if (!st && p->progress) p->progress(1.0f, p->progress_user);
  return st;
}

int steno_transcribe_batch(steno_session *s, const float *const *pcm, const size_t *n,
                           size_t count, const steno_transcribe_params *params,
                           steno_result **out) {
  if (!s || (count && (!pcm || !n || !out)))
    return err_set(STENO_ERR_INVALID, "steno_transcribe_batch: NULL argument");
  for (size_t i = 0; i < count; i++) out[i] = NULL;
  for (size_t i = 0; i < count; i++)
    if (!pcm[i] && n[i]) return err_set(STENO_ERR_INVALID, "steno_transcribe_batch: NULL pcm");
  steno_transcribe_params p = params ? *params : steno_transcribe_default_params();
  const family *f = s->m->fam;
  int st = 0;
  if (f->transcribe_batch && !f->diarizer && !p.diarizer) {
    st = batch_all(s, pcm, n, count, &p, out);
  } else {
    for (size_t i = 0; !st && i < count; i++)
      st = steno_session_transcribe(s, pcm[i], n[i], params, &out[i]);
  }
  for (size_t i = 0; st && i < count; i++) { /* none left allocated on failure */
    steno_result_free(out[i]);
    out[i] = NULL;
  }
  return st;
}

int steno_transcribe(steno_model *m, const float *pcm, size_t n,
                     const steno_transcribe_params *params, steno_result **out) {
  if (!m || !out || (!pcm && n)) return err_set(STENO_ERR_INVALID, "steno_transcribe: NULL argument");
  *out = NULL;
  steno_session *s;
  TRY(api_own_session(m, &s));
  return steno_session_transcribe(s, pcm, n, params, out);
}

int steno_transcribe_audio(steno_model *m, steno_audio *a, const steno_transcribe_params *params,
                           steno_result **out) {
  if (!m || !a || !out) return err_set(STENO_ERR_INVALID, "steno_transcribe_audio: NULL argument");
  *out = NULL;
  steno_session *s;
  TRY(api_own_session(m, &s));
  return steno_session_transcribe_audio(s, a, params, out);
}
