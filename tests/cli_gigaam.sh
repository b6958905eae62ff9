#!/usr/bin/env bash
# `steno run` end to end with the four tiny GigaAM fixtures (CTC, RNN-T, e2e CTC,
# e2e RNN-T) on a clip made here with espeak-ng: exit 0 and one line of text;
# JSON whose text is its tokens' pieces joined with one leading space removed
# (GigaAM's rule), every token 40 ms long on a 40 ms grid, times in order, words
# and segments inside the audio; and the transducer searches on the CPU and the
# GPU giving the same JSON.
# Usage: tests/cli_gigaam.sh path/to/steno
set -u
steno=${1:?usage: cli_gigaam.sh path/to/steno}
src=${STENO_SOURCE_DIR:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

for tool in espeak-ng sox python3; do
  command -v $tool >/dev/null || { echo "cli_gigaam: $tool is missing (.ci/run installs it)" >&2; exit 1; }
done
espeak-ng -v ru -w "$tmp/raw.wav" "привет мир, как дела" || exit 1
sox "$tmp/raw.wav" -r 16000 -c 1 -b 16 "$tmp/clip.wav" || exit 1

for model in gigaam_ctc_tiny gigaam_rnnt_tiny gigaam_e2e_ctc_tiny gigaam_e2e_rnnt_tiny; do
  m="$src/tests/fixtures/$model.gguf"
  "$steno" run "$m" "$tmp/clip.wav" >"$tmp/text" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/text")" -eq 1 ]; then ok; else bad "$model text: exit $rc $(cat "$tmp/err")"; fi

  # the GPU search even on a CPU device (lavapipe's default is the host's)
  STENO_DECODER=gpu "$steno" run "$m" "$tmp/clip.wav" --json >"$tmp/json" 2>"$tmp/err"
  if python3 - "$tmp/json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
toks = r["tokens"]
assert toks, "no tokens: the fixtures decode something on any speech"
joined = "".join(t["text"] for t in toks)
assert r["text"] == (joined[1:] if joined.startswith(" ") else joined), (r["text"], joined)
last = 0
for t in toks:
    assert t["start_ms"] % 40 == 0 and t["end_ms"] == t["start_ms"] + 40, t
    assert t["start_ms"] >= last, ("times go back", t)
    last = t["start_ms"]
for kind in ("words", "segments"):
    for x in r[kind]:
        assert 0 <= x["start_ms"] <= x["end_ms"] <= r["duration"] * 1000 + 40, (kind, x)
PY
  then ok; else bad "$model --json: $(cat "$tmp/err")"; fi

  STENO_DECODER=cpu "$steno" run "$m" "$tmp/clip.wav" --json >"$tmp/cpu.json" 2>"$tmp/err"
  if python3 - "$tmp/json" "$tmp/cpu.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda r: (r["text"], [(t["id"], t["start_ms"]) for t in r["tokens"]])
assert key(a) == key(b), "the CPU and GPU searches differ"
PY
  then ok; else bad "$model STENO_DECODER=cpu: $(cat "$tmp/err")"; fi
done

echo "cli_gigaam: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
