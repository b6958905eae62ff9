/* The Nemotron-H language model (transformers `nemotron_h`), the decoder of
 * Nemotron 3.5 Transcribe: token embedding (or given embeddings, e.g. audio),
 * layers of the hybrid pattern (Mamba-2, attention, MLP, MoE; nn/hybrid.h),
 * final RMSNorm, lm head; a prompt in one pass, then one token at a time
 * against the layers' states, greedy. Keys and tensors as
 * docs/nemotron-transcribe-gguf.md §7, under a key prefix and a tensor prefix
 * (the transcribe file: "nemotron3_5_transcribe.lm." and "lm."). */
#ifndef STENO_MODELS_NEMOTRON_H_H
#define STENO_MODELS_NEMOTRON_H_H

#include "gpu/gpu.h"
#include "io/gguf.h"
#include "nn/hybrid.h"

typedef enum { NH_MAMBA, NH_ATTENTION, NH_MLP, NH_MOE } nh_kind;

typedef struct {
  hybrid_dims d;
  uint32_t vocab, layers, max_pos;
  uint32_t wide;      /* the widest projection row of any block */
  int eos;            /* eos_token_id (the first of a list), −1: none */
  nh_kind *kind;      /* [layers] */
  gpu_buffer **norm;  /* [layers] pre-norm weights [d] */
  mamba2_block *mamba;
  gqa_block *attn;
  mlp_block *mlp;     /* MLP and MoE layers */
  gpu_buffer *norm_f; /* [d] */
  gpu_linear embed;   /* [vocab][d] rows for gpu_embed */
  gpu_linear head;    /* lm_head (the embedding itself where tied) */
  bool tied;
  gpu_device *dev;
} nemotron_h;

/* One sequence's state: the layers' caches, activations, the position. */
typedef struct {
  const nemotron_h *m;
  gpu_rec *rec;
  hybrid_scratch s;
  hybrid_cache *cache; /* [layers] */
  uint32_t ctx, pos;
  gpu_buffer *logits;  /* [logit_rows][head width] */
  uint32_t logit_rows;
  gpu_buffer *id, *id_scratch; /* greedy: the last row's argmax (host-visible), its split */
  int (*abort)(void *user); /* asked before each generated token (NULL: never) */
  void *abort_user;
} nemotron_h_session;

int nemotron_h_load(gpu_device *dev, const gguf_file *f, const char *keys, const char *tensors,
                    nemotron_h **out);
void nemotron_h_free(nemotron_h *m);

/* A session with room for ctx tokens (attention caches in f32). */
int nemotron_h_session_new(const nemotron_h *m, uint32_t ctx, nemotron_h_session **out);
/* The same with the attention caches in f16 where kv_f16 (half the memory). */
int nemotron_h_session_new_kv(const nemotron_h *m, uint32_t ctx, bool kv_f16,
                              nemotron_h_session **out);
void nemotron_h_session_free(nemotron_h_session *s);

/* Back to an empty sequence. */
static inline void nemotron_h_reset(nemotron_h_session *s) { s->pos = 0; }

/* Feeds n rows at the session's position and advances it: row i is token
 * ids[i], or embeds[i·d..] where ids is NULL or ids[i] < 0. logits (if not
 * NULL) gets the last row's [vocab] logits, or every row's ([n][vocab]) with
 * all_rows. */
int nemotron_h_feed(nemotron_h_session *s, const int *ids, const float *embeds, uint32_t n,
                    float *logits, bool all_rows);

/* The residual stream [n][d] after the first `layers` layers over n tokens
 * (for tests; the session's state moves on as in nemotron_h_feed). */
int nemotron_h_hidden(nemotron_h_session *s, const int *ids, uint32_t n, uint32_t layers,
                      float *hidden);

/* Greedy decoding after a prompt (as nemotron_h_feed's rows): up to max_new
 * tokens into out (*n_out of them), stopping after one of stop[0..n_stop). */
int nemotron_h_greedy(nemotron_h_session *s, const int *ids, const float *embeds, uint32_t n,
                      uint32_t max_new, const int *stop, int n_stop, int *out, uint32_t *n_out);

#endif
