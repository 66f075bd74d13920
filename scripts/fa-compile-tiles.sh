#!/bin/bash
# fa-compile with a forced --tile-scheduler for the masked (causal or
# windowed) sm_90a forwards at D = Dv: $FA_MASKED_TILES (grid or dynamic),
# for D in $FA_MASKED_DIMS (default "64 128"); every other kernel as
# fa-compile builds it. For A/B sets of the dynamic tile scheduler:
#   FA_MASKED_TILES=grid python3 -m flashmlir compile -o build/grid-masked \
#     -j 2 --kind forward --chip sm_90a --compiler scripts/fa-compile-tiles.sh
extra=()
a="$*"
if [[ $a == *--kind=forward* && $a == *--chip=sm_90a* &&
      ($a == *--causal* || $a == *--window*) ]]; then
  d=$(sed -n 's/.*--head-dim=\([0-9]*\).*/\1/p' <<<"$a")
  dv=$(sed -n 's/.*--value-head-dim=\([0-9]*\).*/\1/p' <<<"$a")
  dv=${dv:-$d}
  if [[ $d == "$dv" && " ${FA_MASKED_DIMS:-64 128} " == *" $d "* ]]; then
    extra=(--tile-scheduler="${FA_MASKED_TILES:?grid or dynamic}")
  fi
fi
exec "${FA_COMPILE:-$(dirname "$0")/../build/bin/fa-compile}" "$@" "${extra[@]}"
