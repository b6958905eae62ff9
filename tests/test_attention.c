/* attention: multi-head scaled dot-product attention over both layouts of
 * its inputs (q|k + separate v, packed q|k|v), with and without a key mask,
 * and NeMo's relative-position attention over a packed [q+u | k | v | q+v]
 * row; outputs into a slice of a wider buffer whose other values must stay. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/attention.h"
#include "gpu/internal.h"
#include "gpu_test.h"
#include "steno.h"

/* Rows of a host array as the GPU slice sees them. */
typedef struct {
  const float *x;
  size_t off, stride;
} rows_of;

#define AT(s, r, c) ((s).x[(s).off + (size_t)(r) * (s).stride + (c)])

/* The chunked mask of the next one() (NeMo's chunked_limited): 0, or the
 * chunk length and the chunks of left context. */
static size_t test_chunk, test_left;
/* The tolerance of the path under test: flash_tc's f16 scores (and
 * flash_mm's at precision 2 and 1), and the two products' hi + lo f16 scores
 * and values (in a numpy replica of these cases ~1e-6; with f16
 * probabilities and values ~5e-4, f16 alone 1.8–3.8e-3 at the sharp scale
 * below). */
#define TC_TOL 4e-3f
#define MM_TOL 1e-4f
static float test_tol = KERNEL_TOL;
/* The path under test takes plain attention at head sizes of 16·n up to 128
 * (the tensor-core attention): checked on each such call, and with
 * test_flash_mm those up to 64 without a chunked mask by flash_mm. */
static bool test_mm, test_flash_mm;

/* The tensor-core path a plain call of head size hd takes. */
static gpu_attn_path mm_path(size_t hd) {
  return test_flash_mm && hd <= 64 && !test_chunk ? GPU_ATTN_FLASH_MM : GPU_ATTN_MM;
}
/* The path under test rounds scores to f16 (flash_tc). */
static bool test_f16_scores;

/* Whether key j counts for query i under the chunked mask. */
static bool chunk_kept(size_t i, size_t j) {
  if (!test_chunk) return true;
  size_t ci = i / test_chunk, cj = j / test_chunk;
  return cj <= ci && ci - cj <= test_left;
}

/* The reference in double: o (at o_off, rows of o_stride) per head h and query
 * i; with pos.x, score(i, j) gains (q+v)_i·pos[j − i + t − 1]. */
static void ref_attention(float *o, size_t o_off, size_t o_stride, rows_of q, rows_of k,
                          rows_of v, rows_of qv, rows_of pos, const uint32_t *mask, size_t t,
                          size_t heads, size_t hd, double scale) {
  double *s = malloc(t * sizeof *s);
  for (size_t h = 0; h < heads; h++)
    for (size_t i = 0; i < t; i++) {
      double mx = -INFINITY, sum = 0;
      for (size_t j = 0; j < t; j++) {
        double d = 0;
        for (size_t c = h * hd; c < (h + 1) * hd; c++) {
          d += (double)AT(q, i, c) * AT(k, j, c);
          if (pos.x) d += (double)AT(qv, i, c) * AT(pos, j + t - 1 - i, c);
        }
        s[j] = scale * d;
        if ((!mask || mask[j]) && chunk_kept(i, j)) mx = fmax(mx, s[j]);
      }
      for (size_t j = 0; j < t; j++) {
        s[j] = (!mask || mask[j]) && chunk_kept(i, j) ? exp(s[j] - mx) : 0;
        sum += s[j];
      }
      for (size_t c = h * hd; c < (h + 1) * hd; c++) {
        double acc = 0;
        for (size_t j = 0; j < t; j++) acc += s[j] * AT(v, j, c);
        o[o_off + i * o_stride + c] = sum > 0 ? (float)(acc / sum) : 0.0f;
      }
    }
  free(s);
}

enum { SEPARATE, PACKED, RELATIVE };
static const char *layouts[] = {"q|k + v", "q|k|v", "q+u|k|v|q+v"};
enum { NO_MASK, MASK_TAIL, MASK_ALL };

/* One attention of t frames, `heads` heads of hd, inputs laid out as
 * `layout`, with a key mask (last 30% of keys, or all of them) or none. */
static void one(int layout, size_t t, size_t heads, size_t hd, int masking, float scale) {
  size_t d = heads * hd, pad = (3 * d + 63) / 64 * 64;
  /* Row strides as a fused projection writes them: outputs padded to 64,
   * then the dual outputs (q+v). */
  size_t stride = layout == SEPARATE ? 2 * d + 64 : layout == PACKED ? pad : pad + d;
  size_t xn = t * stride, vn = layout == SEPARATE ? t * d : 1;
  size_t pos_stride = d + 3, pn = layout == RELATIVE ? (2 * t - 1) * pos_stride : 1;
  size_t o_off = 5, o_stride = d + 9, on = o_off + t * o_stride;
  uint32_t seed = (uint32_t)(t * 1000 + hd * 10 + heads + layout);
  float *x = test_random(xn, seed), *vs = test_random(vn, seed + 1);
  float *pos = test_random(pn, seed + 2), *o0 = test_random(on, seed + 3);
  uint32_t *mask = malloc(t * sizeof *mask);
  for (size_t j = 0; j < t; j++)
    mask[j] = masking == NO_MASK || (masking == MASK_TAIL && j < t - t * 3 / 10);

  rows_of q = {x, 0, stride}, k = {x, d, stride}, v = {vs, 0, d}, qv = {0}, p = {0};
  if (layout != SEPARATE) v = (rows_of){x, 2 * d, stride};
  if (layout == RELATIVE) qv = (rows_of){x, pad, stride}, p = (rows_of){pos, 0, pos_stride};
  float *want = test_floats(on);
  memcpy(want, o0, on * sizeof *want);
  double sc = scale != 0 ? scale : 1.0 / sqrt((double)hd);
  ref_attention(want, o_off, o_stride, q, k, v, qv, p, masking == NO_MASK ? NULL : mask, t,
                heads, hd, sc);

  gpu_buffer *xb = test_upload(x, xn), *vb = test_upload(vs, vn), *pb = test_upload(pos, pn);
  gpu_buffer *ob = test_upload(o0, on), *mb = NULL, *sb;
  CHECK_OK(gpu_buffer_from(test_device(), mask, t * sizeof *mask, &mb));
  /* The scratch the path in use needs: flash attention's (plain only) is one float. */
  size_t scratch = layout == RELATIVE || test_chunk
                       ? gpu_attention_scratch((uint32_t)t, (uint32_t)heads)
                       : gpu_attention_scratch_on(test_device(), (uint32_t)t, (uint32_t)heads,
                                                  (uint32_t)hd);
  if (test_tol != KERNEL_TOL) scratch += 4 * t * d + 2 * t * d; /* flash_tc's f16 copies */
  CHECK_OK(gpu_buffer_new(test_device(), scratch * 4, &sb));
  gpu_buffer *vbuf = layout == SEPARATE ? vb : xb;
  gpu_attn a = {
      .q = {xb, 0, (uint32_t)stride},
      .k = {xb, (uint32_t)d, (uint32_t)stride},
      .v = {vbuf, (uint32_t)v.off, (uint32_t)v.stride},
      .o = {ob, (uint32_t)o_off, (uint32_t)o_stride},
      .mask = masking == NO_MASK ? NULL : mb,
      .scores = sb,
      .t = (uint32_t)t,
      .heads = (uint32_t)heads,
      .head_dim = (uint32_t)hd,
      .scale = scale,
      .chunk = (uint32_t)test_chunk,
      .left_chunks = (uint32_t)test_left,
  };
  gpu_rec *rec = test_rec();
  if (layout == RELATIVE) {
    a.qv = (gpu_attn_slice){xb, (uint32_t)pad, (uint32_t)stride};
    a.pos = (gpu_attn_slice){pb, 0, (uint32_t)pos_stride};
    gpu_rel_attention(rec, &a);
  } else {
    gpu_attention(rec, &a);
  }
  bool mm = test_mm && layout != RELATIVE && hd % 16 == 0;
  CHECK(!mm || gpu_attention_path(test_device(), &a, false) == mm_path(hd),
        "t=%zu, %zu heads of %zu: not on the tensor cores' path %d", t, heads, hd, (int)mm_path(hd));
  float *got = test_run_read(rec, ob, on);
  static const char *maskings[] = {"", " mask 30%", " all masked"};
  char what[160];
  snprintf(what, sizeof what, "attention %s t=%zu heads=%zu head_dim=%zu scale=%g%s chunk %zu/%zu",
           layouts[layout], t, heads, hd, sc, maskings[masking], test_chunk, test_left);
  check_close(what, got, want, on, test_tol);
  if (masking == MASK_ALL) {
    int finite = 1;
    for (size_t i = 0; i < on; i++) finite &= isfinite(got[i]);
    CHECK(finite, "%s: not finite", what);
  }
  gpu_rec_free(rec);
  gpu_buffer_free(xb), gpu_buffer_free(vb), gpu_buffer_free(pb), gpu_buffer_free(ob);
  gpu_buffer_free(mb), gpu_buffer_free(sb);
  free(x), free(vs), free(pos), free(o0), free(mask), free(want), free(got);
}

/* A padded batch (relative or packed plain): clips of t rows, lens[c] their
 * own; each clip's own rows against the reference over that clip alone
 * (the pos rows of its length are the shared table's middle), padded rows
 * finite. The padding's values are random: a key read from it shows. */
static void batch(int layout, size_t t, const uint32_t *lens, size_t n, size_t heads, size_t hd) {
  size_t d = heads * hd, pad = (3 * d + 63) / 64 * 64, stride = layout == PACKED ? pad : pad + d;
  size_t rows = n * t, xn = rows * stride, pos_stride = d + 3, pn = (2 * t - 1) * pos_stride;
  size_t o_stride = d + 9, on = rows * o_stride;
  float *x = test_random(xn, 70), *pos = test_random(pn, 71), *o0 = test_random(on, 72);
  gpu_buffer *xb = test_upload(x, xn), *pb = test_upload(pos, pn), *ob = test_upload(o0, on), *sb;
  gpu_buffer *lb = test_upload((const float *)lens, n);
  size_t scratch = n * gpu_attention_scratch((uint32_t)t, (uint32_t)heads);
  if (test_tol != KERNEL_TOL) scratch += 4 * rows * d + 2 * t * d; /* flash_tc's f16 copies */
  CHECK_OK(gpu_buffer_new(test_device(), scratch * 4, &sb));
  gpu_attn a = {
      .q = {xb, 0, (uint32_t)stride},
      .k = {xb, (uint32_t)d, (uint32_t)stride},
      .v = {xb, 2 * (uint32_t)d, (uint32_t)stride},
      .o = {ob, 0, (uint32_t)o_stride},
      .scores = sb,
      .t = (uint32_t)t,
      .heads = (uint32_t)heads,
      .head_dim = (uint32_t)hd,
      .batch = (uint32_t)n,
      .lens = lb,
  };
  gpu_rec *rec = test_rec();
  if (layout == RELATIVE) {
    a.qv = (gpu_attn_slice){xb, (uint32_t)pad, (uint32_t)stride};
    a.pos = (gpu_attn_slice){pb, 0, (uint32_t)pos_stride};
    gpu_rel_attention(rec, &a);
  } else {
    gpu_attention(rec, &a);
  }
  CHECK(!test_mm || layout == RELATIVE || hd % 16 ||
            gpu_attention_path(test_device(), &a, false) == mm_path(hd),
        "batch of %zu × %zu, %zu heads of %zu: not on the tensor cores", n, t, heads, hd);
  float *got = test_run_read(rec, ob, on), *want = test_floats(on);
  memcpy(want, got, on * sizeof *want);
  int finite = 1;
  for (size_t i = 0; i < on; i++) finite &= isfinite(got[i]);
  for (size_t c = 0; c < n; c++) {
    size_t base = c * t * stride, L = lens[c];
    rows_of q = {x, base, stride}, k = {x, base + d, stride}, v = {x, base + 2 * d, stride};
    rows_of qv = {0}, p = {0};
    if (layout == RELATIVE)
      qv = (rows_of){x, base + pad, stride}, p = (rows_of){pos, (t - L) * pos_stride, pos_stride};
    ref_attention(want, c * t * o_stride, o_stride, q, k, v, qv, p, NULL, L, heads, hd,
                  1.0 / sqrt((double)hd));
  }
  char what[128];
  snprintf(what, sizeof what, "attention %s batch of %zu × %zu, %zu heads of %zu", layouts[layout],
           n, t, heads, hd);
  CHECK(finite, "%s: not finite", what);
  check_close(what, got, want, on, test_tol);
  gpu_rec_free(rec);
  gpu_buffer_free(xb), gpu_buffer_free(pb), gpu_buffer_free(ob), gpu_buffer_free(sb);
  gpu_buffer_free(lb);
  free(x), free(pos), free(o0), free(want), free(got);
}

static void batches(void) {
  const uint32_t lens[] = {37, 12, 40, 1, 39, 20, 40};
  batch(RELATIVE, 40, lens, 5, 2, 32); /* the tiny TDT's 2 heads of 32 */
  batch(RELATIVE, 40, lens, 7, 8, 40);
  batch(RELATIVE, 100, (const uint32_t[]){100, 65, 3}, 3, 8, 128); /* 0.6B's 8 heads of 128 */
  batch(PACKED, 40, lens, 5, 2, 64);
  /* Three key tiles of 128 (t not a multiple of 4), clips ending inside each. */
  batch(PACKED, 258, (const uint32_t[]){258, 129, 1}, 3, 2, 64);
  /* Bad batches: no lengths, too few, a key mask as well. */
  gpu_buffer *big = test_random_buffer(1 << 16, 73), *small = test_random_buffer(2, 74);
  gpu_attn a = {.q = {big, 0, 64}, .k = {big, 0, 64}, .v = {big, 0, 64}, .o = {big, 0, 64},
                .scores = big, .t = 8, .heads = 2, .head_dim = 32, .batch = 4};
  for (int i = 0; i < 3; i++) {
    a.lens = i == 0 ? NULL : i == 1 ? small : big;
    a.mask = i == 2 ? big : NULL;
    gpu_rec *rec = test_rec();
    gpu_attention(rec, &a);
    CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "bad batch %d accepted", i);
    gpu_rec_free(rec);
  }
  gpu_buffer_free(big), gpu_buffer_free(small);
}

/* Calls the recorder must refuse with STENO_ERR_INVALID. */
static void bad_calls(void) {
  const uint32_t t = 8, heads = 2, hd = 8, d = heads * hd;
  gpu_buffer *x = test_random_buffer(t * 3 * d, 1), *o = test_random_buffer(t * d, 2);
  gpu_buffer *s = test_random_buffer(gpu_attention_scratch(t, heads), 3);
  gpu_buffer *small = test_random_buffer(heads * t * t - 1, 4); /* one score short */
  gpu_attn good = {.q = {x, 0, 3 * d}, .k = {x, d, 3 * d}, .v = {x, 2 * d, 3 * d},
                   .o = {o, 0, d}, .scores = s, .t = t, .heads = heads, .head_dim = hd};
  for (int i = 0; i < 8; i++) {
    gpu_attn a = good;
    bool rel = false;
    switch (i) {
      case 0: break; /* the good call runs */
      case 1: a.t = 0; break;
      case 2: a.scores = small; break;
      case 3: a.v.offset = 2 * d + 1; break;              /* past the end */
      case 4: a.o.stride = d - 1; break;                  /* rows overlap */
      case 5: a.pos = (gpu_attn_slice){x, 0, d}; break;   /* positions in plain attention */
      case 6: rel = true; a.qv = good.q; break;           /* relative without positions */
      case 7: /* pos of t rows, not 2t − 1 */
        rel = true;
        a.qv = good.q, a.pos = (gpu_attn_slice){o, 0, d};
        break;
    }
    gpu_rec *rec = test_rec();
    if (rel) gpu_rel_attention(rec, &a);
    else gpu_attention(rec, &a);
    int st = gpu_rec_run(rec);
    /* Flash attention reads no scores: a small scratch is fine there. */
    bool flash = gpu_attention_scratch_on(test_device(), t, heads, hd) == 1;
    int want = i == 0 || (i == 2 && flash) ? 0 : STENO_ERR_INVALID;
    CHECK(st == want, "bad attention call %d: status %d", i, st);
    gpu_rec_free(rec);
  }
  /* flash_tc's experiments: refused where it did not pass its probe, and for
   * a block size it has no variant of, or t shorter than a block (t = 8 here). */
  for (uint32_t kb = 7; kb <= 16; kb += 9) {
    gpu_rec *rec = test_rec();
    gpu_flash_tc_experiment(rec, &good, false, kb, 0);
    CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "flash_tc experiment with %u keys per block", kb);
    gpu_rec_free(rec);
  }
  gpu_buffer_free(x), gpu_buffer_free(o), gpu_buffer_free(s), gpu_buffer_free(small);
}

static void attentions(void) {
  const size_t hds[] = {40, 48, 56, 64, 128}, ts[] = {5, 37, 100, 300};
  int n = 0;
  for (int hi = 0; hi < 5; hi++)
    for (int ti = 0; ti < 4; ti++, n++) {
      size_t heads = 2 + n % 3;
      one(SEPARATE, ts[ti], heads, hds[hi], NO_MASK, 0);
      one(PACKED, ts[ti], heads, hds[hi], NO_MASK, 0);
      one(SEPARATE, ts[ti], heads, hds[hi], MASK_TAIL, 0);
      one(PACKED, ts[ti], heads, hds[hi], MASK_TAIL, 0);
    }
  one(PACKED, 37, 2, 64, NO_MASK, 0.3f);
  /* Sharp scores (up to ~±25, as trained models' are): a score's rounding
   * moves the probabilities most here. Not on flash_tc, whose f16 scores are
   * ~6e-3 off there (H200) and which is therefore no default. */
  if (!test_f16_scores) {
    one(PACKED, 300, 2, 64, NO_MASK, 3.0f);
    one(SEPARATE, 300, 3, 128, MASK_TAIL, 3.0f);
  }
  one(PACKED, 37, 2, 64, MASK_ALL, 0);
  one(PACKED, 1000, 2, 64, MASK_TAIL, 0); /* 63 tiles each way */
  /* Past lavapipe's loop cap for flash.comp (wrong there before flash_fits's bound was
   * measured: 230 361 of 238 505 values off); the portable path on CPU devices. */
  one(PACKED, 900, 2, 128, MASK_TAIL, 0);

  const size_t rel_ts[] = {5, 37, 100}, rel_hds[] = {40, 128};
  for (int hi = 0; hi < 2; hi++)
    for (int ti = 0; ti < 3; ti++)
      one(RELATIVE, rel_ts[ti], 2 + (hi + ti) % 2, rel_hds[hi], NO_MASK, 0);
  one(RELATIVE, 37, 3, 40, MASK_TAIL, 0);
  /* chunked_limited: Nemotron's 14-frame chunks with 4 and 5 chunks of left
   * context, a tiny 4/2 one, on relative and plain attention (no flash there). */
  const size_t chunks[][2] = {{14, 4}, {14, 5}, {4, 2}, {1, 0}};
  for (int c = 0; c < 4; c++) {
    test_chunk = chunks[c][0], test_left = chunks[c][1];
    one(RELATIVE, c == 2 ? 37 : 100, 2, 64, NO_MASK, 0);
    one(PACKED, 100, 2, 64, c == 1 ? MASK_TAIL : NO_MASK, 0);
  }
  /* The tensor-core path only: rows whose every key is excluded (the key
   * mask over their whole chunk: rows 28.. of 37, 212.. of 300) get 0, as
   * the reference; the portable softmax spreads such a row over the
   * chunk-excluded keys' −1e30 scores instead. */
  test_chunk = 4, test_left = 0;
  if (test_mm) one(PACKED, 37, 2, 64, MASK_TAIL, 0), one(PACKED, 300, 3, 48, MASK_TAIL, 0);
  test_chunk = test_left = 0;
  one(PACKED, 300, 2, 64, MASK_ALL, 0); /* three key tiles of 128, no key kept */
  batches();
  bad_calls();
}

/* The scratch: the scores, then (max, sum) per row and key tile of 128. */
static void scratch_sizes(void) {
  CHECK(gpu_attention_scratch(300, 8) == 8 * 300 * 300 + 8 * 300 * 3 * 2, "scratch at t = 300");
  CHECK(gpu_attention_scratch(128, 2) == 2 * 128 * 128 + 2 * 128 * 1 * 2, "scratch at t = 128");
  CHECK(gpu_attention_scratch(129, 1) == 129 * 129 + 129 * 2 * 2, "scratch at t = 129");
}

int main(void) {
  /* The portable path, then flash attention, then flash attention on the
   * tensor cores, then scores and values on the tensor cores, each where its
   * probe passed and alone (the others off). The tensor-core paths round
   * their inputs (and probabilities) to f16: their own tolerance, and room
   * for flash_tc's f16 copies in the scores scratch (it takes the portable
   * path otherwise). */
  gpu_device *d = test_device();
  scratch_sizes();
  static const gpu_fast_kernel kinds[] = {GPU_FAST_ATTENTION, GPU_FAST_ATTENTION_TC,
                                          GPU_FAST_ATTENTION_MM, GPU_FAST_ATTENTION_CPU};
  bool passed[4];
  for (int i = 0; i < 4; i++) passed[i] = d->fast[kinds[i]];
  /* Subgroup arithmetic is all the CPU devices' scores need: where offered, a failed probe is our bug. */
  if (gpu_fast_offered(d, GPU_FAST_ATTENTION_CPU))
    CHECK(passed[3], "attention_scores_cpu failed its probe");
  static const char *paths[] = {"portable", "flash", "flash on the tensor cores",
                                "scores and values on the tensor cores",
                                "flash_mm on the tensor cores (the two products above 64)",
                                "the portable path with the CPU devices' scores"};
  for (int path = 0; path < 6; path++) {
    /* path 4: the tensor-core attention with flash_mm; 5: attention_scores_cpu */
    int kind = path == 4 ? 2 : path == 5 ? 3 : path - 1;
    if (path && !passed[kind]) continue;
    gpu_set_fast(d, path > 0);
    for (int i = 0; i < 4; i++) d->fast[kinds[i]] = path && i == kind;
    test_mm = path == 3 || path == 4;
    test_tol = test_mm ? MM_TOL : path == 2 ? TC_TOL : KERNEL_TOL;
    test_flash_mm = path == 4;
    gpu_attention_mm_flash(path == 4);
    test_f16_scores = path == 2;
    printf("attention: %s\n", paths[path]);
    CHECK(gpu_attention_scratch_on(d, 300, 8, 128) == (path == 1 ? 1 : gpu_attention_scratch(300, 8)),
          "scratch on the %s path", paths[path]);
    /* The tensor-core path in each scores tile, then each values tile, and
     * flash_mm in each shape (the defaults last). */
    uint32_t shapes = path == 3   ? gpu_attention_mm_tile_pairs()
                      : path == 4 ? gpu_attention_mm_flash_shapes()
                                  : 1;
    for (uint32_t tile = shapes; tile-- > 0;) {
      uint32_t sc, va;
      gpu_attention_mm_tile_pair(path == 3 ? tile : 0, &sc, &va);
      gpu_attention_mm_tile(sc, va);
      if (path == 3) printf("  scores tile %u, values tile %u\n", sc, va);
      if (path == 4) printf("  %s\n", gpu_attention_mm_flash_shape(tile));
      attentions();
    }
    /* flash_mm's default shape with fewer hi + lo products (gpu_attention_mm_precision):
     * f16 in them, so flash_tc's tolerance; at 1 its scores are f16 as flash_tc's, so
     * not the sharp cases either (the H100: 5.9e-3 off at t 300, head_dim 128). */
    for (uint32_t prec = 2; path == 4 && prec >= 1; prec--) {
      gpu_attention_mm_precision(prec);
      test_tol = TC_TOL;
      test_f16_scores = prec == 1;
      printf("  precision %u (%s)\n", prec, prec == 2 ? "hi + lo scores, f16 p and v" : "f16 alone");
      attentions();
      gpu_attention_mm_precision(3);
      test_f16_scores = false;
    }
  }
  for (int i = 0; i < 4; i++) d->fast[kinds[i]] = passed[i];
  gpu_attention_mm_flash(true);
  return check_done();
}
