#!/bin/bash
# H200, fifth session: the round that measured the warp-specialized forward
# (build/wsbest) against the cooperative one (build/cp2) and against SDPA's
# back ends (docs/PERFORMANCE.md "fifth session"). Carry
# build/kernels.tar.xz build/wsbest build/cp2 build/ws64q128 build/ws64q192.
source scripts/device-env.sh
for dir in build/wsbest build/cp2 build/ws64q128; do
  FLASHMLIR_KERNEL_DIR=$PWD/$dir timeout 100 $PY -m pytest -q -x -p no:cacheprovider python/tests/test_gpu_attention.py 2>&1 | tail -1
  echo "accuracy $dir $(elapsed)"
done
FLASHMLIR_KERNEL_DIR=$PWD/build/wsbest timeout 100 compute-sanitizer --tool racecheck $PY -m pytest -q -p no:cacheprovider python/tests/test_gpu_attention.py -k "odd" 2>&1 | grep -E "passed|failed|SUMMARY" | head -3
echo "racecheck $(elapsed)"
for pair in build/cp2:build/wsbest build/wsbest:build/cp2; do a=${pair%%:*}; b=${pair##*:}
  timeout 100 $PY bench/bench_kernel_ab.py --direction fwd --rep 200 --a $a --b $b --headdims 64 128 --seqlens 1024 4096 16384 --masks full causal --json $OUT/ab-$(basename $a)-vs-$(basename $b).json 2>&1 | grep -E "B/A|rror" | sed 's/ {.*//'
done
timeout 60 $PY bench/bench_kernel_ab.py --direction fwd --rep 200 --a build/ws64q192 --b build/ws64q128 --headdims 64 --seqlens 1024 4096 16384 --masks full causal --json $OUT/ab-q192-vs-q128.json 2>&1 | grep -E "B/A|rror" | sed 's/ {.*//'
echo "ab $(elapsed)"
FLASHMLIR_KERNEL_DIR=$PWD/build/wsbest timeout 300 $PY bench/bench_attention.py --out $OUT --direction fwd --dtypes bf16 --flex-budget-s 90 --name bench-fwd-ws 2>&1 | tail -32
echo "bench $(elapsed)"
