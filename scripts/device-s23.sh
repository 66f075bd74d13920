#!/bin/bash
# Twenty-third session: what the twenty-second could not run, then a D = 64
# probe (issue 16).
#  1. test_gpu_modifiers.py on the modifier set (build/modk), whose D = 128
#     WS backward kernels take the lse2 / delta ring since 85f73f0;
#  2. the Llama training step against SDPA (issue 17's bar) on build/kernels;
#  3. D = 64: the default set (A) against the WS 128 x 128 x 8 backward with
#     the ring (B: build/e128f, lse2 folded; build/e128n, lse2 read where it
#     is used): check_backward on each, then A/B at 2k / 8k;
#  4. GQA against main's previous kernels if time is left.
# Carry build/kernels.tar.xz, build/kernels-base.tar.xz, build/modk.tar.xz,
# build/e128.tar.xz and the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels build/kernels-base build/modk build/e128f build/e128n
for t in kernels kernels-base modk e128; do
  [ -f build/$t.tar.xz ] && tar -xJf build/$t.tar.xz -C build
done
LIMIT=${LIMIT:-585}
left() { echo $(( LIMIT - $(elapsed) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "${MODS:-1}" = 1 ]; then
  echo "== test_gpu_modifiers (modk) at $(elapsed) s"
  PYTHONPATH="$PWD/python/tests:$PYTHONPATH" FLASHMLIR_KERNEL_DIR=build/modk \
    timeout ${MODS_S:-220} $PY -m pytest -q -p no:cacheprovider \
    python/tests/test_gpu_modifiers.py 2>&1 | tail -4
fi
if [ "${LLAMA:-1}" = 1 ]; then
  echo "== Llama step at $(elapsed) s"
  timeout ${LLAMA_S:-150} $PY bench/bench_llama_step.py --layers 4 --tokens 8192 --steps 6 \
    --rounds 2 2>&1 | tail -8
fi
for v in e128f e128n; do
  [ -d build/$v ] && [ $(left) -gt 70 ] || continue
  echo "== D = 64 $v: check_backward at $(elapsed) s"
  FLASHMLIR_KERNEL_DIR=build/$v:build/kernels timeout 60 $PY bench/check_backward.py 2>&1 \
    | grep -v execution_engine | tail -3
  echo "== D = 64: default (A) vs $v (B) at $(elapsed) s"
  timeout ${AB64_S:-75} $PY bench/bench_kernel_ab.py --a build/kernels --b build/$v --direction bwd \
    --headdims 64 --seqlens 2048 8192 --masks full causal --rep 60 \
    --json $OUT/ab-$v.json 2>&1 | tail -5
done
if [ "${GQA:-1}" = 1 ] && [ $(left) -gt 90 ]; then
  echo "== GQA: base (A) vs ring (B), D = 128 at $(elapsed) s"
  timeout $(( $(left) - 5 )) $PY bench/bench_kernel_ab.py --a build/kernels-base --b build/kernels \
    --direction bwd --headdims 128 --seqlens 8192 --masks full causal --groups 1 4 --rep 60 \
    --json $OUT/ab-gqa.json 2>&1 | tail -6
fi
echo "== done at $(elapsed) s"
