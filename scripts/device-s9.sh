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
# scripts/sanitize-seq.py under each compute-sanitizer run (tool[:chip]).
sanitize_seq() {
  for run in "$@"; do
    tool=${run%%:*}; chip=""; [ "$run" != "$tool" ] && chip=${run#*:}
    FLASHMLIR_CHIP=$chip timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 \
      --print-limit 20 $PY scripts/sanitize-seq.py > "$OUT/sanitize-seq-$tool$chip.txt" 2>&1
    echo "$run rc=$?: $(grep -E 'max err|SUMMARY' "$OUT/sanitize-seq-$tool$chip.txt" | tr '\n' ' ')"
  done
}
if [ "$step" = dyn ]; then
  # The packed kernels on the dynamic tile scheduler (sm_90a default).
  timeout 200 $PY -m pytest -q -p no:cacheprovider python/tests/test_gpu_sequences.py \
    > "$OUT/sequences.txt" 2>&1; tail -3 "$OUT/sequences.txt"
  sanitize_seq memcheck racecheck synccheck
  timeout 150 $PY bench/bench_sequences.py --only varlen --out "$OUT/bench" > "$OUT/bench.txt" 2>&1
  grep -E "^\| (full|causal)" "$OUT/bench/sequences.md"
  timeout 120 $PY bench/bench_sequences.py --only varlen --min-len 2176 --max-len 2176 \
    --out "$OUT/bench-equal" > "$OUT/bench-equal.txt" 2>&1; grep -E "^\| (full|causal)" "$OUT/bench-equal/sequences.md"
  echo "done $(elapsed)"
elif [ "$step" = sanitize ]; then
  sanitize_seq memcheck racecheck synccheck memcheck:sm_80 racecheck:sm_80
  echo "sanitizers done $(elapsed)"
elif [ "$step" = final ]; then
  FLASHMLIR_CHIP=sm_80 timeout 200 $PY -m pytest -q -p no:cacheprovider \
    python/tests/test_gpu_sequences.py > "$OUT/sequences-sm80.txt" 2>&1
  tail -3 "$OUT/sequences-sm80.txt" | sed 's/^/sm_80: /'
  sanitize_seq memcheck racecheck synccheck memcheck:sm_80
  echo "sanitizers done $(elapsed)"
  # Equal lengths (64 x 2176): the packed grid kernel against the dense
  # persistent one without the lengths' spread.
  timeout 120 $PY bench/bench_sequences.py --only varlen --min-len 2176 --max-len 2176 \
    --out "$OUT/bench-equal" > "$OUT/bench-equal.txt" 2>&1; grep -E "^\| (full|causal)" "$OUT/bench-equal/sequences.md"
  echo "done $(elapsed)"
elif [ "$step" = retest ]; then
  timeout 60 $PY -m pytest -q -p no:cacheprovider python/tests/test_gpu_sequences.py \
    -k window_softcap 2>&1 | tail -2
  for tool in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool $tool --kernel-regex kns=fa_ $PY -m pytest -q -x -p no:cacheprovider \
      python/tests/test_gpu_sequences.py -k "test_varlen_options or test_paged_empty or test_paged_decode_window" \
      > "$OUT/sanitize-$tool.txt" 2>&1
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/sanitize-$tool.txt" | tail -3 | sed "s/^/$tool: /"
  done
  echo "retest done $(elapsed)"
  timeout 380 $PY bench/bench_sequences.py --out "$OUT/bench" > "$OUT/bench.txt" 2>&1
  tail -50 "$OUT/bench.txt"
  echo "bench done $(elapsed)"
elif [ "$step" = test ]; then
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
    # (Only our kernels: the references' cuBLAS GEMMs report racecheck
    # hazards of their own.)
    timeout 150 compute-sanitizer --tool $tool --kernel-regex kns=fa_ $PY -m pytest -q -x -p no:cacheprovider \
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
