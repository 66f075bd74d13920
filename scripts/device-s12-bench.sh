#!/bin/bash
# H200, twelfth session: the paged bar with interleaved timing
# (bench_sequences.py's rounds: six interleaved rounds, the median of all
# calls), twice with the current kernels and once with the paged kernels
# of the first build (no page look-ahead: build/paged-a.tar.xz, found
# first through FLASHMLIR_KERNEL_DIR). Carry build/kernels.tar.xz,
# build/paged-a.tar.xz and build/lib/libflashmlir_launcher.so.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
export FLASHMLIR_REQUIRE_KERNELS=1
[ -d build/paged-a ] || tar -xJf build/paged-a.tar.xz -C build
for run in ${RUNS:-b1 a b2}; do
  if [ $run = a ]; then export FLASHMLIR_KERNEL_DIR=$PWD/build/paged-a; else unset FLASHMLIR_KERNEL_DIR; fi
  timeout 250 $PY bench/bench_sequences.py --only paged --reps 100 --out "$OUT/bench-$run" \
    > /dev/null 2>"$OUT/bench-err.txt"
  echo "== $run"; grep -E "^\| [0-9]" "$OUT/bench-$run/sequences.md"
  echo "bench $run done $(elapsed)"
done
