#!/bin/bash
# Issue 14 probe (twenty-first session): the warp-specialized backward for
# modifier kernels. build/modk-ws: scripts/build-modifier-kernels.py with
# fa-select-kernel-config putting the WS candidate first for modifier ops
# too (reverted on main; where WS spills fa-compile took the cooperative
# kernel: 9 of the D = 128 backward kernels differ); build/modk-coop: the
# same set from main. Carry both tarballs, build/kernels.tar.xz and the
# launcher. The modifier GPU suite on the WS set, then the backward
# benchmark on each set (Flex beside the first).
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels build/modk-ws build/modk-coop
for t in kernels modk-ws modk-coop; do tar -xJf build/$t.tar.xz -C build; done
export PYTHONPATH="$PWD/python/tests:$PYTHONPATH"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== test_gpu_modifiers (WS set) at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=build/modk-ws timeout ${SUITE_S:-150} $PY -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu_modifiers.py 2>&1 | tail -3
for set in modk-coop modk-ws; do
  echo "== bench_modifiers bwd ($set) at $(elapsed) s"
  flex=""; [ $set = modk-ws ] && flex="--no-flex"
  FLASHMLIR_KERNEL_DIR=build/$set timeout ${BENCH_S:-130} $PY bench/bench_modifiers.py \
    --direction bwd --seqlens 4096 --rounds 2 $flex --out "$OUT/$set" 2>&1 | tail -14
done
echo "== done at $(elapsed) s"
