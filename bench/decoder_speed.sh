#!/bin/sh
# Builds bench/decoder_speed.c against the decoder built twice (vectorized, and
# scalar with TRANSDUCER_SCALAR) with the project's flags (-O2), and runs it.
# Usage: bench/decoder_speed.sh [frames] [reps]
set -e
cd "$(dirname "$0")/.."
out=${TMPDIR:-/tmp}/steno_decoder_speed
mkdir -p "$out"
cc="${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror -Isrc -Iinclude"
$cc -c src/decode/transducer.c -o "$out/fast.o"
$cc -DTRANSDUCER_SCALAR -Dtransducer_greedy=transducer_greedy_scalar \
  -Dtransducer_max_steps=scalar_max_steps -Dtransducer_check_abort=scalar_check_abort -c src/decode/transducer.c -o "$out/scalar.o"
$cc bench/decoder_speed.c "$out/fast.o" "$out/scalar.o" src/decode/tokens.c src/base/error.c src/base/mem.c \
  src/base/pool.c -o "$out/decoder_speed" -lm -lpthread
"$out/decoder_speed" "$@"
