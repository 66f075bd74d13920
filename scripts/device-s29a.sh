#!/bin/bash
# Issue 10's D = 256 backward with dQ staged in 8-row passes (the pair's
# shared memory had no room for a 16-row area): the head-dim matrix and
# sanitizers on the new set (KERNELS, build/kernels-s29a.tar.xz), an A/B
# against main's previous set (OLD, build/kernels-s28b.tar.xz), then the
# backward at D = 96 / 192 / 256 beside FA2 and cuDNN. Log: $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-s29a.tar.xz}"
unpack_kernels build/kernels-old "${OLD:-build/kernels-s28b.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu_suites 90 test_gpu_head_dims
FLASHMLIR_KERNEL_DIR=build/kernels sanitize_backward "256,256 causal big"
echo "== A/B old (A) vs 8-row staging (B) at $(elapsed) s"
timeout 150 $PY bench/bench_kernel_ab.py --a build/kernels-old --b build/kernels \
  --direction bwd --headdims 256 --seqlens 2048 4096 8192 16384 --masks full causal \
  --rep 40 --json $OUT/ab-d256.json 2>&1 | grep "B/A"
[ $(left) -gt 120 ] && bench_beside bwd-headdims bwd $(( $(left) - 10 )) --headdims 96 192 256 \
  --seqlens 2048 4096 8192 16384 --no-flex --rep 30
echo "== done at $(elapsed) s"
