#!/bin/bash
# Issue 16, twenty-second session: the warp-specialized backward with
# lse2 / delta through a shared-memory ring (cp.async two iterations ahead)
# folded into the S^T / dP^T accumulators (build/kernels) against the
# previous kernels (build/kernels-base: the same set with main's backward
# kernels). Gradient check, sanitizers, same-run A/B (A B B A), the
# backward beside cuDNN / FA2 (check_backward --bench), then the backward
# suite with what is left. Carry build/kernels.tar.xz,
# build/kernels-base.tar.xz and the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels build/kernels-base
tar -xJf build/kernels.tar.xz -C build
tar -xJf build/kernels-base.tar.xz -C build
LIMIT=${LIMIT:-585}
left() { echo $(( LIMIT - $(elapsed) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== check_backward at $(elapsed) s"
timeout 90 $PY bench/check_backward.py 2>&1 | grep -v execution_engine | tail -9
if [ "${SANITIZE:-1}" = 1 ]; then
  sanitize_backward "${SAN_ARGS:-128 causal,64 det}"
fi
echo "== A/B base (A) vs ring (B) at $(elapsed) s"
timeout ${AB_S:-150} $PY bench/bench_kernel_ab.py --a build/kernels-base --b build/kernels \
  --direction bwd --headdims ${AB_D:-128 64} --seqlens ${SEQLENS:-2048 8192 16384} \
  --masks full causal --rep 100 --json $OUT/ab-base-ring.json 2>&1 | tail -14
echo "== check_backward --bench at $(elapsed) s"
timeout ${BENCH_S:-150} $PY bench/check_backward.py --bench --headdims 64 128 \
  --seqlens ${SEQLENS:-2048 8192 16384} 2>&1 | tail -16
if [ "${SUITE:-1}" = 1 ] && [ $(left) -gt 40 ]; then
  echo "== test_gpu_backward.py at $(elapsed) s, $(left) s left"
  FLASHMLIR_REQUIRE_KERNELS=1 timeout $(left) $PY -m pytest -q -x -p no:cacheprovider \
    python/tests/test_gpu_backward.py 2>&1 | tail -6
fi
echo "== done at $(elapsed) s"
