/* Byte-level BPE (GPT-2, Whisper): token strings in GPT-2's byte-to-unicode
 * form ("Ġthe" is " the"), merges "a b" by rank. Decoding maps each token back
 * to its bytes; encoding (for prompts) splits text with GPT-2's pre-tokenizer
 * regex (or a file's own: bpe_set_pattern) and merges the lowest-ranked
 * adjacent pair first, the leftmost on a tie, as transformers' WhisperTokenizer
 * does with add_special_tokens=False. */
#ifndef STENO_TEXT_BPE_H
#define STENO_TEXT_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bpe_map bpe_map;

typedef struct {
  int n;
  char **bytes;      /* each token's raw bytes (NUL-terminated; may hold NULs) */
  uint32_t *len;
  char **sym;        /* each token in byte-unicode form */
  bpe_map *ids;      /* byte-unicode token → id */
  bpe_map *ranks;    /* "a b" → merge rank (keys in `merges`) */
  char *merges;      /* the merges' text, copied: a model file is closed after load */
  bool rank_by_id;   /* no merges, raw tokens (tiktoken): a pair's rank is its join's id */
  void *re;          /* the compiled pre-tokenizer (pcre2_code) */
  bool ignore_merges; /* a pre-token that is a whole token is taken as it is (tokenizers' flag) */
} bpe;

/* n tokens (len[i] bytes each), in byte-unicode form, or as raw bytes when
 * `raw` (whisper.cpp's .bin vocabularies); n_merges merges. With
 * `ranks_are_ids` (and no merges) text encodes as tiktoken does: a pair's rank
 * is the id of its join, OpenAI's vocabularies being ordered so. Neither:
 * decoding only. */
int bpe_init(bpe *b, int n, const char *const *tokens, const size_t *len, bool raw,
             bool ranks_are_ids, size_t n_merges, const char *const *merges,
             const size_t *merge_len);
void bpe_free(bpe *b);

/* The id of a token given in byte-unicode form (specials like "<|en|>"), or -1. */
int bpe_find(const bpe *b, const char *sym);

/* The bytes of ids[0..n) as valid UTF-8: each maximal ill-formed subsequence
 * becomes U+FFFD, as Python's and Rust's lossy decoding do. *out is malloc'd. */
int bpe_decode(const bpe *b, const int *ids, size_t n, char **out);

/* Splits text for encoding with `pattern` (PCRE2, UTF and Unicode properties)
 * instead of GPT-2's: a tokenizers "Split" pre-tokenizer with behavior
 * Isolated, each match and each stretch between matches a pre-token. */
int bpe_set_pattern(bpe *b, const char *pattern);

/* Token ids of UTF-8 `text` (malloc'd *ids, *n of them). */
int bpe_encode(const bpe *b, const char *text, int **ids, size_t *n);

/* Lossy UTF-8 of n bytes, as bpe_decode (exposed for tests). */
int utf8_lossy(const char *in, size_t n, char **out);

/* Lossy UTF-8 of n bytes fit for a terminal: also each control character
 * becomes a space (tab, newline, CR, VT, FF) or U+FFFD (the other C0 controls
 * with ESC and BEL, DEL, and the C1 controls U+0080–U+009F). *out is malloc'd. */
int utf8_printable(const char *in, size_t n, char **out);

#endif
