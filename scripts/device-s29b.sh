#!/bin/bash
# Issue 16: the D = 128 warp-specialized backward with its band / key-tail
# mask in S^T's initial values (-inf where hidden, one branch per tile; no
# per-element select after the exp2) — the new set (KERNELS,
# build/kernels-s29d.tar.xz) against main's (OLD, build/kernels-s29b.tar.xz):
# correctness, sanitizers, an A/B, then the backward beside cuDNN / FA2.
# Log: $OUT/log.txt. (The tried code, behind FA_MASK_INIT at build time,
# was not kept: HOPPER.md "twenty-ninth session" describes it.)
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-s29d.tar.xz}"
unpack_kernels build/kernels-old "${OLD:-build/kernels-s29b.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
check_backward
gpu_suites 120 test_gpu_backward test_gpu_sequences
FLASHMLIR_KERNEL_DIR=build/kernels sanitize_backward "128 causal,128 big"
echo "== A/B old (A) vs mask in the init (B) at $(elapsed) s"
timeout 120 $PY bench/bench_kernel_ab.py --a build/kernels-old --b build/kernels \
  --direction bwd --headdims 128 --seqlens 1024 2048 8192 16384 \
  --masks full causal causal-window=99,0 --rep 30 --json $OUT/ab-maskinit.json 2>&1 | grep "B/A"
[ $(left) -gt 130 ] && bench_beside bwd bwd $(( $(left) - 10 )) --headdims 64 128 \
  --seqlens 1024 2048 8192 16384 --rep 40
echo "== done at $(elapsed) s"
