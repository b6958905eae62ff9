#!/bin/sh
# Builds the benchmarks against a built libsteno.a (bench/build_benches.sh) and runs row_kernels.
# Usage: BUILD=build-dir bench/row_kernels.sh [t] [reps]   (BUILD defaults to build)
set -e
cd "$(dirname "$0")/.."
build=${BUILD:-build}
bench/build_benches.sh "$build"
"$build/row_kernels" "$@"
