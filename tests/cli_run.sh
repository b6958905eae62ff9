#!/usr/bin/env bash
# `steno run` end to end with the tiny CTC and TDT fixtures on a clip made here
# with espeak-ng: text, JSON (valid, with times in order), SRT and VTT (well
# formed); and the error paths, each exit 1 with a message and nothing on stdout.
# Usage: tests/cli_run.sh path/to/steno
set -u
steno=${1:?usage: cli_run.sh path/to/steno}
src=${STENO_SOURCE_DIR:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

for tool in espeak-ng sox python3; do
  command -v $tool >/dev/null || { echo "cli_run: $tool is missing (.ci/run installs it)" >&2; exit 1; }
done
espeak-ng -w "$tmp/raw.wav" "the quick brown fox jumps over the lazy dog. it is a test." || exit 1
sox "$tmp/raw.wav" -r 16000 -c 1 -b 16 "$tmp/clip.wav" || exit 1
sox "$tmp/raw.wav" -r 16000 -c 2 -e float -b 32 "$tmp/stereo.wav" || exit 1
sox -n -r 16000 -c 1 -b 16 "$tmp/empty.wav" trim 0 0 || exit 1

for model in parakeet_ctc_tiny parakeet_tdt_tiny; do
  m="$src/tests/fixtures/$model.gguf"
  "$steno" run "$m" "$tmp/clip.wav" >"$tmp/text" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/text")" -eq 1 ]; then ok; else bad "$model text: exit $rc $(cat "$tmp/err")"; fi

  "$steno" run "$m" "$tmp/clip.wav" --json >"$tmp/json" 2>"$tmp/err"
  if python3 - "$tmp/json" "$tmp/text" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read().rstrip("\n")
assert r["text"] == text, "JSON text differs from the text output"
assert abs(r["duration"] - 4.0) < 2.0, r["duration"]
for kind in ("segments", "words", "tokens"):
    last = 0
    for x in r[kind]:
        assert 0 <= x["start_ms"] <= x["end_ms"] <= r["duration"] * 1000 + 80, (kind, x)
        assert x["start_ms"] >= last, (kind, "times go back", x)
        last = x["start_ms"]
assert "".join(t["text"] for t in r["tokens"]).replace("\u2581", " ").strip().split() == text.split() or not text
PY
  then ok; else bad "$model --json: $(cat "$tmp/err")"; fi

  for fmt in srt vtt; do
    "$steno" run "$m" "$tmp/clip.wav" --$fmt >"$tmp/sub" 2>"$tmp/err"
    if python3 - "$tmp/sub" "$fmt" <<'PY'
import re, sys
s, fmt = open(sys.argv[1]).read(), sys.argv[2]
sep = "," if fmt == "srt" else "."
if fmt == "vtt":
    assert s.startswith("WEBVTT\n\n"), "no WEBVTT header"
    s = s[len("WEBVTT\n\n"):]
cues = [c for c in s.split("\n\n") if c.strip()]
ts = r"(\d\d):(\d\d):(\d\d)" + re.escape(sep) + r"(\d\d\d)"
ms = lambda m: ((int(m[0]) * 60 + int(m[1])) * 60 + int(m[2])) * 1000 + int(m[3])
last = 0
for i, c in enumerate(cues, 1):
    lines = c.split("\n")
    if fmt == "srt":
        assert lines[0] == str(i), ("cue number", lines[0])
        lines = lines[1:]
    m = re.fullmatch(ts + " --> " + ts, lines[0])
    assert m, ("timing line", lines[0])
    a, b = ms(m.groups()[:4]), ms(m.groups()[4:])
    assert last <= a < b, ("cue times", a, b)
    assert all(l.strip() for l in lines[1:]) and len(lines) > 1, "empty cue text"
    last = a
PY
    then ok; else bad "$model --$fmt: $(cat "$tmp/err")"; fi
  done
done

m="$src/tests/fixtures/parakeet_ctc_tiny.gguf"
# Stereo float WAV: downmixed, same length.
if "$steno" run "$m" "$tmp/stereo.wav" >/dev/null 2>"$tmp/err"; then ok; else bad "stereo float: $(cat "$tmp/err")"; fi
# An empty recording: an empty transcript, not an error.
"$steno" run "$m" "$tmp/empty.wav" >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && [ "$(cat "$tmp/out")" = "" ]; then ok; else bad "empty wav: $(cat "$tmp/err")"; fi

# Any rate: 22050 Hz is resampled, not refused.
sox "$tmp/raw.wav" -r 22050 "$tmp/r22.wav"
if "$steno" run "$m" "$tmp/r22.wav" >/dev/null 2>"$tmp/err"; then ok; else bad "22050 Hz: $(cat "$tmp/err")"; fi

# Errors: exit 1, a message, nothing on stdout.
head -c 30 "$tmp/clip.wav" >"$tmp/truncated.wav"
printf 'RIFF\0\0\0\0WAVEjunk' >"$tmp/nofmt.wav"
head -c 5000 "$m" >"$tmp/truncated.gguf"
expect_error() { # what, expected word, args...
  local what=$1 word=$2
  shift 2
  "$steno" run "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && grep -qi -- "$word" "$tmp/err"; then ok
  else bad "$what: exit $rc, stderr: $(cat "$tmp/err")"; fi
}
expect_error "missing audio" "cannot open" "$m" "$tmp/none.wav"
expect_error "truncated wav" "wav" "$m" "$tmp/truncated.wav"
expect_error "wav without fmt" "fmt" "$m" "$tmp/nofmt.wav"
expect_error "truncated model" "truncated.gguf" "$tmp/truncated.gguf" "$tmp/clip.wav"
# A .gguf name is always taken for the model (a WAV first is an input for the default model).
cp "$tmp/clip.wav" "$tmp/notmodel.gguf"
expect_error "not a model" "gguf" "$tmp/notmodel.gguf" "$tmp/clip.wav"
expect_error "reference file" "architecture" "$src/tests/fixtures/parakeet_ctc_tiny.ref.gguf" "$tmp/clip.wav"
"$steno" run "$m" >/dev/null 2>&1
if [ $? -eq 2 ]; then ok; else bad "missing argument: not a usage error"; fi

# Options that do nothing for the model's family are errors (exit 2), as are two output
# formats; --language auto is detection; JSON gives the language (Whisper) or null.
for opt in "--language en" "--translate" "--prompt Hello"; do
  "$steno" run "$m" "$tmp/clip.wav" $opt >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q -- "${opt%% *} is for Whisper models; .* is a parakeet model" "$tmp/err"
  then ok; else bad "$opt with Parakeet: exit $rc, $(cat "$tmp/err")"; fi
done
"$steno" run "$m" "$tmp/clip.wav" --json --srt >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q -- "--srt: one output format at a time" "$tmp/err"; then ok
else bad "--json --srt: $(cat "$tmp/err")"; fi
w="$src/tests/fixtures/whisper_tiny_ml.gguf"
for lang in "" "--language auto" "--language de"; do
  "$steno" run "$w" "$tmp/clip.wav" --json $lang >"$tmp/lang${lang##* }.json" 2>"$tmp/err" || bad "whisper $lang: $(cat "$tmp/err")"
done
"$steno" run "$src/tests/fixtures/whisper_tiny_en.gguf" "$tmp/clip.wav" --json >"$tmp/en.json" 2>"$tmp/err"
"$steno" run "$m" "$tmp/clip.wav" --json >"$tmp/parakeet.json" 2>"$tmp/err"
if python3 - "$tmp" <<'PY'; then ok; else bad "JSON language"; fi
import json, sys
r = lambda name: json.load(open(sys.argv[1] + "/" + name))
detected = r("lang.json")["language"]
assert detected and len(detected) >= 2, detected
assert r("langauto.json")["language"] == detected, "--language auto is not detection"
assert r("langauto.json")["text"] == r("lang.json")["text"]
assert r("langde.json")["language"] == "de"
assert r("en.json")["language"] == "en", "an English-only model speaks en"
assert r("parakeet.json")["language"] is None
PY

# The first operand is the model when it looks like one (.gguf, .bin, or a model's magic):
# a whisper.cpp .bin (written from the Whisper fixture by test_whisper_bin) loads as one,
# by name or by magic alone; a broken, missing or folder model is an error about it, never
# a run of the default model over the other files.
writer=${STENO_BINARY_DIR:-build}/tests/test_whisper_bin
if "$writer" --write "$tmp/tiny.bin" >/dev/null 2>"$tmp/err"; then
  cp "$tmp/tiny.bin" "$tmp/tiny-model.dat"
  for bin in tiny.bin tiny-model.dat; do
    "$steno" run "$tmp/$bin" "$tmp/clip.wav" --json >"$tmp/json" 2>"$tmp/err"
    if python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["architecture"] == "whisper"' "$tmp/json"
    then ok; else bad "$bin as the model: $(cat "$tmp/err")"; fi
  done
else bad "$writer --write: $(cat "$tmp/err")"; fi
cp "$tmp/clip.wav" "$tmp/broken.bin"
expect_error "broken .bin" "broken.bin:" "$tmp/broken.bin" "$tmp/clip.wav"
grep -q "default model\|FFmpeg" "$tmp/err" && bad "broken .bin: taken for audio: $(cat "$tmp/err")" || ok
expect_error "missing .gguf" "missing.gguf: .*no such file" "$tmp/missing.gguf" "$tmp/clip.wav"
expect_error "missing .bin" "missing.bin.*no such file" "$tmp/missing.bin" "$tmp/clip.wav"
mkdir "$tmp/folder.gguf"
expect_error "folder as the model" "folder.gguf is a folder" "$tmp/folder.gguf" "$tmp/clip.wav"
expect_error "folder as the model" "$tmp is a folder" "$tmp" "$tmp/clip.wav"

# A vocabulary from a file is data: with the CTC fixture's pieces rewritten to escape
# sequences, BEL and bytes that are not UTF-8 (test_text --write-vocab), no control byte
# reaches the text, SRT or VTT, all of it is valid UTF-8 (U+FFFD in place of the bad
# bytes), and the JSON parses. So does JSON naming an audio file whose name is not UTF-8.
if "${STENO_BINARY_DIR:-build}/tests/test_text" --write-vocab "$m" "$tmp/hostile.gguf" >/dev/null 2>"$tmp/err"; then
  for fmt in text json srt vtt; do
    "$steno" run "$tmp/hostile.gguf" "$tmp/clip.wav" $([ $fmt = text ] || echo --$fmt) >"$tmp/out" 2>"$tmp/err"
    if [ $? -eq 0 ] && python3 - "$tmp/out" $fmt <<'PY'
import json, re, sys
raw = open(sys.argv[1], "rb").read()
s = raw.decode("utf-8")  # strict: fails on invalid UTF-8
assert "\ufffd" in s, "the hostile pieces were not emitted: nothing tested"
assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", s), "a control character"
if sys.argv[2] == "json":
    r = json.loads(s)
    for x in r["tokens"] + r["words"] + r["segments"]:
        assert not re.search("[\x00-\x1f\x7f-\x9f]", x["text"]), x
PY
    then ok; else bad "hostile vocabulary, $fmt: $(cat "$tmp/err")"; fi
  done
else bad "test_text --write-vocab: $(cat "$tmp/err")"; fi
odd=$(printf "$tmp/odd-\\377\\033[31m.wav")
cp "$tmp/clip.wav" "$odd"
"$steno" run "$m" "$odd" --json >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && python3 -c 'import json, sys; r = json.loads(open(sys.argv[1], "rb").read().decode("utf-8")); assert r["audio"].endswith("odd-\ufffd\x1b[31m.wav"), r["audio"]' "$tmp/out"
then ok; else bad "JSON with a file name that is not UTF-8: $(cat "$tmp/err")"; fi

# -o PATH never replaces what is not a regular file: a FIFO and a character device
# (made here: never /dev/null itself) are written in place, a symbolic link stays a
# link and its target gets the text. Each reader is bounded, should steno never open it.
"$steno" run "$m" "$tmp/clip.wav" >"$tmp/want" 2>/dev/null
mkfifo "$tmp/fifo"
ln -s fifo "$tmp/fifo-link"
for out in fifo fifo-link; do
  timeout 120 cat "$tmp/fifo" >"$tmp/got" &
  reader=$!
  "$steno" run "$m" "$tmp/clip.wav" -o "$tmp/$out" 2>"$tmp/err"
  rc=$?
  wait $reader
  if [ $rc -eq 0 ] && [ -p "$tmp/fifo" ] && cmp -s "$tmp/want" "$tmp/got" && { [ $out = fifo ] || [ -L "$tmp/$out" ]; }
  then ok; else bad "-o $out: exit $rc, a FIFO: $(test -p "$tmp/fifo" && echo yes), $(cat "$tmp/err")"; fi
done
echo old >"$tmp/target.txt"
ln -s target.txt "$tmp/link"
"$steno" run "$m" "$tmp/clip.wav" -o "$tmp/link" 2>"$tmp/err"
if [ $? -eq 0 ] && [ -L "$tmp/link" ] && [ "$(readlink "$tmp/link")" = target.txt ] && cmp -s "$tmp/want" "$tmp/target.txt"
then ok; else bad "-o symlink to a file: $(ls -l "$tmp/link") $(cat "$tmp/err")"; fi
if mknod "$tmp/null" c 1 3 2>/dev/null; then # a copy of /dev/null's node (root, as CI runs)
  "$steno" run "$m" "$tmp/clip.wav" -o "$tmp/null" 2>"$tmp/err"
  if [ $? -eq 0 ] && [ -c "$tmp/null" ]; then ok; else bad "-o character device: $(ls -l "$tmp/null") $(cat "$tmp/err")"; fi
else echo "cli_run: mknod not permitted, character device check skipped" >&2; fi
ln -s missing "$tmp/dangling"
expect_error "-o dangling symlink" "missing file" "$m" "$tmp/clip.wav" -o "$tmp/dangling"
[ -L "$tmp/dangling" ] && [ ! -e "$tmp/missing" ] && ok || bad "-o dangling symlink: changed"
# An -o that cannot be written fails before any work: the input is a FIFO nobody writes,
# so reaching the audio would block (timeout: exit 124). Root writes anywhere despite
# permissions, so the unwritable folder is a path under a regular file (ENOTDIR).
mkfifo "$tmp/no-writer"
for out in /nonexistent-dir/x.txt "$tmp/target.txt/x.txt"; do
  timeout 60 "$steno" run "$m" "$tmp/no-writer" -o "$out" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 1 ] && grep -q "cannot write $out: \(its folder does not exist\|Not a directory\)" "$tmp/err"
  then ok; else bad "-o $out: exit $rc (124: it went on to the audio), $(cat "$tmp/err")"; fi
done

# STENO_PROFILE=1 (src/gpu/profile.c): the same text, and on stderr a table of
# kernels whose per-call times add up to the total it states.
"$steno" run "$m" "$tmp/clip.wav" >"$tmp/plain" 2>/dev/null
STENO_PROFILE=1 "$steno" run "$m" "$tmp/clip.wav" >"$tmp/prof" 2>"$tmp/err"
if [ $? -eq 0 ] && cmp -s "$tmp/plain" "$tmp/prof" && python3 - "$tmp/err" <<'PY'; then ok; else bad "STENO_PROFILE: $(head -5 "$tmp/err")"; fi
import re, sys
text = open(sys.argv[1]).read()
head = re.search(r"steno profile \(parakeet\): 1 calls, ([\d.]+) ms of kernels per call", text)
rows = re.findall(r"^ +([\d.]+) +[\d.]+ +[\d.]+ +[\d.]+  (\w+) \d+x\d+x\d+$", text, re.M)
total = float(head.group(1)) if head else 0
ok = head and total > 0 and any(k in ("gemm", "gemm_cpu") for _, k in rows) and \
    abs(sum(float(ms) for ms, _ in rows) - total) <= 0.01 * total + 0.002 * len(rows)
sys.exit(0 if ok else 1)
PY

# STENO_PIPELINE_STATS=1 and STENO_PIPELINE_IR=DIR (src/gpu/runtime.c): the
# same text, and on stderr either a statistics line for every kernel made
# (each naming a kernel) or, on a device without
# VK_KHR_pipeline_executable_properties (lavapipe), one warning that says so.
mkdir -p "$tmp/ir"
STENO_PIPELINE_STATS=1 STENO_PIPELINE_IR="$tmp/ir" "$steno" run "$m" "$tmp/clip.wav" >"$tmp/stats" 2>"$tmp/err"
if [ $? -eq 0 ] && cmp -s "$tmp/plain" "$tmp/stats" &&
   { grep -q "does not offer VK_KHR_pipeline_executable_properties" "$tmp/err" ||
     grep -q "pipeline stats: gemm" "$tmp/err"; }
then ok; else bad "STENO_PIPELINE_STATS: $(head -3 "$tmp/err")"; fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
