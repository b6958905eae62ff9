#!/usr/bin/env bash
# Runs already-built test programs (a build dir made elsewhere, e.g. with
# -DSTENO_FFMPEG=OFF for a machine without FFmpeg) on this machine's GPU, and
# prints one line per program: name, exit status, its last line.
#   bash tests/run_prebuilt.sh BUILD_DIR [LOG]
set -u
build=${1:?usage: run_prebuilt.sh BUILD_DIR [LOG]}
log=${2:-/dev/null}
export STENO_SOURCE_DIR=${STENO_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
failed=0 passed=0
for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  out=$(timeout 300 "$t" 2>&1)
  rc=$?
  printf '== %s (exit %d)\n%s\n' "$name" $rc "$out" >>"$log"
  printf '%-22s exit %d  %s\n' "$name" $rc "$(printf '%s\n' "$out" | tail -n 1)"
  if [ $rc -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
