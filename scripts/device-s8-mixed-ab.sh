#!/bin/bash
# H200, eighth session: the persistent D != Dv forwards (build/mixed: the
# default set with the persistent (64, 128) and (128, 64) kernels, no mask;
# made by scripts/device-s8-verify.sh's step) against the grid ones
# (build/kernels), both orders. Carry build/kernels.tar.xz and
# build/mixed.tar.xz.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/kernels ] || tar -xJf build/kernels.tar.xz -C build
[ -d build/mixed ] || tar -xJf build/mixed.tar.xz -C build
for dir in build/kernels build/mixed; do
  $PY test/Tools/check-manifests.py "$dir" > /dev/null || { echo "invalid manifests in $dir"; exit 1; }
done
ab() {  # ab A B
  timeout 150 $PY bench/bench_kernel_ab.py --direction fwd --rep 200 --a build/$1 --b build/$2 \
    --headdims 64 128 --value-headdims 128 64 --seqlens 512 2048 4096 16384 --masks full \
    --json "$OUT/ab-$1-vs-$2.json" 2>&1 | grep -E "B/A|rror" | sed 's/ {.*//' | head -12
  echo "ab $1 $2 done $(elapsed)"
}
ab kernels mixed; ab mixed kernels
