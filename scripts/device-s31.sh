#!/bin/bash
# Thirty-first session: issue 14's backward bar on the current set (the
# modifier kernels of bench_modifiers.py, MODK = build/modk-s31.tar.xz:
# `scripts/build-modifier-kernels.py build/modk-s31 --only bench -j 2`,
# main's set KERNELS = build/kernels.tar.xz for the built-in equivalents)
# beside Flex in one process, and where a sliding window's backward spends
# its time (per kernel, beside Flex). Log: $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels.tar.xz}"
unpack_kernels build/modk "${MODK:-build/modk-s31.tar.xz}"
export PYTHONPATH="$PWD/python/tests:$PYTHONPATH"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "$(left)" -gt 60 ]; then
  echo "== window backward per kernel at $(elapsed) s"
  for w in 100 1024; do
    FLASHMLIR_KERNEL_DIR=build/modk:build/kernels timeout 60 $PY bench/profile_backward_kernels.py \
      --headdims 128 --seqlens 4096 16384 --window $w 2>&1 | grep -v Warning | head -40
  done
fi
for n in ${SEQLENS:-4096 16384}; do
  [ "$(left)" -gt 80 ] || break
  echo "== bench_modifiers bwd N=$n at $(elapsed) s"
  FLASHMLIR_KERNEL_DIR=build/modk:build/kernels timeout $(( $(left) - 5 )) $PY bench/bench_modifiers.py \
    --direction bwd --seqlens $n --rounds 2 --out "$OUT/n$n" 2>&1 | tail -14
done
echo "== done at $(elapsed) s"
