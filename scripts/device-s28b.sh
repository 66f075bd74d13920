#!/bin/bash
# Twenty-eighth session, run 2.
# (1) Issue 16's GQA bar on main with the split group (KERNELS,
#     build/kernels-s28.tar.xz) against main before it (PREV,
#     build/kernels-g4.tar.xz): D = 128 causal, G = 1 / 4 / 8, 1k-16k.
# (2) Branch s28-wg-bounds (per-warpgroup key-block bounds in the
#     warp-specialized forward, dense causal kernels: a warpgroup skips the
#     key blocks its rows cannot see, and a ragged tile's warpgroups past
#     Nq compute nothing; 8 kernels change): its forward set (WG) through
#     the forward GPU suites, memcheck / racecheck, then A/B against
#     main's (causal, D = 64 and 128, and a ragged N).
# The whole log goes to $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-s28.tar.xz}"
unpack_kernels build/kernels-prev "${PREV:-build/kernels-g4.tar.xz}"
unpack_kernels build/kernels-wg "${WG:-build/kernels-wg.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== GQA: main before (A) vs the split group (B), D = 128 causal at $(elapsed) s"
timeout 120 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction bwd --headdims 128 --masks causal --seqlens 1024 2048 4096 8192 16384 \
  --groups 1 4 8 --rep 30 --json $OUT/ab-gqa.json 2>&1 | grep "B/A" | sed 's/  {.*//'
FLASHMLIR_KERNEL_DIR=build/kernels-wg:build/kernels gpu_suites 200 test_gpu_attention \
  test_gpu_sequences test_gpu_launch test_gpu_decode test_gpu_head_dims
for m in "64 causal" "128 causal"; do
  for tool in memcheck racecheck; do
    echo "== $tool D = $m (WG) at $(elapsed) s"
    FLASHMLIR_KERNEL_DIR=build/kernels-wg FLASHMLIR_SMS=2 timeout 60 compute-sanitizer \
      --tool $tool --print-limit 3 $PY scripts/sanitize-one.py $m 2>&1 \
      | grep -E "max err|ERROR SUMMARY|RACECHECK SUMMARY|hazard|Invalid" | head -4
  done
done
echo "== forward A/B main (A) vs WG (B) at $(elapsed) s"
timeout 100 $PY bench/bench_kernel_ab.py --a build/kernels --b build/kernels-wg \
  --direction fwd --headdims 64 128 --masks causal --seqlens 1000 1024 2048 4096 8192 16384 \
  --rep 40 --json $OUT/ab-wg.json 2>&1 | grep "B/A" | sed 's/  {.*//'
echo "== done at $(elapsed) s"
