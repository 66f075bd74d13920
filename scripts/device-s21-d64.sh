#!/bin/bash
# Issue 16, twenty-first session: the warp-specialized backward at D = 64
# on 128 x 128 tiles, 8 consumer warps (two dQ units per iteration, one per
# warpgroup, so the dQ warp and the fixed-order deterministic mode apply),
# built by `scripts/build-ws-backward.py build/kernels-d64ws --head-dim 64
# --tiles 128,128,8`. Carry build/kernels.tar.xz, build/kernels-d64ws.tar.xz
# and the launcher. Gradient check, sanitizers on the ordered D = 64
# kernels, the backward suite with them first, A/B against the default
# (cooperative) D = 64 kernels, deterministic against fast beside FA2 /
# cuDNN (two rounds, order reversed).
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels build/kernels-d64ws
tar -xJf build/kernels.tar.xz -C build
tar -xJf build/kernels-d64ws.tar.xz -C build
WS=build/kernels-d64ws
LIMIT=${LIMIT:-585}
left() { echo $(( LIMIT - $(elapsed) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== check_backward (D = 64 WS first) at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=$WS timeout 90 $PY bench/check_backward.py 2>&1 | grep -v execution_engine | tail -8
FLASHMLIR_KERNEL_DIR=$WS sanitize_backward "${SAN_ARGS:-64 det,64 causal det big}"
echo "== backward suite (D = 64 WS first) at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=$WS FLASHMLIR_REQUIRE_KERNELS=1 timeout ${SUITE_S:-150} $PY -m pytest -q \
  -p no:cacheprovider python/tests/test_gpu_backward.py 2>&1 | tail -3
echo "== A/B default (A) vs D = 64 WS (B) at $(elapsed) s"
timeout ${AB_S:-120} $PY bench/bench_kernel_ab.py --a build/kernels --b $WS --direction bwd \
  --headdims 64 --seqlens 2048 8192 16384 --masks full causal --rep 60 \
  --json $OUT/ab-d64ws.json 2>&1 | tail -6
echo "== deterministic vs fast (D = 64 WS) at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=$WS timeout $(( $(left) - 5 )) $PY bench/check_backward.py --bench \
  --headdims 64 --seqlens ${SEQLENS:-2048 4096 8192 16384} 2>&1 | tail -8
echo "== done at $(elapsed) s"
