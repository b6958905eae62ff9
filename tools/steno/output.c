#include "output.h"

#include <string.h>

void out_text(FILE *f, const steno_result *r) { fprintf(f, "%s\n", steno_result_text(r)); }

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p == '\n') fputs("\\n", f);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

void out_json(FILE *f, const steno_result *r, const char *model, const char *audio) {
  fputs("{\n  \"text\": ", f);
  json_string(f, steno_result_text(r));
  fputs(",\n  \"model\": ", f);
  json_string(f, model);
  fputs(",\n  \"audio\": ", f);
  json_string(f, audio);
  fprintf(f, ",\n  \"duration\": %.3f,\n  \"segments\": [", steno_result_duration(r));
  for (size_t i = 0; i < steno_result_segment_count(r); i++) {
    steno_segment s = steno_result_segment(r, i);
    fprintf(f, "%s\n    {\"start_ms\": %lld, \"end_ms\": %lld, \"text\": ", i ? "," : "",
            (long long)s.start_ms, (long long)s.end_ms);
    json_string(f, s.text);
    fputc('}', f);
  }
  fputs("\n  ],\n  \"words\": [", f);
  for (size_t i = 0; i < steno_result_word_count(r); i++) {
    steno_word w = steno_result_word(r, i);
    fprintf(f, "%s\n    {\"start_ms\": %lld, \"end_ms\": %lld, \"p\": %.4f, \"text\": ", i ? "," : "",
            (long long)w.start_ms, (long long)w.end_ms, w.p);
    json_string(f, w.text);
    fputc('}', f);
  }
  fputs("\n  ],\n  \"tokens\": [", f);
  for (size_t i = 0; i < steno_result_token_count(r); i++) {
    steno_token t = steno_result_token(r, i);
    fprintf(f, "%s\n    {\"id\": %d, \"start_ms\": %lld, \"end_ms\": %lld, \"p\": %.4f, \"text\": ",
            i ? "," : "", t.id, (long long)t.start_ms, (long long)t.end_ms, t.p);
    json_string(f, t.text);
    fputc('}', f);
  }
  fputs("\n  ]\n}\n", f);
}

static void timestamp(FILE *f, long long ms, out_format format) {
  if (ms < 0) ms = 0;
  fprintf(f, "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60,
          format == OUT_SRT ? ',' : '.', ms % 1000);
}

static void cue(FILE *f, int n, long long a, long long b, const char *text, out_format format) {
  if (b <= a) b = a + 1;
  if (format == OUT_SRT) fprintf(f, "%d\n", n);
  timestamp(f, a, format);
  fputs(" --> ", f);
  timestamp(f, b, format);
  fprintf(f, "\n%s\n\n", text);
}

void out_subtitles(FILE *f, const steno_result *r, out_format format) {
  if (format == OUT_VTT) fputs("WEBVTT\n\n", f);
  char line[512];
  size_t len = 0;
  long long start = 0, end = 0;
  int n = 0;
  size_t words = steno_result_word_count(r);
  for (size_t i = 0; i < words; i++) {
    steno_word w = steno_result_word(r, i);
    size_t wl = strlen(w.text);
    if (!wl) continue;
    if (len && (len + 1 + wl > 80 || w.end_ms - start > 7000 || len + 1 + wl >= sizeof line)) {
      cue(f, ++n, start, end, line, format);
      len = 0;
    }
    if (!len) start = w.start_ms;
    if (wl >= sizeof line - 1) wl = sizeof line - 2;
    if (len) line[len++] = ' ';
    memcpy(line + len, w.text, wl);
    len += wl;
    line[len] = 0;
    end = w.end_ms;
    char last = w.text[strlen(w.text) - 1];
    if (last == '.' || last == '?' || last == '!') {
      cue(f, ++n, start, end, line, format);
      len = 0;
    }
  }
  if (len) cue(f, ++n, start, end, line, format);
}
