/* steno_file_print: a GGUF file's header, metadata and tensor table, for
 * `steno info`. Long arrays and strings are abbreviated. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "io/gguf.h"

enum { MAX_ELEMS = 8, MAX_STR = 64 };

/* s with control bytes (and, when quoted, quotes and backslashes) escaped, so a
 * hostile file cannot drive the terminal; cut at a UTF-8 boundary after max
 * bytes. Returns the number of bytes printed. */
static size_t print_escaped(FILE *out, const char *s, size_t len, size_t max, bool quoted) {
  size_t i = 0;
  for (; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (i >= max && (c & 0xc0) != 0x80) break;
    if (quoted && (c == '"' || c == '\\'))
      fprintf(out, "\\%c", c);
    else if (c < 0x20 || c == 0x7f)
      fprintf(out, "\\x%02x", c);
    else
      fputc(c, out);
  }
  return i;
}

/* A string value in quotes, abbreviated after MAX_STR bytes. */
static void print_str(FILE *out, const gguf_str *s) {
  fputc('"', out);
  size_t shown = print_escaped(out, s->s, s->len, MAX_STR, true);
  fputc('"', out);
  if (shown < s->len) fprintf(out, "... (%zu bytes)", s->len);
}

static void print_elem(FILE *out, const gguf_kv *kv, size_t i) {
  switch (kv->elem_type) {
    case GGUF_VAL_UINT8: fprintf(out, "%u", kv->v.u8[i]); break;
    case GGUF_VAL_INT8: fprintf(out, "%d", kv->v.i8[i]); break;
    case GGUF_VAL_UINT16: fprintf(out, "%u", kv->v.u16[i]); break;
    case GGUF_VAL_INT16: fprintf(out, "%d", kv->v.i16[i]); break;
    case GGUF_VAL_UINT32: fprintf(out, "%" PRIu32, kv->v.u32[i]); break;
    case GGUF_VAL_INT32: fprintf(out, "%" PRId32, kv->v.i32[i]); break;
    case GGUF_VAL_UINT64: fprintf(out, "%" PRIu64, kv->v.u64[i]); break;
    case GGUF_VAL_INT64: fprintf(out, "%" PRId64, kv->v.i64[i]); break;
    case GGUF_VAL_FLOAT32: fprintf(out, "%.7g", kv->v.f32[i]); break;
    case GGUF_VAL_FLOAT64: fprintf(out, "%.15g", kv->v.f64[i]); break;
    case GGUF_VAL_BOOL: fputs(kv->v.b[i] ? "true" : "false", out); break;
    case GGUF_VAL_STRING: print_str(out, &kv->v.str[i]); break;
  }
}

/* "key: TYPE = value", or "key: [n] TYPE = a, b, ... (+k more)". */
static void print_kv(FILE *out, const gguf_kv *kv) {
  fputs("  ", out);
  print_escaped(out, kv->key, strlen(kv->key), SIZE_MAX, false);
  fputs(": ", out);
  if (kv->type == GGUF_VAL_ARRAY) fprintf(out, "[%zu] ", kv->n);
  fprintf(out, "%s =", gguf_val_type_name(kv->elem_type));
  size_t shown = kv->n < MAX_ELEMS ? kv->n : MAX_ELEMS;
  for (size_t i = 0; i < shown; i++) {
    fputs(i ? ", " : " ", out);
    print_elem(out, kv, i);
  }
  if (shown < kv->n) fprintf(out, ", ... (+%zu more)", kv->n - shown);
  fputc('\n', out);
}

static void print_tensors(FILE *out, const gguf_file *f) {
  int width = 4;
  for (size_t i = 0; i < f->n_tensors; i++) {
    size_t len = strlen(f->tensors[i].name);
    if (len > (size_t)width) width = len > 64 ? 64 : (int)len;
  }
  fprintf(out, "tensors:\n  %5s  %-*s  %-5s  %-24s  %12s  %12s\n", "#", width, "name", "type",
          "shape", "offset", "bytes");
  uint64_t total = 0;
  for (size_t i = 0; i < f->n_tensors; i++) {
    const gguf_tensor *t = &f->tensors[i];
    char shape[96];
    size_t n = 0;
    for (uint32_t d = 0; d < t->n_dims; d++)
      n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%" PRIu64, d ? ", " : "[", t->ne[d]);
    snprintf(shape + n, sizeof shape - n, "]");
    fprintf(out, "  %5zu  ", i);
    size_t len = print_escaped(out, t->name, strlen(t->name), SIZE_MAX, false);
    fprintf(out, "%*s  %-5s  %-24s  %12zu  %12zu\n", len < (size_t)width ? width - (int)len : 0, "",
            gguf_type_name(t->type), shape, (size_t)((const uint8_t *)t->data - f->base), t->nbytes);
    total += t->nbytes;
  }
  fprintf(out, "%zu tensors, %" PRIu64 " bytes (%.1f MiB)\n", f->n_tensors, total,
          (double)total / (1024.0 * 1024.0));
}

int steno_file_print(const char *path, FILE *out) {
  if (!path || !out) return err_set(STENO_ERR_INVALID, "steno_file_print: NULL argument");
  gguf_file *f;
  TRY(gguf_open(&f, path));
  fprintf(out, "%s: GGUF v%u, %zu bytes, alignment %u, %zu keys, %zu tensors, data at offset %zu\n",
          f->name, f->version, f->size, f->alignment, f->n_kv, f->n_tensors, f->data_offset);
  fputs("metadata:\n", out);
  for (size_t i = 0; i < f->n_kv; i++) print_kv(out, &f->kv[i]);
  print_tensors(out, f);
  gguf_close(f);
  if (ferror(out)) return err_set(STENO_ERR_IO, "%s: writing the listing failed", path);
  return STENO_OK;
}
