#!/bin/bash
# Issue 14's backward bar (>= 1.2x FlexAttention) on the current set: the
# modifier kernels of bench_modifiers.py (MODK, build/modk-s29.tar.xz:
# `scripts/build-modifier-kernels.py build/modk-s29 --only bench -j 2`)
# searched first, main's set (KERNELS, build/kernels-s29b.tar.xz) for the
# built-in equivalents; Flex timed in the same process. Log: $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-s29b.tar.xz}"
unpack_kernels build/modk "${MODK:-build/modk-s29.tar.xz}"
export PYTHONPATH="$PWD/python/tests:$PYTHONPATH"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== bench_modifiers bwd at $(elapsed) s"
FLASHMLIR_KERNEL_DIR=build/modk timeout $(( $(left) - 5 )) $PY bench/bench_modifiers.py \
  --direction bwd --seqlens ${SEQLENS:-4096} --rounds 2 --out "$OUT" 2>&1 | tail -16
echo "== done at $(elapsed) s"
