/* The kernel profiler: with STENO_PROFILE=1 every recorder writes a GPU
 * timestamp after each dispatch. Dispatches are separated by full barriers,
 * so the gap between two timestamps is one kernel's time. Times add up per
 * kernel and grid (one row per GEMM shape) and the table goes to stderr when
 * the recorder is freed: where a forward pass spends its time, on the device
 * itself, without a vendor profiler. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "gpu/internal.h"

#define PROF_QUERIES 32768

typedef struct {
  char key[96];
  double ns;
  long n;
} prof_row;

struct gpu_prof {
  VkDevice dev;
  VkQueryPool pool;
  double period;                  /* ns per tick */
  uint64_t mask;                  /* the valid bits */
  const char *label[PROF_QUERIES]; /* per query: its row's key, or NULL for a start */
  char keys[PROF_QUERIES][96];
  uint32_t used;
  prof_row *rows;
  int nrows;
  long calls;
  double span_ns;          /* first to last timestamp of each call: kernels and the gaps between */
  double record_s, wait_s; /* host: recording (begin → submit), submit → fence */
  char title[64];
};

bool gpu_prof_wanted(void) {
  const char *e = getenv("STENO_PROFILE");
  return e && *e && strcmp(e, "0");
}

gpu_prof *gpu_prof_new(gpu_device *d, const char *title) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(d->pd, &p);
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(d->pd, &nq, NULL);
  VkQueueFamilyProperties *qf = mem_alloc(nq ? nq : 1, sizeof *qf);
  gpu_prof *g = mem_alloc(1, sizeof *g);
  if (!qf || !g) {
    free(qf);
    free(g);
    return NULL;
  }
  vkGetPhysicalDeviceQueueFamilyProperties(d->pd, &nq, qf);
  uint32_t bits = d->family < nq ? qf[d->family].timestampValidBits : 0;
  free(qf);
  VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                              .queryType = VK_QUERY_TYPE_TIMESTAMP,
                              .queryCount = PROF_QUERIES};
  if (!bits || vkCreateQueryPool(d->dev, &qi, NULL, &g->pool) != VK_SUCCESS) {
    fprintf(stderr, "steno: STENO_PROFILE: this queue has no timestamps\n");
    free(g);
    return NULL;
  }
  g->dev = d->dev;
  snprintf(g->title, sizeof g->title, "%s", title);
  g->period = p.limits.timestampPeriod;
  g->mask = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
  return g;
}

/* The start of a call: its queries are reset in its first command buffer. */
void gpu_prof_begin(gpu_prof *g, VkCommandBuffer cb) {
  if (!g) return;
  vkCmdResetQueryPool(cb, g->pool, 0, PROF_QUERIES);
  g->used = 0;
  g->calls++;
}

/* A timestamp: after kernel k (or, with k NULL, the start of a command buffer). */
void gpu_prof_mark(gpu_prof *g, VkCommandBuffer cb, const gpu_kernel *k, uint32_t gx,
                   uint32_t gy, uint32_t gz) {
  if (!g || g->used >= PROF_QUERIES) return;
  uint32_t q = g->used++;
  g->label[q] = NULL;
  if (k) {
    snprintf(g->keys[q], sizeof g->keys[q], "%s %ux%ux%u", k->name, gx, gy, gz);
    g->label[q] = g->keys[q];
  }
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, g->pool, q);
}

static void add(gpu_prof *g, const char *key, double ns) {
  for (int i = 0; i < g->nrows; i++)
    if (!strcmp(g->rows[i].key, key)) {
      g->rows[i].ns += ns;
      g->rows[i].n++;
      return;
    }
  prof_row *grown = mem_realloc(g->rows, (size_t)g->nrows + 1, sizeof *grown);
  if (!grown) return;
  g->rows = grown;
  prof_row *r = &g->rows[g->nrows++];
  snprintf(r->key, sizeof r->key, "%s", key);
  r->ns = ns;
  r->n = 1;
}

/* After the call's wait: each kernel's time joins its row. */
void gpu_prof_collect(gpu_prof *g) {
  if (!g || !g->used) return;
  uint64_t *t = mem_alloc(g->used, sizeof *t);
  if (!t) return;
  if (vkGetQueryPoolResults(g->dev, g->pool, 0, g->used, g->used * sizeof *t, t, sizeof *t,
                            VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS)
  {
    for (uint32_t q = 1; q < g->used; q++)
      if (g->label[q]) add(g, g->label[q], (double)((t[q] - t[q - 1]) & g->mask) * g->period);
    g->span_ns += (double)((t[g->used - 1] - t[0]) & g->mask) * g->period;
  }
  free(t);
}

void gpu_prof_host(gpu_prof *g, double record_s, double wait_s) {
  if (!g) return;
  g->record_s += record_s;
  g->wait_s += wait_s;
}

static int by_time(const void *a, const void *b) {
  double x = ((const prof_row *)a)->ns, y = ((const prof_row *)b)->ns;
  return (x < y) - (x > y);
}

void gpu_prof_free(gpu_prof *g) {
  if (!g) return;
  if (g->nrows) {
    qsort(g->rows, (size_t)g->nrows, sizeof *g->rows, by_time);
    double all = 0;
    for (int i = 0; i < g->nrows; i++) all += g->rows[i].ns;
    fprintf(stderr, "steno profile (%s): %ld calls, %.3f ms of kernels per call\n", g->title, g->calls,
            all / 1e6 / (double)g->calls);
    double c = (double)g->calls;
    fprintf(stderr,
            "  per call: GPU span %.3f ms (kernels and the gaps between them), host recording "
            "%.3f ms, submit to fence %.3f ms\n",
            g->span_ns / 1e6 / c, g->record_s * 1e3 / c, g->wait_s * 1e3 / c);
    fprintf(stderr, "%10s %6s %8s %10s  %s\n", "ms/call", "%", "n/call", "us each", "kernel grid");
    for (int i = 0; i < g->nrows && i < 60; i++) {
      const prof_row *r = &g->rows[i];
      fprintf(stderr, "%10.3f %6.1f %8.1f %10.2f  %s\n", r->ns / 1e6 / (double)g->calls,
              100 * r->ns / all, (double)r->n / (double)g->calls, r->ns / 1e3 / (double)r->n,
              r->key);
    }
  }
  vkDestroyQueryPool(g->dev, g->pool, NULL);
  free(g->rows);
  free(g);
}
