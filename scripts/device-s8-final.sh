#!/bin/bash
# H200, eighth session: the new default kernel set (build/kernels-s8, from
# `python3 -m flashmlir compile -o build/kernels-s8`: the masked D = 128
# sm_90a forwards are the persistent warp-specialized kernel with the
# dynamic tile scheduler) timed beside SDPA's cuDNN and flash back ends and
# FlexAttention (issue 12's bar). Carry build/kernels-s8.tar.xz. Steps:
#   1. check-manifests on build/kernels-s8;
#   2. which kernel serves the bench's shapes (scheduler per D and mask);
#   3. test_gpu_attention.py on build/kernels-s8, FLASHMLIR_REQUIRE_KERNELS=1;
#   4. bench/bench_attention.py --direction fwd (two rounds, orders reversed).
# Under $OUT: manifests.txt, pytest-attention.log, bench.log, bench-fwd.json,
# bench-fwd.png; the bench's table is printed last. About 4-6 minutes.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/kernels-s8 ] || tar -xJf build/kernels-s8.tar.xz -C build
echo "$(nvidia-smi -L) | torch $($PY -c 'import torch; print(torch.__version__)')"
export FLASHMLIR_KERNEL_DIR=$PWD/build/kernels-s8
timeout 30 $PY test/Tools/check-manifests.py build/kernels-s8 > "$OUT/manifests.txt" 2>&1
echo "check-manifests rc=$?: $(grep -c ' ok ' "$OUT/manifests.txt") ok; $(tail -1 "$OUT/manifests.txt") [$(elapsed) s]"

timeout 40 $PY - <<'EOF' 2>&1
import json, os, torch
from flashmlir import _interface as I
for d in (64, 128):
    for causal in (False, True):
        b, h, n = 16384 // 4096, 2048 // d, 4096
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        p = I._forward_plan(q, k, v, causal, None, None, None, "bhsd", False)
        # (p.launch is None for the dynamic scheduler: that plan is p.multi.)
        sp = I._find_spec(p.call, "forward")[0]
        j = os.path.splitext(sp.ptx_path)[0] + ".json"
        print("probe D=%d causal=%d: %s %s scheduler=%s" % (
            d, causal, sp.name, sp.chip, json.load(open(j)).get("tile_scheduler")))
EOF

FLASHMLIR_REQUIRE_KERNELS=1 timeout -k 10 120 $PY -m pytest -q -x -p no:cacheprovider \
  python/tests/test_gpu_attention.py > "$OUT/pytest-attention.log" 2>&1
echo "test_gpu_attention rc=$?: $(tail -1 "$OUT/pytest-attention.log") [$(elapsed) s]"

set -o pipefail
timeout -k 10 280 $PY bench/bench_attention.py --out $OUT --direction fwd --dtypes bf16 \
  --flex-budget-s 60 --no-ceilings --name bench-fwd > "$OUT/bench.log" 2>&1
echo "bench rc=$? [$(elapsed) s]"
grep -A7 '^fwd bf16' "$OUT/bench.log"
