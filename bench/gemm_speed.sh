#!/bin/sh
# Builds the benchmarks against a built libsteno.a (bench/build_benches.sh) and runs gemm_speed.
# Usage: BUILD=build-dir bench/gemm_speed.sh [reps]   (BUILD defaults to build)
set -e
cd "$(dirname "$0")/.."
build=${BUILD:-build}
bench/build_benches.sh "$build"
"$build/gemm_speed" "$@"
