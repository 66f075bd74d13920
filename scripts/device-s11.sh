#!/bin/bash
# H200, eleventh session: the packed forward's O epilogue (staged in shared
# memory; TMA boxes for warpgroups whose rows all lie in their sequence, a
# coalesced guarded copy for the rest). Carry build/kernels.tar.xz and
# build/lib/libflashmlir_launcher.so. One call: the manifests,
# test_gpu_sequences.py on the sm_90a and sm_80 kernels, compute-sanitizer
# memcheck / racecheck / synccheck over scripts/sanitize-seq.py (CPU
# references), then bench/bench_sequences.py --only varlen.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
export FLASHMLIR_REQUIRE_KERNELS=1
$PY test/Tools/check-manifests.py build/kernels > "$OUT/manifests.txt" 2>&1 \
  || { tail -5 "$OUT/manifests.txt"; exit 1; }
tail -1 "$OUT/manifests.txt"
timeout 200 $PY -m pytest -q -p no:cacheprovider python/tests/test_gpu_sequences.py \
  > "$OUT/sequences.txt" 2>&1; tail -3 "$OUT/sequences.txt"
FLASHMLIR_CHIP=sm_80 timeout 200 $PY -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu_sequences.py > "$OUT/sequences-sm80.txt" 2>&1
tail -1 "$OUT/sequences-sm80.txt" | sed 's/^/sm_80: /'
echo "tests done $(elapsed)"
for tool in memcheck racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 \
    $PY scripts/sanitize-seq.py > "$OUT/sanitize-seq-$tool.txt" 2>&1
  echo "$tool rc=$?: $(grep -E 'max err|SUMMARY' "$OUT/sanitize-seq-$tool.txt" | tr '\n' ' ')"
done
echo "sanitizers done $(elapsed)"
timeout 300 $PY bench/bench_sequences.py --only varlen --out "$OUT/bench" > "$OUT/bench.txt" 2>&1
tail -5 "$OUT/bench.txt"
echo "bench done $(elapsed)"
