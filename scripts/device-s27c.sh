#!/bin/bash
# Issue 16 (GQA 4 causal, 12% slower than MHA at 2k): why does the
# query-outer loop order help G = 8 (0.78x the time) and not G = 4? A/B
# and ncu of the D = 128 causal key-block kernel with the order at G >= 4
# (QO4: build/kernels-qo4.tar.xz, main's set with that one kernel rebuilt
# with smallGqaGrid(..., 4)) against main's (KERNELS,
# build/kernels-f27.tar.xz), beside MHA. Then issue 10's speed bar: the
# forward and backward at D = 96 / 192 / 256 against FA2 (and cuDNN), N 2k
# to 16k. The whole log goes to $OUT/log.txt, ncu's to $OUT/ncu-*.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-f27.tar.xz}"
unpack_kernels build/kernels-qo4 "${QO4:-build/kernels-qo4.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== A/B main (A) vs query-outer at G >= 4 (B) at $(elapsed) s"
timeout 80 $PY bench/bench_kernel_ab.py --a build/kernels --b build/kernels-qo4 \
  --direction bwd --headdims 128 --seqlens 1024 2048 8192 --masks causal \
  --groups 1 4 --rep 40 --json $OUT/ab-qo4.json 2>&1 | grep "B/A"
m=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
m=$m,lts__t_sector_hit_rate.pct,lts__t_sectors_op_red.sum,lts__t_sectors_op_read.sum
m=$m,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
m=$m,sm__cycles_active.avg,sm__cycles_elapsed.avg,sm__cycles_active.min
for run in "build/kernels 16 mha" "build/kernels 4 g4" "build/kernels-qo4 4 g4-qo"; do
  set -- $run
  echo "== ncu $3 at $(elapsed) s"
  FLASHMLIR_KERNEL_DIR=$1 timeout 60 ncu --clock-control none --kernel-name regex:fa_bwd_kernel \
    --launch-skip 2 --launch-count 1 --section WarpStateStats --section SpeedOfLight \
    --metrics $m $PY bench/profile_attention.py --backward --causal --head-dim 128 \
    --seqlen 2048 --kv-heads $2 > "$OUT/ncu-$3.txt" 2>&1
  grep -E "duration|bytes|hit_rate|sectors|tensor|cycles_active|cycles_elapsed|Stall|Warp Cycles" "$OUT/ncu-$3.txt" | head -24
done
if [ $(left) -gt 150 ]; then
  echo "== bench_attention fwd D = 96 / 192 / 256 at $(elapsed) s"
  timeout 150 $PY bench/bench_attention.py --out "$OUT" --name fwd-headdims --direction fwd \
    --headdims 96 192 256 --seqlens 2048 4096 8192 16384 --no-flex --rep 40 \
    --time-budget-s 130 2>&1 | tail -3
fi
if [ $(left) -gt 120 ]; then
  echo "== bench_attention bwd D = 96 / 192 / 256 at $(elapsed) s"
  timeout 200 $PY bench/bench_attention.py --out "$OUT" --name bwd-headdims --direction bwd \
    --headdims 96 192 256 --seqlens 2048 4096 8192 16384 --no-flex --rep 30 \
    --time-budget-s $(( $(left) - 20 )) 2>&1 | tail -3
fi
echo "== done at $(elapsed) s"
