#!/bin/sh
# Builds bench/row_kernels.c against a built libsteno.a and runs it.
# Usage: BUILD=build-dir bench/row_kernels.sh [t] [reps]   (BUILD defaults to build)
set -e
cd "$(dirname "$0")/.."
build=${BUILD:-build}
out=${TMPDIR:-/tmp}/steno_row_kernels
${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror -Isrc -Iinclude bench/row_kernels.c \
  "$build/libsteno.a" -o "$out" -lvulkan -lpthread -lm -lz -lpcre2-8
"$out" "$@"
