#!/bin/sh
# gemm_cm2: gemm_tc's contract for its split-k pieces — part[z][m][n] = the
# sum over k from z·kc to min(k, (z + 1)·kc) of a[m][k]·W[n][k], summed and
# finished (bias, epilogue, dual outputs, a fused LayerNorm) by gemm_reduce —
# through VK_NV_cooperative_matrix2: each workgroup makes one BM × BN tile
# with workgroup-scope matrices, A's and W's BM × BK and BN × BK slices loaded
# by tensor addressing (W through a transposing view) and accumulated in f32,
# the scheduling of those loads left to the driver. Out-of-bounds loads read
# 0 and out-of-bounds stores are dropped, so any m, n and k work.
#
# a: f16 [m][lda] (pack.comp's copy, gpu_gemm's a16), binding 0; W: f16
# [n][wk] (F16 as stored, or gpu_linear's w16), binding 3; part: f32, binding
# 5. Push constants: gemm_tc's (m, n, k, mode, alpha, dual, lda, wk, splits,
# kc; mode, alpha, dual and splits are the reduce's). Spec constants:
# gemm_tc's numbering — 1 SG_M, 2 SG_N, 3 TM, 4 TN (BM = SG_M·TM·16, BN =
# SG_N·TN·16), 5 the workgroup's invocations, 6 BK; 0 and 7 unused.
#
# Written as SPIR-V assembly because Debian 12's glslang knows neither
# GL_KHR_cooperative_matrix nor GL_NV_cooperative_matrix2, and its spirv-as
# neither's instructions by name: those are raw words here (`!N`), their
# opcodes and operands from the SPIR-V grammar (SPV_KHR_cooperative_matrix,
# SPV_NV_cooperative_matrix2, SPV_NV_tensor_addressing). Debian 12's
# spirv-val cannot check them (a newer one passed this module); the probe
# checks the products on the device before the kernel is used. Ids are
# numeric (--preserve-numeric-ids) so that raw words can name them.
#   src/gpu/kernels/gemm_cm2.sh OUT.spv [UNROLL] [CLAMP] [ALIGN]
# UNROLL (4): BK steps per trip of the loop (any k still: steps past k load
# zeros). CLAMP 1 (the default): out-of-bounds loads read 0; 0: a's and W's
# loads unchecked (the clamp mode Undefined): right where n is a multiple
# of BN and each piece of k a multiple of BK·UNROLL, with a's rows readable
# up to the next multiple of BM (what they hold there reaches only outputs
# past m). Stores are always checked: outputs past m or n are dropped. ALIGN 1: lda and wk are taken as
# multiples of 8 (their low bits cleared), so the compiler may assume rows
# start on 16 bytes; 0 (the default): any strides.
set -e
out=${1:?usage: gemm_cm2.sh OUT.spv [UNROLL] [CLAMP]}
unroll=${2:-4}
clamp=${3:-1}
align=${4:-0}
asm=$(mktemp)
trap 'rm -f "$asm"' EXIT

# raw OPCODE WORD...: one instruction as raw words (the first word holds the
# word count and the opcode).
raw() {
  op=$1
  shift
  printf '!0x%08x' $((($# + 1) << 16 | op))
  for w in "$@"; do printf ' !%s' "$w"; done
  printf '\n'
}

{
  cat <<'EOF'
OpCapability Shader
OpCapability Float16
OpCapability StorageBuffer16BitAccess
OpCapability VulkanMemoryModel
EOF
  raw 17 6022 # OpCapability CooperativeMatrixKHR
  raw 17 5433 # OpCapability CooperativeMatrixTensorAddressingNV
  raw 17 5439 # OpCapability TensorAddressingNV
  cat <<'EOF'
OpExtension "SPV_KHR_cooperative_matrix"
OpExtension "SPV_NV_cooperative_matrix2"
OpExtension "SPV_NV_tensor_addressing"
OpMemoryModel Logical Vulkan
OpEntryPoint GLCompute %4 "main" %13 %41 %57 %85 %115
OpExecutionMode %4 LocalSize 1 1 1
OpDecorate %7 SpecId 5
OpDecorate %9 BuiltIn WorkgroupSize
OpDecorate %13 BuiltIn WorkgroupId
OpDecorate %340 SpecId 1
OpDecorate %341 SpecId 2
OpDecorate %342 SpecId 3
OpDecorate %343 SpecId 4
OpDecorate %50 SpecId 6
OpMemberDecorate %39 0 Offset 0
OpMemberDecorate %39 1 Offset 4
OpMemberDecorate %39 2 Offset 8
OpMemberDecorate %39 3 Offset 12
OpMemberDecorate %39 4 Offset 16
OpMemberDecorate %39 5 Offset 20
OpMemberDecorate %39 6 Offset 24
OpMemberDecorate %39 7 Offset 28
OpMemberDecorate %39 8 Offset 32
OpMemberDecorate %39 9 Offset 36
OpDecorate %39 Block
OpDecorate %54 ArrayStride 2
OpMemberDecorate %55 0 NonWritable
OpMemberDecorate %55 0 Offset 0
OpDecorate %55 Block
OpDecorate %57 DescriptorSet 0
OpDecorate %57 Binding 0
OpDecorate %82 ArrayStride 2
OpMemberDecorate %83 0 NonWritable
OpMemberDecorate %83 0 Offset 0
OpDecorate %83 Block
OpDecorate %85 DescriptorSet 0
OpDecorate %85 Binding 3
OpDecorate %112 ArrayStride 4
OpMemberDecorate %113 0 NonReadable
OpMemberDecorate %113 0 Offset 0
OpDecorate %113 Block
OpDecorate %115 DescriptorSet 0
OpDecorate %115 Binding 5
%2 = OpTypeVoid
%3 = OpTypeFunction %2
%6 = OpTypeInt 32 0
%7 = OpSpecConstant %6 256
%8 = OpConstant %6 1
%11 = OpTypeVector %6 3
%9 = OpSpecConstantComposite %11 %7 %8 %8
%12 = OpTypePointer Input %11
%13 = OpVariable %12 Input
%14 = OpTypePointer Input %6
%20 = OpConstant %6 0
%340 = OpSpecConstant %6 2
%341 = OpSpecConstant %6 4
%342 = OpSpecConstant %6 4
%343 = OpSpecConstant %6 2
%344 = OpConstant %6 16
%345 = OpSpecConstantOp %6 IMul %340 %342
%17 = OpSpecConstantOp %6 IMul %345 %344
%346 = OpSpecConstantOp %6 IMul %341 %343
%23 = OpSpecConstantOp %6 IMul %346 %344
%25 = OpTypeFloat 32
%30 = OpConstant %25 0
%39 = OpTypeStruct %6 %6 %6 %6 %25 %6 %6 %6 %6 %6
%40 = OpTypePointer PushConstant %39
%41 = OpVariable %40 PushConstant
%42 = OpTypeInt 32 1
%43 = OpConstant %42 2
%44 = OpTypePointer PushConstant %6
%47 = OpTypeBool
%49 = OpTypeFloat 16
%50 = OpSpecConstant %6 32
%54 = OpTypeRuntimeArray %49
%55 = OpTypeStruct %54
%56 = OpTypePointer StorageBuffer %55
%57 = OpVariable %56 StorageBuffer
%58 = OpConstant %42 0
%65 = OpTypePointer StorageBuffer %49
%75 = OpConstantFalse %47
%82 = OpTypeRuntimeArray %49
%83 = OpTypeStruct %82
%84 = OpTypePointer StorageBuffer %83
%85 = OpVariable %84 StorageBuffer
%112 = OpTypeRuntimeArray %25
%113 = OpTypeStruct %112
%114 = OpTypePointer StorageBuffer %113
%115 = OpVariable %114 StorageBuffer
%117 = OpConstant %42 1
%118 = OpConstant %42 9
%119 = OpConstant %42 6
%120 = OpConstant %42 7
%123 = OpTypePointer StorageBuffer %25
%300 = OpConstant %6 2
%302 = OpConstant %6 1
%303 = OpConstant %6 2
%472 = OpConstant %6 4294967288
EOF
  echo "%305 = OpConstant %6 $unroll"
  echo "%304 = OpSpecConstantOp %6 IMul %50 %305"
  # scope Workgroup (2); uses A 0 (%20), B 1 (%302), accumulator 2 (%303)
  raw 4456 310 49 300 17 50 20  # %310 A: BM × BK f16
  raw 4456 311 49 300 50 23 302 # %311 B: BK × BN f16
  raw 4456 312 25 300 17 23 303 # %312 accumulator: BM × BN f32
  echo "%313 = OpConstantComposite %312 %30"
  echo "%314 = OpUndef %310"
  echo "%315 = OpUndef %311"
  # tensor layouts of 2 dimensions (%300 = 2), clamp mode Constant (1, %302)
  # or Undefined (0, %20)
  # C's layout is always clamped (stores past m or n are dropped): %320
  # itself where a's and W's are, else %321
  if [ "$clamp" = 1 ]; then
    raw 5370 320 300 302
    ct=320
  else
    raw 5370 320 300 20
    raw 5370 321 300 302
    ct=321
  fi
  # the transposing view: 2 dimensions, no dimensions of its own, order 1 0
  raw 5371 325 300 75 302 20
  # (a raw instruction must not follow one whose operands are variadic or
  # optional, such as OpAccessChain or OpLoad: spirv-as would take its words
  # as more operands of that one; hence the OpCopyObject below)
  cat <<'EOF'
%4 = OpFunction %2 None %3
%5 = OpLabel
%15 = OpAccessChain %14 %13 %8
%16 = OpLoad %6 %15
%18 = OpIMul %6 %16 %17
%21 = OpAccessChain %14 %13 %20
%22 = OpLoad %6 %21
%24 = OpIMul %6 %22 %23
%400 = OpAccessChain %44 %41 %58
%401 = OpLoad %6 %400
%402 = OpAccessChain %44 %41 %117
%403 = OpLoad %6 %402
%404 = OpAccessChain %44 %41 %43
%405 = OpLoad %6 %404
%456 = OpAccessChain %44 %41 %119
%457 = OpLoad %6 %456
%454 = OpAccessChain %44 %41 %120
%455 = OpLoad %6 %454
%458 = OpAccessChain %44 %41 %118
%460 = OpLoad %6 %458
%461 = OpAccessChain %14 %13 %300
%462 = OpLoad %6 %461
%463 = OpIMul %6 %462 %460
%464 = OpIAdd %6 %463 %460
%468 = OpULessThan %47 %464 %405
%465 = OpSelect %6 %468 %464 %405
%466 = OpIMul %6 %462 %401
%467 = OpIMul %6 %466 %403
%420 = OpAccessChain %65 %57 %58 %20
%421 = OpAccessChain %65 %85 %58 %20
%422 = OpAccessChain %123 %115 %58 %467
%409 = OpCopyObject %6 %405
EOF
  lda=457 wk=455
  if [ "$align" = 1 ]; then
    echo "%470 = OpBitwiseAnd %6 %457 %472"
    echo "%471 = OpBitwiseAnd %6 %455 %472"
    lda=470 wk=471
  fi
  raw 5372 320 410                 # A's layout
  raw 5373 320 411 410 401 465     #   m × this piece's end of k
  raw 5374 320 406 411 $lda 302    #   strides lda, 1
  raw 5372 320 412                 # B's layout
  raw 5373 320 413 412 403 465     #   n × the same
  raw 5374 320 407 413 $wk 302     #   strides wk, 1
  raw 5372 $ct 414                 # C's layout
  raw 5373 $ct 415 414 401 403     #   m × n
  raw 5374 $ct 408 415 403 302     #   strides n, 1
  raw 5377 325 416                 # the transposing view
  cat <<'EOF'
OpBranch %33
%33 = OpLabel
%430 = OpPhi %6 %463 %5 %440 %36
%431 = OpPhi %312 %313 %5 %439 %36
OpLoopMerge %35 %36 None
OpBranch %37
%37 = OpLabel
%432 = OpULessThan %47 %430 %465
OpBranchConditional %432 %34 %35
%34 = OpLabel
EOF
  # UNROLL steps of BK: step s reads k0 + s·BK (ids 1000 + 10 s …)
  acc=431
  s=0
  while [ "$s" -lt "$unroll" ]; do
    b=$((1000 + 10 * s))
    if [ "$s" -eq 0 ]; then
      kk=430
    else
      kk=$((b + 8))
      echo "%$((b + 9)) = OpIMul %6 %50 %$((b + 7))"
      echo "%$kk = OpIAdd %6 %430 %$((b + 9))"
    fi
    raw 5375 320 $((b + 1)) 406 18 17 $kk 50            # A's slice: rows row0 + BM, columns k + BK
    raw 5367 310 $((b + 2)) 420 314 $((b + 1)) 0 0     # load A
    raw 5375 320 $((b + 3)) 407 24 23 $kk 50            # B's slice: rows col0 + BN, columns k + BK
    raw 5367 311 $((b + 4)) 421 315 $((b + 3)) 0 1 416 # load B through the view
    raw 4459 312 $((b + 5)) $((b + 2)) $((b + 4)) $acc  # accumulate
    acc=$((b + 5))
    s=$((s + 1))
  done
  cat <<EOF
%439 = OpCopyObject %312 %$acc
OpBranch %36
%36 = OpLabel
%440 = OpIAdd %6 %430 %304
OpBranch %33
%35 = OpLabel
EOF
  raw 5375 $ct 450 408 18 17 24 23 # C's slice: rows row0 + BM, columns col0 + BN
  raw 5368 422 431 450 0 0         # store C
  cat <<'EOF'
OpReturn
OpFunctionEnd
EOF
} >"$asm"
# for s ≥ 1 the step's offset s·BK: constants made here
if [ "$unroll" -gt 1 ]; then
  s=1
  consts=
  while [ "$s" -lt "$unroll" ]; do
    consts="$consts%$((1007 + 10 * s)) = OpConstant %6 $s\n"
    s=$((s + 1))
  done
  # insert the constants before the function
  awk -v c="$consts" '/^%4 = OpFunction/ { printf "%s", c } { print }' "$asm" | sed 's/\\n/\n/g' >"$asm.2"
  mv "$asm.2" "$asm"
fi
# An id no instruction uses, above every raw one: spirv-as sets the module's
# id bound from the ids it knows.
sed -i '/^%4 = OpFunction/i %1999 = OpConstant %6 1999' "$asm"
"${SPIRV_AS:-spirv-as}" --preserve-numeric-ids --target-env spv1.5 "$asm" -o "$out"
