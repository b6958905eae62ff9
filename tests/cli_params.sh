#!/usr/bin/env bash
# The environment variables the CLI turns into steno_model_params
# (tools/steno/params.c; the library reads none of them): STENO_DEVICE by
# index and by name, an index out of range, STENO_FAST's words and a bad one,
# STENO_CACHE_DIR and STENO_PIPELINE_CACHE=0, STENO_THREADS.
# Usage: tests/cli_params.sh path/to/steno
set -u
steno=${1:?usage: cli_params.sh path/to/steno}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
want="hello world this is speech recognition on your own computer"

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# run NAME=VALUE...: steno run on the bundled clip with those variables; $rc, $tmp/out, $tmp/err.
run() {
  env "$@" "$steno" run models/hello.wav --quiet >"$tmp/out" 2>"$tmp/err"
  rc=$?
}
# expect_text WHAT: exit 0 and the clip's words.
expect_text() {
  if [ $rc -eq 0 ] && [ "$(cat "$tmp/out")" = "$want" ]; then ok; else bad "$1: exit $rc, '$(cat "$tmp/out")' $(cat "$tmp/err")"; fi
}
# expect_error WHAT TEXT: exit 1, nothing on stdout, TEXT in the message.
expect_error() {
  if [ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q -- "$2" "$tmp/err"; then ok; else bad "$1: exit $rc, stderr: $(cat "$tmp/err")"; fi
}

count=$("$steno" devices | grep -c '^[0-9]*: ')
first=$("$steno" devices | sed -n 's/^0: \(.*\) (.*)$/\1/p')
run STENO_DEVICE=0
expect_text "STENO_DEVICE=0"
run STENO_DEVICE="$(echo "${first:0:6}" | tr a-z A-Z)"
expect_text "STENO_DEVICE=part of the first device's name in capitals"
run STENO_DEVICE="$count"
expect_error "STENO_DEVICE=$count (one past the last)" "device $count: there"
run STENO_DEVICE="no device is called this"
expect_error "STENO_DEVICE=unknown name" "no device is called this"
# steno devices marks the device the variables choose, and refuses the same.
env STENO_DEVICE="$count" "$steno" devices >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "device $count: there" "$tmp/err"; then ok; else bad "steno devices, STENO_DEVICE=$count: exit $rc"; fi

for fast in 0 1 auto all timed; do
  run STENO_FAST=$fast
  expect_text "STENO_FAST=$fast"
done
run STENO_FAST=fastest
expect_error "STENO_FAST=fastest" "STENO_FAST=fastest: expected"

mkdir "$tmp/cache"
run STENO_CACHE_DIR="$tmp/cache/a" STENO_PIPELINE_CACHE=0
expect_text "STENO_PIPELINE_CACHE=0"
if ls "$tmp/cache/a"/probes-*.txt >/dev/null 2>&1 && ! ls "$tmp/cache/a"/pipelines-* >/dev/null 2>&1; then ok
else bad "STENO_CACHE_DIR with STENO_PIPELINE_CACHE=0: $(ls "$tmp/cache/a" 2>&1)"; fi
run STENO_CACHE_DIR="$tmp/cache/b" STENO_PROBE_CACHE=0
expect_text "STENO_PROBE_CACHE=0"
if ls "$tmp/cache/b"/pipelines-*.bin >/dev/null 2>&1 && ! ls "$tmp/cache/b"/probes-* >/dev/null 2>&1; then ok
else bad "STENO_CACHE_DIR with STENO_PROBE_CACHE=0: $(ls "$tmp/cache/b" 2>&1)"; fi

run STENO_THREADS=1
expect_text "STENO_THREADS=1"
run STENO_THREADS=lots
expect_error "STENO_THREADS=lots" "STENO_THREADS=lots: expected"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
