#!/bin/sh
# gemm_cm2u: gemm_cm2 (gemm_cm2.sh) with a's and W's loads unchecked (CLAMP
# 0: ggml's fast path for whole tiles), lda and wk taken as multiples of 8
# (ALIGN 1), 4 steps of BK a trip. Right only where n is a multiple of BN, k
# and each piece of it multiples of 4·BK, and a's rows readable up to the
# next multiple of BM: gpu_gemm's plan takes it only there (linear.c).
#   src/gpu/kernels/gemm_cm2u.sh OUT.spv
exec sh "$(dirname "$0")/gemm_cm2.sh" "${1:?usage: gemm_cm2u.sh OUT.spv}" 4 0 1
