/* transcribe: the smallest program on libsteno. Loads a model, transcribes
 * an audio file, prints each segment with its times.
 *   cc transcribe.c $(pkg-config --cflags --libs steno) -o transcribe
 *   ./transcribe MODEL.gguf AUDIO */
#include <stdio.h>

#include <steno.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.gguf AUDIO\n", argv[0]);
    return 2;
  }
  steno_model_params mp = steno_model_default_params(); /* any GPU, else the CPU */
  steno_model *model;
  if (steno_model_load(argv[1], &mp, &model)) {
    fprintf(stderr, "%s: %s\n", argv[1], steno_last_error());
    return 1;
  }
  float *pcm;
  size_t n;
  steno_result *r = NULL;
  int st = steno_audio_load(argv[2], &pcm, &n); /* 16 kHz mono float */
  if (!st) {
    st = steno_transcribe(model, pcm, n, NULL, &r);
    steno_audio_free(pcm);
  }
  if (st) fprintf(stderr, "%s: %s\n", argv[2], steno_last_error());
  for (size_t i = 0; r && i < steno_result_segment_count(r); i++) {
    steno_segment s = steno_result_segment(r, i);
    printf("[%7.2f -> %7.2f] %s\n", s.start_ms / 1e3, s.end_ms / 1e3, s.text);
  }
  steno_result_free(r);
  steno_model_free(model);
  return st ? 1 : 0;
}
