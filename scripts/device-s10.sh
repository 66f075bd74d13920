#!/bin/bash
# H200, tenth session: the packed (varlen) backward. Carry
# build/kernels.tar.xz (the whole variant set, with the packed backward
# kernels) and build/lib/libflashmlir_launcher.so.
# Step "test": the manifests, test_gpu_sequences.py on the sm_90a kernels
# and on the sm_80 ones, the dense backward regression suite (its Python
# plan machinery is shared), compute-sanitizer memcheck / racecheck on the
# packed backward tests; step "bench": bench/bench_sequences.py (varlen
# forward against the dense kernels on the same tokens), "bench-bwd" (the
# varlen backward through attention_varlen's autograd, eleventh session).
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
export FLASHMLIR_REQUIRE_KERNELS=1
step=${1:-test}
if [ "$step" = race ]; then
  timeout 300 compute-sanitizer --tool racecheck --kernel-regex kns=fa_bwd_varlen $PY \
    scripts/check-varlen-backward.py --cpu-ref --cases 7 > "$OUT/sanitize-racecheck.txt" 2>&1
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|FAIL" "$OUT/sanitize-racecheck.txt" | tail -4
  echo "racecheck done $(elapsed)"
elif [ "$step" = varlen ]; then
  # The packed backward straight from its manifests (the Python entries do
  # not call it yet): accuracy on both chips' kernels, memcheck / racecheck,
  # and the speed against the dense backward on the same tokens.
  timeout 150 $PY scripts/check-varlen-backward.py > "$OUT/check.txt" 2>&1; tail -9 "$OUT/check.txt"
  timeout 150 $PY scripts/check-varlen-backward.py --chip sm_80 > "$OUT/check-sm80.txt" 2>&1
  tail -1 "$OUT/check-sm80.txt" | sed 's/^/sm_80: /'; grep FAIL "$OUT/check-sm80.txt"
  echo "checks done $(elapsed)"
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool $tool --kernel-regex kns=fa_bwd_varlen $PY \
      scripts/check-varlen-backward.py --cpu-ref --cases 7 > "$OUT/sanitize-$tool.txt" 2>&1
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed" "$OUT/sanitize-$tool.txt" | tail -2 | sed "s/^/$tool: /"
  done
  echo "sanitizers done $(elapsed)"
  timeout 200 $PY scripts/check-varlen-backward.py --bench > "$OUT/bench.txt" 2>&1
  tail -6 "$OUT/bench.txt"
  echo "bench done $(elapsed)"
elif [ "$step" = test ]; then
  $PY test/Tools/check-manifests.py build/kernels > "$OUT/manifests.txt" 2>&1 \
    || { tail -5 "$OUT/manifests.txt"; exit 1; }
  tail -1 "$OUT/manifests.txt"
  timeout 200 $PY -m pytest -q -p no:cacheprovider python/tests/test_gpu_sequences.py \
    > "$OUT/sequences.txt" 2>&1; tail -12 "$OUT/sequences.txt"
  echo "sequences done $(elapsed)"
  FLASHMLIR_CHIP=sm_80 timeout 200 $PY -m pytest -q -p no:cacheprovider \
    python/tests/test_gpu_sequences.py > "$OUT/sequences-sm80.txt" 2>&1
  tail -3 "$OUT/sequences-sm80.txt" | sed 's/^/sm_80: /'
  echo "sm_80 done $(elapsed)"
  timeout 150 $PY -m pytest -q -x -p no:cacheprovider python/tests/test_gpu_backward.py \
    > "$OUT/backward.txt" 2>&1; tail -2 "$OUT/backward.txt"
  echo "backward done $(elapsed)"
  for tool in memcheck racecheck; do
    # (Only our kernels: the references' cuBLAS GEMMs report racecheck
    # hazards of their own, or crash it: use "race" for racecheck. Graph
    # capture fails under the sanitizers, which use the legacy stream.)
    timeout 150 compute-sanitizer --tool $tool --kernel-regex kns=fa_ $PY -m pytest -q -x \
      -p no:cacheprovider python/tests/test_gpu_sequences.py -k "${SANITIZE_K:-backward and not graph}" \
      > "$OUT/sanitize-$tool.txt" 2>&1
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/sanitize-$tool.txt" | tail -3 | sed "s/^/$tool: /"
  done
  echo "sanitizers done $(elapsed)"
else
  # "bench" (the varlen forward) or "bench-bwd" (the varlen backward).
  only=varlen; [ "$step" = bench-bwd ] && only=varlen_backward
  timeout 500 $PY bench/bench_sequences.py --only $only --out "$OUT/bench" > "$OUT/bench.txt" 2>&1
  tail -40 "$OUT/bench.txt"
  echo "bench done $(elapsed)"
fi
