#!/bin/bash
# H200, thirteenth session: score_mod / mask_mod kernels (issue 14). Carry
# build/modifier-kernels.tar.xz
# (scripts/build-modifier-kernels.py: the modifier kernels and their
# built-in equivalents) and build/lib/libflashmlir_launcher.so.
# One call: test_gpu_modifiers.py (FlashAttention's rule against float64,
# built-ins bitwise) and test_gpu_modifiers_compile.py (torch.compile:
# aot_eager, inductor, CUDA graphs), compute-sanitizer memcheck and racecheck (fa_ kernels
# only) over a subset, then bench/bench_modifiers.py against FlexAttention.
# TESTS=0 / SANITIZE=0 / BENCH=0 skip a part; SAN_K picks the sanitized
# tests (pytest -k, with "300x450 and bhsd"). At most 8 files in $OUT.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
if [ -f build/modifier-kernels.tar.xz ] && [ ! -d build/modifier-kernels ]; then
  tar -xJf build/modifier-kernels.tar.xz -C build
fi
export FLASHMLIR_KERNEL_DIR=$PWD/build/modifier-kernels
export FLASHMLIR_REQUIRE_KERNELS=1
export PYTHONPATH="$PWD/python/tests:$PYTHONPATH"
[ "${TESTS:-1}" = 1 ] && timeout ${TEST_S:-240} $PY -m pytest -q -p no:cacheprovider -rs \
  python/tests/test_gpu_modifiers.py python/tests/test_gpu_modifiers_compile.py \
  > "$OUT/tests.txt" 2>&1
tail -3 "$OUT/tests.txt"
grep -E "^FAILED|Error|assert" "$OUT/tests.txt" | head -10
echo "tests done $(elapsed)"
if [ "${SANITIZE:-1}" = 1 ]; then
  for tool in memcheck racecheck; do
    filt=""; [ $tool = racecheck ] && filt="--kernel-name kns=fa_"
    echo "== $tool" >> "$OUT/sanitize.txt"
    timeout 150 compute-sanitizer --tool $tool $filt --error-exitcode 99 --print-limit 20 \
      $PY -m pytest -q -p no:cacheprovider -x python/tests/test_gpu_modifiers.py \
      -k "300x450 and bhsd and ${SAN_K:-forward}" >> "$OUT/sanitize.txt" 2>&1
    echo "$tool rc=$?"
  done
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/sanitize.txt" | head
  echo "sanitizers done $(elapsed)"
fi
[ "${BENCH:-1}" = 1 ] || exit 0
timeout ${BENCH_S:-300} $PY bench/bench_modifiers.py --out "$OUT/bench" ${BENCH_ARGS:-} \
  > "$OUT/bench.txt" 2>&1
grep -E "^\|" "$OUT/bench.txt"
tail -3 "$OUT/bench.txt" | grep -v "^|"
echo "bench done $(elapsed)"
