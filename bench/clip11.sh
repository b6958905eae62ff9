#!/bin/sh
# The 11.0 s speech clip the H200 runs time (docs/benchmarks.md, eleventh run on):
# espeak-ng (Debian 12's) speaking a fixed text at 150 words a minute, 16 kHz mono
# 16-bit, cut at 11.0 s. Keeping the text here keeps the clip the same from one
# session to the next (a random model's search steps depend on it).
#   bench/clip11.sh OUT.wav
set -e
out=${1:?usage: clip11.sh OUT.wav}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
espeak-ng -s 150 -w "$tmp/raw.wav" "The quick brown fox jumps over the lazy dog. Speech recognition on your own computer should be fast, accurate and private. This clip is eleven seconds long, and it is used to measure every engine side by side."
sox -D "$tmp/raw.wav" -r 16000 -c 1 -b 16 "$tmp/c16.wav"
sox "$tmp/c16.wav" "$out" trim 0 11.0
