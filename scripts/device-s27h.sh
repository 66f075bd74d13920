#!/bin/bash
# Issue 16: the split GQA group (branch s27-gqa-split): with G >= 2 and
# fewer blocks than 1.5 waves (at one wave the longest is twice the mean),
# one block per (key block, query head), dK / dV added into zeroed f32
# accumulators and converted by a fourth kernel.
# test_gpu_backward.py on its set (KERNELS, build/kernels-sp.tar.xz; small
# GQA problems split), then A/B against main's (PREV,
# build/kernels-g4.tar.xz), the most telling cell first (16:2, B = 1, 8k:
# 128 blocks). The whole log goes to $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-sp.tar.xz}"
unpack_kernels build/kernels-prev "${PREV:-build/kernels-g4.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu_suites 60 test_gpu_backward
echo "== A/B main (A) vs split (B), B = 1 at 8k at $(elapsed) s"
timeout 40 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction bwd --headdims 128 --seqlens 8192 --masks causal --tokens 8192 \
  --groups 16 8 4 1 --rep 20 --json $OUT/ab-split-b1.json 2>&1 | grep "B/A" | sed 's/  {.*//'
echo "== 16k tokens at $(elapsed) s"
timeout 40 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction bwd --headdims 128 64 --seqlens 8192 16384 --masks causal \
  --groups 8 1 --rep 20 --json $OUT/ab-split.json 2>&1 | grep "B/A" | sed 's/  {.*//'
echo "== split forced on every grid (FLASHMLIR_SMS=100000 for B), 16k tokens at $(elapsed) s"
timeout 90 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --env-b FLASHMLIR_SMS=100000 --direction bwd --headdims 128 --masks causal \
  --seqlens 1024 2048 4096 8192 16384 --groups 4 8 --rep 20 --json $OUT/ab-forced.json \
  2>&1 | grep "B/A" | sed 's/  {.*//'
timeout 40 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --env-b FLASHMLIR_SMS=100000 --direction bwd --headdims 64 --masks causal \
  --seqlens 2048 8192 --groups 4 8 --rep 20 --json $OUT/ab-forced64.json \
  2>&1 | grep "B/A" | sed 's/  {.*//'
FLASHMLIR_KERNEL_DIR=build/kernels sanitize_backward "128 causal,64 causal big"
echo "== done at $(elapsed) s"
