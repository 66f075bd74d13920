#!/bin/bash
# Session 30's first call, on branch s30-bulk-dq (issues 10, 16):
# KERNELS (build/kernels-s30c.tar.xz): the D = 160 / 192 pairs in roles
# plus the staged dQ added by one bulk reduction per row
# (cp.reduce.async.bulk) instead of 16-byte red.global per lane (pairs
# only: KernelResources::dqBulkReduce);
# ROLES (build/kernels-s29e.tar.xz): roles only; OLD (build/kernels-s29b,
# main's set). Suites and sanitizers on KERNELS, two A/Bs, then the
# backward at D = 192 / 256 beside FA2 and cuDNN. Log: $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-s30c.tar.xz}"
unpack_kernels build/kernels-roles "${ROLES:-build/kernels-s29e.tar.xz}"
unpack_kernels build/kernels-old "${OLD:-build/kernels-s29b.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu_suites 130 test_gpu_backward test_gpu_head_dims
echo "== A/B roles (A) vs roles + bulk dQ (B) at $(elapsed) s"
timeout 90 $PY bench/bench_kernel_ab.py --a build/kernels-roles --b build/kernels \
  --direction bwd --headdims 192 256 --seqlens 2048 16384 --masks full causal \
  --rep 30 --json $OUT/ab-bulk.json 2>&1 | grep "B/A"
if [ $(left) -gt 45 ]; then
  echo "== A/B main (A) vs roles (B) at $(elapsed) s"
  timeout $(( $(left) - 5 )) $PY bench/bench_kernel_ab.py --a build/kernels-old --b build/kernels-roles \
    --direction bwd --headdims 192 --seqlens 2048 16384 --masks full causal \
    --rep 30 --json $OUT/ab-roles.json 2>&1 | grep "B/A"
fi
[ $(left) -gt 100 ] && FLASHMLIR_KERNEL_DIR=build/kernels sanitize_backward "192 causal big"
[ $(left) -gt 100 ] && bench_beside bwd-headdims bwd $(( $(left) - 10 )) --headdims 192 256 \
  --seqlens 2048 8192 16384 --no-flex --rep 25
echo "== done at $(elapsed) s"
