#!/bin/bash
# H200, twelfth session: paged key blocks spanning pages (fa.paged_key_block;
# 16-key pages run 64-key blocks). Carry build/kernels.tar.xz and
# build/lib/libflashmlir_launcher.so. One call: the manifests,
# test_gpu_sequences.py on the sm_90a and sm_80 kernels, compute-sanitizer
# memcheck / racecheck / synccheck over scripts/sanitize-seq.py (CPU
# references; 64- and 16-key pages, tight page tables), then
# bench/bench_sequences.py --only paged twice. At most 8 files in $OUT.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
export FLASHMLIR_REQUIRE_KERNELS=1
$PY test/Tools/check-manifests.py build/kernels > "$OUT/manifests.txt" 2>&1 \
  || { tail -5 "$OUT/manifests.txt"; exit 1; }
tail -1 "$OUT/manifests.txt"
timeout 200 $PY -m pytest -q -p no:cacheprovider python/tests/test_gpu_sequences.py \
  > "$OUT/tests.txt" 2>&1; tail -1 "$OUT/tests.txt" | sed 's/^/sm_90a: /'
FLASHMLIR_CHIP=sm_80 timeout 200 $PY -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu_sequences.py >> "$OUT/tests.txt" 2>&1
tail -1 "$OUT/tests.txt" | sed 's/^/sm_80: /'
grep -E "FAILED|Error" "$OUT/tests.txt" | head -10
echo "tests done $(elapsed)"
for tool in memcheck racecheck synccheck; do
  echo "== $tool" >> "$OUT/sanitize.txt"
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 \
    $PY scripts/sanitize-seq.py >> "$OUT/sanitize.txt" 2>&1
  echo "$tool rc=$?"
done
grep -E "max err|SUMMARY" "$OUT/sanitize.txt" | sort | uniq -c
echo "sanitizers done $(elapsed)"
for run in 1 2; do
  timeout 200 $PY bench/bench_sequences.py --only paged --out "$OUT/bench$run" \
    > /dev/null 2>"$OUT/bench-err.txt"
  grep -E "^\| [0-9]" "$OUT/bench$run/sequences.md"
  echo "bench $run done $(elapsed)"
done
