/* The short-name table. Slugs, quantizations and sizes are those of the model cards
 * in transcribe.cpp's docs/models/ (release 0.2.1): every slug is published as
 * handy-computer/<slug>-gguf with at least F16 and Q8_0 files. */
#include "registry.h"

#include <string.h>

static const registry_model models[] = {
    {"parakeet-v3", "parakeet-tdt-0.6b-v3", "740 MB", "NVIDIA Parakeet TDT 0.6B v3, 25 European languages"},
    {"parakeet-v2", "parakeet-tdt-0.6b-v2", "730 MB", "NVIDIA Parakeet TDT 0.6B v2, English"},
    {"parakeet-110m", "parakeet-tdt_ctc-110m", "135 MB", "Parakeet TDT-CTC 110M, English, small"},
    {"parakeet-1.1b", "parakeet-tdt-1.1b", "1.27 GB", "Parakeet TDT 1.1B, English"},
    {"parakeet-tdt_ctc-1.1b", "parakeet-tdt_ctc-1.1b", "1.27 GB", "Parakeet TDT-CTC 1.1B, English, local attention"},
    {"parakeet-ctc-0.6b", "parakeet-ctc-0.6b", "722 MB", "Parakeet CTC 0.6B, English"},
    {"parakeet-ctc-1.1b", "parakeet-ctc-1.1b", "1.26 GB", "Parakeet CTC 1.1B, English"},
    {"parakeet-rnnt-0.6b", "parakeet-rnnt-0.6b", "730 MB", "Parakeet RNN-T 0.6B, English"},
    {"parakeet-rnnt-1.1b", "parakeet-rnnt-1.1b", "1.27 GB", "Parakeet RNN-T 1.1B, English"},
    {"parakeet-unified", "parakeet-unified-en-0.6b", "731 MB", "Parakeet unified 0.6B, English, offline or buffered streaming"},
    {"parakeet-primeline", "parakeet-primeline", "740 MB", "Parakeet TDT 0.6B v3 fine-tuned for German"},
    {"nemotron-streaming", "nemotron-speech-streaming-en-0.6b", "696 MB", "NVIDIA Nemotron streaming 0.6B, English"},
    {"nemotron-3.5", "nemotron-3.5-asr-streaming-0.6b", "716 MB", "NVIDIA Nemotron 3.5 streaming 0.6B, multilingual with a language prompt"},
    {"gigaam-v3", "gigaam-v3-e2e-rnnt", "261 MB", "GigaAM v3 end-to-end RNN-T, Russian with punctuation"},
    {"gigaam-v3-e2e-ctc", "gigaam-v3-e2e-ctc", "260 MB", "GigaAM v3 end-to-end CTC, Russian with punctuation"},
    {"gigaam-v3-rnnt", "gigaam-v3-rnnt", "260 MB", "GigaAM v3 RNN-T, Russian, lower case"},
    {"gigaam-v3-ctc", "gigaam-v3-ctc", "259 MB", "GigaAM v3 CTC, Russian, lower case"},
    {"whisper-turbo", "whisper-large-v3-turbo", "845 MB", "OpenAI Whisper large-v3 turbo, 99 languages"},
    {"whisper-large-v3", "whisper-large-v3", "1.55 GB", "OpenAI Whisper large-v3, 99 languages"},
    {"whisper-large-v2", "whisper-large-v2", "1.55 GB", "OpenAI Whisper large-v2, 99 languages"},
    {"whisper-medium", "whisper-medium", "793 MB", "OpenAI Whisper medium, 99 languages"},
    {"whisper-medium.en", "whisper-medium.en", "793 MB", "OpenAI Whisper medium, English"},
    {"whisper-small", "whisper-small", "257 MB", "OpenAI Whisper small, 99 languages"},
    {"whisper-small.en", "whisper-small.en", "257 MB", "OpenAI Whisper small, English"},
    {"whisper-base", "whisper-base", "81 MB", "OpenAI Whisper base, 99 languages"},
    {"whisper-base.en", "whisper-base.en", "81 MB", "OpenAI Whisper base, English"},
    {"whisper-tiny", "whisper-tiny", "44 MB", "OpenAI Whisper tiny, 99 languages"},
    {"whisper-tiny.en", "whisper-tiny.en", "44 MB", "OpenAI Whisper tiny, English"},
    {"moonshine-base", "moonshine-base", "74 MB", "Useful Sensors Moonshine base, English"},
    {"moonshine-tiny", "moonshine-tiny", "34 MB", "Useful Sensors Moonshine tiny, English"},
    {"moonshine-streaming-tiny", "moonshine-streaming-tiny", "50 MB", "Useful Sensors Moonshine Streaming tiny, English"},
    {"moonshine-streaming-small", "moonshine-streaming-small", "199 MB", "Useful Sensors Moonshine Streaming small, English"},
    {"moonshine-streaming-medium", "moonshine-streaming-medium", "296 MB", "Useful Sensors Moonshine Streaming medium, English"},
    {"sortformer", "diar_streaming_sortformer_4spk-v2.1", "139 MB", "NVIDIA Streaming Sortformer 4spk v2.1: who speaks when, for run --diarize"},
};
enum { n_models = sizeof models / sizeof models[0] };

const registry_model *registry_find(const char *name) {
  for (int i = 0; i < n_models; i++)
    if (!strcmp(models[i].name, name) || !strcmp(models[i].slug, name)) return &models[i];
  return NULL;
}

/* Levenshtein distance with one row; names are short, longer input is cut. */
static int distance(const char *a, const char *b) {
  enum { max = 64 };
  int la = (int)strnlen(a, max), lb = (int)strnlen(b, max), row[max + 1];
  for (int j = 0; j <= lb; j++) row[j] = j;
  for (int i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = i;
    for (int j = 1; j <= lb; j++) {
      int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[lb];
}

const registry_model *registry_closest(const char *name) {
  const registry_model *best = &models[0];
  int best_d = distance(name, best->name);
  for (int i = 1; i < n_models; i++) {
    int d = distance(name, models[i].name);
    if (d < best_d) best = &models[i], best_d = d;
  }
  return best;
}

const registry_model *registry_by_repo(const char *repo) {
  size_t org = strlen(REGISTRY_ORG);
  if (strncmp(repo, REGISTRY_ORG "/", org + 1)) return NULL;
  const char *name = repo + org + 1;
  size_t n = strlen(name);
  if (n < 5 || strcmp(name + n - 5, "-gguf")) return NULL;
  for (int i = 0; i < n_models; i++)
    if (strlen(models[i].slug) == n - 5 && !strncmp(models[i].slug, name, n - 5)) return &models[i];
  return NULL;
}

void registry_print(FILE *f) {
  fprintf(f, "%-22s %8s  %s\n", "NAME", "Q8_0", "MODEL");
  for (int i = 0; i < n_models; i++)
    fprintf(f, "%-22s %8s  %s\n", models[i].name, models[i].size, models[i].about);
  fprintf(f, "\nNAME:QUANT picks another file (F16, Q6_K, Q5_K_M, Q4_K_M; F32 for most);\n"
             "ORG/REPO[:QUANT] or ORG/REPO/FILE.gguf names any GGUF repository on the hub.\n");
}
