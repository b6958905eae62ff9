/* Model names, the hub's local cache, and `steno pull`, `list`, `rm`.
 * The cache is huggingface_hub's layout, so `hf download` and steno see each other's
 * files: <root>/models--{org}--{name}/blobs/<etag>, snapshots/<commit>/<file> (a
 * relative symlink to the blob), refs/main (the commit). */
#include "hub.h"

#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry.h"

int hub_path(char *buf, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < cap) return 0;
  fprintf(stderr, "steno: a path is too long (%.60s...)\n", buf);
  return 1;
}

int hub_mkdirs(const char *dir) {
  char p[PATH_MAX];
  if (hub_path(p, sizeof p, "%s", dir)) return 1;
  for (char *s = p + 1;; s++) {
    char c = *s;
    if (c != '/' && c) continue;
    *s = 0;
    if (mkdir(p, 0755) && errno != EEXIST) {
      fprintf(stderr, "steno: cannot create %s: %s\n", p, strerror(errno));
      return 1;
    }
    if (!c) return 0;
    *s = c;
  }
}

/* The cache root, found as huggingface_hub's constants.py finds it: HF_HUB_CACHE, the
 * older HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, ${XDG_CACHE_HOME:-~/.cache}/huggingface/hub. */
static int cache_root(char *buf, size_t cap) {
  const char *v, *home = getenv("HOME");
  char raw[PATH_MAX];
  int st;
  if ((v = getenv("HF_HUB_CACHE")) && *v) st = hub_path(raw, sizeof raw, "%s", v);
  else if ((v = getenv("HUGGINGFACE_HUB_CACHE")) && *v) st = hub_path(raw, sizeof raw, "%s", v);
  else if ((v = getenv("HF_HOME")) && *v) st = hub_path(raw, sizeof raw, "%s/hub", v);
  else if ((v = getenv("XDG_CACHE_HOME")) && *v) st = hub_path(raw, sizeof raw, "%s/huggingface/hub", v);
  else st = hub_path(raw, sizeof raw, "~/.cache/huggingface/hub");
  if (st) return 1;
  if (raw[0] == '~' && (raw[1] == '/' || !raw[1])) { /* expanduser, as Python does */
    if (!home || !*home) {
      fprintf(stderr, "steno: HOME is not set, so there is no model cache (set HF_HUB_CACHE)\n");
      return 1;
    }
    return hub_path(buf, cap, "%s%s", home, raw + 1);
  }
  return hub_path(buf, cap, "%s", raw);
}

/* A repository's folder: models--org--name. */
static int repo_dir(char *buf, size_t cap, const char *root, const char *repo) {
  const char *slash = strchr(repo, '/');
  return hub_path(buf, cap, "%s/models--%.*s--%s", root, (int)(slash - repo), repo, slash + 1);
}

/* ---- names ---- */

/* A hub name part: letters, digits, . _ -; no "..", "--" (the hub refuses both), no
 * leading dot; or a file path component (then "--" is fine). */
static int valid_part(const char *s, size_t n, int repo_part) {
  if (!n || n > 96 || s[0] == '.' || s[0] == '-') return 0;
  for (size_t i = 0; i < n; i++) {
    if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i])) return 0;
    if (i && s[i] == '.' && s[i - 1] == '.') return 0;
    if (repo_part && i && s[i] == '-' && s[i - 1] == '-') return 0;
  }
  return 1;
}

static int valid_file(const char *file) {
  size_t n = strlen(file);
  if (n < 6 || n > 250 || strcmp(file + n - 5, ".gguf")) return 0;
  for (const char *p = file; *p;) {
    const char *e = strchrnul(p, '/');
    if (!valid_part(p, (size_t)(e - p), 0)) return 0;
    p = *e ? e + 1 : e;
  }
  return 1;
}

/* For run, the argument was not a file either: say so, a typo in a path is likely. */
static const char *not_file(const char *cmd) {
  return strcmp(cmd, "run") ? "" : "no such file, and ";
}

static int bad_name(const char *cmd, const char *arg, const char *why) {
  fprintf(stderr, "steno %s: '%s': %snot a model name: %s\n", cmd, arg, not_file(cmd), why);
  return 1;
}

/* NAME[:QUANT], ORG/REPO[:QUANT] or ORG/REPO/FILE.gguf as a repository and a file. */
static int parse_ref(const char *cmd, const char *arg, hub_ref *ref) {
  char buf[256], quant[24] = REGISTRY_QUANT;
  if (strlen(arg) >= sizeof buf) return bad_name(cmd, "...", "too long");
  strcpy(buf, arg);
  snprintf(ref->name, sizeof ref->name, "%s", arg);
  char *colon = strrchr(buf, ':');
  if (colon) {
    *colon = 0;
    size_t n = strlen(colon + 1);
    if (!n || n >= sizeof quant) return bad_name(cmd, arg, "a quantization such as Q8_0 follows ':'");
    for (size_t i = 0; i < n; i++) {
      char c = colon[1 + i];
      if (!isalnum((unsigned char)c) && c != '_') return bad_name(cmd, arg, "bad quantization");
      quant[i] = (char)toupper((unsigned char)c);
    }
    quant[n] = 0;
  }
  char *s1 = strchr(buf, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
  if (!s1) {
    const registry_model *m = registry_find(buf);
    if (!m) {
      fprintf(stderr, "steno %s: '%s': %sno model has that name (did you mean %s? steno list "
              "--available shows all names)\n", cmd, buf, not_file(cmd), registry_closest(buf)->name);
      return 1;
    }
    snprintf(ref->repo, sizeof ref->repo, REGISTRY_ORG "/%s-gguf", m->slug);
    snprintf(ref->file, sizeof ref->file, "%s-%s.gguf", m->slug, quant);
    return 0;
  }
  if (!valid_part(buf, (size_t)(s1 - buf), 1) ||
      !valid_part(s1 + 1, s2 ? (size_t)(s2 - s1 - 1) : strlen(s1 + 1), 1))
    return bad_name(cmd, arg, "ORG/REPO takes letters, digits, '.', '_' and '-'");
  if (s2) {
    if (colon) return bad_name(cmd, arg, "ORG/REPO/FILE.gguf names the file, so no :QUANT");
    if (!valid_file(s2 + 1)) return bad_name(cmd, arg, "FILE must be a .gguf path in the repository");
    snprintf(ref->repo, sizeof ref->repo, "%.*s", (int)(s2 - buf), buf);
    snprintf(ref->file, sizeof ref->file, "%s", s2 + 1);
    return 0;
  }
  /* ORG/REPO: the published naming, <slug>-gguf holds <slug>-<QUANT>.gguf. */
  size_t n = strlen(s1 + 1);
  if (n <= 5 || strcmp(s1 + 1 + n - 5, "-gguf"))
    return bad_name(cmd, arg, "name the file: ORG/REPO/FILE.gguf");
  snprintf(ref->repo, sizeof ref->repo, "%s", buf);
  snprintf(ref->file, sizeof ref->file, "%.*s-%s.gguf", (int)(n - 5), s1 + 1, quant);
  return 0;
}

/* ---- the cache ---- */

/* The commit that refs/main names, or "" (huggingface_hub writes it without a newline).
 * Only a regular file is read: a FIFO there would block `steno list` for ever. */
static void main_commit(const char *dir, char commit[48]) {
  char path[PATH_MAX];
  struct stat s;
  commit[0] = 0;
  if (hub_path(path, sizeof path, "%s/refs/main", dir)) return;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t got = fstat(fd, &s) || !S_ISREG(s.st_mode) ? -1 : read(fd, commit, 47);
  close(fd);
  size_t n = got > 0 ? (size_t)got : 0;
  while (n && isspace((unsigned char)commit[n - 1])) n--;
  commit[n] = 0;
  if (strchr(commit, '/') || commit[0] == '.') commit[0] = 0;
}

/* The snapshot file of `ref`: refs/main's snapshot first, else the newest snapshot
 * that has it (a file pulled before main moved on). */
static int find_cached(const char *root, const hub_ref *ref, char *out, size_t cap) {
  char dir[PATH_MAX], snaps[PATH_MAX], commit[48], path[PATH_MAX];
  struct stat s;
  if (repo_dir(dir, sizeof dir, root, ref->repo)) return 1;
  main_commit(dir, commit);
  if (commit[0] && !hub_path(out, cap, "%s/snapshots/%s/%s", dir, commit, ref->file) &&
      !stat(out, &s) && S_ISREG(s.st_mode))
    return 0;
  if (hub_path(snaps, sizeof snaps, "%s/snapshots", dir)) return 1;
  DIR *d = opendir(snaps);
  if (!d) return 1;
  double newest = -1;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.' || hub_path(path, sizeof path, "%s/%s/%s", snaps, e->d_name, ref->file))
      continue;
    if (lstat(path, &s) || s.st_mtime <= newest) continue;
    double t = (double)s.st_mtime;
    if (!stat(path, &s) && S_ISREG(s.st_mode) && !hub_path(out, cap, "%s", path)) newest = t;
  }
  closedir(d);
  return newest < 0;
}

/* Calls fn on everything under dir, a folder after its contents, never following links;
 * stops at fn's first non-zero answer and returns it. */
typedef int (*walk_fn)(const char *path, const struct stat *s, void *ctx);
static int walk(const char *dir, walk_fn fn, void *ctx, int depth) {
  DIR *d = depth < 16 ? opendir(dir) : NULL;
  if (!d) return 0;
  int st = 0;
  char path[PATH_MAX];
  for (struct dirent *e; !st && (e = readdir(d));) {
    struct stat s;
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
        hub_path(path, sizeof path, "%s/%s", dir, e->d_name) || lstat(path, &s))
      continue;
    if (S_ISDIR(s.st_mode)) st = walk(path, fn, ctx, depth + 1);
    if (!st) st = fn(path, &s, ctx);
  }
  closedir(d);
  return st;
}

static int remove_one(const char *path, const struct stat *s, void *ctx) {
  (void)ctx;
  S_ISDIR(s->st_mode) ? rmdir(path) : unlink(path);
  return 0;
}

/* Whether a link under the snapshots points to blob `ctx` (a file name). */
static int links_to(const char *path, const struct stat *s, void *ctx) {
  char target[PATH_MAX];
  if (!S_ISLNK(s->st_mode)) return 0;
  ssize_t n = readlink(path, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = 0;
  const char *base = strrchr(target, '/');
  return !strcmp(base ? base + 1 : target, ctx);
}

/* ---- steno run's model argument ---- */

/* Existing files, and what can only be a path (./x, /x, ~/x, a.gguf, dir/a.gguf), are
 * paths; the rest are names. ORG/REPO/FILE.gguf needs two slashes, so a missing
 * dir/a.gguf stays a path and gets the loader's "cannot open". */
static int is_path(const char *arg) {
  struct stat s;
  if (!stat(arg, &s) || arg[0] == '/' || arg[0] == '.' || arg[0] == '~') return 1;
  size_t n = strlen(arg);
  const char *s1 = strchr(arg, '/');
  return n > 5 && !strcmp(arg + n - 5, ".gguf") && !strchr(arg, ':') && !(s1 && strchr(s1 + 1, '/'));
}

const char *hub_resolve(const char *arg) {
  static char path[PATH_MAX];
  hub_ref ref;
  char root[PATH_MAX];
  if (is_path(arg)) return hub_path(path, sizeof path, "%s", arg) ? NULL : path;
  if (parse_ref("run", arg, &ref) || cache_root(root, sizeof root)) return NULL;
  if (!find_cached(root, &ref, path, sizeof path)) return path;
  fprintf(stderr, "steno run: model '%s' is not downloaded (%s/%s); get it with: steno pull %s\n", arg,
          ref.repo, ref.file, arg);
  return NULL;
}

/* ---- steno list ---- */

typedef struct {
  char name[520], path[PATH_MAX]; /* name: repo (255) / file (255) in full */
  long long size; /* -1: the blob is missing */
  int main;       /* in refs/main's snapshot */
} listed;

typedef struct {
  listed *v;
  size_t n, cap;
} listing;

/* Whether s[0..n) could follow ':' in a name (parse_ref's QUANT). */
static int is_quant(const char *s, size_t n) {
  if (!n || n >= 24) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '_') return 0;
  return 1;
}

/* What users type for this file: the short name (":QUANT" unless Q8_0) or the full name. */
static void display_name(char *buf, size_t cap, const char *repo, const char *file) {
  const registry_model *m = registry_by_repo(repo);
  size_t n = m ? strlen(m->slug) : 0, len = strlen(file);
  int ours = m && len > n + 6 && !strncmp(file, m->slug, n) && file[n] == '-' && !strchr(file, '/');
  const char *quant = ours ? file + n + 1 : "";
  size_t qn = ours ? len - n - 6 : 0; /* valid files end in .gguf */
  if (ours && is_quant(quant, qn)) {
    if (qn == strlen(REGISTRY_QUANT) && !strncmp(quant, REGISTRY_QUANT, qn)) snprintf(buf, cap, "%s", m->name);
    else snprintf(buf, cap, "%s:%.*s", m->name, (int)qn, quant);
  } else {
    snprintf(buf, cap, "%s/%s", repo, file);
  }
}

/* Adds one snapshot file, keeping one row per name: refs/main's, else the first seen. */
static int add_listed(listing *l, const char *name, const char *path, int is_main) {
  for (size_t i = 0; i < l->n; i++) {
    if (strcmp(l->v[i].name, name)) continue;
    if (is_main && !l->v[i].main) l->n--, memmove(&l->v[i], &l->v[i + 1], (l->n - i) * sizeof *l->v);
    else return 0;
    break;
  }
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    listed *v = realloc(l->v, cap * sizeof *v);
    if (!v) return 1;
    l->v = v, l->cap = cap;
  }
  listed *e = &l->v[l->n++];
  struct stat s;
  snprintf(e->name, sizeof e->name, "%s", name);
  snprintf(e->path, sizeof e->path, "%s", path);
  e->size = stat(path, &s) || !S_ISREG(s.st_mode) ? -1 : (long long)s.st_size;
  e->main = is_main;
  return 0;
}

/* The .gguf files at the top of each snapshot of models--org--name. */
static int list_repo(listing *l, const char *root, const char *folder) {
  char repo[256], dir[PATH_MAX], snaps[PATH_MAX], snap[PATH_MAX], path[PATH_MAX], name[520], commit[48];
  const char *org = folder + 8, *sep = strstr(org, "--");
  if (!sep || hub_path(dir, sizeof dir, "%s/%s", root, folder) ||
      hub_path(snaps, sizeof snaps, "%s/snapshots", dir))
    return 0;
  snprintf(repo, sizeof repo, "%.*s/%s", (int)(sep - org), org, sep + 2);
  main_commit(dir, commit);
  DIR *d = opendir(snaps);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.' || hub_path(snap, sizeof snap, "%s/%s", snaps, e->d_name)) continue;
    DIR *f = opendir(snap);
    for (struct dirent *g; f && (g = readdir(f));) {
      size_t n = strlen(g->d_name);
      if (n < 6 || strcmp(g->d_name + n - 5, ".gguf") || !valid_file(g->d_name) ||
          hub_path(path, sizeof path, "%s/%s", snap, g->d_name))
        continue;
      display_name(name, sizeof name, repo, g->d_name);
      if (add_listed(l, name, path, !strcmp(e->d_name, commit))) {
        closedir(f);
        closedir(d);
        return 1;
      }
    }
    if (f) closedir(f);
  }
  if (d) closedir(d);
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const listed *)a)->name, ((const listed *)b)->name);
}

static int list(void) {
  char root[PATH_MAX], size[24];
  listing l = {0};
  if (cache_root(root, sizeof root)) return 1;
  DIR *d = opendir(root);
  int st = 0;
  for (struct dirent *e; d && !st && (e = readdir(d));)
    if (!strncmp(e->d_name, "models--", 8)) st = list_repo(&l, root, e->d_name);
  if (d) closedir(d);
  if (st) fprintf(stderr, "steno list: out of memory\n");
  qsort(l.v, l.n, sizeof *l.v, by_name);
  if (!st && l.n) printf("%-32s %10s  %s\n", "NAME", "SIZE", "PATH");
  for (size_t i = 0; !st && i < l.n; i++) {
    if (l.v[i].size < 0) snprintf(size, sizeof size, "missing");
    else hub_human(size, sizeof size, l.v[i].size);
    printf("%-32s %10s  %s\n", l.v[i].name, size, l.v[i].path);
  }
  if (!st && !l.n)
    fprintf(stderr, "no models in %s yet: steno pull NAME (steno list --available shows the names)\n",
            root);
  free(l.v);
  return st;
}

/* ---- steno rm ---- */

/* Unlinks `file` from every snapshot of the repository; the blobs it pointed to are
 * gathered in blobs[] (names), and the bytes of plain files (no link) in *freed. */
static int unlink_snapshots(const char *snaps, const char *file, char blobs[][80], int *n_blobs,
                            long long *freed) {
  char path[PATH_MAX], target[PATH_MAX];
  int removed = 0;
  DIR *d = opendir(snaps);
  for (struct dirent *e; d && (e = readdir(d));) {
    struct stat s;
    if (e->d_name[0] == '.' || hub_path(path, sizeof path, "%s/%s/%s", snaps, e->d_name, file) ||
        lstat(path, &s))
      continue;
    ssize_t n = S_ISLNK(s.st_mode) ? readlink(path, target, sizeof target - 1) : -1;
    if (n > 0) {
      target[n] = 0;
      const char *base = strrchr(target, '/');
      base = base ? base + 1 : target;
      int seen = 0;
      for (int i = 0; i < *n_blobs; i++) seen |= !strcmp(blobs[i], base);
      if (!seen && *n_blobs < 64 && strlen(base) < 80) strcpy(blobs[(*n_blobs)++], base);
    } else if (S_ISREG(s.st_mode)) {
      *freed += (long long)s.st_size;
    }
    if (unlink(path)) {
      fprintf(stderr, "steno rm: cannot remove %s: %s\n", path, strerror(errno));
      continue;
    }
    removed++;
    /* Folders emptied by it go too, up to the snapshot's own. */
    for (char *slash; (slash = strrchr(path, '/')) && slash > path + strlen(snaps);) {
      *slash = 0;
      if (rmdir(path)) break;
    }
  }
  if (d) closedir(d);
  return removed;
}

static int is_empty_dir(const char *dir) {
  DIR *d = opendir(dir);
  int empty = d != NULL;
  for (struct dirent *e; d && empty && (e = readdir(d));)
    empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
  if (d) closedir(d);
  return empty;
}

/* Removes the file from every snapshot, then each blob no snapshot links to any more,
 * then the repository's folder once no snapshot is left. */
static int rm(const char *arg) {
  hub_ref ref;
  char root[PATH_MAX], dir[PATH_MAX], snaps[PATH_MAX], blob[PATH_MAX], freed_s[24];
  char blobs[64][80];
  int n_blobs = 0;
  long long freed = 0;
  if (parse_ref("rm", arg, &ref) || cache_root(root, sizeof root) ||
      repo_dir(dir, sizeof dir, root, ref.repo) || hub_path(snaps, sizeof snaps, "%s/snapshots", dir))
    return 1;
  if (!unlink_snapshots(snaps, ref.file, blobs, &n_blobs, &freed)) {
    fprintf(stderr, "steno rm: '%s' is not downloaded (%s/%s)\n", arg, ref.repo, ref.file);
    return 1;
  }
  for (int i = 0; i < n_blobs; i++) {
    struct stat s;
    if (walk(snaps, links_to, blobs[i], 0) || hub_path(blob, sizeof blob, "%s/blobs/%s", dir, blobs[i]))
      continue; /* another file (or another hub name) still uses these bytes */
    if (!stat(blob, &s) && !unlink(blob)) freed += (long long)s.st_size;
  }
  if (is_empty_dir(snaps)) {
    walk(dir, remove_one, NULL, 0);
    rmdir(dir);
    char locks[PATH_MAX];
    if (!hub_path(locks, sizeof locks, "%s/.locks/%s", root, strrchr(dir, '/') + 1)) {
      walk(locks, remove_one, NULL, 0);
      rmdir(locks);
    }
  }
  hub_human(freed_s, sizeof freed_s, freed);
  printf("removed %s (%s freed)\n", arg, freed_s);
  return 0;
}

/* ---- commands ---- */

static const char pull_usage[] =
    "usage: steno pull NAME...\n"
    "  Downloads models into the Hugging Face cache (shared with `hf`), checks their size\n"
    "  and sha256, and prints where each one is. An interrupted download resumes.\n"
    "  NAME: a short name (steno list --available), NAME:QUANT (F16, Q8_0, Q6_K, ...),\n"
    "  ORG/REPO[:QUANT] or ORG/REPO/FILE.gguf.\n"
    "environment: HF_ENDPOINT (default https://huggingface.co); the cache is HF_HUB_CACHE,\n"
    "  else $HF_HOME/hub, else ~/.cache/huggingface/hub\n";
static const char list_usage[] =
    "usage: steno list [--available]\n"
    "  Lists the downloaded models with their sizes and paths; --available lists the\n"
    "  short names steno knows.\n";
static const char rm_usage[] =
    "usage: steno rm NAME...\n"
    "  Removes downloaded models (and their bytes, unless another name shares them).\n";

int hub_is_command(const char *cmd) {
  return !strcmp(cmd, "pull") || !strcmp(cmd, "list") || !strcmp(cmd, "ls") || !strcmp(cmd, "rm");
}

static int pull(int n, char **names) {
  char root[PATH_MAX];
  if (cache_root(root, sizeof root)) return 1;
  if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
    fprintf(stderr, "steno pull: libcurl failed to start\n");
    return 1;
  }
  int failed = 0;
  for (int i = 0; i < n; i++) {
    hub_ref ref;
    char *path = NULL;
    if (parse_ref("pull", names[i], &ref) || hub_download(root, &ref, &path)) {
      failed++;
      continue;
    }
    printf("%s\n", path);
    free(path);
  }
  curl_global_cleanup();
  return failed ? 1 : 0;
}

int hub_command(int argc, char **argv) {
  const char *cmd = argv[1];
  const char *usage = !strcmp(cmd, "pull") ? pull_usage : !strcmp(cmd, "rm") ? rm_usage : list_usage;
  int available = 0, n = 0;
  char **names = argv + 2;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(usage, stdout);
      return 0;
    }
    if (usage == list_usage && !strcmp(argv[i], "--available")) available = 1;
    else if (argv[i][0] == '-' || usage == list_usage) {
      fprintf(stderr, "steno %s: unknown argument '%s'\n%s", cmd, argv[i], usage);
      return 2;
    } else names[n++] = argv[i];
  }
  if (usage == list_usage) {
    if (available) registry_print(stdout);
    int st = available ? 0 : list();
    return fflush(stdout) || ferror(stdout) ? 1 : st;
  }
  if (!n) {
    fputs(usage, stderr);
    return 2;
  }
  int failed = 0;
  if (usage == pull_usage) failed = pull(n, names);
  else
    for (int i = 0; i < n; i++) failed |= rm(names[i]);
  return fflush(stdout) || ferror(stdout) ? 1 : failed;
}
