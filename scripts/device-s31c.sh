#!/bin/bash
# Issue 12's second bar: softcap, sliding window and GQA forwards against
# the plain kernel (bench/bench_variants.py), main's set (KERNELS =
# build/kernels.tar.xz) plus the causal softcap forwards the default set
# lacks (VAR = build/kernels-var.tar.xz: fa-compile --kind=forward
# --causal --softcap, D = 64 / 128 bf16 sm_90a). Log: $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels.tar.xz}"
unpack_kernels build/kernels-var "${VAR:-build/kernels-var.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== bench_variants at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=build/kernels:build/kernels-var timeout $(( $(left) - 5 )) \
  $PY bench/bench_variants.py --headdims 64 128 --seqlens 2048 4096 16384 \
  --json "$OUT/variants.json" 2>&1 | grep -v Warn | tail -24
echo "== done at $(elapsed) s"
