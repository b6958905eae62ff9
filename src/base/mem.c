#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

void *mem_alloc(size_t n, size_t size) {
  size_t bytes;
  if (!mul_ok(n, size, &bytes)) {
    err_set(STENO_ERR_NOMEM, "allocation of %zu × %zu bytes overflows", n, size);
    return NULL;
  }
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p) err_set(STENO_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
  return p;
}

void *mem_realloc(void *p, size_t n, size_t size) {
  size_t bytes;
  if (!mul_ok(n, size, &bytes)) {
    err_set(STENO_ERR_NOMEM, "allocation of %zu × %zu bytes overflows", n, size);
    return NULL;
  }
  void *q = realloc(p, bytes ? bytes : 1);
  if (!q) err_set(STENO_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
  return q;
}

char *mem_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = mem_alloc(n, 1);
  if (p) memcpy(p, s, n);
  return p;
}
