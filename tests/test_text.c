/* CTC greedy rules and the text layer: pieces → text, token times, words. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decode/ctc.h"
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

int main(void) {
  ctc();
  text();
  return check_done();
}
