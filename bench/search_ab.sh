#!/bin/sh
# The transducer search's A/B (docs/perf.md, ninth session on): two steno
# binaries in turn in one run on the random Parakeet TDT 0.6B file (its joint
# emits a token at nearly every step), its speech-rate copy (30 tokens on the
# clip), the 10-minute file made from the clip, and batches of 4 and 8 clips;
# the new binary also with STENO_SEARCH=grid. Each run's "warm" and "stages"
# lines (the decoder column is the search). The files are made first where
# WORK lacks them (bench/parakeet_real.py, with OLD_STENO for the speech-rate
# bisection; FEATURES is the clip's features from parakeet_real.py
# --save-features, made where torch and transformers are). Only ratios
# within one run count.
#   bench/search_ab.sh OLD_STENO NEW_STENO CLIP FEATURES [WORK]
set -e
old=${1:?usage: search_ab.sh OLD_STENO NEW_STENO CLIP FEATURES [WORK]}
new=${2:?} clip=${3:?} features=${4:?} work=${5:-/tmp/parakeet_real}
here=$(dirname "$0")
plain=$work/parakeet_tdt_0.6b_random-F16.gguf speech=$work/parakeet_tdt_0.6b_random-F16-speech30.gguf
long=$work/clip600.wav
if [ ! -f "$speech" ]; then
  python3 "$here/parakeet_real.py" --steno "$old" --clip "$clip" --work "$work" --speech-rate 30 \
    --speech-rate-only --features "$features" > /dev/null
fi
if [ ! -f "$long" ]; then
  python3 - "$here" "$clip" "$long" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import numpy as np
import parakeet_real as p
pcm = p.read_wav(Path(sys.argv[2]))
piece = np.concatenate([pcm, np.zeros(16000, np.float32)])
reps = int(np.ceil(600 / (len(piece) / 16000)))
p.write_wav(Path(sys.argv[3]), np.concatenate([piece] * reps)[: 600 * 16000])
PY
fi
# One bench of binary $1 (mode $2: "" or grid) on model $3, audio $4, then steno bench's options.
one() {
  b=$1 mode=$2 model=$3 audio=$4
  shift 4
  echo "-- $b ${mode:-default} $(basename "$model") $(basename "$audio") $*"
  STENO_SEARCH=$mode "$b" bench "$model" "$audio" "$@" 2>&1 | grep "^warm\|^stages"
}
for pair in 1 2; do
  for b in "$old" "$new" grid; do
    mode=
    [ "$b" = grid ] && b=$new mode=grid
    one "$b" "$mode" "$plain" "$clip" -n 10
    one "$b" "$mode" "$speech" "$clip" -n 10
  done
done
for b in "$old" "$new" grid; do
  mode=
  [ "$b" = grid ] && b=$new mode=grid
  one "$b" "$mode" "$plain" "$long" -n 1
  for k in 4 8; do one "$b" "${mode:-steps}" "$plain" "$clip" -n 3 --batch $k; done
done
