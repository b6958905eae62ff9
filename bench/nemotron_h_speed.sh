#!/bin/sh
# Builds the benchmarks against a built libsteno.a (bench/build_benches.sh) and runs
# nemotron_h_speed: Nemotron-H's kernels at Nemotron 3.5 Transcribe's shapes.
# Usage: BUILD=build-dir bench/nemotron_h_speed.sh [t] [reps] [experts]   (BUILD defaults to build)
set -e
cd "$(dirname "$0")/.."
build=${BUILD:-build}
bench/build_benches.sh "$build"
"$build/nemotron_h_speed" "$@"
