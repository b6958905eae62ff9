/* A model's vocabulary: SentencePiece pieces (with "▁" for a space and
 * <0xNN> byte pieces) and their token types, as the GGUF tokenizer keys hold them. */
#ifndef STENO_TEXT_VOCAB_H
#define STENO_TEXT_VOCAB_H

#include <stdbool.h>
#include <stddef.h>

/* Token types (llama.cpp's numbering, as tokenizer.ggml.token_type stores them). */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5, TOK_BYTE = 6 };

typedef struct {
  int n;
  char **piece; /* NUL-terminated copies */
  int *type;
} text_vocab;

int vocab_init(text_vocab *v, int n);
int vocab_set(text_vocab *v, int id, const char *piece, size_t len, int type);
void vocab_free(text_vocab *v);

/* Whether id is dropped from text: a control token, or a language tag <ll-RR>. */
bool vocab_hidden(const text_vocab *v, int id);

/* Whether the raw piece starts a word (begins with "▁"). */
bool vocab_starts_word(const text_vocab *v, int id);

/* Appends id's text to buf (len bytes used of cap): "▁" → " ", byte pieces →
 * their byte. Returns the new length, or cap + 1 if it did not fit. */
size_t vocab_append(const text_vocab *v, int id, char *buf, size_t len, size_t cap);

#endif
