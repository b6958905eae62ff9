/* libFuzzer target for the prompt encoder (text/bpe.c, what --prompt goes
 * through): the first byte picks a vocabulary, the rest is the text. Text
 * either encodes or is refused with a message, and what encodes decodes back
 * to the same bytes. The two vocabularies are built once: every single byte
 * plus a few merged words, with GPT-2 style merges (Whisper's GGUF files) or
 * ranked by id (tiktoken, whisper.cpp's .bin files). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/bpe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Words after the 256 bytes, each the join of a merge below (in byte-unicode
 * form, where U+0120 "Ġ" is a space). */
static const char *const words[] = {"th", "he", "in", " t", "er", "an", " a", "the", "ing", " the",
                                    "\xc3\xa9", "\xc3\xa9t", " \xc3\xa9"};
static const char *const merges[] = {"t h", "h e", "i n", "\xc4\xa0 t", "e r", "a n", "\xc4\xa0 a",
                                     "th e", "in g", "\xc4\xa0t he", "\xc3\x83 \xc2\xa9", "\xc3\x83\xc2\xa9 t",
                                     "\xc4\xa0 \xc3\x83\xc2\xa9"};
enum { n_words = sizeof words / sizeof *words, n_tokens = 256 + n_words };

static void build(bpe *b, int by_id) {
  static char bytes[256];
  const char *tok[n_tokens];
  size_t len[n_tokens], mlen[n_words];
  for (int i = 0; i < 256; i++) bytes[i] = (char)i, tok[i] = &bytes[i], len[i] = 1;
  for (int i = 0; i < n_words; i++) tok[256 + i] = words[i], len[256 + i] = strlen(words[i]);
  for (int i = 0; i < n_words; i++) mlen[i] = strlen(merges[i]);
  if (bpe_init(b, n_tokens, tok, len, true, by_id, by_id ? 0 : n_words, merges, mlen)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bpe vocab[2];
  static int ready;
  if (!ready) build(&vocab[0], 0), build(&vocab[1], 1), ready = 1;
  if (!size) return 0;
  const bpe *b = &vocab[data[0] & 1];
  char *text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = 0;
  int *ids;
  size_t n;
  char *back = NULL;
  if (bpe_encode(b, text, &ids, &n)) {
    if (!err_message()[0]) abort();
  } else {
    if (bpe_decode(b, ids, n, &back) || strcmp(back, text)) abort(); /* not the text again */
    free(ids);
    free(back);
  }
  free(text);
  return 0;
}
