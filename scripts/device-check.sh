#!/usr/bin/env bash
# The GPU correctness run (on the H200 machine, in the repo root, with the
# kernels compiled on the CPU machine carried in build/kernels or as
# build/kernels.tar.xz):
#
#   bash scripts/device-check.sh [--no-sanitize] [--no-sm80]
#
# 1. the GPU suites: the launch path and PyTorch integration
#    (test_gpu_launch, test_gpu_compile, test_gpu_transformers,
#    test_gpu_tensormap and the fake drivers), test_gpu_attention, test_gpu_backward and test_gpu_head_dims
#    (every head dim and Dv != D pair) on the device's kernels, then
#    test_gpu_head_dims again on the sm_80 (mma.sync) kernels;
# 2. compute-sanitizer memcheck, racecheck, initcheck and synccheck over one
#    launch of each kind of kernel at odd shapes (sanitize_kernels.py), and
#    memcheck again on the sm_80 kernels.
# Logs in $OUT (default ./out): pytest-*.log, sanitize-*.log, summary.txt;
# the summary is printed last. Exits non-zero when anything failed.
set -uo pipefail
sanitize=1
sm80=1
for a in "$@"; do
  case "$a" in
    --no-sanitize) sanitize=0 ;;
    --no-sm80) sm80=0 ;;
    *) echo "device-check: unknown argument $a" >&2; exit 2 ;;
  esac
done

source "$(dirname "$0")/device-env.sh"
nvidia-smi -L | tee "$OUT/summary.txt"
"$PY" -m flashmlir check > "$OUT/kernels.txt" 2>&1
echo "kernels: $(grep -c '^  ok ' "$OUT/kernels.txt") ok, $(grep -cE 'FAIL|INVALID' "$OUT/kernels.txt") bad" | tee -a "$OUT/summary.txt"
grep -qE 'FAIL|INVALID' "$OUT/kernels.txt" && rc_kernels=1 || rc_kernels=0

rc=$rc_kernels  # an invalid manifest fails the run
# group NAME LIMIT [ENV=VALUE...] -- FILES...
group() {
  local name=$1 limit=$2
  shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "== pytest $name [$(elapsed) s]"
  env "${envs[@]}" timeout -k 10 "$limit" "$PY" -m pytest -q -rs -p no:cacheprovider \
    --durations=5 "$@" > "$OUT/pytest-$name.log" 2>&1
  local r=$?
  local line
  line=$(grep -E '[0-9]+ (passed|failed|skipped|errors?)' "$OUT/pytest-$name.log" | tail -n 1 | tr -d '=')
  [ $r -eq 124 ] || [ $r -eq 137 ] && line="TIMED OUT after $limit s; $line"
  echo "pytest $name rc=$r:$line" | tee -a "$OUT/summary.txt"
  grep -E '^(FAILED|ERROR)' "$OUT/pytest-$name.log" | head -20 | tee -a "$OUT/summary.txt"
  [ $r -eq 0 ] || rc=1
}

T=python/tests
group launch 150 X=1 -- $T/test_cuda_fake.py $T/test_backward_fake.py $T/test_interface_fake.py \
  $T/test_gpu_launch.py $T/test_gpu_compile.py $T/test_gpu_transformers.py \
  $T/test_gpu_tensormap.py
# The package set has a kernel for every variant these suites ask for: a
# missing one (e.g. a manifest the reader refuses) fails instead of skipping.
R=FLASHMLIR_REQUIRE_KERNELS=1
group attention 120 $R -- $T/test_gpu_attention.py
group backward 120 $R -- $T/test_gpu_backward.py
group head_dims 150 $R -- $T/test_gpu_head_dims.py
if [ $sm80 -eq 1 ]; then
  group head_dims_sm80 120 $R FLASHMLIR_CHIP=sm_80 -- $T/test_gpu_head_dims.py
fi

if [ $sanitize -eq 1 ]; then
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  runs=("memcheck" "racecheck" "initcheck" "synccheck")
  [ $sm80 -eq 1 ] && runs+=("memcheck:sm_80")
  for run in "${runs[@]}"; do
    tool=${run%%:*}
    chip=""
    [ "$run" != "$tool" ] && chip=${run#*:}
    log="$OUT/sanitize-$tool${chip:+-$chip}.log"
    echo "== compute-sanitizer $tool ${chip:+(FLASHMLIR_CHIP=$chip)} [$(elapsed) s]"
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check no)
    FLASHMLIR_CHIP=$chip timeout -k 10 120 "$CS" --tool "$tool" "${extra[@]}" \
      --error-exitcode 99 --print-limit 20 "$PY" $T/sanitize_kernels.py > "$log" 2>&1
    r=$?
    summ=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|sanitize_kernels:' "$log" | tr '\n' ' ')
    echo "sanitize $tool${chip:+ $chip} rc=$r: $summ" | tee -a "$OUT/summary.txt"
    [ $r -eq 0 ] || rc=1
  done
fi

echo "== device-check done in $(elapsed) s, rc=$rc" | tee -a "$OUT/summary.txt"
cat "$OUT/summary.txt"
exit $rc
