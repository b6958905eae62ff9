#!/usr/bin/env bash
# Builds a wheel of the binding with the build's libsteno.so inside it:
#   bash bindings/python/build_wheel.sh [BUILD_DIR] [OUT_DIR]
# (defaults: build, dist). The library is copied in for the wheel and removed
# again; the wheel runs on machines like this one (the same libc, with the
# Vulkan loader and FFmpeg's libraries installed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
out=$(mkdir -p "${2:-dist}" && cd "${2:-dist}" && pwd)
lib=$(readlink -f "$build/libsteno.so")
[ -f "$lib" ] || { echo "no libsteno.so in $build (cmake --build $build first)" >&2; exit 1; }
trap 'rm -f "$here/steno/libsteno.so"; rm -rf "$here/build" "$here"/*.egg-info' EXIT
cp "$lib" "$here/steno/libsteno.so"
python3 -m pip wheel --no-deps --no-build-isolation -w "$out" "$here"
