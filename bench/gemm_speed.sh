#!/bin/sh
# Builds bench/gemm_speed.c against a built libsteno.a and runs it.
# Usage: BUILD=build-dir bench/gemm_speed.sh [reps]   (BUILD defaults to build)
set -e
cd "$(dirname "$0")/.."
build=${BUILD:-build}
out=${TMPDIR:-/tmp}/steno_gemm_speed
${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror -Isrc -Iinclude -Itests bench/gemm_speed.c \
  tests/support/quant.c tests/support/gguf_write.c "$build/libsteno.a" -o "$out" -lvulkan -lpthread -lm -lz -lpcre2-8
"$out" "$@"
