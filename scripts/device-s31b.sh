#!/bin/bash
# Thirty-first session, issue 16's deterministic bar: without a mask the
# fixed dQ order rotates (each key block starts at its own query block and
# waits for its rank; up to 64 key blocks per head) instead of descending
# from query block 0 (a ramp of nKB iterations). KERNELS
# (build/kernels-s31.tar.xz: main's set with the 4 unmasked deterministic
# sm_90a backwards rotated, the other 360 byte-identical), OLD
# (build/kernels.tar.xz, main's). The backward suite (deterministic bitwise
# over 50 runs included), det / fast beside FA2 and cuDNN
# (check_backward.py --bench), the A/B, the sanitizers on an unmasked
# deterministic backward, issue 12's variants (bench_variants.py). On
# an H200, issue 10's run instead. Log:
# $OUT/log.txt.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash "$(dirname "$0")/device-s31-h200.sh"
fi
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-s31.tar.xz}"
unpack_kernels build/kernels-old "${OLD:-build/kernels.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu_suites 150 test_gpu_backward
if [ "$(left)" -gt 110 ]; then
  echo "== check_backward --bench at $(elapsed) s"
  FLASHMLIR_KERNEL_DIR=build/kernels timeout 100 $PY bench/check_backward.py --bench \
    --seqlens 2048 8192 16384 2>&1 | grep -v execution_engine | tail -14
fi
if [ "$(left)" -gt 70 ]; then
  echo "== A/B deterministic, main (A) vs rotated (B) at $(elapsed) s"
  timeout 60 $PY bench/bench_kernel_ab.py --a build/kernels-old --b build/kernels --deterministic \
    --direction bwd --headdims 64 128 --seqlens 2048 8192 --masks full \
    --rep 25 --json $OUT/ab-det.json 2>&1 | grep "B/A"
fi
[ "$(left)" -gt 130 ] && FLASHMLIR_KERNEL_DIR=build/kernels sanitize_backward "64 det big"
if [ "$(left)" -gt 40 ]; then
  echo "== bench_variants at $(elapsed) s"
  timeout $(( $(left) - 5 )) $PY bench/bench_variants.py --headdims 64 128 --seqlens 4096 16384 \
    --json "$OUT/variants.json" 2>&1 | grep -v Warn | tail -10
fi
echo "== done at $(elapsed) s"
