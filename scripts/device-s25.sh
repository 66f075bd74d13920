#!/bin/bash
# Issue 16 (branch s24-row-kernels): the backward's row kernels (the
# preprocessing and the dQ conversion) with their loads issued before their
# stores, and every global vector access with its alignment stated (NVPTX
# split them into 2- and 4-byte accesses: the row kernels, the key-block
# kernel's dK / dV stores, the grid / sm_80 forwards' O stores). Every
# backward kernel and the non-TMA forwards change. Correctness on the full
# set (dense, varlen, paged), then A/B against main's set, the per-kernel
# breakdown beside cuDNN, and the backward beside cuDNN / FA2. The packed
# (varlen / paged) forwards now fence their TMA-store epilogue like the dense
# ones, so the varlen / paged suites cover that too. Carry
# KERNELS (default build/kernels-rk.tar.xz: `python3 -m flashmlir compile
# --kind all --form all` on this branch, tarred as kernels/), PREV (default
# build/kernels-main-s24.tar.xz: the same on main) and the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels build/kernels-prev
mkdir -p build/kernels build/kernels-prev
tar -xJf "${KERNELS:-build/kernels-rk.tar.xz}" -C build/kernels --strip-components=1
tar -xJf "${PREV:-build/kernels-main-s24.tar.xz}" -C build/kernels-prev --strip-components=1
LIMIT=${LIMIT:-560}
left() { echo $(( LIMIT - $(elapsed) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== check_backward at $(elapsed) s"
timeout 60 $PY bench/check_backward.py 2>&1 | grep -v execution_engine | tail -1
echo "== GPU suites (all forms) at $(elapsed) s"
FLASHMLIR_REQUIRE_KERNELS=1 timeout 200 $PY -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu_backward.py python/tests/test_gpu_attention.py \
  python/tests/test_gpu_head_dims.py python/tests/test_gpu_launch.py \
  python/tests/test_gpu_transformers.py python/tests/test_gpu_sequences.py \
  python/tests/test_gpu_decode.py 2>&1 | tail -3
sanitize_backward "128 causal,64 det big"
if [ $(left) -gt 100 ]; then
  echo "== A/B main (A) vs row kernels (B) at $(elapsed) s"
  timeout 120 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
    --direction bwd --headdims 64 128 --seqlens 1024 2048 8192 --masks full causal --rep 40 \
    --json $OUT/ab-rk-bwd.json 2>&1 | grep "B/A"
fi
if [ $(left) -gt 80 ]; then
  echo "== per-kernel breakdown at $(elapsed) s"
  timeout 60 $PY bench/profile_backward_kernels.py --headdims 64 128 --seqlens 2048 2>&1 | grep -v Warning
fi
if [ $(left) -gt 100 ]; then
  echo "== check_backward --bench at $(elapsed) s"
  timeout $(( $(left) - 20 > 130 ? 130 : $(left) - 20 )) $PY bench/check_backward.py --bench \
    --headdims 64 128 --seqlens 1024 2048 8192 16384 2>&1 | grep "^D"
fi
echo "== done at $(elapsed) s"
