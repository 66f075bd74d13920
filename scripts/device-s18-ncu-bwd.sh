#!/bin/bash
# Nsight Compute profile of the backward (issue 16): our key-block kernel
# (fa_bwd_kernel) beside cuDNN's backward, bf16, D and N as given (default
# 128, 8192), non-causal; plus the source-level stall locations of ours.
# Carry build/kernels.tar.xz (the default set) and the launcher.
# Usage (device): bash scripts/device-s18-ncu-bwd.sh [seqlen] [head_dim]
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
N=${1:-8192}
D=${2:-128}
mkdir -p "$OUT/ncu"
sections="--section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section Occupancy --section LaunchStats"
metrics="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__pipe_tensor_op.*cycles_active\.avg\.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_atom.sum,smsp__inst_executed_op_global_red.sum"
tag=bwd_d${D}_n${N}
for impl in ${IMPLS:-flashmlir cudnn}; do
  case $impl in
    flashmlir) kernel="regex:fa_bwd_kernel" ;;
    cudnn) kernel="regex:bprop|dgrad|bwd|cudnn" ;;
    flash) kernel="regex:flash_bwd_dq_dk_dv" ;;
  esac
  # The cuDNN call launches several kernels per backward: skip the forward
  # and the warm-up, then take the longest of a few.
  extra=""; [ $impl = flashmlir ] && extra="--section SourceCounters"
  timeout 120 ncu --clock-control none --kernel-name "$kernel" --launch-skip 2 \
    --launch-count 1 $sections $extra \
    $PY bench/profile_attention.py --backward --impl $impl --head-dim "$D" \
    --seqlen "$N" --launches 4 > "$OUT/ncu/${tag}_${impl}.txt" 2>&1 \
    || echo "ncu $impl failed (rc $?)"
  timeout 120 ncu --clock-control none --kernel-name "$kernel" --launch-skip 2 \
    --launch-count 1 --metrics "$metrics" \
    $PY bench/profile_attention.py --backward --impl $impl --head-dim "$D" \
    --seqlen "$N" --launches 4 > "$OUT/ncu/${tag}_${impl}_metrics.txt" 2>&1 \
    || echo "ncu metrics $impl failed (rc $?)"
  grep -E "^  [a-zA-Z_0-9]+.*\(|stalled|tensor_op|duration|throughput|inst_executed|wavefronts|sectors" \
    "$OUT/ncu/${tag}_${impl}_metrics.txt" | awk '$NF+0 > 0.05 || /duration|throughput|tensor|inst|sectors|wave|\(/' | head -40
  grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Memory Throughput|L1/TEX Hit|Shared Memory|Block Size|Grid Size|Mem Busy|Max Bandwidth" \
    "$OUT/ncu/${tag}_${impl}.txt" | head -30
  echo "--- $impl done at $(elapsed) s"
done
# Ours: the stall-heavy SASS lines (SourceCounters' top locations).
grep -A 40 -i "warp stall sampling\|Source Counters" "$OUT/ncu/${tag}_flashmlir.txt" | head -60
