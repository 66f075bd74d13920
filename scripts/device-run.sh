#!/usr/bin/env bash
# The one command to run on the GPU machine (torch + triton there, no MLIR):
# the repo arrives with build/kernels carried (compiled PTX + manifests).
#
#   bash scripts/device-run.sh [--tests-only | --bench-only] [--quick] [-- BENCH ARGS...]
#   bash scripts/device-run.sh --pytorch [--quick]
#
# 1. nvidia-smi summary and the kernels found (manifests checked against PTX),
# 2. the pytest suite: CPU + launch-path tests (fixture kernels, forward and
#    backward), then the attention tests on the fa-compile kernels, then the
#    backward tests on them (each group with -x), and a summary line,
# 3. bench/bench_attention.py (FA2 / cuDNN / FlexAttention / flashmlir),
#    forward and backward (pass e.g. `-- --direction fwd` to time one).
# --pytorch runs the PyTorch-integration checks instead of 2. and 3.: the
# launch-path tests, test_gpu_compile.py (torch.compile vs eager, CUDA
# graphs, streams) and test_gpu_transformers.py (a random HF Llama against
# SDPA), then bench/bench_overhead.py (per-call host overhead vs SDPA flash
# and cuDNN) and bench/bench_llama_step.py (training step, flashmlir vs
# sdpa); --quick there skips the Llama step.
# Everything lands in $OUT (default ./out): nvidia-smi.txt, kernels.txt,
# pytest.log, bench.log, bench.json, bench.png (overhead.json, llama.json
# with --pytorch). Needs no network or installs.
# Time limits keep the whole run under 9 minutes (the bench gets what the
# tests leave, at least 60 s; use --tests-only / --bench-only for full runs).
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export PYTHONDONTWRITEBYTECODE=1
export FLASHMLIR_NO_COMPILE=${FLASHMLIR_NO_COMPILE:-1}   # no fa-compile on that machine
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PYTHON:-python3}

run_tests=1
run_bench=1
quick=0
pytorch=0
bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tests-only) run_bench=0 ;;
    --bench-only) run_tests=0 ;;
    --quick) quick=1 ;;
    --pytorch) pytorch=1 ;;
    --) shift; bench_args=("$@"); break ;;
    *) echo "device-run: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }

{
  echo "== $(date -u +%FT%TZ) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,power.limit --format=csv
  nvidia-smi -L
  "$PY" -c 'import sys, torch, triton; print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda", torch.version.cuda, "| triton", triton.__version__, "| device", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))'
} 2>&1 | tee "$OUT/nvidia-smi.txt"

"$PY" -m flashmlir check > "$OUT/kernels.txt" 2>&1
echo "== kernels: $(grep -c '^  ok ' "$OUT/kernels.txt") checked ok (list in kernels.txt)"
sed -n '1,/kernel(s):/p' "$OUT/kernels.txt"
grep -E 'FAIL|INVALID' "$OUT/kernels.txt" || true

rc=0
if [ $pytorch -eq 1 ]; then
  popts=(-q -rs -p no:cacheprovider --durations=10)
  {
    echo "== pytest: launch path + torch.compile + transformers [$(elapsed) s]"
    timeout -k 10 330 "$PY" -m pytest -x "${popts[@]}" \
      python/tests/test_cuda_fake.py python/tests/test_backward_fake.py \
      python/tests/test_interface_fake.py python/tests/test_gpu_launch.py \
      python/tests/test_gpu_compile.py python/tests/test_gpu_transformers.py
  } 2>&1 | tee "$OUT/pytest.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  {
    echo "== bench_overhead [$(elapsed) s]"
    timeout -k 10 120 "$PY" bench/bench_overhead.py --json "$OUT/overhead.json"
    if [ $quick -eq 0 ]; then
      echo "== bench_llama_step [$(elapsed) s]"
      timeout -k 10 150 "$PY" bench/bench_llama_step.py --json "$OUT/llama.json"
    fi
  } 2>&1 | tee "$OUT/bench.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  run_tests=0
  run_bench=0
fi

if [ $run_tests -eq 1 ]; then
  popts=(-q -rs -p no:cacheprovider --durations=15)
  if "$PY" -c 'import pytest_timeout' 2>/dev/null; then popts+=(--timeout=180); fi
  glogs=$(mktemp -d)
  # group NAME TIMEOUT FILES...: one pytest run; its summary line goes to $glogs/summary
  group() {
    local name=$1 limit=$2
    shift 2
    echo "== pytest: $name [$(elapsed) s]"
    timeout -k 10 "$limit" "$PY" -m pytest -x "${popts[@]}" "$@" 2>&1 | tee "$glogs/$name.log"
    local r=${PIPESTATUS[0]}
    local line
    line=$(grep -E '[0-9]+ (passed|failed|skipped|errors?|deselected)' "$glogs/$name.log" \
           | tail -n 1 | tr -d '=' | sed 's/^ *//; s/ *$//')
    [ $r -eq 124 ] || [ $r -eq 137 ] && line="TIMED OUT after ${limit} s; ${line}"
    echo "$name rc=$r: ${line:-no pytest summary}" >> "$glogs/summary"
    return $r
  }
  {
    group launch 160 \
      python/tests/test_expr.py python/tests/test_manifest.py python/tests/test_pack.py \
      python/tests/test_cuda_fake.py python/tests/test_backward_fake.py \
      python/tests/test_select.py python/tests/test_validate.py python/tests/test_gpu_launch.py \
      python/tests/test_interface_fake.py python/tests/test_gpu_compile.py \
      python/tests/test_gpu_transformers.py
    r1=$?
    group attention 200 python/tests/test_gpu_attention.py
    r2=$?
    group backward 200 python/tests/test_gpu_backward.py
    r3=$?
    echo "== pytest summary [$(elapsed) s]:"
    sed 's/^/   /' "$glogs/summary"
    [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ $r3 -eq 0 ]
  } 2>&1 | tee "$OUT/pytest.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  rm -rf "$glogs"
fi

if [ $run_bench -eq 1 ]; then
  left=$(( 530 - $(elapsed) ))
  [ $left -lt 60 ] && left=60
  flex_budget=$(( left / 3 ))
  extra=()
  if [ $quick -eq 1 ]; then extra=(--seqlens 1024 4096 16384 --no-flex); fi
  echo "== bench (limit ${left} s, flex budget ${flex_budget} s) [$(elapsed) s]"
  timeout -k 10 "$left" "$PY" bench/bench_attention.py --out "$OUT" \
      --flex-budget-s "$flex_budget" --time-budget-s $(( left - 45 )) \
      "${extra[@]}" "${bench_args[@]}" 2>&1 | tee "$OUT/bench.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
fi

echo "== device-run done in $(elapsed) s, rc=$rc; files in $OUT:"
ls -la "$OUT"
exit $rc
