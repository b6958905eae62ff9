/* Models on the Hugging Face hub, kept in the hub's local cache layout so that `hf`
 * and steno share downloads: `steno pull`, `steno list`, `steno rm`, and the model
 * argument of `steno run`. CLI code: the library never touches the network. */
#ifndef STENO_HUB_H
#define STENO_HUB_H

#include <stddef.h>

/* Whether `cmd` is pull, list (ls) or rm. */
int hub_is_command(const char *cmd);

/* Runs `steno pull|list|rm ...` (argv[1] is the command); returns the exit status. */
int hub_command(int argc, char **argv);

/* A model argument — a file path, a short name (parakeet-v3[:QUANT]), ORG/REPO[:QUANT]
 * or ORG/REPO/FILE.gguf — as the path of a file to load. Never downloads: a name that
 * is not in the cache is an error that names the `steno pull` command. Returns the path
 * (kept until the next call), or NULL after printing why on stderr. */
const char *hub_resolve(const char *arg);

/* ---- shared by hub.c and hub_download.c ---- */

/* A file in a hub repository. */
typedef struct {
  char repo[200]; /* "org/name" */
  char file[256]; /* path inside the repository */
  char name[256]; /* what the user typed, for messages */
} hub_ref;

/* Downloads `ref` at revision main from $HF_ENDPOINT into the cache rooted at
 * `root`, resuming a partial download, checking size and sha256, and links it into
 * the snapshot. On success *path (free()) is the snapshot file; on failure a message
 * is printed on stderr and nothing new is left but a resumable .incomplete blob. */
int hub_download(const char *root, const hub_ref *ref, char **path);

/* snprintf into a fixed buffer; non-zero (and a message) when it does not fit. */
int hub_path(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A size for people: "739.5 MB". */
void hub_human(char *buf, size_t cap, long long bytes);

/* mkdir -p. */
int hub_mkdirs(const char *dir);

#endif
