#!/bin/bash
# Issue 16 / 17: the causal GQA backward's iteration order. Query blocks
# outer (last first) and the group's heads inner, so that the key blocks of
# a (kv head, batch) read the same Q / dO tile at the same time (L2 hit
# rate 40% at 16:2 against 83% for MHA, twenty-sixth session's ncu), the
# heads rotated by the key block so that the blocks add into different dQ
# tiles; for D >= 128, G >= 8 and at most 64 key blocks (the second run's
# A/B). Carry KERNELS (default build/kernels-ord.tar.xz: the full set with
# the new order, tarred as kernels/), PREV (build/kernels-rk.tar.xz: main's
# set before it) and the launcher. Everything goes to $OUT/log.txt too.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-ord.tar.xz}"
unpack_kernels build/kernels-prev "${PREV:-build/kernels-rk.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
check_backward
gpu_suites 150 test_gpu_backward test_gpu_sequences test_gpu_transformers \
  test_gpu_head_dims test_gpu_compile
echo "== A/B main (A) vs query-outer order (B), causal at $(elapsed) s"
timeout 150 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction bwd --headdims 128 --seqlens 1024 2048 8192 16384 --masks causal \
  --groups 1 4 8 --hidden 2048 --rep 40 --json $OUT/ab-ord.json 2>&1 | grep "B/A"
echo "== A/B, D = 256 causal at $(elapsed) s"
timeout 100 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction bwd --headdims 256 --seqlens 2048 8192 --masks causal \
  --groups 1 8 --hidden 2048 --rep 30 --json $OUT/ab-ord-big.json 2>&1 | grep "B/A"
if [ $(left) -gt 120 ]; then
  ncu_key_block 2
fi
if [ $(left) -gt 90 ]; then
  echo "== racecheck 128 causal at $(elapsed) s"
  timeout 60 compute-sanitizer --tool racecheck --kernel-name kns=fa_bwd_kernel \
    --print-limit 3 $PY scripts/sanitize-bwd.py 128 causal 2>&1 \
    | grep -E "max err|RACECHECK SUMMARY|hazard" | head -4
fi
if [ $(left) -gt 70 ]; then
  echo "== Llama step at $(elapsed) s"
  timeout $(( $(left) - 10 )) $PY bench/bench_llama_step.py --layers 4 --tokens 8192 --steps 6 \
    --rounds 2 2>&1 | tail -4
fi
echo "== done at $(elapsed) s"
