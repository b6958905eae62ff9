#!/bin/sh
# The same transcription N times, each a fresh process: a line per run with
# the token count and a hash of (id, start, end) of every token, then how many
# distinct outputs there were. For nondeterminism hunts (docs/perf.md, tenth
# session: one speech-rate run of 30 gave another hash); STENO_SEARCH=steps
# or grid (and any other environment) applies to every run.
#   bench/repeat.sh STENO MODEL AUDIO [N 20]
set -e
steno=${1:?usage: repeat.sh STENO MODEL AUDIO [N]}
model=${2:?} audio=${3:?} n=${4:-20}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
i=0
while [ $i -lt "$n" ]; do
  "$steno" run "$model" "$audio" --json 2>/dev/null | python3 -c '
import hashlib, json, sys
d = json.load(sys.stdin)
t = [(x["id"], x["start_ms"], x["end_ms"]) for x in d["tokens"]]
print(len(t), hashlib.md5(str(t).encode()).hexdigest())' | tee -a "$out"
  i=$((i + 1))
done
echo "distinct outputs: $(sort -u "$out" | wc -l) of $n runs"
