#include "text/vocab.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"

static const char space_mark[] = "\xe2\x96\x81"; /* U+2581 ▁ */

int vocab_init(text_vocab *v, int n) {
  memset(v, 0, sizeof *v);
  if (n < 0) return err_set(STENO_ERR_INVALID, "vocabulary of %d pieces", n);
  v->piece = mem_alloc((size_t)n + 1, sizeof *v->piece);
  v->type = mem_alloc((size_t)n + 1, sizeof *v->type);
  if (!v->piece || !v->type) {
    vocab_free(v);
    return STENO_ERR_NOMEM;
  }
  v->n = n;
  return 0;
}

int vocab_set(text_vocab *v, int id, const char *piece, size_t len, int type) {
  if (id < 0 || id >= v->n) return err_set(STENO_ERR_INVALID, "vocab id %d of %d", id, v->n);
  char *s = mem_alloc(len + 1, 1);
  if (!s) return STENO_ERR_NOMEM;
  memcpy(s, piece, len);
  free(v->piece[id]);
  v->piece[id] = s;
  v->type[id] = type;
  return 0;
}

void vocab_free(text_vocab *v) {
  for (int i = 0; v->piece && i < v->n; i++) free(v->piece[i]);
  free(v->piece);
  free(v->type);
  memset(v, 0, sizeof *v);
}

/* <ll-RR>: 2–3 lowercase letters, '-', 2–4 letters. */
static bool language_tag(const char *s) {
  size_t n = strlen(s), i = 1, a = 0, b = 0;
  if (n < 7 || s[0] != '<' || s[n - 1] != '>') return false;
  while (i < n && islower((unsigned char)s[i])) i++, a++;
  if (a < 2 || a > 3 || s[i] != '-') return false;
  for (i++; i < n - 1 && isalpha((unsigned char)s[i]); i++) b++;
  return i == n - 1 && b >= 2 && b <= 4;
}

bool vocab_hidden(const text_vocab *v, int id) {
  if (id < 0 || id >= v->n || !v->piece[id]) return true;
  return v->type[id] == TOK_CONTROL || language_tag(v->piece[id]);
}

bool vocab_starts_word(const text_vocab *v, int id) {
  return id >= 0 && id < v->n && v->piece[id] && !strncmp(v->piece[id], space_mark, 3);
}

static int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

size_t vocab_append(const text_vocab *v, int id, char *buf, size_t len, size_t cap) {
  if (id < 0 || id >= v->n || !v->piece[id]) return len;
  const char *s = v->piece[id];
  if (v->type[id] == TOK_BYTE && strlen(s) == 6 && !strncmp(s, "<0x", 3) && hex(s[3]) >= 0 &&
      hex(s[4]) >= 0) {
    if (len + 1 > cap) return cap + 1;
    buf[len++] = (char)(hex(s[3]) * 16 + hex(s[4]));
    return len;
  }
  while (*s) {
    if (!strncmp(s, space_mark, 3)) {
      if (len + 1 > cap) return cap + 1;
      buf[len++] = ' ';
      s += 3;
    } else {
      if (len + 1 > cap) return cap + 1;
      buf[len++] = *s++;
    }
  }
  return len;
}
