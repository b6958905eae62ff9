/* The device's caches on disk, under steno_model_params.cache_dir, else
 * $XDG_CACHE_HOME/steno, else ~/.cache/steno, one file each per device and
 * driver build (its pipelineCacheUUID):
 * - the pipeline cache: what the driver compiled for our kernels in an
 *   earlier run, so that a second start compiles nothing
 *   (STENO_NO_PIPELINE_CACHE turns it off);
 * - the fast kernels' probe results and timed choices (gpu_probe_fast), keyed
 *   also by the driver version, a hash of our SPIR-V and the switches that
 *   change what is probed, so that a second start neither probes nor times
 *   (STENO_NO_PROBE_CACHE turns it off).
 * They are optimizations only: a missing, foreign, truncated or unwritable
 * file is passed over (STENO_LOG=debug says why), never an error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mem.h"
#include "gpu/attention.h"
#include "gpu/internal.h"
#include "gpu/spirv.h"

/* Larger files are not ours (our kernels' pipelines take a few MB at most). */
#define PCACHE_MAX_BYTES ((size_t)256 << 20)

/* The file `kind`-VENDOR-DEVICE-UUID.`ext` for this device, or false when
 * there is no place for it or the device's params turn it off (`off_bit`). */
static bool cache_path(const gpu_device *d, const VkPhysicalDeviceProperties *p, int off_bit,
                       const char *kind, const char *ext, char *path, size_t cap, char *dir, size_t dcap) {
  if (d->no_cache & off_bit) return false;
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int n = d->cache_dir[0] ? snprintf(dir, dcap, "%s", d->cache_dir)
          : xdg && *xdg ? snprintf(dir, dcap, "%s/steno", xdg)
          : home && *home ? snprintf(dir, dcap, "%s/.cache/steno", home)
                          : -1;
  if (n < 0 || (size_t)n >= dcap) return false;
  char uuid[2 * VK_UUID_SIZE + 1];
  for (unsigned i = 0; i < VK_UUID_SIZE; i++) snprintf(uuid + 2 * i, 3, "%02x", p->pipelineCacheUUID[i]);
  n = snprintf(path, cap, "%s/%s-%08x-%08x-%s.%s", dir, kind, p->vendorID, p->deviceID, uuid, ext);
  return n > 0 && (size_t)n < cap;
}

/* Whether data holds a cache header (VK_PIPELINE_CACHE_HEADER_VERSION_ONE) of this device. */
static bool pcache_valid(const uint8_t *data, size_t size, const VkPhysicalDeviceProperties *p) {
  uint32_t h[4];
  if (size < 16 + VK_UUID_SIZE) return false;
  memcpy(h, data, sizeof h);
  return h[0] >= 16 + VK_UUID_SIZE && h[0] <= size && h[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE &&
         h[2] == p->vendorID && h[3] == p->deviceID &&
         !memcmp(data + 16, p->pipelineCacheUUID, VK_UUID_SIZE);
}

/* The file's bytes if it is a valid cache of this device, else NULL. */
static uint8_t *pcache_read(const char *path, const VkPhysicalDeviceProperties *p, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint8_t *data = NULL;
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (n > 0 && (size_t)n <= PCACHE_MAX_BYTES && fseek(f, 0, SEEK_SET) == 0 &&
      (data = malloc((size_t)n)) && fread(data, 1, (size_t)n, f) == (size_t)n &&
      pcache_valid(data, (size_t)n, p)) {
    *size = (size_t)n;
  } else {
    log_debug("pipeline cache %s: not a cache of this device and driver; not used", path);
    free(data);
    data = NULL;
  }
  fclose(f);
  return data;
}

void gpu_pcache_open(gpu_device *d) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(d->pd, &p);
  char dir[sizeof d->pcache_path];
  if (!cache_path(d, &p, STENO_NO_PIPELINE_CACHE, "pipelines", "bin", d->pcache_path,
                  sizeof d->pcache_path, dir, sizeof dir))
    d->pcache_path[0] = 0;
  size_t size = 0;
  uint8_t *data = d->pcache_path[0] ? pcache_read(d->pcache_path, &p, &size) : NULL;
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                  .initialDataSize = size, .pInitialData = data};
  if (vkCreatePipelineCache(d->dev, &ci, NULL, &d->pcache) != VK_SUCCESS) d->pcache = VK_NULL_HANDLE;
  d->pcache_loaded = d->pcache ? size : 0;
  if (size) log_debug("pipeline cache %s: %zu bytes", d->pcache_path, size);
  free(data);
}

/* mkdir -p for the cache's folder (two levels: ~/.cache/steno). */
static bool make_dirs(char *dir) {
  for (char *s = strchr(dir + 1, '/');; s = strchr(s + 1, '/')) {
    if (s) *s = 0;
    bool ok = mkdir(dir, 0755) == 0 || errno == EEXIST;
    if (s) *s = '/';
    if (!ok) return false;
    if (!s) return true;
  }
}

/* Writes `size` bytes to `path` whole, then renames: a reader never sees half a file. */
static void write_atomic(const char *path, const void *data, size_t size, const char *what) {
  char dir[1024], tmp[1024 + 32];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = slash && make_dirs(dir) ? fopen(tmp, "wb") : NULL;
  bool ok = f && fwrite(data, 1, size, f) == size;
  ok = f && fclose(f) == 0 && ok && rename(tmp, path) == 0;
  if (!ok) {
    remove(tmp);
    log_debug("%s %s: could not be written", what, path);
  }
}

void gpu_pcache_close(gpu_device *d) {
  if (!d->pcache) return;
  size_t size = 0;
  uint8_t *data = NULL;
  /* Written when pipelines were made that the loaded file did not hold. */
  if (d->pcache_path[0] && d->pcache_made &&
      vkGetPipelineCacheData(d->dev, d->pcache, &size, NULL) == VK_SUCCESS &&
      size > d->pcache_loaded && size <= PCACHE_MAX_BYTES && (data = malloc(size)) &&
      vkGetPipelineCacheData(d->dev, d->pcache, &size, data) == VK_SUCCESS)
    write_atomic(d->pcache_path, data, size, "pipeline cache");
  free(data);
  vkDestroyPipelineCache(d->dev, d->pcache, NULL);
  d->pcache = VK_NULL_HANDLE;
}

/* ---- probe results ---- */

/* FNV-1a over every kernel's SPIR-V: a changed kernel is probed again. */
static uint64_t spirv_hash(void) {
  uint64_t h = 14695981039346656037u;
  for (const gpu_spirv_entry *e = gpu_spirv; e->name; e++) {
    const uint8_t *b = (const uint8_t *)e->words;
    for (size_t i = 0; i < e->size; i++) h = (h ^ b[i]) * 1099511628211u;
  }
  return h;
}

/* The key line: the driver, our SPIR-V, and the switches that change what
 * is probed (STENO_GEMM_CM2's variants, STENO_ATTENTION_PRECISION's
 * tolerance), so that results made under one setting never stand for
 * another. */
static int probe_key(const gpu_device *d, const VkPhysicalDeviceProperties *p, uint64_t hash, char *out,
                     size_t cap) {
  return snprintf(out, cap, "steno-probes 2 driver %u spirv %016llx cm2 %d attention %u\n", p->driverVersion,
                  (unsigned long long)hash, d->coop2, gpu_attention_mm_precision_now());
}

/* The text both sides agree on: a key line, then the results. */
static int probe_text(const gpu_device *d, const VkPhysicalDeviceProperties *p, uint64_t hash,
                      char *out, size_t cap) {
  int n = probe_key(d, p, hash, out, cap);
  n += snprintf(out + n, cap - (size_t)n, "gemm_ok");
  for (int v = 0; v < GPU_GEMM_VARIANTS; v++) n += snprintf(out + n, cap - (size_t)n, " %d", d->gemm_ok[v]);
  n += snprintf(out + n, cap - (size_t)n, "\nfast");
  for (int k = 0; k < GPU_FAST_KINDS; k++)
    n += snprintf(out + n, cap - (size_t)n, " %d%d", d->fast[k], d->faster[k]);
  n += snprintf(out + n, cap - (size_t)n, "\npick");
  for (int q = 0; q < 2; q++)
    for (int b = 0; b < 2; b++) n += snprintf(out + n, cap - (size_t)n, " %d", (int)d->gemm_pick[q][b]);
  n += snprintf(out + n, cap - (size_t)n, "\n");
  return n;
}

static bool probe_file(const gpu_device *d, VkPhysicalDeviceProperties *p, char *path, size_t cap) {
  char dir[1024];
  vkGetPhysicalDeviceProperties(d->pd, p);
  /* Another policy chooses for itself (TIMED re-times): only AUTO uses the file. */
  return d->fast_policy == STENO_FAST_AUTO &&
         cache_path(d, p, STENO_NO_PROBE_CACHE, "probes", "txt", path, cap, dir, sizeof dir);
}

bool gpu_probe_cache_load(gpu_device *d) {
  VkPhysicalDeviceProperties p;
  char path[1024], text[512];
  if (!probe_file(d, &p, path, sizeof path)) return false;
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  uint64_t hash = spirv_hash();
  char key[160];
  int kn = probe_key(d, &p, hash, key, sizeof key);
  if (strncmp(text, key, (size_t)kn)) {
    log_debug("probe cache %s: another driver, build or setting; probing again", path);
    return false;
  }
  /* Read every field, then check the file is exactly what these values write. */
  gpu_device got = *d;
  const char *at = strstr(text, "gemm_ok");
  for (int v = 0; at && v < GPU_GEMM_VARIANTS; v++) {
    int x;
    at = strchr(at, ' ');
    if (!at || sscanf(at, " %d", &x) != 1 || (x != 0 && x != 1)) at = NULL;
    else got.gemm_ok[v] = x, at++;
  }
  at = at ? strstr(at, "fast") : NULL;
  for (int k = 0; at && k < GPU_FAST_KINDS; k++) {
    at = strchr(at, ' ');
    if (!at || (at[1] != '0' && at[1] != '1') || (at[2] != '0' && at[2] != '1')) at = NULL;
    else got.fast[k] = at[1] == '1', got.faster[k] = at[2] == '1', at++;
  }
  at = at ? strstr(at, "pick") : NULL;
  for (int q = 0; at && q < 2; q++)
    for (int b = 0; at && b < 2; b++) {
      int x;
      at = strchr(at, ' ');
      if (!at || sscanf(at, " %d", &x) != 1 || x < 0 || x >= GPU_GEMM_VARIANTS) at = NULL;
      else got.gemm_pick[q][b] = (gpu_gemm_variant)x, at++;
    }
  char again[512];
  if (!at || probe_text(&got, &p, hash, again, sizeof again) != (int)n || memcmp(again, text, n)) {
    log_debug("probe cache %s: damaged; probing again", path);
    return false;
  }
  memcpy(d->gemm_ok, got.gemm_ok, sizeof d->gemm_ok);
  memcpy(d->fast, got.fast, sizeof d->fast);
  memcpy(d->faster, got.faster, sizeof d->faster);
  for (int k = 0; k < GPU_FAST_KINDS; k++) d->faster[k] &= !gpu_fast_untimed(d, (gpu_fast_kernel)k);
  memcpy(d->gemm_pick, got.gemm_pick, sizeof d->gemm_pick);
  d->fast_gemm = false;
  for (int v = 1; v < GPU_GEMM_VARIANTS; v++) d->fast_gemm |= d->gemm_ok[v];
  log_debug("probe cache %s: fast-kernel results read", path);
  return true;
}

void gpu_probe_cache_save(const gpu_device *d) {
  VkPhysicalDeviceProperties p;
  char path[1024], text[512];
  if (!probe_file(d, &p, path, sizeof path)) return;
  int n = probe_text(d, &p, spirv_hash(), text, sizeof text);
  if (n > 0 && (size_t)n < sizeof text) write_atomic(path, text, (size_t)n, "probe cache");
}
