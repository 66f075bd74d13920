#!/bin/bash
# H200, seventh session: the new default kernel set (build/kernels: the
# persistent TMA-store forward without a mask at D = 128 and D = 64/128
# mixed, the split-KV decode kernels) and its benchmarks. Carry
# build/kernels.tar.xz and build/dec128.tar.xz.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/dec128 ] || tar -xJf build/dec128.tar.xz -C build
$PY test/Tools/check-manifests.py build/kernels > /dev/null || { echo "invalid manifests in build/kernels"; exit 1; }
export FLASHMLIR_KERNEL_DIR=$PWD/build/kernels
for t in test_gpu_attention test_gpu_decode test_gpu_backward; do
  FLASHMLIR_REQUIRE_KERNELS=1 timeout 200 $PY -m pytest -q -x -p no:cacheprovider \
    python/tests/$t.py 2>&1 | tail -1
  echo "$t $(elapsed)"
done
timeout 100 $PY bench/bench_decode.py --json $OUT/decode.json 2>&1 | grep Nq=
timeout 60 $PY bench/bench_decode.py --nq 4 --nk 4096 16384 65536 --json $OUT/decode-nq4.json 2>&1 | grep Nq=
FLASHMLIR_KERNEL_DIR=$PWD/build/dec128 timeout 60 $PY bench/bench_decode.py --nk 4096 16384 65536 --json $OUT/decode-bkv128.json 2>&1 | grep Nq=
echo "decode bench $(elapsed)"
timeout 330 $PY bench/bench_attention.py --out $OUT --direction fwd --dtypes bf16 --flex-budget-s 60 \
  --no-ceilings --name bench-fwd 2>&1 | tail -24
echo "bench $(elapsed)"
