#!/bin/bash
# H200, seventh session: issue 11's run-time-scale cell on the current
# D = 128 kernels (persistent without a mask, grid causal): the default set
# (scale a kernel parameter) against kernels with the default scale built
# in (build/cs128, fa-compile of IR files whose op has `scale
# 0.0883883...`), both orders. Carry build/kernels.tar.xz, build/cs128.tar.xz.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/cs128 ] || tar -xJf build/cs128.tar.xz -C build
$PY test/Tools/check-manifests.py build/cs128 > /dev/null || { echo "invalid manifests in build/cs128"; exit 1; }
for pair in kernels:cs128 cs128:kernels; do a=${pair%%:*}; b=${pair##*:}
  timeout 150 $PY bench/bench_kernel_ab.py --direction fwd --rep 400 --a build/$a --b build/$b \
    --headdims 128 --seqlens 2048 4096 8192 16384 --masks full causal \
    --json "$OUT/ab-$a-vs-$b.json" 2>&1 | grep -E "B/A|rror" | sed 's/ {.*//'
done
echo "done $(elapsed)"
