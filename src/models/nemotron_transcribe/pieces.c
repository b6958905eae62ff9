/* The word timestamp head's vocabulary (the processor's alignment_tokenizer:
 * SentencePiece pieces with "▁" for a space, BPE merges) and its encoding of
 * one word, as the tokenizers library's BPE model does it: characters (or
 * their <0xNN> bytes with byte fallback, else the unknown token) merged by
 * rank, the lowest rank first and the leftmost of equal ranks. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "models/nemotron_transcribe/words.h"

#define KEY "nemotron3_5_transcribe."

static int by_text(const void *a, const void *b) {
  return strcmp(((const nt_piece_ref *)a)->s, ((const nt_piece_ref *)b)->s);
}

/* Copies of n strings of a STRING[] key and their sorted index (value i). */
static int strings(const gguf_kv *kv, char ***out, nt_piece_ref **sorted) {
  size_t n = kv->n;
  *out = mem_alloc(n + 1, sizeof **out);
  *sorted = mem_alloc(n + 1, sizeof **sorted);
  if (!*out || !*sorted) return STENO_ERR_NOMEM;
  for (size_t i = 0; i < n; i++) {
    if (strlen(kv->v.str[i].s) != kv->v.str[i].len)
      return err_set(STENO_ERR_FORMAT, "'%s' holds a NUL", kv->key);
    if (!((*out)[i] = mem_strdup(kv->v.str[i].s))) return STENO_ERR_NOMEM;
    (*sorted)[i] = (nt_piece_ref){(*out)[i], (uint32_t)i};
  }
  qsort(*sorted, n, sizeof **sorted, by_text);
  return 0;
}

static void free_strings(char **s, uint32_t n) {
  for (uint32_t i = 0; s && i < n; i++) free(s[i]);
  free(s);
}

static int dropped(const gguf_file *f, nt_pieces *p) {
  const gguf_kv *kv = NULL;
  TRY(gguf_opt_arr(f, KEY "wts.dropped_tokens", GGUF_VAL_STRING, &kv));
  if (!kv) return 0;
  if (kv->n > 4096) return err_set(STENO_ERR_FORMAT, "%s: %zu dropped tokens", f->name, kv->n);
  p->dropped = mem_alloc(kv->n + 1, sizeof *p->dropped);
  if (!p->dropped) return STENO_ERR_NOMEM;
  for (size_t i = 0; i < kv->n; i++, p->n_dropped++)
    if (!kv->v.str[i].len || strlen(kv->v.str[i].s) != kv->v.str[i].len)
      return err_set(STENO_ERR_FORMAT, "%s: '" KEY "wts.dropped_tokens' holds an empty or NUL "
                     "string", f->name);
    else if (!(p->dropped[i] = mem_strdup(kv->v.str[i].s)))
      return STENO_ERR_NOMEM;
  return 0;
}

static int pieces_keys(const gguf_file *f, nt_pieces *p, uint32_t blank) {
  const gguf_kv *tokens = NULL, *merges = NULL;
  TRY(gguf_opt_arr(f, KEY "wts.tokens", GGUF_VAL_STRING, &tokens));
  TRY(gguf_opt_arr(f, KEY "wts.merges", GGUF_VAL_STRING, &merges));
  if (!tokens || !merges) return 0; /* no word times */
  if (tokens->n < 1 || tokens->n > blank || merges->n > (1u << 22))
    return err_set(STENO_ERR_FORMAT, "%s: %zu alignment pieces and %zu merges for a head of %u "
                   "pieces", f->name, tokens->n, merges->n, blank);
  TRY(strings(tokens, &p->piece, &p->by_piece));
  p->n = (uint32_t)tokens->n;
  for (uint32_t i = 0; i < p->n; i++)
    if (strlen(p->piece[i]) > p->longest) p->longest = strlen(p->piece[i]);
  TRY(strings(merges, &p->merge, &p->by_merge));
  p->n_merges = (uint32_t)merges->n;
  uint32_t unk = UINT32_MAX;
  if (gguf_find(f, KEY "wts.unk_token_id")) TRY(gguf_get_u32(f, KEY "wts.unk_token_id", &unk));
  if (unk != UINT32_MAX && unk >= p->n)
    return err_set(STENO_ERR_FORMAT, "%s: " KEY "wts.unk_token_id %u of %u pieces", f->name, unk,
                   p->n);
  p->unk = unk == UINT32_MAX ? -1 : (int)unk;
  TRY(gguf_opt_bool(f, KEY "wts.byte_fallback", &p->byte_fallback));
  TRY(gguf_opt_bool(f, KEY "wts.fuse_unk", &p->fuse_unk));
  return dropped(f, p);
}

int nt_pieces_load(const gguf_file *f, uint32_t blank, nt_pieces *p) {
  memset(p, 0, sizeof *p);
  p->unk = -1;
  int st = pieces_keys(f, p, blank), code;
  PCRE2_SIZE at;
  if (!st && p->n)
    p->lexical = pcre2_compile((PCRE2_SPTR) "^[\\p{L}\\p{M}\\p{N}]$", PCRE2_ZERO_TERMINATED,
                               PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
  if (!st && p->n && !p->lexical) st = STENO_ERR_NOMEM;
  if (st) {
    nt_pieces_free(p);
    return err_wrap(st, "%s: ", f->name);
  }
  return 0;
}

void nt_pieces_free(nt_pieces *p) {
  free_strings(p->piece, p->n);
  free_strings(p->merge, p->n_merges);
  free_strings(p->dropped, p->n_dropped);
  free(p->by_piece);
  free(p->by_merge);
  if (p->lexical) pcre2_code_free(p->lexical);
  memset(p, 0, sizeof *p);
  p->unk = -1;
}

bool nt_lexical(const nt_pieces *p, const char *c, size_t len) {
  if (!p->lexical) return false;
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->lexical, NULL);
  int rc = md ? pcre2_match(p->lexical, (PCRE2_SPTR)c, len, 0, 0, md, NULL) : -1;
  pcre2_match_data_free(md);
  return rc >= 0;
}

static const nt_piece_ref *lookup(const nt_piece_ref *sorted, uint32_t n, const char *s) {
  nt_piece_ref key = {s, 0};
  return bsearch(&key, sorted, n, sizeof *sorted, by_text);
}

int nt_piece_id(const nt_pieces *p, const char *s) {
  const nt_piece_ref *r = lookup(p->by_piece, p->n, s);
  return r ? (int)r->i : -1;
}

/* One symbol of a word being merged: its piece id and bytes. */
typedef struct {
  int id;
  size_t at, len; /* bytes of the word */
} symbol;

/* The characters of w as symbols (unknown ones as bytes or the unknown token,
 * as tokenizers' BPE::merge_word). */
static size_t symbols(const nt_pieces *p, const char *w, symbol *out) {
  size_t n = 0, len = strlen(w);
  int unk_len = 0; /* bytes of a pending unknown run (fused or not) */
  size_t unk_at = 0;
  char c[8];
  for (size_t i = 0; i < len;) {
    size_t l = 1;
    while (i + l < len && ((unsigned char)w[i + l] & 0xC0) == 0x80 && l < 4) l++;
    memcpy(c, w + i, l), c[l] = '\0';
    int id = nt_piece_id(p, c);
    bool bytes = id < 0 && p->byte_fallback;
    for (size_t b = 0; bytes && b < l; b++) {
      snprintf(c, sizeof c, "<0x%02X>", (unsigned char)w[i + b]);
      bytes = nt_piece_id(p, c) >= 0;
    }
    if (id >= 0 || bytes) {
      if (unk_len) out[n++] = (symbol){p->unk, unk_at, (size_t)unk_len}, unk_len = 0;
      if (id >= 0) out[n++] = (symbol){id, i, l};
      for (size_t b = 0; id < 0 && b < l; b++) {
        snprintf(c, sizeof c, "<0x%02X>", (unsigned char)w[i + b]);
        out[n++] = (symbol){nt_piece_id(p, c), i + b, 1};
      }
    } else if (p->unk >= 0) {
      if (unk_len && !p->fuse_unk) out[n++] = (symbol){p->unk, unk_at, (size_t)unk_len}, unk_len = 0;
      if (!unk_len) unk_at = i;
      unk_len += (int)l;
    }
    i += l;
  }
  if (unk_len) out[n++] = (symbol){p->unk, unk_at, (size_t)unk_len};
  return n;
}

/* The rank of merging pieces a and b (−1: none) and the merged piece's id. */
static long rank_of(const nt_pieces *p, int a, int b, char *buf, size_t cap, int *id) {
  if (a < 0 || b < 0) return -1;
  const char *x = p->piece[a], *y = p->piece[b];
  size_t lx = strlen(x), ly = strlen(y);
  if (lx + ly + 2 > cap) return -1;
  memcpy(buf, x, lx), buf[lx] = ' ', memcpy(buf + lx + 1, y, ly + 1);
  const nt_piece_ref *r = lookup(p->by_merge, p->n_merges, buf);
  if (!r) return -1;
  memmove(buf + lx, buf + lx + 1, ly + 1);
  *id = nt_piece_id(p, buf);
  return *id >= 0 ? (long)r->i : -1;
}

int nt_pieces_encode(const nt_pieces *p, const char *word, int **ids, size_t *n) {
  *ids = NULL, *n = 0;
  size_t len = strlen(word), cap = 2 * p->longest + 2;
  symbol *s = mem_alloc(4 * len + 1, sizeof *s);
  char *buf = mem_alloc(cap, 1);
  int *out = mem_alloc(4 * len + 1, sizeof *out);
  if (!s || !buf || !out) return free(s), free(buf), free(out), STENO_ERR_NOMEM;
  size_t k = symbols(p, word, s);
  for (;;) { /* the lowest-ranked pair, the leftmost of equals (tokenizers' queue order) */
    long best = -1;
    size_t at = 0;
    int joined = -1;
    for (size_t i = 0; i + 1 < k; i++) {
      int id;
      long r = rank_of(p, s[i].id, s[i + 1].id, buf, cap, &id);
      if (r >= 0 && (best < 0 || r < best)) best = r, at = i, joined = id;
    }
    if (best < 0) break;
    s[at].id = joined, s[at].len += s[at + 1].len;
    memmove(s + at + 1, s + at + 2, (k - at - 2) * sizeof *s);
    k--;
  }
  for (size_t i = 0; i < k; i++) out[i] = s[i].id;
  free(s), free(buf);
  *ids = out, *n = k;
  return 0;
}
