/* The opened device: memory, buffers, transfers and kernels. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/pool.h"
#include "base/timer.h"
#include "gpu/attention.h"
#include "gpu/internal.h"
#include "gpu/spirv.h"

/* Uploads and downloads go through this much staging memory at a time. */
#define STAGING_BYTES ((size_t)64 << 20) /* two halves of 32 MiB */
#define STAGING_HALF (STAGING_BYTES / 2)

static int memory_type(const gpu_device *d, uint32_t bits, VkMemoryPropertyFlags want,
                       uint32_t *out) {
  for (uint32_t i = 0; i < d->mem.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (d->mem.memoryTypes[i].propertyFlags & want) == want) {
      *out = i;
      return 0;
    }
  return err_set(STENO_ERR_GPU, "the device has no memory type with flags 0x%x", (unsigned)want);
}

/* Blocks for the buffers made while loading: 64 MiB, buffers up to 16 MiB. */
#define BLOCK_BYTES ((VkDeviceSize)64 << 20)

static void block_release(gpu_device *d, gpu_block *k) {
  if (k && --k->refs == 0) {
    vkFreeMemory(d->dev, k->mem, NULL);
    free(k);
  }
}

/* Binds b into the block being filled (a new one if it is full or of another
 * memory type), with the device lock held: 1 placed, 0 not (allocate it on
 * its own), −1 an error (set). */
static int block_put(gpu_device *d, gpu_buffer *b, const VkMemoryRequirements *req, uint32_t type) {
  gpu_block *k = d->bblock;
  VkDeviceSize align = req->alignment ? req->alignment : 1;
  VkDeviceSize at = k ? (k->used + align - 1) / align * align : 0;
  if (!k || k->type != type || at + req->size > k->size) {
    gpu_block *nk = mem_alloc(1, sizeof *nk);
    if (!nk) return 0;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = BLOCK_BYTES,
                               .memoryTypeIndex = type};
    if (vkAllocateMemory(d->dev, &ai, NULL, &nk->mem) != VK_SUCCESS) {
      free(nk);
      return 0; /* a dedicated allocation may still fit */
    }
    nk->size = BLOCK_BYTES, nk->type = type, nk->refs = 1;
    block_release(d, k);
    d->bblock = k = nk;
    d->bblocks++;
    at = 0;
  }
  VkResult r = vkBindBufferMemory(d->dev, b->buf, k->mem, at);
  if (r != VK_SUCCESS) return gpu_vk_error(r, "vkBindBufferMemory"), -1;
  k->used = at + req->size;
  k->refs++;
  b->block = k;
  d->bbuffers++;
  return 1;
}

static int buffer_make(gpu_device *d, size_t bytes, VkMemoryPropertyFlags flags, gpu_buffer **out) {
  *out = NULL;
  if (bytes < 4) bytes = 4;
  bytes = (bytes + 3) & ~(size_t)3;
  if (bytes > d->info.max_storage_buffer_range && d->info.max_storage_buffer_range)
    return err_set(STENO_ERR_NOMEM, "a buffer of %zu bytes is over the device's limit (%llu)",
                   bytes, (unsigned long long)d->info.max_storage_buffer_range);
  gpu_buffer *b = mem_alloc(1, sizeof *b);
  if (!b) return STENO_ERR_NOMEM;
  b->dev = d;
  b->size = bytes;
  VkBufferCreateInfo bi = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = bytes,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  VkResult r = vkCreateBuffer(d->dev, &bi, NULL, &b->buf);
  if (r != VK_SUCCESS) {
    free(b);
    return gpu_vk_error(r, "vkCreateBuffer");
  }
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(d->dev, b->buf, &req);
  uint32_t type = 0;
  int st = memory_type(d, req.memoryTypeBits, flags, &type);
  if (!st && flags == VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT && d->batch && req.size <= BLOCK_BYTES / 4) {
    pthread_mutex_lock(&d->lock);
    int in = block_put(d, b, &req, type);
    pthread_mutex_unlock(&d->lock);
    if (in < 0) st = STENO_ERR_GPU;
    if (in > 0) goto placed;
  }
  if (!st) {
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = type};
    r = vkAllocateMemory(d->dev, &ai, NULL, &b->mem);
    if (r != VK_SUCCESS) st = gpu_vk_error(r, "allocating device memory");
  }
  if (!st && (r = vkBindBufferMemory(d->dev, b->buf, b->mem, 0)) != VK_SUCCESS)
    st = gpu_vk_error(r, "vkBindBufferMemory");
placed:
  if (!st && (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
      (r = vkMapMemory(d->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map)) != VK_SUCCESS)
    st = gpu_vk_error(r, "vkMapMemory");
  if (st) {
    if (b->mem) vkFreeMemory(d->dev, b->mem, NULL);
    vkDestroyBuffer(d->dev, b->buf, NULL);
    free(b);
    if (st == STENO_ERR_NOMEM)
      err_wrap(st, "allocating %.1f MiB of GPU memory (%.1f MiB in use): ",
               (double)bytes / (1 << 20), (double)gpu_memory_used(d) / (1 << 20));
    return st;
  }
  pthread_mutex_lock(&d->lock);
  b->serial = ++d->serials;
  d->used += bytes;
  if (d->used > d->peak) d->peak = d->used;
  pthread_mutex_unlock(&d->lock);
  *out = b;
  return 0;
}

int gpu_buffer_new(gpu_device *d, size_t bytes, gpu_buffer **out) {
  VkMemoryPropertyFlags f = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  if (d->info.unified) f |= VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  return buffer_make(d, bytes, f, out);
}

int gpu_buffer_host(gpu_device *d, size_t bytes, gpu_buffer **out) {
  return buffer_make(d, bytes, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                     out);
}

int gpu_buffer_host_cached(gpu_device *d, size_t bytes, gpu_buffer **out) {
  return buffer_make(d, bytes, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                                   VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                     out);
}

void gpu_buffer_free(gpu_buffer *b) {
  if (!b) return;
  gpu_device *d = b->dev;
  if (d->batch) gpu_upload_settle(d); /* no queued copy may land in freed memory */
  if (b->map) vkUnmapMemory(d->dev, b->mem);
  vkDestroyBuffer(d->dev, b->buf, NULL);
  if (b->mem) vkFreeMemory(d->dev, b->mem, NULL);
  pthread_mutex_lock(&d->lock);
  block_release(d, b->block);
  d->used -= b->size;
  pthread_mutex_unlock(&d->lock);
  free(b);
}

size_t gpu_buffer_size(const gpu_buffer *b) { return b->size; }
/* Read under the lock: sessions on other threads allocate while we read. */
static size_t counter(const gpu_device *d, const size_t *c) {
  pthread_mutex_t *lock = (pthread_mutex_t *)&d->lock; /* the lock is not part of the value */
  pthread_mutex_lock(lock);
  size_t v = *c;
  pthread_mutex_unlock(lock);
  return v;
}
size_t gpu_memory_used(const gpu_device *d) { return counter(d, &d->used); }
size_t gpu_memory_peak(const gpu_device *d) { return counter(d, &d->peak); }

VkResult gpu_queue_submit(gpu_device *d, const VkSubmitInfo *si, VkFence fence) {
  pthread_mutex_lock(&d->queue_lock);
  VkResult r = vkQueueSubmit(d->queue, 1, si, fence);
  pthread_mutex_unlock(&d->queue_lock);
  return r;
}

/* Starts a copy of `bytes` between `b` at `offset` and staging half `half`
 * (in either direction) without waiting; its fence signals the end. Called
 * with the device lock held, after the half's previous copy has ended. */
static int staged_copy(gpu_device *d, gpu_buffer *b, size_t offset, size_t bytes, bool to_device,
                       int half) {
  VkCommandBuffer cb = d->xfer[half];
  VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VkResult r = vkResetCommandBuffer(cb, 0);
  if (r == VK_SUCCESS) r = vkBeginCommandBuffer(cb, &begin);
  if (r != VK_SUCCESS) return gpu_vk_error(r, "starting a transfer");
  /* Earlier work (kernels, transfers) on the queue finishes its writes first. */
  VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                       &before, 0, NULL, 0, NULL);
  size_t at = (size_t)half * STAGING_HALF;
  VkBufferCopy region = {.srcOffset = to_device ? at : offset,
                         .dstOffset = to_device ? offset : at,
                         .size = bytes};
  vkCmdCopyBuffer(cb, to_device ? d->staging->buf : b->buf, to_device ? b->buf : d->readback->buf, 1,
                  &region);
  VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_MEMORY_READ_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1,
                       &after, 0, NULL, 0, NULL);
  r = vkEndCommandBuffer(cb);
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                     .pCommandBuffers = &cb};
  if (r == VK_SUCCESS) r = vkResetFences(d->dev, 1, &d->xfer_fence[half]);
  if (r == VK_SUCCESS) r = gpu_queue_submit(d, &si, d->xfer_fence[half]);
  if (r != VK_SUCCESS) return gpu_vk_error(r, "a buffer transfer");
  return 0;
}

/* Waits for half's copy if one was submitted (pending[half]). */
static int staged_wait(gpu_device *d, bool *pending, int half) {
  if (!pending[half]) return 0;
  pending[half] = false;
  VkResult r = vkWaitForFences(d->dev, 1, &d->xfer_fence[half], VK_TRUE, UINT64_MAX);
  return r == VK_SUCCESS ? 0 : gpu_vk_error(r, "a buffer transfer");
}

static int check_range(const gpu_buffer *b, size_t offset, size_t bytes) {
  size_t end;
  if (!add_ok(offset, bytes, &end) || end > b->size)
    return err_set(STENO_ERR_INVALID, "transfer of %zu bytes at %zu past a buffer of %zu", bytes,
                   offset, b->size);
  return 0;
}

/* ---- batched uploads (gpu_upload_batch); called with the device lock held ---- */

/* Below this, one thread copies into staging: waking the others costs more. */
#define COPY_TASK ((size_t)1 << 20)

typedef struct {
  char *dst;
  const char *src;
  size_t bytes, per;
} copy_job;

static void copy_task(void *ctx, int i) {
  const copy_job *j = ctx;
  size_t at = (size_t)i * j->per, n = j->bytes - at < j->per ? j->bytes - at : j->per;
  memcpy(j->dst + at, j->src + at, n);
}

/* memcpy over the copiers: reading a model's pages and writing
 * write-combined staging memory are each far from one core's bandwidth. */
static void copy_wide(gpu_device *d, char *dst, const char *src, size_t bytes) {
  int threads = d->copiers ? pool_threads(d->copiers) : 1;
  if (bytes < 2 * COPY_TASK || threads < 2) {
    memcpy(dst, src, bytes);
    return;
  }
  size_t tasks = bytes / COPY_TASK < (size_t)threads ? bytes / COPY_TASK : (size_t)threads;
  copy_job j = {dst, src, bytes, (bytes + tasks - 1) / tasks};
  pool_run(d->copiers, (int)tasks, copy_task, &j);
}

/* memcpy over the threads lent to the caller (a session's workers during a
 * call; none: in turn), in tasks of COPY_TASK bytes or more: a call's
 * transfers through staging (a batch's samples: 45 MB for 64 × 11 s). */
static void copy_lent(char *dst, const char *src, size_t bytes) {
  if (bytes < 2 * COPY_TASK) {
    memcpy(dst, src, bytes);
    return;
  }
  size_t tasks = bytes / COPY_TASK < 16 ? bytes / COPY_TASK : 16;
  copy_job j = {dst, src, bytes, (bytes + tasks - 1) / tasks};
  pool_run_lent((int)tasks, copy_task, &j);
}

/* Submits the half being filled (if it holds copies) and moves to the other,
 * waiting for that one's last copies. */
static int batch_next(gpu_device *d) {
  int h = d->bhalf;
  if (d->brecording) {
    VkCommandBuffer cb = d->xfer[h];
    VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                             .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0,
                         1, &after, 0, NULL, 0, NULL);
    d->brecording = false;
    VkResult r = vkEndCommandBuffer(cb);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                       .pCommandBuffers = &cb};
    if (r == VK_SUCCESS) r = vkResetFences(d->dev, 1, &d->xfer_fence[h]);
    if (r == VK_SUCCESS) r = gpu_queue_submit(d, &si, d->xfer_fence[h]);
    if (r != VK_SUCCESS) return gpu_vk_error(r, "batched uploads");
    d->bpending[h] = true;
  }
  d->bhalf = h ^ 1;
  d->bfill = 0;
  double t0 = time_now();
  int st = staged_wait(d, d->bpending, d->bhalf);
  d->bwait_s += time_now() - t0;
  return st;
}

/* Submits what is queued and waits for all of it. */
static int batch_drain(gpu_device *d) {
  int st = batch_next(d);
  int w = staged_wait(d, d->bpending, d->bhalf ^ 1);
  return st ? st : w;
}

/* Queues an upload: into staging now, the copy recorded for later. */
static int batch_put(gpu_buffer *b, size_t offset, const char *host, size_t bytes) {
  gpu_device *d = b->dev;
  while (bytes) {
    if (d->bfill == STAGING_HALF) TRY(batch_next(d));
    int h = d->bhalf;
    VkCommandBuffer cb = d->xfer[h];
    if (!d->brecording) {
      VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
      VkResult r = vkResetCommandBuffer(cb, 0);
      if (r == VK_SUCCESS) r = vkBeginCommandBuffer(cb, &begin);
      if (r != VK_SUCCESS) return gpu_vk_error(r, "starting batched uploads");
      VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                                .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT};
      vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                           0, 1, &before, 0, NULL, 0, NULL);
      d->brecording = true;
    }
    size_t n = STAGING_HALF - d->bfill < bytes ? STAGING_HALF - d->bfill : bytes;
    size_t at = (size_t)h * STAGING_HALF + d->bfill;
    double t0 = time_now();
    copy_wide(d, (char *)d->staging->map + at, host, n);
    d->bcopy_s += time_now() - t0;
    d->bbytes += n, d->bcopies++;
    VkBufferCopy region = {.srcOffset = at, .dstOffset = offset, .size = n};
    vkCmdCopyBuffer(cb, d->staging->buf, b->buf, 1, &region);
    /* Regions stay 4-byte aligned (vkCmdCopyBuffer wants nothing more; kept for memcpy speed). */
    d->bfill += (n + 15) & ~(size_t)15;
    if (d->bfill > STAGING_HALF) d->bfill = STAGING_HALF;
    host += n, offset += n, bytes -= n;
  }
  return 0;
}

int gpu_upload_batch(gpu_device *d, bool on) {
  int st = 0;
  pthread_mutex_lock(&d->lock);
  if (on && !d->batch && d->staging) {
    d->batch = true;
    d->bfill = 0;
    d->bbytes = d->bcopies = d->bblocks = d->bbuffers = 0;
    d->bcopy_s = d->bwait_s = 0;
    if (pool_new(pool_default_workers() < 7 ? pool_default_workers() : 7, &d->copiers))
      d->copiers = NULL; /* one thread copies */
  } else if (!on && d->batch) {
    double t0 = time_now();
    st = batch_drain(d);
    d->bwait_s += time_now() - t0;
    d->batch = false;
    block_release(d, d->bblock);
    d->bblock = NULL;
    log_info("uploads: %.1f MiB in %zu copies, %.1f ms copying into staging (%d threads), %.1f ms "
             "waiting for the GPU; %zu buffers in %zu blocks of device memory",
             (double)d->bbytes / 1048576.0, d->bcopies, d->bcopy_s * 1e3,
             d->copiers ? pool_threads(d->copiers) : 1, d->bwait_s * 1e3, d->bbuffers, d->bblocks);
    pool_free(d->copiers);
    d->copiers = NULL;
  }
  pthread_mutex_unlock(&d->lock);
  if (!on && !st && d->load_open) st = gpu_load_work_done(d);
  return st ? st : gpu_check_valid(d);
}

int gpu_load_work(gpu_device *d, gpu_rec **rec) {
  *rec = NULL;
  if (!d->load_rec) TRY(gpu_rec_new(d, &d->load_rec));
  if (!d->load_open) TRY(gpu_rec_begin(d->load_rec));
  d->load_open = true;
  *rec = d->load_rec;
  return 0;
}

/* Frees gpu_load_scratch's buffers (their work has run, or will not). */
static void load_scratch_free(gpu_device *d) {
  for (int i = 0; i < d->nlscratch; i++) gpu_buffer_free(d->lscratch[i]);
  d->nlscratch = 0;
  d->lscratch_bytes = 0;
}

/* Runs the load work recorded so far (its uploads must have landed), then
 * frees the scratch it read. */
static int load_work_run(gpu_device *d) {
  int st = 0;
  if (d->load_open) {
    d->load_open = false;
    st = gpu_rec_run(d->load_rec);
  }
  load_scratch_free(d);
  return st;
}

int gpu_load_work_done(gpu_device *d) { return d->batch ? 0 : load_work_run(d); }

#define LOAD_SCRATCH_BYTES ((size_t)256 << 20)

int gpu_load_scratch(gpu_device *d, size_t bytes, gpu_buffer **out) {
  *out = NULL;
  int n = (int)(sizeof d->lscratch / sizeof *d->lscratch);
  if (d->nlscratch && (d->nlscratch == n || d->lscratch_bytes + bytes > LOAD_SCRATCH_BYTES)) {
    /* The uploads the work reads land first, then the work runs. */
    int st = gpu_upload_settle(d);
    if (st) load_scratch_free(d);
    TRY(st ? st : load_work_run(d));
  }
  TRY(gpu_buffer_new(d, bytes, out));
  d->lscratch[d->nlscratch++] = *out;
  d->lscratch_bytes += bytes;
  return 0;
}

int gpu_upload_settle(gpu_device *d) {
  int st = 0;
  pthread_mutex_lock(&d->lock);
  if (d->batch) st = batch_drain(d);
  pthread_mutex_unlock(&d->lock);
  return st;
}

/* Copies between host memory and b through the staging buffer, half of it
 * at a time: uploads fill one half while the other half's copy runs. */
static int staged(gpu_buffer *b, size_t offset, void *host, size_t bytes, bool to_device) {
  gpu_device *d = b->dev;
  int st = 0;
  bool pending[2] = {false, false};
  pthread_mutex_lock(&d->lock);
  if (d->batch && to_device) {
    st = batch_put(b, offset, host, bytes);
    pthread_mutex_unlock(&d->lock);
    return st;
  }
  if (d->batch) st = batch_drain(d); /* a download reads what was queued */
  for (size_t done = 0, i = 0; done < bytes && !st; i++) {
    int half = (int)(i % 2);
    size_t n = bytes - done < STAGING_HALF ? bytes - done : STAGING_HALF;
    gpu_buffer *sb = to_device ? d->staging : d->readback;
    char *at = (char *)host + done, *stage = (char *)sb->map + (size_t)half * STAGING_HALF;
    st = staged_wait(d, pending, half);
    if (!st && to_device) copy_lent(stage, at, n);
    if (!st) st = staged_copy(d, b, offset + done, n, to_device, half);
    pending[half] = !st;
    if (!st && !to_device && !(st = staged_wait(d, pending, half))) copy_lent(at, stage, n);
    done += n;
  }
  for (int half = 0; half < 2; half++) {
    int w = staged_wait(d, pending, half);
    if (!st) st = w;
  }
  pthread_mutex_unlock(&d->lock);
  return st ? st : gpu_check_valid(d);
}

int gpu_upload(gpu_buffer *b, size_t offset, const void *data, size_t bytes) {
  TRY(check_range(b, offset, bytes));
  if (!b->map) return staged(b, offset, (void *)data, bytes, true);
  memcpy((char *)b->map + offset, data, bytes);
  return 0;
}

int gpu_download(gpu_buffer *b, size_t offset, void *data, size_t bytes) {
  TRY(check_range(b, offset, bytes));
  if (!b->map) return staged(b, offset, data, bytes, false);
  memcpy(data, (const char *)b->map + offset, bytes);
  return 0;
}

int gpu_buffer_from(gpu_device *d, const void *data, size_t bytes, gpu_buffer **out) {
  TRY(gpu_buffer_new(d, bytes, out));
  int st = gpu_upload(*out, 0, data, bytes);
  if (st) {
    gpu_buffer_free(*out);
    *out = NULL;
  }
  return st;
}

/* ---- kernels ---- */

static const gpu_spirv_entry *spirv_find(const char *name) {
  for (const gpu_spirv_entry *e = gpu_spirv; e->name; e++)
    if (!strcmp(e->name, name)) return e;
  return NULL;
}

/* Writes each internal representation the driver keeps of executable ei of
 * k (its assembly, say) to a file of d->ir_dir named after the kernel, its
 * specialization and the representation. */
static void kernel_ir(gpu_device *d, const gpu_kernel *k, const char *spec,
                      const VkPipelineExecutableInfoKHR *ei) {
  PFN_vkGetPipelineExecutableInternalRepresentationsKHR irs =
      (PFN_vkGetPipelineExecutableInternalRepresentationsKHR)vkGetDeviceProcAddr(
          d->dev, "vkGetPipelineExecutableInternalRepresentationsKHR");
  VkPipelineExecutableInternalRepresentationKHR ir[8];
  uint32_t n = 8;
  for (uint32_t i = 0; i < n; i++)
    ir[i] = (VkPipelineExecutableInternalRepresentationKHR){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR};
  if (!irs || irs(d->dev, ei, &n, ir) < 0) return;
  for (uint32_t i = 0; i < n; i++) ir[i].pData = ir[i].dataSize ? malloc(ir[i].dataSize) : NULL;
  if (irs(d->dev, ei, &n, ir) >= 0)
    for (uint32_t i = 0; i < n; i++) {
      char path[2048];
      int at = snprintf(path, sizeof path, "%s/%s-%s-%s", d->ir_dir, k->name, spec, ir[i].name);
      for (int c = (int)strlen(d->ir_dir) + 1; c < at && (size_t)c < sizeof path; c++)
        if (!isalnum((unsigned char)path[c]) && path[c] != '-' && path[c] != '_') path[c] = '_';
      FILE *f = ir[i].pData ? fopen(path, "wb") : NULL;
      size_t len = ir[i].isText ? strnlen(ir[i].pData, ir[i].dataSize) : ir[i].dataSize;
      bool wrote = f && fwrite(ir[i].pData, 1, len, f) == len;
      if (f && fclose(f)) wrote = false;
      if (ir[i].pData && !wrote) log_warn("STENO_PIPELINE_IR: cannot write %s", path);
    }
  for (uint32_t i = 0; i < n; i++) free(ir[i].pData);
}

/* Logs each statistic the driver reports for k's compiled code. */
static void kernel_stats(gpu_device *d, const gpu_kernel *k) {
  PFN_vkGetPipelineExecutablePropertiesKHR props = (PFN_vkGetPipelineExecutablePropertiesKHR)
      vkGetDeviceProcAddr(d->dev, "vkGetPipelineExecutablePropertiesKHR");
  PFN_vkGetPipelineExecutableStatisticsKHR stats = (PFN_vkGetPipelineExecutableStatisticsKHR)
      vkGetDeviceProcAddr(d->dev, "vkGetPipelineExecutableStatisticsKHR");
  if (!props || !stats) return;
  char spec[GPU_MAX_SPEC * 11 + 1] = "";
  for (int i = 0; i < k->nspec; i++)
    snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%s%u", i ? " " : "", k->spec[i]);
  VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = k->pipeline};
  VkPipelineExecutablePropertiesKHR ep[4];
  uint32_t ne = 4;
  for (uint32_t i = 0; i < ne; i++)
    ep[i] = (VkPipelineExecutablePropertiesKHR){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
  if (props(d->dev, &pi, &ne, ep) < 0) return;
  for (uint32_t e = 0; e < ne; e++) {
    VkPipelineExecutableStatisticKHR st[32];
    uint32_t ns = 32;
    for (uint32_t i = 0; i < ns; i++)
      st[i] = (VkPipelineExecutableStatisticKHR){
          .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
    VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                      .pipeline = k->pipeline, .executableIndex = e};
    if (stats(d->dev, &ei, &ns, st) < 0) continue;
    char line[1024];
    int at = snprintf(line, sizeof line, "pipeline stats: %s [%s] %s:", k->name, spec, ep[e].name);
    for (uint32_t i = 0; i < ns && at > 0 && (size_t)at < sizeof line; i++) {
      const VkPipelineExecutableStatisticKHR *x = &st[i];
      if (x->format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR)
        at += snprintf(line + at, sizeof line - (size_t)at, " %s=%g", x->name, x->value.f64);
      else if (x->format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR)
        at += snprintf(line + at, sizeof line - (size_t)at, " %s=%lld", x->name,
                       (long long)x->value.i64);
      else if (x->format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR)
        at += snprintf(line + at, sizeof line - (size_t)at, " %s=%llu", x->name,
                       (unsigned long long)x->value.u64);
      else
        at += snprintf(line + at, sizeof line - (size_t)at, " %s=%s", x->name,
                       x->value.b32 ? "yes" : "no");
    }
    log_warn("%s", line);
    if (d->ir_dir[0]) kernel_ir(d, k, spec, &ei);
  }
}

static int kernel_make(gpu_device *d, const char *name, const uint32_t *spec, int nspec,
                       gpu_kernel **out) {
  const gpu_spirv_entry *src = spirv_find(name);
  if (!src) return err_set(STENO_ERR_INVALID, "no kernel named '%s' is built in", name);
  if (nspec < 0 || nspec > GPU_MAX_SPEC || strlen(name) >= sizeof((*out)->name))
    return err_set(STENO_ERR_INVALID, "kernel '%s': bad specialization", name);
  gpu_kernel *k = mem_alloc(1, sizeof *k);
  if (!k) return STENO_ERR_NOMEM;
  snprintf(k->name, sizeof k->name, "%s", name);
  k->nspec = nspec;
  if (nspec) memcpy(k->spec, spec, (size_t)nspec * sizeof *spec);
  VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                 .codeSize = src->size,
                                 .pCode = src->words};
  VkResult r = vkCreateShaderModule(d->dev, &mi, NULL, &k->module);
  if (r != VK_SUCCESS) {
    free(k);
    return gpu_vk_error(r, "vkCreateShaderModule");
  }
  VkSpecializationMapEntry map[GPU_MAX_SPEC];
  for (int i = 0; i < nspec; i++)
    map[i] = (VkSpecializationMapEntry){.constantID = (uint32_t)i,
                                        .offset = (uint32_t)(i * 4),
                                        .size = 4};
  VkSpecializationInfo si = {.mapEntryCount = (uint32_t)nspec, .pMapEntries = map,
                             .dataSize = (size_t)nspec * 4, .pData = k->spec};
  VkComputePipelineCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = k->module,
                .pName = "main",
                .pSpecializationInfo = nspec ? &si : NULL},
      .layout = d->layout,
      .flags = (d->stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0) |
               (d->ir_dir[0] ? VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR : 0),
  };
  r = vkCreateComputePipelines(d->dev, d->stats ? VK_NULL_HANDLE : d->pcache, 1, &ci, NULL,
                               &k->pipeline);
  d->pcache_made = true;
  if (r != VK_SUCCESS) {
    vkDestroyShaderModule(d->dev, k->module, NULL);
    free(k);
    return err_wrap(gpu_vk_error(r, "vkCreateComputePipelines"), "kernel '%s': ", name);
  }
  if (d->stats) kernel_stats(d, k);
  *out = k;
  return 0;
}

int gpu_kernel_get(gpu_device *d, const char *name, const uint32_t *spec, int nspec,
                   gpu_kernel **out) {
  pthread_mutex_lock(&d->lock);
  for (int i = 0; i < d->nkernels; i++) {
    gpu_kernel *k = d->kernels[i];
    if (k->nspec == nspec && !strcmp(k->name, name) &&
        (!nspec || !memcmp(k->spec, spec, (size_t)nspec * 4))) {
      *out = k;
      pthread_mutex_unlock(&d->lock);
      return 0;
    }
  }
  gpu_kernel **grown = mem_realloc(d->kernels, (size_t)d->nkernels + 1, sizeof *grown);
  int st = grown ? 0 : STENO_ERR_NOMEM;
  if (grown) d->kernels = grown;
  if (!st) st = kernel_make(d, name, spec, nspec, out);
  if (!st) d->kernels[d->nkernels++] = *out;
  pthread_mutex_unlock(&d->lock);
  return st;
}

/* ---- the device ---- */

/* The validation layer's errors become the next call's error. */
static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                 void *user) {
  (void)type;
  gpu_device *d = user;
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    log_warn("Vulkan validation: %s", data->pMessage);
    pthread_mutex_lock(&d->invalid_lock);
    if (!d->invalid[0]) snprintf(d->invalid, sizeof d->invalid, "%s", data->pMessage);
    pthread_mutex_unlock(&d->invalid_lock);
  }
  return VK_FALSE;
}

static int messenger(gpu_device *d) {
  PFN_vkCreateDebugUtilsMessengerEXT create =
      (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(d->inst, "vkCreateDebugUtilsMessengerEXT");
  if (!create) return err_set(STENO_ERR_GPU, "STENO_VALIDATE: no VK_EXT_debug_utils");
  VkDebugUtilsMessengerCreateInfoEXT ci = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
      .pfnUserCallback = on_message,
      .pUserData = d};
  VkResult r = create(d->inst, &ci, NULL, &d->messenger);
  return r == VK_SUCCESS ? 0 : gpu_vk_error(r, "vkCreateDebugUtilsMessengerEXT");
}

int gpu_check_valid(gpu_device *d) {
  int st = 0;
  pthread_mutex_lock(&d->invalid_lock);
  if (d->invalid[0]) {
    st = err_set(STENO_ERR_GPU, "Vulkan validation error: %s", d->invalid);
    d->invalid[0] = 0;
  }
  pthread_mutex_unlock(&d->invalid_lock);
  return st;
}

static int device_create(gpu_device *d) {
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(d->pd, &nq, NULL);
  VkQueueFamilyProperties qf[32];
  if (nq > 32) nq = 32;
  vkGetPhysicalDeviceQueueFamilyProperties(d->pd, &nq, qf);
  d->family = UINT32_MAX;
  for (uint32_t i = 0; i < nq && d->family == UINT32_MAX; i++)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) d->family = i;
  if (d->family == UINT32_MAX)
    return err_set(STENO_ERR_GPU, "%s has no compute queue", d->info.name);
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                .queueFamilyIndex = d->family,
                                .queueCount = 1,
                                .pQueuePriorities = &priority};
  VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                           .queueCreateInfoCount = 1,
                           .pQueueCreateInfos = &qi};
  /* The fast kernels' features, where offered (their probes decide later). */
  bool off = d->fast_policy == STENO_FAST_OFF;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
      .cooperativeMatrix = VK_TRUE};
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                          .pNext = &coop,
                                          .shaderFloat16 = VK_TRUE};
  /* gemm_cm2's: KHR cooperative matrices, cooperative_matrix2's workgroup-scope
   * matrices of flexible dimensions loaded by tensor addressing, the Vulkan
   * memory model its SPIR-V declares. */
  gpu_vk_coop2_features c2 = {.sType = GPU_STYPE_COOP2_FEATURES,
                              .workgroup_scope = VK_TRUE,
                              .flexible_dimensions = VK_TRUE,
                              .tensor_addressing = VK_TRUE};
  gpu_vk_coop_khr_features ck = {.sType = GPU_STYPE_COOP_KHR_FEATURES, .pNext = &c2, .cooperative_matrix = VK_TRUE};
  const char *ext[4] = {VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME};
  uint32_t next = 0;
  d->coop = d->info.coop_nv && d->info.float16 && d->info.subgroup_size == 32 &&
            d->info.api_version >= VK_API_VERSION_1_2 && !off;
  /* gemm_cm2 is hand-written SPIR-V that no GPU has run yet: a driver that
   * crashed compiling it would take every call with it, so it stays behind a
   * debugging switch until one has (docs/perf.md, fifteenth session). */
  const char *cm2 = getenv("STENO_GEMM_CM2");
  d->coop2 = d->coop && d->info.coop2 && cm2 && !strcmp(cm2, "1");
  if (d->coop) {
    ci.pNext = &f12;
    next = 1;
  }
  if (d->coop2) {
    coop.pNext = &ck;
    f12.vulkanMemoryModel = VK_TRUE;
    ext[next++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
    ext[next++] = GPU_VK_COOP2_EXTENSION;
  }
  /* STENO_PIPELINE_STATS=1: what the driver's compiler made of each kernel
   * (registers, spills, ... as the driver names them), for tuning. */
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exe = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
      .pNext = (void *)ci.pNext,
      .pipelineExecutableInfo = VK_TRUE};
  /* STENO_PIPELINE_IR=DIR: also each kernel's internal representations
   * (where the driver keeps any: its assembly, say) as files in DIR. */
  const char *stats = getenv("STENO_PIPELINE_STATS"), *ir = getenv("STENO_PIPELINE_IR");
  bool want = (stats && !strcmp(stats, "1")) || (ir && *ir);
  d->stats = want && d->info.exe_stats;
  if (d->stats && ir && *ir) {
    snprintf(d->ir_dir, sizeof d->ir_dir, "%s", ir);
    if (mkdir(ir, 0777) && errno != EEXIST)
      log_warn("STENO_PIPELINE_IR: cannot make %s: %s", ir, strerror(errno));
  }
  if (want && !d->stats)
    log_warn("STENO_PIPELINE_STATS, STENO_PIPELINE_IR: %s does not offer "
             "VK_KHR_pipeline_executable_properties", d->info.name);
  if (d->stats) {
    ext[next++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
    ci.pNext = &exe;
  }
  ci.enabledExtensionCount = next;
  ci.ppEnabledExtensionNames = ext;
  /* Doubles in shaders where offered: the log-mel's FFT (logmel.comp). */
  VkPhysicalDeviceFeatures core = {.shaderFloat64 = d->info.float64};
  ci.pEnabledFeatures = &core;
  VkResult r = vkCreateDevice(d->pd, &ci, NULL, &d->dev);
  if (r != VK_SUCCESS && d->coop2) { /* offered but refused: without cooperative_matrix2 */
    d->coop2 = false;
    coop.pNext = NULL;
    f12.vulkanMemoryModel = VK_FALSE;
    next = 1; /* NV cooperative matrices */
    if (d->stats) ext[next++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
    ci.enabledExtensionCount = next;
    r = vkCreateDevice(d->pd, &ci, NULL, &d->dev);
  }
  if (r != VK_SUCCESS && (d->coop || d->stats)) {
    /* Offered but refused: run portable. */
    d->coop = d->coop2 = d->stats = false;
    d->ir_dir[0] = 0;
    ci.pNext = NULL;
    ci.enabledExtensionCount = 0;
    r = vkCreateDevice(d->pd, &ci, NULL, &d->dev);
  }
  if (r != VK_SUCCESS) return gpu_vk_error(r, "vkCreateDevice");
  vkGetDeviceQueue(d->dev, d->family, 0, &d->queue);
  vkGetPhysicalDeviceMemoryProperties(d->pd, &d->mem);

  VkDescriptorSetLayoutBinding bind[GPU_MAX_BINDINGS];
  for (uint32_t i = 0; i < GPU_MAX_BINDINGS; i++)
    bind[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                             .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                             .descriptorCount = 1,
                                             .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                        .bindingCount = GPU_MAX_BINDINGS,
                                        .pBindings = bind};
  r = vkCreateDescriptorSetLayout(d->dev, &li, NULL, &d->set_layout);
  if (r != VK_SUCCESS) return gpu_vk_error(r, "vkCreateDescriptorSetLayout");
  VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = GPU_MAX_PUSH};
  VkPipelineLayoutCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                   .setLayoutCount = 1,
                                   .pSetLayouts = &d->set_layout,
                                   .pushConstantRangeCount = 1,
                                   .pPushConstantRanges = &push};
  r = vkCreatePipelineLayout(d->dev, &pi, NULL, &d->layout);
  if (r != VK_SUCCESS) return gpu_vk_error(r, "vkCreatePipelineLayout");

  VkCommandPoolCreateInfo pool = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = d->family};
  r = vkCreateCommandPool(d->dev, &pool, NULL, &d->xfer_pool);
  if (r != VK_SUCCESS) return gpu_vk_error(r, "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                    .commandPool = d->xfer_pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                    .commandBufferCount = 2};
  r = vkAllocateCommandBuffers(d->dev, &ai, d->xfer);
  if (r != VK_SUCCESS) return gpu_vk_error(r, "vkAllocateCommandBuffers");
  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  for (int i = 0; i < 2; i++) {
    r = vkCreateFence(d->dev, &fi, NULL, &d->xfer_fence[i]);
    if (r != VK_SUCCESS) return gpu_vk_error(r, "vkCreateFence");
  }
  if (!d->info.unified) {
    TRY(gpu_buffer_host(d, STAGING_BYTES, &d->staging));
    /* No host-cached type the buffer may use: downloads share the staging. */
    if (gpu_buffer_host_cached(d, STAGING_BYTES, &d->readback)) d->readback = d->staging;
  }
  TRY(gpu_buffer_new(d, 16, &d->spare));
  gpu_pcache_open(d);
  /* STENO_ATTENTION_PRECISION=1|2|3: the tensor-core attention's products
   * (gpu_attention_mm_precision; its probe's tolerance follows), for
   * side-by-side runs. */
  const char *prec = getenv("STENO_ATTENTION_PRECISION");
  if (prec && *prec) gpu_attention_mm_precision((uint32_t)atoi(prec));
  if (!off) gpu_probe_fast(d);
  /* ALL: every fast kernel that passed its probe, faster or not (to test
   * them on a GPU); AUTO and TIMED: the faster of each pair. */
  d->use_fast = off                                  ? GPU_FAST_OFF
                : d->fast_policy == STENO_FAST_ALL ? GPU_FAST_ALL
                                                   : GPU_FAST_CHOSEN;
  return 0;
}

/* Checks what params ask for beyond the device's choice (gpu_choose). */
static int check_params(const steno_model_params *p) {
  if (p->fast < STENO_FAST_AUTO || p->fast > STENO_FAST_TIMED)
    return err_set(STENO_ERR_INVALID, "fast %d: not one of STENO_FAST_AUTO, _OFF, _ALL, _TIMED", p->fast);
  if (p->no_cache & ~(STENO_NO_PIPELINE_CACHE | STENO_NO_PROBE_CACHE))
    return err_set(STENO_ERR_INVALID, "no_cache %#x: only STENO_NO_PIPELINE_CACHE and STENO_NO_PROBE_CACHE",
                   (unsigned)p->no_cache);
  if (p->cache_dir && strlen(p->cache_dir) >= 900)
    return err_set(STENO_ERR_INVALID, "cache_dir: a path of %zu bytes is too long", strlen(p->cache_dir));
  return 0;
}

int gpu_open(const steno_model_params *params, gpu_device **out) {
  *out = NULL;
  steno_model_params p = params ? *params : steno_model_default_params();
  TRY(check_params(&p));
  gpu_info *infos;
  VkPhysicalDevice *pds;
  int n;
  /* One instance lists the devices and opens the chosen one: each costs
   * ~0.1 s with NVIDIA's driver. */
  double t0 = time_now();
  VkInstance inst;
  TRY(gpu_instance(&inst));
  double t1 = time_now();
  int st = gpu_list_instance(inst, &infos, &pds, &n);
  if (st) {
    vkDestroyInstance(inst, NULL);
    return st;
  }
  int chosen = 0;
  st = gpu_choose(infos, n, &p, &chosen);
  gpu_device *d = st ? NULL : mem_alloc(1, sizeof *d);
  if (!st && !d) st = STENO_ERR_NOMEM;
  if (st) {
    free(infos);
    free(pds);
    vkDestroyInstance(inst, NULL);
    return st;
  }
  d->inst = inst;
  d->pd = pds[chosen];
  d->info = infos[chosen];
  free(infos);
  free(pds);
  d->fast_policy = p.fast;
  d->no_cache = p.no_cache;
  snprintf(d->cache_dir, sizeof d->cache_dir, "%s", p.cache_dir ? p.cache_dir : "");
  /* STENO_NO_MAP=1: buffers in device memory with staged transfers even where
   * the host could map them (lets a CPU device test the discrete-GPU path). */
  const char *no_map = getenv("STENO_NO_MAP");
  if (no_map && !strcmp(no_map, "1")) d->info.unified = false;
  pthread_mutex_init(&d->lock, NULL);
  pthread_mutex_init(&d->invalid_lock, NULL);
  pthread_mutex_init(&d->scratch_lock, NULL);
  pthread_mutex_init(&d->queue_lock, NULL);
  if (gpu_validating()) st = messenger(d);
  double t2 = time_now();
  if (!st) st = device_create(d);
  if (st) {
    gpu_close(d);
    return st;
  }
  log_info("using %s (%s), opened in %.1f ms: instance %.1f ms, listing the devices %.1f ms, "
           "device, caches and probes %.1f ms", d->info.name, d->info.driver, (time_now() - t0) * 1e3,
           (t1 - t0) * 1e3, (t2 - t1) * 1e3, (time_now() - t2) * 1e3);
  *out = d;
  return 0;
}

static gpu_buffer *scratch_of(gpu_device *d, gpu_buffer **held, size_t bytes) {
  pthread_mutex_lock(&d->scratch_lock);
  if (!*held && gpu_buffer_new(d, bytes, held)) *held = NULL;
  gpu_buffer *b = *held;
  pthread_mutex_unlock(&d->scratch_lock);
  if (b && gpu_buffer_size(b) < bytes) {
    err_set(STENO_ERR_INVALID, "device scratch of %zu bytes asked for %zu", gpu_buffer_size(b), bytes);
    return NULL;
  }
  return b;
}

gpu_buffer *gpu_device_scratch(gpu_device *d, size_t bytes) { return scratch_of(d, &d->scratch, bytes); }
gpu_buffer *gpu_device_scratch16(gpu_device *d, size_t bytes) {
  return scratch_of(d, &d->scratch16, bytes);
}

void gpu_close(gpu_device *d) {
  if (!d) return;
  if (d->dev) {
    gpu_upload_batch(d, false);
    gpu_rec_free(d->load_rec);
    load_scratch_free(d);
    vkDeviceWaitIdle(d->dev);
    gpu_pcache_close(d);
    for (int i = 0; i < d->nkernels; i++) {
      vkDestroyPipeline(d->dev, d->kernels[i]->pipeline, NULL);
      vkDestroyShaderModule(d->dev, d->kernels[i]->module, NULL);
      free(d->kernels[i]);
    }
    if (d->readback != d->staging) gpu_buffer_free(d->readback);
    gpu_buffer_free(d->staging);
    gpu_buffer_free(d->spare);
    gpu_buffer_free(d->scratch);
    gpu_buffer_free(d->scratch16);
    for (int i = 0; i < 2; i++)
      if (d->xfer_fence[i]) vkDestroyFence(d->dev, d->xfer_fence[i], NULL);
    if (d->xfer_pool) vkDestroyCommandPool(d->dev, d->xfer_pool, NULL);
    if (d->layout) vkDestroyPipelineLayout(d->dev, d->layout, NULL);
    if (d->set_layout) vkDestroyDescriptorSetLayout(d->dev, d->set_layout, NULL);
    vkDestroyDevice(d->dev, NULL);
  }
  free(d->kernels);
  if (d->messenger) {
    PFN_vkDestroyDebugUtilsMessengerEXT destroy = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
        d->inst, "vkDestroyDebugUtilsMessengerEXT");
    if (destroy) destroy(d->inst, d->messenger, NULL);
  }
  if (d->inst) vkDestroyInstance(d->inst, NULL);
  pthread_mutex_destroy(&d->lock);
  pthread_mutex_destroy(&d->invalid_lock);
  pthread_mutex_destroy(&d->scratch_lock);
  pthread_mutex_destroy(&d->queue_lock);
  free(d);
}

const gpu_info *gpu_device_info(const gpu_device *d) { return &d->info; }
bool gpu_device_is_cpu(const gpu_device *d) { return !strcmp(d->info.type, "cpu"); }
bool gpu_work_here(const gpu_device *d, const char *name, bool *forced) {
  const char *e = getenv(name);
  bool on = e && !strcasecmp(e, "gpu");
  if (forced) *forced = on;
  if (e && !strcasecmp(e, "cpu")) return false;
  return on || !gpu_device_is_cpu(d);
}
bool gpu_fast_gemm(const gpu_device *d) { return d->fast_gemm; }
void gpu_set_fast(gpu_device *d, bool on) { d->use_fast = on ? GPU_FAST_ALL : GPU_FAST_OFF; }
bool gpu_using_fast(const gpu_device *d) { return d->use_fast != GPU_FAST_OFF && d->fast_gemm; }
