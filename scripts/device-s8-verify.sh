#!/bin/bash
# H200, eighth session: one verification batch. Carry build/kernels.tar.xz
# (the set of `python3 -m flashmlir compile`, 252 kernels) and
# build/mixed.tar.xz (build/kernels with the sm_90a D != Dv (64/128, 128/64)
# forwards rebuilt with `fa-compile --tile-scheduler=persistent`, softcap
# ones added). Runs, in this order:
#   1. check-manifests on both folders (the format; ptxas ran on the CPU side);
#   2. test_gpu_attention.py on build/kernels (regression: forward tiling
#      refactor);
#   3. test_gpu_decode.py with FLASHMLIR_CHIP=sm_80 (the sm_80 split-KV
#      kernels on the H200), FLASHMLIR_REQUIRE_KERNELS=1;
#   4. test_gpu_head_dims.py, the 64/128 D != Dv cases, on build/mixed, and
#      memcheck / racecheck on two of its forward cases (FLASHMLIR_SMS=2, so
#      the persistent blocks loop over the tiles);
#   5. bench/bench_decode.py (default arguments), --json $OUT/decode.json;
#   6. if time is left: test_gpu_decode.py on the sm_90a kernels.
# S8_ONLY=mixed runs steps 1 and 4 alone. Logs in $OUT; a summary is
# printed last.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/mixed ] || tar -xJf build/mixed.tar.xz -C build
T=python/tests
S=$OUT/summary.txt
: > "$S"
say() { echo "$*" | tee -a "$S"; }
say "$(nvidia-smi -L) | torch $($PY -c 'import torch; print(torch.__version__)')"
rc=0
# At most 8 files come back from $OUT: the logs go into one tar.
finish() {
  say "== done in $(elapsed) s, rc=$rc${only:+ (S8_ONLY=$only)}"
  (cd "$OUT" && tar -czf logs.tar.gz --exclude=summary.txt ./*.log ./*.txt && rm -f ./*.log manifests-*.txt)
  echo; echo "===== summary"; cat "$S"
  exit $rc
}

for d in kernels mixed; do
  $PY test/Tools/check-manifests.py build/$d > "$OUT/manifests-$d.txt" 2>&1
  r=$?
  say "check-manifests build/$d rc=$r: $(grep -c ' ok ' "$OUT/manifests-$d.txt") ok; $(grep -m1 '^error' "$OUT/manifests-$d.txt")"
  [ $r -eq 0 ] || rc=1
done

# pytest NAME LIMIT [ENV=VALUE...] -- ARGS...
group() {
  local name=$1 limit=$2
  shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "== pytest $name [$(elapsed) s]"
  env "${envs[@]}" timeout -k 10 "$limit" $PY -m pytest -q -rs -p no:cacheprovider \
    --durations=3 "$@" > "$OUT/pytest-$name.log" 2>&1
  local r=$?
  local line
  line=$(grep -E '[0-9]+ (passed|failed|skipped|deselected|errors?)' "$OUT/pytest-$name.log" | tail -n 1 | tr -d '=')
  { [ $r -eq 124 ] || [ $r -eq 137 ]; } && line="TIMED OUT after $limit s; $line"
  say "pytest $name rc=$r:$line"
  grep -E '^(FAILED|ERROR)' "$OUT/pytest-$name.log" | head -10 | tee -a "$S"
  [ $r -eq 0 ] || rc=1
}

K=FLASHMLIR_KERNEL_DIR=$PWD/build/kernels
M=FLASHMLIR_KERNEL_DIR=$PWD/build/mixed
R=FLASHMLIR_REQUIRE_KERNELS=1
# pytest ids of the (d, dv) and (nq, nk) parameters: "128-64", "113-1000".
MIXED_K="128-64 or 64-128"

# S8_ONLY=mixed: only the head-dim matrix and the sanitizers (steps 1, 4).
only=${S8_ONLY:-}
[ -z "$only" ] && group attention 120 $K $R -- $T/test_gpu_attention.py
[ -z "$only" ] && group decode_sm80 150 $K $R FLASHMLIR_CHIP=sm_80 -- $T/test_gpu_decode.py

# Which kernels served: the sm_80 split kernel for a decode call, the
# persistent D != Dv forwards of the overlay.
probe() {
  env "$@" $PY - <<'EOF' 2>&1 | tee -a "$S"
import json, os, torch
from flashmlir import _interface as I
def mk(b, hq, hkv, nq, nk, d, dv):
    g = lambda h, n, e: torch.randn(b, h, n, e, device="cuda", dtype=torch.bfloat16)
    return g(hq, nq, d), g(hkv, nk, d), g(hkv, nk, dv)
def sched(spec):
    j = os.path.splitext(spec.ptx_path)[0] + ".json"
    return json.load(open(j)).get("tile_scheduler"), os.path.basename(os.path.dirname(j))
if os.environ.get("FLASHMLIR_CHIP"):
    p = I._forward_plan(*mk(8, 32, 8, 1, 16384, 128, 128), False, None, None, None, "bhsd", False)
    s = p.split.spec if p.split else None
    print("probe decode chip=%s: %s" % (os.environ["FLASHMLIR_CHIP"], s and (s.name, s.chip)))
else:
    for d, dv in ((128, 64), (64, 128)):
        p = I._forward_plan(*mk(2, 4, 2, 1000, 1000, d, dv), False, None, None, None, "bhsd", False)
        sp = p.launch.kernel.spec
        print("probe mixed D=%d Dv=%d: %s %s scheduler=%s dir=%s" % ((d, dv, sp.name, sp.chip) + sched(sp)))
EOF
}
[ -z "$only" ] && probe $K FLASHMLIR_CHIP=sm_80
probe $M

group head_dims_mixed 150 $M $R -- $T/test_gpu_head_dims.py -k "$MIXED_K"
echo "== sanitizers [$(elapsed) s]"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
case_k="test_forward and bf16 and full and 113-1000 and ($MIXED_K)"
for tool in memcheck racecheck; do
  extra=()
  [ $tool = memcheck ] && extra=(--leak-check no)
  env $M $R FLASHMLIR_SMS=2 timeout -k 10 120 "$CS" --tool $tool "${extra[@]}" \
    --error-exitcode 99 --print-limit 20 $PY -m pytest -q -p no:cacheprovider \
    $T/test_gpu_head_dims.py -k "$case_k" > "$OUT/sanitize-$tool.log" 2>&1
  r=$?
  say "sanitize $tool rc=$r: $(grep -E 'passed|failed|ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$tool.log" | tr -d '=' | tr '\n' ' ')"
  [ $r -eq 0 ] || rc=1
done

[ -n "$only" ] && finish
echo "== bench_decode [$(elapsed) s]"
env $K timeout 150 $PY bench/bench_decode.py --json $OUT/decode.json > "$OUT/bench-decode.log" 2>&1
r=$?
say "bench_decode rc=$r [$(elapsed) s]"
grep -E '^Nq=' "$OUT/bench-decode.log" | tee -a "$S"
[ $r -eq 0 ] || { tail -5 "$OUT/bench-decode.log"; rc=1; }

if [ "$(elapsed)" -lt 330 ]; then
  group decode_sm90a 90 $K $R -- $T/test_gpu_decode.py
else
  say "decode_sm90a skipped (elapsed $(elapsed) s)"
fi
finish
