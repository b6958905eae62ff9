#include "text/bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"

/* ---- a string → int map (open addressing; keys point into the caller's strings) ---- */

struct bpe_map {
  size_t cap;
  const char **key;
  size_t *klen;
  int *val;
};

static uint64_t hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

static bpe_map *map_new(size_t n) {
  bpe_map *m = mem_alloc(1, sizeof *m);
  if (!m) return NULL;
  for (m->cap = 16; m->cap < 2 * n; m->cap *= 2) {}
  m->key = mem_alloc(m->cap, sizeof *m->key);
  m->klen = mem_alloc(m->cap, sizeof *m->klen);
  m->val = mem_alloc(m->cap, sizeof *m->val);
  if (!m->key || !m->klen || !m->val) {
    free(m->key), free(m->klen), free(m->val), free(m);
    return NULL;
  }
  return m;
}

static void map_free(bpe_map *m) {
  if (m) free(m->key), free(m->klen), free(m->val), free(m);
}

static size_t map_slot(const bpe_map *m, const char *k, size_t n) {
  size_t i = hash(k, n) & (m->cap - 1);
  while (m->key[i] && !(m->klen[i] == n && !memcmp(m->key[i], k, n))) i = (i + 1) & (m->cap - 1);
  return i;
}

/* Keeps the first value of a key given twice (a vocabulary's first id wins). */
static void map_put(bpe_map *m, const char *k, size_t n, int v) {
  size_t i = map_slot(m, k, n);
  if (m->key[i]) return;
  m->key[i] = k, m->klen[i] = n, m->val[i] = v;
}

static int map_get(const bpe_map *m, const char *k, size_t n) {
  size_t i = map_slot(m, k, n);
  return m->key[i] ? m->val[i] : -1;
}

/* ---- GPT-2's byte ↔ unicode table ---- */

/* The 68 bytes that are not printable Latin-1, in order: glyphs 256, 257, …. */
static const unsigned char others[68] = {
    0,   1,   2,   3,   4,   5,   6,   7,   8,   9,   10,  11,  12,  13,  14,  15,  16,
    17,  18,  19,  20,  21,  22,  23,  24,  25,  26,  27,  28,  29,  30,  31,  32,  127,
    128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140, 141, 142, 143, 144,
    145, 146, 147, 148, 149, 150, 151, 152, 153, 154, 155, 156, 157, 158, 159, 160, 173};

static bool printable(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The code point that stands for byte b: printable Latin-1 bytes stand for
 * themselves, the other 68 take 256, 257, … in byte order. */
static int byte_glyph(int b) {
  if (printable(b)) return b;
  for (int k = 0; k < 68; k++)
    if (others[k] == b) return 256 + k;
  return -1;
}

/* The byte a glyph stands for, or -1. */
static int glyph_byte(int cp) {
  if (cp < 256) return printable(cp) ? cp : -1;
  return cp < 256 + 68 ? others[cp - 256] : -1;
}

static size_t put_utf8(char *out, int cp) {
  if (cp < 0x80) return out[0] = (char)cp, 1;
  if (cp < 0x800) return out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 63)), 2;
  out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | ((cp >> 6) & 63));
  out[2] = (char)(0x80 | (cp & 63));
  return 3;
}

/* The next code point of well-formed UTF-8 s[0..n) and its length; -1 if ill-formed there. */
static int next_cp(const unsigned char *s, size_t n, size_t *len) {
  unsigned c = s[0];
  int need = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : -1;
  if (need < 0) return *len = 1, -1;
  /* Allowed range of the second byte (the rest are 80–BF). */
  unsigned lo = 0x80, hi = 0xBF;
  if (c == 0xE0) lo = 0xA0;
  if (c == 0xED) hi = 0x9F;
  if (c == 0xF0) lo = 0x90;
  if (c == 0xF4) hi = 0x8F;
  int cp = need == 0 ? (int)c : need == 1 ? (int)(c & 0x1F) : need == 2 ? (int)(c & 0x0F) : (int)(c & 0x07);
  for (int i = 1; i <= need; i++) {
    unsigned b = (size_t)i < n ? s[i] : 0x100;
    if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) return *len = (size_t)i, -1;
    cp = cp << 6 | (int)(b & 63);
  }
  *len = (size_t)need + 1;
  return cp;
}

/* What a transcript may hold of code point cp: itself; ' ' for a whitespace
 * control (tab, newline, ...); U+FFFD for any other control (C0, DEL, C1),
 * which a terminal would act on (ESC starts escape sequences, BEL rings). */
static int printable_cp(int cp) {
  if (cp >= 0x09 && cp <= 0x0D) return ' ';
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) ? 0xFFFD : cp;
}

/* n bytes as valid UTF-8 (and, if `printable`, with controls replaced). */
static int utf8_clean(const char *in, size_t n, bool printable, char **out) {
  *out = NULL;
  size_t cap;
  if (!mul_ok(n, 3, &cap) || !add_ok(cap, 1, &cap)) return err_set(STENO_ERR_NOMEM, "text too long");
  char *o = mem_alloc(cap, 1);
  if (!o) return STENO_ERR_NOMEM;
  size_t w = 0;
  for (size_t i = 0; i < n;) {
    size_t len;
    int cp = next_cp((const unsigned char *)in + i, n - i, &len);
    int keep = cp < 0 ? 0xFFFD : printable ? printable_cp(cp) : cp;
    if (keep != cp) w += put_utf8(o + w, keep);
    else memcpy(o + w, in + i, len), w += len;
    i += len;
  }
  o[w] = 0;
  *out = o;
  return 0;
}

int utf8_lossy(const char *in, size_t n, char **out) { return utf8_clean(in, n, false, out); }

int utf8_printable(const char *in, size_t n, char **out) { return utf8_clean(in, n, true, out); }

/* ---- vocabulary ---- */

static const char GPT2_SPLIT[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* Token i's bytes (decoded glyph by glyph) and its byte-unicode form. */
static int set_token(bpe *b, int i, const char *s, size_t n, bool raw) {
  char *bytes = mem_alloc(n + 1, 1), *sym = mem_alloc(3 * n + 1, 1);
  if (!bytes || !sym) return free(bytes), free(sym), STENO_ERR_NOMEM;
  size_t nb = 0, ns = 0;
  if (raw) {
    memcpy(bytes, s, n), nb = n;
    for (size_t k = 0; k < n; k++) ns += put_utf8(sym + ns, byte_glyph((unsigned char)s[k]));
  } else {
    memcpy(sym, s, n), ns = n;
    for (size_t k = 0; k < n;) {
      size_t len;
      int cp = next_cp((const unsigned char *)s + k, n - k, &len);
      int byte = cp < 0 ? -1 : glyph_byte(cp);
      /* A code point that is no byte glyph is copied as it is. */
      if (byte >= 0) bytes[nb++] = (char)byte;
      else memcpy(bytes + nb, s + k, len), nb += len;
      k += len;
    }
  }
  b->bytes[i] = bytes, b->len[i] = (uint32_t)nb, b->sym[i] = sym;
  return 0;
}

int bpe_init(bpe *b, int n, const char *const *tokens, const size_t *len, bool raw,
             bool ranks_are_ids, size_t n_merges, const char *const *merges,
             const size_t *merge_len) {
  memset(b, 0, sizeof *b);
  if (n < 1 || n > (1 << 24) || n_merges > (1u << 24))
    return err_set(STENO_ERR_FORMAT, "BPE vocabulary of %d tokens and %zu merges", n, n_merges);
  b->n = n;
  b->bytes = mem_alloc((size_t)n, sizeof *b->bytes);
  b->len = mem_alloc((size_t)n, sizeof *b->len);
  b->sym = mem_alloc((size_t)n, sizeof *b->sym);
  b->ids = map_new((size_t)n);
  b->ranks = map_new(n_merges);
  int st = b->bytes && b->len && b->sym && b->ids && b->ranks ? 0 : STENO_ERR_NOMEM;
  for (int i = 0; !st && i < n; i++) {
    if (len[i] > 4096) st = err_set(STENO_ERR_FORMAT, "BPE token %d is %zu bytes long", i, len[i]);
    else st = set_token(b, i, tokens[i], len[i], raw);
  }
  for (int i = 0; !st && i < n; i++) map_put(b->ids, b->sym[i], strlen(b->sym[i]), i);
  size_t total = 1;
  for (size_t i = 0; i < n_merges; i++) total += merge_len[i];
  if (!st && !(b->merges = mem_alloc(total, 1))) st = STENO_ERR_NOMEM;
  for (size_t i = 0, at = 0; !st && i < n_merges; at += merge_len[i++]) {
    const char *sp = memchr(merges[i], ' ', merge_len[i]);
    if (!sp || sp == merges[i] || sp == merges[i] + merge_len[i] - 1)
      st = err_set(STENO_ERR_FORMAT, "BPE merge %zu is not \"a b\"", i);
    else memcpy(b->merges + at, merges[i], merge_len[i]);
    if (!st) map_put(b->ranks, b->merges + at, merge_len[i], (int)i);
  }
  b->rank_by_id = ranks_are_ids && n_merges == 0;
  if (!st && (n_merges || b->rank_by_id)) {
    int code;
    PCRE2_SIZE at;
    b->re = pcre2_compile((PCRE2_SPTR)GPT2_SPLIT, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code,
                          &at, NULL);
    if (!b->re) st = err_set(STENO_ERR_UNSUPPORTED, "PCRE2 cannot compile the GPT-2 pattern (%d)", code);
  }
  if (st) bpe_free(b);
  return st;
}

void bpe_free(bpe *b) {
  for (int i = 0; b->bytes && i < b->n; i++) free(b->bytes[i]);
  for (int i = 0; b->sym && i < b->n; i++) free(b->sym[i]);
  free(b->bytes), free(b->len), free(b->sym);
  map_free(b->ids), map_free(b->ranks);
  free(b->merges);
  if (b->re) pcre2_code_free(b->re);
  memset(b, 0, sizeof *b);
}

int bpe_set_pattern(bpe *b, const char *pattern) {
  int code;
  PCRE2_SIZE at;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                 &code, &at, NULL);
  if (!re) {
    PCRE2_UCHAR msg[120];
    pcre2_get_error_message(code, msg, sizeof msg);
    return err_set(STENO_ERR_FORMAT, "pre-tokenizer pattern at offset %zu: %s", (size_t)at,
                   (const char *)msg);
  }
  if (b->re) pcre2_code_free(b->re);
  b->re = re;
  return 0;
}

int bpe_find(const bpe *b, const char *sym) { return map_get(b->ids, sym, strlen(sym)); }

int bpe_decode(const bpe *b, const int *ids, size_t n, char **out) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= b->n) return err_set(STENO_ERR_INVALID, "token id %d of %d", ids[i], b->n);
    total += b->len[ids[i]];
  }
  char *raw = mem_alloc(total + 1, 1);
  if (!raw) return STENO_ERR_NOMEM;
  size_t w = 0;
  for (size_t i = 0; i < n; i++) memcpy(raw + w, b->bytes[ids[i]], b->len[ids[i]]), w += b->len[ids[i]];
  int st = utf8_lossy(raw, w, out);
  free(raw);
  return st;
}

/* ---- encoding ---- */

typedef struct {
  int *v;
  size_t n, cap;
} ids_vec;

static int push_id(ids_vec *o, int id) {
  if (o->n == o->cap) {
    size_t cap = o->cap ? 2 * o->cap : 64;
    int *v = mem_realloc(o->v, cap, sizeof *v);
    if (!v) return STENO_ERR_NOMEM;
    o->v = v, o->cap = cap;
  }
  o->v[o->n++] = id;
  return 0;
}

/* Merges the glyph string of one pre-token and appends its ids. Symbols are
 * (start, length) spans of `s`; `key` has room for "a b" of any two spans. */
static int merge_word(const bpe *b, const char *s, size_t n, size_t *start, size_t *len, char *key,
                      ids_vec *out) {
  if (b->ignore_merges) {
    int whole = map_get(b->ids, s, n);
    if (whole >= 0) return push_id(out, whole);
  }
  size_t m = 0;
  for (size_t i = 0; i < n;) {
    size_t l;
    next_cp((const unsigned char *)s + i, n - i, &l);
    start[m] = i, len[m++] = l, i += l;
  }
  for (;;) {
    int best = -1;
    size_t at = 0;
    for (size_t i = 0; i + 1 < m; i++) {
      size_t gap = b->rank_by_id ? 0 : 1;
      memcpy(key, s + start[i], len[i]);
      key[len[i]] = ' ';
      memcpy(key + len[i] + gap, s + start[i + 1], len[i + 1]);
      int r = map_get(b->rank_by_id ? b->ids : b->ranks, key, len[i] + len[i + 1] + gap);
      if (r >= 0 && (best < 0 || r < best)) best = r, at = i;
    }
    if (best < 0) break;
    len[at] += len[at + 1];
    memmove(start + at + 1, start + at + 2, (m - at - 2) * sizeof *start);
    memmove(len + at + 1, len + at + 2, (m - at - 2) * sizeof *len);
    m--;
  }
  for (size_t i = 0; i < m; i++) {
    int id = map_get(b->ids, s + start[i], len[i]);
    if (id < 0) return err_set(STENO_ERR_UNSUPPORTED, "BPE symbol '%.*s' is not in the vocabulary",
                               (int)len[i], s + start[i]);
    TRY(push_id(out, id));
  }
  return 0;
}

/* One pre-token's bytes as glyphs, merged, appended to out. */
static int encode_piece(const bpe *b, const char *p, size_t n, ids_vec *out) {
  char *glyphs = mem_alloc(2 * n + 1, 1), *key = mem_alloc(4 * n + 2, 1);
  size_t *start = mem_alloc(n + 1, sizeof *start), *len = mem_alloc(n + 1, sizeof *len);
  int st = glyphs && key && start && len ? 0 : STENO_ERR_NOMEM;
  size_t g = 0;
  for (size_t i = 0; !st && i < n; i++) g += put_utf8(glyphs + g, byte_glyph((unsigned char)p[i]));
  if (!st) st = merge_word(b, glyphs, g, start, len, key, out);
  free(glyphs), free(key), free(start), free(len);
  return st;
}

int bpe_encode(const bpe *b, const char *text, int **ids, size_t *n) {
  *ids = NULL, *n = 0;
  if (!b->re) return err_set(STENO_ERR_UNSUPPORTED, "the tokenizer has no merges: cannot encode text");
  size_t tn = strlen(text);
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(b->re, NULL);
  if (!md) return STENO_ERR_NOMEM;
  ids_vec out = {0};
  int st = 0;
  for (PCRE2_SIZE at = 0; !st && at < tn;) {
    int rc = pcre2_match(b->re, (PCRE2_SPTR)text, tn, at, 0, md, NULL);
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
      st = err_set(STENO_ERR_INVALID, "text is not valid UTF-8 (PCRE2 error %d)", rc);
      break;
    }
    PCRE2_SIZE from = rc < 0 ? tn : ov[0], to = rc < 0 ? tn : ov[1];
    if (rc >= 0 && to == from) {
      st = err_set(STENO_ERR_FORMAT, "the pre-tokenizer pattern matches empty text");
      break;
    }
    /* Text no match covers is a pre-token of its own (an Isolated split). */
    if (from > at) st = encode_piece(b, text + at, from - at, &out);
    if (!st && to > from) st = encode_piece(b, text + from, to - from, &out);
    at = to;
  }
  pcre2_match_data_free(md);
  if (st) {
    free(out.v);
    return st;
  }
  *ids = out.v, *n = out.n;
  return 0;
}
