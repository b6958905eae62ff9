#!/bin/sh
# Builds the benchmarks against a built libsteno.a (bench/build_benches.sh) and runs
# greedy_argmax: greedy's argmax on the GPU against reading the logits back, side by side.
# Usage: BUILD=build-dir bench/greedy_argmax.sh [tokens 32] [reps 9] [MODEL.gguf [KEYS TENSORS]]
set -e
cd "$(dirname "$0")/.."
build=${BUILD:-build}
bench/build_benches.sh "$build"
"$build/greedy_argmax" "$@"
