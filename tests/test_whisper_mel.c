/* Whisper's log-mel (src/frontend/whisper_mel.c) on clips shorter than its
 * 30 s window computes only the frames that read a sample of the clip and
 * gives the rest the zero padding's value. Checked at the real shapes (n_fft
 * 400, hop 160, 128 mels, 480 000 samples): (1) the features are bit for bit
 * those of the clip zero-padded by hand to 30 s, which every frame reads, so
 * all are computed; (2) wmel_audio_frames is the count found here by walking
 * every sample index of every frame through torch.stft's reflect padding,
 * rounded up to whole FFT pairs; lengths around the hop's and the padding's
 * boundaries, with the clip in a buffer of exactly its length (ASan sees any
 * read past it). No GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frontend/whisper_mel.h"

enum { NFFT = 400, HOP = 160, MELS = 128, WINDOW = 480000 };

/* Triangles evenly spaced over the bins, Whisper's filterbank's shape (the
 * weights themselves do not matter to what is checked). */
static void filters(float *fb) {
  int bins = NFFT / 2 + 1;
  for (int m = 0; m < MELS; m++)
    for (int k = 0; k < bins; k++) {
      double c = (m + 1) * (bins - 1.0) / (MELS + 1), w = 1.0 - fabs(k - c) / 2.5;
      fb[m * bins + k] = (float)(w > 0 ? w * 0.01 : 0);
    }
}

/* torch.stft(center=True, pad_mode="reflect") of the clip zero-padded to len:
 * does frame t read any index below n? */
static int touches(size_t n, size_t len, size_t t) {
  for (long j = 0; j < NFFT; j++) {
    long i = (long)(t * HOP) - NFFT / 2 + j;
    if (i < 0) i = -i;
    if (i >= (long)len) i = 2 * ((long)len - 1) - i;
    if (i >= 0 && (size_t)i < n) return 1;
  }
  return 0;
}

/* The frames that must be computed: those touching the clip, which must be
 * the first few, rounded up to a whole pair (frames go through the FFT two at
 * a time, and a frame's bits depend on its partner). */
static size_t audio_frames(size_t n) {
  size_t len = n > WINDOW ? n : WINDOW, T = len / HOP, last = 0;
  for (size_t t = 0; t < T; t++)
    if (touches(n, len, t)) {
      CHECK(t == last, "%zu samples: frame %zu touches the clip but %zu does not", n, t, last);
      last = t + 1;
    }
  last += last % 2;
  return last < T ? last : T;
}

static void one(const wmel *m, const float *audio, size_t n) {
  size_t want = audio_frames(n), got = wmel_audio_frames(m, n);
  CHECK(got == want, "%zu samples: %zu frames computed, %zu touch the clip", n, got, want);
  if (n > WINDOW) return; /* nothing padded: every frame is the clip's */
  float *clip = malloc(n ? n * sizeof *clip : 1), *padded = calloc(WINDOW, sizeof *padded);
  if (!clip || !padded) {
    CHECK(0, "out of memory");
    free(clip), free(padded);
    return;
  }
  if (n) memcpy(clip, audio, n * sizeof *clip);
  if (n) memcpy(padded, audio, n * sizeof *padded);
  float *a = NULL, *b = NULL;
  size_t fa = 0, fb = 0;
  CHECK_OK(wmel_compute(m, clip, n, &a, &fa));
  CHECK_OK(wmel_compute(m, padded, WINDOW, &b, &fb));
  CHECK(fa == WINDOW / HOP && fb == fa, "%zu samples: %zu and %zu frames", n, fa, fb);
  if (a && b && fa == fb) {
    size_t t = 0;
    while (t < fa && !memcmp(a + t * MELS, b + t * MELS, MELS * sizeof *a)) t++;
    CHECK(t == fa, "%zu samples: frame %zu of %zu differs from the padded clip's (%zu computed)",
          n, t, fa, got);
  }
  free(a), free(b), free(clip), free(padded);
}

int main(void) {
  static float fb[MELS * (NFFT / 2 + 1)];
  float window[NFFT];
  filters(fb);
  for (int j = 0; j < NFFT; j++) window[j] = (float)(0.5 - 0.5 * cos(2 * M_PI * j / NFFT));
  wmel m;
  CHECK_OK(wmel_init(&m, NFFT, HOP, MELS, WINDOW, fb, window));
  size_t cap = WINDOW + 2 * HOP;
  float *audio = malloc(cap * sizeof *audio);
  if (!audio) return 1;
  check_random(audio, cap, 13);
  /* Speech-like clips; one hop either side of a frame's reach (a frame t
   * reads the clip from t·hop − n_fft/2, so lengths 160k − 200 ± 1 move the
   * count); the last frames' reach past the window's end, whose reflection
   * reads back 200 samples (30 s − 201 … − 199); and clips longer than it. */
  static const size_t lengths[] = {
      0, 1, 2, 1600, 16000, 176000, 479840, WINDOW,             /* 0.1, 1, 11, 29.99, 30 s */
      HOP - 1, HOP, HOP + 1, HOP * 7 - 1, HOP * 7, HOP * 7 + 1, /* hop boundaries */
      HOP * 8 - 201, HOP * 8 - 200, HOP * 8 - 199,              /* a frame's reach */
      HOP * 9 - 201, HOP * 9 - 200, HOP * 9 - 199, 176000 - 200, 176000 - 199,
      WINDOW - 201, WINDOW - 200, WINDOW - 199, WINDOW - 1,     /* the end's reflection */
      WINDOW + 1, WINDOW + HOP};                                 /* not padded */
  for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) one(&m, audio, lengths[i]);
  wmel_free(&m);
  free(audio);
  printf("whisper mel: %zu clip lengths, only the frames touching the clip computed, bit for bit "
         "the padded clip's\n",
         sizeof lengths / sizeof *lengths);
  return check_done();
}
