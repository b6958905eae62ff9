#include "io/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/mem.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "GGUF values are read as little endian");

/* ---- a pool for the metadata copies, freed with the file ---- */

struct gguf_chunk {
  struct gguf_chunk *next;
  size_t used, cap;
  max_align_t mem[];
};

enum { POOL_CHUNK = 64 * 1024, POOL_ALIGN = sizeof(max_align_t) };

static void *too_big(size_t bytes) {
  err_set(STENO_ERR_NOMEM, "metadata allocation of %zu bytes overflows", bytes);
  return NULL;
}

/* `bytes` of storage aligned for any type, owned by f. Large requests get a
 * chunk of their own, behind the current one, so its free space is kept. */
static void *pool_alloc(gguf_file *f, size_t bytes) {
  size_t need, total;
  if (!add_ok(bytes, POOL_ALIGN - 1, &need)) return too_big(bytes);
  need &= ~(size_t)(POOL_ALIGN - 1);
  struct gguf_chunk *c = f->pool;
  if (c && c->cap - c->used >= need) {
    void *p = (char *)c->mem + c->used;
    c->used += need;
    return p;
  }
  size_t cap = need > POOL_CHUNK / 4 ? need : POOL_CHUNK;
  if (!add_ok(sizeof *c, cap, &total)) return too_big(bytes);
  struct gguf_chunk *n = mem_alloc(1, total);
  if (!n) return NULL;
  n->cap = cap;
  n->used = need;
  if (cap == need && c) { /* a dedicated chunk: keep the current one in front */
    n->next = c->next;
    c->next = n;
  } else {
    n->next = c;
    f->pool = n;
  }
  return n->mem;
}

/* ---- reading with every length checked ---- */

typedef struct reader {
  gguf_file *f;
  size_t pos;     /* next byte to read */
  char ctx[160];  /* what is being read, for messages: "key 'x'", "tensor 'y' (#3)" */
} reader;

/* STENO_ERR_FORMAT with "<file>: <ctx>: <message>". */
__attribute__((format(printf, 2, 3))) static int fail(const reader *r, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return err_set(STENO_ERR_FORMAT, "%s: %s%s%s", r->f->name, r->ctx, r->ctx[0] ? ": " : "", msg);
}

static size_t left(const reader *r) { return r->f->size - r->pos; }

static int rd(reader *r, void *dst, size_t n, const char *what) {
  if (n > left(r))
    return fail(r, "file truncated: %s needs %zu bytes at offset %zu, %zu left", what, n, r->pos,
                left(r));
  memcpy(dst, r->f->base + r->pos, n);
  r->pos += n;
  return STENO_OK;
}

static int rd_u32(reader *r, uint32_t *v, const char *what) { return rd(r, v, 4, what); }
static int rd_u64(reader *r, uint64_t *v, const char *what) { return rd(r, v, 8, what); }

/* A length-prefixed string, copied NUL-terminated into the pool. */
static int rd_str(reader *r, gguf_str *out, const char *what) {
  uint64_t len = 0;
  TRY(rd_u64(r, &len, what));
  if (len > left(r))
    return fail(r, "file truncated: %s of %llu bytes at offset %zu, %zu left", what,
                (unsigned long long)len, r->pos, left(r));
  char *s = pool_alloc(r->f, (size_t)len + 1);
  if (!s) return STENO_ERR_NOMEM;
  memcpy(s, r->f->base + r->pos, (size_t)len);
  s[len] = 0;
  r->pos += (size_t)len;
  out->s = s;
  out->len = (size_t)len;
  return STENO_OK;
}

/* A key or tensor name: non-empty, no NUL inside (lookups are by C string). */
static int rd_name(reader *r, const char **out, const char *what) {
  gguf_str s = {0};
  TRY(rd_str(r, &s, what));
  if (s.len == 0) return fail(r, "empty %s", what);
  if (strlen(s.s) != s.len) return fail(r, "%s contains a NUL byte", what);
  *out = s.s;
  return STENO_OK;
}

/* ---- metadata ---- */

static const char *const val_names[GGUF_VAL_COUNT] = {
    "UINT8", "INT8",   "UINT16", "INT16", "UINT32", "INT32",   "FLOAT32",
    "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64", "FLOAT64",
};

/* Bytes per element as stored; 0 for the variable-size STRING and ARRAY. */
static const uint8_t val_size[GGUF_VAL_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *gguf_val_type_name(uint32_t type) {
  return type < GGUF_VAL_COUNT ? val_names[type] : "unknown";
}

/* n elements of `type` (not ARRAY) into kv->v, copied into the pool. */
static int rd_elems(reader *r, gguf_kv *kv, uint32_t type, uint64_t n) {
  size_t min = type == GGUF_VAL_STRING ? 8 : val_size[type];
  if (n > left(r) / min)
    return fail(r, "file truncated or corrupt: %llu %s values cannot fit in the %zu bytes left",
                (unsigned long long)n, val_names[type], left(r));
  kv->elem_type = type;
  kv->n = (size_t)n;
  if (type == GGUF_VAL_STRING) {
    gguf_str *s = pool_alloc(r->f, (size_t)n * sizeof *s); /* n ≤ size/8: no overflow */
    if (!s) return STENO_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) TRY(rd_str(r, &s[i], "string"));
    kv->v.str = s;
  } else if (type == GGUF_VAL_BOOL) {
    bool *b = pool_alloc(r->f, (size_t)n);
    if (!b) return STENO_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) b[i] = r->f->base[r->pos + i] != 0;
    r->pos += (size_t)n;
    kv->v.b = b;
  } else {
    void *p = pool_alloc(r->f, (size_t)n * min);
    if (!p) return STENO_ERR_NOMEM;
    TRY(rd(r, p, (size_t)n * min, "value"));
    kv->v.data = p;
  }
  return STENO_OK;
}

static int rd_kv(reader *r, gguf_kv *kv, size_t i) {
  snprintf(r->ctx, sizeof r->ctx, "key #%zu", i);
  TRY(rd_name(r, &kv->key, "key name"));
  snprintf(r->ctx, sizeof r->ctx, "key '%.100s'", kv->key);
  TRY(rd_u32(r, &kv->type, "value type"));
  if (kv->type >= GGUF_VAL_COUNT) return fail(r, "unknown value type %u", kv->type);
  if (kv->type != GGUF_VAL_ARRAY) return rd_elems(r, kv, kv->type, 1);
  uint32_t elem = 0;
  uint64_t n = 0;
  TRY(rd_u32(r, &elem, "array element type"));
  if (elem == GGUF_VAL_ARRAY) return fail(r, "nested arrays are not supported");
  if (elem >= GGUF_VAL_COUNT) return fail(r, "unknown array element type %u", elem);
  TRY(rd_u64(r, &n, "array length"));
  return rd_elems(r, kv, elem, n);
}

static int cmp_kv(const void *a, const void *b) {
  const gguf_kv *x = *(const gguf_kv *const *)a, *y = *(const gguf_kv *const *)b;
  int c = strcmp(x->key, y->key);
  return c ? c : (x < y ? -1 : x > y);
}

/* Sorts the lookup index and rejects duplicate keys. */
static int index_keys(reader *r) {
  gguf_file *f = r->f;
  f->kv_by_key = mem_alloc(f->n_kv, sizeof *f->kv_by_key);
  if (!f->kv_by_key) return STENO_ERR_NOMEM;
  for (size_t i = 0; i < f->n_kv; i++) f->kv_by_key[i] = &f->kv[i];
  if (f->n_kv) qsort(f->kv_by_key, f->n_kv, sizeof *f->kv_by_key, cmp_kv);
  r->ctx[0] = 0;
  for (size_t i = 1; i < f->n_kv; i++) {
    const gguf_kv *a = f->kv_by_key[i - 1], *b = f->kv_by_key[i];
    if (!strcmp(a->key, b->key))
      return fail(r, "key '%.100s' appears twice (#%td and #%td)", a->key, a - f->kv, b - f->kv);
  }
  return STENO_OK;
}

static int rd_alignment(reader *r) {
  gguf_file *f = r->f;
  const gguf_kv *kv = gguf_find(f, "general.alignment");
  f->alignment = GGUF_DEFAULT_ALIGNMENT;
  if (!kv) return STENO_OK;
  snprintf(r->ctx, sizeof r->ctx, "key 'general.alignment'");
  if (kv->type != GGUF_VAL_UINT32)
    return fail(r, "is %s, must be UINT32", gguf_val_type_name(kv->type));
  uint32_t a = kv->v.u32[0];
  if (a == 0 || (a & (a - 1))) return fail(r, "%u is not a power of two", a);
  f->alignment = a;
  return STENO_OK;
}

/* ---- tensors ---- */

static int rd_tensor_info(reader *r, gguf_tensor *t, size_t i) {
  snprintf(r->ctx, sizeof r->ctx, "tensor #%zu", i);
  TRY(rd_name(r, &t->name, "tensor name"));
  snprintf(r->ctx, sizeof r->ctx, "tensor '%.100s' (#%zu)", t->name, i);
  TRY(rd_u32(r, &t->n_dims, "n_dims"));
  if (t->n_dims < 1 || t->n_dims > 4) return fail(r, "n_dims is %u (1 to 4 allowed)", t->n_dims);
  t->nelem = 1;
  for (uint32_t d = 0; d < 4; d++) {
    t->ne[d] = 1;
    if (d < t->n_dims) TRY(rd_u64(r, &t->ne[d], "dims"));
    if (t->ne[d] > INT64_MAX) return fail(r, "ne[%u] = %llu is negative as int64", d,
                                          (unsigned long long)t->ne[d]);
    if (__builtin_mul_overflow(t->nelem, t->ne[d], &t->nelem) || t->nelem > INT64_MAX)
      return fail(r, "element count overflows (ne[%u] = %llu)", d, (unsigned long long)t->ne[d]);
  }
  TRY(rd_u32(r, &t->type, "tensor type"));
  TRY(rd_u64(r, &t->offset, "tensor offset"));
  const gguf_type_traits *tr = gguf_type_traits_of(t->type);
  if (!tr) return fail(r, "unknown tensor type %u", t->type);
  if (t->ne[0] % tr->block_size)
    return fail(r, "ne[0] = %llu is not a multiple of the %s block size %u",
                (unsigned long long)t->ne[0], tr->name, tr->block_size);
  if (gguf_type_nbytes(t->type, t->nelem, &t->nbytes))
    return err_wrap(STENO_ERR_FORMAT, "%s: %s: ", r->f->name, r->ctx);
  return STENO_OK;
}

/* Places tensor i in the data section: aligned, and inside the file. */
static int place_tensor(reader *r, gguf_tensor *t, size_t i) {
  gguf_file *f = r->f;
  snprintf(r->ctx, sizeof r->ctx, "tensor '%.100s' (#%zu)", t->name, i);
  if (t->offset % f->alignment)
    return fail(r, "offset %llu is not a multiple of the alignment %u",
                (unsigned long long)t->offset, f->alignment);
  uint64_t start, end;
  if (__builtin_add_overflow((uint64_t)f->data_offset, t->offset, &start) ||
      __builtin_add_overflow(start, (uint64_t)t->nbytes, &end))
    return fail(r, "offset %llu + %zu bytes overflows", (unsigned long long)t->offset, t->nbytes);
  if (end > f->size)
    return fail(r, "data [%llu, %llu) past end of file (%zu bytes)", (unsigned long long)start,
                (unsigned long long)end, f->size);
  t->data = f->base + start;
  return STENO_OK;
}

static int cmp_tensor_name(const void *a, const void *b) {
  const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x < y ? -1 : x > y);
}

static int cmp_tensor_offset(const void *a, const void *b) {
  const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* Sorts the name index, rejects duplicate names, then overlapping data. */
static int index_tensors(reader *r) {
  gguf_file *f = r->f;
  size_t n = f->n_tensors;
  const gguf_tensor **v = mem_alloc(n, sizeof *v);
  if (!v) return STENO_ERR_NOMEM;
  f->tensor_by_name = v;
  for (size_t i = 0; i < n; i++) v[i] = &f->tensors[i];
  if (n) qsort(v, n, sizeof *v, cmp_tensor_name);
  r->ctx[0] = 0;
  for (size_t i = 1; i < n; i++)
    if (!strcmp(v[i - 1]->name, v[i]->name))
      return fail(r, "tensor '%.100s' appears twice (#%td and #%td)", v[i]->name,
                  v[i - 1] - f->tensors, v[i] - f->tensors);

  const gguf_tensor **by_off = mem_alloc(n, sizeof *by_off);
  if (!by_off) return STENO_ERR_NOMEM;
  memcpy(by_off, v, n * sizeof *v);
  if (n) qsort(by_off, n, sizeof *by_off, cmp_tensor_offset);
  const gguf_tensor *last = NULL; /* the tensor reaching furthest so far */
  int status = STENO_OK;
  for (size_t i = 0; i < n && !status; i++) {
    const gguf_tensor *t = by_off[i];
    if (!t->nbytes) continue;
    if (last && t->offset < last->offset + last->nbytes)
      status = fail(r, "tensor '%.100s' (#%td): data at offset %llu overlaps tensor '%.100s' (#%td) [%llu, %llu)",
                    t->name, t - f->tensors, (unsigned long long)t->offset, last->name,
                    last - f->tensors, (unsigned long long)last->offset,
                    (unsigned long long)(last->offset + last->nbytes));
    if (!last || t->offset + t->nbytes > last->offset + last->nbytes) last = t;
  }
  free(by_off);
  return status;
}

/* ---- the file ---- */

static int rd_header(reader *r, uint64_t *n_tensors, uint64_t *n_kv) {
  const uint8_t *b = r->f->base;
  if (r->f->size == 0) return fail(r, "empty file");
  if (r->f->size < 4 || memcmp(b, "GGUF", 4)) {
    char seen[40] = "";
    for (size_t i = 0; i < 4 && i < r->f->size; i++)
      snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s%02x", i ? " " : "", b[i]);
    return fail(r, "not a GGUF file (starts with bytes %s, not 'GGUF')", seen);
  }
  r->pos = 4;
  uint32_t version = 0;
  TRY(rd_u32(r, &version, "version"));
  if (version != 2 && version != 3) {
    if (version && !(version & 0xffff)) return fail(r, "big-endian GGUF is not supported");
    return fail(r, "GGUF version %u is not supported (2 and 3 are)", version);
  }
  r->f->version = version;
  TRY(rd_u64(r, n_tensors, "tensor count"));
  TRY(rd_u64(r, n_kv, "key count"));
  /* the smallest key takes 14 bytes (length, one char, type, a UINT8) */
  if (*n_kv > left(r) / 14)
    return fail(r, "file truncated or corrupt: key count %llu cannot fit in the %zu bytes left",
                (unsigned long long)*n_kv, left(r));
  return STENO_OK;
}

static int parse(gguf_file *f) {
  reader r = {.f = f};
  uint64_t n_tensors = 0, n_kv = 0;
  TRY(rd_header(&r, &n_tensors, &n_kv));

  f->kv = mem_alloc((size_t)n_kv, sizeof *f->kv);
  if (!f->kv) return STENO_ERR_NOMEM;
  for (f->n_kv = 0; f->n_kv < n_kv; f->n_kv++) TRY(rd_kv(&r, &f->kv[f->n_kv], f->n_kv));
  TRY(index_keys(&r));
  TRY(rd_alignment(&r));

  /* the smallest tensor info takes 33 bytes (name of one char, 1 dim, type, offset) */
  r.ctx[0] = 0;
  if (n_tensors > left(&r) / 33)
    return fail(&r, "file truncated or corrupt: tensor count %llu cannot fit in the %zu bytes left",
                (unsigned long long)n_tensors, left(&r));
  f->tensors = mem_alloc((size_t)n_tensors, sizeof *f->tensors);
  if (!f->tensors) return STENO_ERR_NOMEM;
  for (f->n_tensors = 0; f->n_tensors < n_tensors; f->n_tensors++)
    TRY(rd_tensor_info(&r, &f->tensors[f->n_tensors], f->n_tensors));

  size_t pad = (f->alignment - r.pos % f->alignment) % f->alignment;
  if (!add_ok(r.pos, pad, &f->data_offset)) return fail(&r, "data section offset overflows");
  for (size_t i = 0; i < f->n_tensors; i++) TRY(place_tensor(&r, &f->tensors[i], i));
  return index_tensors(&r);
}

static int open_image(gguf_file **out, const void *data, size_t size, const char *name,
                      bool mapped) {
  gguf_file *f = mem_alloc(1, sizeof *f);
  if (!f) {
    if (mapped) munmap((void *)data, size);
    return STENO_ERR_NOMEM;
  }
  f->base = data;
  f->size = size;
  f->mapped = mapped;
  size_t len = strlen(name);
  char *copy = pool_alloc(f, len + 1);
  if (!copy) {
    gguf_close(f);
    return STENO_ERR_NOMEM;
  }
  memcpy(copy, name, len + 1);
  f->name = copy;
  int status = parse(f);
  if (status) {
    gguf_close(f);
    return status;
  }
  *out = f;
  return STENO_OK;
}

int gguf_open_memory(gguf_file **out, const void *data, size_t size, const char *name) {
  *out = NULL;
  if (!data && size) return err_set(STENO_ERR_INVALID, "gguf_open_memory: NULL data");
  return open_image(out, data, size, name ? name : "<memory>", false);
}

int gguf_open(gguf_file **out, const char *path) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) /* a FIFO must not block */;
  if (fd < 0) return err_set(STENO_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st)) {
    int e = errno;
    close(fd);
    return err_set(STENO_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return err_set(STENO_ERR_IO, "%s: not a regular file", path);
  }
  if (st.st_size == 0) {
    close(fd);
    return err_set(STENO_ERR_FORMAT, "%s: empty file", path);
  }
  if ((uint64_t)st.st_size > SIZE_MAX) {
    close(fd);
    return err_set(STENO_ERR_IO, "%s: too large to map", path);
  }
  size_t size = (size_t)st.st_size;
  /* MAP_POPULATE: the kernel maps every page now, in one go, instead of one
   * fault per 4 KiB page as the weights are read. */
  void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED) return err_set(STENO_ERR_IO, "%s: cannot map: %s", path, strerror(e));
  return open_image(out, m, size, path, true);
}

void gguf_close(gguf_file *f) {
  if (!f) return;
  if (f->mapped) munmap((void *)f->base, f->size);
  for (struct gguf_chunk *c = f->pool, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  free(f->kv_by_key);
  free(f->tensor_by_name);
  free(f->kv);
  free(f->tensors);
  free(f);
}

/* ---- lookups ---- */

static int cmp_key(const void *key, const void *elem) {
  return strcmp(key, (*(const gguf_kv *const *)elem)->key);
}

static int cmp_name(const void *name, const void *elem) {
  return strcmp(name, (*(const gguf_tensor *const *)elem)->name);
}

const gguf_kv *gguf_find(const gguf_file *f, const char *key) {
  if (!f->n_kv) return NULL;
  const gguf_kv *const *p = bsearch(key, f->kv_by_key, f->n_kv, sizeof *f->kv_by_key, cmp_key);
  return p ? *p : NULL;
}

const gguf_tensor *gguf_tensor_find(const gguf_file *f, const char *name) {
  if (!f->n_tensors) return NULL;
  const gguf_tensor *const *p =
      bsearch(name, f->tensor_by_name, f->n_tensors, sizeof *f->tensor_by_name, cmp_name);
  return p ? *p : NULL;
}

/* "UINT32" or "an array of UINT32". */
static const char *describe(char *buf, size_t size, uint32_t type, uint32_t elem) {
  if (type != GGUF_VAL_ARRAY) return gguf_val_type_name(type);
  snprintf(buf, size, "an array of %s", gguf_val_type_name(elem));
  return buf;
}

/* The kv of `key` with exactly this type, or an error (or NULL if optional). */
static int get_kv(const gguf_file *f, const char *key, uint32_t type, uint32_t elem, bool optional,
                  const gguf_kv **out) {
  const gguf_kv *kv = gguf_find(f, key);
  *out = NULL;
  if (!kv) return optional ? STENO_OK : err_set(STENO_ERR_FORMAT, "%s: key '%s' missing", f->name, key);
  if (kv->type != type || kv->elem_type != elem) {
    char got[48], want[48];
    return err_set(STENO_ERR_FORMAT, "%s: key '%s' is %s, expected %s", f->name, key,
                   describe(got, sizeof got, kv->type, kv->elem_type),
                   describe(want, sizeof want, type, elem));
  }
  *out = kv;
  return STENO_OK;
}

static int get_scalar(const gguf_file *f, const char *key, uint32_t type, bool optional, void *out,
                      size_t size) {
  const gguf_kv *kv;
  TRY(get_kv(f, key, type, type, optional, &kv));
  if (!kv) return STENO_OK;
  if (type == GGUF_VAL_STRING)
    memcpy(out, &kv->v.str[0].s, sizeof(const char *));
  else
    memcpy(out, kv->v.data, size);
  return STENO_OK;
}

#define GETTERS(suffix, ctype, type)                                               \
  int gguf_get_##suffix(const gguf_file *f, const char *key, ctype *out) {         \
    return get_scalar(f, key, type, false, out, sizeof *out);                      \
  }                                                                                \
  int gguf_opt_##suffix(const gguf_file *f, const char *key, ctype *out) {         \
    return get_scalar(f, key, type, true, out, sizeof *out);                       \
  }

GETTERS(u32, uint32_t, GGUF_VAL_UINT32)
GETTERS(i32, int32_t, GGUF_VAL_INT32)
GETTERS(u64, uint64_t, GGUF_VAL_UINT64)
GETTERS(f32, float, GGUF_VAL_FLOAT32)
GETTERS(bool, bool, GGUF_VAL_BOOL)
GETTERS(str, const char *, GGUF_VAL_STRING)

int gguf_get_arr(const gguf_file *f, const char *key, uint32_t elem_type, const gguf_kv **out) {
  return get_kv(f, key, GGUF_VAL_ARRAY, elem_type, false, out);
}

int gguf_opt_arr(const gguf_file *f, const char *key, uint32_t elem_type, const gguf_kv **out) {
  return get_kv(f, key, GGUF_VAL_ARRAY, elem_type, true, out);
}

/* ---- checked tensor access ---- */

/* "F32, F16 or BF16": the known types in a mask. */
static void mask_names(char *buf, size_t size, uint64_t types) {
  size_t n = 0, count = 0, total = 0;
  for (uint32_t t = 0; t < 64; t++) total += (types >> t & 1) && gguf_type_traits_of(t);
  buf[0] = 0;
  for (uint32_t t = 0; t < 64 && n < size; t++) {
    if (!(types >> t & 1) || !gguf_type_traits_of(t)) continue;
    count++;
    const char *sep = count == 1 ? "" : count == total ? " or " : ", ";
    int w = snprintf(buf + n, size - n, "%s%s", sep, gguf_type_name(t));
    if (w < 0) break;
    n += (size_t)w;
  }
}

int gguf_tensor_get(const gguf_file *f, const char *name, uint64_t types, int n_dims,
                    const int64_t *ne, const gguf_tensor **out) {
  *out = NULL;
  if (n_dims < 0 || n_dims > 4)
    return err_set(STENO_ERR_INVALID, "gguf_tensor_get('%s'): n_dims %d", name, n_dims);
  const gguf_tensor *t = gguf_tensor_find(f, name);
  if (!t) return err_set(STENO_ERR_FORMAT, "%s: tensor '%s' missing", f->name, name);
  if (t->type >= 64 || !(types >> t->type & 1)) {
    char want[160];
    mask_names(want, sizeof want, types);
    return err_set(STENO_ERR_FORMAT, "%s: tensor '%s' is %s, expected %s", f->name, name,
                   gguf_type_name(t->type), want);
  }
  bool ok = true;
  for (int d = 0; d < 4; d++) {
    int64_t want = d < n_dims ? ne[d] : 1;
    if (want >= 0 && (uint64_t)want != t->ne[d]) ok = false;
  }
  if (!ok) {
    char got[128] = "", want[128] = "";
    size_t g = 0, w = 0;
    for (uint32_t d = 0; d < t->n_dims; d++)
      g += (size_t)snprintf(got + g, sizeof got - g, "%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
    for (int d = 0; d < n_dims; d++) {
      if (ne[d] < 0)
        w += (size_t)snprintf(want + w, sizeof want - w, "%s*", d ? ", " : "");
      else
        w += (size_t)snprintf(want + w, sizeof want - w, "%s%lld", d ? ", " : "", (long long)ne[d]);
    }
    return err_set(STENO_ERR_FORMAT, "%s: tensor '%s' has shape [%s], expected [%s]", f->name,
                   name, got, want);
  }
  *out = t;
  return STENO_OK;
}

int gguf_tensor_to_f32(const gguf_tensor *t, float *out) {
  const gguf_type_traits *tr = gguf_type_traits_of(t->type);
  if (!tr || !tr->to_f32)
    return err_set(STENO_ERR_UNSUPPORTED, "tensor '%s': %s cannot be converted to F32 yet",
                   t->name, gguf_type_name(t->type));
  tr->to_f32(t->data, out, (size_t)t->nelem);
  return STENO_OK;
}
