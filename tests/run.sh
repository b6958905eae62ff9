#!/usr/bin/env bash
# Builds steno twice — plain, and with AddressSanitizer + UndefinedBehaviorSanitizer —
# and runs the whole test suite on each, on Mesa's lavapipe (Vulkan on the CPU) unless
# STENO_TEST_GPU=1 asks for the machine's own GPU; then a quick third build with FFmpeg off
# runs test_audio alone.
# Last, tests/fuzz.sh runs every libFuzzer target (clang) for FUZZ_SECONDS (60) each.
#   bash tests/run.sh            all three builds, then the fuzzers
#   bash tests/run.sh plain      only the plain build (or: sanitize, wav-only, fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

if [ "${STENO_TEST_GPU:-0}" != 1 ]; then
  icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1 || true)
  if [ -z "$icd" ]; then
    echo "lavapipe is not installed: apt-get install mesa-vulkan-drivers" >&2
    exit 1
  fi
  # Only lavapipe: a stray driver on the machine cannot change the result.
  export VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd"
fi

run() { # name, cmake options...
  local dir="build-test-$1"
  shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j "$jobs" >/dev/null
  ctest --test-dir "$dir" --output-on-failure -j "$jobs"
}

which=${1:-all}
if [ "$which" = all ] || [ "$which" = plain ]; then
  echo "== plain build"
  run plain
fi
if [ "$which" = all ] || [ "$which" = sanitize ]; then
  echo "== ASan + UBSan build"
  run sanitize -DSTENO_SANITIZE=ON
fi
# FFmpeg off: the WAV-only reader, checked by test_audio and test_long (an hour read a block
# at a time; the rest does not depend on the reader).
if [ "$which" = all ] || [ "$which" = wav-only ]; then
  echo "== FFmpeg off (WAV-only reader): test_audio, test_long"
  cmake -S . -B build-test-wav-only -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTENO_FFMPEG=OFF >/dev/null
  cmake --build build-test-wav-only -j "$jobs" --target test_audio test_long >/dev/null
  ctest --test-dir build-test-wav-only --output-on-failure -R '^(test_audio|test_long)$'
fi
if [ "$which" = all ] || [ "$which" = fuzz ]; then
  echo "== fuzzers (clang, ASan + UBSan, ${FUZZ_SECONDS:-60} s each)"
  bash tests/fuzz.sh
fi
