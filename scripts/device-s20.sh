#!/bin/bash
# Issue 16, twentieth session: the warp-specialized backward with
# FlashAttention-3's overlap (P while dP^T runs, dS while dV runs, dK
# after dQ) and dQ handed to a producer warp that adds it by bulk tensor
# reductions (build/kernels-ws3), on one call: gradient check, sanitizers,
# backward TFLOP/s beside SDPA's flash and cuDNN, a same-run A/B against
# the cooperative kernel (bench_kernel_ab.py, A B B A), then the backward
# suite with what is left.
# Carry build/kernels.tar.xz, build/kernels-ws3.tar.xz (scripts/
# build-ws-backward.py build/kernels-ws3), the launcher. Any folder of WS
# kernels: WSNAME=<folder under build/> (the nineteenth session's
# device-s19-ws-bwd.sh ran the same steps on kernels-ws).
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
WSNAME=${WSNAME:-kernels-ws3}
[ -d build/$WSNAME ] || tar -xJf build/$WSNAME.tar.xz -C build
WS=$PWD/build/$WSNAME
LIMIT=${LIMIT:-585}
left() { echo $(( LIMIT - $(elapsed) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== check_backward ($WSNAME) at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=$WS timeout 90 $PY bench/check_backward.py 2>&1 | tail -9
if [ "${SANITIZE:-1}" = 1 ]; then
  FLASHMLIR_KERNEL_DIR=$WS sanitize_backward "${SAN_ARGS:-128 causal}"
fi
echo "== check_backward --bench ($WSNAME first: ours, ours_det) at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=$WS timeout ${BENCH_S:-150} $PY bench/check_backward.py --bench 2>&1 | tail -12
echo "== A/B cooperative (A) vs $WSNAME (B) at $(elapsed) s"
timeout ${AB_S:-100} $PY bench/bench_kernel_ab.py --a build/kernels --b $WS --direction bwd \
  --headdims ${AB_D:-128} --seqlens 2048 8192 16384 --masks full causal --rep 100 \
  --json $OUT/ab-coop-ws.json 2>&1 | tail -8
if [ "${SUITE:-1}" = 1 ] && [ $(left) -gt 40 ]; then
  echo "== test_gpu_backward.py ($WSNAME first) at $(elapsed) s, $(left) s left"
  FLASHMLIR_KERNEL_DIR=$WS timeout $(left) $PY -m pytest -q -x -p no:cacheprovider \
    python/tests/test_gpu_backward.py 2>&1 | tail -15
fi
echo "== done at $(elapsed) s"
