#!/bin/bash
# Issue 16, twenty-first session, last call: the default set with the
# D = 64 warp-specialized backward (masked / deterministic) and the
# fixed-order deterministic mode. GPU suites, gradient check, deterministic
# against fast beside FA2 / cuDNN at D = 64 and 128 (two rounds, order
# reversed), then ncu of the D = 128 WS backward beside cuDNN's
# (device-s18-ncu-bwd.sh, N = 8192). Carry build/kernels.tar.xz and the
# launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels && tar -xJf build/kernels.tar.xz -C build
LIMIT=${LIMIT:-585}
left() { echo $(( LIMIT - $(elapsed) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "WS backward manifests: $(grep -l warp_specialized build/kernels/fa_bwd_*sm90a.json | wc -l)," \
  "ordered: $(grep -l '"dq_order"' build/kernels/*.json | wc -l)"
echo "== GPU suites at $(elapsed) s"
FLASHMLIR_REQUIRE_KERNELS=1 timeout 200 $PY -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu_backward.py python/tests/test_gpu_attention.py 2>&1 | tail -3
echo "== check_backward at $(elapsed) s"
timeout 90 $PY bench/check_backward.py 2>&1 | grep -v execution_engine | tail -1
echo "== deterministic vs fast at $(elapsed) s"
timeout ${BENCH_S:-200} $PY bench/check_backward.py --bench --headdims 64 128 \
  --seqlens ${SEQLENS:-2048 4096 8192 16384} 2>&1 | tail -16
if [ $(left) -gt 150 ]; then
  echo "== ncu at $(elapsed) s"
  timeout $(( $(left) - 5 )) bash scripts/device-s18-ncu-bwd.sh 8192 128 2>&1 | tail -70
fi
echo "== done at $(elapsed) s"
