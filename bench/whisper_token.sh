#!/bin/sh
# Builds the benchmarks against a built libsteno.a (bench/build_benches.sh) and runs
# whisper_token: where a Whisper decoder token's host time goes, before and after, side by side.
# Usage: BUILD=build-dir bench/whisper_token.sh [tokens 32] [reps 9] [MODEL.gguf]
set -e
cd "$(dirname "$0")/.."
build=${BUILD:-build}
bench/build_benches.sh "$build"
"$build/whisper_token" "$@"
