# Sourced by the H200 scripts (device-check.sh, device-bench.sh): the repo
# root, $OUT, the package on PYTHONPATH, no compiling or network, $PY,
# `elapsed`, and the carried kernels unpacked.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export FLASHMLIR_NO_COMPILE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PYTHON:-python3}
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
if [ -f build/kernels.tar.xz ] && [ ! -d build/kernels ]; then
  tar -xJf build/kernels.tar.xz -C build
fi
# The native launcher (python/flashmlir/_native.py) when the carried build
# lacks it: one C file, no CUDA headers; without a C compiler the package
# launches through ctypes (bench_overhead.py prints which).
if [ ! -f build/lib/libflashmlir_launcher.so ] && command -v cc >/dev/null; then
  mkdir -p build/lib
  cc -O2 -shared -fPIC -o build/lib/libflashmlir_launcher.so lib/Launcher/launcher.c \
    || echo "device-env: the native launcher did not build; ctypes launches"
fi
# unpack_kernels DIR TARBALL: a carried kernel set (tarred as kernels/)
# into DIR, emptied first.
unpack_kernels() {
  rm -rf "$1" && mkdir -p "$1" && tar -xJf "$2" -C "$1" --strip-components=1
}
# Seconds left of the script's LIMIT (default 560) for guarding its items.
left() { echo $(( ${LIMIT:-560} - $(elapsed) )); }
# ncu_key_block KV_HEADS: memory and tensor-pipe counters of the backward
# key-block kernel at D = 128, N = 2k, causal, B = 8, Hq = 16.
ncu_key_block() {
  local m=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
  m=$m,lts__t_sector_hit_rate.pct,lts__t_sectors_op_red.sum
  m=$m,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
  echo "== ncu key-block kernel D=128 2k causal Hq=16 Hkv=$1 at $(elapsed) s"
  timeout 50 ncu --clock-control none --kernel-name regex:fa_bwd_kernel --launch-skip 2 \
    --launch-count 1 --metrics $m $PY bench/profile_attention.py --backward \
    --causal --head-dim 128 --seqlen 2048 --kv-heads "$1" 2>&1 \
    | grep -E "duration|bytes|hit_rate|sectors|tensor"
}
# memcheck and racecheck of the backward key-block kernel on each
# comma-separated scripts/sanitize-bwd.py argument list ("128 causal,64 det
# big"), with the caller's FLASHMLIR_KERNEL_DIR.
sanitize_backward() {
  local cases args tool
  IFS=, read -ra cases <<< "$1"
  for args in "${cases[@]}"; do
    for tool in memcheck racecheck; do
      echo "== $tool $args at $(elapsed) s"
      timeout 60 compute-sanitizer --tool $tool --kernel-name kns=fa_bwd_kernel \
        --print-limit 3 $PY scripts/sanitize-bwd.py $args 2>&1 \
        | grep -E "max err|ERROR SUMMARY|RACECHECK SUMMARY|hazard|Invalid" | head -6
    done
  done
}
# gpu_suites SECONDS [TEST_FILE...]: GPU test files (default: those of
# every kernel kind) with the kernels found first (build/kernels unless
# FLASHMLIR_KERNEL_DIR), every kernel required; prints the summary.
gpu_suites() {
  local secs=${1:-200}
  shift
  [ $# -gt 0 ] || set -- test_gpu_attention test_gpu_sequences test_gpu_launch \
    test_gpu_decode test_gpu_backward test_gpu_head_dims
  local files=() f
  for f; do files+=("python/tests/$f.py"); done
  echo "== GPU suites ($*) at $(elapsed) s"
  FLASHMLIR_REQUIRE_KERNELS=1 timeout "$secs" $PY -m pytest -q -p no:cacheprovider \
    "${files[@]}" 2>&1 | grep -E "^FAILED|passed|failed|rror" | head -6
}
# check_backward: bench/check_backward.py's summary line.
check_backward() {
  echo "== check_backward at $(elapsed) s"
  timeout 60 $PY bench/check_backward.py 2>&1 | grep -v execution_engine | tail -1
}
# bench_beside NAME DIRECTION SECONDS ARGS...: bench/bench_attention.py
# (ours beside SDPA's cuDNN / FA2 back ends and Flex, two rounds in
# reversed order) into $OUT/NAME.json, within SECONDS.
bench_beside() {
  local name=$1 dir=$2 secs=$3
  shift 3
  echo "== bench_attention $name at $(elapsed) s"
  timeout "$secs" $PY bench/bench_attention.py --out "$OUT" --name "$name" --direction "$dir" \
    --time-budget-s $(( secs - 20 )) "$@" 2>&1 | tail -22
}
