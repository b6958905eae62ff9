#!/usr/bin/env bash
# One GPU machine session's checks and benchmarks in one go, with a build made
# elsewhere (cmake -DSTENO_FFMPEG=OFF; bench/gemm_speed and bench/row_kernels
# compiled into BUILD_DIR by bench/build_benches.sh): the devices and their fast-kernel
# probes, the test programs, the kernel benchmarks, then Parakeet 0.6B and
# Whisper turbo shapes against transformers. Each step has a time limit, so a
# slow one cannot take the others with it; every output lands in OUT_DIR.
#   bash bench/gpu_run.sh BUILD_DIR OUT_DIR CLIP.wav
set -u
build=${1:?usage: gpu_run.sh BUILD_DIR OUT_DIR CLIP.wav} out=${2:?} clip=${3:?}
cd "$(dirname "$0")/.."
mkdir -p "$out"
step() { # step SECONDS FILE COMMAND...: runs it, says how it went
  local limit=$1 file=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >>"$out/$file" 2>&1
  echo "$(date +%T) exit $? after $((SECONDS - t0)) s: $*" | tee -a "$out/steps.txt"
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv >"$out/devices.txt" 2>&1
step 40 devices.txt env STENO_LOG=info "$build/steno" devices
step 150 tests.txt bash tests/run_prebuilt.sh "$build" "$out/tests.log"
step 50 kernels.txt "$build/gemm_speed" 5
step 20 kernels.txt "$build/row_kernels" 138 20

step 110 parakeet.jsonl python3 bench/parakeet_real.py --steno "$build/steno" --clip "$clip" --runs 5 --long-runs 0
step 110 whisper.jsonl python3 bench/whisper_real.py --steno "$build/steno" --clip "$clip" --runs 5
