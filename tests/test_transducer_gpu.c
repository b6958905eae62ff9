/* The GPU transducer search (gpu/transducer.c, rnnt_*.comp) against the CPU
 * one (decode/transducer.c, the plain C reference) on random weights: RNN-T
 * and TDT, one to three LSTM layers, the three joint activations, the 0.6B
 * models' widths. Tokens, frames and durations exactly; confidences to 1e-4.
 * Random weights decode degenerately (many symbols per frame, the step cap):
 * every rule of the search gets exercised. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "decode/transducer.h"
#include "gpu/transducer.h"
#include "gpu_test.h"
#include "steno.h"

static float *random_weights(size_t n, float scale, uint32_t seed) {
  float *v = malloc(n * sizeof *v);
  check_random(v, n, seed);
  for (size_t i = 0; v && i < n; i++) v[i] *= scale;
  return v;
}

/* boost: added to the blank's logit bias (4 × boost to duration 0's), so that
 * blanks of duration 0 (which still advance one frame) come up often. */
static void one(const char *what, int hidden, int layers, int joint, int vocab, int n_dur,
                joint_act act, int max_symbols, int t, uint32_t seed, float boost) {
  static const int durs[] = {0, 1, 2, 3, 4};
  transducer m = {.vocab = vocab, .hidden = hidden, .layers = layers, .joint = joint, .act = act,
                  .durations = n_dur ? durs : NULL, .n_durations = n_dur,
                  .max_symbols = max_symbols, .threads = 1};
  size_t H = (size_t)hidden, J = (size_t)joint, R = (size_t)(vocab + n_dur);
  float sh = 1.0f / sqrtf((float)H), sj = 2.0f / sqrtf((float)J);
  float *keep[4 + 3 * TRANSDUCER_MAX_LAYERS] = {0};
  int k = 0;
  m.embed = keep[k++] = random_weights((size_t)vocab * H, 1.0f, seed + 1);
  for (int l = 0; l < layers; l++) {
    m.wx[l] = keep[k++] = random_weights(4 * H * H, sh, seed + 10 + l);
    m.wh[l] = keep[k++] = random_weights(4 * H * H, sh, seed + 20 + l);
    m.b[l] = keep[k++] = random_weights(4 * H, 0.5f, seed + 30 + l);
  }
  float *pred_w = random_weights(J * H, sh, seed + 2), *pred_b = random_weights(J, 0.5f, seed + 3);
  float *out_w = random_weights(R * J, sj, seed + 4), *out_b = random_weights(R, 0.5f, seed + 5);
  out_b[vocab - 1] += boost;
  if (n_dur) out_b[vocab] += 4 * boost;
  m.pred_w = pred_w, m.pred_b = pred_b, m.out_w = out_w, m.out_b = out_b;
  /* The encoder projection in a wider buffer (stride joint + 3), as the GPU head pads. */
  uint32_t stride = (uint32_t)J + 3;
  float *enc = random_weights((size_t)t * stride, 1.0f, seed + 6);
  gpu_buffer *genc = NULL;
  CHECK_OK(gpu_buffer_from(test_device(), enc, (size_t)t * stride * sizeof *enc, &genc));

  dec_tokens want = {0}, got = {0};
  CHECK_OK(transducer_greedy(&m, enc, t, (int)stride, &want));
  gpu_transducer *g = NULL;
  CHECK_OK(gpu_transducer_new(test_device(), &m, &g));
  CHECK(g, "%s: no GPU decoder", what);
  if (g && genc) CHECK_OK(gpu_transducer_greedy(g, genc, (uint32_t)t, stride, &got));
  bool same = want.n == got.n;
  double worst = 0;
  for (size_t i = 0; same && i < want.n; i++) {
    same = want.v[i].id == got.v[i].id && want.v[i].frame == got.v[i].frame &&
           want.v[i].frames == got.v[i].frames;
    worst = fmax(worst, fabs((double)want.v[i].p - got.v[i].p));
  }
  CHECK(same, "%s: GPU %zu tokens, CPU %zu (or ids/frames/durations differ)", what, got.n, want.n);
  CHECK(worst <= 1e-4, "%s: confidences off by %.2e", what, worst);
  /* Again on the same decoder: nothing of the last search stays behind. */
  dec_tokens again = {0};
  if (g && genc) CHECK_OK(gpu_transducer_greedy(g, genc, (uint32_t)t, stride, &again));
  bool repeat = again.n == got.n;
  for (size_t i = 0; repeat && i < got.n; i++) repeat = again.v[i].id == got.v[i].id;
  CHECK(repeat, "%s: a second search differs", what);
  printf("%-34s %4zu tokens over %3d frames, confidences max |Δ| %.1e\n", what, got.n, t, worst);
  dec_free(&want), dec_free(&got), dec_free(&again);
  gpu_transducer_free(g);
  gpu_buffer_free(genc);
  for (int i = 0; i < k; i++) free(keep[i]);
  free(pred_w), free(pred_b), free(out_w), free(out_b), free(enc);
}

int main(void) {
  test_device();
  one("TDT small", 32, 1, 48, 41, 5, JOINT_RELU, 10, 30, 100, 0);
  one("TDT small, blanks of duration 0", 32, 1, 48, 41, 5, JOINT_RELU, 10, 30, 150, 0.9f);
  one("RNN-T small, 3 symbols per frame", 32, 2, 48, 41, 0, JOINT_RELU, 3, 30, 200, 0);
  one("RNN-T small, many blanks", 32, 2, 48, 41, 0, JOINT_RELU, 3, 30, 250, 0.9f);
  one("TDT 3 layers, tanh", 24, 3, 40, 70, 5, JOINT_TANH, 10, 25, 300, 0);
  one("RNN-T sigmoid, odd widths", 37, 2, 53, 300, 0, JOINT_SIGMOID, 5, 17, 400, 0);
  one("TDT 0.6B v2 widths", 640, 2, 640, 1025, 5, JOINT_RELU, 10, 5, 500, 0);
  one("RNN-T 1.1B widths, step cap", 640, 2, 640, 1025, 0, JOINT_RELU, 2, 8, 600, 0);
  /* No frames: nothing to search. */
  one("TDT, no frames", 32, 1, 48, 41, 5, JOINT_RELU, 10, 0, 700, 0);
  /* Too wide for the kernels: the CPU path decodes those. */
  transducer wide = {.vocab = 10, .hidden = 4096, .layers = 1, .joint = 64};
  gpu_transducer *g = (gpu_transducer *)1;
  CHECK_OK(gpu_transducer_new(test_device(), &wide, &g));
  CHECK(!g, "hidden 4096 accepted");
  return check_done();
}
