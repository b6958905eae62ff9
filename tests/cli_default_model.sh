#!/usr/bin/env bash
# `steno run FILE...` with no model named. Always: STENO_MODEL names the model (the
# tiny CTC fixture), a missing one is a clear error, a named model comes first, no
# file is a usage error. With the bundled default model (models/steno-en-tiny-ctc.gguf,
# docs/default-model.md) present: sentences that espeak-ng speaks here, with voice
# variants and a speaking rate the model never heard in training
# (scripts/default_model_data.py holds them out), come out at a word error rate of at
# most 20 % on lavapipe, and the bundled clip models/hello.wav gives its sentence exactly.
# Usage: tests/cli_default_model.sh path/to/steno
set -u
steno=${1:?usage: cli_default_model.sh path/to/steno}
src=${STENO_SOURCE_DIR:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

for tool in espeak-ng python3; do
  command -v $tool >/dev/null || { echo "cli_default_model: $tool is missing (.ci/run installs it)" >&2; exit 1; }
done
unset STENO_MODEL
expected="hello world this is speech recognition on your own computer"

# STENO_MODEL names the default; a missing one is an error naming it.
STENO_MODEL="$src/tests/fixtures/parakeet_ctc_tiny.gguf" "$steno" run "$src/models/hello.wav" --json >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q parakeet_ctc_tiny "$tmp/out"; then ok; else bad "STENO_MODEL fixture: $(cat "$tmp/err")"; fi
STENO_MODEL="$tmp/none.gguf" "$steno" run "$src/models/hello.wav" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q "none.gguf" "$tmp/err"; then ok; else bad "STENO_MODEL missing: exit $rc $(cat "$tmp/err")"; fi
# A model named explicitly comes first (STENO_MODEL would fail).
STENO_MODEL="$tmp/none.gguf" "$steno" run "$src/tests/fixtures/parakeet_ctc_tiny.gguf" "$src/models/hello.wav" >/dev/null 2>"$tmp/err"
if [ $? -eq 0 ]; then ok; else bad "explicit model: $(cat "$tmp/err")"; fi
# No file at all is still a usage error.
"$steno" run >/dev/null 2>&1
if [ $? -eq 2 ]; then ok; else bad "no arguments: not a usage error"; fi

if [ ! -f "$src/models/steno-en-tiny-ctc.gguf" ]; then
  echo "cli_default_model: models/steno-en-tiny-ctc.gguf not committed yet: its WER checks are skipped" >&2
  echo "$passed passed, $failed failed"
  [ $failed -eq 0 ]
  exit
fi

# Sentences written for this test (not drawn from the training generator), each
# with a held-out voice variant and a rate from the held-out band 162..184.
cat >"$tmp/sentences.tsv" <<'EOF'
en-us+m6	170	the children walked to school in the morning
en+f4	175	please call me back when you have time
en-us+klatt3	165	we need more water for the garden this summer
en-gb-x-rp+Andy	180	she found an old letter under the table
en-us+belinda	172	the price of bread went up again last week
en-029+edward2	168	they will open the new store next month
en-gb-scotland+robert	176	my brother plays the guitar in a small band
en-us-nyc+iven3	174	it was a cold night and the road was empty
EOF
files=()
i=0
while IFS=$'\t' read -r voice rate text; do
  espeak-ng -v "$voice" -s "$rate" -w "$tmp/s$i.wav" "$text" || exit 1
  files+=("$tmp/s$i.wav")
  i=$((i + 1))
done <"$tmp/sentences.tsv"

# All clips in one call (the model loads once); no model named: the default one.
"$steno" run "${files[@]}" --json -o "$tmp" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ]; then ok; else bad "steno run FILES: exit $rc $(cat "$tmp/err")"; fi

if python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]

def distance(a, b):
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
    return d[-1]

errors = words = 0
for i, line in enumerate(open(f"{tmp}/sentences.tsv")):
    ref = line.rstrip("\n").split("\t")[2].split()
    hyp = json.load(open(f"{tmp}/s{i}.json"))["text"].split()
    errors += distance(ref, hyp)
    words += len(ref)
    print(f"  {' '.join(hyp)!r}  (said: {' '.join(ref)!r})")
wer = errors / words
print(f"  WER {wer:.3f} ({errors} errors in {words} words)")
assert wer <= 0.20, f"WER {wer:.3f} > 0.20"
PY
then ok; else bad "WER over the sentences"; fi

# The README's first command: the bundled clip, made with
#   espeak-ng -v en-us -w raw.wav "hello world this is speech recognition on your own computer"
#   sox -D raw.wav -r 16000 -c 1 -b 16 models/hello.wav
# (espeak-ng's default rate, 175 wpm: inside the band held out of training). An earlier
# sentence, "... this is a test of ...", came out as "attest": the two sound the same in
# espeak-ng and the model has no language model to tell them apart.
out=$("$steno" run "$src/models/hello.wav" 2>"$tmp/err")
if [ "$out" = "$expected" ]; then ok; else bad "hello.wav: '$out' $(cat "$tmp/err")"; fi
# Standard input takes the default model too.
out=$("$steno" run - <"$src/models/hello.wav" 2>"$tmp/err")
if [ "$out" = "$expected" ]; then ok; else bad "stdin: '$out' $(cat "$tmp/err")"; fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
