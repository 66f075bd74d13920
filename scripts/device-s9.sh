#!/bin/bash
# H200, ninth session: the packed-sequence and paged-cache forwards. Carry
# build/kernels.tar.xz (the whole variant set: dense, varlen, paged).
# Step "test": test_gpu_sequences.py, the dense regression suites whose
# Python paths the new entries share (attention, decode), compute-sanitizer
# memcheck / racecheck on a few packed and paged cases; step "bench":
# bench/bench_sequences.py.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
export FLASHMLIR_REQUIRE_KERNELS=1
step=${1:-test}
if [ "$step" = test ]; then
  $PY test/Tools/check-manifests.py build/kernels > "$OUT/manifests.txt" 2>&1 \
    || { tail -5 "$OUT/manifests.txt"; exit 1; }
  tail -1 "$OUT/manifests.txt"
  timeout 240 $PY -m pytest -q -p no:cacheprovider python/tests/test_gpu_sequences.py \
    > "$OUT/sequences.txt" 2>&1; tail -15 "$OUT/sequences.txt"
  echo "sequences done $(elapsed)"
  timeout 150 $PY -m pytest -q -x -p no:cacheprovider python/tests/test_gpu_attention.py \
    python/tests/test_gpu_decode.py > "$OUT/regression.txt" 2>&1; tail -3 "$OUT/regression.txt"
  echo "regression done $(elapsed)"
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool $PY -m pytest -q -x -p no:cacheprovider \
      python/tests/test_gpu_sequences.py -k "test_varlen_options or test_paged_empty or test_paged_decode_window" \
      > "$OUT/sanitize-$tool.txt" 2>&1
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/sanitize-$tool.txt" | tail -3 | sed "s/^/$tool: /"
  done
  echo "sanitizers done $(elapsed)"
else
  timeout 500 $PY bench/bench_sequences.py --out "$OUT/bench" > "$OUT/bench.txt" 2>&1
  tail -60 "$OUT/bench.txt"
  echo "bench done $(elapsed)"
fi
