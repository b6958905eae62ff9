#include "gpu/attention.h"

#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "gpu/decode.h"
#include "gpu/internal.h"

/* Queries, keys and columns per workgroup tile (the kernels' T). */
#define TILE 64u
/* maxComputeWorkGroupCount the spec guarantees in each dimension. */
#define MAX_GROUPS 65535u

static uint32_t tiles(uint32_t n) { return (n + TILE - 1) / TILE; }

/* Queries × keys per workgroup (one subgroup) of attention_scores_cpu, and
 * its queries in attention_values_cpu. */
#define CPU_QUERIES 4u
#define CPU_KEYS 8u

/* Queries × keys per workgroup of attention_scores_tc: a row's partials
 * (max, sum) come one pair per MM_TILE keys. */
#define MM_TILE 128u

/* Floats of row partials after the scores on the tensor-core path. */
static uint64_t mm_partials(uint32_t t, uint64_t rows) {
  return rows * ((t + MM_TILE - 1) / MM_TILE) * 2;
}

/* The partials too, on every device: Whisper and Moonshine size their
 * scratch by this (no device at hand), and they are 2·⌈t/128⌉ floats per t
 * scores (1.6 % at t = 1500, at most 3.1 % from t = 128 on). */
size_t gpu_attention_scratch(uint32_t t, uint32_t heads) {
  return (size_t)heads * t * t + (size_t)mm_partials(t, (uint64_t)heads * t);
}

/* flash.comp's HD for a head size: the head size itself where it is a
 * multiple of 16 up to 128 (0 otherwise: the portable path). Exact, so the
 * kernel's loops have no bounds checks (they made lavapipe's LLVM take
 * minutes to compile it: docs/perf.md). */
static uint32_t flash_hd(uint32_t head_dim) {
  return head_dim % 16 == 0 && head_dim <= 128 ? head_dim : 0;
}

/* lavapipe stops an invocation after 65535 loop iterations in all (a silent
 * wrong result): on a CPU device longer inputs take the portable path. Where
 * that comes, measured on lavapipe (test_attention): head size 128 right at
 * 800 keys and wrong at 900, 64 right at 1 500, 80 at 1 200 — about 10 + hd/2
 * iterations per key; the bound keeps a margin. */
static bool flash_fits(const gpu_device *d, uint32_t t, uint32_t hd) {
  return !gpu_device_is_cpu(d) || (uint64_t)t * (12 + hd / 2) < 60000;
}

/* Plain attention only for now: flash.comp's RELATIVE variant hangs on
 * lavapipe (docs/perf.md), so relative attention keeps the portable path. */
static bool use_flash(const gpu_device *d, uint32_t t, uint32_t head_dim, bool relative) {
  return !relative && gpu_fast_used(d, GPU_FAST_ATTENTION) && flash_hd(head_dim) &&
         flash_fits(d, t, head_dim);
}

/* flash_tc.comp's keys per block in use: on the H200, 32 and 64 were slower
 * at most shapes (docs/perf.md). */
#define FLASH_TC_KB 16

/* Words of the scores scratch flash_tc's f16 copies take: q, k, v (and q+v)
 * of n·t rows, pos of 2t − 1 rows and one more (its band may read there). */
static uint64_t flash_tc_words(const gpu_attn *a, bool relative) {
  uint64_t n = a->batch > 1 ? a->batch : 1, w = (uint64_t)a->heads * a->head_dim / 2;
  return (relative ? 4 : 3) * n * a->t * w + (relative ? 2 * (uint64_t)a->t * w : 0);
}

/* The shortest t flash_tc takes when chosen by timing (it is timed at t =
 * 1000): on the H200 at t = 138 the portable path's three dispatches took
 * 57 µs and flash_tc 94 (docs/perf.md). With every fast kernel on (tests,
 * probes) it takes any t of at least a key block. */
#define FLASH_TC_MIN_T 256

/* Whether flash_tc can take call a from t = min_t: head sizes of 16·n up to
 * 128, the f16 copies within the scores scratch (and 32-bit offsets), no
 * chunked mask. */
static bool flash_tc_fits(const gpu_attn *a, bool relative, uint32_t min_t) {
  uint64_t words = flash_tc_words(a, relative);
  return !a->chunk && a->head_dim % 16 == 0 && a->head_dim <= 128 && a->t >= min_t &&
         a->scores && words <= gpu_buffer_size(a->scores) / 4 && words < UINT32_MAX;
}

/* flash_tc where its probe passed and it is used (timed faster here, or
 * gpu_set_fast on) and it fits. */
static bool use_flash_tc(const gpu_device *d, const gpu_attn *a, bool relative) {
  return gpu_fast_used(d, GPU_FAST_ATTENTION_TC) &&
         flash_tc_fits(a, relative, d->use_fast == GPU_FAST_ALL ? FLASH_TC_KB : FLASH_TC_MIN_T);
}

/* flash_tc: q, k, v (q+v, pos) packed to f16 rows in the scores scratch, then the kernel. */
static void flash_tc(gpu_rec *rec, const gpu_attn *a, bool relative, float scale, uint32_t kb,
                     uint32_t skip) {
  uint32_t n = a->batch > 1 ? a->batch : 1, rows = n * a->t, w = a->heads * a->head_dim / 2;
  const gpu_attn_slice *src[] = {&a->q, &a->k, &a->v, &a->qv};
  uint32_t at[5];
  for (int i = 0; i < (relative ? 4 : 3); i++) {
    at[i] = (uint32_t)i * rows * w;
    gpu_pack(rec, src[i]->buf, src[i]->offset, src[i]->stride, a->scores, at[i], w, rows, w);
  }
  at[3] = relative ? at[3] : at[0];
  at[4] = relative ? 4 * rows * w : at[0];
  if (relative) gpu_pack(rec, a->pos.buf, a->pos.offset, a->pos.stride, a->scores, at[4], w,
                         2 * a->t - 1, w);
  uint32_t spec[5] = {relative, a->head_dim, n > 1, kb, skip};
  struct {
    uint32_t t, head_dim;
    float scale;
    uint32_t masked, qh, kh, vh, qvh, ph, row, o_off, o_stride, heads;
  } fp = {a->t,      a->head_dim, scale,     a->mask != NULL, at[0] / 4, at[1] / 4, at[2] / 4,
          at[3] / 4, at[4] / 4,   w / 4,     a->o.offset,     a->o.stride, a->heads};
  gpu_buffer *fb[] = {a->scores, a->scores, a->scores, a->scores, a->scores,
                      a->mask ? a->mask : a->scores, a->o.buf, n > 1 ? a->lens : a->scores};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "flash_tc", spec, 5), fb, 8, &fp, sizeof fp,
               (a->t + 63) / 64, n * a->heads, 1);
}

/* Floats of scores (from 0) and then partials the tensor-core path writes. */
static uint64_t mm_scores(const gpu_attn *a) {
  return (uint64_t)(a->batch > 1 ? a->batch : 1) * a->heads * a->t * a->t;
}
static uint64_t mm_words(const gpu_attn *a) {
  return mm_scores(a) + mm_partials(a->t, mm_scores(a) / (a->t ? a->t : 1));
}

/* Whether q, k and v start and step at whole 128-bit words (the tensor-core
 * kernels' loads). */
static bool qkv_whole_words(const gpu_attn *a) {
  return (a->q.offset | a->q.stride | a->k.offset | a->k.stride | a->v.offset | a->v.stride) % 4 == 0;
}

/* Whether attention_scores_tc and attention_values_tc can take call a:
 * plain attention, head sizes of 16·n up to 128, q, k and v at offsets and
 * strides of whole 128-bit words (their loads), the scores and their row
 * partials within the scratch (and 32-bit offsets). Key and chunked masks
 * and batches as the portable kernels. */
static bool mm_fits(const gpu_attn *a, bool relative) {
  return !relative && a->head_dim % 16 == 0 && a->head_dim <= 128 && qkv_whole_words(a) &&
         a->scores && mm_words(a) <= gpu_buffer_size(a->scores) / 4 && mm_words(a) < UINT32_MAX;
}

/* flash_mm may take calls (gpu_attention_mm_flash, for benchmarks and tests). */
static bool mm_flash = true;
void gpu_attention_mm_flash(bool on) { mm_flash = on; }

/* flash_mm's shapes (gpu_attention_mm_flash_shape, for benchmarks and
 * tests): 0 the call's (gpu_attn's flash_subgroups, else by the grid), else
 * subgroups a workgroup and whether the next key block is loaded ahead. By
 * the grid: 8 subgroups (128 queries a workgroup) where they make at least
 * FLASH_FULL workgroups, else 4 (half the queries, twice the workgroups): on
 * the H200 at t 1 000 × 8 heads (64 workgroups of 8) 4 took 92 µs against
 * 116, at Whisper's t 1 500 × 20 heads (240) 8 took 313 against 499
 * (docs/perf.md, thirteenth session). */
#define FLASH_FULL 128
static const struct {
  uint32_t sgs, ahead;
  const char *name;
} flash_shapes[] = {{0, 1, "8 or 4 subgroups by the grid"},
                    {8, 1, "8 subgroups"},
                    {4, 1, "4 subgroups"},
                    {8, 0, "8 subgroups, not loading ahead"}};
static uint32_t flash_shape;
uint32_t gpu_attention_mm_flash_shapes(void) { return sizeof flash_shapes / sizeof *flash_shapes; }
const char *gpu_attention_mm_flash_shape(uint32_t shape) {
  flash_shape = shape < gpu_attention_mm_flash_shapes() ? shape : 0;
  return flash_shapes[flash_shape].name;
}

/* Whether flash_mm can take call a: plain attention, head sizes 16 to 64 by
 * 16 (its shared memory), q, k and v at whole 128-bit words, no chunked mask. */
static bool flash_mm_fits(const gpu_attn *a, bool relative) {
  return mm_flash && !relative && !a->chunk && a->head_dim % 16 == 0 && a->head_dim <= 64 &&
         qkv_whole_words(a);
}

/* flash_tc first where it is used, then flash.comp (CPU devices; no
 * chunked mask, no batch), then the tensor-core attention: flash_mm where it
 * fits, else the two products. */
gpu_attn_path gpu_attention_path(const gpu_device *d, const gpu_attn *a, bool relative) {
  if (use_flash_tc(d, a, relative)) return GPU_ATTN_FLASH_TC;
  if (!a->chunk && a->batch <= 1 && use_flash(d, a->t, a->head_dim, relative)) return GPU_ATTN_FLASH;
  if (gpu_fast_used(d, GPU_FAST_ATTENTION_MM) && flash_mm_fits(a, relative)) return GPU_ATTN_FLASH_MM;
  if (gpu_fast_used(d, GPU_FAST_ATTENTION_MM) && mm_fits(a, relative)) return GPU_ATTN_MM;
  return GPU_ATTN_PORTABLE;
}

size_t gpu_attention_scratch_on(const gpu_device *d, uint32_t t, uint32_t heads,
                                uint32_t head_dim) {
  return use_flash(d, t, head_dim, false) ? 1 : gpu_attention_scratch(t, heads);
}

/* Whether `rows` rows of `cols` floats at s lie inside its buffer, with
 * indices the kernels' 32-bit arithmetic reaches. */
static int check_slice(const char *what, gpu_attn_slice s, uint64_t rows, uint64_t cols) {
  if (!s.buf) return err_set(STENO_ERR_INVALID, "%s: no buffer", what);
  if (rows > 1 && s.stride < cols)
    return err_set(STENO_ERR_INVALID, "%s: row stride %u under %llu columns", what, s.stride,
                   (unsigned long long)cols);
  uint64_t end = s.offset + (rows - 1) * s.stride + cols;
  uint64_t have = gpu_buffer_size(s.buf) / sizeof(float);
  if (end > have || end > UINT32_MAX)
    return err_set(STENO_ERR_INVALID,
                   "%s: %llu rows of %llu at %u (stride %u) need %llu floats, the buffer has %llu",
                   what, (unsigned long long)rows, (unsigned long long)cols, s.offset, s.stride,
                   (unsigned long long)end, (unsigned long long)have);
  return 0;
}

/* softmax.comp (or softmax_fast.comp) over rows × cols, columns counted only where mask[c] != 0
 * when there is a mask. */
static void softmax(gpu_rec *rec, gpu_attn_slice x, gpu_attn_slice y, uint32_t rows,
                    uint32_t cols, float scale, gpu_buffer *mask) {
  gpu_device *d = gpu_rec_device(rec);
  bool fast = gpu_fast_used(d, GPU_FAST_SOFTMAX);
  gpu_kernel *k = gpu_rec_kernel(rec, fast ? "softmax_fast" : "softmax", NULL, 0);
  struct {
    uint32_t rows, cols, x_off, x_stride, y_off, y_stride;
    float scale;
    uint32_t masked;
  } push = {rows, cols, x.offset, x.stride, y.offset, y.stride, scale, mask != NULL};
  gpu_buffer *bufs[] = {x.buf, y.buf, mask ? mask : x.buf};
  /* Rows past the workgroup limit are looped over inside the kernel. */
  uint32_t groups = fast ? gpu_subgroup_row_groups(d, rows) : rows < MAX_GROUPS ? rows : MAX_GROUPS;
  gpu_dispatch(rec, k, bufs, 3, &push, sizeof push, groups, 1, 1);
}

void gpu_softmax(gpu_rec *rec, gpu_attn_slice x, gpu_attn_slice y, uint32_t rows, uint32_t cols,
                 float scale) {
  int st = rows && cols ? 0 : err_set(STENO_ERR_INVALID, "softmax of %u × %u", rows, cols);
  if (!st) st = check_slice("softmax x", x, rows, cols);
  if (!st) st = check_slice("softmax y", y, rows, cols);
  if (st) {
    gpu_rec_fail(rec, st);
    return;
  }
  softmax(rec, x, y, rows, cols, scale, NULL);
}

/* The shapes of a, checked against its buffers. */
static int check_attn(const gpu_attn *a, bool relative, bool flash) {
  uint32_t t = a->t, h = a->heads, n = a->batch > 1 ? a->batch : 1;
  uint64_t width = (uint64_t)h * a->head_dim, rows = (uint64_t)n * t;
  if (!t || !h || !a->head_dim || tiles(t) > MAX_GROUPS || (uint64_t)h * n > MAX_GROUPS)
    return err_set(STENO_ERR_INVALID, "attention over t = %u, %u heads of %u, %u clips", t, h,
                   a->head_dim, n);
  if (a->batch > 1 && (!a->lens || gpu_buffer_size(a->lens) / 4 < a->batch || a->mask))
    return err_set(STENO_ERR_INVALID, "attention over %u clips: lens for each, no key mask", n);
  if (!isfinite(a->scale)) return err_set(STENO_ERR_INVALID, "attention scale %g", a->scale);
  if (!relative && (a->qv.buf || a->pos.buf))
    return err_set(STENO_ERR_INVALID, "attention given positions: use gpu_rel_attention");
  TRY(check_slice("attention q", a->q, rows, width));
  TRY(check_slice("attention k", a->k, rows, width));
  TRY(check_slice("attention v", a->v, rows, width));
  TRY(check_slice("attention o", a->o, rows, width));
  if (relative) {
    TRY(check_slice("attention q+v", a->qv, rows, width));
    TRY(check_slice("attention pos", a->pos, 2 * (uint64_t)t - 1, width));
  }
  /* The scores as heads·t rows of t (check_slice keeps them under 2^32);
   * flash attention has none. */
  gpu_attn_slice s = {a->scores, 0, t};
  if (!flash) TRY(check_slice("attention scores", s, (uint64_t)n * h * t, t));
  if (a->mask && gpu_buffer_size(a->mask) < (size_t)t * 4)
    return err_set(STENO_ERR_INVALID, "attention mask of %zu bytes for %u keys",
                   gpu_buffer_size(a->mask), t);
  return 0;
}

/* flash.comp: scores, softmax and values in one dispatch, no scores buffer. */
static void flash(gpu_rec *rec, const gpu_attn *a, bool relative, float scale) {
  gpu_attn_slice qv = relative ? a->qv : a->q, pos = relative ? a->pos : a->q;
  uint32_t spec[2] = {relative, flash_hd(a->head_dim)};
  gpu_kernel *k = gpu_rec_kernel(rec, "flash", spec, 2);
  struct {
    uint32_t t, head_dim;
    float scale;
    uint32_t masked, q_off, q_stride, k_off, k_stride, v_off, v_stride;
    uint32_t qv_off, qv_stride, pos_off, pos_stride, o_off, o_stride;
  } fp = {a->t,        a->head_dim, scale,       a->mask != NULL, a->q.offset, a->q.stride,
          a->k.offset, a->k.stride, a->v.offset, a->v.stride,     qv.offset,   qv.stride,
          pos.offset,  pos.stride,  a->o.offset, a->o.stride};
  gpu_buffer *fb[] = {a->q.buf, a->k.buf, a->v.buf, qv.buf, pos.buf, a->mask ? a->mask : a->q.buf,
                      a->o.buf};
  gpu_dispatch(rec, k, fb, 7, &fp, sizeof fp, (a->t + 63) / 64, a->heads, 1);
}

/* The portable kernels' shapes: attention_scores' tile (T queries × T keys)
 * and steps of head_dim through shared memory, attention_values' tile (T
 * queries × T columns). Each step is a chain of loads, a barrier and the
 * products, and a workgroup's share is all its own: where the grid of 64s
 * is small (under 512 workgroups: Parakeet's 11 s has 72 and 48, and its
 * scores took 40 µs in 16 steps of 8 on the H200) the tiles of 32 (4× the
 * workgroups) and the scores' longest steps whose shared arrays the device
 * holds (644 bytes a step at 32; 1 292 at 64). A large grid (batches, long
 * clips) keeps 64 and steps of 8. (Chosen on the H200 with an environment
 * knob for the shape, removed since: docs/perf.md, tenth session.) */
typedef struct {
  uint32_t scores_step, scores_tile, values_tile;
} portable_shape;

static portable_shape shape(const gpu_rec *rec, const gpu_attn *a, uint32_t z) {
  uint32_t room = gpu_device_info(gpu_rec_device(rec))->max_shared_memory;
  uint64_t t64 = (a->t + 63) / 64, h64 = (a->head_dim + 63) / 64;
  portable_shape p = {8, t64 * t64 * z < 512 ? 32 : 64, h64 * t64 * z < 512 ? 32 : 64};
  for (uint32_t k = 32; p.scores_tile == 32 && k > 8 && p.scores_step == 8; k /= 2)
    if (a->head_dim % k == 0 && 644 * k <= room) p.scores_step = k;
  return p;
}

/* The three dispatches through the scores buffer: scores, softmax over the
 * kept keys, values. */
static void three(gpu_rec *rec, const gpu_attn *a, bool relative, float scale) {
  uint32_t t = a->t, hd = a->head_dim;
  bool batched = a->batch > 1;
  gpu_attn_slice qv = relative ? a->qv : a->q, pos = relative ? a->pos : a->q;
  /* spec: relative, batched (the lengths at the next binding), step, tile. */
  uint32_t z = batched ? a->batch * a->heads : a->heads;
  portable_shape ps = shape(rec, a, z);
  /* On a CPU device the scores and the values in blocks per subgroup
   * (attention_scores_cpu.comp, attention_values_cpu.comp), every read 4
   * floats where all is aligned. */
  gpu_device *d = gpu_rec_device(rec);
  uint32_t sg = gpu_device_info(d)->subgroup_size;
  bool cpu = gpu_fast_used(d, GPU_FAST_ATTENTION_CPU) && sg >= 4 && sg <= 64;
  uint32_t words = a->q.offset | a->q.stride | a->k.offset | a->k.stride | hd;
  if (relative) words |= qv.offset | qv.stride | pos.offset | pos.stride;
  uint32_t spec[6] = {relative, batched, ps.scores_step, ps.scores_tile};
  if (cpu) spec[2] = CPU_QUERIES, spec[3] = CPU_KEYS, spec[4] = sg, spec[5] = words % 4 == 0;
  gpu_kernel *k = cpu ? gpu_rec_kernel(rec, "attention_scores_cpu", spec, 6)
                      : gpu_rec_kernel(rec, "attention_scores", spec, 4);
  struct {
    uint32_t t, head_dim;
    float scale;
    uint32_t q_off, q_stride, k_off, k_stride, qv_off, qv_stride, pos_off, pos_stride;
    uint32_t chunk, left_chunks, heads;
  } sp = {t,          hd,         scale,    a->q.offset,    a->q.stride, a->k.offset,
          a->k.stride, qv.offset, qv.stride, pos.offset,    pos.stride,  a->chunk,
          a->left_chunks, a->heads};
  gpu_buffer *sb[] = {a->q.buf, a->k.buf, qv.buf, pos.buf, a->scores, batched ? a->lens : a->q.buf};
  uint32_t st = ps.scores_tile, vt = ps.values_tile;
  if (cpu) gpu_dispatch(rec, k, sb, 6, &sp, sizeof sp, (t + CPU_KEYS - 1) / CPU_KEYS,
                        (t + CPU_QUERIES - 1) / CPU_QUERIES, z);
  else gpu_dispatch(rec, k, sb, 6, &sp, sizeof sp, (t + st - 1) / st, (t + st - 1) / st, z);

  gpu_attn_slice s = {a->scores, 0, t};
  softmax(rec, s, s, z * t, t, 1.0f, a->mask);

  struct {
    uint32_t t, head_dim, v_off, v_stride, o_off, o_stride, heads;
  } vp = {t, hd, a->v.offset, a->v.stride, a->o.offset, a->o.stride, a->heads};
  gpu_buffer *vb[] = {a->scores, a->v.buf, a->o.buf, batched ? a->lens : a->v.buf};
  if (cpu) { /* attention_values_cpu: 4·sg columns × CPU_QUERIES queries a subgroup */
    uint32_t vspec[4] = {batched, CPU_QUERIES, sg, (t | a->v.offset | a->v.stride | hd) % 4 == 0};
    k = gpu_rec_kernel(rec, "attention_values_cpu", vspec, 4);
    gpu_dispatch(rec, k, vb, 4, &vp, sizeof vp, (hd + 4 * sg - 1) / (4 * sg),
                 (t + CPU_QUERIES - 1) / CPU_QUERIES, z);
    return;
  }
  uint32_t vspec[2] = {batched, vt};
  k = gpu_rec_kernel(rec, "attention_values", vspec, 2);
  gpu_dispatch(rec, k, vb, 4, &vp, sizeof vp, (hd + vt - 1) / vt, (t + vt - 1) / vt, z);
}

/* The tensor-core path's precision (gpu_attention_mm_precision): 3 hi + lo
 * scores and values, 2 hi + lo scores only, 1 f16 alone. */
static uint32_t mm_precision = 3;

void gpu_attention_mm_precision(uint32_t level) { mm_precision = level >= 1 && level <= 3 ? level : 3; }
uint32_t gpu_attention_mm_precision_now(void) { return mm_precision; }

/* attention_scores_tc's tiles (its spec constants 2 .. 5): subgroups down and
 * across, accumulators per subgroup down and across; MM_TILE keys each. The
 * first is the default: on the H200 (attention_speed, same call) 128 queries
 * on 16 subgroups of 2 × 2 (109 registers) took 1 222 µs at Whisper turbo's
 * shape against 1 417 for 8 subgroups of 4 × 2 (179 registers), the earlier
 * default, and was faster at t = 750, 1 000 and 1 500 too; 64 queries on 8
 * subgroups only at t = 138 (69 against 82 µs). */
static const struct {
  uint32_t sg_m, sg_n, tm, tn;
} mm_tiles[] = {{4, 4, 2, 2}, {2, 4, 4, 2}, {1, 4, 4, 2}, {2, 4, 2, 2}};
/* attention_values_tc's tiles (its spec constants 3, 4): subgroups, blocks
 * of 16 queries per subgroup. The first is the default. */
static const struct {
  uint32_t sgs, tm;
} mm_values[] = {{4, 1}, {4, 2}, {2, 2}, {2, 1}};
enum { MM_SCORES = sizeof mm_tiles / sizeof mm_tiles[0], MM_VALUES = sizeof mm_values / sizeof mm_values[0] };
static uint32_t mm_tile = 0, mm_value = 0;
uint32_t gpu_attention_mm_tile_pairs(void) { return MM_SCORES + MM_VALUES - 1; }

void gpu_attention_mm_tile_pair(uint32_t i, uint32_t *scores, uint32_t *values) {
  *scores = i < MM_SCORES ? i : 0;
  *values = i < MM_SCORES ? 0 : i - MM_SCORES + 1;
}

void gpu_attention_mm_tile(uint32_t scores, uint32_t values) {
  mm_tile = scores < MM_SCORES ? scores : 0;
  mm_value = values < MM_VALUES ? values : 0;
}

/* The two dispatches on the tensor cores, the softmax folded into them:
 * attention_scores_tc writes the scores (excluded keys −1e30) and each row's
 * (max, sum) per key tile after them in the scratch; attention_values_tc
 * combines a row's pairs and makes the probabilities as it stages them. */
static void two(gpu_rec *rec, const gpu_attn *a, float scale) {
  uint32_t t = a->t, hd = a->head_dim, nt = (t + MM_TILE - 1) / MM_TILE;
  bool batched = a->batch > 1;
  uint32_t z = batched ? a->batch * a->heads : a->heads;
  uint32_t part_off = (uint32_t)mm_scores(a); /* < 2^32: mm_fits */
  uint32_t sm = mm_tiles[mm_tile].sg_m, sn = mm_tiles[mm_tile].sg_n, tm = mm_tiles[mm_tile].tm;
  uint32_t sspec[7] = {batched, mm_precision >= 2 ? 3 : 1, /* stagings per step */
                       sm, sn, tm, mm_tiles[mm_tile].tn, 32 * sm * sn};
  gpu_kernel *k = gpu_rec_kernel(rec, "attention_scores_tc", sspec, 7);
  struct {
    uint32_t t, head_dim;
    float scale;
    uint32_t q_off, q_stride, k_off, k_stride, chunk, left_chunks, heads, masked, part_off;
  } sp = {t,           hd,       scale,          a->q.offset, a->q.stride,     a->k.offset,
          a->k.stride, a->chunk, a->left_chunks, a->heads,    a->mask != NULL, part_off};
  gpu_buffer *lens = batched ? a->lens : a->q.buf, *mask = a->mask ? a->mask : a->q.buf;
  gpu_buffer *sb[] = {a->q.buf, a->k.buf, mask, a->q.buf, a->scores, lens};
  gpu_dispatch(rec, k, sb, 6, &sp, sizeof sp, nt, (t + 16 * sm * tm - 1) / (16 * sm * tm), z);

  uint32_t vs = mm_values[mm_value].sgs, vm = mm_values[mm_value].tm;
  uint32_t vspec[6] = {batched, hd, mm_precision == 3 ? 3 : 1, vs, vm, 32 * vs};
  k = gpu_rec_kernel(rec, "attention_values_tc", vspec, 6);
  struct {
    uint32_t t, head_dim, v_off, v_stride, o_off, o_stride, heads, part_off, tiles;
  } vp = {t, hd, a->v.offset, a->v.stride, a->o.offset, a->o.stride, a->heads, part_off, nt};
  gpu_buffer *vb[] = {a->scores, a->v.buf, a->o.buf, batched ? a->lens : a->v.buf};
  gpu_dispatch(rec, k, vb, 4, &vp, sizeof vp, 1, (t + 16 * vs * vm - 1) / (16 * vs * vm), z);
}

/* flash_mm.comp: plain attention on the tensor cores in one dispatch, no scores. */
static void flash_mm(gpu_rec *rec, const gpu_attn *a, float scale) {
  bool batched = a->batch > 1;
  uint32_t z = batched ? a->batch * a->heads : a->heads;
  uint32_t sgs = flash_shapes[flash_shape].sgs;
  if (!sgs && (a->flash_subgroups == 4 || a->flash_subgroups == 8)) sgs = a->flash_subgroups;
  if (!sgs) sgs = (uint64_t)(a->t + 127) / 128 * z >= FLASH_FULL ? 8 : 4;
  uint32_t spec[6] = {batched, a->head_dim, sgs, flash_shapes[flash_shape].ahead, 32 * sgs, mm_precision};
  struct {
    uint32_t t, head_dim;
    float scale;
    uint32_t q_off, q_stride, k_off, k_stride, v_off, v_stride, o_off, o_stride, heads, masked;
  } fp = {a->t,        a->head_dim, scale,         a->q.offset, a->q.stride,
          a->k.offset, a->k.stride, a->v.offset,   a->v.stride, a->o.offset,
          a->o.stride, a->heads,    a->mask != NULL};
  gpu_buffer *fb[] = {a->q.buf, a->k.buf, a->v.buf, a->mask ? a->mask : a->q.buf, a->o.buf,
                      batched ? a->lens : a->q.buf};
  gpu_dispatch(rec, gpu_rec_kernel(rec, "flash_mm", spec, 6), fb, 6, &fp, sizeof fp, 1,
               (a->t + 16 * sgs - 1) / (16 * sgs), z); /* 16 queries a subgroup */
}

/* Attention (with relative positions or not) by the path the device's fast
 * kernels and the call's shape choose. */
static void attend(gpu_rec *rec, const gpu_attn *a, bool relative) {
  gpu_attn_path path = gpu_attention_path(gpu_rec_device(rec), a, relative);
  int st = check_attn(a, relative, path == GPU_ATTN_FLASH || path == GPU_ATTN_FLASH_TC ||
                                       path == GPU_ATTN_FLASH_MM);
  if (st) {
    gpu_rec_fail(rec, st);
    return;
  }
  float scale = a->scale != 0 ? a->scale : 1.0f / sqrtf((float)a->head_dim);
  if (path == GPU_ATTN_FLASH_TC) flash_tc(rec, a, relative, scale, FLASH_TC_KB, 0);
  else if (path == GPU_ATTN_FLASH) flash(rec, a, relative, scale);
  else if (path == GPU_ATTN_FLASH_MM) flash_mm(rec, a, scale);
  else if (path == GPU_ATTN_MM) two(rec, a, scale);
  else three(rec, a, relative, scale);
}

void gpu_attention(gpu_rec *rec, const gpu_attn *a) { attend(rec, a, false); }
void gpu_rel_attention(gpu_rec *rec, const gpu_attn *a) { attend(rec, a, true); }

void gpu_flash_tc_experiment(gpu_rec *rec, const gpu_attn *a, bool relative, uint32_t kb,
                             uint32_t skip) {
  const gpu_device *d = gpu_rec_device(rec);
  int st = gpu_fast_passed(d, GPU_FAST_ATTENTION_TC) && (kb == 16 || kb == 32) &&
                   flash_tc_fits(a, relative, kb)
               ? check_attn(a, relative, true)
               : err_set(STENO_ERR_INVALID, "flash_tc experiment: not available for this call");
  if (st) {
    gpu_rec_fail(rec, st);
    return;
  }
  flash_tc(rec, a, relative, a->scale != 0 ? a->scale : 1.0f / sqrtf((float)a->head_dim), kb, skip);
}
