/* CTC greedy rules and the text layer: pieces → text, token times, words. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decode/ctc.h"
#include "gguf_write.h"
#include "text/bpe.h"
#include "text/result.h"

static void ctc(void) {
  /* 4 classes, blank = 3. Frames: 1 1 blank 1 2(tie with 0 → 0) 2 blank */
  float logits[][4] = {{0, 5, 0, 1}, {0, 4, 0, 1}, {0, 0, 0, 9}, {0, 3, 0, 1},
                       {7, 0, 7, 1}, {0, 0, 6, 1}, {0, 0, 0, 2}};
  dec_tokens t = {0};
  CHECK_OK(ctc_greedy(&logits[0][0], 7, 4, 4, &t));
  int want_id[] = {1, 1, 0, 2}, want_frame[] = {0, 3, 4, 5};
  CHECK(t.n == 4, "%zu tokens", t.n);
  for (size_t i = 0; i < t.n && i < 4; i++)
    CHECK(t.v[i].id == want_id[i] && t.v[i].frame == want_frame[i] && t.v[i].frames == 1,
          "token %zu: id %d frame %d", i, t.v[i].id, t.v[i].frame);
  CHECK(t.v[0].p > 0.9f && t.v[0].p <= 1.0f, "p %g", t.v[0].p);
  dec_free(&t);
}

static void text(void) {
  const char *pieces[] = {"<unk>", "\xe2\x96\x81he", "llo", "\xe2\x96\x81world", "<0x21>", "<en-US>",
                          "\xe2\x96\x81", "<blank>"};
  int types[] = {TOK_UNKNOWN, TOK_NORMAL, TOK_NORMAL, TOK_NORMAL, TOK_BYTE, TOK_NORMAL, TOK_NORMAL,
                 TOK_CONTROL};
  text_vocab v;
  CHECK_OK(vocab_init(&v, 8));
  for (int i = 0; i < 8; i++) CHECK_OK(vocab_set(&v, i, pieces[i], strlen(pieces[i]), types[i]));
  CHECK(vocab_hidden(&v, 5) && vocab_hidden(&v, 7) && !vocab_hidden(&v, 1), "hidden tokens");
  dec_tokens t = {0};
  dec_token seq[] = {{1, 2, 1, 0.9f}, {2, 3, 2, 0.8f}, {5, 5, 0, 1}, {6, 6, 1, 1}, {3, 7, 2, 0.7f},
                     {4, 9, 0, 0.6f}, {7, 10, 1, 1}};
  for (int i = 0; i < 7; i++) CHECK_OK(dec_push(&t, seq[i]));
  steno_result *r;
  CHECK_OK(result_from_tokens(&v, &t, 80.0, 1000.0, 2.0, &r));
  CHECK(!strcmp(steno_result_text(r), "hello world!"), "text '%s'", steno_result_text(r));
  CHECK(steno_result_token_count(r) == 5, "%zu tokens", steno_result_token_count(r));
  steno_token t1 = steno_result_token(r, 1);
  CHECK(t1.start_ms == 1240 && t1.end_ms == 1400 && !strcmp(t1.text, "llo"), "token 1: %lld-%lld %s",
        (long long)t1.start_ms, (long long)t1.end_ms, t1.text);
  steno_token t4 = steno_result_token(r, 4);
  CHECK(t4.start_ms == 1720 && t4.end_ms == 1720 && !strcmp(t4.text, "!"), "byte token");
  /* Words: "hello" (2 tokens), "" (the lone ▁ is its own word), "world!" */
  CHECK(steno_result_word_count(r) == 3, "%zu words", steno_result_word_count(r));
  steno_word w0 = steno_result_word(r, 0), w2 = steno_result_word(r, 2);
  CHECK(!strcmp(w0.text, "hello") && w0.start_ms == 1160 && w0.end_ms == 1400 && w0.p == 0.8f,
        "word 0: '%s' %lld-%lld", w0.text, (long long)w0.start_ms, (long long)w0.end_ms);
  CHECK(!strcmp(w2.text, "world!") && w2.start_ms == 1560 && w2.end_ms == 1720 && w2.p == 0.6f,
        "word 2: '%s'", w2.text);
  CHECK(steno_result_segment_count(r) == 1, "segments");
  steno_segment s = steno_result_segment(r, 0);
  CHECK(s.start_ms == 1160 && s.end_ms == 1720 && !strcmp(s.text, "hello world!"), "segment");
  steno_result_free(r);
  dec_free(&t);
  /* No tokens: empty text, no segment. */
  CHECK_OK(result_from_tokens(&v, &t, 80.0, 0, 1.0, &r));
  CHECK(!strcmp(steno_result_text(r), "") && steno_result_segment_count(r) == 0, "empty");
  steno_result_free(r);
  vocab_free(&v);
}

/* Pieces a hostile or broken vocabulary may hold: escape sequences, BEL, bytes
 * that are not UTF-8 (0xFF 0xFE; a lone continuation byte; a sequence cut short). */
static const char *const hostile[] = {"\xe2\x96\x81\x1b[31mred", "\x07", "\xff\xfe", "\x80",
                                      "\xe2\x96\x81\xe6\x9c"};

/* Whether s is valid UTF-8 with no control character (what steno.h promises). */
static bool printable_utf8(const char *s) {
  char *lossy;
  if (utf8_lossy(s, strlen(s), &lossy)) return false;
  bool same = !strcmp(lossy, s);
  free(lossy);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p < 0x20 || *p == 0x7F || (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F)) return false;
  return same;
}

static void printable(void) {
#define FFFD "\xef\xbf\xbd"
  static const char *const cases[][2] = {
      {"\x1b[31mred\x1b[0m", FFFD "[31mred" FFFD "[0m"}, {"a\x07" "b", "a" FFFD "b"},
      {"\xff\xfe", FFFD FFFD}, {"x\x80y", "x" FFFD "y"}, {"tab\there\nnl\r", "tab here nl "},
      {"del\x7f", "del" FFFD}, {"csi\xc2\x9b" "1m", "csi" FFFD "1m"}, {"\xe6\x9c", FFFD},
      {"caf\xc3\xa9 \xe6\x9c\xac\xc2\xa0\xf0\x9f\x98\x80", "caf\xc3\xa9 \xe6\x9c\xac\xc2\xa0\xf0\x9f\x98\x80"},
      {"\xed\xa0\x80", FFFD FFFD FFFD}, /* a surrogate: not UTF-8 */
  };
#undef FFFD
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *out = NULL;
    CHECK_OK(utf8_printable(cases[i][0], strlen(cases[i][0]), &out));
    CHECK(out && !strcmp(out, cases[i][1]), "case %zu: '%s'", i, out ? out : "(null)");
    free(out);
  }
  /* A result built from such pieces is printable once appended (as every piece is). */
  text_vocab v;
  int n = (int)(sizeof hostile / sizeof *hostile);
  CHECK_OK(vocab_init(&v, n));
  dec_tokens t = {0};
  for (int i = 0; i < n; i++) {
    CHECK_OK(vocab_set(&v, i, hostile[i], strlen(hostile[i]), TOK_NORMAL));
    CHECK_OK(dec_push(&t, (dec_token){i, i, 1, 1}));
  }
  steno_result *all, *r;
  CHECK_OK(result_empty(0, &all));
  CHECK_OK(result_from_tokens(&v, &t, 80.0, 0, 1.0, &r));
  CHECK_OK(result_append(all, r, 0));
  CHECK(printable_utf8(steno_result_text(all)), "text '%s'", steno_result_text(all));
  CHECK(steno_result_token_count(all) == (size_t)n && steno_result_segment_count(all) == 1, "counts");
  for (size_t i = 0; i < steno_result_token_count(all); i++)
    CHECK(printable_utf8(steno_result_token(all, i).text), "token %zu", i);
  for (size_t i = 0; i < steno_result_word_count(all); i++)
    CHECK(printable_utf8(steno_result_word(all, i).text), "word %zu", i);
  CHECK(printable_utf8(steno_result_segment(all, 0).text), "segment");
  steno_result_free(all);
  dec_free(&t);
  vocab_free(&v);
}

/* Segments of words "w0 w1 ..." (one token each, 80 ms frames): word i at frame
 * at[i], 3 frames long; `dot` ends word d with a full stop. */
static steno_result *words_at(const int *at, int n, int dot) {
  text_vocab v;
  CHECK_OK(vocab_init(&v, 2));
  CHECK_OK(vocab_set(&v, 0, "\xe2\x96\x81w", 4, TOK_NORMAL));
  CHECK_OK(vocab_set(&v, 1, "\xe2\x96\x81w.", 5, TOK_NORMAL));
  dec_tokens t = {0};
  for (int i = 0; i < n; i++) CHECK_OK(dec_push(&t, (dec_token){i == dot, at[i], 3, 1}));
  steno_result *r = NULL;
  CHECK_OK(result_from_tokens(&v, &t, 80.0, 0, at[n - 1] * 0.08 + 1, &r));
  dec_free(&t);
  vocab_free(&v);
  return r;
}

/* Segments cover the words in order, each within SEGMENT_MAX_MS (30 s). */
static void check_segments(const steno_result *r, const char *what) {
  size_t words = 0;
  for (size_t i = 0; i < steno_result_segment_count(r); i++) {
    steno_segment g = steno_result_segment(r, i);
    CHECK(g.end_ms - g.start_ms <= 30000, "%s: segment %zu spans %lld ms", what, i,
          (long long)(g.end_ms - g.start_ms));
    for (const char *p = g.text; *p; p++) words += *p == 'w';
  }
  CHECK(words == steno_result_word_count(r), "%s: %zu words in segments of %zu", what, words,
        steno_result_word_count(r));
}

static void segments(void) {
  enum { N = 280 };
  int at[N];
  /* 70 s of words 0.25 s apart (no pause, no punctuation): 3 or 4 segments of ≤ 30 s. */
  for (int i = 0; i < N; i++) at[i] = i * 25 / 8;
  steno_result *r = words_at(at, N, -1);
  check_segments(r, "70 s without a pause");
  CHECK(steno_result_segment_count(r) >= 3 && steno_result_segment_count(r) <= 4, "%zu segments",
        steno_result_segment_count(r));
  steno_result_free(r);
  /* The same with one longer gap (0.5 s, under the pause) at 40 s: the cut is there. */
  for (int i = 160; i < N; i++) at[i] += 3;
  r = words_at(at, N, -1);
  check_segments(r, "70 s, a gap at 40 s");
  CHECK(steno_result_segment_count(r) >= 3 && steno_result_segment(r, 1).end_ms == at[159] * 80 + 240,
        "segment 1 ends at the gap: %lld", (long long)steno_result_segment(r, 1).end_ms);
  steno_result_free(r);
  /* A full stop ends a segment; so does a pause of 0.8 s; not one of 0.64 s. */
  int few[] = {0, 5, 10, 15, 28, 33, 44};
  r = words_at(few, 7, 1);
  check_segments(r, "a sentence and a pause");
  steno_segment g0 = steno_result_segment(r, 0), g1 = steno_result_segment(r, 1), g2 = steno_result_segment(r, 2);
  CHECK(steno_result_segment_count(r) == 3 && !strcmp(g0.text, "w w.") && !strcmp(g1.text, "w w") &&
            !strcmp(g2.text, "w w w") && g1.start_ms == 800 && g2.start_ms == 28 * 80,
        "%zu segments", steno_result_segment_count(r));
  steno_result_free(r);
}

/* The CTC fixture's vocabulary with every ordinary piece one of `hostile`. */
static bool hostile_tokens(gguf_writer *w, const gguf_kv *kv, const void *ctx) {
  (void)ctx;
  if (strcmp(kv->key, "tokenizer.ggml.tokens")) return false;
  const char **v = malloc(kv->n * sizeof *v);
  for (size_t i = 0; i < kv->n; i++)
    v[i] = kv->v.str[i].s[0] == '<' ? kv->v.str[i].s : hostile[i % (sizeof hostile / sizeof *hostile)];
  gw_arr_str(w, kv->key, v, kv->n);
  free(v);
  return true;
}

/* `test_text --write-vocab SRC DST`: SRC with hostile_tokens, for tests/cli_run.sh. */
static int write_vocab(const char *src, const char *dst) {
  gguf_file *f = NULL;
  CHECK_OK(gguf_open(&f, src));
  if (!f) return check_done();
  gw_edit e = {.key = hostile_tokens};
  size_t size;
  uint8_t *bytes = gw_rewrite(f, &e, &size);
  FILE *out = fopen(dst, "wb");
  CHECK(out && fwrite(bytes, 1, size, out) == size, "writing %s", dst);
  CHECK(out && !fclose(out), "closing %s", dst);
  free(bytes);
  gguf_close(f);
  return check_done();
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--write-vocab")) return write_vocab(argv[2], argv[3]);
  ctc();
  text();
  segments();
  printable();
  return check_done();
}
