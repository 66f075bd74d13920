#!/bin/bash
# H200, seventh session: the split-KV decode kernels (issue 13). Carry
# build/kernels.tar.xz and build/kdec.tar.xz (build/kernels plus the
# *_splitkv_* kernels of `python3 -m flashmlir compile --kind forward`).
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/kdec ] || tar -xJf build/kdec.tar.xz -C build
$PY test/Tools/check-manifests.py build/kdec > /dev/null || { echo "invalid manifests in build/kdec"; exit 1; }
export FLASHMLIR_KERNEL_DIR=$PWD/build/kdec
FLASHMLIR_REQUIRE_KERNELS=1 timeout 240 $PY -m pytest -q -x -p no:cacheprovider \
  python/tests/test_gpu_decode.py 2>&1 | tail -4
echo "decode tests $(elapsed)"
timeout 120 $PY -m pytest -q -x -p no:cacheprovider python/tests/test_gpu_attention.py 2>&1 | tail -2
echo "attention tests $(elapsed)"
for tool in memcheck racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $tool $PY -m pytest -q -p no:cacheprovider \
    python/tests/test_gpu_decode.py -k "1000 and (gqa or mha) and bf16" 2>&1 \
    | grep -E "passed|failed|SUMMARY|rror" | head -4 | sed "s/^/$tool: /"
done
echo "sanitizers $(elapsed)"
timeout 150 $PY bench/bench_decode.py --json $OUT/decode.json 2>&1 | tail -8
timeout 100 $PY bench/bench_decode.py --nq 4 --nk 4096 16384 65536 --json $OUT/decode-nq4.json 2>&1 | tail -5
FLASHMLIR_SPLIT_KV=0 timeout 100 $PY bench/bench_decode.py --nk 4096 16384 65536 --json $OUT/decode-nosplit.json 2>&1 | tail -5
echo "bench $(elapsed)"
