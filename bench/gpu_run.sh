#!/usr/bin/env bash
# One GPU machine session's checks and benchmarks in one go, with a build made
# elsewhere (cmake -DSTENO_FFMPEG=OFF; the benches compiled into BUILD_DIR by
# bench/build_benches.sh): the devices and their fast-kernel
# probes, the test programs, the kernel benchmarks, then Parakeet 0.6B and
# Whisper turbo shapes against transformers. Each step has a time limit, so a
# slow one cannot take the others with it; every output lands in OUT_DIR.
#   [STEPS="checks models" (or cm2)] [PEER=transcribe-bench] [LONG_RUNS=0] [COMPILE=1] \
#     bash bench/gpu_run.sh BUILD_DIR OUT_DIR CLIP.wav
# checks: devices, tests, kernel benchmarks. models: Parakeet against
# transformers (and transcribe.cpp where PEER names its transcribe-bench, on the
# same GGUF and clip; with COMPILE=1 torch.compile too, and the speech-rate copy of
# the file), a kernel profile of steno's Parakeet encoder (STENO_PROFILE=1), then
# Whisper against transformers and a profile of 32 tokens (STENO_BENCH_TOKENS=32: the
# random weights never end a window, so without it a call decodes to the limit).
# cm2: gemm_cm2's driver query and a sweep of its variants (bench/cm2_gemm.c,
# the variants build_benches.sh assembled) over the encoders' shapes, then
# gemm_tc's own tiles at the same shapes (gemm_tc_sweep wide and own), in one
# call so that only ratios within it count; not among the default steps.
# switches: the runtime switches A/B'd with the same binary in one call (after
# models, whose files they use): STENO_FEATURES=cpu against the default (the
# log-mel on the GPU) on Parakeet's speech-rate file (COMPILE=1 made it), one
# clip and a batch of 64, and on Whisper (32 tokens); STENO_ATTENTION_PRECISION=1
# and STENO_GEMM_CM2=1 against the default on Whisper and Parakeet; not among
# the default steps.
# Test programs can take over a minute there (test_gemm ~70 s): give them room.
# The GPU machine has no libmicrohttpd, which the steno CLI links (steno serve):
# besides the Vulkan loader's packages, bring libmicrohttpd12 in the same .gl
# folder of .deb files unpacked at the start of each call, and libcjson1 too
# (the loader named only the first library it missed). The fifteenth session
# lost a call's CLI runs to it; the test programs do not need them.
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
steps=${STEPS:-checks models}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv >"$out/devices.txt" 2>&1
if [[ $steps == *checks* ]]; then
  step 40 devices.txt env STENO_LOG=info "$build/steno" devices
  step 150 tests.txt bash tests/run_prebuilt.sh "$build" "$out/tests.log"
  step 50 kernels.txt "$build/gemm_speed" 5
  step 20 kernels.txt "$build/row_kernels" 138 20
  step 40 kernels.txt "$build/gemm_tc_sweep" 50 138
  step 60 kernels.txt "$build/attention_speed" 10
fi
if [[ $steps == *cm2* ]]; then
  step 30 cm2.txt "$build/cm2_gemm" query
  # unclamped variants need n % BN == 0 and pieces of k of BK·UNROLL (a's
  # rows are padded by the bench); every shape here is so for the tiles below
  shapes="4096x4096x4096 1536x5120x1280 1536x1280x5120 1536x1280x1280 8192x4096x1024
    1500x5120x1280 1500x1280x1280 138x3072x1024/2 138x4096x1024/2 138x1024x1024/4"
  for run in "u4c1a0 128 128 32 256" "u4c1a1 128 128 64 256" "u4c0a1 128 128 64 256" \
    "u8c0a1 128 128 32 256" "u4c0a1 128 256 64 256" "u4c0a1 256 128 64 256" \
    "u4c0a1 64 64 64 128" "u4c0a1 128 128 64 128"; do
    set -- $run
    # shellcheck disable=SC2086
    step 30 cm2.txt stdbuf -oL "$build/cm2_gemm" run "$build/cm2v/$1.spv" "$2" "$3" "$4" "$5" $shapes
  done
  step 60 cm2.txt "$build/gemm_tc_sweep" 20 138 wide
  step 40 cm2.txt "$build/gemm_tc_sweep" 20 138 own
fi
if [[ $steps == *models* ]]; then
  compile=()
  [ -n "${COMPILE:-}" ] && compile=(--compile)
  step 300 parakeet.jsonl python3 bench/parakeet_real.py --steno "$build/steno" --clip "$clip" \
    --runs 5 --long-runs "${LONG_RUNS:-0}" "${compile[@]}" ${COMPILE:+--speech-rate 30}
  model=/tmp/parakeet_real/parakeet_tdt_0.6b_random-F16.gguf
  step 60 profile.txt env STENO_PROFILE=1 "$build/steno" bench "$model" "$clip" -n 3
  if [ -n "${PEER:-}" ]; then
    step 120 peer.jsonl python3 bench/peer_transcribe_cpp.py --binary "$PEER" --model "$model" \
      --clip "$clip" --runs 5
  fi
  step 200 whisper.jsonl python3 bench/whisper_real.py --steno "$build/steno" --clip "$clip" --runs 5 \
    "${compile[@]}"
  wmodel=$(ls /tmp/whisper_real/*.gguf 2>/dev/null | head -1)
  [ -n "$wmodel" ] && step 60 profile_whisper.txt env STENO_PROFILE=1 STENO_BENCH_TOKENS=32 \
    "$build/steno" bench "$wmodel" "$clip" -n 3
fi
if [[ $steps == *switches* ]]; then
  wrap() { # wrap NAME VAR=VALUE: a steno that runs with that switch
    printf '#!/bin/sh\nexport %s\nexec "%s" "$@"\n' "$2" "$(realpath "$build/steno")" >"$out/$1"
    chmod +x "$out/$1"
  }
  wrap steno-fcpu STENO_FEATURES=cpu
  wrap steno-p1 STENO_ATTENTION_PRECISION=1
  wrap steno-cm2 STENO_GEMM_CM2=1
  model=/tmp/parakeet_real/parakeet_tdt_0.6b_random-F16.gguf
  speech=/tmp/parakeet_real/parakeet_tdt_0.6b_random-F16-speech30.gguf
  [ -f "$speech" ] || speech=$model
  step 90 switches.txt sh bench/ab.sh "$out/steno-fcpu" "$build/steno" "$speech" "$clip" 2 20
  step 120 switches.txt sh bench/ab.sh "$out/steno-fcpu" "$build/steno" "$speech" "$clip" 2 3 \
    --batch 64
  step 90 switches.txt sh bench/ab.sh "$build/steno" "$out/steno-cm2" "$speech" "$clip" 2 20
  wmodel=$(ls /tmp/whisper_real/*.gguf 2>/dev/null | head -1)
  if [ -n "$wmodel" ]; then
    step 90 switches.txt env STENO_BENCH_TOKENS=32 sh bench/ab.sh "$out/steno-fcpu" "$build/steno" \
      "$wmodel" "$clip" 2 5
    step 90 switches.txt env STENO_BENCH_TOKENS=32 sh bench/ab.sh "$build/steno" "$out/steno-p1" \
      "$wmodel" "$clip" 2 5
    step 90 switches.txt env STENO_BENCH_TOKENS=32 sh bench/ab.sh "$build/steno" \
      "$out/steno-cm2" "$wmodel" "$clip" 2 5
  fi
fi
