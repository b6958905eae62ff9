#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz_*.c) with clang, ASan and UBSan in build-fuzz
# and runs each for FUZZ_SECONDS (default 60), as many at once as there are CPUs, from a
# seed corpus written now
# (tests/fuzz_seeds.py); any crash, leak, timeout or out-of-memory fails. What a target
# finds is left in build-fuzz/findings/<target>/ (crash-*, leak-*, ...).
#   bash tests/fuzz.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
jobs=$(nproc 2>/dev/null || echo 2)
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTENO_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$jobs" >/dev/null
if [ "${STENO_TEST_GPU:-0}" != 1 ]; then # fuzz_load uploads to lavapipe, as the tests do
  icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1 || true)
  [ -n "$icd" ] && export VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd"
fi
lvp=$(ls /usr/lib/*/libvulkan_lvp.so /usr/lib64/libvulkan_lvp.so 2>/dev/null | head -n 1 || true)
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
python3 tests/fuzz_seeds.py "$seeds" tests/fixtures
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(cd build-fuzz/tests && ls fuzz_* | grep -v '\.' ))
# One target: its line on standard output (and the first error on standard error where it
# fails), its status in $seeds/$t.rc.
fuzz_one() {
  local t=$1 out=build-fuzz/findings/$1
  rm -rf "$out" && mkdir -p "$out" "$seeds/$t"
  # Leaks are checked after every input. Mesa's lavapipe keeps allocations until exit
  # (some in libraries it unloads, so no suppression can name them): the one check at
  # exit is off, never the per-input ones that catch steno's own leaks. It also loses a
  # few small blocks now and then while compiling a kernel (fuzz_load's forward passes):
  # the driver is preloaded, as the sanitize build's tests do, so that tests/lsan.supp
  # can name it. ASan's quarantine is 32 MB, not 256: lavapipe's many small page-aligned
  # allocations each pin whole pages while quarantined, which the quarantine's count of
  # requested bytes does not see (test_long's and cli_serve's finding); a fuzz_load run
  # here once reached 4.4 GB of resident memory with 248 MB quarantined in 401 606 blocks
  # and 362 MB live (the -rss_limit_mb below failed it), where runs of the same minute
  # peak at 1.4-1.8 GB.
  if LD_PRELOAD="$lvp" LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
    ASAN_OPTIONS=detect_leaks=1:leak_check_at_exit=0:verify_asan_link_order=0:quarantine_size_mb=32 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    build-fuzz/tests/$t -max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 \
    -artifact_prefix="$out/" -print_final_stats=1 "$seeds/$t" >"$out/log" 2>&1; then
    echo "$t: $(grep -o 'Done [0-9]* runs' "$out/log" || true), clean"
    echo 0 >"$seeds/$t.rc"
  else
    echo "$t: FAILED (build-fuzz/findings/$t)" >&2
    grep -A25 -m1 -E '^==[0-9]+==ERROR|SUMMARY|deadly signal|timeout' "$out/log" >&2 || tail -30 "$out/log" >&2
    echo 1 >"$seeds/$t.rc"
  fi
}
# As many targets at once as there are CPUs (each fuzzes on one), their reports in order.
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_one "$t" >"$seeds/$t.report" 2>&1 &
done
wait || true
failed=0
for t in "${targets[@]}"; do
  cat "$seeds/$t.report"
  [ "$(cat "$seeds/$t.rc" 2>/dev/null)" = 0 ] || failed=1
done
exit $failed
