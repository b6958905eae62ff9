#!/bin/sh
# Compiles the benchmarks (bench/gemm_speed.c, bench/gemm_tc_sweep.c, bench/attention_speed.c, bench/row_kernels.c, bench/mel_speed.c,
# bench/nemotron_h_speed.c, bench/nemotron_transcribe_speed.c, bench/greedy_argmax.c,
# bench/whisper_token.c, bench/host_speed.c)
# against a built libsteno.a into that build dir, to run there or elsewhere;
# bench/cm2_gemm.c on its own, and gemm_cm2's variants for its sweep
# (gpu_run.sh's cm2 step) assembled into BUILD_DIR/cm2v/uUcCaA.spv (UNROLL,
# CLAMP, ALIGN: src/gpu/kernels/gemm_cm2.sh; needs spirv-as).
#   bench/build_benches.sh BUILD_DIR
set -e
build=${1:?usage: build_benches.sh BUILD_DIR}
cd "$(dirname "$0")/.."
# A libsteno.a built with FFmpeg (the default) needs its libraries too.
av=
if grep -q '^STENO_FFMPEG:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  av=$(pkg-config --libs libavformat libavcodec libswresample libavutil)
fi
for b in gemm_speed gemm_tc_sweep attention_speed row_kernels mel_speed nemotron_h_speed greedy_argmax nemotron_transcribe_speed whisper_token host_speed; do
  ${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror -Isrc -Iinclude -Itests "bench/$b.c" \
    tests/support/quant.c tests/support/gguf_write.c tests/support/plain_scans.c "$build/libsteno.a" -o "$build/$b" \
    $av -lvulkan -lpthread -lm -lz -lpcre2-8
done
${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror bench/cm2_gemm.c -o "$build/cm2_gemm" -lvulkan -lm
mkdir -p "$build/cm2v"
for v in "4 1 0" "4 0 1" "8 0 1" "4 1 1"; do
  set -- $v
  sh src/gpu/kernels/gemm_cm2.sh "$build/cm2v/u$1c$2a$3.spv" "$1" "$2" "$3"
done
