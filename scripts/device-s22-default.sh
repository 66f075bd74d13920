#!/bin/bash
# Issue 16 / 17, twenty-second session, after the lse2 / delta ring (85f73f0):
# the default set as main builds it (build/kernels) -- GPU suites, the Llama
# training step against SDPA, GQA against MHA and main's previous kernels
# (build/kernels-base), then the modifier suite on the modifier set
# (build/modk: scripts/build-modifier-kernels.py, whose D = 128 WS backward
# kernels take the ring too). Carry build/kernels.tar.xz,
# build/kernels-base.tar.xz, build/modk.tar.xz and the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels build/kernels-base build/modk
for t in kernels kernels-base modk; do tar -xJf build/$t.tar.xz -C build; done
LIMIT=${LIMIT:-585}
left() { echo $(( LIMIT - $(elapsed) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "WS backward manifests: $(grep -l warp_specialized build/kernels/fa_bwd_*sm90a.json | wc -l)"
echo "== GPU suites (default set: ${SUITES:-backward}) at $(elapsed) s"
FLASHMLIR_REQUIRE_KERNELS=1 timeout 200 $PY -m pytest -q -p no:cacheprovider \
  $(for s in ${SUITES:-backward}; do echo python/tests/test_gpu_$s.py; done) 2>&1 | tail -3
echo "== Llama step at $(elapsed) s"
timeout ${LLAMA_S:-150} $PY bench/bench_llama_step.py --layers 4 --tokens 8192 --steps 6 --rounds 2 2>&1 | tail -8
if [ "${GQA:-1}" = 1 ]; then
  echo "== GQA: base (A) vs ring (B), D = 128 at $(elapsed) s"
  timeout ${AB_S:-80} $PY bench/bench_kernel_ab.py --a build/kernels-base --b build/kernels --direction bwd \
    --headdims 128 --seqlens 8192 --masks full causal --groups 1 4 8 --rep 60 \
    --json $OUT/ab-gqa.json 2>&1 | tail -8
fi
if [ "${D64S:-1}" = 1 ] && [ -f build/d64s.tar.xz ] && [ $(left) -gt 90 ]; then
  # Probe: D = 64 WS 64 x 64 x 4 tiles with the ring (scripts/build-ws-
  # backward.py OUT --head-dim 64 --tiles 64,64,4, sm_90a files into
  # build/d64s) over the default set.
  rm -rf build/d64s build/kernels-d64s && tar -xJf build/d64s.tar.xz -C build
  cp -r build/kernels build/kernels-d64s && cp build/d64s/* build/kernels-d64s/
  echo "== D = 64: default (A) vs WS 64x64x4 ring (B) at $(elapsed) s"
  FLASHMLIR_KERNEL_DIR=build/kernels-d64s timeout 60 $PY bench/check_backward.py 2>&1 | tail -1
  timeout ${AB64_S:-60} $PY bench/bench_kernel_ab.py --a build/kernels --b build/kernels-d64s --direction bwd \
    --headdims 64 --seqlens 2048 8192 --masks full causal --rep 60 \
    --json $OUT/ab-d64s.json 2>&1 | tail -4
fi
if [ $(left) -gt 40 ]; then
  echo "== test_gpu_modifiers (modk) at $(elapsed) s, $(left) s left"
  PYTHONPATH="$PWD/python/tests:$PYTHONPATH" FLASHMLIR_KERNEL_DIR=build/modk \
    timeout $(( $(left) - 5 )) $PY -m pytest -q -p no:cacheprovider \
    python/tests/test_gpu_modifiers.py 2>&1 | tail -3
fi
echo "== done at $(elapsed) s"
