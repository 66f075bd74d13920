#!/bin/bash
# Issue 16, twenty-fourth session: where the ring kernels (the default
# WS backward at D = 128 and D = 64) still lose to cuDNN. (1) GPU time per
# kernel of one backward beside cuDNN's (preprocess, zero fill, dQ
# conversion); (2) ncu warp-state samples per SASS instruction of the
# key-block kernel at N = 8k for each head dim (scripts/device-s21-ncu-src.sh,
# summarized by opcode and top instructions) plus its speed-of-light
# numbers. Carry build/kernels.tar.xz and the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels && tar -xJf build/kernels.tar.xz -C build
echo "== per-kernel breakdown at $(elapsed) s"
timeout 120 $PY bench/profile_backward_kernels.py --headdims 64 128 --seqlens 2048 8192 2>&1 | grep -v Warning
timeout 60 $PY bench/profile_backward_kernels.py --headdims 64 128 --seqlens 8192 --causal 2>&1 | grep -v Warning
for D in ${NCU_D:-128 64}; do
  echo "== ncu source D=$D at $(elapsed) s"
  OUT="$OUT/d$D" bash scripts/device-s21-ncu-src.sh 8192 $D 2>&1 | head -80
  echo "== ncu speed of light D=$D at $(elapsed) s"
  timeout 120 ncu --clock-control none --kernel-name regex:fa_bwd_kernel --launch-skip 2 \
    --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis \
    $PY bench/profile_attention.py --backward --impl flashmlir --head-dim $D \
    --seqlen 8192 --launches 4 2>&1 | grep -E "Duration|Throughput|Registers|Stall|Pipe|Active|Issued|Shared|L2|DRAM" | head -40
done
echo "== done at $(elapsed) s"
