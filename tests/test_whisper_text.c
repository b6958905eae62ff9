/* Whisper's text layer and search rules on their own: byte-level BPE encoding
 * of awkward texts against transformers' tokenizer ids (in the fixture),
 * decoding back to the same text, lossy UTF-8 as Python decodes it, and the
 * timestamp rules, segments and compression ratio on hand-made inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "plain_scans.h"
#include "decode/whisper.h"
#include "io/gguf.h"
#include "steno.h"
#include "text/bpe.h"

/* The model file's tokenizer. */
static int load_bpe(const gguf_file *f, bpe *b) {
  const gguf_kv *t = gguf_find(f, "tokenizer.ggml.tokens"), *m = gguf_find(f, "tokenizer.ggml.merges");
  if (!t || !m) return -1;
  size_t n = t->n + m->n;
  const char **s = malloc(n * sizeof *s);
  size_t *len = malloc(n * sizeof *len);
  for (size_t i = 0; i < t->n; i++) s[i] = t->v.str[i].s, len[i] = t->v.str[i].len;
  for (size_t i = 0; i < m->n; i++) s[t->n + i] = m->v.str[i].s, len[t->n + i] = m->v.str[i].len;
  int st = bpe_init(b, (int)t->n, s, len, false, false, m->n, s + t->n, len + t->n);
  free(s);
  free(len);
  return st;
}

static void encode_texts(const bpe *b, const gguf_file *ref) {
  const gguf_kv *texts = gguf_find(ref, "ref.bpe.texts"), *counts = gguf_find(ref, "ref.bpe.counts"),
                *ids = gguf_find(ref, "ref.bpe.ids");
  CHECK(texts && counts && ids && texts->n == counts->n, "reference BPE texts");
  if (!texts || !counts || !ids) return;
  size_t at = 0;
  for (size_t i = 0; i < texts->n; i++) {
    const char *text = texts->v.str[i].s;
    int *got = NULL;
    size_t n = 0, want = (size_t)counts->v.i32[i];
    CHECK_OK(bpe_encode(b, text, &got, &n));
    bool same = n == want && at + want <= ids->n && !memcmp(got, ids->v.i32 + at, n * sizeof *got);
    CHECK(same, "encoding '%s': %zu ids, transformers %zu (or they differ)", text, n, want);
    char *back = NULL;
    CHECK_OK(bpe_decode(b, got, n, &back));
    CHECK(back && !strcmp(back, text), "decoding '%s' gives '%s'", text, back ? back : "");
    free(back);
    free(got);
    at += want;
  }
}

/* Python's bytes.decode("utf-8", "replace") of each input. */
static void lossy(void) {
  static const struct {
    const char *in, *want;
  } cases[] = {
      {"\xe6\x97", "\xef\xbf\xbd"},
      {"\xf0\x9f\x98" "A", "\xef\xbf\xbd" "A"},
      {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xe0\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"a\xff" "b", "a\xef\xbf\xbd" "b"},
      {"\xc3\xa9\xe2\x82", "\xc3\xa9\xef\xbf\xbd"},
      {"\xf0\x9f\x99\x82", "\xf0\x9f\x99\x82"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *out = NULL;
    CHECK_OK(utf8_lossy(cases[i].in, strlen(cases[i].in), &out));
    CHECK(out && !strcmp(out, cases[i].want), "lossy case %zu", i);
    free(out);
  }
}

/* A toy vocabulary: text 0..9, end of text 10, notimestamps 11, timestamps 12..21. */
enum { V = 22, EOT = 10, NOTS = 11, TS = 12 };

static wsearch toy(void) {
  static const int32_t sup[] = {3}, begin[] = {EOT};
  return (wsearch){.vocab = V, .eot = EOT, .no_timestamps = NOTS, .suppress = sup, .n_suppress = 1,
                   .begin_suppress = begin, .n_begin_suppress = 1, .max_initial = 2, .timestamps = 1};
}

static bool allowed(const float *x, int from, int to) {
  for (int i = from; i < to; i++)
    if (x[i] == -INFINITY) return false;
  return true;
}

static bool banned(const float *x, int from, int to) {
  for (int i = from; i < to; i++)
    if (x[i] != -INFINITY) return false;
  return true;
}

static void rules(void) {
  wsearch s = toy();
  float x[V];
  /* First step: only timestamps up to max_initial; end of text suppressed. */
  for (int i = 0; i < V; i++) x[i] = 0;
  wsearch_process(&s, NULL, 0, x);
  CHECK(banned(x, 0, TS) && allowed(x, TS, TS + 3) && banned(x, TS + 3, V), "first step");
  /* After one timestamp: text (not the suppressed id 3) or end, no timestamp. */
  int g1[] = {TS + 1};
  for (int i = 0; i < V; i++) x[i] = i < EOT ? 5.0f : 0;
  wsearch_process(&s, g1, 1, x);
  CHECK(banned(x, TS, V) && x[3] == -INFINITY && allowed(x, 0, 3) && allowed(x, EOT, EOT + 1), "after one");
  /* After text then a timestamp (an open pair): its closing timestamp (≥ it) or the end. */
  int g2[] = {TS + 1, 4, TS + 5};
  for (int i = 0; i < V; i++) x[i] = i == EOT ? 5.0f : 1.0f; /* the end likelier than the timestamps */
  wsearch_process(&s, g2, 3, x);
  CHECK(banned(x, 0, EOT) && allowed(x, EOT, EOT + 1) && banned(x, TS, TS + 5) && allowed(x, TS + 5, V),
        "open pair");
  /* After a closed pair: no timestamp at all. */
  int g3[] = {TS + 1, 4, TS + 5, TS + 5};
  for (int i = 0; i < V; i++) x[i] = 1;
  wsearch_process(&s, g3, 4, x);
  CHECK(banned(x, TS, V) && allowed(x, 0, 3), "closed pair");
  /* After text: timestamps from the last one + 1; forced when likelier than any text. */
  int g4[] = {TS + 1, 4, 5};
  for (int i = 0; i < V; i++) x[i] = i >= TS ? 2.0f : 2.5f;
  wsearch_process(&s, g4, 3, x);
  CHECK(banned(x, 0, TS) && banned(x, TS, TS + 2) && allowed(x, TS + 2, V), "timestamps forced");
  for (int i = 0; i < V; i++) x[i] = i >= TS ? -5.0f : 2.5f;
  wsearch_process(&s, g4, 3, x);
  CHECK(allowed(x, 0, 3) && allowed(x, TS + 2, V), "text stays when likelier");
}

static void segments(void) {
  wsearch s = toy();
  wseg *g = NULL;
  size_t n = 0;
  uint32_t adv = 0;
  /* <1> a b <4><4> c <7><7> d: two closed segments, the tail re-decoded from <7>. */
  int t1[] = {TS + 1, 0, 1, TS + 4, TS + 4, 2, TS + 7, TS + 7, 5};
  CHECK_OK(wsearch_segments(&s, t1, 9, 3000, &g, &n, &adv));
  CHECK(n == 2 && g[0].first == 0 && g[0].end == 4 && g[0].t0_ms == 20 && g[0].t1_ms == 80 &&
        g[1].first == 4 && g[1].end == 8 && g[1].t0_ms == 80 && g[1].t1_ms == 140 && adv == 14,
        "double ending: %zu segments, advance %u", n, adv);
  free(g);
  /* <1> a <3><3> b <5>: a single timestamp at the end: the whole window is done. */
  int t2[] = {TS + 1, 0, TS + 3, TS + 3, 1, TS + 5};
  CHECK_OK(wsearch_segments(&s, t2, 6, 2500, &g, &n, &adv));
  CHECK(n == 2 && g[1].first == 3 && g[1].end == 6 && g[1].t1_ms == 100 && adv == 2500,
        "single ending: %zu segments, advance %u", n, adv);
  free(g);
  /* <2> a b: no pair: one segment to the last timestamp, the whole window. */
  int t3[] = {TS + 2, 0, 1};
  CHECK_OK(wsearch_segments(&s, t3, 3, 1234, &g, &n, &adv));
  CHECK(n == 1 && g[0].t0_ms == 0 && g[0].t1_ms == 40 && adv == 1234, "no pair");
  free(g);
  int t4[] = {TS, 0};
  CHECK_OK(wsearch_segments(&s, t4, 2, 1235, &g, &n, &adv));
  CHECK(n == 1 && g[0].t1_ms == 617 * 20, "no pair at <|0.00|>: to the window's end");
  free(g);
}

static void ratio(void) {
  /* transformers: len(bytes) / len(zlib.compress(bytes)) of 2-byte ids. */
  int same[64], mixed[8] = {1, 500, 7, 1000, 3, 42, 1500, 9};
  for (int i = 0; i < 64; i++) same[i] = 77;
  CHECK(wsearch_compression_ratio(same, 64, 51865) > 5, "a repeated id compresses well");
  double r = wsearch_compression_ratio(mixed, 8, 51865);
  CHECK(r > 0.5 && r < 1.0, "8 distinct ids do not compress (ratio %g)", r);
  float x[4] = {0, 1, 2, 3};
  uint64_t rng = 1;
  double lp;
  CHECK(wsearch_pick(x, 4, 0, &rng, &lp) == 3 && fabs(lp - (3 - log(exp(0) + exp(1) + exp(2) + exp(3)))) < 1e-9,
        "argmax and its log-probability");
}

/* ---- the search's scans against plain C loops (support/plain_scans.c) ---- */

/* Logits of case c: random spreads, ties at the top, ±0 and NaN mixed in,
 * whole runs of −∞; the timestamps near the text's best in odd cases. */
static void make_logits(float *x, int n, int tb, int c, uint32_t *s) {
  for (int i = 0; i < n; i++) {
    *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
    float v = (float)(*s % 4001) / 200.0f - 10.0f;
    if (c % 3 == 1) v = (float)(*s % 5); /* many ties */
    if (c % 5 == 2 && *s % 7 == 0) v = *s % 2 ? 0.0f : -0.0f;
    if (c % 4 == 3 && *s % 101 == 0) v = NAN;
    if (c % 6 == 5 && i < n / 2) v = -INFINITY;
    x[i] = v;
  }
  if (c % 2 && tb < n) /* timestamps as likely as the best text: both rule outcomes occur */
    for (int i = tb; i < n; i++) x[i] -= (float)(c % 7) + logf((float)(n - tb));
  if (c % 9 == 4) x[0] = NAN;
}

static void exact_scans(void) {
  enum { TV = 51866, TEOT = 50257, TNOTS = 50364 };
  static float x[TV], y[TV], want[TV];
  int32_t sup[3] = {5, 220, 50000};
  int vocabs[] = {1, 2, 7, 8, 9, 17, 1000, TV};
  uint32_t s = 12345;
  int bad = 0, forced = 0, cases = 0;
  for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++)
    for (int c = 0; c < 40; c++, cases++) {
      int n = vocabs[vi];
      make_logits(x, n, n / 2, c, &s);
      int id = wsearch_choose(x, n, 0, NULL);
      double lp = wsearch_logprob(x, n, id), rlp = (double)x[id] - plain_logsumexp(x, 0, n);
      bad += id != plain_argmax(x, n) || memcmp(&lp, &rlp, sizeof lp);
    }
  /* The timestamp rule at turbo's vocabulary after text: masks as the plain loops decide. */
  wsearch w = {.vocab = TV, .eot = TEOT, .no_timestamps = TNOTS, .suppress = sup, .n_suppress = 3,
               .max_initial = 50, .timestamps = 1};
  int gen[3] = {TNOTS + 1, 400, 401};
  for (int c = 0; c < 40; c++, cases++) {
    make_logits(x, TV, TNOTS + 1, c, &s);
    memcpy(y, x, sizeof x);
    wsearch_process(&w, gen, 3, y);
    memcpy(want, x, sizeof x);
    for (int i = 0; i < 3; i++) want[sup[i]] = -INFINITY;
    want[TNOTS] = want[TNOTS + 1] = -INFINITY;
    float text = -INFINITY;
    for (int i = 0; i <= TNOTS; i++) text = fmaxf(text, want[i]);
    if (plain_logsumexp(want, TNOTS + 1, TV) > text) {
      forced++;
      for (int i = 0; i <= TNOTS; i++) want[i] = -INFINITY;
    }
    bad += memcmp(y, want, sizeof y) != 0;
  }
  CHECK(bad == 0, "argmax, log-softmax and the timestamp rule: %d of %d cases differ from the plain loops", bad, cases);
  CHECK(forced > 0 && forced < 40, "the timestamp rule forced %d of 40 cases (both outcomes wanted)", forced);
}

int main(void) {
  const char *dir = getenv("STENO_SOURCE_DIR");
  char path[512], refpath[512];
  snprintf(path, sizeof path, "%s/tests/fixtures/whisper_tiny_ml.gguf", dir ? dir : ".");
  snprintf(refpath, sizeof refpath, "%s/tests/fixtures/whisper_tiny_ml.ref.gguf", dir ? dir : ".");
  gguf_file *f = NULL, *ref = NULL;
  CHECK_OK(gguf_open(&f, path));
  CHECK_OK(gguf_open(&ref, refpath));
  bpe b;
  if (f && ref) {
    CHECK_OK(load_bpe(f, &b));
    encode_texts(&b, ref);
    bpe_free(&b);
  }
  lossy();
  rules();
  segments();
  ratio();
  exact_scans();
  gguf_close(f);
  gguf_close(ref);
  return check_done();
}
