/* Long audio in pieces: cuts land in the pauses (the latest near-quietest
 * one), pieces keep wavo's length rules whatever the read sizes, the energy
 * gate tells silence, noise, hum, room tone, breath and a knock from speech
 * (a real recording of room tone too, when the shared data is there); and results of pieces merge
 * with shifted times and one space between texts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/split.h"
#include "audio_test.h"
#include "base/pool.h"
#include "check.h"
#include "steno.h"
#include "text/result.h"

static uint32_t rng = 12345;
static float noise(void) { /* uniform in [-1, 1), xorshift */
  rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
  return (float)rng / 2147483648.0f - 1.0f;
}

/* Loud noise with quiet gaps of 300 ms starting at the given seconds. */
static float *gappy(size_t n, const double *gaps, int ngaps, float quiet) {
  float *x = malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = 0.3f * noise();
  for (int g = 0; g < ngaps; g++)
    for (size_t i = (size_t)(gaps[g] * 16000); i < (size_t)((gaps[g] + 0.3) * 16000) && i < n; i++)
      x[i] *= quiet;
  return x;
}

static int in_gap(size_t cut, const double *gaps, int ngaps) {
  for (int g = 0; g < ngaps; g++)
    if (cut >= (size_t)(gaps[g] * 16000) && cut < (size_t)((gaps[g] + 0.3) * 16000)) return 1;
  return 0;
}

static void test_cut(void) {
  size_t n = 40 * 16000;
  double *scratch = malloc((n / 160 + 1) * sizeof *scratch);
  /* One pause in the range: there. */
  const double one[] = {23.4};
  float *x = gappy(n, one, 1, 0.01f);
  size_t cut = split_cut(x, 15 * 16000, 30 * 16000, scratch);
  CHECK(in_gap(cut, one, 1) && cut % 160 == 0, "cut at %zu, the pause is at 23.4 s", cut);
  free(x);
  /* Two pauses as quiet, and a quieter one outside the range: the latest inside. */
  const double three[] = {17.1, 26.05, 31.0};
  x = gappy(n, three, 3, 0.01f);
  for (size_t i = 31 * 16000; i < (size_t)(31.3 * 16000); i++) x[i] = 0;
  cut = split_cut(x, 15 * 16000 + 77, 30 * 16000, scratch);
  CHECK(cut >= (size_t)(26.05 * 16000) && cut < (size_t)(26.35 * 16000), "cut at %zu, want 26.05 s", cut);
  /* A later pause less than twice as loud (in energy) as the quietest wins... */
  const double loud[] = {26.05};
  for (size_t i = (size_t)(17.1 * 16000); i < (size_t)(17.4 * 16000); i++) x[i] *= 0.8f;
  cut = split_cut(x, 15 * 16000, 30 * 16000, scratch);
  CHECK(in_gap(cut, loud, 1), "cut at %zu, want the later pause", cut);
  /* ...but not when it is much louder. */
  for (size_t i = (size_t)(26.05 * 16000); i < (size_t)(26.35 * 16000); i++) x[i] *= 20.0f;
  cut = split_cut(x, 15 * 16000, 30 * 16000, scratch);
  CHECK(cut >= (size_t)(17.1 * 16000) && cut < (size_t)(17.4 * 16000), "cut at %zu, want 17.1 s", cut);
  /* No pause at all: still inside the range, on a frame boundary. */
  free(x);
  x = gappy(n, NULL, 0, 1);
  cut = split_cut(x, 15 * 16000 + 3, 30 * 16000 - 5, scratch);
  CHECK(cut >= 15 * 16000 + 3 && cut <= 30 * 16000 - 5 && cut % 160 == 0, "cut at %zu", cut);
  free(x);
  free(scratch);
}

typedef struct {
  const float *x;
  size_t n, at, chunk;
} source;

static int source_read(void *user, float *pcm, size_t max, size_t *got) {
  source *s = user;
  size_t k = s->n - s->at;
  if (k > max) k = max;
  if (k > s->chunk) k = s->chunk;
  memcpy(pcm, s->x + s->at, k * sizeof *pcm);
  s->at += k;
  *got = k;
  return 0;
}

/* Splits x into pieces of at most `seconds` read `chunk` samples at a time;
 * checks the rules; returns the number of pieces and their offsets. */
static int split_all(const float *x, size_t n, double seconds, size_t chunk, size_t *offsets, int max) {
  source src = {x, n, 0, chunk};
  splitter s;
  /* chunk 0: split_init_memory, whose pieces point into x itself */
  if (chunk) CHECK_OK(split_init(&s, seconds, source_read, &src));
  else CHECK_OK(split_init_memory(&s, seconds, x, n));
  size_t piece = (size_t)(seconds * 16000), next = 0;
  int count = 0;
  for (;;) {
    const float *pcm;
    size_t len, offset;
    bool quiet;
    CHECK_OK(split_next(&s, &pcm, &len, &offset, &quiet));
    if (!len) break;
    CHECK(offset == next, "piece %d at %zu, want %zu", count, offset, next);
    CHECK(!memcmp(pcm, x + offset, len * sizeof *pcm), "piece %d holds other samples", count);
    CHECK(chunk || pcm == x + offset, "piece %d of samples in memory is a copy", count);
    CHECK(len <= piece, "piece %d: %zu samples > %zu", count, len, piece);
    bool last = offset + len == n;
    CHECK(last || len >= piece / 2, "piece %d: %zu samples < half", count, len);
    CHECK(!last || len >= 16000 || n < 16000 || count == 0, "last piece %zu samples", len);
    CHECK(last || len % 160 == 0, "piece %d: %zu samples, not whole frames", count, len);
    if (count < max) offsets[count] = offset;
    count++;
    next = offset + len;
  }
  CHECK(next == n, "pieces cover %zu of %zu samples", next, n);
  split_free(&s);
  return count;
}

static void test_splitter(void) {
  /* 137.3 s with a pause every 7 s; 20 s pieces. */
  size_t n = (size_t)(137.3 * 16000);
  double gaps[19];
  for (int g = 0; g < 19; g++) gaps[g] = 3.5 + 7 * g;
  float *x = gappy(n, gaps, 19, 0.01f);
  size_t off[64], off2[64];
  int count = split_all(x, n, 20, n, off, 64);
  CHECK(count >= 7 && count <= 14, "%d pieces", count);
  for (int i = 1; i < count && i < 64; i++) CHECK(in_gap(off[i], gaps, 19), "cut %d at %zu: no pause", i, off[i]);
  /* Small, odd reads: the same pieces. */
  CHECK(split_all(x, n, 20, 999, off2, 64) == count && !memcmp(off, off2, (size_t)count * sizeof *off),
        "reads of 999 samples split differently");
  /* The samples in memory, not read: the same pieces. */
  CHECK(split_all(x, n, 20, 0, off2, 64) == count && !memcmp(off, off2, (size_t)count * sizeof *off),
        "samples in memory split differently");
  split_all(x, 20 * 16000 + 8000, 20, 0, off, 64);
  CHECK(split_all(x, 5000, 20, 0, off, 64) == 1, "a short clip in memory is one piece");
  CHECK(split_all(x, 0, 20, 0, off, 64) == 0, "no samples in memory: no pieces");
  CHECK(split_all(NULL, 0, 20, 0, off, 64) == 0, "NULL samples, none of them: no pieces");
  /* Just over a piece: the last one keeps at least 1 s. */
  split_all(x, 20 * 16000 + 8000, 20, n, off, 64);
  split_all(x, 20 * 16000, 20, n, off, 64);   /* exactly one piece */
  CHECK(split_all(x, 5000, 20, n, off, 64) == 1, "a short stream is one piece");
  CHECK(split_all(x, 0, 20, n, off, 64) == 0, "an empty stream has no pieces");
  free(x);
  splitter s;
  CHECK(split_init(&s, 1.0, source_read, NULL) == STENO_ERR_INVALID, "a 1 s piece is refused");
  CHECK(split_init(&s, NAN, source_read, NULL) == STENO_ERR_INVALID, "a NaN piece is refused");
}

/* The gate's voicing measure, one lag at a time (as it was written first). */
static double plain_periodicity(const float *x) {
  double e0 = 0, el = 0, best = 0;
  for (int i = 0; i < 480; i++) e0 += (double)x[i] * x[i];
  for (int i = 32; i < 32 + 480; i++) el += (double)x[i] * x[i];
  for (int lag = 32; lag <= 320; lag++) {
    double c = 0;
    for (int i = 0; i < 480; i++) c += (double)x[i] * x[i + lag];
    if (e0 > 0 && el > 0 && c / sqrt(e0 * el) > best) best = c / sqrt(e0 * el);
    el += (double)x[lag + 480] * x[lag + 480] - (double)x[lag] * x[lag];
  }
  return best;
}

/* split_periodicity (lags in blocks) gives the plain loop's bits: on noise,
 * tones at pitches over the whole lag range, silence and speech. */
static void test_periodicity(void) {
  size_t ns;
  float *speech = test_speech(&ns), x[801];
  int same = 0, cases = 0;
  for (int c = 0; c < 301; c++, cases++) {
    int kind = c == 300 ? 1 : c % 4;
    double hz = c == 300 ? 50 : 40 + 3 * c; /* 50 Hz: the best lag is the last, 320 */
    for (int i = 0; i < 801; i++)
      x[i] = kind == 0   ? noise()
             : kind == 1 ? 0.5f * (float)sin(2 * M_PI * hz * i / 16000) + 0.01f * noise()
             : kind == 2 ? 0.0f
                         : speech[((size_t)c * 997 + (size_t)i) % ns];
    double got = split_periodicity(x), want = plain_periodicity(x);
    same += memcmp(&got, &want, sizeof got) == 0;
  }
  CHECK(same == cases, "periodicity: %d of %d cases bitwise equal to the plain loop", same, cases);
  free(speech);
}

/* The gate with a pool of 3 workers lent to it (its chunks side by side) and
 * without (in turn here): it must decide the same. */
static pool *lent;

static bool quiet(const float *x, size_t n) {
  float *band = malloc(n * sizeof *band);
  double *scratch = malloc((n / 160 + 1) * sizeof *scratch);
  bool q = split_quiet(x, n, band, scratch);
  pool *before = pool_lend(lent);
  bool q2 = split_quiet(x, n, band, scratch);
  pool_lend(before);
  CHECK(q == q2, "the gate says %s alone, %s with workers", q ? "quiet" : "not quiet",
        q2 ? "quiet" : "not quiet");
  free(band);
  free(scratch);
  return q;
}

/* The speech band as one pass over the whole clip: each biquad in direct form
 * I in double, the high-pass's output rounded to float before the low-pass. */
typedef struct {
  double b0, b1, b2, a1, a2;
} coefs;

static coefs butterworth(double hz, bool high) {
  double w = 2 * M_PI * hz / 16000, c = cos(w), alpha = sin(w) / (2 * M_SQRT1_2), a0 = 1 + alpha;
  double b0 = (high ? 1 + c : 1 - c) / 2, b1 = high ? -(1 + c) : 1 - c;
  return (coefs){b0 / a0, b1 / a0, b0 / a0, -2 * c / a0, (1 - alpha) / a0};
}

static void one_pass(const float *x, size_t n, float *band, double *e) {
  coefs f[2] = {butterworth(150, true), butterworth(1000, false)};
  double x1[2] = {0}, x2[2] = {0}, y1[2] = {0}, y2[2] = {0}, sum = 0;
  for (size_t i = 0; i < n; i++) {
    float v = x[i];
    for (int k = 0; k < 2; k++) {
      double y = f[k].b0 * v + f[k].b1 * x1[k] + f[k].b2 * x2[k] - f[k].a1 * y1[k] - f[k].a2 * y2[k];
      x2[k] = x1[k], x1[k] = v, y2[k] = y1[k], y1[k] = y;
      v = (float)y;
    }
    band[i] = v;
    sum += (double)v * v;
    if (i % 160 == 159) e[i / 160] = sum / 160, sum = 0;
  }
}

/* The gate filters its 1 s chunks apart (side by side where a pool is lent),
 * each started from rest 1 024 samples early, where its filters' response to
 * that start is down to ~3e-19 of the signal before it: the band must be one
 * pass's to within 1e-15 of the clip's loudest band sample (a chunk cut in the
 * wrong place or warmed on the wrong samples is off by ~1e-1), and all but a
 * few samples' bits the same; those few lie in near-silence right after loud
 * sound, where 3e-19 of it still moves a float's last bit (speech with an
 * exact-zero pause: a ringing of 1e-15 after speech at 0.1). Cases: noise, a
 * loud second then −120 dBFS, speech, and a second and a bit. */
static void test_band_chunks(void) {
  size_t ns;
  float *speech = test_speech(&ns);
  enum { N = 5 * 16000 + 1234 };
  float *x = malloc(N * sizeof *x), *band = malloc(N * sizeof *band), *want = malloc(N * sizeof *want);
  double *e = malloc((N / 160 + 1) * sizeof *e), *we = malloc((N / 160 + 1) * sizeof *we);
  for (int c = 0; c < 4; c++) {
    size_t n = c == 3 ? 16000 + 160 * 7 + 3 : N; /* a second and a bit */
    for (size_t i = 0; i < n; i++)
      x[i] = c == 0   ? 0.5f * noise()
             : c == 1 ? (i < 16000 ? 0.9f : 1e-6f) * noise() /* −120 dBFS after a loud second */
                      : speech[i % ns];
    one_pass(x, n, want, we);
    double peak = 0, peak_e = 0;
    for (size_t i = 0; i < n; i++) peak = fmax(peak, fabs(want[i]));
    for (size_t f = 0; f < n / 160; f++) peak_e = fmax(peak_e, we[f]);
    for (int w = 0; w < 2; w++) {
      pool *before = pool_lend(w ? lent : NULL);
      split_quiet(x, n, band, e);
      pool_lend(before);
      size_t differ = 0;
      double worst = 0, worst_e = 0;
      for (size_t i = 0; i < n; i++) {
        differ += memcmp(&band[i], &want[i], sizeof *band) != 0;
        worst = fmax(worst, fabs((double)band[i] - want[i]));
      }
      for (size_t f = 0; f < n / 160; f++) worst_e = fmax(worst_e, fabs(e[f] - we[f]));
      CHECK(worst <= 1e-15 * peak && worst_e <= 1e-15 * peak_e && differ <= n / 1000,
            "case %d%s: band off one pass by %g of its peak (frame energies %g), "
            "%zu of %zu samples' bits differ",
            c, w ? " (workers)" : "", worst / peak, worst_e / peak_e, differ, n);
    }
  }
  free(x), free(band), free(want), free(e), free(we), free(speech);
}

static void test_gate(void) {
  size_t ns, n = 30 * 16000;
  float *speech = test_speech(&ns);
  float *x = calloc(n, sizeof *x);
  CHECK(quiet(x, n), "digital silence");
  const float levels[] = {0.0001f, 0.01f, 0.3f}; /* −80, −40, −10 dBFS */
  for (int l = 0; l < 3; l++) {
    for (size_t i = 0; i < n; i++) x[i] = levels[l] * noise();
    CHECK(quiet(x, n), "white noise at %g", levels[l]);
  }
  for (size_t i = 0; i < n; i++) x[i] = 0.3f * sinf(2 * (float)M_PI * 50 * (float)i / 16000);
  CHECK(quiet(x, n), "50 Hz hum");
  for (size_t i = 0; i < n; i++) x[i] = 0.1f * sinf(2 * (float)M_PI * 440 * (float)i / 16000) + 0.01f * noise();
  CHECK(quiet(x, n), "a steady tone");
  CHECK(!quiet(speech, ns), "speech");
  /* Speech over white noise at an SNR of about 10 dB (noise rms 0.3 of speech's). */
  double e = 0;
  size_t voiced = 0;
  for (size_t i = 0; i < ns; i++)
    if (fabsf(speech[i]) > 1e-3f) e += (double)speech[i] * speech[i], voiced++;
  float rms = (float)sqrt(e / (double)voiced);
  for (size_t i = 0; i < ns; i++) x[i] = speech[i] + 0.3f * rms * 1.73f * noise();
  CHECK(!quiet(x, ns), "speech at 10 dB SNR");
  /* One second of speech in 30 s of low noise. */
  for (size_t i = 0; i < n; i++) x[i] = 0.002f * noise();
  for (size_t i = 0; i < 16000; i++) x[14 * 16000 + i] += speech[16000 + i];
  CHECK(!quiet(x, n), "1 s of speech in 30 s of noise");
  free(x);
  free(speech);
}

/* Room tone: rumble (white noise through a leaky integrator, brown below
 * 50 Hz) at about −45 dBFS and hiss at −70 dBFS. */
static void room_tone(float *x, size_t n) {
  float low = 0;
  for (size_t i = 0; i < n; i++) {
    low = 0.98f * low + 0.02f * noise();
    x[i] = 0.05f * low + 0.0003f * noise();
  }
}

/* Breaths: Hann-shaped bursts of noise, 0.3 to 0.8 s, 15 to 25 dB over the
 * room tone; a knock: a 300 Hz ring dying in 70 ms. None of them is speech,
 * and before the gate looked for voicing they passed it. Speech over the
 * same room tone still passes, at a normal level or 20 dB lower. */
static void test_gate_room(void) {
  size_t ns, n = 10 * 16000;
  float *speech = test_speech(&ns), *x = malloc(n * sizeof *x);
  room_tone(x, n);
  CHECK(quiet(x, n), "room tone");
  for (int b = 0; b < 6; b++) {
    size_t at = (size_t)(0.3 + 1.6 * b) * 16000, len = (size_t)((0.3 + 0.1 * b) * 16000);
    float gain = 0.003f * (float)(1 + b % 3);
    for (size_t i = 0; i < len; i++)
      x[at + i] += gain * (1 - cosf(2 * (float)M_PI * (float)i / (float)len)) * noise();
  }
  CHECK(quiet(x, n), "breaths over room tone");
  for (size_t i = 0; i < 1120; i++)
    x[5 * 16000 + i] += 0.02f * expf(-(float)i / 240) * sinf(2 * (float)M_PI * 300 * (float)i / 16000);
  CHECK(quiet(x, n), "breaths and a knock over room tone");
  const float gains[] = {1.0f, 0.1f};
  for (int g = 0; g < 2; g++) {
    room_tone(x, n);
    for (size_t i = 0; i < ns; i++) x[3 * 16000 + i] += gains[g] * speech[i];
    CHECK(!quiet(x, n), "speech over room tone, gain %g", gains[g]);
  }
  free(x);
  free(speech);
}

/* The recording that made the gate look for voicing: 5 s of room tone and
 * breath (and a knock) in which a model heard 7 words. Read from the shared
 * data beside the clone when it is there; never copied into the repository. */
static void test_gate_recording(void) {
  const char *src = getenv("STENO_SOURCE_DIR");
  char path[4200];
  snprintf(path, sizeof path, "%s/../shared/data/samples/jobs-silence.wav", src ? src : ".");
  FILE *f = fopen(path, "rb");
  if (!f) {
    printf("skipped: %s is not there (the shared data beside the clone)\n", path);
    return;
  }
  fclose(f);
  float *x;
  size_t n;
  CHECK_OK(steno_audio_load(path, &x, &n));
  if (!x) return;
  CHECK(n > 5 * 16000, "jobs-silence.wav: %zu samples", n);
  CHECK(quiet(x, n), "jobs-silence.wav: room tone and breath are not speech");
  size_t ns;
  float *speech = test_speech(&ns);
  for (size_t i = 0; i < ns && i < n; i++) x[i] += 0.3f * speech[i];
  CHECK(!quiet(x, n), "speech over jobs-silence.wav");
  free(speech);
  steno_audio_free(x);
}

/* A result with tokens at the given times (ms) and that text. */
static steno_result *result_of(const char *text, const int64_t *ms, size_t n, double duration) {
  steno_result *r;
  CHECK_OK(result_empty(duration, &r));
  free(r->text);
  r->text = strdup(text);
  r->tokens = calloc(n + 1, sizeof *r->tokens);
  r->words = calloc(n + 1, sizeof *r->words);
  r->segments = calloc(1, sizeof *r->segments);
  for (size_t i = 0; i < n; i++) {
    r->tokens[i] = (steno_token){(int)i, strdup("t"), ms[i], ms[i] + 80, 0.5f};
    r->words[i] = (steno_word){strdup("w"), ms[i], ms[i] + 80, 0.5f};
  }
  r->ntokens = r->nwords = n;
  if (n) {
    r->segments[0] = (steno_segment){strdup(text), ms[0], ms[n - 1] + 80};
    r->nsegments = 1;
  }
  r->timings = (steno_timings){1, 2, 3};
  return r;
}

static void test_append(void) {
  steno_result *all;
  CHECK_OK(result_empty(0, &all));
  const int64_t a[] = {0, 500, 900}, b[] = {100, 300};
  CHECK_OK(result_append(all, result_of("one two", a, 3, 20.0), 0));
  CHECK_OK(result_append(all, result_of("", NULL, 0, 10.0), 20000));
  CHECK_OK(result_append(all, result_of("three", b, 2, 15.5), 30000));
  CHECK(!strcmp(steno_result_text(all), "one two three"), "text '%s'", steno_result_text(all));
  CHECK(steno_result_token_count(all) == 5 && steno_result_word_count(all) == 5, "counts");
  const int64_t want[] = {0, 500, 900, 30100, 30300};
  for (size_t i = 0; i < 5; i++) {
    steno_token t = steno_result_token(all, i);
    steno_word w = steno_result_word(all, i);
    CHECK(t.start_ms == want[i] && t.end_ms == want[i] + 80 && w.start_ms == want[i], "token %zu at %lld",
          i, (long long)t.start_ms);
  }
  CHECK(steno_result_segment_count(all) == 2 && steno_result_segment(all, 1).start_ms == 30100 &&
            !strcmp(steno_result_segment(all, 1).text, "three"),
        "segments");
  CHECK(fabs(steno_result_duration(all) - 45.5) < 1e-9, "duration %g", steno_result_duration(all));
  steno_timings t = steno_result_timings(all);
  CHECK(t.features_ms == 3 && t.encoder_ms == 6 && t.decoder_ms == 9, "timings add up");
  steno_result_free(all);
}

int main(void) {
  CHECK_OK(pool_new(3, &lent));
  test_band_chunks();
  test_cut();
  test_splitter();
  test_gate();
  test_periodicity();
  test_gate_room();
  test_gate_recording();
  test_append();
  pool_free(lent);
  return check_done();
}
