#!/bin/bash
# Issue 12 (branch s26-fwd-i32-tiles): the persistent / dynamic forwards
# decode their tile index in i32 (the 64-bit divisions were SASS
# subroutine calls and took register pairs); the D = 64 window forward's
# dynamic kernel no longer spills and becomes its default. The backward's
# iteration index is divided in i32 in every key-block kernel (main: only
# the causal D >= 128 and the tight-register ones, where it took 0.94-0.98x
# the time). Correctness of the forward and backward suites on the
# branch's full set, then A/B against main's.
# Carry KERNELS (default build/kernels-fi.tar.xz: the branch's `python3 -m
# flashmlir compile --kind all --form all`, tarred as kernels/), PREV
# (build/kernels-ord.tar.xz: main's) and the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-fi.tar.xz}"
unpack_kernels build/kernels-prev "${PREV:-build/kernels-ord.tar.xz}"
LIMIT=${LIMIT:-360}
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_suites 200
echo "== A/B main (A) vs i32 (B), backward at $(elapsed) s"
timeout 60 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction bwd --headdims 128 256 --seqlens 1024 2048 8192 --masks full --rep 30 \
  --json $OUT/ab-bwd-i32.json 2>&1 | grep "B/A"
echo "== A/B main (A) vs i32 tiles (B), forward at $(elapsed) s"
timeout 120 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction fwd --headdims 64 128 --seqlens 1024 2048 8192 \
  --masks full causal window=255,255 causal-window=255,0 --rep 30 \
  --json $OUT/ab-fwd-i32.json 2>&1 | grep "B/A"
if [ $(left) -gt 40 ]; then
  echo "== racecheck, D = 64 window forward at $(elapsed) s"
  timeout 40 compute-sanitizer --tool racecheck --kernel-name kns=fa_fwd_kernel --print-limit 3 \
    $PY -c "
import torch, flashmlir
q, k, v = (torch.randn(1, 4, 333, 64, device='cuda', dtype=torch.bfloat16) for _ in range(3))
o = flashmlir.attention(q, k, v, window=(255, 255)); torch.cuda.synchronize(); print('ok', o.isfinite().all().item())
" 2>&1 | grep -E "^ok|RACECHECK SUMMARY|hazard" | head -3
fi
echo "== done at $(elapsed) s"
