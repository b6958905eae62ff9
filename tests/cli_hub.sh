#!/usr/bin/env bash
# steno pull / list / rm, and model names in steno run, end to end against a fake
# Hugging Face hub (tests/fake_hub.py) on 127.0.0.1: a pull lands in the hub's cache
# layout and `steno run NAME` loads it; an interrupted pull resumes with Range; a
# corrupt download is rejected and leaves nothing; 404s are clear errors; rm keeps a
# blob another file still uses. Nothing but 127.0.0.1 is contacted.
# Usage: tests/cli_hub.sh path/to/steno
set -u
steno=${1:?usage: cli_hub.sh path/to/steno}
src=${STENO_SOURCE_DIR:-.}
tmp=$(mktemp -d)
hub_pid=
cleanup() {
  [ -n "$hub_pid" ] && kill "$hub_pid" 2>/dev/null && wait "$hub_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
check() { # what, command...: passes when the command succeeds
  local what=$1
  shift
  if "$@"; then ok; else bad "$what $(head -c 600 "$tmp/err" 2>/dev/null)"; fi
}

for tool in python3 sha256sum; do
  command -v $tool >/dev/null || { echo "cli_hub: $tool is missing" >&2; exit 1; }
done
fixture=$src/tests/fixtures/parakeet_ctc_tiny.gguf
for f in flaky norange stubborn corrupt liar; do head -c 300000 /dev/urandom >"$tmp/$f.bin"; done
mkdir -p "$tmp/hf/hub"
# More than the cache's file system has free (read now; 1 GB more allows for others' writes).
too_big=$(( $(df -B1 --output=avail "$tmp/hf/hub" | tail -n 1) + 1000000000 ))
v3=handy-computer/parakeet-tdt-0.6b-v3-gguf
python3 "$src/tests/fake_hub.py" --port-file "$tmp/port" --log "$tmp/log" --timeout 600 \
  --rename test/old-gguf=test/new-gguf \
  "$v3/parakeet-tdt-0.6b-v3-Q8_0.gguf=$fixture" "$v3/parakeet-tdt-0.6b-v3-F16.gguf=$fixture" \
  "test/flaky-gguf/flaky-Q8_0.gguf=$tmp/flaky.bin:drop" \
  "test/norange-gguf/norange-Q8_0.gguf=$tmp/norange.bin:norange" \
  "test/stubborn-gguf/stubborn-Q8_0.gguf=$tmp/stubborn.bin:stubborn" \
  "test/corrupt-gguf/corrupt-Q8_0.gguf=$tmp/corrupt.bin:corrupt" \
  "test/new-gguf/sub/model.gguf=$fixture" "test/git-gguf/small.gguf=$tmp/flaky.bin:git" \
  "test/huge-gguf/huge-Q8_0.gguf=$fixture:size=1000000000000000" \
  "test/negative-gguf/negative-Q8_0.gguf=$fixture:size=-5" "test/garbage-gguf/garbage-Q8_0.gguf=$fixture:size=12abc" \
  "test/full-gguf/full-Q8_0.gguf=$fixture:size=$too_big" "test/more-gguf/more-Q8_0.gguf=$tmp/liar.bin:size=150000" &
hub_pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || { echo "cli_hub: the fake hub did not start" >&2; exit 1; }
port=$(cat "$tmp/port")
unset HF_HUB_CACHE HUGGINGFACE_HUB_CACHE http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy
export HF_ENDPOINT=http://127.0.0.1:$port HF_HOME=$tmp/hf NO_PROXY=127.0.0.1 no_proxy=127.0.0.1
cache=$tmp/hf/hub
control() { python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1]).read()" "$HF_ENDPOINT/control/$1"; }
# The Range header of the last GET of the bytes of $1 (repo/file), or "none".
last_range() {
  python3 - "$tmp/log" "$1" <<'PY'
import json, sys
gets = [e for e in map(json.loads, open(sys.argv[1])) if e["method"] == "GET" and e["path"] == "/cdn/" + sys.argv[2]]
print(gets[-1]["range"] or "none" if gets else "none")
PY
}
count_gets() { grep -c "\"GET\", \"path\": \"/cdn/$1\"" "$tmp/log"; }
pull() { "$steno" pull "$@" >"$tmp/out" 2>"$tmp/err"; }
no_files() { [ -z "$(find "$1" -type f -o -type l 2>/dev/null)" ]; }

# 1. A normal pull: the hub's cache layout, exactly the served bytes.
pull parakeet-v3
rc=$?
repo=$cache/models--handy-computer--parakeet-tdt-0.6b-v3-gguf
sha=$(sha256sum "$fixture" | cut -c1-64)
commit=$(cat "$repo/refs/main" 2>/dev/null)
link=$repo/snapshots/$commit/parakeet-tdt-0.6b-v3-Q8_0.gguf
check "pull exits 0" [ $rc -eq 0 ]
check "refs/main holds a commit" grep -Eqx '[0-9a-f]{40}' "$repo/refs/main"
check "pull prints the snapshot path" [ "$(cat "$tmp/out")" = "$link" ]
check "snapshot is a relative link to the blob" [ "$(readlink "$link")" = "../../blobs/$sha" ]
check "blob holds the served bytes" cmp -s "$repo/blobs/$sha" "$fixture"
check "no .incomplete left" no_files "$repo/blobs/$sha.incomplete"

# 2. list shows it by its short name, with its path.
"$steno" list >"$tmp/out" 2>"$tmp/err"
check "list shows parakeet-v3 and its path" grep -Eq "^parakeet-v3 +[0-9.]+ kB +$link\$" "$tmp/out"
HF_HUB_CACHE=$cache HF_HOME=$tmp/elsewhere "$steno" list >"$tmp/out" 2>"$tmp/err"
check "HF_HUB_CACHE wins over HF_HOME" grep -q "^parakeet-v3 " "$tmp/out"
"$steno" list --available >"$tmp/out" 2>"$tmp/err"
check "list --available names the registry" grep -q "^whisper-turbo " "$tmp/out"

# 3. steno run resolves names to the cached file: same transcript as the path gives.
python3 - "$tmp/clip.wav" <<'PY'
import math, struct, sys, wave
w = wave.open(sys.argv[1], "wb")
w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(i * (0.05 + i * 1e-6)) * math.sin(i / 900)))
                       for i in range(32000)))
PY
"$steno" run "$fixture" "$tmp/clip.wav" >"$tmp/want" 2>"$tmp/err"
check "run by path" [ $? -eq 0 ]
for name in parakeet-v3 parakeet-tdt-0.6b-v3 "$v3:q8_0" "$v3/parakeet-tdt-0.6b-v3-Q8_0.gguf"; do
  "$steno" run "$name" "$tmp/clip.wav" >"$tmp/got" 2>"$tmp/err"
  rc=$?
  check "run $name gives the path's transcript" eval '[ $rc -eq 0 ] && cmp -s "$tmp/got" "$tmp/want"'
done
"$steno" run parakeet-v2 "$tmp/clip.wav" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "a name not pulled: exit 1, names the pull command" \
  eval '[ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q "steno pull parakeet-v2" "$tmp/err"'
"$steno" run parakeet-v9 "$tmp/clip.wav" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "an unknown name: exit 1 and a suggestion" eval '[ $rc -eq 1 ] && grep -q "did you mean parakeet-v" "$tmp/err"'

# 4. main moves on: a new snapshot, no second download of the same bytes.
control commit
gets=$(count_gets "$v3/parakeet-tdt-0.6b-v3-Q8_0.gguf")
pull parakeet-v3
rc=$?
commit2=$(cat "$repo/refs/main")
check "pull after a new commit" eval '[ $rc -eq 0 ] && [ "$commit2" != "$commit" ]'
check "new snapshot links the same blob" [ "$(readlink "$repo/snapshots/$commit2/parakeet-tdt-0.6b-v3-Q8_0.gguf")" = "../../blobs/$sha" ]
check "bytes not downloaded again" [ "$(count_gets "$v3/parakeet-tdt-0.6b-v3-Q8_0.gguf")" = "$gets" ]
"$steno" list >"$tmp/out" 2>"$tmp/err"
check "list shows the model once, from refs/main" \
  eval '[ "$(grep -c "^parakeet-v3 " "$tmp/out")" = 1 ] && grep -q "snapshots/$commit2/" "$tmp/out"'

# 5. A connection dropped halfway: pull tries again with Range and completes.
pull test/flaky-gguf
rc=$?
range=$(last_range test/flaky-gguf/flaky-Q8_0.gguf)
check "dropped connection: pull completes" [ $rc -eq 0 ]
check "dropped connection: resumed with Range ($range)" eval '[[ "$range" =~ ^bytes=[1-9][0-9]*-$ ]]'
check "dropped connection: blob is right" cmp -s "$cache/models--test--flaky-gguf/blobs/$(sha256sum "$tmp/flaky.bin" | cut -c1-64)" "$tmp/flaky.bin"
pull test/norange-gguf
rc=$?
range=$(last_range test/norange-gguf/norange-Q8_0.gguf)
check "a server that ignores Range: starts over, right bytes" \
  eval '[ $rc -eq 0 ] && [ "$range" != none ] && cmp -s "$(cat "$tmp/out")" "$tmp/norange.bin"'

# 6. Interrupted for good, then resumed by the next pull.
pull test/stubborn-gguf
rc=$?
stub=$cache/models--test--stubborn-gguf
part=$(ls "$stub"/blobs/*.incomplete 2>/dev/null)
have=$(stat -c %s "$part" 2>/dev/null || echo 0)
check "interrupted pull: exit 1, says how to resume" eval '[ $rc -eq 1 ] && grep -q "resumes it" "$tmp/err"'
check "interrupted pull: the part is kept, no snapshot" \
  eval '[ "$have" -gt 0 ] && [ "$have" -lt 300000 ] && no_files "$stub/snapshots"'
control heal
pull test/stubborn-gguf
check "second pull completes" [ $? -eq 0 ]
check "second pull resumed at the kept part" [ "$(last_range test/stubborn-gguf/stubborn-Q8_0.gguf)" = "bytes=$have-" ]
check "resumed file is right, no .incomplete" eval 'cmp -s "$(cat "$tmp/out")" "$tmp/stubborn.bin" && ! ls "$stub"/blobs/*.incomplete 2>/dev/null'

# 7. A corrupt download: rejected, nothing left behind.
pull test/corrupt-gguf
rc=$?
check "corrupt: exit 1 and a sha256 message" eval '[ $rc -eq 1 ] && grep -q sha256 "$tmp/err"'
check "corrupt: nothing in blobs or snapshots" \
  eval 'no_files "$cache/models--test--corrupt-gguf/blobs" && no_files "$cache/models--test--corrupt-gguf/snapshots"'

# 8. Not found, renamed, unreachable, bad names.
pull parakeet-v3:Q2_K
rc=$?
check "missing file: clear error" eval '[ $rc -eq 1 ] && grep -q "has no file parakeet-tdt-0.6b-v3-Q2_K.gguf" "$tmp/err"'
pull test/missing-gguf
rc=$?
check "missing repository: clear error" eval '[ $rc -eq 1 ] && grep -q "no repository test/missing-gguf" "$tmp/err"'
pull test/git-gguf/small.gguf
rc=$?
check "a file kept in git (no LFS): checked by git's sha1" eval '[ $rc -eq 0 ] && cmp -s "$(cat "$tmp/out")" "$tmp/flaky.bin"'
pull test/old-gguf/sub/model.gguf
rc=$?
check "renamed repository: relative redirect followed" eval '[ $rc -eq 0 ] && cmp -s "$(cat "$tmp/out")" "$fixture"'
check "file in a folder: link climbs one more level" \
  eval '[ "$(readlink "$(cat "$tmp/out")")" = "../../../blobs/$sha" ]'
HF_ENDPOINT=http://127.0.0.1:1 "$steno" pull parakeet-v3 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "unreachable hub: exit 1" eval '[ $rc -eq 1 ] && grep -q "cannot reach" "$tmp/err"'
for name in "../etc/x" "a/b/../../x.gguf" "a/b/c.txt" "a--b/c-gguf" "parakeet-v3:Q8/0" "/abs"; do
  pull "$name"
  rc=$?
  check "bad name '$name' refused" eval '[ $rc -eq 1 ] && grep -q "steno pull:" "$tmp/err"'
done
"$steno" pull >/dev/null 2>&1
check "pull without a name is a usage error" [ $? -eq 2 ]
"$steno" pull --help >"$tmp/out" 2>&1
rc=$?
check "pull --help" eval '[ $rc -eq 0 ] && grep -q "usage: steno pull" "$tmp/out"'

# 8b. Sizes a hub must not be trusted with: refused before a byte is fetched, nothing
# left in the cache; a hub that sends more than it declared is cut off at the size.
for bad in "huge:no model is that large" "negative:an unreadable size" "garbage:an unreadable size" \
  "full:must stay free"; do
  what=${bad%%:*}
  pull test/$what-gguf
  rc=$?
  check "declared size ($what): exit 1, '${bad#*:}'" eval '[ $rc -eq 1 ] && grep -q "${bad#*:}" "$tmp/err"'
  check "declared size ($what): no GET of the bytes" [ "$(count_gets test/$what-gguf/$what-Q8_0.gguf)" = 0 ]
  check "declared size ($what): nothing in blobs" no_files "$cache/models--test--$what-gguf/blobs"
done
pull test/more-gguf
rc=$?
part=$(ls "$cache"/models--test--more-gguf/blobs/*.incomplete 2>/dev/null)
check "more bytes than declared: exit 1, says so" eval '[ $rc -eq 1 ] && grep -q "more than the file" "$tmp/err"'
check "more bytes than declared: no more written than declared" \
  eval '[ "$(stat -c %s "$part" 2>/dev/null || echo 0)" -le 150000 ] && no_files "$cache/models--test--more-gguf/snapshots"'

# 9. rm: a blob stays while another file links it, goes with the last one.
pull parakeet-v3:F16
check "pull a second file with the same bytes" [ $? -eq 0 ]
"$steno" list >"$tmp/out" 2>"$tmp/err"
check "list names it parakeet-v3:F16" grep -q "^parakeet-v3:F16 " "$tmp/out"
"$steno" rm parakeet-v3:F16 >"$tmp/out" 2>"$tmp/err"
check "rm parakeet-v3:F16" [ $? -eq 0 ]
check "rm keeps a blob that parakeet-v3 still uses" eval '[ -f "$repo/blobs/$sha" ] && [ -f "$repo/snapshots/$commit2/parakeet-tdt-0.6b-v3-Q8_0.gguf" ]'
check "rm removed every F16 link" eval '! ls "$repo"/snapshots/*/parakeet-tdt-0.6b-v3-F16.gguf 2>/dev/null'
"$steno" rm parakeet-v3 >"$tmp/out" 2>"$tmp/err"
check "rm parakeet-v3" [ $? -eq 0 ]
check "rm removed blob and repository folder" [ ! -e "$repo" ]
"$steno" list >"$tmp/out" 2>"$tmp/err"
check "list no longer shows it" eval '! grep -q "^parakeet-v3" "$tmp/out"'
"$steno" rm parakeet-v3 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "rm of a model not there: exit 1" eval '[ $rc -eq 1 ] && grep -q "not downloaded" "$tmp/err"'

# 10. list on an odd cache (hf, a crash or a hand edit can leave any of these): the
# longest names a file system takes, a quantization too long to be one, a dangling
# link, a snapshot that is a file, refs/main a FIFO, no snapshots at all.
odd=$tmp/odd
org=$(printf 'o%.0s' $(seq 100)) name=$(printf 'n%.0s' $(seq 145))
long_repo=$odd/models--$org--$name
long_file=$(printf 'f%.0s' $(seq 91)).gguf
long_quant=parakeet-tdt-0.6b-v3-$(printf 'Q%.0s' $(seq 68)).gguf
v3dir=$odd/models--handy-computer--parakeet-tdt-0.6b-v3-gguf
mkdir -p "$long_repo/snapshots/$(printf 'c%.0s' $(seq 250))" "$v3dir/snapshots/s1" "$v3dir/refs" \
  "$odd/models--only--folder" "$odd/models--nosep/snapshots/s" "$odd/models--snaps--file"
cp "$fixture" "$long_repo/snapshots/$(printf 'c%.0s' $(seq 250))/$long_file"
head -c 999 /dev/urandom >"$v3dir/snapshots/s1/$long_quant"
ln -s ../../blobs/gone "$v3dir/snapshots/s1/parakeet-tdt-0.6b-v3-F16.gguf"
echo x >"$v3dir/snapshots/s2"
mkfifo "$v3dir/refs/main"
echo x >"$odd/models--snaps--file/snapshots"
HF_HUB_CACHE=$odd timeout 60 "$steno" list >"$tmp/out" 2>"$tmp/err"
rc=$?
check "odd cache: list exits 0 (no crash, no hang on a FIFO)" [ $rc -eq 0 ]
check "odd cache: a quantization too long to type is listed by its full name" \
  grep -Eq "^handy-computer/parakeet-tdt-0.6b-v3-gguf/$long_quant +999 B " "$tmp/out"
check "odd cache: a dangling link is listed as missing" grep -Eq "^parakeet-v3:F16 +missing " "$tmp/out"
check "odd cache: the longest repository and file names are listed in full" \
  grep -q "^$org/$name/$long_file " "$tmp/out"
HF_HUB_CACHE=$odd timeout 60 "$steno" run parakeet-v3:F16 "$tmp/clip.wav" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "odd cache: run of a dangling link says it is not downloaded" \
  eval '[ $rc -eq 1 ] && grep -q "steno pull parakeet-v3:F16" "$tmp/err"'

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
