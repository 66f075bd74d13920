#!/bin/bash
# Issue 10 on an H200 (the device has handed out only H100s since the
# nineteenth session): the head-dim and backward suites on main's set
# (KERNELS = build/kernels.tar.xz), memcheck / racecheck of the D = 192
# pair, then the forward and backward at D = 96 / 192 / 256 beside FA2 and
# cuDNN in one run (two rounds, order reversed). Items are guarded by the
# time left of LIMIT. Log: $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu_suites 150 test_gpu_backward test_gpu_head_dims
[ "$(left)" -gt 200 ] && FLASHMLIR_KERNEL_DIR=build/kernels sanitize_backward "192 causal big"
[ "$(left)" -gt 60 ] && bench_beside headdims both $(( $(left) - 10 )) --headdims 96 192 256 \
  --seqlens 2048 8192 16384 --impls flashmlir fa2 cudnn --no-flex --no-ceilings --rep 25
echo "== done at $(elapsed) s"
