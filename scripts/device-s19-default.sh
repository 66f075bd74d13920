#!/bin/bash
# Issue 16, for after the warp-specialized backward becomes the D = Dv =
# 128 default (not yet: docs/HOPPER.md "next steps" 1; the script checks
# how many D = 128 backward manifests say warp_specialized): the backward
# GPU suite, then backward TFLOP/s beside SDPA's flash and cuDNN
# (bench_attention.py, two rounds, order reversed).
# Carry build/kernels.tar.xz and the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
grep -l warp_specialized build/kernels/fa_bwd_d128*sm90a.json | wc -l
echo "== test_gpu_backward.py at $(elapsed) s"
FLASHMLIR_REQUIRE_KERNELS=1 timeout ${SUITE_S:-260} $PY -m pytest -q -p no:cacheprovider python/tests/test_gpu_backward.py 2>&1 | tail -8
echo "== bench at $(elapsed) s"
timeout ${BENCH_S:-170} $PY bench/bench_attention.py --out "$OUT/bench" --direction bwd --headdims 128 \
  --dtypes bf16 --no-flex --seqlens 1024 2048 4096 8192 16384 --time-budget-s $(( ${BENCH_S:-170} - 30 )) 2>&1 | tail -16
echo "== done at $(elapsed) s"
