#!/bin/bash
# Branch s29-pair-roles (issue 10's last cell, D = 192 causal 16k at FA2's
# speed): the D = 160 / 192 backward pairs take roles (the first warpgroup
# accumulates dK, the second dV, one N = 160 / 192 chain each) instead of
# both computing two of the three panels. The set (KERNELS,
# build/kernels-s29e.tar.xz: `python3 -m flashmlir compile --kind all
# --form all` on the branch) against main's (OLD, build/kernels-s29b.tar.xz):
# the backward / head-dim suites, sanitizers, an A/B, then D = 160 / 192
# beside FA2 and cuDNN. Log: $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-s29e.tar.xz}"
unpack_kernels build/kernels-old "${OLD:-build/kernels-s29b.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu_suites 120 test_gpu_backward test_gpu_head_dims
FLASHMLIR_KERNEL_DIR=build/kernels sanitize_backward "192 causal big,192 det,160"
echo "== A/B main (A) vs roles (B) at $(elapsed) s"
timeout 120 $PY bench/bench_kernel_ab.py --a build/kernels-old --b build/kernels \
  --direction bwd --headdims 160 192 --seqlens 2048 8192 16384 --masks full causal \
  --rep 30 --json $OUT/ab-roles.json 2>&1 | grep "B/A"
[ $(left) -gt 150 ] && bench_beside bwd-headdims bwd 150 --headdims 192 256 \
  --seqlens 2048 4096 8192 16384 --no-flex --rep 25
echo "== done at $(elapsed) s"
