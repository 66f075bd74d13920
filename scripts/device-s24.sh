#!/bin/bash
# Twenty-fourth session: everything in one call.
# - Issue 16: the 12 D = 64 sm_90a backward kernels of the twenty-third
#   session (WS 128 x 128 x 8 with the lse2 / delta ring), never run yet.
# - Issue 12: the D = 64 forward on the dynamic tile scheduler (the TMA
#   store epilogue's addresses formed from a fenced thread index: 0 spills,
#   was 104-132 bytes), and every persistent / dynamic forward's new
#   epilogue (PTX changed at D = 128 too).
# Correctness first (suites, SMS = 5, modifiers, sanitizers), then A/B
# against the twenty-second session's set (c842114), the benches beside
# cuDNN / FA2, the Llama step, the backward's per-kernel breakdown and an
# ncu source profile. Carry build/kernels.tar.xz (this session's default
# set), build/kernels-prev.tar.xz, build/modk.tar.xz (this session's
# modifier set) and the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels build/kernels-prev build/modk
tar -xJf build/kernels.tar.xz -C build
tar -xJf build/modk.tar.xz -C build
mkdir -p build/kernels-prev
tar -xJf build/kernels-prev.tar.xz -C build/kernels-prev --strip-components=1
LIMIT=${LIMIT:-585}
left() { echo $(( LIMIT - $(elapsed) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== check_backward at $(elapsed) s"
timeout 60 $PY bench/check_backward.py 2>&1 | grep -v execution_engine | tail -1
echo "== GPU suites at $(elapsed) s"
FLASHMLIR_REQUIRE_KERNELS=1 timeout 150 $PY -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu_backward.py python/tests/test_gpu_attention.py \
  python/tests/test_gpu_head_dims.py python/tests/test_gpu_launch.py \
  python/tests/test_gpu_transformers.py python/tests/test_gpu_sequences.py 2>&1 | tail -2
echo "== test_gpu_attention with FLASHMLIR_SMS=5 at $(elapsed) s"
FLASHMLIR_SMS=5 FLASHMLIR_REQUIRE_KERNELS=1 timeout 90 $PY -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu_attention.py 2>&1 | tail -2
echo "== test_gpu_modifiers (modk) at $(elapsed) s"
PYTHONPATH="$PWD/python/tests:$PYTHONPATH" FLASHMLIR_KERNEL_DIR=build/modk \
  timeout 90 $PY -m pytest -q -p no:cacheprovider python/tests/test_gpu_modifiers.py 2>&1 | tail -2
sanitize_backward "64 causal,64 det big"
for args in "64" "64 causal" "128"; do
  for tool in memcheck racecheck; do
    echo "== forward $tool $args (SMS=2) at $(elapsed) s"
    FLASHMLIR_SMS=2 timeout 60 compute-sanitizer --tool $tool --kernel-name kns=fa_fwd_kernel \
      --print-limit 3 $PY scripts/sanitize-one.py $args 2>&1 \
      | grep -E "max err|ERROR SUMMARY|RACECHECK SUMMARY|hazard|Invalid" | head -4
  done
done
if [ $(left) -gt 100 ]; then
echo "== A/B forward prev (A) vs new (B) at $(elapsed) s"
timeout 100 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction fwd --headdims 64 --seqlens 512 1024 2048 4096 8192 16384 \
  --masks full causal --rep 40 --json $OUT/ab-fwd-d64.json 2>&1 | grep "B/A"
timeout 40 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction fwd --headdims 128 --seqlens 2048 16384 --masks full causal --rep 40 \
  --json $OUT/ab-fwd-d128.json 2>&1 | grep "B/A"
fi
if [ $(left) -gt 100 ]; then
echo "== A/B backward prev (A) vs new (B) at $(elapsed) s"
timeout 80 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels \
  --direction bwd --headdims 64 --seqlens 2048 16384 --masks full causal --rep 60 \
  --json $OUT/ab-bwd-d64.json 2>&1 | grep "B/A"
timeout 40 $PY bench/bench_kernel_ab.py --a build/kernels-prev --b build/kernels --direction bwd \
  --headdims 64 --seqlens 8192 --masks full causal --deterministic --rep 60 \
  --json $OUT/ab-bwd-d64-det.json 2>&1 | grep "B/A"
fi
if [ $(left) -gt 100 ]; then
echo "== check_backward --bench at $(elapsed) s"
timeout $(( $(left) - 20 > 130 ? 130 : $(left) - 20 )) $PY bench/check_backward.py --bench --headdims 64 128 \
  --seqlens 1024 2048 8192 16384 2>&1 | grep "^D"
fi
if [ $(left) -gt 70 ]; then
echo "== GQA against MHA at the same Hq (D = 128, this set both sides) at $(elapsed) s"
timeout 60 $PY bench/bench_kernel_ab.py --a build/kernels --b build/kernels --direction bwd \
  --headdims 128 --seqlens 2048 8192 --masks full causal --groups 1 4 8 --hidden 2048 --rep 40 \
  --json $OUT/gqa.json 2>&1 | grep "B/A"
fi
if [ $(left) -gt 80 ]; then
  echo "== per-kernel breakdown at $(elapsed) s"
  timeout $(( $(left) - 20 > 60 ? 60 : $(left) - 20 )) $PY bench/profile_backward_kernels.py \
    --headdims 64 128 --seqlens 2048 8192 2>&1 | grep -v Warning
fi
if [ $(left) -gt 170 ]; then
  echo "== bench_attention fwd D=64 at $(elapsed) s"
  timeout 90 $PY bench/bench_attention.py --direction fwd --headdims 64 \
    --seqlens 512 1024 2048 4096 8192 16384 --no-flex --rep 60 --name fwd64 2>&1 \
    | grep -E "^ +[0-9]+ |TFLOP" | head -20
fi
if [ $(left) -gt 130 ]; then
  echo "== Llama step at $(elapsed) s"
  timeout 120 $PY bench/bench_llama_step.py --layers 4 --tokens 8192 --steps 6 --rounds 2 2>&1 | tail -4
fi
if [ $(left) -gt 100 ]; then
  echo "== ncu source D=128 at $(elapsed) s"
  OUT="$OUT/d128" timeout $(( $(left) - 10 )) bash scripts/device-s21-ncu-src.sh 8192 128 2>&1 | head -70
fi
echo "== done at $(elapsed) s"
