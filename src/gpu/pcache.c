/* The pipeline cache on disk: what the driver compiled for our kernels in an
 * earlier run, so that a second start compiles nothing. One file per device
 * and driver build (its pipelineCacheUUID) under $STENO_CACHE_DIR, else
 * $XDG_CACHE_HOME/steno, else ~/.cache/steno; STENO_PIPELINE_CACHE=0 turns it
 * off. The cache is an optimization only: a missing, foreign, truncated or
 * unwritable file is passed over (STENO_LOG=debug says why), never an error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mem.h"
#include "gpu/internal.h"

/* Larger files are not ours (our kernels' pipelines take a few MB at most). */
#define PCACHE_MAX_BYTES ((size_t)256 << 20)

/* The file for this device, or false when there is no place for it. */
static bool pcache_path(const VkPhysicalDeviceProperties *p, char *path, size_t cap, char *dir,
                        size_t dcap) {
  const char *off = getenv("STENO_PIPELINE_CACHE");
  if (off && !strcmp(off, "0")) return false;
  const char *env = getenv("STENO_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int n = env && *env   ? snprintf(dir, dcap, "%s", env)
          : xdg && *xdg ? snprintf(dir, dcap, "%s/steno", xdg)
          : home && *home ? snprintf(dir, dcap, "%s/.cache/steno", home)
                          : -1;
  if (n < 0 || (size_t)n >= dcap) return false;
  char uuid[2 * VK_UUID_SIZE + 1];
  for (unsigned i = 0; i < VK_UUID_SIZE; i++) snprintf(uuid + 2 * i, 3, "%02x", p->pipelineCacheUUID[i]);
  n = snprintf(path, cap, "%s/pipelines-%08x-%08x-%s.bin", dir, p->vendorID, p->deviceID, uuid);
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
  if (!pcache_path(&p, d->pcache_path, sizeof d->pcache_path, dir, sizeof dir)) d->pcache_path[0] = 0;
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

void gpu_pcache_close(gpu_device *d) {
  if (!d->pcache) return;
  size_t size = 0;
  uint8_t *data = NULL;
  /* Written when pipelines were made that the loaded file did not hold. */
  if (d->pcache_path[0] && d->pcache_made &&
      vkGetPipelineCacheData(d->dev, d->pcache, &size, NULL) == VK_SUCCESS &&
      size > d->pcache_loaded && size <= PCACHE_MAX_BYTES && (data = malloc(size)) &&
      vkGetPipelineCacheData(d->dev, d->pcache, &size, data) == VK_SUCCESS) {
    char dir[sizeof d->pcache_path], tmp[sizeof d->pcache_path + 32];
    snprintf(dir, sizeof dir, "%s", d->pcache_path);
    *strrchr(dir, '/') = 0;
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", d->pcache_path, (long)getpid());
    FILE *f = make_dirs(dir) ? fopen(tmp, "wb") : NULL;
    /* Written whole, then renamed: a reader never sees half a file. */
    bool ok = f && fwrite(data, 1, size, f) == size;
    ok = f && fclose(f) == 0 && ok && rename(tmp, d->pcache_path) == 0;
    if (!ok) {
      remove(tmp);
      log_debug("pipeline cache %s: could not be written", d->pcache_path);
    }
  }
  free(data);
  vkDestroyPipelineCache(d->dev, d->pcache, NULL);
  d->pcache = VK_NULL_HANDLE;
}
