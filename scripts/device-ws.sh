#!/bin/bash
# H200: A/B runs of forward schedules (docs/HOPPER.md) — accuracy with the
# package's suite on each folder, racecheck/memcheck, then bench_kernel_ab
# for each PAIRS entry "A:B" (both orders if both are listed). Carry
# build/kernels.tar.xz and the kernel folders named; build each with
#   build/bin/fa-compile --kind=forward --head-dim=$d --dtype=$t [--causal]
#     --chip=sm_90a [--schedule=cooperative | --ping-pong=false |
#     --intra-warpgroup-overlap=false | --block-q=N] -o <folder>
# (the default schedule on sm_90a at D = 64/128 is warp_specialized).
#   WS=<folder> EXTRA_ACCURACY="<folders>" PAIRS="a:b b:a" bash scripts/device-ws.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
WS=${WS:-build/wsop}
# An invalid manifest is skipped with a warning and the search path's other
# kernels run instead: refuse folders the package's reader does not accept.
for dir in $WS ${EXTRA_ACCURACY:-}; do
  $PY test/Tools/check-manifests.py "$dir" > /dev/null || { echo "invalid manifests in $dir"; exit 1; }
done
for dir in $WS ${EXTRA_ACCURACY:-}; do
  FLASHMLIR_KERNEL_DIR=$PWD/$dir timeout 200 $PY -m pytest -q -x -p no:cacheprovider \
    python/tests/test_gpu_attention.py 2>&1 | tail -2
  echo "attention $dir done $(elapsed)"
done
for tool in racecheck memcheck; do
  FLASHMLIR_KERNEL_DIR=$PWD/$WS timeout 150 compute-sanitizer --tool $tool $PY -m pytest -q \
    -p no:cacheprovider python/tests/test_gpu_attention.py -k "odd or poison or 113" 2>&1 \
    | grep -E "passed|failed|SUMMARY|ERROR" | head -4
  echo "$tool done $(elapsed)"
done
ab() {  # ab A B name [bench args]
  local a=$1 b=$2 name=$3; shift 3
  timeout 240 $PY bench/bench_kernel_ab.py --direction fwd --rep 200 --a $a --b $b \
    --json "$OUT/ab-$name.json" "$@" 2>&1 | grep -E "B/A|rror" | sed 's/ {.*//' | head -24
}
for pair in ${PAIRS:-"build/kernels:$WS"}; do
  a=${pair%%:*}; b=${pair##*:}; shift_args=()
  ab $a $b "$(basename $a)-vs-$(basename $b)" --headdims ${HEADDIMS:-64 128} \
    --seqlens ${SEQLENS:-1024 4096 16384} --masks full causal
  echo "ab $a $b done $(elapsed)"
done
