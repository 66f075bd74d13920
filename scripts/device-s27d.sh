#!/bin/bash
# One run, many candidate kernels (issues 12, 16): each variant folder of
# VARIANTS (build/variants-s27.tar.xz: fa-compile outputs with fixed
# tiles / schedules / tile schedulers, one kernel each) is laid over a copy
# of main's set (KERNELS, build/kernels-f27.tar.xz) and A/B-timed against
# it where it differs: the D = 64 forward (192-row WS tiles against
# 128-row, grid / dynamic, the cooperative kernel) at short N where it is
# 0.78-0.92x cuDNN; the D = 128 unmasked forward's tile scheduler; the D =
# 64 backward with 64-query blocks; the D = 128 causal backward at G = 4
# with the query-outer order and the plain launch order (g4-pm-qo). The
# whole log goes to $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-f27.tar.xz}"
rm -rf build/variants && mkdir -p build/variants
tar -xJf "${VARIANTS:-build/variants-s27.tar.xz}" -C build/variants
for v in build/variants/*/; do
  n=$(basename "$v"); rm -rf "build/kv-$n"; cp -r build/kernels "build/kv-$n"; cp "$v"/* "build/kv-$n/"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ab() { # ab VARIANT ARGS...: main (A) against the variant (B)
  local v=$1; shift
  echo "== $v at $(elapsed) s"
  timeout 100 $PY bench/bench_kernel_ab.py --a build/kernels --b "build/kv-$v" --rep 40 \
    --json "$OUT/ab-$v.json" "$@" 2>&1 | grep "B/A" | sed 's/  {.*//'
}
F64="--direction fwd --headdims 64 --seqlens 1024 2048 4096 8192"
for v in f64c-q128 f64c-q128-grid f64c-grid f64c-coop; do ab $v $F64 --masks causal; done
for v in f64-q128 f64-coop; do ab $v $F64 --masks full; done
for v in f128-dyn f128-grid; do
  ab $v --direction fwd --headdims 128 --seqlens 1024 2048 8192 16384 --masks full
done
ab b64-q64 --direction bwd --headdims 64 --seqlens 1024 2048 8192 --masks full
ab b64c-q64 --direction bwd --headdims 64 --seqlens 1024 2048 8192 --masks causal
ab g4-pm-qo --direction bwd --headdims 128 --seqlens 1024 2048 8192 16384 --masks causal --groups 1 4 8
if [ $(left) -gt 40 ]; then
  m=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct
  m=$m,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
  echo "== ncu g4-pm-qo D=128 2k causal Hq=16 Hkv=4 at $(elapsed) s"
  FLASHMLIR_KERNEL_DIR=build/kv-g4-pm-qo timeout 40 ncu --clock-control none \
    --kernel-name regex:fa_bwd_kernel --launch-skip 2 --launch-count 1 --metrics $m \
    $PY bench/profile_attention.py --backward --causal --head-dim 128 --seqlen 2048 \
    --kv-heads 4 2>&1 | grep -E "duration|bytes|hit_rate|tensor"
fi
echo "== done at $(elapsed) s"
