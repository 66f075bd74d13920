#!/bin/bash
# The next session's first call, on branch s29-pair-roles (issues 10, 14):
# 1. the D = 160 / 192 pairs in roles (KERNELS, build/kernels-s29e.tar.xz,
#    the branch's set) against main's (OLD, build/kernels-s29b.tar.xz):
#    backward / head-dim suites, sanitizers, an A/B;
# 2. the backward at D = 192 / 256 beside FA2 and cuDNN (issue 10's bar);
# 3. the modifier backwards beside Flex at 4k (issue 14; MODK,
#    build/modk-s29.tar.xz from `scripts/build-modifier-kernels.py
#    build/modk-s29 --only bench -j 2`).
# Each item guarded by the time left (LIMIT). Log: $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-s29e.tar.xz}"
unpack_kernels build/kernels-old "${OLD:-build/kernels-s29b.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu_suites 120 test_gpu_backward test_gpu_head_dims
FLASHMLIR_KERNEL_DIR=build/kernels sanitize_backward "192 causal big,160"
echo "== A/B main (A) vs roles (B) at $(elapsed) s"
timeout 100 $PY bench/bench_kernel_ab.py --a build/kernels-old --b build/kernels \
  --direction bwd --headdims 160 192 --seqlens 2048 8192 16384 --masks full causal \
  --rep 30 --json $OUT/ab-roles.json 2>&1 | grep "B/A"
[ $(left) -gt 300 ] && bench_beside bwd-headdims bwd 140 --headdims 192 256 \
  --seqlens 2048 4096 8192 16384 --no-flex --rep 25
if [ $(left) -gt 100 ] && [ -f "${MODK:-build/modk-s29.tar.xz}" ]; then
  unpack_kernels build/modk "${MODK:-build/modk-s29.tar.xz}"
  echo "== bench_modifiers bwd at $(elapsed) s"
  PYTHONPATH="$PWD/python/tests:$PYTHONPATH" FLASHMLIR_KERNEL_DIR=build/modk \
    timeout $(( $(left) - 5 )) $PY bench/bench_modifiers.py --direction bwd \
    --seqlens 4096 --rounds 2 --out "$OUT" 2>&1 | tail -16
fi
echo "== done at $(elapsed) s"
