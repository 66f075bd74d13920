#!/bin/bash
# Issue 16, twenty-third session: lse2 read from the ring where it is used
# (not folded into the S^T accumulator) at D = 128 (build/d128n) against the
# default set's folded kernels, and the D = 64 WS 128 x 128 x 8 ring kernels
# (build/e128n) on windows and at 16k. Carry build/kernels.tar.xz,
# build/d128n.tar.xz and the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels build/d128n build/e128n
for t in kernels d128n; do tar -xJf build/$t.tar.xz -C build; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== d128n: check_backward at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=build/d128n:build/kernels timeout 60 $PY bench/check_backward.py 2>&1 \
  | grep -v execution_engine | tail -2
echo "== D = 128: default (A, folded) vs d128n (B) at $(elapsed) s"
timeout 200 $PY bench/bench_kernel_ab.py --a build/kernels --b build/d128n --direction bwd \
  --headdims 128 --seqlens 2048 8192 16384 --masks full causal --rep 80 \
  --json $OUT/ab-d128n.json 2>&1 | tail -7
timeout 60 $PY bench/bench_kernel_ab.py --a build/kernels --b build/d128n --direction bwd \
  --headdims 128 --seqlens 8192 --masks causal --groups 4 --rep 80 \
  --json $OUT/ab-d128n-gqa.json 2>&1 | tail -2
echo "== D = 64: default (A) vs e128n (B) at $(elapsed) s"
timeout 150 $PY bench/bench_kernel_ab.py --a build/kernels --b build/e128n --direction bwd \
  --headdims 64 --seqlens 16384 --masks full causal window=256,256 causal-window=256,0 --rep 80 \
  --json $OUT/ab-e128n-16k.json 2>&1 | tail -5
timeout 80 $PY bench/bench_kernel_ab.py --a build/kernels --b build/e128n --direction bwd \
  --headdims 64 --seqlens 2048 --masks window=256,256 causal-window=256,0 --rep 80 \
  --json $OUT/ab-e128n-win.json 2>&1 | tail -3
echo "== done at $(elapsed) s"
