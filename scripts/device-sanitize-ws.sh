#!/bin/bash
# H200: racecheck and synccheck of one D = 128 forward launch
# (scripts/sanitize-one.py: Nq 77, Nk 131, GQA 4:2) for three kernel folders:
# the package's, --ping-pong=false (build/wsnp) and
# --intra-warpgroup-overlap=false (build/wsser). Found the dynamic shared
# memory overlapping the mbarriers (fixed by fa-extern-dynamic-shared-memory).
source scripts/device-env.sh
for dir in build/kernels build/wsnp build/wsser; do
 for tool in racecheck synccheck; do
  echo "== $dir $tool"
  FLASHMLIR_KERNEL_DIR=$PWD/$dir timeout 60 compute-sanitizer --tool $tool --print-limit 3 $PY scripts/sanitize-one.py 128 2>&1 | grep -vE "^=========     (Host Frame|#)" | grep -E "Error|Warning|hazard|SUMMARY|max err|at .*0x|Barrier|barrier|between|Write|Read" | head -12
 done
done
