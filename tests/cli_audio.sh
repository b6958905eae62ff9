#!/usr/bin/env bash
# `steno run` on real-world inputs and outputs, with the tiny CTC fixture (random
# weights: its words are noise, so this checks behaviour and numbers, not text):
#   formats made here with ffmpeg (mp3, ogg/opus, m4a, webm with video), standard input;
#   a 150 s recording (several 60 s pieces) as JSON, SRT and VTT that read well;
#   silence and low noise give empty text; several files (headers, JSON array, -o DIR);
#   -o is atomic (no file on failure or interruption, an old file kept); the progress bar on a
#   terminal only; --quiet; --help for every command, matching the README.
# Usage: tests/cli_audio.sh path/to/steno
set -u
steno=${1:?usage: cli_audio.sh path/to/steno}
src=${STENO_SOURCE_DIR:-.}
m="$src/tests/fixtures/parakeet_ctc_tiny.gguf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
check() { # what, command...: passes when the command succeeds
  local what=$1
  shift
  if "$@"; then ok; else bad "$what: $(cat "$tmp/err" 2>/dev/null)"; fi
}

for tool in espeak-ng sox ffmpeg python3 script; do
  command -v $tool >/dev/null || { echo "cli_audio: $tool is missing (.ci/run installs it)" >&2; exit 1; }
done
espeak-ng -w "$tmp/raw.wav" "Good morning. The quick brown fox jumps over the lazy dog. It is a test." || exit 1
sox "$tmp/raw.wav" -r 16000 -c 1 -b 16 "$tmp/clip.wav" || exit 1
ff() { ffmpeg -nostdin -v error -y "$@"; }

# ---- formats and standard input ----
ff -i "$tmp/clip.wav" -c:a libmp3lame -b:a 64k "$tmp/clip.mp3"
ff -i "$tmp/clip.wav" -c:a libopus "$tmp/clip.ogg"
ff -i "$tmp/clip.wav" -c:a aac "$tmp/clip.m4a"
ff -f lavfi -i color=c=gray:s=64x48:r=10 -i "$tmp/clip.wav" -map 0:v -map 1:a -c:v libvpx -c:a libopus \
  -shortest "$tmp/clip.webm"
ff -i "$tmp/clip.wav" -c:a flac "$tmp/clip.flac"
want=$(soxi -D "$tmp/clip.wav")
for f in clip.wav clip.mp3 clip.ogg clip.m4a clip.webm; do
  "$steno" run "$m" "$tmp/$f" --json >"$tmp/out.json" 2>"$tmp/err"
  check "$f" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert abs(r["duration"] - float(sys.argv[2])) < 0.1, r["duration"]
assert r["text"] and r["tokens"], "no text"
assert r["architecture"] == "parakeet" and r["timings"]["total_ms"] > 0
' "$tmp/out.json" "$want"
done
"$steno" run "$m" "$tmp/clip.flac" >"$tmp/file.txt" 2>"$tmp/err"
cat "$tmp/clip.flac" | "$steno" run "$m" - >"$tmp/pipe.txt" 2>>"$tmp/err"
check "standard input" cmp -s "$tmp/file.txt" "$tmp/pipe.txt"
"$steno" run "$m" - <"$tmp/clip.m4a" >"$tmp/pipe.txt" 2>"$tmp/err"
check "m4a on standard input" test -s "$tmp/pipe.txt"

# No audio from a pipe is an error, not an empty transcript: an m4a whose index (moov) comes
# after its samples (over 64 KiB, the read buffer, which would hide the seek back), video
# alone. Silence is silence. (A pipe, not `<`: a redirected file can seek.)
ff -stream_loop 6 -i "$tmp/clip.wav" -c:a aac -b:a 128k "$tmp/long.m4a"
ff -f lavfi -i color=c=gray:s=64x48:r=10 -t 2 -c:v mpeg4 "$tmp/video.mp4"
for case in "long.m4a:cannot be read from a pipe" "video.mp4:no audio stream"; do
  f=${case%%:*}
  cat "$tmp/$f" | "$steno" run "$m" - >"$tmp/out.txt" 2>"$tmp/err"
  check "$f on standard input: an error" test $? -eq 1 -a ! -s "$tmp/out.txt"
  check "$f on standard input: says why" grep -q "standard input: .*${case#*:}" "$tmp/err"
done
sox -n -r 16000 -c 1 -b 16 "$tmp/quiet.wav" trim 0 3
cat "$tmp/quiet.wav" | "$steno" run "$m" - >"$tmp/out.txt" 2>"$tmp/err"
check "silence on standard input: empty text" test $? -eq 0 -a "$(cat "$tmp/out.txt")" = ""

# ---- inputs that name other files or the network: refused at once ----
# An SDP file would have FFmpeg wait for RTP on UDP; a playlist or a concat list reads what it names.
printf 'v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=audio 5004 RTP/AVP 0\n' >"$tmp/sdp.wav"
printf '#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:3,\nclip.wav\n#EXTINF:3,\nhttp://127.0.0.1:1/a.ts\n#EXT-X-ENDLIST\n' \
  >"$tmp/hls.mp3"
printf "ffconcat version 1.0\nfile 'clip.wav'\n" >"$tmp/list.wav"
for f in sdp.wav hls.mp3 list.wav; do
  timeout 10 "$steno" run "$m" "$tmp/$f" >"$tmp/out.txt" 2>"$tmp/err"
  check "$f refused" test $? -eq 1 -a ! -s "$tmp/out.txt"
  check "$f: says why" grep -q "$f: .* input is not allowed: it can open other files or the network" "$tmp/err"
  timeout 10 "$steno" run "$m" - <"$tmp/$f" >"$tmp/out.txt" 2>"$tmp/err"
  check "$f on standard input refused" test $? -eq 1 -a ! -s "$tmp/out.txt"
done

# ---- a long recording: pieces, JSON, subtitles ----
# 150 s: the clip with pauses of 0.4-1.6 s, and 20 s of silence in the middle.
i=0
for pause in 0.4 0.6 0.8 1.0 1.2 1.4 1.6; do sox "$tmp/clip.wav" "$tmp/p$((i += 1)).wav" pad 0 $pause; done
sox "$tmp"/p[1-7].wav "$tmp/block.wav"
sox "$tmp/block.wav" "$tmp/block.wav" "$tmp/block.wav" "$tmp/half.wav"
sox "$tmp/half.wav" "$tmp/long.wav" pad 0 20 repeat 1
sox "$tmp/long.wav" "$tmp/long.flac" trim 0 150
sox "$tmp/long.flac" "$tmp/long150.wav"
mkfifo "$tmp/fifo"
# Feeds a file through the FIFO, a third first and the rest 2.5 s later: the work then
# takes over 2 s on any device. (FLAC: its header gives the length, which a WAV header
# read from a pipe does not, for FFmpeg; without a length there is no percentage to show.)
slow_feed() { # file
  local first=$(($(stat -c %s "$1") / 3))
  (head -c $first "$1"; sleep 2.5; tail -c +$((first + 1)) "$1") >"$tmp/fifo" &
}
"$steno" run "$m" "$tmp/long.flac" --json >"$tmp/long.json" 2>"$tmp/err"
check "long JSON" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert abs(r["duration"] - 150) < 0.05, r["duration"]
assert len(r["segments"]) >= 3, ("pieces", len(r["segments"]))
for kind in ("segments", "words", "tokens"):
    last = 0
    for x in r[kind]:
        assert last <= x["start_ms"] <= x["end_ms"] <= 150080, (kind, x)
        last = x["start_ms"]
assert r["tokens"][-1]["start_ms"] > 120000, "times not shifted past the first pieces"
assert " ".join(s["text"] for s in r["segments"]) == r["text"], "text is not the pieces joined"
' "$tmp/long.json"

# Subtitles: well formed, cues of at most 2 lines, ~80 characters, ~7 s (+1.5 s of
# lingering), in order; every word of the JSON appears once, in order.
validate_subs() { # file, srt|vtt
  python3 - "$1" "$2" "$tmp/long.json" <<'PY'
import json, re, sys
s, fmt = open(sys.argv[1]).read(), sys.argv[2]
words = [w["text"] for w in json.load(open(sys.argv[3]))["words"]]
sep = "," if fmt == "srt" else "."
if fmt == "vtt":
    assert s.startswith("WEBVTT\n\n"), "no WEBVTT header"
    s = s[len("WEBVTT\n\n"):]
assert s.endswith("\n\n"), "no blank line after the last cue"
cues = s[:-2].split("\n\n")
ts = r"(\d\d):(\d\d):(\d\d)" + re.escape(sep) + r"(\d\d\d)"
ms = lambda g: ((int(g[0]) * 60 + int(g[1])) * 60 + int(g[2])) * 1000 + int(g[3])
last, got = 0, []
for i, c in enumerate(cues, 1):
    lines = c.split("\n")
    if fmt == "srt":
        assert lines[0] == str(i), ("cue number", lines[0])
        lines = lines[1:]
    m = re.fullmatch(ts + " --> " + ts, lines[0])
    assert m, ("timing line", lines[0])
    a, b = ms(m.groups()[:4]), ms(m.groups()[4:])
    assert last <= a < b <= 150000, ("cue times", a, b)
    text = lines[1:]
    assert 1 <= len(text) <= 2 and all(t.strip() for t in text), ("cue text", text)
    flat = " ".join(text)
    assert len(flat) <= 80 or len(flat.split()) == 1, ("cue too long", flat)
    assert b - a <= 7000 + 1500 or len(flat.split()) == 1, ("cue too long in time", a, b)
    got += flat.split()
    last = a
assert got == [w for w in words if w], "cue words differ from the JSON's words"
PY
}
"$steno" run "$m" "$tmp/long.flac" --srt -o "$tmp/long.srt" >/dev/null 2>"$tmp/err"
check "SRT" validate_subs "$tmp/long.srt" srt
slow_feed "$tmp/long.flac"
script -qec "'$steno' run '$m' '$tmp/fifo' -o '$tmp/bar.txt'" /dev/null >"$tmp/tty.log" 2>&1
check "progress bar on a terminal" grep -q "realtime.*ETA" "$tmp/tty.log"
"$steno" run "$m" "$tmp/long.flac" --vtt >"$tmp/long.vtt" 2>"$tmp/err"
check "VTT" validate_subs "$tmp/long.vtt" vtt
check "no progress without a terminal" test ! -s "$tmp/err"

# ---- silence and noise: empty text ----
sox -n -r 16000 -c 1 -b 16 "$tmp/silence.wav" trim 0 30
sox -n -r 16000 -c 1 -b 16 "$tmp/noise.wav" synth 30 whitenoise vol 0.01
sox -n -r 44100 -c 2 "$tmp/noise.flac" synth 30 pinknoise vol 0.02
# Room tone and breath recorded in a room (shared data beside the clone; not copied here).
room="$src/../shared/data/samples/jobs-silence.wav"
[ -f "$room" ] && cp "$room" "$tmp/room.wav" || echo "cli_audio: $room is not there: skipping it"
for f in silence.wav noise.wav noise.flac room.wav; do
  [ -f "$tmp/$f" ] || continue
  "$steno" run "$m" "$tmp/$f" >"$tmp/out.txt" 2>"$tmp/err"
  check "$f gives empty text" test "$?" -eq 0 -a "$(cat "$tmp/out.txt")" = ""
done

# ---- several files ----
"$steno" run "$m" "$tmp/clip.wav" "$tmp/clip.mp3" >"$tmp/two.txt" 2>"$tmp/err"
check "two files: headers" test "$(grep -c '^==> .* <==$' "$tmp/two.txt")" -eq 2 -a "$(wc -l <"$tmp/two.txt")" -eq 5
: >"$tmp/broken.mp3"
"$steno" run "$m" "$tmp/clip.wav" "$tmp/broken.mp3" "$tmp/clip.ogg" --json >"$tmp/arr.json" 2>"$tmp/err"
rc=$?
check "a bad file among several: exit 1, named" test $rc -eq 1 -a "$(grep -c broken.mp3 "$tmp/err")" -ge 1
check "JSON array of the good ones" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert [x["audio"].rsplit("/", 1)[-1] for x in r] == ["clip.wav", "clip.ogg"], r
' "$tmp/arr.json"
mkdir "$tmp/outdir"
"$steno" run "$m" "$tmp/clip.wav" "$tmp/p1.wav" --vtt -o "$tmp/outdir" >"$tmp/out.txt" 2>"$tmp/err"
check "-o DIR" test -s "$tmp/outdir/clip.vtt" -a -s "$tmp/outdir/p1.vtt" -a ! -s "$tmp/out.txt"
"$steno" run "$m" "$tmp/clip.wav" "$tmp/clip.mp3" --vtt -o "$tmp/outdir" >/dev/null 2>"$tmp/err"
check "two inputs, one output name: usage error" test $? -eq 2
"$steno" run "$m" "$tmp/clip.wav" "$tmp/clip.mp3" --srt >/dev/null 2>"$tmp/err"
check "several subtitles on stdout: usage error" test $? -eq 2
"$steno" run "$m" "$tmp/clip.wav" "$tmp/clip.mp3" -o "$tmp/x.txt" >/dev/null 2>"$tmp/err"
check "several files, -o not a directory: usage error" test $? -eq 2

# ---- -o is atomic ----
"$steno" run "$m" "$tmp/clip.wav" -o /proc/steno-test.txt >"$tmp/out.txt" 2>"$tmp/err"
check "unwritable -o: exit 1, a message" test $? -eq 1 -a -s "$tmp/err" -a ! -e /proc/steno-test.txt
mkdir "$tmp/keep"
echo old >"$tmp/keep/out.txt"
"$steno" run "$m" "$tmp/broken.mp3" -o "$tmp/keep/out.txt" >/dev/null 2>"$tmp/err"
check "failed input: the old file kept, nothing else" test $? -eq 1 -a "$(cat "$tmp/keep/out.txt")" = old \
  -a "$(ls -A "$tmp/keep")" = out.txt
# Interrupted while the input is still arriving: it stops after the piece at hand.
"$steno" run "$m" "$tmp/fifo" -o "$tmp/keep/long.txt" >/dev/null 2>"$tmp/err" &
pid=$!
exec 3>"$tmp/fifo"
head -c 1500000 "$tmp/long150.wav" >&3 # 47 s
kill -TERM $pid # (a background job ignores SIGINT; steno treats both alike)
exec 3>&-
wait $pid
rc=$?
check "interrupted: exit 143, no file" test $rc -eq 143 -a "$(ls -A "$tmp/keep")" = out.txt
"$steno" run "$m" "$tmp/clip.wav" -o "$tmp/keep/out.txt" 2>"$tmp/err"
check "-o replaces the old file" cmp -s "$tmp/keep/out.txt" "$tmp/file.txt"

# ---- --quiet, --help ----
STENO_LOG=debug "$steno" run "$m" "$tmp/clip.wav" >/dev/null 2>"$tmp/err"
check "STENO_LOG=debug says something" test -s "$tmp/err"
slow_feed "$tmp/long.flac"
STENO_LOG=debug script -qec "'$steno' run '$m' '$tmp/fifo' --quiet -o '$tmp/q.txt'" /dev/null >"$tmp/tty.log" 2>&1
check "--quiet: no log, no progress" test ! -s "$tmp/tty.log" -a -s "$tmp/q.txt"
for cmd in run bench devices info pull list rm; do
  "$steno" $cmd --help >"$tmp/help" 2>"$tmp/err"
  check "$cmd --help" test $? -eq 0 -a "$(head -c 6 "$tmp/help")" = "usage:"
done
"$steno" --help | grep '^  steno ' | sed 's/^  //' >"$tmp/synopsis"
check "steno --help matches the README" python3 -c '
import sys
readme = open(sys.argv[1]).read()
missing = [l.rstrip("\n") for l in open(sys.argv[2]) if l.rstrip("\n") not in readme]
assert not missing, missing
' "$src/README.md" "$tmp/synopsis"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
