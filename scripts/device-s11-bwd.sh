#!/bin/bash
# H200, eleventh session: the backward's heavy-first block order (causal
# GQA, small grids). Carry build/kernels.tar.xz (the set rebuilt) and
# build/lib/libflashmlir_launcher.so. The manifests, the backward suites on
# both chips' kernels (dense, head dims, packed), then the Llama training
# step (issue 17's bar) against SDPA.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
export FLASHMLIR_REQUIRE_KERNELS=1
T=python/tests
timeout 30 $PY test/Tools/check-manifests.py build/kernels > "$OUT/manifests.txt" 2>&1 \
  || { tail -5 "$OUT/manifests.txt"; exit 1; }
tail -1 "$OUT/manifests.txt"
timeout 120 $PY -m pytest -q -p no:cacheprovider $T/test_gpu_backward.py > "$OUT/backward.txt" 2>&1
tail -1 "$OUT/backward.txt"
FLASHMLIR_CHIP=sm_80 timeout 120 $PY -m pytest -q -p no:cacheprovider $T/test_gpu_backward.py \
  > "$OUT/backward-sm80.txt" 2>&1; tail -1 "$OUT/backward-sm80.txt" | sed 's/^/sm_80: /'
timeout 150 $PY -m pytest -q -p no:cacheprovider $T/test_gpu_head_dims.py > "$OUT/head-dims.txt" 2>&1
tail -1 "$OUT/head-dims.txt" | sed 's/^/head dims: /'
timeout 100 $PY -m pytest -q -p no:cacheprovider $T/test_gpu_sequences.py -k backward \
  > "$OUT/varlen-bwd.txt" 2>&1; tail -1 "$OUT/varlen-bwd.txt" | sed 's/^/varlen bwd: /'
echo "tests done $(elapsed)"
timeout 200 $PY bench/bench_llama_step.py --json "$OUT/llama.json" > "$OUT/llama.txt" 2>&1
tail -12 "$OUT/llama.txt"
echo "llama done $(elapsed)"
