#include "load_check.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "steno.h"

gguf_file *lc_rewrite(const gguf_file *src, gw_edit e, uint8_t **bytes) {
  size_t size;
  *bytes = gw_rewrite(src, &e, &size);
  gguf_file *f = NULL;
  CHECK_OK(gguf_open_memory(&f, *bytes, size, "rewritten.gguf"));
  return f;
}

void lc_load_fails(const gguf_file *src, gw_edit e, lc_loader load, int want_st, const char *want) {
  uint8_t *bytes;
  gguf_file *f = lc_rewrite(src, e, &bytes);
  bool made = false;
  int st = f ? load(f, &made) : -1;
  CHECK(st != 0 && !made && (!want_st || st == want_st), "loading a copy with '%s' changed gave %d%s",
        want, st, made ? " and a model" : "");
  CHECK(strstr(steno_last_error(), want) != NULL, "message '%s' does not name '%s'",
        steno_last_error(), want);
  gguf_close(f);
  free(bytes);
}
