/* Word times of a Nemotron 3.5 Transcribe transcript: transformers'
 * Nemotron3_5TranscribeProcessor.align_word_timestamps step by step (its
 * helper names in the comments), with the processor's defaults (speaker
 * activity threshold 0.5, words of at most 1 s, snapping by at most 12
 * encoder frames). Head frames are `frame` seconds long: the recording's
 * valid spectrogram frames · hop / rate over ceil(valid / sub) · factor. */
#include "models/nemotron_transcribe/words.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "base/mem.h"
#include "decode/ctc.h"

#define THRESHOLD 0.5f
#define MAX_WORD_SECONDS 1.0
#define MAX_WORD_FRAMES 12
#define NO_TAG (-1)

/* One word of the transcript with its pieces. */
typedef struct {
  char *text;
  int tag;
  int *ids;
  size_t n;
} unit;

typedef struct {
  unit *u;
  size_t n, cap;
} units;

static void units_free(units *w) {
  for (size_t i = 0; i < w->n; i++) free(w->u[i].text), free(w->u[i].ids);
  free(w->u);
}

/* ---- the transcript's words (_tokenize_transcript) ---- */

/* The code point at s (valid UTF-8: the decoder's text is) and its length. */
static uint32_t utf8_at(const char *s, size_t *len) {
  const unsigned char *u = (const unsigned char *)s;
  if (u[0] < 0x80) return *len = 1, u[0];
  if (u[0] < 0xE0 && u[1]) return *len = 2, (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F);
  if (u[0] < 0xF0 && u[1] && u[2])
    return *len = 3, (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (u[2] & 0x3F);
  if (u[1] && u[2] && u[3])
    return *len = 4, (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 |
                         (uint32_t)(u[2] & 0x3F) << 6 | (u[3] & 0x3F);
  return *len = 1, 0xFFFD;
}

/* Python's str.split() white space. */
static bool py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

/* The scripts the reference's language detection finds by Unicode name
 * prefix (HANGUL, HIRAGANA, KATAKANA, CJK UNIFIED/COMPATIBILITY, THAI), as
 * bits: 1 Korean (aligned by word as any other), 2 Japanese, 4 Chinese
 * (aligned by character), 8 Thai (the reference refuses it). */
static int script_of(uint32_t c) {
  if ((c >= 0x1100 && c <= 0x11FF) || (c >= 0x3131 && c <= 0x318E) ||
      (c >= 0xA960 && c <= 0xA97C) || (c >= 0xAC00 && c <= 0xD7A3) ||
      (c >= 0xD7B0 && c <= 0xD7FB) || c == 0x302E || c == 0x302F)
    return 1;
  if ((c >= 0x3041 && c <= 0x3096) || (c >= 0x309B && c <= 0x30FF) ||
      (c >= 0x31F0 && c <= 0x31FF))
    return 2;
  if ((c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||
      (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x20000 && c <= 0x2FA1F) ||
      (c >= 0x30000 && c <= 0x323AF))
    return 4;
  return c >= 0x0E01 && c <= 0x0E5B ? 8 : 0;
}

/* An event or style tag (<ev:...>, <sty:...>): left out of the detection. */
static bool kept_tag(const char *w, size_t n) {
  size_t head = !strncmp(w, "<ev:", 4) ? 4 : !strncmp(w, "<sty:", 5) ? 5 : 0;
  if (!head || n <= head || w[n - 1] != '>') return false;
  for (size_t i = head; i + 1 < n; i++)
    if (w[i] == '<' || w[i] == '>') return false;
  return true;
}

/* Every occurrence of `what` in *s replaced by `by` (*s reallocated). */
static int replace_all(char **s, const char *what, const char *by) {
  size_t lw = strlen(what), lb = strlen(by), count = 0;
  if (!lw) return 0;
  for (const char *p = strstr(*s, what); p; p = strstr(p + lw, what)) count++;
  if (!count) return 0;
  char *out = mem_alloc(strlen(*s) + count * lb + 1, 1), *o = out;
  if (!out) return STENO_ERR_NOMEM;
  const char *from = *s;
  for (const char *p = strstr(from, what); p; from = p + lw, p = strstr(from, what)) {
    memcpy(o, from, (size_t)(p - from)), o += p - from;
    memcpy(o, by, lb), o += lb;
  }
  strcpy(o, from);
  free(*s);
  *s = out;
  return 0;
}

/* A <spk:N> tag at s (ASCII, any case): its length and N; 0 if none. */
static size_t tag_at(const char *s, int *tag) {
  if (s[0] != '<' || strncasecmp(s + 1, "spk:", 4)) return 0;
  size_t i = 5;
  long v = 0;
  while (s[i] >= '0' && s[i] <= '9') v = v < 100000000 ? v * 10 + (s[i++] - '0') : (i++, v);
  if (i == 5 || s[i] != '>') return 0;
  *tag = (int)v;
  return i + 1;
}

/* The pieces of one word: " " + word through Metaspace ("▁" for each space,
 * split before each "▁") then BPE. */
static int word_ids(const nt_pieces *p, const char *word, int **ids, size_t *n) {
  size_t len = strlen(word);
  char *w = mem_alloc(len + 4, 1);
  int *all = mem_alloc(4 * len + 8, sizeof *all);
  int st = w && all ? 0 : STENO_ERR_NOMEM;
  if (!st) memcpy(w, "\xE2\x96\x81", 3), memcpy(w + 3, word, len + 1);
  size_t k = 0;
  for (char *at = w; !st && *at;) {
    char *next = strstr(at + 3, "\xE2\x96\x81"), keep = 0;
    if (next) keep = *next, *next = '\0';
    int *part;
    size_t m;
    st = nt_pieces_encode(p, at, &part, &m);
    for (size_t i = 0; !st && i < m; i++) all[k++] = part[i];
    if (!st) free(part);
    if (!next) break;
    *next = keep, at = next;
  }
  free(w);
  if (st) return free(all), st;
  *ids = all, *n = k;
  return 0;
}

static int add_unit(units *w, const char *s, size_t len, int tag) {
  if (w->n == w->cap) {
    size_t cap = w->cap ? 2 * w->cap : 16;
    unit *u = realloc(w->u, cap * sizeof *u);
    if (!u) return STENO_ERR_NOMEM;
    w->u = u, w->cap = cap;
  }
  unit *u = &w->u[w->n];
  memset(u, 0, sizeof *u);
  if (!(u->text = mem_alloc(len + 1, 1))) return STENO_ERR_NOMEM;
  memcpy(u->text, s, len);
  u->tag = tag;
  w->n++;
  return 0;
}

/* The ids of one character aligned on its own (_character_token_ids): its
 * piece, else the pieces of " " + it without the bare "▁"; false where the
 * unknown piece is among them (the reference raises). */
static int char_ids(const nt_pieces *p, unit *u, bool *ok) {
  int id = nt_piece_id(p, u->text);
  if (id >= 0 && id != p->unk) {
    if (!(u->ids = mem_alloc(1, sizeof *u->ids))) return STENO_ERR_NOMEM;
    u->ids[0] = id, u->n = 1;
    return 0;
  }
  TRY(word_ids(p, u->text, &u->ids, &u->n));
  int bare = nt_piece_id(p, "\xE2\x96\x81");
  size_t k = 0;
  for (size_t i = 0; i < u->n; i++)
    if (u->ids[i] != bare) u->ids[k++] = u->ids[i];
  u->n = k;
  *ok = *ok && k > 0;
  for (size_t i = 0; i < k; i++) *ok = *ok && u->ids[i] != p->unk;
  return 0;
}

/* The letters, marks and numbers of word[0..n) as units of their own
 * (_lexical_characters; the text taken as NFC already). */
static int by_character(const nt_pieces *p, const char *word, size_t n, int tag, units *w,
                        bool *ok) {
  for (size_t i = 0, l; i < n; i += l) {
    utf8_at(word + i, &l);
    if (!nt_lexical(p, word + i, l)) continue;
    TRY(add_unit(w, word + i, l, tag));
    TRY(char_ids(p, &w->u[w->n - 1], ok));
  }
  return 0;
}

/* The language bits (script_of) of the words outside event/style tags. */
static int scripts_of(const char *text) {
  int scripts = 0, t;
  for (const char *s = text; *s;) {
    size_t l = tag_at(s, &t);
    if (l || py_space(utf8_at(s, &l))) {
      s += l;
      continue;
    }
    const char *a = s;
    int here = 0;
    while (*s && !tag_at(s, &t) && !py_space(utf8_at(s, &l))) here |= script_of(utf8_at(s, &l)), s += l;
    if (!kept_tag(a, (size_t)(s - a))) scripts |= here;
  }
  return scripts;
}

/* The words of the cleaned text with their tags and pieces (Chinese and
 * Japanese character by character); *timeable false where the reference
 * raises (Thai, a piece it cannot name, a word without pieces). */
static int split_words(const nt_pieces *p, const char *text, units *w, bool *timeable) {
  int tag = NO_TAG, t, scripts = scripts_of(text);
  bool tags = false, chars = !(scripts & 1) && (scripts & 6);
  for (const char *s = text; *s; s++) tags = tags || tag_at(s, &t);
  if (!tags) tag = 0; /* a transcript without tags is tag 0 */
  *timeable = scripts != 8;
  for (const char *s = text; *s;) {
    size_t l, tl = tag_at(s, &t);
    if (tl) {
      tag = t, s += tl;
      continue;
    }
    if (py_space(utf8_at(s, &l))) {
      s += l;
      continue;
    }
    const char *a = s;
    while (*s && !tag_at(s, &t) && !py_space(utf8_at(s, &l))) s += l;
    if (chars && !kept_tag(a, (size_t)(s - a))) {
      TRY(by_character(p, a, (size_t)(s - a), tag, w, timeable));
      continue;
    }
    TRY(add_unit(w, a, (size_t)(s - a), tag));
    unit *u = &w->u[w->n - 1];
    TRY(word_ids(p, u->text, &u->ids, &u->n));
    *timeable = *timeable && u->n > 0;
  }
  return 0;
}

/* ---- frames and speakers ---- */

void nt_log_softmax_cols(const float *x, size_t rows, uint32_t v, size_t stride, const int *cols,
                         uint32_t n, float *out) {
  for (size_t r = 0; r < rows; r++) {
    const float *a = x + r * stride;
    float mx = a[0];
    for (uint32_t c = 1; c < v; c++) mx = a[c] > mx ? a[c] : mx;
    double sum = 0;
    for (uint32_t c = 0; c < v; c++) sum += exp((double)(a[c] - mx));
    float lse = (float)log(sum);
    for (uint32_t j = 0; j < n; j++) out[r * n + j] = a[cols[j]] - mx - lse;
  }
}

/* Speaker probabilities per head frame (nf of them): the sigmoid of the
 * diarization logits averaged over each encoder frame's spectrogram frames,
 * then _resample_frames (torch.linspace positions, whose second half torch
 * computes as end − step·k with one rounding). */
static void frame_probs(const nt_align_input *in, uint32_t ne, uint32_t nf, float *pe,
                        float *out) {
  uint32_t S = in->speakers, sub = in->sub;
  for (uint32_t e = 0; e < ne; e++)
    for (uint32_t k = 0; k < S; k++) {
      float sum = 0;
      for (uint32_t j = 0; j < sub; j++)
        sum += 1.0f / (1.0f + expf(-in->speaker_logits[((size_t)e * sub + j) * S + k]));
      pe[(size_t)e * S + k] = sum / (float)sub;
    }
  if (ne == nf) {
    memcpy(out, pe, (size_t)nf * S * sizeof *out);
    return;
  }
  float step = nf > 1 ? (float)(ne - 1) / (float)(nf - 1) : 0;
  for (uint32_t i = 0; i < nf; i++) {
    float pos = i < nf / 2 ? fmaf(step, (float)i, 0.0f)
                           : fmaf(-step, (float)(nf - 1 - i), (float)(ne - 1));
    uint32_t lo = (uint32_t)floorf(pos), hi = (uint32_t)ceilf(pos);
    float frac = pos - (float)lo;
    for (uint32_t k = 0; k < S; k++)
      out[(size_t)i * S + k] = pe[(size_t)lo * S + k] * (1 - frac) + pe[(size_t)hi * S + k] * frac;
  }
}

/* ---- tags to speakers (_match_tags_to_speakers) ---- */

/* scipy's linear_sum_assignment (Crouse's shortest augmenting path, ties as
 * it breaks them) minimizing cost [nr][nc], nr ≤ nc: col[i] for each row. */
static int lsap(const double *cost, int nr, int nc, int *col) {
  double *u = mem_alloc((size_t)nr, sizeof *u), *v = mem_alloc((size_t)nc, sizeof *v);
  double *spc = mem_alloc((size_t)nc, sizeof *spc);
  int *path = mem_alloc((size_t)nc, sizeof *path), *row4col = mem_alloc((size_t)nc, sizeof *row4col);
  int *rem = mem_alloc((size_t)nc, sizeof *rem);
  bool *sr = mem_alloc((size_t)nr, sizeof *sr), *sc = mem_alloc((size_t)nc, sizeof *sc);
  int st = u && v && spc && path && row4col && rem && sr && sc ? 0 : STENO_ERR_NOMEM;
  for (int j = 0; !st && j < nc; j++) row4col[j] = path[j] = -1;
  for (int i = 0; !st && i < nr; i++) col[i] = -1;
  for (int cur = 0; !st && cur < nr; cur++) {
    int n_rem = nc, i = cur, sink = -1;
    double min_val = 0;
    for (int j = 0; j < nc; j++) rem[j] = nc - j - 1, spc[j] = INFINITY, sc[j] = false;
    for (int k = 0; k < nr; k++) sr[k] = false;
    while (sink < 0) {
      int index = -1;
      double lowest = INFINITY;
      sr[i] = true;
      for (int it = 0; it < n_rem; it++) {
        int j = rem[it];
        double r = min_val + cost[(size_t)i * nc + j] - u[i] - v[j];
        if (r < spc[j]) path[j] = i, spc[j] = r;
        if (spc[j] < lowest || (spc[j] == lowest && row4col[j] == -1)) lowest = spc[j], index = it;
      }
      min_val = lowest;
      if (index < 0 || min_val == INFINITY) {
        st = err_set(STENO_ERR_INVALID, "word times: no assignment of speakers");
        break;
      }
      int j = rem[index];
      if (row4col[j] == -1) sink = j;
      else i = row4col[j];
      sc[j] = true;
      rem[index] = rem[--n_rem];
    }
    if (st) break;
    u[cur] += min_val;
    for (int k = 0; k < nr; k++)
      if (sr[k] && k != cur) u[k] += min_val - spc[col[k]];
    for (int j = 0; j < nc; j++)
      if (sc[j]) v[j] -= min_val - spc[j];
    for (int j = sink;;) {
      int k = path[j];
      row4col[j] = k;
      int t = col[k];
      col[k] = j, j = t;
      if (k == cur) break;
    }
  }
  free(u), free(v), free(spc), free(path), free(row4col), free(rem), free(sr), free(sc);
  return st;
}

/* The best one-to-one match of similarity [nt][ns] (tags × speakers, maximized):
 * speaker[k] for tag k, −1 where unmatched (more tags than speakers). */
static int assign(const double *sim, int nt, int ns, int *speaker) {
  bool tall = ns < nt;
  int nr = tall ? ns : nt, nc = tall ? nt : ns;
  double *cost = mem_alloc((size_t)nr * nc, sizeof *cost);
  int *col = mem_alloc((size_t)nr, sizeof *col);
  int st = cost && col ? 0 : STENO_ERR_NOMEM;
  for (int r = 0; !st && r < nr; r++)
    for (int c = 0; c < nc; c++) cost[(size_t)r * nc + c] = -(tall ? sim[(size_t)c * ns + r] : sim[(size_t)r * ns + c]);
  if (!st) st = lsap(cost, nr, nc, col);
  for (int k = 0; !st && k < nt; k++) speaker[k] = -1;
  for (int r = 0; !st && r < nr; r++) {
    if (tall) speaker[col[r]] = r;
    else speaker[r] = col[r];
  }
  free(cost), free(col);
  return st;
}

/* The tags in order of first appearance. */
static int tag_list(const units *w, int *tags) {
  int nt = 0;
  for (size_t i = 0; i < w->n; i++) {
    bool seen = false;
    for (int k = 0; k < nt; k++) seen = seen || tags[k] == w->u[i].tag;
    if (!seen) tags[nt++] = w->u[i].tag;
  }
  return nt;
}

/* The greedy token of each frame among the blank and the transcript's tokens
 * (the first of equal scores, in that order) and its onsets. */
static void greedy_onsets(const float *lp, uint32_t nf, uint32_t V, int *onset) {
  int blank = (int)V - 1, prev = -1;
  for (uint32_t f = 0; f < nf; f++) {
    const float *row = lp + (size_t)f * V;
    int best = blank;
    for (uint32_t c = 0; c + 1 < V; c++)
      if (row[c] > row[best]) best = (int)c;
    onset[f] = best != blank && best != prev ? best : -1;
    prev = best;
  }
}

/* similarity [nt][S]: IDF-weighted cosine of the tags' token counts and the
 * speakers' greedy onsets while active, less 0.1·|log| of their amounts' ratio. */
static int similarity(const float *lp, uint32_t nf, uint32_t V, const float *sp, uint32_t S,
                      const units *w, const int *tags, int nt, double *sim) {
  double *tc = mem_alloc((size_t)nt * V, sizeof *tc), *sc = mem_alloc((size_t)S * V, sizeof *sc);
  int *onset = mem_alloc(nf + 1, sizeof *onset);
  if (!tc || !sc || !onset) return free(tc), free(sc), free(onset), STENO_ERR_NOMEM;
  for (size_t i = 0; i < w->n; i++)
    for (int k = 0; k < nt; k++)
      for (size_t j = 0; tags[k] == w->u[i].tag && j < w->u[i].n; j++)
        tc[(size_t)k * V + w->u[i].ids[j]] += 1;
  greedy_onsets(lp, nf, V, onset);
  for (uint32_t f = 0; f < nf; f++)
    for (uint32_t s = 0; onset[f] >= 0 && s < S; s++)
      if (sp[(size_t)f * S + s] >= THRESHOLD) sc[(size_t)s * V + onset[f]] += 1;
  double *tn = sim + (size_t)nt * S; /* scratch: norms and totals after sim */
  for (int k = 0; k < nt; k++) tn[k] = tn[nt + k] = 0;
  for (uint32_t s = 0; s < S; s++) tn[2 * nt + s] = tn[2 * nt + S + s] = 0;
  for (int k = 0; k < nt; k++)
    for (uint32_t s = 0; s < S; s++) sim[(size_t)k * S + s] = 0;
  for (uint32_t v = 0; v < V; v++) {
    int nz = 0;
    for (uint32_t s = 0; s < S; s++) nz += sc[(size_t)s * V + v] > 0;
    double idf = log1p((double)S / (1 + (double)nz));
    for (int k = 0; k < nt; k++) {
      double a = sqrt(tc[(size_t)k * V + v] * idf);
      tn[k] += a * a, tn[nt + k] += tc[(size_t)k * V + v];
      for (uint32_t s = 0; s < S; s++) sim[(size_t)k * S + s] += a * sqrt(sc[(size_t)s * V + v] * idf);
    }
    for (uint32_t s = 0; s < S; s++) {
      double b = sqrt(sc[(size_t)s * V + v] * idf);
      tn[2 * nt + s] += b * b, tn[2 * nt + S + s] += sc[(size_t)s * V + v];
    }
  }
  for (int k = 0; k < nt; k++)
    for (uint32_t s = 0; s < S; s++) {
      double norms = sqrt(tn[k]) * sqrt(tn[2 * nt + s]);
      sim[(size_t)k * S + s] = sim[(size_t)k * S + s] / (norms > 1e-8 ? norms : 1e-8) -
                               0.1 * fabs(log((tn[nt + k] + 1) / (tn[2 * nt + S + s] + 1)));
    }
  free(tc), free(sc), free(onset);
  return 0;
}

/* ---- one tag's words (_align_words, _refine_word_timestamps) ---- */

typedef struct {
  const float *lp;  /* [nf][V] log probabilities */
  uint32_t nf, V;
  double frame;     /* seconds per head frame */
  double limit;     /* the snapping's cap in seconds */
} frames_info;

/* Forced alignment of the words u[idx[0..n)] (their pieces in order) on the
 * frames where p (stride ps; NULL: every frame) is at least 0.01, p's log
 * added to the pieces' scores. *ok false when they do not fit. */
static int align_tag(const frames_info *fi, const units *w, const size_t *idx, size_t n,
                     const float *p, uint32_t ps, nt_word *out, bool *ok) {
  uint32_t V = fi->V, blank = V - 1, nfr = 0;
  size_t L = 0;
  for (size_t i = 0; i < n; i++) L += w->u[idx[i]].n;
  int *frames = mem_alloc(fi->nf + 1, sizeof *frames), *tg = mem_alloc(L + 1, sizeof *tg);
  int *path = mem_alloc(fi->nf + 1, sizeof *path), *s0 = mem_alloc(L + 1, sizeof *s0);
  int *s1 = mem_alloc(L + 1, sizeof *s1);
  float *em = NULL;
  int st = frames && tg && path && s0 && s1 ? 0 : STENO_ERR_NOMEM;
  for (uint32_t f = 0; !st && f < fi->nf; f++)
    if (!p || p[(size_t)f * ps] >= 0.01f) frames[nfr++] = (int)f;
  size_t at = 0, repeats = 0;
  for (size_t i = 0; !st && i < n; i++)
    for (size_t j = 0; j < w->u[idx[i]].n; j++) tg[at++] = w->u[idx[i]].ids[j];
  for (size_t i = 1; i < L; i++) repeats += tg[i] == tg[i - 1];
  *ok = !st && L > 0 && nfr >= L + repeats;
  if (*ok && !(em = mem_alloc((size_t)nfr * V, sizeof *em))) st = STENO_ERR_NOMEM;
  for (uint32_t i = 0; *ok && !st && i < nfr; i++) {
    const float *row = fi->lp + (size_t)frames[i] * V;
    float lg = p ? logf(p[(size_t)frames[i] * ps] > 1e-6f ? p[(size_t)frames[i] * ps] : 1e-6f) : 0;
    for (uint32_t c = 0; c < V; c++) em[(size_t)i * V + c] = c == blank ? row[c] : row[c] + lg;
  }
  if (*ok && !st) st = ctc_force_align(em, (int)nfr, (int)V, (int)V, tg, (int)L, (int)blank, path);
  if (*ok && !st && ctc_spans(path, (int)nfr, (int)blank, s0, s1, (int)L) != (int)L)
    st = err_set(STENO_ERR_INVALID, "word times: the alignment lost a piece");
  for (size_t i = 0, k = 0; *ok && !st && i < n; k += w->u[idx[i]].n, i++) {
    double start = frames[s0[k]] * fi->frame;
    double end = (frames[s1[k + w->u[idx[i]].n - 1] - 1] + 1) * fi->frame;
    float p = 1;
    for (size_t j = k; j < k + w->u[idx[i]].n; j++) {
      double sum = 0;
      for (int f = s0[j]; f < s1[j]; f++) sum += fi->lp[(size_t)frames[f] * V + tg[j]];
      float pj = (float)exp(sum / (s1[j] - s0[j]));
      p = pj < p ? pj : p;
    }
    out[i] = (nt_word){NULL, start, end < start + MAX_WORD_SECONDS ? end : start + MAX_WORD_SECONDS,
                       p, w->u[idx[i]].tag};
  }
  free(frames), free(tg), free(path), free(s0), free(s1), free(em);
  return st;
}

/* A speaker's activity runs (sigmoid of its logits over 0.5) in seconds,
 * clipped at the recording's end, the empty ones left out: [n][2]. */
static size_t segments(const nt_align_input *in, uint32_t k, double dur, double *seg) {
  double fd = (double)in->hop / in->rate;
  size_t n = 0;
  for (uint32_t f = 0; f < in->valid;) {
    uint32_t g = f;
    while (g < in->valid &&
           1.0f / (1.0f + expf(-in->speaker_logits[(size_t)g * in->speakers + k])) > THRESHOLD)
      g++;
    if (g > f) {
      double a = f * fd, b = g * fd < dur ? g * fd : dur;
      if (b > a) seg[2 * n] = a, seg[2 * n + 1] = b, n++;
      f = g;
    } else {
      f++;
    }
  }
  return n;
}

/* _refine_word_timestamps: words (time order) snapped to segments [ns][2]. */
static void refine(nt_word *w, size_t n, const double *seg, size_t ns, double limit, long *of) {
  for (size_t i = 0; i < n; i++) {
    size_t below = 0; /* bisect_right over the starts */
    while (below < ns && seg[2 * below] <= w[i].start) below++;
    of[i] = below && w[i].start < seg[2 * (below - 1) + 1] ? (long)below - 1 : -1;
  }
  for (size_t i = 0; i < n; i++) {
    bool first = of[i] >= 0 && (i == 0 || of[i - 1] != of[i]);
    double shift = first ? w[i].start - seg[2 * of[i]] : 0;
    if (first && shift > 0 && shift <= limit) w[i].start = seg[2 * of[i]];
  }
  for (size_t i = 0; i < n; i++) {
    double end;
    if (of[i] >= 0 && (i + 1 == n || of[i + 1] != of[i])) end = seg[2 * of[i] + 1];
    else end = i + 1 < n ? w[i + 1].start : w[i].end;
    double cap = end < w[i].start + limit ? end : w[i].start + limit;
    w[i].end = w[i].start > cap ? w[i].start : cap;
  }
}

/* ---- the whole transcript ---- */

/* Python's sorted by (start, end): stable, so insertion (the words come
 * nearly in order). */
static void sort_by_time(nt_word *w, size_t n) {
  for (size_t i = 1; i < n; i++) {
    nt_word x = w[i];
    size_t j = i;
    while (j > 0 && (w[j - 1].start > x.start || (w[j - 1].start == x.start && w[j - 1].end > x.end)))
      w[j] = w[j - 1], j--;
    w[j] = x;
  }
}

/* The cleaned transcript: the dropped special tokens and "—" become spaces. */
static int clean_text(const nt_pieces *p, const char *transcript, char **out) {
  *out = mem_strdup(transcript);
  if (!*out) return STENO_ERR_NOMEM;
  int st = 0;
  for (uint32_t i = 0; !st && i < p->n_dropped; i++) st = replace_all(out, p->dropped[i], " ");
  if (!st) st = replace_all(out, "\xE2\x80\x94", " ");
  if (st) free(*out), *out = NULL;
  return st;
}

/* Each tag's words aligned on its speaker's frames and snapped to its
 * segments, into out (w->n of them; *got filled). */
static int align_tags(const nt_align_input *in, const frames_info *fi, const units *w,
                      const float *sp, const int *tags, const int *speaker, int nt, double dur,
                      nt_word *out, size_t *got) {
  uint32_t S = in->speaker_logits ? in->speakers : 0;
  size_t *idx = mem_alloc(w->n + 1, sizeof *idx);
  double *seg = mem_alloc(in->valid + 2, 2 * sizeof *seg);
  long *of = mem_alloc(w->n + 1, sizeof *of);
  float *zero = mem_alloc(fi->nf + 1, sizeof *zero);
  int st = idx && seg && of && zero ? 0 : STENO_ERR_NOMEM;
  for (int k = 0; !st && k < nt; k++) {
    size_t n = 0, ns = 0;
    for (size_t i = 0; i < w->n; i++)
      if (w->u[i].tag == tags[k]) idx[n++] = i;
    const float *p = !S ? NULL : speaker[k] < 0 ? zero : sp + speaker[k];
    bool ok;
    st = align_tag(fi, w, idx, n, p, S ? S : 1, out + *got, &ok);
    if (st || !ok) continue; /* a failed tag: its words are left out */
    if (S && speaker[k] >= 0) ns = segments(in, (uint32_t)speaker[k], dur, seg);
    refine(out + *got, n, seg, ns, fi->limit, of);
    for (size_t i = 0; i < n && !st; i++)
      if (!(out[*got + i].text = mem_strdup(w->u[idx[i]].text))) st = STENO_ERR_NOMEM;
    *got += n;
  }
  free(idx), free(seg), free(of), free(zero);
  return st;
}

/* Frames, speakers and tags of the recording, then align_tags (piece ids
 * are columns of in->logp by now). */
static int align_all(const nt_align_input *in, const units *w, nt_word *out, size_t *got) {
  uint32_t ne = (in->valid + in->sub - 1) / in->sub, nf = ne * in->factor, V = in->ncols;
  uint32_t S = in->speaker_logits ? in->speakers : 0;
  double dur = (double)in->valid * in->hop / in->rate;
  frames_info fi = {in->logp, nf, V, dur / nf, MAX_WORD_FRAMES * in->factor * fmin(dur / nf, 0.08)};
  float *pe = mem_alloc((size_t)ne * S + 1, sizeof *pe), *sp = mem_alloc((size_t)nf * S + 1, sizeof *sp);
  int *tags = mem_alloc(w->n + 1, sizeof *tags), *speaker = mem_alloc(w->n + 1, sizeof *speaker);
  double *sim = mem_alloc((w->n + 2) * (S + 2) + 2 * S, sizeof *sim);
  int st = pe && sp && tags && speaker && sim ? 0 : STENO_ERR_NOMEM;
  int nt = st ? 0 : tag_list(w, tags);
  if (!st && S) {
    frame_probs(in, ne, nf, pe, sp);
    st = similarity(in->logp, nf, V, sp, S, w, tags, nt, sim);
    if (!st) st = assign(sim, nt, (int)S, speaker);
  }
  if (!st) st = align_tags(in, &fi, w, sp, tags, speaker, nt, dur, out, got);
  free(pe), free(sp), free(tags), free(speaker), free(sim);
  return st;
}

/* The transcript's words with their pieces (none where it gets no words). */
static int parse(const nt_pieces *p, const char *transcript, units *w) {
  memset(w, 0, sizeof *w);
  if (!p->n) return 0;
  char *text;
  TRY(clean_text(p, transcript, &text));
  bool timeable;
  int st = split_words(p, text, w, &timeable);
  free(text);
  if (st || !timeable) units_free(w), memset(w, 0, sizeof *w);
  return st;
}

static int by_id(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int nt_align_classes(const nt_pieces *p, const char *transcript, uint32_t classes, int **cols,
                     uint32_t *n) {
  *cols = NULL, *n = 0;
  units w;
  TRY(parse(p, transcript, &w));
  size_t total = 0;
  for (size_t i = 0; i < w.n; i++) total += w.u[i].n;
  int *c = w.n ? mem_alloc(total + 1, sizeof *c) : NULL;
  if (w.n && !c) return units_free(&w), STENO_ERR_NOMEM;
  size_t k = 0;
  for (size_t i = 0; i < w.n; i++)
    for (size_t j = 0; j < w.u[i].n; j++) c[k++] = w.u[i].ids[j];
  units_free(&w);
  if (!c) return 0;
  qsort(c, k, sizeof *c, by_id);
  size_t u = 0;
  for (size_t i = 0; i < k; i++)
    if (!u || c[i] != c[u - 1]) c[u++] = c[i];
  c[u++] = (int)classes - 1; /* pieces are below the blank (nt_pieces_load) */
  *cols = c, *n = (uint32_t)u;
  return 0;
}

/* Piece ids to columns of cols (ascending); false if one is missing. */
static bool to_columns(units *w, const int *cols, uint32_t n) {
  for (size_t i = 0; i < w->n; i++)
    for (size_t j = 0; j < w->u[i].n; j++) {
      const int *c = n > 1 ? bsearch(&w->u[i].ids[j], cols, n - 1, sizeof *cols, by_id) : NULL;
      if (!c) return false;
      w->u[i].ids[j] = (int)(c - cols);
    }
  return true;
}

int nt_align_words(const nt_pieces *p, const char *transcript, const nt_align_input *in,
                   nt_word **words, size_t *n) {
  *words = NULL, *n = 0;
  uint32_t nf = (in->valid + in->sub - 1) / in->sub * in->factor;
  if (!in->valid || !in->sub || !in->factor || in->ncols < 2 || !in->rate || nf > in->rows)
    return 0; /* nothing to align on */
  units w;
  TRY(parse(p, transcript, &w));
  nt_word *out = NULL;
  size_t got = 0;
  int st = 0;
  if (w.n && !to_columns(&w, in->cols, in->ncols))
    st = err_set(STENO_ERR_INVALID, "word times: a piece outside the columns given");
  if (!st && w.n && !(out = mem_alloc(w.n, sizeof *out))) st = STENO_ERR_NOMEM;
  if (!st && out) st = align_all(in, &w, out, &got);
  units_free(&w);
  if (st) return nt_words_free(out, got), st;
  sort_by_time(out, got);
  *words = out, *n = got;
  return 0;
}

void nt_words_free(nt_word *w, size_t n) {
  for (size_t i = 0; w && i < n; i++) free(w[i].text);
  free(w);
}
