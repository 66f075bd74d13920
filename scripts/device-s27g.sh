#!/bin/bash
# Issue 16: causal GQA at 8k / 16k, where G = 8 is 7-9% slower than MHA:
# mapBlock's reorder with the query-outer order up to 128 key blocks (main:
# 64) for G >= 8 (variant g8-128) or G >= 4 (g4-128), D = 128, against
# main's set (KERNELS, build/kernels-g4.tar.xz); test_gpu_backward.py on
# g8-128 (test_large_groups_causal has 72 key blocks). The whole log goes
# to $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-g4.tar.xz}"
rm -rf build/variants && mkdir -p build/variants
tar -xJf "${VARIANTS:-build/variants-s27c.tar.xz}" -C build/variants
for v in g8-128 g4-128; do
  rm -rf "build/kv-$v" && cp -r build/kernels "build/kv-$v" && cp build/variants/$v/* "build/kv-$v/"
done
LIMIT=${LIMIT:-200}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for v in g8-128 g4-128; do
  echo "== A/B main (A) vs $v (B) at $(elapsed) s"
  timeout 60 $PY bench/bench_kernel_ab.py --a build/kernels --b build/kv-$v \
    --direction bwd --headdims 128 --seqlens 8192 16384 --masks causal \
    --groups 1 4 8 --rep 30 --json $OUT/ab-$v.json 2>&1 | grep "B/A" | sed 's/  {.*//'
done
echo "== B = 1 at 8k at $(elapsed) s"
timeout 30 $PY bench/bench_kernel_ab.py --a build/kernels --b build/kv-g4-128 \
  --direction bwd --headdims 128 --seqlens 8192 --masks causal --tokens 8192 \
  --groups 4 8 --rep 30 --json $OUT/ab-g4-128-b1.json 2>&1 | grep "B/A" | sed 's/  {.*//'
echo "== test_gpu_backward.py on g8-128 at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=build/kv-g8-128 FLASHMLIR_REQUIRE_KERNELS=1 timeout 60 $PY -m pytest -q \
  -p no:cacheprovider python/tests/test_gpu_backward.py 2>&1 | grep -E "^FAILED|passed|failed" | head -4
echo "== done at $(elapsed) s"
