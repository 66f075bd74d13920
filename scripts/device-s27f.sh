#!/bin/bash
# Issue 16: the query-outer order with the plain launch order for every
# G >= 4 and any number of key blocks (variant pmqo-all, D = 128 causal),
# against main's rule (KERNELS, build/kernels-g4.tar.xz: G >= 8 with mapBlock's
# reorder up to 64 key blocks, 4 <= G < 8 plain up to 32). Where it wins
# tells how far the rule can go; the Llama step (B = 1, 8k, G = 4) runs
# with the variant. The whole log goes to $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-g4.tar.xz}"
rm -rf build/variants && mkdir -p build/variants
tar -xJf "${VARIANTS:-build/variants-s27b.tar.xz}" -C build/variants
rm -rf build/kv && cp -r build/kernels build/kv && cp build/variants/pmqo-all/* build/kv/
LIMIT=${LIMIT:-330}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== A/B main (A) vs pmqo-all (B) at $(elapsed) s"
timeout 100 $PY bench/bench_kernel_ab.py --a build/kernels --b build/kv \
  --direction bwd --headdims 128 --seqlens 1024 2048 4096 8192 16384 --masks causal \
  --groups 1 4 8 --rep 30 --json $OUT/ab-pmqo-all.json 2>&1 | grep "B/A" | sed 's/  {.*//'
echo "== the same at 8k tokens (B = 1 at 8k) at $(elapsed) s"
timeout 40 $PY bench/bench_kernel_ab.py --a build/kernels --b build/kv \
  --direction bwd --headdims 128 --seqlens 2048 8192 --masks causal --tokens 8192 \
  --groups 1 4 --rep 30 --json $OUT/ab-pmqo-all-8k.json 2>&1 | grep "B/A" | sed 's/  {.*//'
if [ $(left) -gt 100 ]; then
  echo "== Llama step with pmqo-all at $(elapsed) s"
  FLASHMLIR_KERNEL_DIR=build/kv timeout $(( $(left) - 10 )) $PY bench/bench_llama_step.py \
    --layers 4 --tokens 8192 --steps 6 --rounds 2 2>&1 | tail -4
fi
echo "== done at $(elapsed) s"
