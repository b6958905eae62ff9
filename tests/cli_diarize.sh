#!/usr/bin/env bash
# `steno run --diarize` end to end with the tiny random-weight Sortformer fixture
# (plumbing only: random weights cannot diarize) and the tiny CTC model, on a
# two-voice clip made here with espeak-ng and, when present, the shared 2-speaker
# sample: text lines start [SPEAKER_N], JSON has speaker fields on segments and
# words and the turns, RTTM is well formed with times inside the file; on the
# clip made here also SRT/VTT cues carry the speaker and a diarizer alone gives
# the same turns; several files share one RTTM; misuse is exit 2.
# Usage: tests/cli_diarize.sh path/to/steno
set -u
steno=${1:?usage: cli_diarize.sh path/to/steno}
src=${STENO_SOURCE_DIR:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

for tool in espeak-ng sox python3; do
  command -v $tool >/dev/null || { echo "cli_diarize: $tool is missing (.ci/run installs it)" >&2; exit 1; }
done
espeak-ng -v en-us -w "$tmp/a.wav" "good morning, this is the first speaker." || exit 1
espeak-ng -v en-us+f3 -w "$tmp/b.wav" "and here a second voice answers." || exit 1
sox "$tmp/a.wav" "$tmp/b.wav" "$tmp/a.wav" -r 16000 -c 1 -b 16 "$tmp/two.wav" || exit 1

diar="$src/tests/fixtures/sortformer_tiny.gguf"
asr="$src/tests/fixtures/parakeet_ctc_tiny.gguf"
clips="$tmp/two.wav"
shared="$src/../shared/data/samples/sortformer-2spk-mix.wav"
[ -f "$shared" ] && clips="$clips $shared"

for clip in $clips; do
  name=$(basename "$clip")
  seconds=$(soxi -D "$clip")
  "$steno" run --diarize "$diar" "$asr" "$clip" --rttm "$tmp/out.rttm" >"$tmp/text" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 0 ] && [ -s "$tmp/text" ] && ! grep -qv '^\[SPEAKER_[1-4]\] ' "$tmp/text"; then ok
  else bad "$name text: exit $rc, $(head -3 "$tmp/text") $(cat "$tmp/err")"; fi

  if python3 - "$tmp/out.rttm" "$seconds" "${name%.wav}" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
end, file_id = float(sys.argv[2]), sys.argv[3]
assert lines, "no turns"
for l in lines:
    f = l.split()
    assert len(f) == 10 and f[0] == "SPEAKER" and f[1] == file_id and f[2] == "1", l
    assert f[5:7] == ["<NA>", "<NA>"] and f[8:10] == ["<NA>", "<NA>"], l
    assert f[7] in ("speaker_1", "speaker_2", "speaker_3", "speaker_4"), l
    start, dur = float(f[3]), float(f[4])
    assert 0 <= start and 0 < dur and start + dur <= end + 0.08, (l, end)
starts = [float(l.split()[3]) for l in lines]
assert starts == sorted(starts), "turns not in time order"
PY
  then ok; else bad "$name RTTM"; fi

  "$steno" run --diarize "$diar" "$asr" "$clip" --json >"$tmp/json" 2>"$tmp/err"
  if python3 - "$tmp/json" "$tmp/text" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
text = [l.split("] ", 1)[1] for l in open(sys.argv[2]).read().splitlines()]
assert r["turns"], "no turns"
for t in r["turns"]:
    assert t["speaker"] in (1, 2, 3, 4) and 0 <= t["start_ms"] < t["end_ms"], t
for kind in ("segments", "words"):
    assert r[kind], kind
    for x in r[kind]:
        assert x["speaker"] in (1, 2, 3, 4), (kind, x)
assert [s["text"] for s in r["segments"]] == text, "JSON segments differ from the text lines"
words = iter(r["words"])
for s in r["segments"]:  # each segment's words carry its speaker
    for w in words:
        if w["text"]:
            assert w["speaker"] == s["speaker"], (s, w)
        if w["end_ms"] >= s["end_ms"]:
            break
PY
  then ok; else bad "$name JSON: $(cat "$tmp/err")"; fi

  [ "$clip" = "$tmp/two.wav" ] || continue # the rest on the clip made here only (time)
  "$steno" run --diarize "$diar" "$asr" "$clip" --srt -o "$tmp/out.srt" 2>"$tmp/err" &&
    "$steno" run --diarize "$diar" "$asr" "$clip" --vtt -o "$tmp/out.vtt" 2>>"$tmp/err"
  if [ $? -eq 0 ] && python3 - "$tmp/out.srt" "$tmp/out.vtt" <<'PY'
import re, sys
srt = open(sys.argv[1]).read().strip().split("\n\n")
assert srt and srt[0], "no cues"
for i, cue in enumerate(srt, 1):
    lines = cue.split("\n")
    assert lines[0] == str(i) and re.fullmatch(r"\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}", lines[1]), cue
    assert re.match(r"\[SPEAKER_[1-4]\] \S", lines[2]), cue
vtt = open(sys.argv[2]).read()
assert vtt.startswith("WEBVTT\n\n"), "header"
cues = vtt[8:].strip().split("\n\n")
assert len(cues) == len(srt), (len(cues), len(srt))
for cue in cues:
    assert re.match(r"<v SPEAKER_[1-4]>\S", cue.split("\n")[1]), cue
PY
  then ok; else bad "$name subtitles: $(cat "$tmp/err")"; fi

  # The diarizer alone: its turns as text, JSON with turns and no words; the same RTTM.
  "$steno" run "$diar" "$clip" --rttm "$tmp/alone.rttm" >"$tmp/turns" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 0 ] && [ -s "$tmp/turns" ] && ! grep -Evq '^\[SPEAKER_[1-4]\] [0-9]+\.[0-9]{2} [0-9]+\.[0-9]{2}$' "$tmp/turns" &&
     cmp -s "$tmp/alone.rttm" "$tmp/out.rttm" && [ "$(wc -l <"$tmp/turns")" -eq "$(wc -l <"$tmp/out.rttm")" ]; then ok
  else bad "$name diarizer alone: exit $rc $(cat "$tmp/err")"; fi
done

# Several files: one RTTM with both file ids.
"$steno" run --diarize "$diar" "$asr" "$tmp/two.wav" "$src/models/hello.wav" --rttm "$tmp/both.rttm" >/dev/null 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q '^SPEAKER two ' "$tmp/both.rttm" && grep -q '^SPEAKER hello ' "$tmp/both.rttm"; then ok
else bad "two files in one RTTM: $(cat "$tmp/err")"; fi

# Misuse: exit 2 with a message, nothing written.
expect2() { # what, then the arguments
  local what=$1; shift
  "$steno" run "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && [ -s "$tmp/err" ]; then ok; else bad "$what: exit $rc $(cat "$tmp/err")"; fi
}
expect2 "an ASR model as the diarizer" --diarize "$asr" "$asr" "$tmp/two.wav"
expect2 "a diarizer with a diarizer" --diarize "$diar" "$diar" "$tmp/two.wav"
expect2 "--rttm without a diarizer" "$asr" "$tmp/two.wav" --rttm "$tmp/x.rttm"
expect2 "--diarize without a value" "$asr" "$tmp/two.wav" --diarize
[ ! -e "$tmp/x.rttm" ] && ok || bad "--rttm without a diarizer wrote a file"
# A diarizer that is not there: exit 1, before any work.
"$steno" run --diarize "$tmp/none.gguf" "$asr" "$tmp/two.wav" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q none.gguf "$tmp/err" && ok || bad "a missing diarizer: $(cat "$tmp/err")"

echo "cli_diarize: $passed passed, $failed failed"
[ $failed -eq 0 ]
