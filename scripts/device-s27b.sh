#!/bin/bash
# Issue 12: the i32 tile decode for the forward only (branch s27-fwd; the
# backward's i32 iteration index was measured 1.00-1.03x the time at D =
# 128 unmasked and is not taken). Confirms the two doubtful forward cells
# of device-s27-fwd.sh (D = 128 causal 8k at 1.067, D = 64 unmasked 2k at
# 1.032) with more repetitions, then re-measures the forward bar with the
# new set beside cuDNN / FA2 / Flex, issue 10's backward head dims against
# FA2 and ncu of GQA 4 causal against MHA. Carry KERNELS (default
# build/kernels-f27.tar.xz), PREV (build/kernels-ord.tar.xz) and the
# launcher; the whole log goes to $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-f27.tar.xz}"
unpack_kernels build/kernels-prev "${PREV:-build/kernels-ord.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== A/B main (A) vs i32 tiles (B), forward at $(elapsed) s"
timeout 90 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction fwd --headdims 64 128 --seqlens 2048 8192 16384 \
  --masks full causal --rep 80 --json $OUT/ab-fwd.json 2>&1 | grep "B/A"
echo "== the same, sides swapped, at $(elapsed) s"
timeout 90 $PY bench/bench_kernel_ab.py --a build/kernels --b build/kernels-prev \
  --direction fwd --headdims 64 128 --seqlens 2048 8192 16384 \
  --masks full causal --rep 80 --json $OUT/ab-fwd-swapped.json 2>&1 | grep "B/A"
[ $(left) -gt 250 ] && bench_beside fwd fwd 120 --headdims 64 128 \
  --seqlens 1024 2048 8192 16384 --rep 60
[ $(left) -gt 130 ] && bench_beside bwd-headdims bwd 100 --headdims 96 192 256 \
  --seqlens 2048 8192 --no-flex --rep 40
if [ $(left) -gt 60 ]; then
  for kvh in 16 4; do ncu_key_block $kvh; done
fi
echo "== done at $(elapsed) s"
