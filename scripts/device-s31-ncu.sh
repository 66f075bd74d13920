#!/bin/bash
# Issue 16: one D = 128 backward iteration beside cuDNN's, at the shape
# where the gap is widest (2k, causal, B = 8, H = 16, bf16): ncu sections
# and counters of both key-block kernels, and the SASS of both with warp-
# state samples per instruction (ncu's source page works on cuDNN's runtime-
# compiled kernel too); first issue 12's variants against the plain forward
# (bench_variants.py). On an H200, issue 10's run instead
# (device-s31-h200.sh). NO_VARIANTS=1 skips the variants. Carry
# build/kernels.tar.xz. Output: $OUT/ncu/.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash "$(dirname "$0")/device-s31-h200.sh"
fi
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ -z "$NO_VARIANTS" ]; then
  echo "== bench_variants (issue 12: softcap / window / GQA against plain) at $(elapsed) s"
  timeout 150 $PY bench/bench_variants.py --headdims 64 128 --seqlens 4096 16384 \
    --json "$OUT/variants.json" 2>&1 | grep -v Warn | tail -12
fi
mkdir -p "$OUT/ncu"
N=${N:-2048}
D=${D:-128}
sections="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section Occupancy --section LaunchStats --section SourceCounters \
  --section InstructionStats"
for impl in flashmlir cudnn; do
  [ "$(left)" -gt 60 ] || break
  case $impl in
    flashmlir) kernel="regex:fa_bwd_kernel" ;;
    cudnn) kernel="regex:bprop" ;;
  esac
  echo "== ncu $impl at $(elapsed) s"
  timeout 150 ncu --clock-control none --kernel-name "$kernel" --launch-skip 2 \
    --launch-count 1 $sections -o "$OUT/ncu/$impl" -f \
    $PY bench/profile_attention.py --backward --causal --impl $impl --head-dim "$D" \
    --seqlen "$N" --launches 4 > "$OUT/ncu/$impl-run.txt" 2>&1 || echo "ncu $impl failed (rc $?)"
  ncu -i "$OUT/ncu/$impl.ncu-rep" --print-summary none > "$OUT/ncu/$impl.txt" 2>&1
  grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Executed Instructions  |Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Block Size|Grid Size|Dynamic Shared|Stall|Tensor" \
    "$OUT/ncu/$impl.txt" | head -40
  ncu -i "$OUT/ncu/$impl.ncu-rep" --page source --csv --print-source sass \
    > "$OUT/ncu/$impl-sass.csv" 2> "$OUT/ncu/$impl-sass.err" || echo "source page failed"
  wc -l "$OUT/ncu/$impl-sass.csv"
  xz -9 "$OUT/ncu/$impl-sass.csv"
done
find "$OUT/ncu" -name "*.ncu-rep" -size +20M -delete
ls -la "$OUT/ncu"
echo "== done at $(elapsed) s"
