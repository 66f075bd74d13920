#!/bin/bash
# Issue 16 / 17: the query-outer order with the plain launch order at
# 4 <= G < 8 and at most 32 key blocks (midGqaGrid; the variant g4-pm-qo of
# device-s27d.sh took 0.80 / 0.89x the time at 16:4, 1k / 2k). Checks
# KERNELS (build/kernels-g4.tar.xz: main's full set with it) with the GPU
# suites, A/B against PREV (build/kernels-f27.tar.xz) at D = 128 and 256
# causal for G = 1 / 4 / 8 (the Llama step, B = 1 and 8k, has 64 key
# blocks: not this rule's). The whole log goes to $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-g4.tar.xz}"
unpack_kernels build/kernels-prev "${PREV:-build/kernels-f27.tar.xz}"
LIMIT=${LIMIT:-420}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu_suites 120
echo "== A/B main (A) vs the G = 4 order (B), D = 128 at $(elapsed) s"
timeout 120 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction bwd --headdims 128 --seqlens 1024 2048 4096 8192 16384 --masks causal \
  --groups 1 4 8 --rep 30 --json $OUT/ab-g4.json 2>&1 | grep "B/A" | sed 's/  {.*//'
echo "== A/B D = 256 at $(elapsed) s"
timeout 60 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction bwd --headdims 256 --seqlens 1024 2048 4096 --masks causal \
  --groups 1 4 --rep 20 --json $OUT/ab-g4-d256.json 2>&1 | grep "B/A" | sed 's/  {.*//'
echo "== done at $(elapsed) s"
