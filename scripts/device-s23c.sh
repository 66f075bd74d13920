#!/bin/bash
# Issue 16, twenty-third session: the WS backward with ex2.approx.ftz and
# i32 iteration arithmetic, lse2 folded (build/x128f) or read from the ring
# where used (build/x128n), D = 128; and D = 64 WS 128 x 128 x 8 with the
# ring, lse2 unfolded (build/x64n: 16-40 bytes of spills), each against the
# default set (A). Carry build/kernels.tar.xz, build/s23x.tar.xz and the
# launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels build/x128f build/x128n build/x64n
for t in kernels s23x; do tar -xJf build/$t.tar.xz -C build; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for v in x128f x128n x64n; do
  echo "== $v: check_backward at $(elapsed) s"
  FLASHMLIR_KERNEL_DIR=build/$v:build/kernels timeout 60 $PY bench/check_backward.py 2>&1 \
    | grep -v execution_engine | tail -1
done
for v in x128f x128n; do
  echo "== D = 128: default (A) vs $v (B) at $(elapsed) s"
  timeout 130 $PY bench/bench_kernel_ab.py --a build/kernels --b build/$v --direction bwd \
    --headdims 128 --seqlens 2048 8192 16384 --masks full causal --rep 60 \
    --json $OUT/ab-$v.json 2>&1 | tail -6
done
echo "== D = 128 GQA 16/4 causal 8k at $(elapsed) s"
timeout 60 $PY bench/bench_kernel_ab.py --a build/x128f --b build/x128n --direction bwd \
  --headdims 128 --seqlens 8192 --masks causal full --groups 4 --rep 60 \
  --json $OUT/ab-gqa-fn.json 2>&1 | tail -2
echo "== D = 64: default (A) vs x64n (B) at $(elapsed) s"
timeout 120 $PY bench/bench_kernel_ab.py --a build/kernels --b build/x64n --direction bwd \
  --headdims 64 --seqlens 2048 16384 --masks full causal window=256,256 --rep 60 \
  --json $OUT/ab-x64n.json 2>&1 | tail -6
echo "== done at $(elapsed) s"
