/* The runtime: device selection errors, buffers, transfers, the recorder's
 * barriers, split submissions, completion marks, copies between dispatches
 * and descriptor-set reuse. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gpu/attention.h"
#include "gpu/internal.h"
#include "gpu/elementwise.h"
#include "base/pool.h"
#include "gpu_test.h"
#include "steno.h"

/* 200 chained dispatches: each adds a row to the next, so a missing barrier
 * or a dropped dispatch shows in the sum. */
static void chain(bool split) {
  const uint32_t n = 64, k = 32;
  float *w = test_floats(n * k);
  for (uint32_t i = 0; i < n; i++) w[i * k + i % k] = 1.0f; /* row i picks input i % k */
  gpu_weight part = {w, n};
  gpu_linear l;
  CHECK_OK(gpu_linear_new(test_device(), GPU_F32, k, &part, 1, NULL, 0, &l));
  float *x = test_random(k, 9);
  gpu_buffer *a = test_upload(x, k);
  float *zero = test_floats(n);
  gpu_buffer *c = test_upload(zero, n);
  gpu_rec *rec = test_rec();
  gpu_rec_split(rec, split);
  for (int call = 0; call < 2; call++) {
    if (call) CHECK_OK(gpu_rec_begin(rec));
    CHECK_OK(gpu_upload(c, 0, zero, n * sizeof *zero));
    for (int i = 0; i < 200; i++) {
      gpu_gemm(rec, a, &l, c, 1, GPU_EPI_RESIDUAL, 1.0f);
      if (i % 50 == 49) CHECK_OK(gpu_rec_flush(rec));
    }
    CHECK(gpu_rec_dispatches(rec) == 200, "%d dispatches", gpu_rec_dispatches(rec));
    float *got = test_run_read(rec, c, n);
    float *want = test_floats(n);
    for (uint32_t i = 0; i < n; i++) want[i] = 200.0f * x[i % k];
    check_close(split ? "200 chained gemms, split" : "200 chained gemms", got, want, n, 1e-5f);
    free(got);
    free(want);
  }
  gpu_rec_free(rec);
  gpu_buffer_free(a);
  gpu_buffer_free(c);
  gpu_linear_free(&l);
  free(w);
  free(x);
  free(zero);
}

static void transfers(gpu_device *d) {
  /* Larger than the staging buffer (two halves of 32 MiB, each reused), at an offset. */
  size_t n = (80u << 20) / 4;
  float *x = test_random(n, 3), *y = test_floats(n);
  gpu_buffer *b;
  CHECK_OK(gpu_buffer_new(d, (n + 16) * 4, &b));
  CHECK_OK(gpu_upload(b, 64, x, n * 4));
  CHECK_OK(gpu_download(b, 64, y, n * 4));
  CHECK(!memcmp(x, y, n * 4), "round trip through the device differs");
  /* Again with workers lent to this thread (a call's): the copies through
   * staging split over them, a length that is no multiple of their share. */
  pool *workers = NULL;
  CHECK_OK(pool_new(3, &workers));
  pool *before = pool_lend(workers);
  size_t m = n - 5;
  float *x2 = test_random(m, 4);
  memset(y, 0, n * 4);
  CHECK_OK(gpu_upload(b, 16, x2, m * 4));
  CHECK_OK(gpu_download(b, 16, y, m * 4));
  CHECK(!memcmp(x2, y, m * 4), "round trip with workers lent differs");
  pool_lend(before);
  pool_free(workers);
  free(x2);
  CHECK(gpu_upload(b, 65, x, n * 4) == STENO_ERR_INVALID, "upload past the end accepted");
  CHECK(strstr(steno_last_error(), "past") != NULL, "message: %s", steno_last_error());
  CHECK(gpu_memory_used(d) >= n * 4, "memory used %zu", gpu_memory_used(d));
  gpu_buffer_free(b);
  free(x);
  free(y);
  /* An absurd size is an error with a message, not a crash. */
  gpu_buffer *huge = NULL;
  int st = gpu_buffer_new(d, (size_t)1 << 62, &huge);
  CHECK(st == STENO_ERR_NOMEM && huge == NULL, "2^62 bytes: status %d", st);
  CHECK(strlen(steno_last_error()) > 0, "no message for a failed allocation");
}

/* Batched uploads (model loading): many buffers of many sizes, one crossing
 * both staging halves, a download and a freed buffer in the middle (each sends
 * what is queued first), then the rest at the end; every byte lands. */
static void batched(gpu_device *d) {
  enum { SMALL = 300, N = SMALL + 4 };
  size_t sizes[N];
  for (int i = 0; i < SMALL; i++) sizes[i] = 4 + (size_t)(i * 37 % 1024) * 4;
  sizes[SMALL] = 4, sizes[SMALL + 1] = (3u << 20) / 4, sizes[SMALL + 2] = (40u << 20) / 4;
  sizes[SMALL + 3] = 12345;
  float *x[N];
  gpu_buffer *b[N];
  CHECK_OK(gpu_upload_batch(d, true));
  for (int i = 0; i < N; i++) {
    x[i] = test_random(sizes[i], (uint32_t)i + 100);
    CHECK_OK(gpu_buffer_new(d, (sizes[i] + 8) * 4, &b[i]));
    CHECK_OK(gpu_upload(b[i], 16, x[i], sizes[i] * 4));
    if (i == SMALL + 1) { /* a download mid-batch sees what was queued before it */
      float *y = test_floats(sizes[5]);
      CHECK_OK(gpu_download(b[5], 16, y, sizes[5] * 4));
      CHECK(!memcmp(x[5], y, sizes[5] * 4), "download mid-batch: the queued upload missing");
      free(y);
    }
  }
  gpu_buffer *gone;
  CHECK_OK(gpu_buffer_new(d, 1 << 20, &gone));
  CHECK_OK(gpu_upload(gone, 0, x[SMALL + 2], 1 << 20));
  gpu_buffer_free(gone);
  CHECK_OK(gpu_upload_batch(d, false));
  int bad = 0;
  for (int i = 0; i < N; i++) {
    float *y = test_floats(sizes[i]);
    CHECK_OK(gpu_download(b[i], 16, y, sizes[i] * 4));
    bad += memcmp(x[i], y, sizes[i] * 4) != 0;
    free(y);
    free(x[i]);
    gpu_buffer_free(b[i]);
  }
  CHECK(bad == 0, "%d of %d batched uploads differ", bad, N);
}

/* A recorder reuses a dispatch's descriptor set while the same buffers are
 * bound; a buffer freed and a new one made in its place (often with the same
 * VkBuffer handle) must get a set of its own, or the kernel writes the freed
 * memory and the new buffer keeps its zeros. */
static void replaced_buffer(void) {
  enum { N = 1000 };
  float *a = test_random(N, 21), *b = test_random(N, 22), *y = test_floats(N);
  gpu_buffer *ab = test_upload(a, N), *bb = test_upload(b, N);
  gpu_rec *rec = test_rec();
  int wrong = 0;
  for (int round = 0; round < 4; round++) {
    gpu_buffer *out;
    CHECK_OK(gpu_buffer_new(test_device(), N * 4, &out));
    CHECK_OK(gpu_rec_begin(rec));
    gpu_add(rec, ab, 0, N, bb, 0, N, out, 0, N, 1, N);
    CHECK_OK(gpu_rec_run(rec));
    CHECK_OK(gpu_download(out, 0, y, N * 4));
    for (int i = 0; i < N; i++) wrong += y[i] != a[i] + b[i];
    gpu_buffer_free(out);
  }
  CHECK(wrong == 0, "%d of %d sums missing in buffers made in a freed one's place", wrong, 4 * N);
  gpu_rec_free(rec);
  gpu_buffer_free(ab);
  gpu_buffer_free(bb);
  free(a);
  free(b);
  free(y);
}

/* An F32 layer of n outputs over k inputs whose output i is input i % k
 * (its weights, to free after l). */
static float *picking_layer(gpu_device *d, uint32_t n, uint32_t k, gpu_linear *l) {
  float *w = test_floats(n * k);
  for (uint32_t i = 0; i < n; i++) w[i * k + i % k] = 1.0f;
  gpu_weight part = {w, n};
  CHECK_OK(gpu_linear_new(d, GPU_F32, k, &part, 1, NULL, 0, l));
  return w;
}

/* a = x (k floats), c = init's first n floats, dst a readback buffer of
 * dst_floats holding init. */
static void copy_buffers(gpu_device *d, const float *x, uint32_t k, const float *init, uint32_t n,
                         uint32_t dst_floats, gpu_buffer **a, gpu_buffer **c, gpu_buffer **dst) {
  *a = *c = *dst = NULL;
  CHECK_OK(gpu_buffer_from(d, x, k * sizeof *x, a));
  CHECK_OK(gpu_buffer_from(d, init, n * sizeof *init, c));
  CHECK_OK(gpu_buffer_readback_new(d, dst_floats * sizeof(float), dst));
  CHECK_OK(gpu_upload(*dst, 0, init, dst_floats * sizeof *init));
}

/* gpu_copy: copies taken between dispatches see the earlier ones' writes and
 * not the later ones' (c = x, copied; c = 2x, copied again), land at their
 * offsets in a readback buffer without touching its other bytes, and a copy
 * past either buffer's end fails the run with a message. */
static void copies(gpu_device *d) {
  const uint32_t n = 64, k = 32;
  gpu_linear l;
  float *w = picking_layer(d, n, k, &l);
  float *x = test_random(k, 11), *zero = test_floats(3 * n);
  gpu_buffer *a, *c, *dst;
  copy_buffers(d, x, k, zero, n, 3 * n, &a, &c, &dst);
  gpu_rec *rec;
  CHECK_OK(gpu_rec_new(d, &rec));
  CHECK_OK(gpu_rec_begin(rec));
  gpu_gemm(rec, a, &l, c, 1, GPU_EPI_RESIDUAL, 1.0f);
  gpu_copy(rec, c, 0, dst, n * sizeof(float), n * sizeof(float));
  gpu_gemm(rec, a, &l, c, 1, GPU_EPI_RESIDUAL, 1.0f);
  gpu_copy(rec, c, 8, dst, 2 * n * sizeof(float), (n - 2) * sizeof(float));
  CHECK_OK(gpu_rec_run(rec));
  float *got = test_floats(3 * n), *want = test_floats(3 * n);
  CHECK_OK(gpu_download(dst, 0, got, 3 * n * sizeof *got));
  for (uint32_t i = 0; i < n; i++) want[n + i] = x[i % k];
  for (uint32_t i = 0; i + 2 < n; i++) want[2 * n + i] = 2 * x[(i + 2) % k];
  CHECK(!memcmp(got, want, 3 * n * sizeof *got), "copies between dispatches: wrong bytes");
  CHECK_OK(gpu_rec_begin(rec));
  gpu_copy(rec, c, 4, dst, 0, n * sizeof(float)); /* 4 bytes past c's end */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "a copy past the source's end ran");
  CHECK(strstr(steno_last_error(), "copy of") != NULL, "message: %s", steno_last_error());
  CHECK_OK(gpu_rec_begin(rec));
  gpu_copy(rec, c, 0, dst, 3 * n * sizeof(float) - 4, 8); /* past dst's end */
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "a copy past the destination's end ran");
  CHECK_OK(gpu_rec_begin(rec));
  gpu_copy(rec, c, 0, dst, 0, 0);
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "an empty copy ran");
  gpu_rec_free(rec);
  gpu_buffer_free(a), gpu_buffer_free(c), gpu_buffer_free(dst);
  gpu_linear_free(&l);
  free(w), free(x), free(zero), free(got), free(want);
}

/* gpu_fill and gpu_update: a dispatch recorded after them reads what they
 * wrote (c = W·x + c over c filled, then over c updated), a later fill does
 * not reach an earlier copy, they touch only their bytes, and bad offsets,
 * sizes and an update over GPU_UPDATE_MAX fail the run with a message. */
static void fills(gpu_device *d) {
  const uint32_t n = 64, k = 32;
  gpu_linear l;
  float *w = picking_layer(d, n, k, &l);
  float *x = test_random(k, 12), *set = test_random(n, 13), *ones = test_floats(4 * n);
  for (uint32_t i = 0; i < 4 * n; i++) ones[i] = 1.0f;
  gpu_buffer *a, *c, *dst;
  copy_buffers(d, x, k, ones, n, 4 * n, &a, &c, &dst);
  gpu_rec *rec;
  CHECK_OK(gpu_rec_new(d, &rec));
  CHECK_OK(gpu_rec_begin(rec));
  gpu_fill(rec, c, 0, n * sizeof(float), 0); /* 0.0f */
  gpu_gemm(rec, a, &l, c, 1, GPU_EPI_RESIDUAL, 1.0f);
  gpu_copy(rec, c, 0, dst, 0, n * sizeof(float));
  gpu_update(rec, c, 0, set, n * sizeof *set);
  gpu_gemm(rec, a, &l, c, 1, GPU_EPI_RESIDUAL, 1.0f);
  gpu_copy(rec, c, 0, dst, n * sizeof(float), n * sizeof(float));
  gpu_fill(rec, c, 0, n * sizeof(float), 0x40000000); /* 2.0f, after the copy */
  gpu_fill(rec, dst, 2 * n * sizeof(float) + 8, 8, 0x3f000000); /* 0.5f at two floats */
  gpu_update(rec, dst, 3 * n * sizeof(float) + 4, set, 4);
  CHECK_OK(gpu_rec_run(rec));
  float *got = test_floats(4 * n), *want = test_floats(4 * n), *back = test_floats(n);
  CHECK_OK(gpu_download(dst, 0, got, 4 * n * sizeof *got));
  CHECK_OK(gpu_download(c, 0, back, n * sizeof *back));
  for (uint32_t i = 0; i < 4 * n; i++) want[i] = 1.0f;
  for (uint32_t i = 0; i < n; i++) want[i] = x[i % k], want[n + i] = set[i] + x[i % k];
  want[2 * n + 2] = want[2 * n + 3] = 0.5f;
  want[3 * n + 1] = set[0];
  CHECK(!memcmp(got, want, 4 * n * sizeof *got), "fills and updates between dispatches: wrong bytes");
  int twos = 0;
  for (uint32_t i = 0; i < n; i++) twos += back[i] == 2.0f;
  CHECK(twos == (int)n, "the last fill: %d of %u words", twos, n);
  static const struct {
    size_t off, bytes;
    bool update;
    const char *what;
  } bad[] = {
      {0, 0, false, "an empty fill"},     {2, 8, false, "a fill off a word"},
      {0, 6, false, "a fill of a part word"}, {4 * 64 * 4 - 4, 8, false, "a fill past the end"},
      {0, 0, true, "an empty update"},    {2, 4, true, "an update off a word"},
      {4 * 64 * 4, 4, true, "an update past the end"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CHECK_OK(gpu_rec_begin(rec));
    if (bad[i].update) gpu_update(rec, dst, bad[i].off, set, bad[i].bytes);
    else gpu_fill(rec, dst, bad[i].off, bad[i].bytes, 0);
    CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "%s ran", bad[i].what);
    CHECK(strstr(steno_last_error(), bad[i].update ? "update" : "fill") != NULL, "%s: message %s",
          bad[i].what, steno_last_error());
  }
  gpu_buffer *big = NULL;
  float *lots = test_floats(GPU_UPDATE_MAX / 4 + 1);
  CHECK_OK(gpu_buffer_new(d, GPU_UPDATE_MAX + 4, &big));
  CHECK_OK(gpu_rec_begin(rec));
  gpu_update(rec, big, 0, lots, GPU_UPDATE_MAX);
  CHECK_OK(gpu_rec_run(rec));
  CHECK_OK(gpu_rec_begin(rec));
  gpu_update(rec, big, 0, lots, GPU_UPDATE_MAX + 4);
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "an update over GPU_UPDATE_MAX ran");
  gpu_rec_free(rec);
  gpu_buffer_free(a), gpu_buffer_free(c), gpu_buffer_free(dst), gpu_buffer_free(big);
  gpu_linear_free(&l);
  free(w), free(x), free(set), free(ones), free(got), free(want), free(back), free(lots);
}

static void bad_use(void) {
  gpu_kernel *k;
  CHECK(gpu_kernel_get(test_device(), "no_such_kernel", NULL, 0, &k) == STENO_ERR_INVALID,
        "unknown kernel accepted");
  gpu_rec *rec = test_rec();
  CHECK(gpu_rec_kernel(rec, "no_such_kernel", NULL, 0) == NULL, "unknown kernel");
  CHECK(gpu_rec_run(rec) == STENO_ERR_INVALID, "a failed recording ran");
  CHECK(strstr(steno_last_error(), "no_such_kernel") != NULL, "message: %s", steno_last_error());
  /* The recorder works again after a fresh begin. */
  CHECK_OK(gpu_rec_begin(rec));
  CHECK_OK(gpu_rec_run(rec));
  gpu_rec_free(rec);
}

/* The device params choose: by index, by part of its name in any case
 * (lavapipe's "llvmpipe" in CI), else an error that says why. */
static void device_choice(void) {
  gpu_info *infos;
  int n;
  CHECK_OK(gpu_list(&infos, &n));
  CHECK(n >= 1 && infos[0].name[0] && infos[0].subgroup_size > 0, "device list");
  steno_model_params p = steno_model_default_params();
  gpu_device *d = NULL;
  p.device = n;
  CHECK(gpu_open(&p, &d) == STENO_ERR_GPU && !d, "device %d of %d accepted", n, n);
  char want[64];
  snprintf(want, sizeof want, "device %d: there", n);
  CHECK(strstr(steno_last_error(), want) != NULL, "message: %s", steno_last_error());
  p.device = -2;
  CHECK(gpu_open(&p, &d) == STENO_ERR_GPU && !d, "device -2 accepted");
  p.device = -1;
  p.device_name = "no device is called this";
  CHECK(gpu_open(&p, &d) == STENO_ERR_GPU && !d, "unknown device name accepted");
  CHECK(strstr(steno_last_error(), "no device is called this") != NULL, "message: %s", steno_last_error());
  p.device = 0;
  CHECK(gpu_open(&p, &d) == STENO_ERR_INVALID && !d, "a device index and a name accepted together");
  /* The last device by its index, then by a part of its name in capitals. */
  char part[sizeof infos->name];
  const char *lvp = NULL;
  for (int i = 0; i < n; i++)
    if (strstr(infos[i].name, "llvmpipe")) lvp = infos[i].name;
  snprintf(part, sizeof part, "%s", lvp ? "LLVMPIPE" : infos[n - 1].name);
  for (char *c = part; *c; c++) *c = (char)toupper((unsigned char)*c);
  p = steno_model_default_params();
  p.device = n - 1;
  CHECK_OK(gpu_open(&p, &d));
  CHECK(d && gpu_device_info(d)->index == n - 1, "device %d opened as %d", n - 1, d ? gpu_device_info(d)->index : -1);
  gpu_close(d);
  p = steno_model_default_params();
  p.device_name = part;
  CHECK_OK(gpu_open(&p, &d));
  CHECK(d && (lvp ? strstr(gpu_device_info(d)->name, "llvmpipe") != NULL
                  : !strcasecmp(gpu_device_info(d)->name, part)),
        "by name %s: %s", part, d ? gpu_device_info(d)->name : "none");
  gpu_close(d);
  free(infos);
}

/* The fast-kernel policy params set: OFF uses no fast kernel, ALL every one
 * that passed its probe; an unknown policy is refused. */
static void fast_policy(void) {
  steno_model_params p = *test_params();
  gpu_device *d = NULL;
  p.fast = STENO_FAST_OFF;
  CHECK_OK(gpu_open(&p, &d));
  for (int k = 0; d && k < GPU_FAST_KINDS; k++)
    CHECK(!gpu_fast_used(d, (gpu_fast_kernel)k), "OFF uses %s", gpu_fast_name((gpu_fast_kernel)k));
  CHECK(d && !gpu_using_fast(d) && !d->coop, "OFF: the fast GEMM enabled");
  gpu_close(d);
  p.fast = STENO_FAST_ALL;
  CHECK_OK(gpu_open(&p, &d));
  for (int k = 0; d && k < GPU_FAST_KINDS; k++) {
    gpu_fast_kernel fk = (gpu_fast_kernel)k;
    CHECK(gpu_fast_used(d, fk) == gpu_fast_passed(d, fk), "ALL: %s passed %d, used %d", gpu_fast_name(fk),
          gpu_fast_passed(d, fk), gpu_fast_used(d, fk));
  }
  gpu_close(d);
  p.fast = 7;
  CHECK(gpu_open(&p, &d) == STENO_ERR_INVALID && !d, "fast policy 7 accepted");
  CHECK(strstr(steno_last_error(), "fast 7") != NULL, "message: %s", steno_last_error());
}

/* With STENO_VALIDATE=1, an error from the validation layer fails the next call
 * with its message (the layer is injected a message here, as it would report one). */
static void validation(void) {
  setenv("STENO_VALIDATE", "1", 1);
  gpu_device *d = NULL;
  int st = gpu_open(test_params(), &d);
  unsetenv("STENO_VALIDATE");
  CHECK(st == 0, "with the validation layer: %s", steno_last_error());
  if (!d) return;
  PFN_vkSubmitDebugUtilsMessageEXT submit =
      (PFN_vkSubmitDebugUtilsMessageEXT)vkGetInstanceProcAddr(d->inst, "vkSubmitDebugUtilsMessageEXT");
  CHECK(submit != NULL, "vkSubmitDebugUtilsMessageEXT");
  gpu_rec *rec;
  CHECK_OK(gpu_rec_new(d, &rec));
  CHECK_OK(gpu_rec_begin(rec));
  CHECK_OK(gpu_rec_run(rec)); /* nothing wrong yet */
  VkDebugUtilsMessengerCallbackDataEXT msg = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CALLBACK_DATA_EXT,
      .pMessage = "injected: a descriptor is not bound"};
  if (submit)
    submit(d->inst, VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
           VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT, &msg);
  CHECK_OK(gpu_rec_begin(rec));
  st = gpu_rec_run(rec);
  CHECK(st == STENO_ERR_GPU && strstr(steno_last_error(), "injected"),
        "validation error became %d: %s", st, steno_last_error());
  CHECK_OK(gpu_rec_begin(rec));
  CHECK_OK(gpu_rec_run(rec)); /* reported once */
  gpu_rec_free(rec);
  gpu_close(d);
}

/* Opens a device with its caches in dir (and the no_cache bits), makes one
 * kernel, closes it; returns the bytes its pipeline cache loaded at open. */
static size_t cache_round(const char *dir, int no_cache) {
  steno_model_params p = *test_params();
  p.cache_dir = dir;
  p.no_cache = no_cache;
  gpu_device *d = NULL;
  CHECK_OK(gpu_open(&p, &d));
  if (!d) return 0;
  size_t loaded = d->pcache_loaded;
  gpu_kernel *k;
  CHECK_OK(gpu_kernel_get(d, "gemm_reduce", NULL, 0, &k));
  gpu_close(d);
  return loaded;
}

/* The path of the only file `glob` names under dir, or "". */
static void find_file(const char *dir, const char *glob, char *path, size_t cap) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "ls %s/%s 2>/dev/null", dir, glob);
  FILE *ls = popen(cmd, "r");
  path[0] = 0;
  if (ls && fgets(path, (int)cap, ls)) path[strcspn(path, "\n")] = 0;
  if (ls) pclose(ls);
}

/* The pipeline cache file under dir, or "". */
static void cache_file(const char *dir, char *path, size_t cap) { find_file(dir, "pipelines-*.bin", path, cap); }

/* The pipeline cache on disk: written at close into a folder it makes, read
 * back at the next open; a foreign or truncated file is passed over;
 * STENO_NO_PIPELINE_CACHE writes nothing. */
static void pipeline_cache(void) {
  char dir[] = "/tmp/steno_pcache_XXXXXX", sub[64], path[512];
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  snprintf(sub, sizeof sub, "%s/a/b", dir);
  cache_round(sub, 0);
  cache_file(sub, path, sizeof path);
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(test_device()->pd, &props);
  FILE *f = path[0] ? fopen(path, "rb") : NULL;
  uint32_t head[4] = {0};
  CHECK(f && fread(head, 4, 4, f) == 4 && head[0] >= 32 && head[1] == 1 &&
            head[2] == props.vendorID && head[3] == props.deviceID,
        "a cache file with the device's header in %s: '%s'", sub, path);
  if (f) fclose(f);
  CHECK(cache_round(sub, 0) >= 32, "the second open reads the cache back");
  /* Foreign bytes (another vendor's header), then a truncated file: not used, no error. */
  f = fopen(path, "r+b");
  uint32_t other = head[2] + 1;
  if (f) fseek(f, 8, SEEK_SET), fwrite(&other, 4, 1, f), fclose(f);
  CHECK(cache_round(sub, 0) == 0, "a foreign cache file is passed over");
  if (truncate(path, 10) == 0) CHECK(cache_round(sub, 0) == 0, "a truncated cache file is passed over");
  char off[64];
  snprintf(off, sizeof off, "%s/off", dir);
  cache_round(off, STENO_NO_PIPELINE_CACHE);
  cache_file(off, path, sizeof path);
  CHECK(!path[0], "STENO_NO_PIPELINE_CACHE wrote %s", path);
  char rm[128];
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  CHECK(system(rm) == 0, "rm");
}

/* A device opened with its caches in dir; its fast kernels' flags. */
static void probe_round(const char *dir, int no_cache, bool *passed, bool *chosen) {
  steno_model_params p = *test_params();
  p.cache_dir = dir;
  p.no_cache = no_cache;
  gpu_device *d = NULL;
  CHECK_OK(gpu_open(&p, &d));
  for (int k = 0; k < GPU_FAST_KINDS; k++) {
    passed[k] = d && gpu_fast_passed(d, (gpu_fast_kernel)k);
    chosen[k] = d && gpu_fast_chosen(d, (gpu_fast_kernel)k);
  }
  gpu_close(d);
}

static size_t read_file(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  return n;
}

/* The probe results on disk: written at the first open and used at the next
 * (a well-formed file's choices are taken as written); a damaged file is
 * probed over and rewritten; STENO_NO_PROBE_CACHE writes nothing. */
static void probe_cache(void) {
  enum { K = GPU_FAST_KINDS };
  char dir[] = "/tmp/steno_probes_XXXXXX", path[512], text[512], again[512], off[64];
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  bool passed[K], chosen[K], p2[K], c2[K];
  probe_round(dir, 0, passed, chosen);
  find_file(dir, "probes-*.txt", path, sizeof path);
  size_t n = path[0] ? read_file(path, text, sizeof text) : 0;
  CHECK(n > 20 && !strncmp(text, "steno-probes 2 driver ", 22), "probe results written in %s", dir);
  /* The first kernel that passed, its choice flipped in the file: taken as written. */
  int k = 0;
  while (k < K && !passed[k]) k++;
  char *fast = strstr(text, "\nfast ");
  if (k < K && fast) {
    char *flag = fast + 6 + 3 * k + 1; /* " PC" per kernel: passed, chosen */
    *flag = *flag == '1' ? '0' : '1';
    FILE *f = fopen(path, "wb");
    if (f) fwrite(text, 1, n, f), fclose(f);
    probe_round(dir, 0, p2, c2);
    CHECK(p2[k] && c2[k] == !chosen[k], "%s: the file's choice was not taken", gpu_fast_name((gpu_fast_kernel)k));
    *flag = *flag == '1' ? '0' : '1';
  }
  /* Results made under another setting that changes the probes (here the
   * tensor-core attention's precision) are not taken: probed again, and the
   * file rewritten under the new key. */
  gpu_attention_mm_precision(2);
  probe_round(dir, 0, p2, c2);
  gpu_attention_mm_precision(3);
  read_file(path, again, sizeof again);
  CHECK(strstr(again, " attention 2\n") != NULL, "the probe file's key ignores the attention's precision: %.80s",
        again);
  /* Half a file: probed again, the same probe results (a GPU's timed choices
   * may differ from run to run), the file whole again with the same key. */
  if (truncate(path, (off_t)n / 2) == 0) {
    probe_round(dir, 0, p2, c2);
    bool same = true;
    for (int i = 0; i < K; i++) same &= p2[i] == passed[i];
    CHECK(same, "a damaged probe file changed the probe results");
    size_t key = (size_t)(strchr(text, '\n') - text);
    CHECK(read_file(path, again, sizeof again) == n && !memcmp(again, text, key),
          "the probe file was not rewritten");
  }
  snprintf(off, sizeof off, "%s/off", dir);
  probe_round(off, STENO_NO_PROBE_CACHE, p2, c2);
  find_file(off, "probes-*.txt", path, sizeof path);
  CHECK(!path[0], "STENO_NO_PROBE_CACHE wrote %s", path);
  char rm[128];
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  CHECK(system(rm) == 0, "rm");
}

/* Timing the fast kernels against their portable twins (STENO_FAST_TIMED,
 * as on every GPU) changes which are used, never which passed their probes;
 * a kernel is used exactly where it passed and was timed faster. */
static void fast_timing(void) {
  bool passed[GPU_FAST_KINDS];
  for (int k = 0; k < GPU_FAST_KINDS; k++) passed[k] = gpu_fast_passed(test_device(), (gpu_fast_kernel)k);
  steno_model_params p = *test_params();
  p.fast = STENO_FAST_TIMED;
  gpu_device *d = NULL;
  CHECK_OK(gpu_open(&p, &d));
  for (int k = 0; d && k < GPU_FAST_KINDS; k++) {
    gpu_fast_kernel fk = (gpu_fast_kernel)k;
    CHECK(gpu_fast_passed(d, fk) == passed[k], "%s: probe %s untimed, %s timed", gpu_fast_name(fk),
          passed[k] ? "passed" : "failed", gpu_fast_passed(d, fk) ? "passed" : "failed");
    CHECK(gpu_fast_used(d, fk) == (passed[k] && gpu_fast_chosen(d, fk)), "%s: used %d, chosen %d",
          gpu_fast_name(fk), gpu_fast_used(d, fk), gpu_fast_chosen(d, fk));
  }
  gpu_close(d);
}

/* gpu_rec_together: a group's first dispatch waits for the dispatch before
 * it, the group's members run side by side, the dispatch after waits for all
 * of them. x = a + b; then, together, y_i = x + a (8 of them, each its own
 * buffer); then z = y_0 + y_7 = 2x + 2a. */
static void together(gpu_device *d) {
  enum { R = 16, C = 256, G = 8 };
  float *a = test_random(R * C, 61), *b = test_random(R * C, 62), *want = test_floats(R * C);
  gpu_buffer *ab = test_upload(a, R * C), *bb = test_upload(b, R * C), *xb = test_random_buffer(R * C, 63);
  gpu_buffer *zb = test_random_buffer(R * C, 64), *yb[G];
  for (int i = 0; i < G; i++) yb[i] = test_random_buffer(R * C, 65 + (uint32_t)i);
  gpu_rec *rec;
  CHECK_OK(gpu_rec_new(d, &rec));
  CHECK_OK(gpu_rec_begin(rec));
  gpu_add(rec, ab, 0, C, bb, 0, C, xb, 0, C, R, C);
  gpu_rec_together(rec, true);
  for (int i = 0; i < G; i++) gpu_add(rec, xb, 0, C, ab, 0, C, yb[i], 0, C, R, C);
  gpu_rec_together(rec, false);
  gpu_add(rec, yb[0], 0, C, yb[G - 1], 0, C, zb, 0, C, R, C);
  float *got = test_run_read(rec, zb, R * C);
  for (int i = 0; i < R * C; i++) want[i] = ((a[i] + b[i]) + a[i]) + ((a[i] + b[i]) + a[i]);
  check_close("gpu_rec_together: the group after its input, the next dispatch after the group", got,
              want, R * C, 0.0f);
  gpu_rec_free(rec);
  gpu_buffer *all[] = {ab, bb, xb, zb};
  for (int i = 0; i < 4; i++) gpu_buffer_free(all[i]);
  for (int i = 0; i < G; i++) gpu_buffer_free(yb[i]);
  free(a), free(b), free(want), free(got);
}

int main(void) {
  test_device();
  fast_timing();
  pipeline_cache();
  probe_cache();
  chain(false);
  chain(true);
  transfers(test_device());
  batched(test_device()); /* mapped memory: the batch changes nothing */
  copies(test_device());
  fills(test_device());
  together(test_device());
  /* The staged path a discrete GPU takes, on whatever device this is. */
  gpu_device *staged = test_staged_device();
  if (staged) {
    transfers(staged);
    batched(staged);
    copies(staged);
    fills(staged);
    gpu_close(staged);
  }
  replaced_buffer();
  bad_use();
  device_choice();
  fast_policy();
  validation();
  return check_done();
}
