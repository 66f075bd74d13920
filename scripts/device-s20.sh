#!/bin/bash
# Issue 16, twentieth session: the overlapped warp-specialized backward
# (P while dP^T runs, dS while dV runs, dK under the dQ reduction) beside
# the cooperative kernel and cuDNN: gradient check, sanitizers, a same-run
# A/B of backward time (bench_kernel_ab.py, A B B A), backward TFLOP/s
# beside SDPA's flash and cuDNN with what is left of the call; the backward
# suite on it first.
# Carry build/kernels.tar.xz, build/kernels-ws2.tar.xz (scripts/
# build-ws-backward.py build/kernels-ws2), the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/kernels-ws2 ] || tar -xJf build/kernels-ws2.tar.xz -C build
WS=$PWD/build/kernels-ws2
LIMIT=${LIMIT:-580}
left() { echo $(( LIMIT - $(elapsed) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== check_backward (WS) at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=$WS timeout 90 $PY bench/check_backward.py 2>&1 | tail -9
if [ "${SUITE:-1}" = 1 ]; then
  echo "== test_gpu_backward.py (WS first) at $(elapsed) s, $(left) s left"
  FLASHMLIR_KERNEL_DIR=$WS timeout ${SUITE_S:-220} $PY -m pytest -q -x -p no:cacheprovider \
    python/tests/test_gpu_backward.py 2>&1 | tail -15
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  IFS=, read -ra cases <<< "${SAN_ARGS:-128 causal}"
  for args in "${cases[@]}"; do
    for tool in memcheck racecheck; do
      echo "== $tool $args at $(elapsed) s"
      FLASHMLIR_KERNEL_DIR=$WS timeout 60 compute-sanitizer --tool $tool --kernel-name kns=fa_bwd_kernel \
        --print-limit 3 $PY scripts/sanitize-bwd.py $args 2>&1 \
        | grep -E "max err|ERROR SUMMARY|RACECHECK SUMMARY|hazard|Invalid" | head -6
    done
  done
fi
echo "== A/B cooperative (A) vs WS (B) at $(elapsed) s"
timeout ${AB_S:-150} $PY bench/bench_kernel_ab.py --a build/kernels --b $WS --direction bwd \
  --headdims 64 128 --seqlens 2048 8192 16384 --masks full causal --rep 100 \
  --json $OUT/ab-coop-ws.json 2>&1 | tail -14
if [ $(left) -gt 60 ]; then
echo "== bench_attention bwd (WS first) at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=$WS timeout $(left) $PY bench/bench_attention.py --out "$OUT/bench" \
  --direction bwd --headdims 64 128 --dtypes bf16 --no-flex --seqlens 2048 8192 16384 \
  --time-budget-s $(( $(left) - 20 )) 2>&1 | tail -16
fi
echo "== done at $(elapsed) s"
