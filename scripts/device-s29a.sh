#!/bin/bash
# Issue 10's two backward cells (D = 256 unmasked, D = 192 causal at FA2's
# speed): the new set (KERNELS, build/kernels-s29b.tar.xz) stages the D =
# 256 pair's dQ in 8-row passes and lets the cooperative key-block kernels
# skip the per-element mask on tiles the mask shows whole. The backward
# suites and sanitizers on it, an A/B against main's previous set (OLD,
# build/kernels-s28b.tar.xz), the backward at D = 192 / 256 beside FA2 and
# cuDNN, then two probes: persistent window backwards (PW) and the GQA 4
# query-outer rule up to 16 key blocks (V16). Log: $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-s29b.tar.xz}"
unpack_kernels build/kernels-old "${OLD:-build/kernels-s28b.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu_suites 120 test_gpu_backward test_gpu_head_dims
FLASHMLIR_KERNEL_DIR=build/kernels sanitize_backward "256 causal big,192 causal"
echo "== A/B old (A) vs new (B) at $(elapsed) s"
timeout 110 $PY bench/bench_kernel_ab.py --a build/kernels-old --b build/kernels \
  --direction bwd --headdims 192 256 --seqlens 2048 8192 16384 --masks full causal \
  --rep 30 --json $OUT/ab-new.json 2>&1 | grep "B/A"
[ $(left) -gt 150 ] && bench_beside bwd-headdims bwd 150 --headdims 192 256 \
  --seqlens 2048 4096 8192 16384 --no-flex --rep 25
# Issues 14 / 12, narrow windows (a few query blocks per key block): the
# persistent key-block kernel (PW: the two D = 128 bf16 window kernels
# with --tile-scheduler=persistent; producers spill 76-80 bytes).
if [ $(left) -gt 60 ]; then
  unpack_kernels build/kernels-pw "${PW:-build/kernels-pw.tar.xz}"
  echo "== A/B grid (A) vs persistent window backward (B) at $(elapsed) s"
  timeout 50 $PY bench/bench_kernel_ab.py --a build/kernels-old --b build/kernels-pw \
    --direction bwd --headdims 128 --seqlens 4096 16384 \
    --masks causal-window=99,0 window=255,255 --rep 25 \
    --json $OUT/ab-pw.json 2>&1 | grep "B/A"
fi
# Issue 16, GQA 4 causal at 4k (+8.7% against MHA): the query-outer loop
# with the plain launch order up to 16 key blocks instead of 32.
if [ $(left) -gt 45 ]; then
  unpack_kernels build/kernels-v16 "${V16:-build/kernels-v16.tar.xz}"
  echo "== A/B main (A) vs plain order up to 16 key blocks (B) at $(elapsed) s"
  timeout 45 $PY bench/bench_kernel_ab.py --a build/kernels-old --b build/kernels-v16 \
    --direction bwd --headdims 128 --seqlens 4096 8192 --masks causal \
    --groups 4 --rep 25 --json $OUT/ab-v16.json 2>&1 | grep "B/A"
fi
echo "== done at $(elapsed) s"
