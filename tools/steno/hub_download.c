/* Downloading one file from the hub: the part of huggingface_hub's file_download.py
 * protocol that a public file needs.
 *   HEAD {endpoint}/{repo}/resolve/main/{file}, Accept-Encoding: identity, following
 *     only same-site (relative) redirects, as a renamed repository answers;
 *     X-Repo-Commit = the commit, X-Linked-Etag (else ETag) = the blob's sha256 for LFS
 *     files (a git sha1 for small ones), X-Linked-Size (else Content-Length) = its size,
 *     Location = where the bytes are (a CDN) when the answer is a redirect.
 *   GET that location into blobs/<etag>.incomplete, with Range: bytes=N- to resume.
 *   Check size and hash, rename to blobs/<etag>, link snapshots/<commit>/<file> to it
 *   (relative symlink), write refs/main. Locks: .locks/<repo folder>/<etag>.lock
 *   (flock, as the filelock package that hf uses). */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "hub.h"
#include "steno.h"

enum { max_tries = 3, max_hops = 5 };

/* No speech model comes near 1 TiB: a larger declared size is a broken or hostile hub,
 * refused before a byte is written. */
static const long long max_size = 1LL << 40;
/* What must stay free on the cache's file system after a download. */
static const long long space_margin = 256LL << 20;

/* What one HTTP answer said (the last one, after redirects). */
typedef struct {
  long status;
  char commit[48], etag[80], error_code[64];
  char location[4096];
  long long linked_size, length, range_start; /* -1 when absent, -2 when not a number */
  int too_long;                               /* a header did not fit */
} answer;

static void answer_reset(answer *a) {
  memset(a, 0, sizeof *a);
  a->linked_size = a->length = a->range_start = -1;
}

static int is_key(const char *line, size_t n, const char *key) {
  return strlen(key) == n && !strncasecmp(line, key, n);
}

static void take(char *dst, size_t cap, const char *v, size_t n, int *too_long) {
  if (n >= cap) {
    *too_long = 1;
    n = 0;
  }
  memcpy(dst, v, n);
  dst[n] = 0;
}

static long long number(const char *v, size_t n) {
  long long x = 0;
  if (!n || n > 18) return -2;
  for (size_t i = 0; i < n; i++) {
    if (!isdigit((unsigned char)v[i])) return -2;
    x = x * 10 + (v[i] - '0');
  }
  return x;
}

/* curl calls this once per header line, status lines included: each new status line
 * starts a new answer, so after redirects the last one remains. */
static size_t on_header(char *line, size_t size, size_t count, void *user) {
  answer *a = user;
  size_t len = size * count;
  if (len >= 5 && !strncmp(line, "HTTP/", 5)) {
    answer_reset(a);
    const char *sp = memchr(line, ' ', len);
    a->status = sp ? strtol(sp + 1, NULL, 10) : 0;
    return len;
  }
  const char *colon = memchr(line, ':', len);
  if (!colon) return len;
  size_t key = (size_t)(colon - line);
  const char *v = colon + 1, *end = line + len;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  while (end > v && isspace((unsigned char)end[-1])) end--;
  size_t n = (size_t)(end - v);
  if (is_key(line, key, "X-Repo-Commit")) take(a->commit, sizeof a->commit, v, n, &a->too_long);
  else if (is_key(line, key, "X-Error-Code")) take(a->error_code, sizeof a->error_code, v, n, &a->too_long);
  else if (is_key(line, key, "Location")) take(a->location, sizeof a->location, v, n, &a->too_long);
  else if (is_key(line, key, "X-Linked-Size")) a->linked_size = number(v, n);
  else if (is_key(line, key, "Content-Length")) a->length = number(v, n);
  else if (is_key(line, key, "Content-Range") && n > 6 && !strncmp(v, "bytes ", 6)) {
    size_t k = 6;
    while (k < n && isdigit((unsigned char)v[k])) k++;
    a->range_start = number(v + 6, k - 6);
  } else if (is_key(line, key, "X-Linked-Etag") || (is_key(line, key, "ETag") && !a->etag[0])) {
    if (n >= 2 && !strncmp(v, "W/", 2)) v += 2, n -= 2; /* as huggingface_hub's _normalize_etag */
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') v++, n -= 2;
    take(a->etag, sizeof a->etag, v, n, &a->too_long);
  }
  return len;
}

static CURL *request(const char *url, answer *a, char *errbuf) {
  CURL *c = curl_easy_init();
  if (!c) return NULL;
  errbuf[0] = 0;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "steno/" STENO_VERSION);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  /* A stalled transfer (under 1 byte/s for a minute) fails and is retried. */
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  answer_reset(a);
  return c;
}

static const char *curl_why(CURLcode rc, const char *errbuf) {
  return errbuf[0] ? errbuf : curl_easy_strerror(rc);
}

/* The hub's HTTP errors, in words (X-Error-Code as huggingface_hub's hf_raise_for_status). */
static void say_http_error(const hub_ref *ref, const answer *a, const char *endpoint) {
  const char *code = a->error_code;
  if (!strcmp(code, "EntryNotFound"))
    fprintf(stderr, "steno pull: %s has no file %s\n", ref->repo, ref->file);
  else if (!strcmp(code, "RepoNotFound") || a->status == 401)
    fprintf(stderr, "steno pull: no repository %s on %s (or it is private)\n", ref->repo, endpoint);
  else if (!strcmp(code, "RevisionNotFound"))
    fprintf(stderr, "steno pull: %s has no revision main\n", ref->repo);
  else if (!strcmp(code, "GatedRepo") || a->status == 403)
    fprintf(stderr, "steno pull: %s is gated: steno pulls only public files\n", ref->repo);
  else if (a->status == 404)
    fprintf(stderr, "steno pull: %s/%s not found on %s\n", ref->repo, ref->file, endpoint);
  else
    fprintf(stderr, "steno pull: %s answered HTTP %ld for %s/%s\n", endpoint, a->status, ref->repo,
            ref->file);
}

static int all_hex(const char *s, size_t n) {
  if (strlen(s) != n) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f')) return 0;
  return 1;
}

/* What HEAD says about a file. */
typedef struct {
  char commit[48], etag[80];
  char url[4096]; /* where to GET the bytes */
  long long size;
} remote;

/* HEAD, following relative redirects only (huggingface_hub's
 * _httpx_follow_relative_redirects): a CDN redirect is where the bytes are, not an
 * answer to follow. */
static int head(const char *endpoint, const hub_ref *ref, remote *out) {
  char url[4096], errbuf[CURL_ERROR_SIZE];
  if (hub_path(url, sizeof url, "%s/%s/resolve/main/%s", endpoint, ref->repo, ref->file)) return 1;
  answer a;
  struct curl_slist *hdr = curl_slist_append(NULL, "Accept-Encoding: identity");
  int st = 1, hop;
  for (hop = 0; hop < max_hops; hop++) {
    CURL *c = request(url, &a, errbuf);
    if (!c) break;
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    CURLcode rc = curl_easy_perform(c);
    char *next = NULL, *here = NULL;
    curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &next);
    curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &here);
    int relative = a.status >= 300 && a.status < 400 && a.location[0] == '/' && a.location[1] != '/';
    int fits = !hub_path(out->url, sizeof out->url, "%s",
                         a.status >= 300 && a.status < 400 && next ? next : here ? here : url);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
      fprintf(stderr, "steno pull: cannot reach %s: %s\n", endpoint, curl_why(rc, errbuf));
      break;
    }
    if (!fits || a.too_long) {
      fprintf(stderr, "steno pull: an over-long header from %s\n", endpoint);
      break;
    }
    if (relative) {
      memcpy(url, out->url, sizeof url);
      continue;
    }
    if (a.status < 200 || a.status >= 400 || (a.status >= 300 && !next)) {
      say_http_error(ref, &a, endpoint);
      break;
    }
    st = 0;
    break;
  }
  curl_slist_free_all(hdr);
  if (hop == max_hops) fprintf(stderr, "steno pull: %s redirects too many times\n", endpoint);
  if (st) return st;
  if (!all_hex(a.commit, 40)) {
    fprintf(stderr, "steno pull: %s is not a Hugging Face hub (no commit in its answer)\n", endpoint);
    return 1;
  }
  /* The etag names the blob file and is the hash we check: only hex is acceptable. */
  if (!all_hex(a.etag, 64) && !all_hex(a.etag, 40)) {
    fprintf(stderr, "steno pull: %s gave no sha256 for %s/%s, so it cannot be verified\n", endpoint,
            ref->repo, ref->file);
    return 1;
  }
  out->size = a.linked_size != -1 ? a.linked_size : a.status < 300 ? a.length : -1;
  if (out->size < 0 || out->size > max_size) {
    char human[24];
    hub_human(human, sizeof human, out->size);
    if (out->size > max_size)
      fprintf(stderr, "steno pull: %s says %s/%s is %s: no model is that large, refusing it\n",
              endpoint, ref->repo, ref->file, human);
    else
      fprintf(stderr, "steno pull: %s gave %s size for %s/%s\n", endpoint,
              out->size == -1 ? "no" : "an unreadable", ref->repo, ref->file);
    return 1;
  }
  memcpy(out->commit, a.commit, sizeof out->commit);
  memcpy(out->etag, a.etag, sizeof out->etag);
  return 0;
}

void hub_human(char *buf, size_t cap, long long bytes) {
  if (bytes >= 1000000000LL) snprintf(buf, cap, "%.2f GB", (double)bytes / 1e9);
  else if (bytes >= 1000000) snprintf(buf, cap, "%.1f MB", (double)bytes / 1e6);
  else if (bytes >= 1000) snprintf(buf, cap, "%.1f kB", (double)bytes / 1e3);
  else snprintf(buf, cap, "%lld B", bytes);
}

/* One file being written: the .incomplete blob, its running hash, the progress line. */
typedef struct {
  FILE *f;
  EVP_MD_CTX *md;
  const EVP_MD *kind; /* sha256 for an LFS etag, sha1 of "blob <size>\0" + bytes for git */
  long long have, size, attempt_start;
  const char *label;
  answer a;
  int tty;
  double t0, last_draw;
  int started;      /* the current answer's first bytes were seen */
  const char *fail; /* why the write callback stopped the transfer */
} transfer;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int hash_start(transfer *t) {
  if (!EVP_DigestInit_ex(t->md, t->kind, NULL)) return 1;
  if (t->kind == EVP_sha1()) { /* git's blob hash: header, then the bytes */
    char head[40];
    int n = snprintf(head, sizeof head, "blob %lld", t->size);
    return !EVP_DigestUpdate(t->md, head, (size_t)n + 1);
  }
  return 0;
}

/* Starts over at byte 0 (the server ignored the Range, or the file was too long). */
static int restart(transfer *t) {
  t->have = 0;
  return fflush(t->f) || ftruncate(fileno(t->f), 0) || fseeko(t->f, 0, SEEK_SET) || hash_start(t);
}

/* Hashes what an earlier, interrupted pull left, so resuming costs one read. */
static int hash_existing(transfer *t) {
  static unsigned char buf[1 << 20];
  long long left = t->have;
  if (fseeko(t->f, 0, SEEK_SET)) return 1;
  while (left > 0) {
    size_t n = fread(buf, 1, left < (long long)sizeof buf ? (size_t)left : sizeof buf, t->f);
    if (!n || !EVP_DigestUpdate(t->md, buf, n)) return 1;
    left -= (long long)n;
  }
  return fseeko(t->f, 0, SEEK_END);
}

static void draw(transfer *t, int last) {
  double tn = now();
  if (!t->tty || (!last && tn - t->last_draw < 0.2)) return;
  t->last_draw = tn;
  char have[24], size[24], rate[32] = "", eta[48] = "";
  hub_human(have, sizeof have, t->have);
  hub_human(size, sizeof size, t->size);
  double bps = (double)(t->have - t->attempt_start) / (tn - t->t0 > 1e-3 ? tn - t->t0 : 1e-3);
  if (bps > 0) {
    hub_human(rate, sizeof rate, (long long)bps);
    strcat(rate, "/s");
    long long s = (long long)((double)(t->size - t->have) / bps);
    if (!last) snprintf(eta, sizeof eta, "%lld:%02lld left", s / 60, s % 60);
  }
  int pct = t->size ? (int)(100.0 * (double)t->have / (double)t->size) : 100;
  fprintf(stderr, "\r%s %3d%%  %s / %s  %s  %s\033[K%s", t->label, pct, have, size, rate, eta,
          last ? "\n" : "");
}

static int on_progress(void *user, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  (void)dt, (void)dn, (void)ut, (void)un;
  draw(user, 0);
  return 0;
}

static size_t on_body(char *p, size_t size, size_t count, void *user) {
  transfer *t = user;
  size_t n = size * count;
  long st = t->a.status;
  if (st >= 300 && st < 400) return n; /* a redirect's own body */
  if (st != 200 && st != 206) return 0;
  if (!t->started) {
    t->started = 1;
    if (st == 200 && t->have > 0 && restart(t)) /* the server ignored the Range */
      return t->fail = "cannot truncate the partial file", 0;
    if (st == 206 && t->a.range_start != t->have)
      return t->fail = "the server resumed at the wrong offset", 0;
  }
  if ((long long)n > t->size - t->have) return t->fail = "the server sent more than the file's size", 0;
  if (fwrite(p, 1, n, t->f) != n) return t->fail = strerror(errno), 0;
  if (!EVP_DigestUpdate(t->md, p, n)) return t->fail = "hashing failed", 0;
  t->have += (long long)n;
  return n;
}

/* Failures worth another try from where the bytes stopped: a dropped connection, a
 * timeout, a busy server. */
static int transient(CURLcode rc, long status) {
  if (status >= 300 || (status && status < 200)) return status >= 500 || status == 416;
  return rc == CURLE_OK || rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR ||
         rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING || rc == CURLE_OPERATION_TIMEDOUT ||
         rc == CURLE_COULDNT_CONNECT || rc == CURLE_HTTP2 || rc == CURLE_HTTP2_STREAM ||
         rc == CURLE_SSL_CONNECT_ERROR;
}

/* One GET from t->have to the end. Returns 0 when the whole file is here. */
static int get_once(transfer *t, const char *url, CURLcode *rc, char *errbuf) {
  CURL *c = request(url, &t->a, errbuf);
  if (!c) return -1;
  char range[64];
  struct curl_slist *hdr = NULL;
  if (t->have > 0) {
    snprintf(range, sizeof range, "Range: bytes=%lld-", t->have);
    hdr = curl_slist_append(NULL, range);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
  }
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, t);
  t->fail = NULL;
  t->started = 0;
  t->attempt_start = t->have;
  t->t0 = now();
  *rc = curl_easy_perform(c);
  curl_easy_cleanup(c);
  curl_slist_free_all(hdr);
  if (fflush(t->f)) t->fail = strerror(errno);
  return *rc == CURLE_OK && t->have == t->size ? 0 : 1;
}

static void say_stopped(const transfer *t, const hub_ref *ref, CURLcode rc, const char *errbuf) {
  char have[24], size[24];
  long st = t->a.status;
  hub_human(have, sizeof have, t->have);
  hub_human(size, sizeof size, t->size);
  if (st >= 300 || (st && st < 200))
    fprintf(stderr, "steno pull: HTTP %ld while downloading %s\n", st, ref->file);
  else
    fprintf(stderr, "steno pull: download of %s stopped at %s of %s: %s\n", ref->file, have, size,
            rc == CURLE_OK ? "the server closed early" : curl_why(rc, errbuf));
}

/* Downloads into the open .incomplete file until it holds t->size bytes, trying again
 * (from where it stopped) after transient failures. */
static int fetch(transfer *t, const char *url, const hub_ref *ref) {
  char errbuf[CURL_ERROR_SIZE] = "";
  CURLcode rc = CURLE_OK;
  for (int try = 1; t->have < t->size; try++) {
    if (!get_once(t, url, &rc, errbuf)) break;
    draw(t, 1);
    if (t->fail) {
      fprintf(stderr, "steno pull: %s: %s\n", ref->file, t->fail);
      return 1;
    }
    if (t->a.status == 416 && restart(t)) return 1;
    if (!transient(rc, t->a.status) || try == max_tries) {
      say_stopped(t, ref, rc, errbuf);
      if (transient(rc, t->a.status) && t->have > 0)
        fprintf(stderr, "steno pull: the part is kept; `steno pull %s` resumes it\n", ref->name);
      return 1;
    }
    fprintf(stderr, "steno pull: interrupted (%s); trying again\n",
            rc == CURLE_OK ? "short answer" : curl_why(rc, errbuf));
    sleep((unsigned)try);
  }
  draw(t, 1);
  return 0;
}

/* The hash of the finished file against the hub's etag. */
static int verify(transfer *t, const char *etag, const hub_ref *ref) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  char hex[2 * EVP_MAX_MD_SIZE + 1];
  if (!EVP_DigestFinal_ex(t->md, md, &n)) return 1;
  for (unsigned i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
  if (!strcmp(hex, etag)) return 0;
  fprintf(stderr, "steno pull: %s is corrupt: %s %s, the hub says %s; it was deleted\n", ref->file,
          t->kind == EVP_sha1() ? "git sha1" : "sha256", hex, etag);
  return 1;
}

/* Downloads blobs/<etag>.incomplete and renames it to blobs/<etag> once size and hash
 * match; a corrupt file is deleted, an interrupted one kept for the next pull. */
static int download_blob(const char *blob, const remote *rm, const hub_ref *ref) {
  char part[4200];
  if (hub_path(part, sizeof part, "%s.incomplete", blob)) return 1;
  int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  transfer t = {.f = fd >= 0 ? fdopen(fd, "r+b") : NULL, .md = EVP_MD_CTX_new(), .size = rm->size,
                .label = ref->file, .tty = isatty(2)};
  t.kind = strlen(rm->etag) == 64 ? EVP_sha256() : EVP_sha1();
  struct stat s;
  int st = 1;
  if (!t.f || fstat(fileno(t.f), &s) || !t.md) {
    fprintf(stderr, "steno pull: cannot write %s: %s\n", part, strerror(errno));
    goto done;
  }
  t.have = s.st_size;
  if (hash_start(&t) || (t.have > t.size ? restart(&t) : hash_existing(&t))) {
    fprintf(stderr, "steno pull: cannot read %s\n", part);
    goto done;
  }
  char size[24], have[24];
  hub_human(size, sizeof size, t.size);
  hub_human(have, sizeof have, t.have);
  if (t.have > 0) fprintf(stderr, "resuming %s at %s of %s\n", ref->file, have, size);
  else fprintf(stderr, "pulling %s/%s (%s)\n", ref->repo, ref->file, size);
  if (fetch(&t, rm->url, ref)) goto done;
  if (verify(&t, rm->etag, ref)) {
    unlink(part);
    goto done;
  }
  if (fsync(fileno(t.f)) || rename(part, blob)) {
    fprintf(stderr, "steno pull: cannot store %s: %s\n", blob, strerror(errno));
    goto done;
  }
  st = 0;
done:
  if (t.f) fclose(t.f);
  else if (fd >= 0) close(fd);
  EVP_MD_CTX_free(t.md);
  return st;
}

/* Whether what is left to download fits in the free space of the blobs folder with
 * space_margin to spare: a disk filled halfway through fails late, and starves every
 * other program on the machine meanwhile. */
static int check_space(const char *blobs, const char *blob, const remote *rm, const hub_ref *ref) {
  char part[4200], need_s[24], free_s[24], margin_s[24];
  struct stat s;
  struct statvfs v;
  if (hub_path(part, sizeof part, "%s.incomplete", blob)) return 1;
  long long have = stat(part, &s) || s.st_size > rm->size ? 0 : (long long)s.st_size;
  long long need = rm->size - have;
  if (statvfs(blobs, &v) || !v.f_frsize) return 0; /* cannot tell: a failed write will say */
  unsigned long long avail = (unsigned long long)v.f_bavail;
  if (avail >= (unsigned long long)(need + space_margin) / v.f_frsize + 1) return 0;
  hub_human(need_s, sizeof need_s, need);
  hub_human(free_s, sizeof free_s, (long long)(avail * v.f_frsize));
  hub_human(margin_s, sizeof margin_s, space_margin);
  fprintf(stderr, "steno pull: %s needs %s but %s has %s free (and %s must stay free): make room, "
          "or set HF_HUB_CACHE to a larger disk\n", ref->file, need_s, blobs, free_s, margin_s);
  return 1;
}

/* snapshots/<commit>/<file> -> ../../blobs/<etag> (one more ../ per folder in file),
 * made under a temporary name and renamed over the old link. */
static int link_snapshot(const char *repo_dir, const remote *rm, const hub_ref *ref, char **path) {
  char link[4200], tmp[4300], target[700] = "../../", dir[4200];
  if (hub_path(link, sizeof link, "%s/snapshots/%s/%s", repo_dir, rm->commit, ref->file) ||
      hub_path(tmp, sizeof tmp, "%s.%ld.tmp", link, (long)getpid()))
    return 1;
  for (const char *p = ref->file; (p = strchr(p, '/')); p++) strcat(target, "../");
  strcat(target, "blobs/");
  strcat(target, rm->etag);
  memcpy(dir, link, sizeof dir);
  *strrchr(dir, '/') = 0;
  unlink(tmp);
  if (hub_mkdirs(dir) || symlink(target, tmp) || rename(tmp, link)) {
    fprintf(stderr, "steno pull: cannot link %s: %s\n", link, strerror(errno));
    unlink(tmp);
    return 1;
  }
  *path = strdup(link);
  return *path ? 0 : 1;
}

/* refs/main holds the commit (no newline, as huggingface_hub writes it). */
static int write_ref(const char *repo_dir, const char *commit) {
  char dir[4200], ref[4300], tmp[4400];
  if (hub_path(dir, sizeof dir, "%s/refs", repo_dir) || hub_path(ref, sizeof ref, "%s/main", dir) ||
      hub_path(tmp, sizeof tmp, "%s.%ld.tmp", ref, (long)getpid()) || hub_mkdirs(dir))
    return 1;
  FILE *f = fopen(tmp, "wb");
  int bad = !f || fputs(commit, f) < 0;
  if (f && fclose(f)) bad = 1;
  if (bad || rename(tmp, ref)) {
    fprintf(stderr, "steno pull: cannot write %s: %s\n", ref, strerror(errno));
    unlink(tmp);
    return 1;
  }
  return 0;
}

/* Holds .locks/models--org--name/<etag>.lock while the blob is written, so that two
 * pulls (or a pull and `hf download`) of one file never write it together. */
static int lock_blob(const char *root, const char *folder, const char *etag) {
  char dir[4200], path[4300];
  if (hub_path(dir, sizeof dir, "%s/.locks/%s", root, folder) ||
      hub_path(path, sizeof path, "%s/%s.lock", dir, etag) || hub_mkdirs(dir))
    return -1;
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "steno pull: cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB)) {
    fprintf(stderr, "waiting for another download of %s\n", etag);
    if (flock(fd, LOCK_EX)) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

int hub_download(const char *root, const hub_ref *ref, char **path) {
  const char *endpoint = getenv("HF_ENDPOINT");
  char ep[1024], folder[300], repo_dir[4096], blob[4200];
  if (hub_path(ep, sizeof ep, "%s", endpoint && *endpoint ? endpoint : "https://huggingface.co"))
    return 1;
  for (size_t n = strlen(ep); n > 0 && ep[n - 1] == '/'; n--) ep[n - 1] = 0;
  if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8)) {
    fprintf(stderr, "steno pull: HF_ENDPOINT must be an http:// or https:// address, not '%s'\n", ep);
    return 1;
  }
  remote rm;
  if (head(ep, ref, &rm)) return 1;
  snprintf(folder, sizeof folder, "models--%s", ref->repo);
  for (char *p = folder; (p = strchr(p, '/')); p++) {
    memmove(p + 2, p + 1, strlen(p + 1) + 1); /* "/" -> "--" */
    p[0] = p[1] = '-';
  }
  char blobs[4150];
  if (hub_path(repo_dir, sizeof repo_dir, "%s/%s", root, folder) ||
      hub_path(blobs, sizeof blobs, "%s/blobs", repo_dir) ||
      hub_path(blob, sizeof blob, "%s/%s", blobs, rm.etag) || hub_mkdirs(blobs))
    return 1;
  int lock = lock_blob(root, folder, rm.etag);
  if (lock < 0) return 1;
  struct stat s;
  int st = 0;
  if (stat(blob, &s) || s.st_size != rm.size)
    st = check_space(blobs, blob, &rm, ref) || download_blob(blob, &rm, ref);
  else fprintf(stderr, "%s/%s is already here\n", ref->repo, ref->file);
  close(lock);
  if (st || link_snapshot(repo_dir, &rm, ref, path)) return 1;
  if (write_ref(repo_dir, rm.commit)) {
    free(*path);
    *path = NULL;
    return 1;
  }
  return 0;
}
