/* The recorder: dispatches into command buffers, one submission per call
 * (or a few short ones where splitting is on), each ending with a completion
 * mark that is checked after the wait. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/timer.h"
#include "gpu/internal.h"

/* Submissions one call may make (slots in the marks buffer). */
#define MAX_SUBMISSIONS 256
/* Descriptor sets per pool; pools are added as the dispatch count grows. */
#define SETS_PER_POOL 64

/* A set is reused while the same buffers (by serial: a freed buffer's
 * VkBuffer handle may come back for a new one) are bound at the same index. */
typedef struct {
  uint64_t serials[GPU_MAX_BINDINGS];
  VkDescriptorSet set;
} cached_set;

struct gpu_rec {
  gpu_device *d;
  VkCommandPool pool;
  VkCommandBuffer cb[MAX_SUBMISSIONS];
  VkFence fence[MAX_SUBMISSIONS];
  int ncb;          /* command buffers allocated so far */
  int sub;          /* the submission being recorded */
  bool open;        /* cb[sub] is recording */
  bool split;
  int status;       /* the first error while recording */
  uint32_t call;    /* this call's number, written in the marks */
  gpu_buffer *marks;
  gpu_kernel *mark;
  /* Descriptor sets by dispatch index, reused while the buffers stay the same. */
  cached_set *sets;
  int nsets, next;
  VkDescriptorPool *pools;
  int npools;
  int dispatches;
  gpu_prof *prof; /* gpu_rec_profile */
  double t_begin; /* when the call's recording began (for the profile) */
  double t_submit; /* when it was submitted (for the profile) */
  bool submitted;  /* gpu_rec_submit ran, gpu_rec_wait not yet */
  int together;    /* gpu_rec_together: 1 the next dispatch opens a group, 2 in one */
};

int gpu_rec_new(gpu_device *d, gpu_rec **out) {
  *out = NULL;
  gpu_rec *r = mem_alloc(1, sizeof *r);
  if (!r) return STENO_ERR_NOMEM;
  r->d = d;
  /* Split at gpu_rec_flush by default on a discrete GPU: the GPU runs what was
   * recorded while the rest is recorded (recording the 0.6B Parakeet encoder's
   * ~600 dispatches takes 2.7 ms of host time on the H200's machine).
   * STENO_SPLIT=0 or 1 overrides. */
  const char *split = getenv("STENO_SPLIT");
  r->split = split && *split ? !strcmp(split, "1") : !d->info.unified;
  VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                .queueFamilyIndex = d->family};
  VkResult vr = vkCreateCommandPool(d->dev, &pi, NULL, &r->pool);
  int st = vr == VK_SUCCESS ? 0 : gpu_vk_error(vr, "vkCreateCommandPool");
  if (!st) st = gpu_buffer_host(d, MAX_SUBMISSIONS * 4, &r->marks);
  if (!st) st = gpu_kernel_get(d, "mark", NULL, 0, &r->mark);
  if (st) {
    gpu_rec_free(r);
    return st;
  }
  *out = r;
  return 0;
}

void gpu_rec_free(gpu_rec *r) {
  if (!r) return;
  VkDevice dev = r->d->dev;
  if (r->ncb) vkWaitForFences(dev, (uint32_t)r->ncb, r->fence, VK_TRUE, UINT64_MAX);
  for (int i = 0; i < r->ncb; i++) vkDestroyFence(dev, r->fence[i], NULL);
  if (r->pool) vkDestroyCommandPool(dev, r->pool, NULL);
  for (int i = 0; i < r->npools; i++) vkDestroyDescriptorPool(dev, r->pools[i], NULL);
  free(r->pools);
  free(r->sets);
  gpu_buffer_free(r->marks);
  gpu_prof_free(r->prof);
  free(r);
}

void gpu_rec_profile(gpu_rec *r, const char *title) {
  if (!r->prof && gpu_prof_wanted()) r->prof = gpu_prof_new(r->d, title);
}

void gpu_rec_split(gpu_rec *r, bool on) { r->split = on; }

void gpu_rec_together(gpu_rec *r, bool on) { r->together = on ? 1 : 0; }
gpu_device *gpu_rec_device(const gpu_rec *r) { return r->d; }

int gpu_rec_fail(gpu_rec *r, int status) {
  if (!r->status) r->status = status;
  return status;
}

gpu_kernel *gpu_rec_kernel(gpu_rec *r, const char *name, const uint32_t *spec, int nspec) {
  gpu_kernel *k = NULL;
  if (r->status) return NULL;
  int st = gpu_kernel_get(r->d, name, spec, nspec, &k);
  if (st) gpu_rec_fail(r, st);
  return k;
}
int gpu_rec_dispatches(const gpu_rec *r) { return r->dispatches; }

/* Starts command buffer r->sub, allocating it on first use. */
static int cb_begin(gpu_rec *r) {
  VkDevice dev = r->d->dev;
  if (r->sub >= MAX_SUBMISSIONS)
    return err_set(STENO_ERR_GPU, "more than %d submissions in one call", MAX_SUBMISSIONS);
  if (r->sub == r->ncb) {
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = r->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkResult vr = vkAllocateCommandBuffers(dev, &ai, &r->cb[r->ncb]);
    if (vr != VK_SUCCESS) return gpu_vk_error(vr, "vkAllocateCommandBuffers");
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO,
                            .flags = VK_FENCE_CREATE_SIGNALED_BIT};
    vr = vkCreateFence(dev, &fi, NULL, &r->fence[r->ncb]);
    if (vr != VK_SUCCESS) return gpu_vk_error(vr, "vkCreateFence");
    r->ncb++;
  }
  VkCommandBuffer cb = r->cb[r->sub];
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VkResult vr = vkResetCommandBuffer(cb, 0);
  if (vr == VK_SUCCESS) vr = vkBeginCommandBuffer(cb, &bi);
  if (vr != VK_SUCCESS) return gpu_vk_error(vr, "vkBeginCommandBuffer");
  /* Uploads and earlier submissions finish their writes before these dispatches. */
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       0, 1, &mb, 0, NULL, 0, NULL);
  if (r->sub == 0) gpu_prof_begin(r->prof, cb);
  gpu_prof_mark(r->prof, cb, NULL, 0, 0, 0);
  r->open = true;
  return 0;
}

int gpu_rec_begin(gpu_rec *r) {
  /* A recording abandoned before its run is simply recorded over. */
  if (r->ncb) vkWaitForFences(r->d->dev, (uint32_t)r->ncb, r->fence, VK_TRUE, UINT64_MAX);
  r->sub = 0;
  r->next = 0;
  r->status = 0;
  r->dispatches = 0;
  r->together = 0;
  r->call++;
  r->submitted = false;
  if (r->call == 0) r->call = 1;
  if (r->prof) r->t_begin = time_now();
  memset(r->marks->map, 0, MAX_SUBMISSIONS * 4);
  return r->status = cb_begin(r);
}

static VkDescriptorSet set_for(gpu_rec *r, gpu_buffer *const *bufs, int n) {
  VkDevice dev = r->d->dev;
  VkBuffer want[GPU_MAX_BINDINGS];
  uint64_t serials[GPU_MAX_BINDINGS];
  for (int i = 0; i < GPU_MAX_BINDINGS; i++) {
    const gpu_buffer *b = i < n ? bufs[i] : r->d->spare;
    want[i] = b->buf;
    serials[i] = b->serial;
  }
  int at = r->next++;
  if (at < r->nsets && !memcmp(r->sets[at].serials, serials, sizeof serials)) return r->sets[at].set;
  if (at == r->nsets) {
    if (at % SETS_PER_POOL == 0 && at / SETS_PER_POOL == r->npools) {
      VkDescriptorPoolSize size = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                   .descriptorCount = SETS_PER_POOL * GPU_MAX_BINDINGS};
      VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                       .maxSets = SETS_PER_POOL,
                                       .poolSizeCount = 1,
                                       .pPoolSizes = &size};
      VkDescriptorPool *grown = mem_realloc(r->pools, (size_t)r->npools + 1, sizeof *grown);
      if (!grown) return VK_NULL_HANDLE;
      r->pools = grown;
      VkResult vr = vkCreateDescriptorPool(dev, &pi, NULL, &r->pools[r->npools]);
      if (vr != VK_SUCCESS) {
        gpu_vk_error(vr, "vkCreateDescriptorPool");
        return VK_NULL_HANDLE;
      }
      r->npools++;
    }
    cached_set *grown = mem_realloc(r->sets, (size_t)r->nsets + 1, sizeof *grown);
    if (!grown) return VK_NULL_HANDLE;
    r->sets = grown;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = r->pools[at / SETS_PER_POOL],
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &r->d->set_layout};
    VkResult vr = vkAllocateDescriptorSets(dev, &ai, &r->sets[at].set);
    if (vr != VK_SUCCESS) {
      gpu_vk_error(vr, "vkAllocateDescriptorSets");
      return VK_NULL_HANDLE;
    }
    r->nsets++;
  }
  VkDescriptorBufferInfo info[GPU_MAX_BINDINGS];
  VkWriteDescriptorSet w[GPU_MAX_BINDINGS];
  for (int i = 0; i < GPU_MAX_BINDINGS; i++) {
    info[i] = (VkDescriptorBufferInfo){.buffer = want[i], .offset = 0, .range = VK_WHOLE_SIZE};
    w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                  .dstSet = r->sets[at].set,
                                  .dstBinding = (uint32_t)i,
                                  .descriptorCount = 1,
                                  .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                  .pBufferInfo = &info[i]};
  }
  vkUpdateDescriptorSets(dev, GPU_MAX_BINDINGS, w, 0, NULL);
  memcpy(r->sets[at].serials, serials, sizeof serials);
  return r->sets[at].set;
}

static void record(gpu_rec *r, gpu_kernel *k, VkDescriptorSet set, const void *push,
                   size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  VkCommandBuffer cb = r->cb[r->sub];
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
  /* In a group (gpu_rec_together) only its first dispatch waits. */
  if (r->together != 2)
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
  if (r->together == 1) r->together = 2;
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, r->d->layout, 0, 1, &set, 0, NULL);
  if (push_bytes)
    vkCmdPushConstants(cb, r->d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)push_bytes, push);
  vkCmdDispatch(cb, gx, gy, gz);
}

void gpu_dispatch(gpu_rec *r, gpu_kernel *k, gpu_buffer *const *bufs, int n, const void *push,
                  size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  if (r->status || !k) return;
  if (!r->open) {
    r->status = err_set(STENO_ERR_INVALID, "dispatch of '%s' outside a recording", k->name);
    return;
  }
  if (n < 0 || n > GPU_MAX_BINDINGS || push_bytes > GPU_MAX_PUSH || push_bytes % 4) {
    r->status = err_set(STENO_ERR_INVALID, "dispatch of '%s': %d buffers, %zu push bytes",
                        k->name, n, push_bytes);
    return;
  }
  if (gx == 0 || gy == 0 || gz == 0) return; /* an empty problem: nothing to run */
  VkDescriptorSet set = set_for(r, bufs, n);
  if (!set) {
    r->status = STENO_ERR_GPU;
    return;
  }
  record(r, k, set, push, push_bytes, gx, gy, gz);
  gpu_prof_mark(r->prof, r->cb[r->sub], k, gx, gy, gz);
  r->dispatches++;
}

/* Whether a transfer of `bytes` at dst_off fits dst, in an open recording;
 * else the recording fails. */
static bool transfer_ok(gpu_rec *r, const char *what, gpu_buffer *dst, size_t dst_off, size_t bytes) {
  if (r->status) return false;
  if (!r->open) {
    r->status = err_set(STENO_ERR_INVALID, "%s outside a recording", what);
    return false;
  }
  if (!bytes || dst_off > dst->size || bytes > dst->size - dst_off) {
    r->status = err_set(STENO_ERR_INVALID, "%s of %zu bytes into %zu of %zu", what, bytes, dst_off,
                        dst->size);
    return false;
  }
  return true;
}

/* Around a transfer command: after every earlier dispatch and transfer, and
 * before every later one; the host may read what it wrote once the
 * submission is done. */
static void transfer_before(VkCommandBuffer cb) {
  VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
}

static void transfer_after(VkCommandBuffer cb) {
  VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT |
                                            VK_ACCESS_SHADER_WRITE_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &after,
                       0, NULL, 0, NULL);
}

void gpu_copy(gpu_rec *r, gpu_buffer *src, size_t src_off, gpu_buffer *dst, size_t dst_off,
              size_t bytes) {
  if (!r->status && r->open && (src_off > src->size || bytes > src->size - src_off)) {
    r->status = err_set(STENO_ERR_INVALID, "copy of %zu bytes from %zu of %zu into %zu of %zu", bytes,
                        src_off, src->size, dst_off, dst->size);
    return;
  }
  if (!transfer_ok(r, "copy", dst, dst_off, bytes)) return;
  VkCommandBuffer cb = r->cb[r->sub];
  transfer_before(cb);
  VkBufferCopy c = {.srcOffset = src_off, .dstOffset = dst_off, .size = bytes};
  vkCmdCopyBuffer(cb, src->buf, dst->buf, 1, &c);
  transfer_after(cb);
}

void gpu_fill(gpu_rec *r, gpu_buffer *dst, size_t dst_off, size_t bytes, uint32_t word) {
  if (!transfer_ok(r, "fill", dst, dst_off, bytes)) return;
  if (dst_off % 4 || bytes % 4) {
    r->status = err_set(STENO_ERR_INVALID, "fill of %zu bytes at %zu: not in words", bytes, dst_off);
    return;
  }
  VkCommandBuffer cb = r->cb[r->sub];
  transfer_before(cb);
  vkCmdFillBuffer(cb, dst->buf, dst_off, bytes, word);
  transfer_after(cb);
}

void gpu_update(gpu_rec *r, gpu_buffer *dst, size_t dst_off, const void *data, size_t bytes) {
  if (!transfer_ok(r, "update", dst, dst_off, bytes)) return;
  if (dst_off % 4 || bytes % 4 || bytes > GPU_UPDATE_MAX) {
    r->status = err_set(STENO_ERR_INVALID, "update of %zu bytes at %zu: not in words or over %d",
                        bytes, dst_off, GPU_UPDATE_MAX);
    return;
  }
  VkCommandBuffer cb = r->cb[r->sub];
  transfer_before(cb);
  vkCmdUpdateBuffer(cb, dst->buf, dst_off, bytes, data);
  transfer_after(cb);
}

bool gpu_rec_splits(const gpu_rec *r) { return r->split; }

/* Records the mark for submission r->sub and closes its command buffer. */
static int cb_end(gpu_rec *r) {
  VkCommandBuffer cb = r->cb[r->sub];
  uint32_t push[2] = {(uint32_t)r->sub, r->call};
  gpu_buffer *marks = r->marks;
  VkDescriptorSet set = set_for(r, &marks, 1);
  if (!set) return STENO_ERR_GPU;
  record(r, r->mark, set, push, sizeof push, 1, 1, 1);
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_MEMORY_READ_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb,
                       0, NULL, 0, NULL);
  r->open = false;
  VkResult vr = vkEndCommandBuffer(cb);
  return vr == VK_SUCCESS ? 0 : gpu_vk_error(vr, "vkEndCommandBuffer");
}

static int submit(gpu_rec *r) {
  VkDevice dev = r->d->dev;
  TRY(gpu_upload_settle(r->d)); /* the kernels may read what a batch still holds */
  VkResult vr = vkResetFences(dev, 1, &r->fence[r->sub]);
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                     .pCommandBuffers = &r->cb[r->sub]};
  if (vr == VK_SUCCESS) vr = gpu_queue_submit(r->d, &si, r->fence[r->sub]);
  return vr == VK_SUCCESS ? 0 : gpu_vk_error(vr, "vkQueueSubmit");
}

int gpu_rec_flush(gpu_rec *r) {
  if (r->status || !r->split) return r->status;
  if ((r->status = cb_end(r)) || (r->status = submit(r))) return r->status;
  /* At most two in flight: wait for the one before this. */
  if (r->sub > 0) {
    VkResult vr = vkWaitForFences(r->d->dev, 1, &r->fence[r->sub - 1], VK_TRUE, UINT64_MAX);
    if (vr != VK_SUCCESS) return r->status = gpu_vk_error(vr, "waiting for the GPU");
  }
  r->sub++;
  return r->status = cb_begin(r);
}

int gpu_rec_submit(gpu_rec *r) {
  if (r->status) return r->status;
  if (!r->open) return err_set(STENO_ERR_INVALID, "gpu_rec_submit without gpu_rec_begin");
  r->t_submit = r->prof ? time_now() : 0;
  if ((r->status = cb_end(r)) || (r->status = submit(r))) return r->status;
  r->submitted = true;
  return 0;
}

int gpu_rec_wait(gpu_rec *r) {
  if (r->status) return r->status;
  if (!r->submitted) return err_set(STENO_ERR_INVALID, "gpu_rec_wait without gpu_rec_submit");
  r->submitted = false;
  int n = r->sub + 1;
  VkResult vr = vkWaitForFences(r->d->dev, (uint32_t)n, r->fence, VK_TRUE, UINT64_MAX);
  if (vr != VK_SUCCESS) return r->status = gpu_vk_error(vr, "waiting for the GPU");
  if (r->prof) gpu_prof_host(r->prof, r->t_submit - r->t_begin, time_now() - r->t_submit);
  if ((r->status = gpu_check_valid(r->d))) return r->status;
  gpu_prof_collect(r->prof);
  const uint32_t *marks = r->marks->map;
  for (int i = 0; i < n; i++)
    if (marks[i] != r->call)
      return r->status = err_set(STENO_ERR_GPU,
                                 "the driver did not finish submission %d of %d (cancelled as "
                                 "too long? try STENO_SPLIT=1)",
                                 i + 1, n);
  return 0;
}

int gpu_rec_run(gpu_rec *r) {
  if (r->status) return r->status;
  if (!r->open) return err_set(STENO_ERR_INVALID, "gpu_rec_run without gpu_rec_begin");
  TRY(gpu_rec_submit(r));
  return gpu_rec_wait(r);
}

int gpu_buffer_readback_new(gpu_device *d, size_t bytes, gpu_buffer **out) {
  if (d->info.unified) return gpu_buffer_new(d, bytes, out); /* mapped already */
  if (!gpu_buffer_host_cached(d, bytes, out)) return 0;
  return gpu_buffer_host(d, bytes, out);
}

int gpu_input_map(gpu_device *d, gpu_input *in, size_t bytes, size_t room, void **host) {
  *host = NULL;
  if (room < bytes) room = bytes;
  if (bytes > in->room) {
    gpu_input_free(in);
    TRY(d->info.unified ? gpu_buffer_new(d, room, &in->host) : gpu_buffer_host(d, room, &in->host));
    if (!d->info.unified) TRY(gpu_buffer_new(d, room, &in->device));
    in->room = room;
  }
  if (!in->host->map) return err_set(STENO_ERR_GPU, "an input buffer that is not mapped");
  in->bytes = bytes;
  *host = in->host->map;
  return 0;
}

gpu_buffer *gpu_input_record(gpu_rec *rec, gpu_input *in) {
  if (!in->device) return in->host; /* unified: read where it was written */
  gpu_copy(rec, in->host, 0, in->device, 0, in->bytes);
  return in->device;
}

void gpu_input_free(gpu_input *in) {
  gpu_buffer_free(in->host);
  gpu_buffer_free(in->device);
  *in = (gpu_input){0};
}
