#!/bin/bash
# H200, seventh session: the TMA-store epilogue of the persistent forward
# (build/ptma: build/kernels with the persistent set overlaid) against the
# grid kernels (build/kernels); the sixth session measured the persistent
# kernels without it against the same grid kernels. Carry
# build/kernels.tar.xz and build/persist-ab.tar.xz (ptma).
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/ptma ] || tar -xJf build/persist-ab.tar.xz -C build
for dir in build/ptma; do
  $PY test/Tools/check-manifests.py "$dir" > /dev/null || { echo "invalid manifests in $dir"; exit 1; }
done
FLASHMLIR_SMS=5 FLASHMLIR_KERNEL_DIR=$PWD/build/ptma timeout 200 $PY -m pytest -q -x -p no:cacheprovider \
  python/tests/test_gpu_attention.py 2>&1 | tail -2
echo "accuracy SMS=5 $(elapsed)"
FLASHMLIR_KERNEL_DIR=$PWD/build/ptma timeout 200 $PY -m pytest -q -x -p no:cacheprovider \
  python/tests/test_gpu_attention.py 2>&1 | tail -2
echo "accuracy $(elapsed)"
for d in 64 128; do for m in full causal; do for tool in racecheck synccheck memcheck; do
  FLASHMLIR_SMS=2 FLASHMLIR_KERNEL_DIR=$PWD/build/ptma timeout 60 compute-sanitizer --tool $tool \
    $PY scripts/sanitize-one.py $d $m 2>&1 | grep -E "max err|SUMMARY|rror" | head -3 | sed "s/^/$tool d$d $m: /"
done; done; done
echo "sanitizers $(elapsed)"
ab() {  # ab A B
  timeout 200 $PY bench/bench_kernel_ab.py --direction fwd --rep 200 --a build/$1 --b build/$2 \
    --headdims 64 128 --seqlens 512 2048 4096 16384 --masks full causal \
    --json "$OUT/ab-$1-vs-$2.json" 2>&1 | grep -E "B/A|rror" | sed 's/ {.*//' | head -24
  echo "ab $1 $2 done $(elapsed)"
}
ab kernels ptma; ab ptma kernels
