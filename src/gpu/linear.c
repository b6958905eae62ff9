#include "gpu/linear.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/half.h"
#include "base/mem.h"
#include "gpu/decode.h"
#include "gpu/internal.h"
#include "gpu/norm.h"

/* Columns per GEMM tile: layers are padded to it. */
#define TILE 64

/* Split k (portable kernel): below SPLIT_TILES tiles the GPU has too few
 * workgroups in flight (the H200: 144 tiles for 132 SMs ran at 1.6 TFLOP/s),
 * so k is cut into pieces of at least SPLIT_MIN_K, summed by gemm_reduce
 * through the device's scratch of SPLIT_BYTES. */
#define SPLIT_TILES 256
#define SPLIT_MIN_K 512
/* gemm_tc on a device whose SM count is known: as many pieces as keep its
 * workgroups within one wave (a 128×128 workgroup fills an SM), pieces of at
 * least SPLIT_MIN_K_TC. The H200 (132 SMs), best of each tile's split counts
 * at Parakeet's m = 138 (docs/perf.md, thirteenth session): 64 tiles best in 2
 * pieces (33.6 µs against 37.5 in 4), 16 in 8 (19.2 against 22.4 in 4 at k
 * 1 024), 48 in 3 (31.8) with 2 (this rule's, 33.3) before 4 (34.0);
 * Whisper's 1 500 × 1 280 (120 tiles) in one (47 µs against 72 in three and
 * their reduce). Elsewhere the SPLIT_TILES rule (split_count). */
#define SPLIT_MIN_K_TC 128
#define SPLIT_MAX 8
#define SPLIT_BYTES ((size_t)32 << 20)
/* a in f16 for gemm_tc from A16_MIN_M rows (gpu_gemm_a16), through the
 * device's scratch of A16_BYTES (m·k halves: a 64-clip batch's FFN down,
 * 8 832 × 4 096, fits). */
#define A16_MIN_M 1024u
#define A16_BYTES ((size_t)96 << 20)

/* gemm_cpu.comp's block, rows of a × outputs per workgroup (its R × C):
 * on lavapipe 8 × 8 beat 4 × 4, 8 × 4, 4 × 8, 16 × 4 and 16 × 8 on the tiny
 * model and at 138 × 4096 × 1024 (docs/perf.md, eleventh session). */
#define CPU_ROWS 8
#define CPU_COLS 8

/* Rows from which the 128×128 tile pays: below it too few workgroups fill the GPU. */
#define GEMM_BIG_M 512

/* The fast variants' kernels and tiles: SG_M × SG_N subgroups, each TM × TN
 * matrices of 16×16 (gemm_tiled.comp's and gemm_tc.comp's specialization;
 * gemm_coop's is fixed). */
const gpu_gemm_tile gpu_gemm_tiles[GPU_GEMM_VARIANTS] = {
    [GPU_GEMM_COOP64] = {"gemm_coop", 2, 2, 2, 2, false},
    [GPU_GEMM_TILED64] = {"gemm_tiled", 2, 2, 2, 2, false},
    [GPU_GEMM_TILED128] = {"gemm_tiled", 2, 4, 4, 2, false},
    [GPU_GEMM_TC64] = {"gemm_tc", 2, 2, 2, 4, true, 32},
    [GPU_GEMM_TC128] = {"gemm_tc", 2, 4, 4, 2, true, 32},
    /* The same tile on twice the subgroups, each with a quarter of the
     * accumulators: the H200 ran it 1.3–5× faster at m ≥ 1500 (docs/perf.md). */
    [GPU_GEMM_TC128W] = {"gemm_tc", 4, 4, 2, 2, true, 32},
    /* ... with k in steps of 64: half the steps (each waits on its loads'
     * latency), one shared stage. */
    [GPU_GEMM_TC128K] = {"gemm_tc", 4, 4, 2, 2, true, 64},
    /* cooperative_matrix2's workgroup-scope matrices (gemm_cm2.sh): the
     * driver stages the loads. It always reads a in f16 and leaves its sums
     * to gemm_reduce, even in one piece (it has no epilogue of its own). */
    [GPU_GEMM_CM2] = {"gemm_cm2", 2, 4, 4, 2, true, 32},
    /* ... with its loads unchecked and k by 64 (ggml's tile of this size):
     * only where n is a multiple of 128 and k and its pieces of 256. */
    [GPU_GEMM_CM2U] = {"gemm_cm2u", 2, 4, 4, 2, true, 64},
    /* ... and 256 × 128 (ggml's large tile: twice the rows a workgroup
     * shares W's loads with; for large m). */
    [GPU_GEMM_CM2UL] = {"gemm_cm2u", 2, 4, 8, 2, true, 64},
};

/* gemm_tc's tiles are the ones with a k step (gemm_cm2 has gemm_tc's contract). */
static bool is_tc(gpu_gemm_variant v) { return gpu_gemm_tiles[v].bk != 0; }

/* gemm_cm2u's loop takes 4 steps of its k step a trip (gemm_cm2u.sh). */
#define CM2U_TRIP 4

/* Whether gemm_tc passed its probe here (Q8_0 layers then get an f16 copy; it
 * reads BF16 as stored, rounding to f16 when staging). */
static bool tc_passed(const gpu_device *d) {
  for (int v = 1; v < GPU_GEMM_VARIANTS; v++)
    if (is_tc((gpu_gemm_variant)v) && d->gemm_ok[v]) return true;
  return false;
}

/* Tile v's kernel; a16: gemm_tc's ATYPE 1 (a read in f16). */
static gpu_kernel *tile_kernel(gpu_rec *rec, gpu_gemm_variant v, gpu_wtype type, bool a16) {
  const gpu_gemm_tile *t = &gpu_gemm_tiles[v];
  uint32_t spec[8] = {type, t->sg_m, t->sg_n, t->tm, t->tn, 32 * t->sg_m * t->sg_n, t->bk, 1};
  return gpu_rec_kernel(rec, t->kernel, spec, a16 ? 8 : v == GPU_GEMM_COOP64 ? 1 : is_tc(v) ? 7 : 6);
}

gpu_kernel *gpu_gemm_kernel(gpu_rec *rec, gpu_gemm_variant v, gpu_wtype type) {
  return tile_kernel(rec, v, type, false);
}

gpu_kernel *gpu_gemm_kernel_a16(gpu_rec *rec, gpu_gemm_variant v, gpu_wtype type) {
  return tile_kernel(rec, v, type, true);
}

void gpu_gemm_force(gpu_device *d, gpu_gemm_variant v) { d->gemm_force = v; }
void gpu_gemm_a16(gpu_device *d, uint32_t min_m) { d->a16_min_m = min_m; }
bool gpu_gemm_variant_ok(const gpu_device *d, gpu_gemm_variant v) { return d->gemm_ok[v]; }
bool gpu_gemm_variant_used(const gpu_device *d, gpu_gemm_variant v) {
  for (int q = 0; q < 2; q++)
    for (int big = 0; big < 2; big++)
      if (d->gemm_pick[q][big] == v) return true;
  return false;
}

/* How many pieces to cut k into (1: none): with sms (gemm_tc on a device
 * whose SM count is known) as many as keep the workgroups within one wave,
 * else enough for SPLIT_TILES workgroups; either way pieces of at least
 * min_k, at most SPLIT_MAX, their partial sums within SPLIT_BYTES. */
static uint32_t split_count(uint32_t tiles, uint32_t sms, uint32_t m, uint32_t n, uint32_t k,
                            uint32_t min_k) {
  if (!tiles) return 1; /* m or n is 0 */
  uint32_t s = sms ? sms / tiles : tiles >= SPLIT_TILES ? 1 : (SPLIT_TILES + tiles - 1) / tiles;
  if (s > k / min_k) s = k / min_k;
  if (s > SPLIT_MAX) s = SPLIT_MAX;
  while (s > 1 && (size_t)s * m * n * sizeof(float) > SPLIT_BYTES) s--;
  return s ? s : 1;
}

gpu_gemm_variant gpu_gemm_default(const gpu_device *d, bool big) {
  /* gemm_cm2's last: untimed, the others have run on more devices. */
  static const gpu_gemm_variant order[2][GPU_GEMM_VARIANTS - 1] = {
      {GPU_GEMM_TC64, GPU_GEMM_TC128, GPU_GEMM_TC128W, GPU_GEMM_TC128K, GPU_GEMM_TILED64,
       GPU_GEMM_COOP64, GPU_GEMM_TILED128, GPU_GEMM_CM2, GPU_GEMM_CM2U, GPU_GEMM_CM2UL},
      {GPU_GEMM_TC128W, GPU_GEMM_TC128K, GPU_GEMM_TC128, GPU_GEMM_TC64, GPU_GEMM_TILED128,
       GPU_GEMM_TILED64, GPU_GEMM_COOP64, GPU_GEMM_CM2, GPU_GEMM_CM2UL, GPU_GEMM_CM2U}};
  for (int i = 0; i < GPU_GEMM_VARIANTS - 1; i++)
    if (d->gemm_ok[order[big][i]]) return order[big][i];
  return GPU_GEMM_AUTO;
}

/* The fast variant for m rows of type t, or GPU_GEMM_AUTO for the portable
 * kernel: a forced one, every passed one (gpu_set_fast on), or the one timed
 * fastest at device open. */
static gpu_gemm_variant pick(const gpu_device *d, uint32_t m, gpu_wtype t) {
  if (d->gemm_force) return d->gemm_ok[d->gemm_force] ? d->gemm_force : GPU_GEMM_AUTO;
  bool big = m >= GEMM_BIG_M;
  if (d->use_fast == GPU_FAST_ALL) return gpu_gemm_default(d, big);
  return d->use_fast == GPU_FAST_CHOSEN ? d->gemm_pick[t == GPU_Q8_0][big] : GPU_GEMM_AUTO;
}

size_t gpu_wtype_bytes(gpu_wtype t, size_t count) {
  switch (t) {
    case GPU_F32: return count * 4;
    case GPU_F16:
    case GPU_BF16: return count * 2;
    case GPU_Q8_0: return count / 32 * 34;
  }
  return 0;
}

/* The bias (dual outputs after the n padded rows) as gpu_linear_new lays it out. */
static int linear_bias(gpu_device *dev, const float *bias, size_t nbias, gpu_linear *out) {
  size_t n = out->n, dual = out->dual;
  float *b = mem_alloc(n + dual, sizeof *b);
  if (!b) return STENO_ERR_NOMEM;
  if (nbias) {
    memcpy(b, bias, (nbias - dual) * sizeof *b);
    memcpy(b + n, bias + (nbias - dual), dual * sizeof *b);
  }
  int st = gpu_buffer_from(dev, b, (n + dual) * sizeof *b, &out->bias);
  free(b);
  return st;
}

/* gpu_linear_new's weights where no row needs padding (wk = k, not Q8_0):
 * each part uploaded at its place, then the zero rows up to n. */
static int linear_direct(gpu_device *dev, const gpu_weight *parts, int nparts, const float *bias,
                         size_t nbias, gpu_linear *out) {
  size_t row = gpu_wtype_bytes(out->type, out->k), at = 0;
  int st = gpu_buffer_new(dev, out->n * row, &out->w);
  for (int i = 0; !st && i < nparts; i++) {
    st = gpu_upload(out->w, at, parts[i].data, parts[i].rows * row);
    at += parts[i].rows * row;
  }
  if (!st && at < out->n * row) {
    uint8_t *zeros = mem_alloc(out->n * row - at, 1);
    st = zeros ? gpu_upload(out->w, at, memset(zeros, 0, out->n * row - at), out->n * row - at)
               : STENO_ERR_NOMEM;
    free(zeros);
  }
  if (!st) st = linear_bias(dev, bias, nbias, out);
  if (st) gpu_linear_free(out);
  return st;
}

void gpu_weights_to_f16(gpu_rec *rec, const gpu_linear *l, gpu_buffer *dst) {
  if (l->type != GPU_BF16 && l->type != GPU_Q8_0)
    return (void)gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "weights_f16: type %d", (int)l->type));
  uint32_t spec = l->type, words = l->n * l->wk / 2; /* wk is a multiple of 32 */
  uint32_t groups = (words + 255) / 256, gx = groups < 65535 ? groups : 65535;
  gpu_buffer *bufs[] = {l->w, l->scales ? l->scales : l->w, dst};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "weights_f16", &spec, 1), bufs, 3, &words, sizeof words,
               gx, (groups + gx - 1) / gx, 1);
}

/* gemm_tc's f16 copy of BF16 or Q8_0 weights, made on the GPU from the
 * uploaded ones (zeros past the rows and past k stay zeros). */
static int linear_f16(gpu_device *dev, gpu_linear *out) {
  TRY(gpu_buffer_new(dev, (size_t)out->n * out->wk * 2, &out->w16));
  gpu_rec *rec;
  TRY(gpu_load_work(dev, &rec));
  gpu_weights_to_f16(rec, out, out->w16);
  return gpu_load_work_done(dev);
}

/* The padded layout in one host buffer (rows of k weights put at wk; the
 * rest zeros from mem_alloc). */
static int linear_padded(gpu_device *dev, const gpu_weight *parts, int nparts, const float *bias,
                         size_t nbias, gpu_linear *out) {
  gpu_wtype type = out->type;
  size_t k = out->k, wk = out->wk, wbytes = gpu_wtype_bytes(type, (size_t)out->n * wk);
  uint8_t *host = mem_alloc(wbytes, 1);
  int st = host ? 0 : STENO_ERR_NOMEM;
  size_t at = 0; /* weights placed so far */
  for (int i = 0; !st && i < nparts; i++) {
    for (size_t r = 0; r < parts[i].rows; r++)
      memcpy(host + gpu_wtype_bytes(type, at + r * wk),
             (const uint8_t *)parts[i].data + gpu_wtype_bytes(type, r * k), gpu_wtype_bytes(type, k));
    at += (size_t)parts[i].rows * wk;
  }
  if (!st) st = gpu_buffer_from(dev, host, wbytes, &out->w);
  if (!st) st = linear_bias(dev, bias, nbias, out);
  free(host);
  return st;
}

/* Q8_0 blocks (f16 d, 32 × int8) → int8 data and f16 scales, separately. */
static void split_q8(const uint8_t *blocks, size_t nblocks, uint8_t *data, uint8_t *scales) {
  for (size_t b = 0; b < nblocks; b++) {
    memcpy(scales + 2 * b, blocks + 34 * b, 2);
    memcpy(data + 32 * b, blocks + 34 * b + 2, 32);
  }
}

void gpu_q8_split_force(gpu_device *d, bool on_gpu) { d->q8_gpu = on_gpu; }

/* Q8_0 weights (k a multiple of 32) as int8 data [n][k] and f16 scales
 * [n][k/32], the rows past the parts' zeros, with no host copy: where the
 * device's memory is mapped (unified) split by the CPU straight into it;
 * else the file's blocks (an f16 scale, 32 int8) go to load scratch as they
 * are, each part at its place, and q8_split.comp splits them on the GPU. */
static int linear_q8(gpu_device *dev, const gpu_weight *parts, int nparts, const float *bias,
                     size_t nbias, gpu_linear *out) {
  size_t blocks = (size_t)out->rows * out->k / 32, all = (size_t)out->n * out->k / 32;
  if (all / 2 > UINT32_MAX || blocks > UINT32_MAX)
    return err_set(STENO_ERR_UNSUPPORTED, "Q8_0 layer of %zu blocks", all);
  TRY(gpu_buffer_new(dev, all * 32, &out->w));
  TRY(gpu_buffer_new(dev, all * 2, &out->scales));
  TRY(linear_bias(dev, bias, nbias, out));
  uint8_t *data = out->w->map, *scales = out->scales->map;
  if (data && scales && !dev->q8_gpu) {
    size_t at = 0;
    for (int i = 0; i < nparts; i++) {
      size_t c = (size_t)parts[i].rows * out->k / 32;
      split_q8(parts[i].data, c, data + 32 * at, scales + 2 * at);
      at += c;
    }
    memset(data + 32 * at, 0, 32 * (all - at));
    memset(scales + 2 * at, 0, 2 * (all - at));
    return 0;
  }
  gpu_buffer *raw;
  TRY(gpu_load_scratch(dev, (blocks * 34 + 3) & ~(size_t)3, &raw));
  size_t at = 0;
  for (int i = 0; i < nparts; i++) {
    size_t bytes = (size_t)parts[i].rows * out->k / 32 * 34;
    TRY(gpu_upload(raw, at, parts[i].data, bytes));
    at += bytes;
  }
  gpu_rec *rec;
  TRY(gpu_load_work(dev, &rec));
  uint32_t push[2] = {(uint32_t)blocks, (uint32_t)(all / 2)};
  uint32_t groups = (push[1] + 255) / 256, gx = groups < 65535 ? groups : 65535;
  gpu_buffer *bufs[] = {raw, out->w, out->scales};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "q8_split", NULL, 0), bufs, 3, push, sizeof push, gx,
               (groups + gx - 1) / gx, 1);
  return gpu_load_work_done(dev);
}

int gpu_linear_new(gpu_device *dev, gpu_wtype type, uint32_t k, const gpu_weight *parts,
                   int nparts, const float *bias, size_t nbias, gpu_linear *out) {
  memset(out, 0, sizeof *out);
  if (k == 0 || k > (1u << 24) || nparts < 1 || type > GPU_Q8_0 || (type == GPU_Q8_0 && k % 32))
    return err_set(STENO_ERR_UNSUPPORTED, "linear layer of type %d with k = %u", (int)type, k);
  uint32_t wk = (k + 31) / 32 * 32;
  size_t rows = 0;
  for (int i = 0; i < nparts; i++) rows += parts[i].rows;
  size_t n = (rows + TILE - 1) / TILE * TILE;
  if (rows == 0 || n > UINT32_MAX / 2)
    return err_set(STENO_ERR_INVALID, "linear layer with %zu rows", rows);
  size_t dual = nbias > rows ? nbias - rows : 0;
  if ((nbias && nbias < rows) || dual > rows)
    return err_set(STENO_ERR_INVALID, "linear layer %u→%zu: %zu biases", k, rows, nbias);
  out->n = (uint32_t)n;
  out->rows = (uint32_t)rows;
  out->k = k;
  out->wk = wk;
  out->dual = (uint32_t)dual;
  out->type = type;

  /* Rows of whole 32-weight blocks go to the device as they are, each part at
   * its place, then zero rows up to n (Q8_0: split there by a kernel): no host
   * copy of a large model's weights. Otherwise padded with zero rows (and
   * columns up to wk) on the host. */
  int st = type == GPU_Q8_0 ? linear_q8(dev, parts, nparts, bias, nbias, out)
           : wk == k        ? linear_direct(dev, parts, nparts, bias, nbias, out)
                            : linear_padded(dev, parts, nparts, bias, nbias, out);
  if (!st && type == GPU_Q8_0 && tc_passed(dev)) st = linear_f16(dev, out);
  if (st) gpu_linear_free(out);
  return st;
}

void gpu_linear_free(gpu_linear *l) {
  gpu_buffer_free(l->w);
  gpu_buffer_free(l->scales);
  gpu_buffer_free(l->w16);
  gpu_buffer_free(l->bias);
  memset(l, 0, sizeof *l);
}

void gpu_gemm(gpu_rec *rec, gpu_buffer *a, const gpu_linear *l, gpu_buffer *c, uint32_t m,
              gpu_epi epi, float alpha) {
  gpu_gemm_strided(rec, a, l->k, l, c, m, epi, alpha);
}

/* gpu_gemm_plan_for, with gemm_cm2 or without it (GEMMs recorded side by
 * side must not share the scratch its pieces and its f16 copy of a go to). */
static void plan(const gpu_device *d, const gpu_linear *l, uint32_t lda, uint32_t m, bool cm2,
                 gpu_gemm_plan *out) {
  /* F32 weights keep the f32 kernel: the fast ones round W to f16. */
  gpu_gemm_variant v = l->type != GPU_F32 && gpu_using_fast(d) ? pick(d, m, l->type) : GPU_GEMM_AUTO;
  /* gemm_tc reads a 8 floats at a time and W as f16 or BF16 (Q8_0: its f16 copy). */
  bool tc_w = l->type == GPU_F16 || l->type == GPU_BF16 || l->w16;
  if (is_tc(v) && (lda % 4 || l->k % 8 || !tc_w)) v = GPU_GEMM_AUTO;
  /* gemm_cm2 needs W in f16 (F16 as stored, or the f16 copy: it cannot
   * convert BF16 as it loads, as gemm_tc does; the H200 showed it reading BF16
   * as f16, 3.6× off), and its sums (even in one piece) and a's f16 copy
   * within the device's scratch: else the first gemm_tc tile that passed. */
  bool cm2_fits = (l->type == GPU_F16 || l->w16) && (size_t)m * l->n * sizeof(float) <= SPLIT_BYTES &&
                  (size_t)m * l->k * 2 <= A16_BYTES;
  /* gemm_cm2u's unchecked loads: whole column tiles, whole trips of k (its
   * pieces' length is rounded to them below), rows of W at 16 bytes, and
   * a's f16 copy readable to the end of its last row tile. */
  if (gpu_gemm_is_cm2u(v)) {
    const gpu_gemm_tile *t = &gpu_gemm_tiles[v];
    uint32_t tm = t->sg_m * t->tm * 16, tn = t->sg_n * t->tn * 16;
    cm2_fits = cm2_fits && l->n % tn == 0 && l->k % (CM2U_TRIP * t->bk) == 0 && l->wk % 8 == 0 &&
               (size_t)(m + tm - 1) / tm * tm * l->k * 2 <= A16_BYTES;
  }
  if (gpu_gemm_is_cm2(v) && (!cm2 || !cm2_fits)) {
    v = gpu_gemm_default(d, m >= GEMM_BIG_M);
    if (gpu_gemm_is_cm2(v)) v = GPU_GEMM_AUTO;
  }
  uint32_t bm = TILE, bn = TILE;
  if (v != GPU_GEMM_AUTO) {
    const gpu_gemm_tile *t = &gpu_gemm_tiles[v];
    bm = t->sg_m * t->tm * 16, bn = t->sg_n * t->tn * 16;
  }
  uint32_t tiles = (l->n + bn - 1) / bn * ((m + bm - 1) / bm);
  bool split = v == GPU_GEMM_AUTO || is_tc(v);
  uint32_t sms = is_tc(v) ? d->info.sm_count : 0, min_k = is_tc(v) ? SPLIT_MIN_K_TC : SPLIT_MIN_K;
  uint32_t splits = split ? split_count(tiles, sms, m, l->n, l->k, min_k) : 1;
  uint32_t kc = (l->k + splits - 1) / splits, step = is_tc(v) ? gpu_gemm_tiles[v].bk : 32;
  if (gpu_gemm_is_cm2u(v)) step *= CM2U_TRIP;
  kc = (kc + step - 1) / step * step;
  splits = (l->k + kc - 1) / kc;
  uint32_t a16_from = d->a16_min_m ? d->a16_min_m : A16_MIN_M;
  bool a16 = gpu_gemm_is_cm2(v) || (is_tc(v) && m >= a16_from && (size_t)m * l->k * 2 <= A16_BYTES);
  *out = (gpu_gemm_plan){.v = v, .bm = bm, .bn = bn, .splits = splits, .kc = kc, .split = split,
                         .a16 = a16, .parts = splits > 1 || gpu_gemm_is_cm2(v)};
  /* gemm_cpu's grid has a row of workgroups per 8 rows: up to Vulkan's 65 535. */
  bool cpu_fits = (m + CPU_ROWS - 1) / CPU_ROWS <= 65535;
  if (v == GPU_GEMM_AUTO && gpu_fast_used(d, GPU_FAST_GEMM_CPU) && cpu_fits)
    *out = (gpu_gemm_plan){.v = v, .bm = CPU_ROWS, .bn = CPU_COLS, .splits = 1, .kc = l->k, .cpu = true};
}

void gpu_gemm_plan_for(const gpu_device *d, const gpu_linear *l, uint32_t lda, uint32_t m,
                       gpu_gemm_plan *out) {
  plan(d, l, lda, m, true, out);
}

/* The LayerNorm gpu_gemm_norm folds into the split-k reduce. */
typedef struct {
  const gpu_norm *n, *n2; /* n2: gpu_gemm_norm2's second norm, or NULL */
  gpu_buffer *y;
  uint32_t cols, y_stride;
} fused_norm;

/* Columns gemm_reduce_norm keeps per invocation (its PER), and its workgroup
 * for cols columns: norm.c's, so that its statistics are norm.comp's. */
#define FUSED_PER 8
static uint32_t fused_group(uint32_t cols) { return cols > 512 ? 256 : cols > 128 ? 128 : 64; }

/* Records the GEMM; with fuse (only for a plan whose kernel writes pieces
 * for gemm_reduce, no dual outputs and n ≤ the kernel's columns) its reduce
 * also writes the norm. */
static void record_gemm(gpu_rec *rec, gpu_buffer *a, uint32_t lda, const gpu_linear *l,
                        gpu_buffer *c, uint32_t m, gpu_epi epi, float alpha, const gpu_gemm_plan *g,
                        const fused_norm *fuse) {
  gpu_device *d = gpu_rec_device(rec);
  uint32_t spec = l->type, splits = g->splits, kc = g->kc, bm = g->bm, bn = g->bn;
  gpu_gemm_variant v = g->v;
  bool split = g->split;
  gpu_wtype wt = is_tc(v) && l->w16 ? GPU_F16 : l->type;
  uint32_t cspec[5] = {l->type, g->bm, g->bn, d->info.subgroup_size, lda % 4 == 0};
  gpu_kernel *k = g->cpu             ? gpu_rec_kernel(rec, "gemm_cpu", cspec, 5)
                  : v == GPU_GEMM_AUTO ? gpu_rec_kernel(rec, "gemm", &spec, 1)
                  : g->a16           ? gpu_gemm_kernel_a16(rec, v, wt)
                                     : gpu_gemm_kernel(rec, v, wt);
  gpu_buffer *part = g->parts ? gpu_device_scratch(d, SPLIT_BYTES) : NULL;
  if (g->parts && !part) return (void)gpu_rec_fail(rec, STENO_ERR_GPU);
  if (g->a16) { /* a's rows in f16 first, k halves each (pack.comp, clamped as gemm_tc clamps) */
    gpu_buffer *h = gpu_device_scratch16(d, A16_BYTES);
    if (!h) return (void)gpu_rec_fail(rec, STENO_ERR_GPU);
    gpu_pack_clamped(rec, a, 0, lda, h, 0, l->k / 2, m, l->k / 2);
    a = h;
    lda = l->k; /* in halves */
  }
  struct {
    uint32_t m, n, k, mode;
    float alpha;
    uint32_t dual, lda, wk, splits, kc;
  } push = {m, l->n, l->k, epi, alpha, l->dual, lda, l->wk, splits, kc};
  /* Only Q8_0 reads scales; other types bind the bias in their place. */
  gpu_buffer *w = is_tc(v) && l->w16 ? l->w16 : l->w;
  gpu_buffer *bufs[] = {a, l->bias, c, w, l->scales ? l->scales : l->bias, part ? part : c};
  gpu_dispatch(rec, k, bufs, split ? 6 : 5, &push, split ? sizeof push : 32, (l->n + bn - 1) / bn,
               (m + bm - 1) / bm, splits);
  if (!g->parts) return;
  if (fuse) {
    const gpu_norm *n2 = fuse->n2 ? fuse->n2 : fuse->n;
    struct {
      uint32_t m, n, splits, mode;
      float alpha;
      uint32_t cols, y_stride;
      float eps, eps2;
    } np = {m, l->n, splits, epi, alpha, fuse->cols, fuse->y_stride, fuse->n->eps, n2->eps};
    uint32_t spec[2] = {fused_group(fuse->cols), fuse->n2 != NULL};
    gpu_buffer *nbufs[] = {part, l->bias, c, fuse->n->g, fuse->n->b, fuse->y, n2->g, n2->b};
    gpu_dispatch(rec, gpu_rec_kernel(rec, "gemm_reduce_norm", spec, 2), nbufs, 8, &np, sizeof np,
                 gpu_row_groups(m), 1, 1);
    return;
  }
  struct {
    uint32_t m, n, splits, mode;
    float alpha;
    uint32_t dual;
  } rpush = {m, l->n, splits, epi, alpha, l->dual};
  gpu_buffer *rbufs[] = {part, l->bias, c};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "gemm_reduce", NULL, 0), rbufs, 3, &rpush, sizeof rpush,
               (l->n + 255) / 256, m, 1);
}

/* gpu_gemm's plan for a call, or false (the recording failed) for an lda below k. */
static bool planned(gpu_rec *rec, const gpu_linear *l, uint32_t lda, uint32_t m, gpu_gemm_plan *g) {
  if (lda < l->k) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "gemm: lda %u < k %u", lda, l->k));
    return false;
  }
  gpu_gemm_plan_for(gpu_rec_device(rec), l, lda, m, g);
  return true;
}

void gpu_gemm_strided(gpu_rec *rec, gpu_buffer *a, uint32_t lda, const gpu_linear *l,
                      gpu_buffer *c, uint32_t m, gpu_epi epi, float alpha) {
  gpu_gemm_plan g;
  if (planned(rec, l, lda, m, &g)) record_gemm(rec, a, lda, l, c, m, epi, alpha, &g, NULL);
}

void gpu_gemm_whole(gpu_rec *rec, gpu_buffer *a, uint32_t lda, const gpu_linear *l,
                    gpu_buffer *c, uint32_t m, gpu_epi epi, float alpha) {
  gpu_gemm_plan g;
  if (!planned(rec, l, lda, m, &g)) return;
  /* a group's GEMMs run together: they must not share the scratch (split-k's, a's f16 copy) */
  if (gpu_gemm_is_cm2(g.v)) plan(gpu_rec_device(rec), l, lda, m, false, &g);
  g.splits = 1;
  g.kc = l->k;
  g.a16 = g.parts = false;
  record_gemm(rec, a, lda, l, c, m, epi, alpha, &g, NULL);
}

/* gpu_gemm_norm and gpu_gemm_norm2: y = n(c's first cols columns), then
 * with n2 those columns of c = n2(y). */
static void gemm_norms(gpu_rec *rec, gpu_buffer *a, uint32_t lda, const gpu_linear *l,
                       gpu_buffer *c, uint32_t m, gpu_epi epi, float alpha, uint32_t cols,
                       const gpu_norm *n, const gpu_norm *n2, gpu_buffer *y, uint32_t y_stride) {
  gpu_gemm_plan g;
  if (!planned(rec, l, lda, m, &g)) return;
  /* gpu_layer_norm's checks, for the norms' half (their own calls below make them). */
  bool fits = m > 0 && cols > 0 && cols <= l->n && n && n->g && n->b && n->eps >= 0.0f && y &&
              y != c && gpu_slice_fits(y, 0, y_stride, m, cols) &&
              gpu_slice_fits(n->g, 0, cols, 1, cols) && gpu_slice_fits(n->b, 0, cols, 1, cols);
  if (n2)
    fits = fits && n2->g && n2->b && n2->eps >= 0.0f && gpu_slice_fits(n2->g, 0, cols, 1, cols) &&
           gpu_slice_fits(n2->b, 0, cols, 1, cols);
  if (g.parts && !l->dual && l->n <= fused_group(cols) * FUSED_PER && fits) {
    fused_norm f = {n, n2, y, cols, y_stride};
    record_gemm(rec, a, lda, l, c, m, epi, alpha, &g, &f);
    return;
  }
  record_gemm(rec, a, lda, l, c, m, epi, alpha, &g, NULL);
  uint32_t width = gpu_linear_width(l);
  gpu_layer_norm(rec, c, 0, width, n, y, 0, y_stride, m, cols, NULL, NULL);
  if (n2) gpu_layer_norm(rec, y, 0, y_stride, n2, c, 0, width, m, cols, NULL, NULL);
}

void gpu_gemm_norm(gpu_rec *rec, gpu_buffer *a, uint32_t lda, const gpu_linear *l, gpu_buffer *c,
                   uint32_t m, gpu_epi epi, float alpha, uint32_t cols, const gpu_norm *n,
                   gpu_buffer *y, uint32_t y_stride) {
  gemm_norms(rec, a, lda, l, c, m, epi, alpha, cols, n, NULL, y, y_stride);
}

void gpu_gemm_norm2(gpu_rec *rec, gpu_buffer *a, uint32_t lda, const gpu_linear *l, gpu_buffer *c,
                    uint32_t m, gpu_epi epi, float alpha, uint32_t cols, const gpu_norm *n,
                    gpu_buffer *y, uint32_t y_stride, const gpu_norm *n2) {
  if (!n2) {
    gpu_rec_fail(rec, err_set(STENO_ERR_INVALID, "gemm_norm2 without its second norm"));
    return;
  }
  gemm_norms(rec, a, lda, l, c, m, epi, alpha, cols, n, n2, y, y_stride);
}
