#!/bin/bash
# Issue 16, twenty-first session: the deterministic backward on the
# warp-specialized key-block kernel (dQ added in a fixed order, key blocks
# descending, a semaphore per query block in the dq_order workspace). On
# the default set built with it (carry build/kernels.tar.xz and the
# launcher): gradient check, sanitizers on the ordered kernels, the
# backward suite (deterministic: 50 passes bitwise identical), then
# deterministic against fast beside FA2 / cuDNN (check_backward --bench,
# two rounds, order reversed).
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
# (A warm machine keeps the last call's unpacked set.)
rm -rf build/kernels && tar -xJf build/kernels.tar.xz -C build
LIMIT=${LIMIT:-585}
left() { echo $(( LIMIT - $(elapsed) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "ordered deterministic manifests: $(grep -l '"dq_order"' build/kernels/*.json | wc -l)"
echo "== check_backward at $(elapsed) s"
timeout 90 $PY bench/check_backward.py 2>&1 | tail -9
sanitize_backward "${SAN_ARGS:-128 det,128 causal det big}"
echo "== backward suite at $(elapsed) s"
FLASHMLIR_REQUIRE_KERNELS=1 timeout ${SUITE_S:-150} $PY -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu_backward.py 2>&1 | tail -3
echo "== deterministic vs fast at $(elapsed) s"
timeout $(( $(left) - 5 )) $PY bench/check_backward.py --bench --headdims ${HEADDIMS:-128 64} \
  --seqlens ${SEQLENS:-2048 4096 8192 16384} 2>&1 | tail -16
echo "== done at $(elapsed) s"
