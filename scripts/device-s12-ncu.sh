#!/bin/bash
# H200, twelfth session: Nsight Compute on the 4k-key decode, the dense
# split-KV kernel against the paged one (pages in order, and shuffled pages
# of 16 and 256 keys): speed of light, memory workload, warp stalls.
# One text file per profile under $OUT (4 files).
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
export FLASHMLIR_REQUIRE_KERNELS=1
sections="--section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
for cfg in "dense 256" "identity 256" "paged 256" "paged 16"; do
  set -- $cfg
  ncu --clock-control none --kernel-name "regex:^fa_fwd(_paged)?_kernel$" --launch-skip 2 \
    --launch-count 1 $sections $PY scripts/profile-paged-decode.py --impl $1 --page-size $2 \
    > "$OUT/ncu_$1_$2.txt" 2>&1 || echo "ncu $cfg failed"
  grep -E "^  [a-z_]+_kernel|Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Registers Per|Achieved Occupancy|Issued Warp|No Eligible|Warp Cycles Per Issued" "$OUT/ncu_$1_$2.txt" | sed "s/^/$1 $2: /"
done
echo "done $(elapsed)"
