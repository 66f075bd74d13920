#!/bin/bash
# Thirty-first session, issue 12's softcap bar: the softcap's tanh as
# tanh.approx.f32 (faptx.tanh) instead of libdevice's tanhf. KERNELS
# (build/kernels-tanh.tar.xz: main's set with the 22 softcap kernels
# changed; the D = 64 / 128 sm_90a softcap backwards now fit the warp-
# specialized kernel, the D = 64 softcap forward the persistent one), OLD
# (build/kernels-s31.tar.xz, main's before), VAR (build/kernels-var.tar.xz:
# causal softcap forwards, which the default set lacks, with the new tanh).
# Every GPU suite, the sanitizers on softcap backwards, the A/B, then
# bench_variants.py. Log: $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-tanh.tar.xz}"
unpack_kernels build/kernels-old "${OLD:-build/kernels-s31.tar.xz}"
unpack_kernels build/kernels-var "${VAR:-build/kernels-var.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu_suites 120
[ "$(left)" -gt 120 ] && FLASHMLIR_KERNEL_DIR=build/kernels sanitize_backward "128 softcap big"
if [ "$(left)" -gt 60 ]; then
  echo "== A/B softcap 30, main (A) vs tanh.approx (B) at $(elapsed) s"
  timeout 60 $PY bench/bench_kernel_ab.py --a build/kernels-old --b build/kernels --softcap 30 \
    --direction both --headdims 64 128 --seqlens 2048 16384 --masks full causal \
    --rep 25 --json $OUT/ab-softcap.json 2>&1 | grep "B/A"
fi
if [ "$(left)" -gt 30 ]; then
  echo "== bench_variants at $(elapsed) s"
  FLASHMLIR_KERNEL_DIR=build/kernels:build/kernels-var timeout $(( $(left) - 5 )) \
    $PY bench/bench_variants.py --headdims 64 128 --seqlens 2048 4096 16384 \
    --json "$OUT/variants.json" 2>&1 | grep -v Warn | tail -14
fi
echo "== done at $(elapsed) s"
