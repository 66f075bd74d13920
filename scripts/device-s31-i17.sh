#!/bin/bash
# Issue 17 on an H200: the GPU suites of the package's new paths
# (torch.compile, transformers, launch), the host overhead per call against
# SDPA's, and the Llama training step (B = 1, 8k tokens, 16:4, D = 128)
# against its default SDPA path, in one run on main's set (KERNELS =
# build/kernels.tar.xz). Log: $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu_suites 170 test_gpu_compile test_gpu_transformers test_gpu_launch test_gpu_attention
if [ "$(left)" -gt 100 ]; then
  echo "== bench_overhead at $(elapsed) s"
  timeout 90 $PY bench/bench_overhead.py --json "$OUT/overhead.json" 2>&1 | tail -14
fi
if [ "$(left)" -gt 70 ]; then
  echo "== Llama step at $(elapsed) s"
  timeout $(( $(left) - 10 )) $PY bench/bench_llama_step.py --layers 4 --tokens 8192 --steps 6 \
    --rounds 2 --json "$OUT/llama.json" 2>&1 | tail -6
fi
echo "== done at $(elapsed) s"
