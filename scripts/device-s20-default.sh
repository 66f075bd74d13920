#!/bin/bash
# Issue 16, twentieth session, after the warp-specialized backward became
# the D = Dv = 128 default (fa-select-kernel-config; softcap, Dv != D,
# modifiers and packed sequences keep the cooperative kernel): the GPU
# suites on the default set, backward TFLOP/s beside SDPA's flash and cuDNN
# (bench_attention.py, two rounds, order reversed), GQA against MHA and
# the cooperative kernel (bench_kernel_ab.py), the Llama training step.
# Carry build/kernels.tar.xz, build/kernels-coop.tar.xz (the cooperative
# D = 128 backward: fa-compile --schedule=cooperative), the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/kernels-coop ] || tar -xJf build/kernels-coop.tar.xz -C build
LIMIT=${LIMIT:-585}
left() { echo $(( LIMIT - $(elapsed) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "WS D=128 backward manifests: $(grep -l warp_specialized build/kernels/fa_bwd_d128*sm90a.json | wc -l)"
echo "== GPU suites (default set) at $(elapsed) s"
FLASHMLIR_REQUIRE_KERNELS=1 timeout 200 $PY -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu_backward.py python/tests/test_gpu_attention.py 2>&1 | tail -4
echo "== bench_attention bwd at $(elapsed) s"
timeout ${BENCH_S:-200} $PY bench/bench_attention.py --out "$OUT/bench" --direction bwd \
  --headdims ${HEADDIMS:-64 128} --dtypes bf16 --no-flex --seqlens ${SEQLENS:-1024 2048 4096 8192 16384} \
  --time-budget-s $(( ${BENCH_S:-200} - 20 )) 2>&1 | tail -24
echo "== GQA: cooperative (A) vs default (B), D = 128 at $(elapsed) s"
timeout ${AB_S:-90} $PY bench/bench_kernel_ab.py --a build/kernels-coop --b build/kernels --direction bwd \
  --headdims 128 --seqlens 2048 8192 --masks full causal --groups 1 4 8 --rep 60 \
  --json $OUT/ab-gqa.json 2>&1 | tail -14
if [ $(left) -gt 70 ]; then
  echo "== Llama step at $(elapsed) s"
  timeout $(( $(left) - 5 )) $PY bench/bench_llama_step.py --layers 4 --tokens 8192 --steps 6 --rounds 2 2>&1 | tail -8
fi
echo "== done at $(elapsed) s"
