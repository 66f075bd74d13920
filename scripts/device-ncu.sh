#!/bin/bash
# H200: Nsight Compute profiles of the d=128 N=16k bf16 forward (non-causal
# and causal), ours beside SDPA's cuDNN and FlashAttention-2 kernels: speed
# of light, tensor-pipe use, warp stall reasons. Reports under $OUT/ncu/.
# Usage (device): [IMPLS="flashmlir cudnn flash"] bash scripts/device-ncu.sh [seqlen] [head_dim]
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
N=${1:-16384}
D=${2:-128}
mkdir -p "$OUT/ncu"
sections="--section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section LaunchStats"
for causal in "" "--causal"; do
  tag=d${D}_n${N}${causal:+_causal}
  # The forward kernel of each implementation: ours is fa_fwd_kernel; the
  # others are the longest kernel of the call (regex on their names).
  for impl in ${IMPLS:-flashmlir cudnn}; do
    case $impl in
      flashmlir) kernel="regex:fa_fwd" ;;
      cudnn) kernel="regex:cudnn|sm90|fmha|flash" ;;
      flash) kernel="regex:flash_fwd" ;;
    esac
    ncu --clock-control none --kernel-name "$kernel" --launch-skip 2 \
      --launch-count 1 $sections \
      $PY bench/profile_attention.py --impl $impl --head-dim "$D" \
      --seqlen "$N" $causal --launches 4 \
      > "$OUT/ncu/${tag}_${impl}.txt" 2>&1 \
      || echo "ncu $impl $tag failed (rc $?)"
    # Stall reasons per issued instruction and tensor-pipe activity.
    ncu --clock-control none --kernel-name "$kernel" --launch-skip 2 \
      --launch-count 1 \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__pipe_tensor_op.*cycles_active\.avg\.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum" \
      $PY bench/profile_attention.py --impl $impl --head-dim "$D" \
      --seqlen "$N" $causal --launches 4 \
      > "$OUT/ncu/${tag}_${impl}_metrics.txt" 2>&1 \
      || echo "ncu metrics $impl $tag failed (rc $?)"
    grep -E "stalled|tensor_op|duration|throughput" "$OUT/ncu/${tag}_${impl}_metrics.txt" \
      | awk '$NF+0 > 0.05 || /duration|throughput|tensor/' | head -40
    grep -E "^  [a-z_0-9]+.*\(|Duration|Compute \(SM\) Throughput|Tensor|Issue Slots Busy|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Stall" \
      "$OUT/ncu/${tag}_${impl}.txt" | head -40
    echo "--- $impl $tag done at $(elapsed) s"
  done
done
