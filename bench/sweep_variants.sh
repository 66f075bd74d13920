#!/usr/bin/env bash
# Times forward kernel variants against FA2 in one device session:
#   bash bench/sweep_variants.sh DIR... (each DIR: kernels of one tile
#   choice, named d<D>_..., compiled with fa-compile's default names)
# Every variant runs bench_attention.py with FA2 in the same process, so each
# ratio is a same-run ratio. Output: one table per variant, JSON under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
export PYTHONPATH="$PWD/python" FLASHMLIR_NO_COMPILE=1
SEQ=${SEQ:-2048 4096 16384}
for dir in "$@"; do
  name=$(basename "$dir")
  d=${name#d}; d=${d%%_*}
  echo "=== $name (D=$d)"
  FLASHMLIR_KERNEL_DIR=$PWD/$dir timeout 120 python3 bench/bench_attention.py \
    --out "$OUT/$name" --direction fwd --headdims "$d" --seqlens $SEQ \
    --impls flashmlir fa2 --no-flex --no-ceilings 2>&1 | sed -n '/^fwd /,$p'
done
