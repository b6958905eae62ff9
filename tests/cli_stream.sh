#!/usr/bin/env bash
# `steno run --stream`: audio written slowly into a FIFO read as standard input.
# Firm text must reach standard output before the writer closes the FIFO, and
# the last line (the final transcript) must equal the offline `steno run` of the
# same audio (the window loop: the bundled English CTC model on models/hello.wav)
# or, for the cache-aware Nemotron fixture, the --stream run of the
# same audio read from a file. Raw s16le input gives what the WAV stream gives;
# bad input and options are errors.
# Usage: tests/cli_stream.sh path/to/steno
set -u
steno=${1:?usage: cli_stream.sh path/to/steno}
src=${STENO_SOURCE_DIR:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

for tool in espeak-ng sox python3; do
  command -v $tool >/dev/null || { echo "cli_stream: $tool is missing (.ci/run installs it)" >&2; exit 1; }
done

# Writes WAV file $1 into FIFO $2 in 0.1 s blocks, 0.02 s apart; before the last
# 0.3 s it waits (up to 60 s) for file $3 to hold text. Prints "early" when the
# text came before the end of the audio, "late" otherwise.
slow_writer() {
  python3 - "$1" "$2" "$3" <<'PY'
import os, sys, time
data = open(sys.argv[1], "rb").read()
at = data.index(b"data") + 8
block, tail = 3200, 9600  # 0.1 s; the last 0.3 s wait for text
out = open(sys.argv[2], "wb", buffering=0)
out.write(data[:at])
pos, early = at, False
while pos < len(data):
    if not early and len(data) - pos <= tail:
        t0 = time.time()
        while time.time() - t0 < 60 and os.path.getsize(sys.argv[3]) == 0:
            time.sleep(0.05)
        early = os.path.getsize(sys.argv[3]) > 0
    out.write(data[pos:pos + block])
    pos += block
    time.sleep(0.02)
out.close()
print("early" if early else "late")
PY
}

# One streaming run of model $1 on WAV $2 through a FIFO: stdout to $3.
fifo_run() {
  rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
  : >"$3"
  "$steno" run "$1" --stream - <"$tmp/fifo" >"$3" 2>"$tmp/err" &
  local pid=$!
  local when
  when=$(slow_writer "$2" "$tmp/fifo" "$3")
  wait $pid
  local rc=$?
  echo "$when $rc"
}

# The window loop: the bundled English model on its 3.4 s hello.wav (each update
# re-transcribes up to 3.4 s: the slowest part on lavapipe).
m="$src/models/steno-en-tiny-ctc.gguf"
"$steno" run "$m" "$src/models/hello.wav" >"$tmp/offline" 2>"$tmp/err" || bad "offline run: $(cat "$tmp/err")"
read -r when rc <<<"$(fifo_run "$m" "$src/models/hello.wav" "$tmp/out")"
[ "$rc" = 0 ] && ok || bad "window loop: exit $rc $(cat "$tmp/err")"
[ "$when" = early ] && ok || bad "window loop: no firm text before the end of the audio"
if [ "$(tail -n 1 "$tmp/out")" = "$(cat "$tmp/offline")" ]; then ok; else
  bad "window loop: final '$(tail -n 1 "$tmp/out")', offline '$(cat "$tmp/offline")'"; fi
firm=$(head -n 1 "$tmp/out")
[ "$(wc -l <"$tmp/out")" -eq 2 ] && [ -n "$firm" ] && ok || bad "window loop: not firm line + final line: $(cat "$tmp/out")"
echo "window loop: firm '$firm' / final '$(tail -n 1 "$tmp/out")'"

# Native streaming (the tiny Nemotron fixture on an espeak-ng clip): text before
# the end, and the FIFO run's final text equals a run reading the file.
n="$src/tests/fixtures/nemotron_asr_tiny.gguf"
espeak-ng -w "$tmp/raw.wav" "the quick brown fox jumps over the lazy dog. it is a test." || exit 1
sox "$tmp/raw.wav" -r 16000 -c 1 -b 16 "$tmp/clip.wav" || exit 1
read -r when rc <<<"$(fifo_run "$n" "$tmp/clip.wav" "$tmp/nout")"
[ "$rc" = 0 ] && ok || bad "native: exit $rc $(cat "$tmp/err")"
[ "$when" = early ] && ok || bad "native: no text before the end of the audio"
"$steno" run "$n" --stream "$tmp/clip.wav" >"$tmp/nfile" 2>"$tmp/err"
[ "$(tail -n 1 "$tmp/nout")" = "$(tail -n 1 "$tmp/nfile")" ] && [ -n "$(tail -n 1 "$tmp/nfile")" ] && ok ||
  bad "native: FIFO final '$(tail -n 1 "$tmp/nout")', file '$(tail -n 1 "$tmp/nfile")'"
case "$(tail -n 1 "$tmp/nout")" in "$(head -n 1 "$tmp/nout")"*) ok ;; *) bad "native: the final text does not extend the firm text" ;; esac

# Raw s16le on standard input: the same final text as the WAV stream.
python3 -c "import sys; d=open(sys.argv[1],'rb').read(); sys.stdout.buffer.write(d[d.index(b'data')+8:])" \
  "$tmp/clip.wav" >"$tmp/clip.raw"
"$steno" run "$n" --stream - <"$tmp/clip.raw" >"$tmp/raw_out" 2>"$tmp/err"
[ "$(tail -n 1 "$tmp/raw_out")" = "$(tail -n 1 "$tmp/nfile")" ] && ok || bad "raw stdin: '$(tail -n 1 "$tmp/raw_out")' $(cat "$tmp/err")"

# Errors: two files or another format are usage errors; a WAV at 8 kHz on stdin fails.
"$steno" run "$n" --stream "$tmp/clip.wav" "$tmp/clip.wav" >/dev/null 2>&1
[ $? -eq 2 ] && ok || bad "--stream with two files: not exit 2"
"$steno" run "$n" --stream --json "$tmp/clip.wav" >/dev/null 2>&1
[ $? -eq 2 ] && ok || bad "--stream --json: not exit 2"
sox "$tmp/raw.wav" -r 8000 -c 1 -b 16 "$tmp/8k.wav" || exit 1
"$steno" run "$n" --stream - <"$tmp/8k.wav" >"$tmp/o8" 2>"$tmp/e8"
[ $? -eq 1 ] && grep -q "16000" "$tmp/e8" && [ ! -s "$tmp/o8" ] && ok || bad "8 kHz WAV on stdin: $(cat "$tmp/e8")"
printf 'RIFF\0\0\0\0WAVEjunk' | "$steno" run "$n" --stream - >/dev/null 2>"$tmp/e9"
[ $? -eq 1 ] && ok || bad "a truncated WAV header on stdin: $(cat "$tmp/e9")"
: | "$steno" run "$n" --stream - >"$tmp/o10" 2>"$tmp/e10"
[ $? -eq 0 ] && [ "$(cat "$tmp/o10")" = "" ] && ok || bad "empty stdin: $(cat "$tmp/e10")"

echo "cli_stream: $passed passed, $failed failed"
[ $failed -eq 0 ]
