#!/bin/bash
# Issue 16, twenty-third session: the default set after the lse2 / delta
# ring moved to every warp-specialized backward (D = 64 now WS 128 x 128 x 8
# for every dense op, lse2 read where used at 128 queries, i32 iteration
# arithmetic, ex2.approx.ftz; only the 12 D = 64 sm_90a backward kernels
# differ from the twenty-second session's set). Correctness first (the GPU
# suites, modifiers, sanitizers), then A/B against the previous default
# set, the Llama step, and the backward beside cuDNN / FA2. Carry
# build/kernels.tar.xz, build/kernels-prev.tar.xz, build/modk.tar.xz and
# the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels build/kernels-prev build/modk
tar -xJf build/kernels.tar.xz -C build
tar -xJf build/modk.tar.xz -C build
if [ -f build/kernels-prev.tar.xz ]; then
  mkdir -p build/kernels-prev
  tar -xJf build/kernels-prev.tar.xz -C build/kernels-prev --strip-components=1
fi
LIMIT=${LIMIT:-585}
left() { echo $(( LIMIT - $(elapsed) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== check_backward at $(elapsed) s"
timeout 60 $PY bench/check_backward.py 2>&1 | grep -v execution_engine | tail -1
echo "== GPU suites at $(elapsed) s"
FLASHMLIR_REQUIRE_KERNELS=1 timeout 200 $PY -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu_backward.py python/tests/test_gpu_attention.py \
  python/tests/test_gpu_head_dims.py python/tests/test_gpu_launch.py \
  python/tests/test_gpu_transformers.py python/tests/test_gpu_sequences.py 2>&1 | tail -3
echo "== test_gpu_modifiers (modk) at $(elapsed) s"
PYTHONPATH="$PWD/python/tests:$PYTHONPATH" FLASHMLIR_KERNEL_DIR=build/modk \
  timeout 90 $PY -m pytest -q -p no:cacheprovider python/tests/test_gpu_modifiers.py 2>&1 | tail -2
sanitize_backward "${SAN_ARGS:-64 causal,64 det big}"
if [ "${AB:-1}" = 1 ] && [ -d build/kernels-prev ]; then
  echo "== A/B previous default (A) vs new (B) at $(elapsed) s"
  timeout $(( $(left) > 150 ? 150 : $(left) )) $PY bench/bench_kernel_ab.py --a build/kernels-prev \
    --b build/kernels --direction bwd --headdims ${AB_D:-64 128} --seqlens 2048 16384 \
    --masks full causal --rep 60 \
    --json $OUT/ab-prev-new.json 2>&1 | tail -8
  if [ $(left) -gt 50 ]; then
    timeout 40 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels --direction bwd \
      --headdims 64 --seqlens 8192 --masks full causal --deterministic --rep 60 \
      --json $OUT/ab-prev-new-det.json 2>&1 | tail -2
  fi
fi
if [ $(left) -gt 100 ]; then
  echo "== Llama step at $(elapsed) s"
  timeout 150 $PY bench/bench_llama_step.py --layers 4 --tokens 8192 --steps 6 --rounds 2 2>&1 | tail -5
fi
if [ $(left) -gt 60 ]; then
  echo "== check_backward --bench at $(elapsed) s"
  timeout $(( $(left) - 5 )) $PY bench/check_backward.py --bench --headdims 64 128 \
    --seqlens 2048 8192 16384 2>&1 | tail -16
fi
echo "== done at $(elapsed) s"
