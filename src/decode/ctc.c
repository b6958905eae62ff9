#include "decode/ctc.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/mem.h"

int ctc_greedy(const float *logits, int t, int classes, int stride, dec_tokens *out) {
  int blank = classes - 1, prev = -1;
  for (int f = 0; f < t; f++) {
    const float *row = logits + (size_t)f * stride;
    int best = dec_argmax(row, classes);
    if (best != prev && best != blank) {
      double sum = 0;
      for (int c = 0; c < classes; c++) sum += exp((double)row[c] - row[best]);
      dec_token tok = {.id = best, .frame = f, .frames = 1, .p = (float)(1.0 / sum)};
      int st = dec_push(out, tok);
      if (st) return st;
    }
    prev = best;
  }
  return 0;
}

/* The label of state i of the interleaved sequence (even: blank). */
static int state_label(const int *targets, int i, int blank) {
  return i % 2 ? targets[i / 2] : blank;
}

/* One frame of the Viterbi recursion over states [start, end): alpha
 * (previous frame) to next, back pointers 0 (stay), 1 (from i − 1), 2 (skip a
 * blank, between different targets). In f32, as torchaudio's kernel. */
static void align_step(const float *row, const int *targets, int blank, int start, int end,
                       int states, const float *alpha, float *next, int8_t *back) {
  for (int i = 0; i < states; i++) next[i] = -INFINITY;
  int from = start;
  if (start == 0) {
    next[0] = alpha[0] + row[blank];
    back[0] = 0;
    from = 1;
  }
  for (int i = from; i < end; i++) {
    float x0 = alpha[i], x1 = alpha[i - 1], x2 = -INFINITY;
    if (i % 2 && i != 1 && targets[i / 2] != targets[i / 2 - 1]) x2 = alpha[i - 2];
    float best;
    if (x2 > x1 && x2 > x0) best = x2, back[i] = 2;
    else if (x1 > x0 && x1 > x2) best = x1, back[i] = 1;
    else best = x0, back[i] = 0;
    next[i] = best + row[state_label(targets, i, blank)];
  }
}

int ctc_force_align(const float *logp, int t, int classes, int stride, const int *targets, int n,
                    int blank, int *path) {
  int repeats = 0, states = 2 * n + 1;
  for (int i = 0; i < n; i++) {
    if (targets[i] < 0 || targets[i] >= classes || targets[i] == blank)
      return err_set(STENO_ERR_INVALID, "forced alignment: target %d of %d classes", targets[i],
                     classes);
    repeats += i > 0 && targets[i] == targets[i - 1];
  }
  if (n < 1 || t < n + repeats)
    return err_set(STENO_ERR_INVALID, "forced alignment: %d targets (%d repeats) on %d frames", n,
                   repeats, t);
  float *alpha = mem_alloc(2 * (size_t)states, sizeof *alpha);
  int8_t *back = mem_alloc((size_t)t * states, sizeof *back);
  if (!alpha || !back) return free(alpha), free(back), STENO_ERR_NOMEM;
  /* The reachable states: those that can still end the path in time, and
   * those the path can have reached by frame f. */
  int start = t - (n + repeats) > 0 ? 0 : 1, end = 2, need = n + repeats;
  for (int i = 0; i < states; i++) alpha[i] = -INFINITY;
  for (int i = start; i < end; i++) alpha[i] = logp[state_label(targets, i, blank)];
  for (int f = 1; f < t; f++) {
    if (t - f <= need) {
      if (start % 2 && start / 2 + 1 < n && targets[start / 2] != targets[start / 2 + 1]) start++;
      start++;
    }
    if (f <= need) {
      if (end % 2 == 0 && end < 2 * n && targets[end / 2 - 1] != targets[end / 2]) end++;
      end++;
    }
    align_step(logp + (size_t)f * stride, targets, blank, start, end, states,
               alpha + (size_t)((f - 1) % 2) * states, alpha + (size_t)(f % 2) * states,
               back + (size_t)f * states);
  }
  const float *last = alpha + (size_t)((t - 1) % 2) * states;
  int s = last[states - 1] > last[states - 2] ? states - 1 : states - 2;
  for (int f = t - 1; f >= 0; f--) {
    path[f] = state_label(targets, s, blank);
    s -= back[(size_t)f * states + s];
  }
  free(alpha);
  free(back);
  return 0;
}

int ctc_spans(const int *path, int t, int blank, int *start, int *end, int n) {
  int k = 0;
  for (int f = 0; f < t;) {
    int g = f;
    while (g < t && path[g] == path[f]) g++;
    if (path[f] != blank) {
      if (k < n) start[k] = f, end[k] = g;
      k++;
    }
    f = g;
  }
  return k;
}
