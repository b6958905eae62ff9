#!/usr/bin/env bash
# `steno run` end to end with the tiny Moonshine fixture on a clip made here with
# espeak-ng: a transcript line, JSON with one segment over the audio and the same
# text, SRT; Whisper's options refused for Moonshine (exit 2); a damaged file an
# error that names it (exit 1, nothing on stdout).
# Usage: tests/cli_moonshine.sh path/to/steno
set -u
steno=${1:?usage: cli_moonshine.sh path/to/steno}
src=${STENO_SOURCE_DIR:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

for tool in espeak-ng sox python3; do
  command -v $tool >/dev/null || { echo "cli_moonshine: $tool is missing (.ci/run installs it)" >&2; exit 1; }
done
espeak-ng -w "$tmp/raw.wav" "the quick brown fox jumps over the lazy dog" || exit 1
sox "$tmp/raw.wav" -r 16000 -c 1 -b 16 "$tmp/clip.wav" || exit 1
m="$src/tests/fixtures/moonshine_tiny.gguf"

"$steno" run "$m" "$tmp/clip.wav" >"$tmp/text" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/text")" -eq 1 ] && [ -s "$tmp/text" ]; then ok
else bad "text: exit $rc $(cat "$tmp/err")"; fi

"$steno" run "$m" "$tmp/clip.wav" --json >"$tmp/json" 2>"$tmp/err"
if python3 - "$tmp/json" "$tmp/text" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read().rstrip("\n")
assert r["text"] == text, ("JSON text differs", r["text"], text)
segs = r["segments"]
assert len(segs) >= 1 and segs[0]["start_ms"] == 0, segs
assert abs(segs[-1]["end_ms"] - r["duration"] * 1000) <= 1, (segs[-1], r["duration"])
assert " ".join(s["text"].strip() for s in segs) == text, segs
PY
then ok; else bad "--json: $(cat "$tmp/err")"; fi

"$steno" run "$m" "$tmp/clip.wav" --srt >"$tmp/srt" 2>"$tmp/err"
if [ $? -eq 0 ] && head -2 "$tmp/srt" | tail -1 | grep -q "^00:00:00,000 --> "; then ok
else bad "--srt: $(cat "$tmp/srt") $(cat "$tmp/err")"; fi

"$steno" run "$m" "$tmp/clip.wav" --translate >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q -- "moonshine" "$tmp/err"; then ok
else bad "--translate: exit $rc, $(cat "$tmp/err")"; fi

head -c 20000 "$m" >"$tmp/cut.gguf"
"$steno" run "$tmp/cut.gguf" "$tmp/clip.wav" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q "cut.gguf" "$tmp/err"; then ok
else bad "truncated model: exit $rc, $(cat "$tmp/err")"; fi

echo "cli_moonshine: $passed passed, $failed failed"
[ $failed -eq 0 ]
