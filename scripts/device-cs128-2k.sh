#!/bin/bash
# H200, seventh session: issue 11's D = 128 non-causal N = 2k cell again
# (the two orders disagreed), with more repetitions, three times each
# order, and a null A/B (the default set against a copy of itself). Carry
# build/kernels.tar.xz, build/cs128.tar.xz.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/cs128 ] || tar -xJf build/cs128.tar.xz -C build
rm -rf build/kcopy && cp -r build/kernels build/kcopy
for i in 1 2 3; do
  for pair in kernels:cs128 cs128:kernels kernels:kcopy; do a=${pair%%:*}; b=${pair##*:}
    timeout 60 $PY bench/bench_kernel_ab.py --direction fwd --rep 1000 --a build/$a --b build/$b \
      --headdims 128 --seqlens 2048 --masks full \
      --json "$OUT/ab-2k-$a-vs-$b-$i.json" 2>&1 | grep -E "B/A|rror" | sed "s/ {.*//; s/^/$a vs $b: /"
  done
done
echo "done $(elapsed)"
