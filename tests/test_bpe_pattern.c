/* Byte-level BPE encoding with a file's own pre-tokenizer pattern (Nemotron-H's
 * tokenizer.json Split, read by Nemotron 3.5 Transcribe for --prompt), on a
 * hand-made vocabulary whose merges cross the pieces of one pattern and not of
 * the other: digits one by one and case runs apart (the file's pattern) vs
 * GPT-2's runs; text that no match covers kept as a piece (tokenizers'
 * Isolated split); tokenizers' ignore_merges; merges copied at init (a model
 * file is closed after load); bad patterns refused. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "text/bpe.h"

/* The Split pattern of Nemotron-H's tokenizer.json (as the converter writes it). */
static const char NEMOTRON_SPLIT[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char *const TOKENS[] = {"1", "2", "12", "b", "A", "bA", "x", "y", "z", "xyz", "a", "\xc4\xa0"};
#define N_TOKENS (int)(sizeof TOKENS / sizeof *TOKENS)

/* The vocabulary with merges "1 2" and "b A", from a buffer overwritten after
 * init: the encoder must hold its own copy. */
static int make(bpe *b) {
  size_t len[N_TOKENS], mlen[2] = {3, 3};
  for (int i = 0; i < N_TOKENS; i++) len[i] = strlen(TOKENS[i]);
  char *buf = malloc(8);
  if (!buf) return -1;
  memcpy(buf, "1 2\0b A", 8);
  const char *merges[2] = {buf, buf + 4};
  int st = bpe_init(b, N_TOKENS, TOKENS, len, false, false, 2, merges, mlen);
  memset(buf, 'q', 8);
  free(buf);
  return st;
}

/* text encodes to the tokens named in `want` (space separated symbols). */
static void expect(const bpe *b, const char *text, const char *want, const char *what) {
  int *ids = NULL, w[16];
  size_t n = 0, k = 0;
  char copy[64];
  snprintf(copy, sizeof copy, "%s", want);
  for (char *t = strtok(copy, " "); t && k < 16; t = strtok(NULL, " ")) w[k++] = bpe_find(b, t);
  CHECK_OK(bpe_encode(b, text, &ids, &n));
  bool same = ids && n == k;
  for (size_t i = 0; same && i < n; i++) same = ids[i] == w[i];
  CHECK(same, "%s: '%s' gives %zu ids (first %d), want %zu: %s", what, text, n, n ? ids[0] : -1, k,
        want);
  free(ids);
}

static void fails(bpe *b, const char *pattern, const char *text, const char *why) {
  int st = bpe_set_pattern(b, pattern);
  if (!st) {
    int *ids = NULL;
    size_t n = 0;
    st = bpe_encode(b, text, &ids, &n);
    free(ids);
  }
  CHECK(st == STENO_ERR_FORMAT, "pattern '%s' on '%s': status %d", pattern, text, st);
  CHECK(strstr(steno_last_error(), why) != NULL, "message '%s' does not say '%s'",
        steno_last_error(), why);
}

int main(void) {
  bpe b;
  CHECK_OK(make(&b));
  expect(&b, "12", "12", "GPT-2 pattern: a digit run is one piece");
  expect(&b, "bA", "bA", "GPT-2 pattern: letters are one piece");
  CHECK_OK(bpe_set_pattern(&b, NEMOTRON_SPLIT));
  expect(&b, "12", "1 2", "file pattern: digits one by one");
  expect(&b, "bA", "b A", "file pattern: a capital starts a piece");
  expect(&b, "bA 12", "b A \xc4\xa0 1 2", "file pattern: a mixed text");
  CHECK_OK(bpe_set_pattern(&b, "a"));
  expect(&b, "xay", "x a y", "text between matches");
  expect(&b, "xyz", "x y z", "no match at all");
  b.ignore_merges = true;
  expect(&b, "xyz", "xyz", "ignore_merges: a whole token");
  fails(&b, "(", "12", "pattern");
  expect(&b, "xay", "x a y", "the pattern before a refused one");
  fails(&b, "x*", "ab", "empty");
  bpe_free(&b);
  return check_done();
}
