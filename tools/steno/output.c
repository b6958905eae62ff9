#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *out_extension(out_format format) {
  static const char *ext[] = {"txt", "json", "srt", "vtt"};
  return ext[format];
}

int out_write(FILE *f, const steno_result *r, out_format format, const out_info *info) {
  if (format == OUT_TEXT) out_text(f, r, info->diarized);
  else if (format == OUT_JSON) out_json(f, r, info);
  else if (out_subtitles(f, r, format, info->diarized)) return -1;
  return ferror(f) ? -1 : 0;
}

/* The turns in time order (a malloc'd copy; NULL when there are none or memory ran out). */
static steno_turn *turns_by_time(const steno_result *r, size_t *n) {
  *n = steno_result_turn_count(r);
  steno_turn *t = *n ? malloc(*n * sizeof *t) : NULL;
  for (size_t i = 0; t && i < *n; i++) t[i] = steno_result_turn(r, i);
  for (size_t i = 1; t && i < *n; i++) /* insertion sort: stable, turns come nearly in order */
    for (size_t j = i; j > 0 && t[j].start_ms < t[j - 1].start_ms; j--) {
      steno_turn x = t[j];
      t[j] = t[j - 1], t[j - 1] = x;
    }
  if (!t) *n = 0;
  return t;
}

void out_text(FILE *f, const steno_result *r, int diarized) {
  if (!diarized) {
    fprintf(f, "%s\n", steno_result_text(r));
    return;
  }
  if (steno_result_word_count(r) == 0) { /* a diarizer's own result: its turns */
    size_t n;
    steno_turn *t = turns_by_time(r, &n);
    for (size_t i = 0; i < n; i++)
      fprintf(f, "[SPEAKER_%d] %.2f %.2f\n", t[i].speaker, t[i].start_ms / 1e3, t[i].end_ms / 1e3);
    free(t);
    return;
  }
  for (size_t i = 0; i < steno_result_segment_count(r); i++) {
    steno_segment s = steno_result_segment(r, i);
    fprintf(f, "[SPEAKER_%d] %s\n", s.speaker, s.text);
  }
}

/* ---- JSON ---- */

/* The length of the well-formed UTF-8 sequence at p (NUL-terminated), 0 if none
 * starts there. The library's strings are valid already (steno.h); this is for
 * what comes from the command line (file names), which the CLI cannot assume. */
static size_t utf8_length(const unsigned char *p) {
  int need = p[0] < 0x80 ? 0 : p[0] < 0xC2 ? -1 : p[0] < 0xE0 ? 1 : p[0] < 0xF0 ? 2 : p[0] < 0xF5 ? 3 : -1;
  if (need < 0) return 0;
  unsigned lo = p[0] == 0xE0 ? 0xA0 : p[0] == 0xF0 ? 0x90 : 0x80; /* no overlong forms, */
  unsigned hi = p[0] == 0xED ? 0x9F : p[0] == 0xF4 ? 0x8F : 0xBF; /* surrogates, > U+10FFFF */
  for (int i = 1; i <= need; i++, lo = 0x80, hi = 0xBF)
    if (p[i] < lo || p[i] > hi) return 0;
  return (size_t)need + 1;
}

/* A JSON string that is valid UTF-8 whatever s holds: ill-formed bytes become
 * U+FFFD, control characters (C0, DEL, C1) \u escapes. */
static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
    size_t n = utf8_length(p);
    unsigned cp = n == 2 ? (unsigned)(p[0] & 0x1F) << 6 | (p[1] & 0x3F) : p[0];
    if (!n) fputs("\\ufffd", f), n = 1;
    else if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p == '\n') fputs("\\n", f);
    else if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) fprintf(f, "\\u%04x", cp);
    else fwrite(p, 1, n, f);
    p += n;
  }
  fputc('"', f);
}

static double or_zero(double x) { return isfinite(x) ? x : 0; }

static void json_times(FILE *f, const char *sep, int64_t start, int64_t end) {
  fprintf(f, "%s\n    {\"start_ms\": %lld, \"end_ms\": %lld, ", sep, (long long)start, (long long)end);
}

void out_json(FILE *f, const steno_result *r, const out_info *info) {
  fputs("{\n  \"text\": ", f);
  json_string(f, steno_result_text(r));
  fputs(",\n  \"model\": ", f);
  json_string(f, info->model);
  fputs(",\n  \"architecture\": ", f);
  json_string(f, info->architecture);
  fputs(",\n  \"audio\": ", f);
  json_string(f, info->audio);
  fputs(",\n  \"language\": ", f);
  if (steno_result_language(r)) json_string(f, steno_result_language(r));
  else fputs("null", f);
  double duration = steno_result_duration(r);
  steno_timings t = steno_result_timings(r);
  fprintf(f, ",\n  \"duration\": %.3f,\n", or_zero(duration));
  fprintf(f, "  \"timings\": {\"load_ms\": %.1f, \"total_ms\": %.1f, \"features_ms\": %.1f, "
             "\"encoder_ms\": %.1f, \"decoder_ms\": %.1f, \"realtime\": %.2f},\n",
          or_zero(info->load_ms), or_zero(info->wall_ms), or_zero(t.features_ms), or_zero(t.encoder_ms),
          or_zero(t.decoder_ms), info->wall_ms > 0 ? or_zero(duration * 1e3 / info->wall_ms) : 0);
  fputs("  \"segments\": [", f);
  for (size_t i = 0; i < steno_result_segment_count(r); i++) {
    steno_segment s = steno_result_segment(r, i);
    json_times(f, i ? "," : "", s.start_ms, s.end_ms);
    if (info->diarized) fprintf(f, "\"speaker\": %d, ", s.speaker);
    fputs("\"text\": ", f);
    json_string(f, s.text);
    fputc('}', f);
  }
  fputs("\n  ],\n  \"words\": [", f);
  for (size_t i = 0; i < steno_result_word_count(r); i++) {
    steno_word w = steno_result_word(r, i);
    json_times(f, i ? "," : "", w.start_ms, w.end_ms);
    if (info->diarized) fprintf(f, "\"speaker\": %d, ", w.speaker);
    fprintf(f, "\"p\": %.4f, \"text\": ", or_zero(w.p));
    json_string(f, w.text);
    fputc('}', f);
  }
  fputs("\n  ],\n  \"tokens\": [", f);
  for (size_t i = 0; i < steno_result_token_count(r); i++) {
    steno_token t = steno_result_token(r, i);
    json_times(f, i ? "," : "", t.start_ms, t.end_ms);
    fprintf(f, "\"id\": %d, \"p\": %.4f, \"text\": ", t.id, or_zero(t.p));
    json_string(f, t.text);
    fputc('}', f);
  }
  fputs("\n  ]", f);
  if (info->diarized) {
    fputs(",\n  \"turns\": [", f);
    for (size_t i = 0; i < steno_result_turn_count(r); i++) {
      steno_turn t = steno_result_turn(r, i);
      json_times(f, i ? "," : "", t.start_ms, t.end_ms);
      fprintf(f, "\"speaker\": %d}", t.speaker);
    }
    fputs("\n  ]", f);
  }
  fputs("\n}\n", f);
}

/* ---- subtitles ---- */

enum { CUE_CHARS = 80, LINE_CHARS = 42, CUE_MS = 7000, PAUSE_MS = 1000, LINGER_MS = 1500 };

static bool sentence_end(const char *w) {
  size_t n = strlen(w);
  if (n >= 3 && !strcmp(w + n - 3, "\xe2\x80\xa6")) return true; /* … */
  return n && strchr(".?!", w[n - 1]);
}

/* The words of the next cue: [a, returned). `w` holds the non-empty words. */
static size_t cue_end(const steno_word *w, size_t a, size_t n) {
  size_t len = strlen(w[a].text), b = a + 1;
  if (sentence_end(w[a].text)) return b;
  for (; b < n; b++) {
    size_t wl = strlen(w[b].text);
    if (len + 1 + wl > CUE_CHARS || w[b].end_ms - w[a].start_ms > CUE_MS ||
        w[b].start_ms - w[b - 1].end_ms > PAUSE_MS || w[b].speaker != w[a].speaker)
      break;
    len += 1 + wl;
    if (sentence_end(w[b].text)) return b + 1;
  }
  return b;
}

static void timestamp(FILE *f, long long ms, out_format format) {
  if (ms < 0) ms = 0;
  fprintf(f, "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60,
          format == OUT_SRT ? ',' : '.', ms % 1000);
}

/* Words [a, b) on one line, or on two of nearly equal length. */
static void cue_text(FILE *f, const steno_word *w, size_t a, size_t b) {
  size_t total = b - a - 1, split = b;
  for (size_t i = a; i < b; i++) total += strlen(w[i].text);
  if (total > LINE_CHARS && b - a > 1) {
    size_t left = 0, best = (size_t)-1;
    for (size_t i = a; i + 1 < b; i++) {
      left += strlen(w[i].text) + (i > a);
      size_t right = total - left - 1, longer = left > right ? left : right;
      if (longer < best) best = longer, split = i + 1;
    }
  }
  for (size_t i = a; i < b; i++) fprintf(f, "%s%s", i == a ? "" : i == split ? "\n" : " ", w[i].text);
  fputc('\n', f);
}

int out_subtitles(FILE *f, const steno_result *r, out_format format, int diarized) {
  if (format == OUT_VTT) fputs("WEBVTT\n\n", f);
  size_t n = 0, count = steno_result_word_count(r);
  steno_word *w = malloc((count + 1) * sizeof *w);
  if (!w) return -1;
  for (size_t i = 0; i < count; i++)
    if (*(w[n] = steno_result_word(r, i)).text) n++;
  long long audio_end = llround(steno_result_duration(r) * 1e3);
  int cue = 0;
  for (size_t a = 0; a < n;) {
    size_t b = cue_end(w, a, n);
    long long start = w[a].start_ms, end = w[b - 1].start_ms + LINGER_MS;
    if (b < n && w[b].start_ms < end) end = w[b].start_ms;
    if (audio_end > 0 && audio_end < end) end = audio_end;
    if (end < w[b - 1].end_ms) end = w[b - 1].end_ms;
    if (end <= start) end = start + 1;
    if (format == OUT_SRT) fprintf(f, "%d\n", ++cue);
    timestamp(f, start, format);
    fputs(" --> ", f);
    timestamp(f, end, format);
    fputc('\n', f);
    if (diarized) fprintf(f, format == OUT_VTT ? "<v SPEAKER_%d>" : "[SPEAKER_%d] ", w[a].speaker);
    cue_text(f, w, a, b);
    fputc('\n', f);
    a = b;
  }
  free(w);
  return 0;
}

/* ---- RTTM ---- */

int out_rttm(FILE *f, const steno_result *r, const char *input) {
  const char *base = strcmp(input, "-") ? strrchr(input, '/') : NULL;
  base = !strcmp(input, "-") ? "stdin" : base ? base + 1 : input;
  const char *dot = strrchr(base, '.');
  size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
  char *id = malloc(len + 1);
  size_t n;
  steno_turn *t = turns_by_time(r, &n);
  if (!id || (n && !t)) {
    free(id), free(t);
    return -1;
  }
  for (size_t i = 0; i < len; i++) id[i] = base[i] == ' ' || base[i] == '\t' ? '_' : base[i];
  id[len] = 0;
  for (size_t i = 0; i < n; i++)
    fprintf(f, "SPEAKER %s 1 %.3f %.3f <NA> <NA> speaker_%d <NA> <NA>\n", id, t[i].start_ms / 1e3,
            (t[i].end_ms - t[i].start_ms) / 1e3, t[i].speaker);
  free(id), free(t);
  return ferror(f) ? -1 : 0;
}

/* ---- output files ---- */

static int cannot(const char *who, const char *path, const char *why) {
  fprintf(stderr, "%s: cannot write %s: %s\n", who, path, why);
  return -1;
}

/* Where `path` leads: *target is the file to write (a symbolic link's target,
 * so that the link stays a link), *in_place for pipes and character devices,
 * which are opened and written rather than replaced. Sockets, block devices
 * and directories are refused: none of them can hold a transcript. */
static int resolve(const char *path, char **target, bool *in_place, const char *who) {
  struct stat link, st;
  *target = NULL;
  *in_place = false;
  if (lstat(path, &link)) {
    if (errno != ENOENT) return cannot(who, path, strerror(errno));
    *target = strdup(path); /* a new file */
  } else {
    if (stat(path, &st))
      return cannot(who, path, errno == ENOENT ? "a symbolic link to a missing file" : strerror(errno));
    if (S_ISDIR(st.st_mode)) return cannot(who, path, "it is a directory");
    if (S_ISSOCK(st.st_mode)) return cannot(who, path, "it is a socket (steno writes files, pipes and devices)");
    if (S_ISBLK(st.st_mode)) return cannot(who, path, "it is a block device");
    if (access(path, W_OK)) return cannot(who, path, strerror(errno));
    *in_place = S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode);
    *target = S_ISLNK(link.st_mode) && !*in_place ? realpath(path, NULL) : strdup(path);
  }
  return *target ? 0 : cannot(who, path, strerror(errno));
}

/* A hidden temporary file beside `target` (the same file system, so rename
 * is atomic); its name in *tmp. The descriptor, or −1 after saying why. */
static int make_tmp(const char *path, const char *target, char **tmp, const char *who) {
  const char *slash = strrchr(target, '/');
  size_t dir = slash ? (size_t)(slash - target) + 1 : 0;
  if (!(*tmp = malloc(strlen(target) + 32))) return cannot(who, path, "out of memory");
  sprintf(*tmp, "%.*s.%s.steno-XXXXXX", (int)dir, target, target + dir);
  int fd = mkstemp(*tmp);
  if (fd < 0) {
    cannot(who, path, errno == ENOENT ? "its folder does not exist" : strerror(errno));
    free(*tmp);
    *tmp = NULL;
  }
  return fd;
}

int out_file_check(const char *path, const char *who) {
  char *target, *tmp = NULL;
  bool in_place;
  if (resolve(path, &target, &in_place, who)) return -1;
  int fd = in_place ? -2 : make_tmp(path, target, &tmp, who); /* −2: nothing to try */
  if (fd >= 0) close(fd);
  if (tmp) unlink(tmp);
  free(tmp);
  free(target);
  return fd == -1 ? -1 : 0;
}

int out_file_open(out_file *o, const char *path, const char *who) {
  *o = (out_file){NULL, NULL, NULL, path};
  bool in_place;
  if (resolve(path, &o->target, &in_place, who)) return -1;
  int fd = in_place ? open(o->target, O_WRONLY | O_NOCTTY | O_CLOEXEC) : make_tmp(path, o->target, &o->tmp, who);
  if (fd < 0) {
    if (in_place) cannot(who, path, strerror(errno));
    out_file_discard(o);
    return -1;
  }
  mode_t mask = umask(0);
  umask(mask);
  if ((!in_place && fchmod(fd, 0666 & ~mask)) || !(o->f = fdopen(fd, "w"))) {
    cannot(who, path, strerror(errno));
    close(fd);
    out_file_discard(o);
    return -1;
  }
  return 0;
}

int out_file_commit(out_file *o, const char *who) {
  /* fsync only the file that replaces another: pipes and devices refuse it. */
  int bad = ferror(o->f) | fflush(o->f) | (o->tmp && fsync(fileno(o->f)));
  int err = errno;
  bad |= fclose(o->f);
  o->f = NULL;
  if (!bad && o->tmp && rename(o->tmp, o->target)) bad = 1, err = errno;
  if (bad) {
    cannot(who, o->path, strerror(err ? err : EIO));
    out_file_discard(o);
    return -1;
  }
  free(o->tmp);
  free(o->target);
  o->tmp = o->target = NULL;
  return 0;
}

void out_file_discard(out_file *o) {
  if (o->f) fclose(o->f);
  if (o->tmp) unlink(o->tmp);
  free(o->tmp);
  free(o->target);
  o->f = NULL;
  o->tmp = o->target = NULL;
}
