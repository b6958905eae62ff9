#!/usr/bin/env bash
# Batching through the CLI: `steno run MODEL a b c` on a Parakeet model runs the files
# through one steno_transcribe_batch (one padded encoder pass); each file's text and
# tokens (ids, times) must be what a run of that file alone gives, in the files' order,
# with an unreadable file among them named and the others still written (exit 1).
# `steno bench MODEL AUDIO --batch N` reports N copies per call, all texts equal.
# Models: the bundled CTC model when present (it reads espeak-ng), else the CTC fixture.
# (tests/cli_audio.sh checks several files' headers, JSON array and -o DIR.)
# Usage: tests/cli_batch.sh path/to/steno
set -u
steno=${1:?usage: cli_batch.sh path/to/steno}
src=${STENO_SOURCE_DIR:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

for tool in espeak-ng sox python3; do
  command -v $tool >/dev/null || { echo "cli_batch: $tool is missing (.ci/run installs it)" >&2; exit 1; }
done
m="$src/models/steno-en-tiny-ctc.gguf"
[ -f "$m" ] || m="$src/tests/fixtures/parakeet_ctc_tiny.gguf"
say() { espeak-ng -s "$2" -w "$tmp/raw.wav" "$1" && sox -D "$tmp/raw.wav" -r 16000 -c 1 -b 16 "$tmp/$3"; }
say "the quick brown fox jumps over the lazy dog" 160 a.wav
say "seven green bottles standing on the wall" 140 b.wav
sox "$tmp/a.wav" "$tmp/b.wav" "$tmp/a.wav" "$tmp/abc.wav" # longer than the others
: >"$tmp/broken.wav"

"$steno" run "$m" "$tmp/a.wav" "$tmp/abc.wav" "$tmp/b.wav" --json >"$tmp/all.json" 2>"$tmp/err"
if [ $? -eq 0 ]; then ok; else bad "three files: $(cat "$tmp/err")"; fi
for f in a abc b; do
  "$steno" run "$m" "$tmp/$f.wav" --json >"$tmp/$f.json" 2>>"$tmp/err" || bad "$f alone: $(cat "$tmp/err")"
done
# Each file's text and tokens as alone; the order kept; the words not empty.
if python3 - "$tmp" <<'EOF'
import json, sys
d = sys.argv[1]
all_ = json.load(open(f"{d}/all.json"))
names = ["a", "abc", "b"]
assert [x["audio"].rsplit("/", 1)[-1] for x in all_] == [n + ".wav" for n in names], "order"
for x, n in zip(all_, names):
    one = json.load(open(f"{d}/{n}.json"))
    key = lambda r: (r["text"], [(t["id"], t["start_ms"], t["end_ms"]) for t in r["tokens"]])
    assert key(x) == key(one), (n, x["text"], one["text"])
assert all(x["text"] for x in all_), "an empty text"
EOF
then ok; else bad "batched files differ from their runs alone"; fi

# An unreadable file among them: named, exit 1, the others written in order.
"$steno" run "$m" "$tmp/a.wav" "$tmp/broken.wav" "$tmp/b.wav" >"$tmp/two.txt" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q broken.wav "$tmp/err" && [ "$(grep -c '^==> .* <==$' "$tmp/two.txt")" -eq 2 ] &&
   [ "$(sed -n 2p "$tmp/two.txt")" = "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["text"])' "$tmp/a.json")" ]; then
  ok
else
  bad "a bad file among several: exit $rc, $(cat "$tmp/err") $(cat "$tmp/two.txt")"
fi

"$steno" bench "$m" "$tmp/a.wav" -n 1 --batch 3 >"$tmp/bench" 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q "3 copies per steno_transcribe_batch call" "$tmp/bench" &&
   grep -q "texts all equal" "$tmp/bench" && grep -q "realtime" "$tmp/bench" &&
   grep -q "^stages .*decoder [0-9.]* ms, outside them -\?[0-9.]* ms" "$tmp/bench"; then
  ok
else
  bad "bench --batch: $(cat "$tmp/err" "$tmp/bench")"
fi
"$steno" bench "$m" "$tmp/a.wav" --batch 0 >/dev/null 2>&1
if [ $? -eq 2 ]; then ok; else bad "--batch 0 accepted"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
