/* logmel + logmel_norm (NeMo's log-mel frames on the GPU, FFT in double)
 * against the CPU frontend's mel_compute: Parakeet's frontend (n_fft 512, 400
 * window, hop 160, 128 mels, pre-emphasis, normalization) and others (80 mels
 * without pre-emphasis or normalization, n_fft 256, n_fft 1 024), over clips of
 * 2 frames to 20 s side by side in one dispatch with their padding (rows from a
 * clip's valid frames to the pitch must be 0), on tones, noise and silence;
 * then the load's check (logmel_check) and bad shapes. Whisper's (wmel,
 * wmel_norm) against wmel_compute at n_fft 400, hop 160, 128 and 80 mels, and
 * at n_fft 406 and 512 (other splits of its two-stage transform):
 * clips of 1 sample to past the 30 s window (padding frames, reflection at
 * both ends, a clip longer than the window), rows past the frames 0, its
 * load check and bad shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/mel.h"
#include "gpu/logmel.h"
#include "gpu_test.h"
#include "models/logmel.h"
#include "steno.h"

/* Log-mel values within this of the CPU's (absolute; normalized or not). */
#define TOL 2e-4f

enum { CLIPS = 6 };

static float *signal(size_t n, uint32_t seed) {
  float *x = test_random(n, seed);
  for (size_t i = 0; i < n; i++) {
    double t = (double)i / 16000.0, f = 200.0 + 37.0 * (seed % 11);
    double env = 0.5 + 0.5 * sin(2 * M_PI * 1.3 * t);
    x[i] = (float)(0.4 * env * sin(2 * M_PI * f * t) + 0.05 * sin(2 * M_PI * 3.7 * f * t) +
                   0.01 * x[i]);
    if (seed % 3 == 0 && i > n / 4 && i < n / 2) x[i] = 0; /* a silent stretch */
  }
  return x;
}

static void one_config(const char *what, const mel_config *cfg) {
  mel_frontend mel;
  CHECK_OK(mel_init(&mel, cfg));
  gpu_device *dev = test_device();
  gpu_logmel_config c;
  logmel_config(&mel, &c);
  gpu_logmel *lm = NULL;
  CHECK_OK(gpu_logmel_new(dev, &c, &lm));
  if (!lm) {
    mel_free(&mel);
    return;
  }
  size_t hop = (size_t)cfg->hop, F = (size_t)cfg->n_mels;
  size_t n[CLIPS] = {2 * hop, 2 * hop + 1, 7 * hop + hop - 1, 16000 + 7, 48000, 320000};
  float *pcm[CLIPS];
  uint32_t pitch = 0;
  size_t total = 0;
  for (int i = 0; i < CLIPS; i++) {
    pcm[i] = signal(n[i], 7 + (uint32_t)i);
    total += n[i];
    if (n[i] / hop > pitch) pitch = (uint32_t)(n[i] / hop);
  }
  pitch += 3; /* padding rows past the longest clip too */
  size_t in_floats = gpu_logmel_input_floats(CLIPS, total);
  float *host = test_floats(in_floats);
  gpu_logmel_input(lm, (const float *const *)pcm, n, CLIPS, host);
  gpu_buffer *in = test_upload(host, in_floats);
  gpu_buffer *y = test_random_buffer((size_t)CLIPS * pitch * F, 3); /* garbage to overwrite */
  gpu_rec *rec = test_rec();
  gpu_logmel_record(rec, lm, in, CLIPS, pitch, y);
  float *got = test_run_read(rec, y, (size_t)CLIPS * pitch * F);
  for (int i = 0; i < CLIPS && got; i++) {
    size_t frames = mel_frames(&mel, n[i]), valid = 0;
    float *want = test_floats(frames * F);
    CHECK_OK(mel_compute(&mel, pcm[i], n[i], want, &valid));
    const float *g = got + (size_t)i * pitch * F;
    char name[128];
    snprintf(name, sizeof name, "%s, clip of %zu samples", what, n[i]);
    check_abs(name, g, want, valid * F, TOL);
    size_t nonzero = 0;
    for (size_t r = valid * F; r < (size_t)pitch * F; r++) nonzero += g[r] != 0.0f;
    CHECK(nonzero == 0, "%s: %zu values past the %zu valid frames are not 0", name, nonzero, valid);
    free(want);
  }
  free(got);
  gpu_rec_free(rec);
  gpu_buffer_free(in);
  gpu_buffer_free(y);
  free(host);
  for (int i = 0; i < CLIPS; i++) free(pcm[i]);

  double worst = logmel_check(dev, &mel, lm, 9600);
  CHECK(worst >= 0 && worst <= TOL, "%s: the load's check: %g", what, worst);

  /* Bad shapes fail the recording, never dispatch. */
  gpu_buffer *small = test_random_buffer(8, 1), *out = test_random_buffer(64, 2);
  gpu_rec *bad = test_rec();
  gpu_logmel_record(bad, lm, small, 3, 4, out); /* 3 clips' headers need 12 words */
  CHECK(gpu_rec_run(bad) == STENO_ERR_INVALID, "%s: a short input is refused", what);
  CHECK_OK(gpu_rec_begin(bad));
  gpu_logmel_record(bad, lm, small, 1, 0, out);
  CHECK(gpu_rec_run(bad) == STENO_ERR_INVALID, "%s: pitch 0 is refused", what);
  CHECK_OK(gpu_rec_begin(bad));
  gpu_logmel_record(bad, lm, small, 1, 1000, out);
  CHECK(gpu_rec_run(bad) == STENO_ERR_INVALID, "%s: a short output is refused", what);
  gpu_rec_free(bad);
  gpu_buffer_free(small);
  gpu_buffer_free(out);
  gpu_logmel_free(lm);
  mel_free(&mel);
}

/* More frame pairs than a grid's 65 535 workgroups (they loop): a frontend of
 * hop 1 whose 131 100 frames are cheap, against mel_compute. */
static void grid_wrap(void) {
  mel_config tiny = {.sample_rate = 16000, .n_fft = 32, .win_length = 32, .hop = 1, .n_mels = 8,
                     .preemphasis = 0.97f, .f_min = 0, .f_max = 8000, .normalize = true};
  mel_frontend mel;
  CHECK_OK(mel_init(&mel, &tiny));
  gpu_logmel_config c;
  logmel_config(&mel, &c);
  gpu_logmel *lm = NULL;
  CHECK_OK(gpu_logmel_new(test_device(), &c, &lm));
  size_t n = 131100, frames = mel_frames(&mel, n), valid = 0;
  float *pcm = signal(n, 5), *want = test_floats(frames * 8);
  CHECK_OK(mel_compute(&mel, pcm, n, want, &valid));
  size_t in_floats = gpu_logmel_input_floats(1, n);
  float *host = test_floats(in_floats);
  const float *clip = pcm;
  if (lm) gpu_logmel_input(lm, &clip, &n, 1, host);
  gpu_buffer *in = test_upload(host, in_floats), *y = test_random_buffer(frames * 8, 4);
  gpu_rec *rec = test_rec();
  gpu_logmel_record(rec, lm, in, 1, (uint32_t)frames, y);
  float *got = test_run_read(rec, y, frames * 8);
  if (got) check_abs("131 100 frames of hop 1", got, want, frames * 8, TOL);
  free(got), free(host), free(pcm), free(want);
  gpu_rec_free(rec);
  gpu_buffer_free(in);
  gpu_buffer_free(y);
  gpu_logmel_free(lm);
  mel_free(&mel);
}

/* Whisper's shapes: triangles over the bins (test_whisper_mel's), a periodic Hann window. */
/* scale: the filters' weights times it (1e38: energies past f32's range, whose
 * log10 the CPU takes in double). */
static void whisper_one(int mels, int NFFT, double scale) {
  enum { HOP = 160, WINDOW = 480000 };
  int bins = NFFT / 2 + 1;
  float *fb = test_floats((size_t)mels * bins), window[1024];
  for (int m = 0; m < mels; m++)
    for (int k = 0; k < bins; k++) {
      double c = (m + 1) * (bins - 1.0) / (mels + 1), w = 1.0 - fabs(k - c) / 2.5;
      fb[m * bins + k] = (float)(w > 0 ? w * 0.01 * scale : 0);
    }
  for (int j = 0; j < NFFT; j++) window[j] = (float)(0.5 - 0.5 * cos(2 * M_PI * j / NFFT));
  wmel mel;
  CHECK_OK(wmel_init(&mel, NFFT, HOP, mels, WINDOW, fb, window));
  free(fb);
  gpu_device *dev = test_device();
  gpu_wmel_config c;
  wmel_gpu_config(&mel, &c);
  gpu_wmel *wm = NULL;
  CHECK_OK(gpu_wmel_new(dev, &c, &wm));
  static const size_t lengths[] = {1, 399, 9600, 48000 + 77, 176000, WINDOW, WINDOW + 12345};
  for (size_t i = 0; wm && i < sizeof lengths / sizeof *lengths; i++) {
    size_t n = lengths[i], len = n > WINDOW ? n : WINDOW, frames = 0;
    size_t T = wmel_frames(&mel, n), A = wmel_audio_frames(&mel, n), all = T + 7;
    float *pcm = signal(n, 11 + (uint32_t)i), *want = NULL;
    CHECK_OK(wmel_compute(&mel, pcm, n, &want, &frames));
    gpu_buffer *x = test_upload(pcm, n), *top = test_random_buffer(A, 1);
    gpu_buffer *y = test_random_buffer(all * mels, 2);
    gpu_rec *rec = test_rec();
    gpu_wmel_record(rec, wm, x, (uint32_t)n, (uint32_t)len, (uint32_t)A, (uint32_t)T,
                    (uint32_t)all, top, y);
    float *got = test_run_read(rec, y, all * mels);
    char name[96];
    snprintf(name, sizeof name, "Whisper, %d mels, n_fft %d, filters × %g, %zu samples", mels,
             NFFT, scale, n);
    if (got && want && frames == T) check_abs(name, got, want, T * mels, TOL);
    size_t nonzero = 0;
    for (size_t r = T * mels; got && r < all * mels; r++) nonzero += got[r] != 0.0f;
    CHECK(got && nonzero == 0, "%s: %zu values past the %zu frames are not 0", name, nonzero, T);
    free(got), free(want), free(pcm);
    gpu_rec_free(rec);
    gpu_buffer_free(x), gpu_buffer_free(top), gpu_buffer_free(y);
  }
  double worst = wm ? wmel_check(dev, &mel, wm, 9600) : -1;
  CHECK(worst >= 0 && worst <= TOL, "Whisper, %d mels: the load's check: %g", mels, worst);
  /* Bad shapes fail the recording. */
  gpu_buffer *small = test_random_buffer(64, 1);
  gpu_rec *bad = test_rec();
  gpu_wmel_record(bad, wm, small, 100, 480000, 4, 3000, 3000, small, small);
  CHECK(gpu_rec_run(bad) == STENO_ERR_INVALID, "Whisper: a short output is refused");
  CHECK_OK(gpu_rec_begin(bad));
  gpu_wmel_record(bad, wm, small, 100, 50, 1, 1, 1, small, small);
  CHECK(gpu_rec_run(bad) == STENO_ERR_INVALID, "Whisper: a padded length below the clip's is refused");
  gpu_rec_free(bad);
  gpu_buffer_free(small);
  gpu_wmel_free(wm);
  wmel_free(&mel);
}

int main(void) {
  gpu_device *dev = test_device();
  if (!gpu_logmel_offered(dev, 512)) {
    printf("test_logmel: %s has no doubles in shaders; the GPU log-mel is not used there\n",
           gpu_device_info(dev)->name);
    CHECK(!gpu_device_info(dev)->float64, "offered with doubles");
    return check_done();
  }
  mel_config parakeet = {.sample_rate = 16000, .n_fft = 512, .win_length = 400, .hop = 160,
                         .n_mels = 128, .preemphasis = 0.97f, .f_min = 0, .f_max = 8000,
                         .normalize = true};
  one_config("Parakeet's frontend", &parakeet);
  mel_config plain = parakeet;
  plain.n_mels = 80, plain.preemphasis = 0, plain.normalize = false;
  one_config("80 mels, raw", &plain);
  mel_config small = {.sample_rate = 16000, .n_fft = 256, .win_length = 200, .hop = 80,
                      .n_mels = 40, .preemphasis = 0.97f, .f_min = 20, .f_max = 7600,
                      .normalize = true};
  one_config("n_fft 256", &small);
  mel_config big = {.sample_rate = 16000, .n_fft = 1024, .win_length = 1024, .hop = 256,
                    .n_mels = 64, .preemphasis = 0, .f_min = 0, .f_max = 8000, .normalize = false};
  one_config("n_fft 1024", &big);
  grid_wrap();
  whisper_one(128, 400, 1); /* Whisper's: 16 · 25 */
  whisper_one(80, 400, 1);
  whisper_one(64, 406, 1);  /* 14 · 29 */
  whisper_one(40, 512, 1);  /* 16 · 32 */
  whisper_one(40, 400, 1e38);

  /* What cannot run: a size the kernel does not take, a filter past the spectrum. */
  gpu_logmel *lm = NULL;
  mel_frontend mel;
  CHECK_OK(mel_init(&mel, &parakeet));
  gpu_logmel_config c;
  logmel_config(&mel, &c);
  c.n_fft = 400;
  CHECK(gpu_logmel_new(dev, &c, &lm) == STENO_ERR_UNSUPPORTED && !lm, "n_fft 400 is refused");
  c.n_fft = 256; /* the filters reach bin 256 of 512's spectrum: past 256's 129 bins */
  CHECK(gpu_logmel_new(dev, &c, &lm) == STENO_ERR_INVALID && !lm, "filters past the spectrum");
  mel_free(&mel);
  return check_done();
}
