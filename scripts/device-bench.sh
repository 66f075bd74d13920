#!/usr/bin/env bash
# The GPU timing run (H200 machine, repo root, kernels carried as in
# device-check.sh):
#
#   bash scripts/device-bench.sh [pytest files to re-run first...]
#
# 1. optionally, pytest on the given files (a re-check after a fix);
# 2. bench/bench_attention.py for the head dims beyond 64/128 (96, 192, 256;
#    forward and backward, causal and not, N 1k..16k, bf16) against SDPA's
#    FlashAttention-2 and cuDNN back ends in the same run (headdims.json);
# 3. bench/bench_overhead.py (host overhead per call against SDPA's);
# 4. bench/bench_llama_step.py (a Llama training step, flashmlir vs sdpa).
# Everything in $OUT; the tables are printed last.
set -uo pipefail
source "$(dirname "$0")/device-env.sh"
rc=0
if [ $# -gt 0 ]; then
  echo "== pytest $* [$(elapsed) s]"
  timeout -k 10 200 "$PY" -m pytest -q -rs -p no:cacheprovider "$@" > "$OUT/pytest-recheck.log" 2>&1 || rc=1
  grep -E '^(FAILED|ERROR)|[0-9]+ (passed|failed)' "$OUT/pytest-recheck.log" | tail -15
fi
echo "== bench head dims [$(elapsed) s]"
timeout -k 10 300 "$PY" bench/bench_attention.py --out "$OUT" --name headdims \
  --headdims 96 192 256 --seqlens 1024 2048 4096 8192 16384 --impls flashmlir fa2 cudnn \
  --no-flex --no-ceilings --time-budget-s 270 > "$OUT/headdims.log" 2>&1 || rc=1
echo "== bench_overhead [$(elapsed) s]"
timeout -k 10 120 "$PY" bench/bench_overhead.py --json "$OUT/overhead.json" > "$OUT/overhead.log" 2>&1 || rc=1
echo "== bench_llama_step [$(elapsed) s]"
timeout -k 10 150 "$PY" bench/bench_llama_step.py --json "$OUT/llama.json" > "$OUT/llama.log" 2>&1 || rc=1
echo "== done in $(elapsed) s, rc=$rc"
tail -45 "$OUT/headdims.log"
tail -25 "$OUT/overhead.log"
tail -15 "$OUT/llama.log"
exit $rc
