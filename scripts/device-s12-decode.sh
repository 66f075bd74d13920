#!/bin/bash
# H200, twelfth session: issue 13's decode bar re-measured with interleaved
# timing (bench_decode.py: flashmlir, SDPA flash and cuDNN in six
# alternating rounds, the median of all calls), twice.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
export FLASHMLIR_REQUIRE_KERNELS=1
for run in 1 2; do
  timeout 200 $PY bench/bench_decode.py --json "$OUT/decode-$run.json" > "$OUT/decode-$run.txt" 2>&1
  cat "$OUT/decode-$run.txt"; echo "decode $run done $(elapsed)"
done
