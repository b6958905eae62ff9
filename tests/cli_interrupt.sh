#!/usr/bin/env bash
# SIGINT and SIGTERM stop `steno run` inside a long transducer search, within a
# few seconds, with exit status 128 + the signal and no -o file (not even a
# partial one). The model (tests/fixtures/parakeet_tdt_endless_tiny.gguf, made by
# scripts/dump_parakeet.py) never emits blank and allows 100 symbols per frame,
# so decoding a 26 s clip takes 100 · 332 steps: about 15 s on lavapipe, far
# longer than the 5 s allowed here, so only the search's own polling of the
# abort callback can meet the limit. The search is the GPU's (STENO_DECODER=gpu):
# on lavapipe the default is the host's, which ends it in under 2 s
# (test_transducer_gpu checks the host search's polling).
# Usage: tests/cli_interrupt.sh path/to/steno
set -u
steno=${1:?usage: cli_interrupt.sh path/to/steno}
src=${STENO_SOURCE_DIR:-.}
model="$src/tests/fixtures/parakeet_tdt_endless_tiny.gguf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

for tool in espeak-ng sox; do
  command -v $tool >/dev/null || { echo "cli_interrupt: $tool is missing (.ci/run installs it)" >&2; exit 1; }
done
espeak-ng -w "$tmp/raw.wav" "the quick brown fox jumps over the lazy dog. it is a test." || exit 1
sox "$tmp/raw.wav" -r 16000 -c 1 -b 16 "$tmp/long.wav" repeat 7 || exit 1

# Sends `sig` once the search is under way; the run must end within 5 s.
interrupt() {
  local sig=$1 want=$2
  mkdir "$tmp/$sig"
  STENO_DECODER=gpu "$steno" run "$model" "$tmp/long.wav" -o "$tmp/$sig/out.txt" 2>"$tmp/$sig/err" &
  local pid=$!
  sleep 2
  kill -s "$sig" $pid
  local waited=0
  while kill -0 $pid 2>/dev/null && [ $waited -lt 50 ]; do sleep 0.1; waited=$((waited + 1)); done
  if kill -0 $pid 2>/dev/null; then
    kill -9 $pid
    wait $pid
    bad "SIG$sig: still running 5 s later"
    return
  fi
  wait $pid
  local rc=$?
  if [ $rc -eq "$want" ]; then ok; else bad "SIG$sig: exit $rc, want $want ($(cat "$tmp/$sig/err"))"; fi
  if grep -q "interrupted" "$tmp/$sig/err"; then ok; else bad "SIG$sig: no message ($(cat "$tmp/$sig/err"))"; fi
  if [ -z "$(ls -A "$tmp/$sig" | grep -v '^err$')" ]; then ok; else bad "SIG$sig: left $(ls -A "$tmp/$sig")"; fi
}

interrupt INT 130
interrupt TERM 143

echo "cli_interrupt: $passed passed, $failed failed"
[ $failed -eq 0 ]
