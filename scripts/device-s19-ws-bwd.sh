#!/bin/bash
# Issue 16: the warp-specialized backward key-block kernel (fa-compile
# --schedule=warp_specialized, scripts/build-ws-backward.py) beside the
# cooperative one on the GPU: gradient checks, the backward suite with the
# WS kernels first on the search path, compute-sanitizer, and a same-run
# A/B of backward TFLOP/s with SDPA's flash and cuDNN.
# Carry build/kernels.tar.xz, build/kernels-ws.tar.xz, the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/kernels-ws ] || tar -xJf build/kernels-ws.tar.xz -C build
WS=$PWD/build/kernels-ws
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== check_backward (WS) at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=$WS timeout 120 $PY bench/check_backward.py 2>&1 | tail -9
if [ "${SANITIZE:-1}" = 1 ]; then
  IFS=, read -ra cases <<< "${SAN_ARGS:-128 causal,64 big,128 det big}"
  for args in "${cases[@]}"; do
    for tool in memcheck racecheck; do
      echo "== $tool $args at $(elapsed) s"
      FLASHMLIR_KERNEL_DIR=$WS timeout 90 compute-sanitizer --tool $tool --kernel-name kns=fa_bwd_kernel \
        --print-limit 3 $PY scripts/sanitize-bwd.py $args 2>&1 \
        | grep -E "max err|ERROR SUMMARY|RACECHECK SUMMARY|hazard|Invalid" | head -6
    done
  done
fi
echo "== bench WS / cooperative / WS at $(elapsed) s"
for mode in ${BENCH_MODES:-ws coop}; do
  dir=""; [ $mode = ws ] && dir=$WS
  echo "-- $mode (FLASHMLIR_KERNEL_DIR=${dir:-unset})"
  FLASHMLIR_KERNEL_DIR=$dir timeout ${BENCH_S:-150} $PY bench/check_backward.py --bench 2>&1 | tail -12
done
if [ "${SUITE:-1}" = 1 ]; then
  echo "== test_gpu_backward.py (WS first) at $(elapsed) s"
  FLASHMLIR_KERNEL_DIR=$WS timeout ${SUITE_S:-240} $PY -m pytest -q -x -p no:cacheprovider \
    python/tests/test_gpu_backward.py 2>&1 | tail -15
fi
echo "== done at $(elapsed) s"
