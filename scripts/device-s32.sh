#!/bin/bash
# Thirty-second session, first call. On any card: the softcap's tanh as
# tanh.approx.f32 (faptx.tanh): the GPU suites of the changed kernels on
# main's set (KERNELS, build/kernels.tar.xz, 22 softcap kernels changed), the
# sanitizers on a softcap backward, the A/B against the set before
# (OLD, build/kernels-s31.tar.xz), bench_variants with the causal softcap
# forwards (VAR, build/kernels-var.tar.xz). With PART=2 on an H200: issue
# 10's and 17's runs (the other suites, the D = 192 sanitizers, the host
# overhead, the Llama step, the head-dim bench beside FA2 / cuDNN). Log:
# $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "${PART:-1}" = 1 ]; then
  unpack_kernels build/kernels-old "${OLD:-build/kernels-s31.tar.xz}"
  unpack_kernels build/kernels-var "${VAR:-build/kernels-var.tar.xz}"
  # (The suites whose kernels changed: softcap, the deterministic ones.)
  gpu_suites 200 test_gpu_attention test_gpu_sequences test_gpu_launch test_gpu_decode \
    test_gpu_backward
  [ "$(left)" -gt 120 ] && FLASHMLIR_KERNEL_DIR=build/kernels sanitize_backward "128 softcap big"
  if [ "$(left)" -gt 60 ]; then
    echo "== A/B softcap 30, before (A) vs tanh.approx (B) at $(elapsed) s"
    timeout 60 $PY bench/bench_kernel_ab.py --a build/kernels-old --b build/kernels --softcap 30 \
      --direction both --headdims 64 128 --seqlens 2048 16384 --masks full causal \
      --rep 25 --json $OUT/ab-softcap.json 2>&1 | grep "B/A"
  fi
  if [ -f build/wexp.tar.xz ] && [ "$(left)" -gt 90 ]; then
    # An experiment: the causal-window backward with dQ by a query-block
    # kernel (Flex's structure: no f32 accumulator), the deterministic
    # cooperative form under the fast kernel's name.
    unpack_kernels build/wexp build/wexp.tar.xz
    echo "== A/B causal window bwd, atomics (A) vs query-block dQ kernel (B) at $(elapsed) s"
    timeout 80 $PY bench/bench_kernel_ab.py --a build/kernels --b build/wexp --direction bwd \
      --headdims 64 128 --seqlens 4096 16384 --masks causal-window=99,0 causal-window=1023,0 \
      --rep 25 --json $OUT/ab-window-dq.json 2>&1 | grep "B/A"
  fi
  if [ "$(left)" -gt 30 ]; then
    echo "== bench_variants at $(elapsed) s"
    FLASHMLIR_KERNEL_DIR=build/kernels:build/kernels-var timeout $(( $(left) - 5 )) \
      $PY bench/bench_variants.py --headdims 64 128 --seqlens 2048 4096 16384 \
      --json "$OUT/variants.json" 2>&1 | grep -v Warn | tail -14
  fi
else
  gpu_suites 150 test_gpu_head_dims test_gpu_compile test_gpu_transformers
  [ "$(left)" -gt 200 ] && FLASHMLIR_KERNEL_DIR=build/kernels sanitize_backward "192 causal big"
  if [ "$(left)" -gt 100 ]; then
    echo "== bench_overhead at $(elapsed) s"
    timeout 90 $PY bench/bench_overhead.py --json "$OUT/overhead.json" 2>&1 | tail -14
  fi
  if [ "$(left)" -gt 70 ]; then
    echo "== Llama step at $(elapsed) s"
    timeout 150 $PY bench/bench_llama_step.py --layers 4 --tokens 8192 --steps 6 \
      --rounds 2 --json "$OUT/llama.json" 2>&1 | tail -6
  fi
  [ "$(left)" -gt 60 ] && bench_beside headdims both $(( $(left) - 10 )) --headdims 96 192 256 \
    --seqlens 2048 8192 16384 --impls flashmlir fa2 cudnn --no-flex --no-ceilings --rep 25
fi
echo "== done at $(elapsed) s"
