/* whisper.cpp's legacy .bin files: the test writes one from the multilingual
 * fixture in whisper.cpp's layout (OpenAI tensor names, [1, D] conv biases, a
 * raw-byte vocabulary of the ids below end of text, the standard 51865-id
 * layout with the fixture's special rows moved to their standard ids), loads
 * it through the .bin adapter and checks the synthesized specials, languages
 * and suppress list, then that the encoder output and the logits are the GGUF
 * model's. Broken files (truncated, not Whisper, unknown or repeated tensors,
 * a missing one) are errors that say what is wrong. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_test.h"
#include "io/gguf.h"
#include "models/whisper/whisper.h"
#include "steno.h"

#define V_BIN 51865

typedef struct {
  uint8_t *p;
  size_t n, cap;
} out;

static void put(out *o, const void *d, size_t n) {
  if (o->n + n > o->cap) {
    o->cap = (o->n + n) * 2;
    o->p = realloc(o->p, o->cap);
  }
  memcpy(o->p + o->n, d, n);
  o->n += n;
}
static void put_i32(out *o, int32_t v) { put(o, &v, 4); }

/* The legacy name of a canonical one (the inverse of the adapter's renames). */
static void legacy(const char *name, char *buf, size_t cap) {
  static const char *const top[][2] = {
      {"enc.pos_emb.weight", "encoder.positional_embedding"}, {"enc.conv.0.weight", "encoder.conv1.weight"},
      {"enc.conv.0.bias", "encoder.conv1.bias"}, {"enc.conv.1.weight", "encoder.conv2.weight"},
      {"enc.conv.1.bias", "encoder.conv2.bias"}, {"enc.final_norm.weight", "encoder.ln_post.weight"},
      {"enc.final_norm.bias", "encoder.ln_post.bias"}, {"dec.pos_emb.weight", "decoder.positional_embedding"},
      {"dec.token_embd.weight", "decoder.token_embedding.weight"},
      {"dec.final_norm.weight", "decoder.ln.weight"}, {"dec.final_norm.bias", "decoder.ln.bias"}};
  static const char *const block[][2] = {
      {"norm_attn", "attn_ln"}, {"norm_self", "attn_ln"}, {"self_attn.q", "attn.query"},
      {"self_attn.k", "attn.key"}, {"self_attn.v", "attn.value"}, {"self_attn.out", "attn.out"},
      {"attn.q", "attn.query"}, {"attn.k", "attn.key"}, {"attn.v", "attn.value"},
      {"attn.out", "attn.out"}, {"norm_cross", "cross_attn_ln"}, {"cross_attn.q", "cross_attn.query"},
      {"cross_attn.k", "cross_attn.key"}, {"cross_attn.v", "cross_attn.value"},
      {"cross_attn.out", "cross_attn.out"}, {"norm_ffn", "mlp_ln"}, {"ffn.fc1", "mlp.0"},
      {"ffn.fc2", "mlp.2"}};
  for (size_t i = 0; i < sizeof top / sizeof *top; i++)
    if (!strcmp(name, top[i][0])) return (void)snprintf(buf, cap, "%s", top[i][1]);
  int layer;
  char rest[96];
  bool enc = !strncmp(name, "enc.", 4);
  if (sscanf(name + 4, "blocks.%d.%95s", &layer, rest) != 2) return (void)snprintf(buf, cap, "?");
  char *leaf = strrchr(rest, '.');
  *leaf = 0;
  for (size_t i = 0; i < sizeof block / sizeof *block; i++)
    if (!strcmp(rest, block[i][0]))
      return (void)snprintf(buf, cap, "%s.blocks.%d.%s.%s", enc ? "encoder" : "decoder", layer,
                            block[i][1], leaf + 1);
  snprintf(buf, cap, "?");
}

/* The fixture's ids → the standard multilingual layout (languages by whisper.cpp's table). */
static int map_id(const whisper_config *c, int id) {
  static const int lang_index[] = {0, 1, 2, 3, 6, 7}; /* en zh de es fr ja */
  if (id < c->eot) return id;
  if (id == c->eot) return 50257;
  if (id == c->sot) return 50258;
  if (id > c->sot && id <= c->sot + 6) return 50259 + lang_index[id - c->sot - 1];
  if (id >= c->translate && id <= c->no_timestamps) return 50358 + (id - c->translate);
  return 50364 + (id - c->no_timestamps - 1);
}

/* What to break while writing. */
typedef struct {
  const char *skip, *rename, *twice; /* legacy tensor names */
  int32_t vocab;                     /* 0: V_BIN */
  size_t cut;                        /* bytes cut from the end */
} breakage;

static out write_bin(const gguf_file *f, const whisper *m, const breakage *b) {
  out o = {0};
  const whisper_config *c = &m->c;
  uint32_t magic = 0x67676d6cu;
  put(&o, &magic, 4);
  int32_t hp[11] = {b->vocab ? b->vocab : V_BIN, (int32_t)c->n_audio_ctx, (int32_t)c->d, (int32_t)c->enc_heads,
                    (int32_t)c->enc_layers, (int32_t)c->n_text_ctx, (int32_t)c->d, (int32_t)c->dec_heads,
                    (int32_t)c->dec_layers, (int32_t)c->mels, 0};
  put(&o, hp, sizeof hp);
  const gguf_tensor *fb = gguf_tensor_find(f, "frontend.mel_filterbank");
  put_i32(&o, (int32_t)c->mels), put_i32(&o, 201), put(&o, fb->data, fb->nbytes);
  put_i32(&o, 50257);
  for (int i = 0; i < 50257; i++) {
    char filler[16];
    const char *s = filler;
    uint32_t n = (uint32_t)snprintf(filler, sizeof filler, "<f%d>", i);
    if (i < c->eot) s = m->tok.bytes[i], n = m->tok.len[i];
    put(&o, &n, 4), put(&o, s, n);
  }
  for (size_t i = 0; i < f->n_tensors; i++) {
    const gguf_tensor *t = &f->tensors[i];
    if (!strncmp(t->name, "frontend.", 9)) continue;
    char name[128];
    legacy(t->name, name, sizeof name);
    if (b->skip && !strcmp(name, b->skip)) continue;
    if (b->rename && !strcmp(name, b->rename)) snprintf(name, sizeof name, "decoder.mystery.weight");
    int32_t ne[4] = {(int32_t)t->ne[0], (int32_t)t->ne[1], (int32_t)t->ne[2], (int32_t)t->ne[3]};
    int32_t nd = (int32_t)t->n_dims;
    const void *data = t->data;
    size_t nbytes = t->nbytes;
    float *table = NULL;
    if (strstr(t->name, "enc.conv.") && strstr(t->name, ".bias")) nd = 2, ne[1] = ne[0], ne[0] = 1;
    if (!strcmp(t->name, "dec.token_embd.weight")) {
      /* Rows at their standard ids; the others can never win (−1000 through the final norm's bias). */
      size_t d = t->ne[0];
      table = calloc((size_t)V_BIN * d, sizeof *table);
      for (int r = 0; r < V_BIN; r++) table[(size_t)r * d] = -1000;
      for (int r = 0; r < (int)c->vocab; r++)
        memcpy(table + (size_t)map_id(c, r) * d, (const float *)t->data + (size_t)r * d, d * sizeof *table);
      ne[1] = V_BIN, data = table, nbytes = (size_t)V_BIN * d * sizeof *table;
    }
    for (int twice = 0; twice < 1 + (b->twice && !strcmp(name, b->twice)); twice++) {
      put_i32(&o, nd), put_i32(&o, (int32_t)strlen(name)), put_i32(&o, (int32_t)t->type);
      put(&o, ne, 4 * (size_t)nd), put(&o, name, strlen(name)), put(&o, data, nbytes);
    }
    free(table);
  }
  o.n -= b->cut < o.n ? b->cut : 0;
  return o;
}

/* The .bin written to a file, read back through the adapter (status; *model on success). */
static int load_bin(const gguf_file *f, const whisper *src, const breakage *b, whisper **model,
                    gguf_file **g, uint8_t **image) {
  out o = write_bin(f, src, b);
  char path[] = "/tmp/steno_whisper_binXXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0 && write(fd, o.p, o.n) == (ssize_t)o.n, "writing %s", path);
  close(fd);
  free(o.p);
  size_t size;
  *model = NULL, *g = NULL, *image = NULL;
  int st = whisper_bin_image(path, image, &size);
  if (!st) st = gguf_open_memory(g, *image, size, path);
  if (!st) st = whisper_load(test_device(), *g, model);
  unlink(path);
  return st;
}

static void fails(const gguf_file *f, const whisper *src, const breakage *b, const char *want) {
  whisper *m;
  gguf_file *g;
  uint8_t *image;
  int st = load_bin(f, src, b, &m, &g, &image);
  CHECK(st != 0 && !m, "a broken .bin ('%s') loaded", want);
  CHECK(strstr(steno_last_error(), want) != NULL, "message '%s' does not say '%s'", steno_last_error(), want);
  whisper_free(m);
  gguf_close(g);
  free(image);
}

static bool has(const whisper *m, int id) {
  for (size_t i = 0; i < m->n_suppress; i++)
    if (m->suppress[i] == id) return true;
  return false;
}

static void same_model(const whisper *ref, whisper *m, whisper *g) {
  const whisper_config *c = &m->c;
  CHECK(c->vocab == V_BIN && c->eot == 50257 && c->sot == 50258 && c->no_timestamps == 50363 &&
            c->translate == 50358 && c->transcribe == 50359 && c->prev_sot == 50361 &&
            c->multilingual && c->n_langs == 99 && c->lang_id[2] == 50261 &&
            !strcmp(c->lang_code[2], "de"),
        "synthesized specials and languages");
  /* OpenAI's non-speech list over this vocabulary: the punctuation bytes, then the specials. */
  CHECK(has(m, 1) && has(m, 93) && has(m, 50258) && has(m, 50358) && has(m, 50362) && !has(m, 50363) &&
            m->n_begin_suppress == 2 && m->begin_suppress[1] == 50257,
        "suppress lists (%zu ids)", m->n_suppress);
  size_t W = (size_t)c->win_frames * c->mels, E = (size_t)c->n_audio_ctx * c->d;
  float *mel = test_random(W, 7), *e1 = test_floats(E), *e2 = test_floats(E);
  whisper *sm = NULL, *sg = NULL; /* sessions of the two models run the stages */
  CHECK_OK(whisper_session_new(m, &sm));
  CHECK_OK(whisper_session_new(g, &sg));
  if (!sm || !sg) return;
  CHECK_OK(whisper_encode(sm, mel, e1));
  CHECK_OK(whisper_encode(sg, mel, e2));
  check_close(".bin vs GGUF: encoder output", e1, e2, E, 1e-6f);
  int pre_g[3] = {g->c.sot, g->c.lang_id[2], g->c.transcribe}, pre_b[3];
  for (int i = 0; i < 3; i++) pre_b[i] = map_id(&ref->c, pre_g[i]);
  float *lb = test_floats(c->vocab), *lg = test_floats(g->c.vocab), *mapped = test_floats(g->c.vocab);
  CHECK_OK(whisper_feed(sm, pre_b, 3, 0, lb));
  CHECK_OK(whisper_feed(sg, pre_g, 3, 0, lg));
  whisper_session_free(sm), whisper_session_free(sg);
  for (uint32_t i = 0; i < g->c.vocab; i++) mapped[i] = lb[map_id(&ref->c, (int)i)];
  check_close(".bin vs GGUF: logits at the standard ids", mapped, lg, g->c.vocab, 1e-6f);
  free(mel), free(e1), free(e2), free(lb), free(lg), free(mapped);
}

/* `test_whisper_bin --write PATH` only writes the fixture's .bin to PATH (for tests/cli_run.sh). */
static int write_only(gguf_file *f, whisper *g, const char *path) {
  breakage none = {0};
  out o = write_bin(f, g, &none);
  FILE *w = fopen(path, "wb");
  CHECK(w && fwrite(o.p, 1, o.n, w) == o.n, "writing %s", path);
  CHECK(w && !fclose(w), "closing %s", path);
  free(o.p);
  whisper_free(g);
  gguf_close(f);
  return check_done();
}

/* A .bin of a tiny English model's header and filterbank, then `count` one-byte
 * vocabulary entries ('a', 'b', ...) and nothing else. */
static out header_and_vocab(int count) {
  out o = {0};
  uint32_t magic = 0x67676d6cu;
  int32_t hp[11] = {51864, 4, 4, 1, 1, 4, 4, 1, 1, 80, 0};
  put(&o, &magic, 4), put(&o, hp, sizeof hp);
  put_i32(&o, 80), put_i32(&o, 201);
  static const float fb[80 * 201];
  put(&o, fb, sizeof fb);
  put_i32(&o, count);
  for (int i = 0; i < count; i++) {
    uint32_t n = 1;
    char c = (char)('a' + i);
    put(&o, &n, 4), put(&o, &c, 1);
  }
  return o;
}

/* Inputs tests/fuzz_whisper_bin.c found: each is refused with a message, and
 * nothing leaks (the sanitize build checks). */
static void fuzz_regressions(void) {
  /* A vocabulary that cannot spell OpenAI's suppress list: the list leaked. */
  out o = header_and_vocab(10);
  uint8_t *img = NULL;
  size_t n;
  int st = whisper_bin_image_memory(o.p, o.n, "short.bin", &img, &n);
  CHECK(st && strstr(steno_last_error(), "not in the vocabulary"), "a 10-token vocabulary: %s",
        st ? steno_last_error() : "accepted");
  free(img);
  free(o.p);
}

int main(int argc, char **argv) {
  fuzz_regressions();
  test_device();
  const char *dir = getenv("STENO_SOURCE_DIR");
  char path[512];
  snprintf(path, sizeof path, "%s/tests/fixtures/whisper_tiny_ml.gguf", dir ? dir : ".");
  gguf_file *f = NULL;
  CHECK_OK(gguf_open(&f, path));
  whisper *g = NULL;
  if (f) CHECK_OK(whisper_load(test_device(), f, &g));
  if (!g) return check_done();
  if (argc == 3 && !strcmp(argv[1], "--write")) return write_only(f, g, argv[2]);
  breakage none = {0};
  whisper *m;
  gguf_file *img;
  uint8_t *bytes;
  CHECK_OK(load_bin(f, g, &none, &m, &img, &bytes));
  if (m) same_model(g, m, g);
  whisper_free(m);
  gguf_close(img);
  free(bytes);

  /* The public API opens a .bin by its magic, as it does a GGUF file. */
  out o = write_bin(f, g, &none);
  char bin[] = "/tmp/steno_whisper_apiXXXXXX";
  int fd = mkstemp(bin);
  CHECK(fd >= 0 && write(fd, o.p, o.n) == (ssize_t)o.n, "writing %s", bin);
  close(fd);
  free(o.p);
  steno_model *api = NULL;
  CHECK_OK(steno_model_load(bin, test_params(), &api));
  CHECK(api && !strcmp(steno_model_architecture(api), "whisper"), "a .bin through steno_model_load");
  steno_model_free(api);
  unlink(bin);

  breakage cut = {.cut = 1000};
  fails(f, g, &cut, "truncated");
  breakage small = {.vocab = 50000};
  fails(f, g, &small, "not a Whisper model");
  breakage unknown = {.rename = "decoder.blocks.1.mlp.0.weight"};
  fails(f, g, &unknown, "decoder.mystery.weight");
  breakage twice = {.twice = "encoder.blocks.0.attn.key.weight"};
  fails(f, g, &twice, "encoder.blocks.0.attn.key.weight");
  breakage missing = {.skip = "decoder.blocks.0.cross_attn.value.bias"};
  fails(f, g, &missing, "dec.blocks.0.cross_attn.v.bias");
  whisper_free(g);
  gguf_close(f);
  return check_done();
}
