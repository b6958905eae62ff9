#!/usr/bin/env bash
# `steno run --prompt` with the tiny Nemotron 3.5 Transcribe fixture on a sweep
# made here with sox (random weights: the text is noise, but a given one): the default request gives a transcript; --prompt TEXT puts
# the user's request in its place and changes the output; --language stays
# Whisper's (exit 2); an instruction that is not UTF-8 or holds <|audio|> is an
# error that says so (exit 1, nothing on stdout).
# Usage: tests/cli_nemotron_transcribe.sh path/to/steno
set -u
steno=${1:?usage: cli_nemotron_transcribe.sh path/to/steno}
src=${STENO_SOURCE_DIR:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

command -v sox >/dev/null || { echo "cli_nemotron_transcribe: sox is missing (.ci/run installs it)" >&2; exit 1; }
sox -n -r 16000 -c 1 -b 16 "$tmp/clip.wav" synth 3 sine 220-1200 tremolo 3 80 || exit 1
m="$src/tests/fixtures/nemotron_transcribe_tiny.gguf"

"$steno" run "$m" "$tmp/clip.wav" >"$tmp/default" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(wc -c <"$tmp/default")" -gt 1 ]; then ok
else bad "default request: exit $rc $(cat "$tmp/err")"; fi

"$steno" run "$m" "$tmp/clip.wav" --prompt "Say who speaks: Zoë, Øyvind (42)." >"$tmp/asked" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(wc -c <"$tmp/asked")" -gt 1 ]; then ok
else bad "--prompt: exit $rc $(cat "$tmp/err")"; fi
if ! cmp -s "$tmp/default" "$tmp/asked"; then ok
else bad "--prompt did not change the output: $(cat "$tmp/asked")"; fi

"$steno" run "$m" "$tmp/clip.wav" --prompt "Say who speaks: Zoë, Øyvind (42)." >"$tmp/again" 2>"$tmp/err"
if cmp -s "$tmp/asked" "$tmp/again"; then ok
else bad "--prompt twice: different outputs"; fi

"$steno" run "$m" "$tmp/clip.wav" --language en >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q -- "--language" "$tmp/err"; then ok
else bad "--language: exit $rc, $(cat "$tmp/err")"; fi

"$steno" run "$m" "$tmp/clip.wav" --prompt $'caf\xc3 \xff' >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q "UTF-8" "$tmp/err"; then ok
else bad "--prompt not UTF-8: exit $rc, $(cat "$tmp/err")"; fi

"$steno" run "$m" "$tmp/clip.wav" --prompt "one <|audio|> too many" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q "audio token" "$tmp/err"; then ok
else bad "--prompt with <|audio|>: exit $rc, $(cat "$tmp/err")"; fi

echo "cli_nemotron_transcribe: $passed passed, $failed failed"
[ $failed -eq 0 ]
