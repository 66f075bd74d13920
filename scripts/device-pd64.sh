#!/bin/bash
# H200, seventh session: the D = 64 forward without a mask as the persistent
# kernel with two consumer warpgroups (block_q 128; the three-consumer one
# spills) against the default grid kernel (block_q 192). Carry
# build/kernels.tar.xz and build/pd64.tar.xz.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/pd64 ] || tar -xJf build/pd64.tar.xz -C build
$PY test/Tools/check-manifests.py build/pd64 > /dev/null || { echo "invalid manifests in build/pd64"; exit 1; }
FLASHMLIR_SMS=5 FLASHMLIR_KERNEL_DIR=$PWD/build/pd64 timeout 120 $PY -m pytest -q -x -p no:cacheprovider \
  python/tests/test_gpu_attention.py -k "64" 2>&1 | tail -1
for tool in racecheck synccheck; do
  FLASHMLIR_SMS=2 FLASHMLIR_KERNEL_DIR=$PWD/build/pd64 timeout 60 compute-sanitizer --tool $tool \
    $PY scripts/sanitize-one.py 64 2>&1 | grep -E "max err|SUMMARY" | head -2 | sed "s/^/$tool: /"
done
for pair in kernels:pd64 pd64:kernels; do a=${pair%%:*}; b=${pair##*:}
  timeout 120 $PY bench/bench_kernel_ab.py --direction fwd --rep 200 --a build/$a --b build/$b \
    --headdims 64 --seqlens 512 1024 2048 4096 8192 16384 --masks full \
    --json "$OUT/ab-$a-vs-$b.json" 2>&1 | grep -E "B/A|rror" | sed 's/ {.*//'
done
echo "done $(elapsed)"
