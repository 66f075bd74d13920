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
# build/kernels-main-s24.tar.xz: the same on main), PERS (below) and the
# launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
unpack_kernels build/kernels "${KERNELS:-build/kernels-rk.tar.xz}"
unpack_kernels build/kernels-prev "${PREV:-build/kernels-main-s24.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
check_backward
gpu_suites 200 test_gpu_backward test_gpu_attention test_gpu_head_dims test_gpu_launch \
  test_gpu_transformers test_gpu_sequences test_gpu_decode
if [ $(left) -gt 100 ]; then
  echo "== A/B main (A) vs row kernels (B) at $(elapsed) s"
  timeout 120 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
    --direction bwd --headdims 64 128 --seqlens 1024 2048 8192 --masks full causal --rep 40 \
    --json $OUT/ab-rk-bwd.json 2>&1 | grep "B/A"
fi
# The persistent key-block kernel (branch s25-persistent-bwd): PERS
# (default build/kernels-pers.tar.xz) is KERNELS with the D = 64 / 128
# backward kernels (unmasked and causal) built --tile-scheduler=persistent.
if [ -f "${PERS:-build/kernels-pers.tar.xz}" ] && [ $(left) -gt 90 ]; then
  unpack_kernels build/kernels-pers "${PERS:-build/kernels-pers.tar.xz}"
  echo "== persistent: check_backward at $(elapsed) s"
  FLASHMLIR_KERNEL_DIR=build/kernels-pers timeout 60 $PY bench/check_backward.py 2>&1 \
    | grep -v execution_engine | tail -1
  for sms in 5 ""; do
    echo "== persistent: test_gpu_backward FLASHMLIR_SMS=$sms at $(elapsed) s"
    FLASHMLIR_KERNEL_DIR=build/kernels-pers FLASHMLIR_SMS=$sms FLASHMLIR_REQUIRE_KERNELS=1 \
      timeout 90 $PY -m pytest -q -p no:cacheprovider python/tests/test_gpu_backward.py 2>&1 | tail -3
  done
  echo "== A/B grid (A) vs persistent (B) at $(elapsed) s"
  timeout 90 $PY bench/bench_kernel_ab.py --a build/kernels --b build/kernels-pers \
    --direction bwd --headdims 128 64 --seqlens 1024 2048 8192 --masks full causal --rep 30 \
    --json $OUT/ab-pers-bwd.json 2>&1 | grep "B/A"
  echo "== GQA causal grid (A) vs persistent (B) at $(elapsed) s"
  timeout 60 $PY bench/bench_kernel_ab.py --a build/kernels --b build/kernels-pers \
    --direction bwd --headdims 128 --seqlens 2048 8192 --masks causal --groups 4 8 \
    --hidden 2048 --rep 40 --json $OUT/ab-pers-gqa.json 2>&1 | grep "B/A"
fi
if [ $(left) -gt 60 ]; then
  sanitize_backward "128 causal,64 det big"
  [ -d build/kernels-pers ] && FLASHMLIR_KERNEL_DIR=build/kernels-pers FLASHMLIR_SMS=2 \
    sanitize_backward "128 causal big"
fi
if [ $(left) -gt 80 ]; then
  echo "== per-kernel breakdown at $(elapsed) s"
  timeout 60 $PY bench/profile_backward_kernels.py --headdims 64 128 --seqlens 2048 2>&1 | grep -v Warning
fi
if [ $(left) -gt 120 ]; then
  # One wave of 128 key blocks: per-block fixed cost against iterations.
  echo "== one-wave per-kernel times at $(elapsed) s"
  timeout 60 $PY bench/profile_backward_kernels.py --headdims 128 \
    --seqlens 1024 2048 4096 8192 16384 --one-wave 128 2>&1 | grep -v Warning
fi
if [ $(left) -gt 100 ]; then
  echo "== check_backward --bench at $(elapsed) s"
  timeout $(( $(left) - 20 > 130 ? 130 : $(left) - 20 )) $PY bench/check_backward.py --bench \
    --headdims 64 128 --seqlens 1024 2048 8192 16384 2>&1 | grep "^D"
fi
if [ $(left) -gt 60 ]; then
  # GQA 8 causal is 9-19% slower than MHA: memory traffic (the group's dQ
  # accumulators and Q / dO missing L2) or imbalance?
  for kvh in 16 2; do ncu_key_block $kvh; done
fi
if [ $(left) -gt 70 ]; then
  echo "== GQA against MHA at the same Hq (D = 128) at $(elapsed) s"
  timeout 60 $PY bench/bench_kernel_ab.py --a build/kernels --b build/kernels --direction bwd \
    --headdims 128 --seqlens 2048 8192 --masks full causal --groups 1 4 8 --hidden 2048 --rep 40 \
    --json $OUT/gqa.json 2>&1 | grep "B/A"
fi
if [ $(left) -gt 60 ]; then
  echo "== Llama step at $(elapsed) s"
  timeout $(( $(left) - 10 )) $PY bench/bench_llama_step.py --layers 4 --tokens 8192 --steps 6 \
    --rounds 2 2>&1 | tail -4
fi
echo "== done at $(elapsed) s"
