#!/bin/bash
# H200, twelfth session: the paged bar timed on CUDA graphs (device time per
# call without the host's launch work), twice, and once eager.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
export FLASHMLIR_REQUIRE_KERNELS=1
for run in graph1 eager graph2; do
  flag=; [ $run != eager ] && flag=--graph
  timeout 250 $PY bench/bench_sequences.py --only paged --reps 100 $flag --out "$OUT/bench-$run" \
    > /dev/null 2>"$OUT/bench-err-$run.txt" || tail -3 "$OUT/bench-err-$run.txt"
  echo "== $run"; grep -E "^\| [0-9]" "$OUT/bench-$run/sequences.md"
  echo "bench $run done $(elapsed)"
done
