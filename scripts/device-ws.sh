#!/bin/bash
# H200: the experimental warp-specialized forward (branch ws-forward,
# docs/HOPPER.md) — accuracy with the package's suite, racecheck, then A/B
# speed against the cp.async kernels. Carry build/kernels.tar.xz and build/ws
# (built by: for d in 64 128; for t in bf16 f16; for c in "" --causal:
#   build/bin/fa-compile --kind=forward --head-dim=$d --dtype=$t $c
#   --chip=sm_90a --warp-specialize -o build/ws).
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
export FLASHMLIR_KERNEL_DIR=$PWD/build/ws
timeout 200 $PY -m pytest -q -x -p no:cacheprovider python/tests/test_gpu_attention.py 2>&1 | tail -6
echo "attention done $(elapsed)"
timeout 150 compute-sanitizer --tool racecheck $PY -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu_attention.py -k "odd or poison" 2>&1 \
  | grep -E "passed|failed|RACECHECK SUMMARY|ERROR" | head -4
unset FLASHMLIR_KERNEL_DIR
echo "racecheck done $(elapsed)"
for order in "--a build/kernels --b build/ws" "--a build/ws --b build/kernels"; do
  timeout 240 $PY bench/bench_kernel_ab.py --direction fwd --headdims 64 128 \
    --seqlens 1024 4096 16384 --masks full causal --rep 200 $order \
    --json "$OUT/ab-ws-$(echo $order | tr -c 'a-z' '_').json" 2>&1 | grep -E "B/A|rror" | head -20
done
echo "done $(elapsed)"
