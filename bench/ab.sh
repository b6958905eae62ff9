#!/bin/sh
# Two steno binaries side by side in one run: `steno bench` of each in turn,
# PAIRS times, on the same model and audio (extra arguments go to steno bench,
# e.g. --batch 64); environment such as STENO_BENCH_TOKENS=32 applies to both.
# Only ratios within one run count (docs/perf.md).
#   bench/ab.sh OLD_STENO NEW_STENO MODEL AUDIO [PAIRS 2] [RUNS 10] [steno bench options...]
set -e
old=${1:?usage: ab.sh OLD_STENO NEW_STENO MODEL AUDIO [PAIRS] [RUNS] [options]}
new=${2:?} model=${3:?} audio=${4:?} pairs=${5:-2} runs=${6:-10}
shift 4
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
i=0
while [ $i -lt "$pairs" ]; do
  for s in "$old" "$new"; do
    echo "-- $s"
    "$s" bench "$model" "$audio" -n "$runs" "$@" 2>&1 | grep "^warm\|^stages"
  done
  i=$((i + 1))
done
