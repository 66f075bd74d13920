#!/bin/bash
# fa-compile with --tile-scheduler=persistent added for the sm_90a forwards
# the warp-specialized kernel takes (D, Dv in {64, 128}); every other kernel
# as fa-compile builds it. For A/B sets of the persistent tile scheduler:
#   python3 -m flashmlir compile -o build/persist -j 2 --kind forward \
#     --chip sm_90a --compiler scripts/fa-compile-persistent.sh
# (then copy build/kernels and overlay build/persist, docs/HOPPER.md).
extra=()
a="$*"
if [[ $a == *--kind=forward* && $a == *--chip=sm_90a* ]]; then
  d=$(sed -n 's/.*--head-dim=\([0-9]*\).*/\1/p' <<<"$a")
  dv=$(sed -n 's/.*--value-head-dim=\([0-9]*\).*/\1/p' <<<"$a")
  dv=${dv:-$d}
  if [[ ($d == 64 || $d == 128) && ($dv == 64 || $dv == 128) ]]; then
    extra=(--tile-scheduler=persistent)
  fi
fi
exec "${FA_COMPILE:-$(dirname "$0")/../build/bin/fa-compile}" "$@" "${extra[@]}"
