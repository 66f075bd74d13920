#!/usr/bin/env bash
# The main job on the built-in example: compiles examples/attention.mlir (a
# causal GQA bf16 attention layer with a dynamic sequence length, forward and
# backward) through FlashMLIR's deepest pipeline, and prints a short view of
# the IR after each stage.
#
#   bash scripts/demo.sh [input.mlir]      (default: examples/attention.mlir)
#
# Stages: verify the input -> fa-tiled-attention (every pass of it: tile the
# forward and the backward, specialize masks, exp2, decompose the tile ops)
# -> fa-cpu-to-llvm (bufferize and lower to the LLVM dialect for the host)
# -> fa-compile (fa-gpu-forward: the GPU kernel as PTX + a JSON manifest).
# Every stage must succeed and leave what it should: any failure stops the
# demo with a non-zero exit status. The full IR of each stage is kept in
# $FA_DEMO_OUT (default: a temporary directory, removed at the end).
# Assumes scripts/setup.sh has built ./build (or $FA_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FA_BUILD_DIR:-build}
FA_OPT=$BUILD_DIR/bin/fa-opt
INPUT=${1:-examples/attention.mlir}

if [ ! -x "$FA_OPT" ]; then
  echo "demo: $FA_OPT not found; run scripts/setup.sh first" >&2
  exit 1
fi
if [ -n "${FA_DEMO_OUT:-}" ]; then
  OUT=$FA_DEMO_OUT
  mkdir -p "$OUT"
else
  OUT=$(mktemp -d "${TMPDIR:-/tmp}/fa-demo.XXXXXX")
  trap 'rm -rf "$OUT"' EXIT
fi

fail() {
  echo "demo: FAILED: $*" >&2
  exit 1
}

# Runs fa-opt with the given flags; stops the demo if it fails.
run_fa_opt() {
  local log=$OUT/fa-opt.log
  if ! "$FA_OPT" "$@" 2>"$log"; then
    cat "$log" >&2
    fail "fa-opt $*"
  fi
}

# The ops of a stage, by count (most frequent first).
op_histogram() {
  grep -oE '(^|= )[a-z_]+\.[a-z_.0-9]+' "$1" | sed 's/^= //' | sort |
    uniq -c | sort -rn | head -n "${2:-12}" |
    awk '{ printf "      %5d  %s\n", $1, $2 }'
}

# The loop structure and the attention math of a stage, without types; the
# fa ops without their operands, to show their attributes.
skeleton() {
  grep -E 'func\.func|scf\.forall \(|scf\.for |fa\.[a-z_]+ |linalg\.matmul|math\.exp' "$1" |
    sed -E 's/ (iter_args|shared_outs|ins|outs)\(.*//; s/ : .*//; s/ \{[^}]*\}?$//' |
    sed -E '/ fa\./ { s/^( *)[^=]*= /\1/; s/%[A-Za-z0-9_#]+/%/g;
                      s/\(%(, %)*\)/(...)/g; s/ %(, %)*/ .../g; }' |
    cut -c1-110 | head -n "${2:-40}"
}

stage() {
  echo
  echo "== $*"
}

# 1. The input: parse and verify.
stage "1. input: $INPUT"
run_fa_opt "$INPUT" -o "$OUT/0-input.mlir"
skeleton "$OUT/0-input.mlir"
grep -q 'fa\.attention ' "$OUT/0-input.mlir" || fail "no fa.attention in $INPUT"

# 2. The FlashAttention passes, one dump per pass of the registered pipeline.
run_fa_opt "$OUT/0-input.mlir" --fa-tiled-attention \
  --mlir-print-ir-after-all --mlir-disable-threading -o "$OUT/tiled.mlir"
awk -v out="$OUT" '
  /^\/\/ -----\/\/ IR Dump After / {
    n++; name = $0
    sub(/.*\(/, "", name); sub(/\).*/, "", name)
    file = sprintf("%s/%d-%s.mlir", out, n, name)
    print file > (out "/passes.txt")
    next
  }
  file { print > file }' "$OUT/fa-opt.log"
[ -s "$OUT/passes.txt" ] || fail "fa-tiled-attention printed no IR dump"

while read -r dump; do
  pass=$(basename "$dump" .mlir)
  pass=${pass#*-}
  case $pass in
    fa-tile-attention | fa-tile-attention-backward | fa-specialize-masks | \
    fa-use-exp2)
      stage "2. fa-tiled-attention: after $pass"
      skeleton "$dump" 24
      ;;
    *)
      stage "2. fa-tiled-attention: after $pass"
      op_histogram "$dump" 6
      ;;
  esac
done <"$OUT/passes.txt"

stage "2. fa-tiled-attention: result ($(wc -l <"$OUT/tiled.mlir") lines)"
op_histogram "$OUT/tiled.mlir"
if grep -qE '(^|= )fa\.' "$OUT/tiled.mlir"; then
  grep -nE '(^|= )fa\.' "$OUT/tiled.mlir" | head -5 >&2
  fail "fa ops left after fa-tiled-attention"
fi
grep -q 'scf\.forall' "$OUT/tiled.mlir" || fail "no parallel loop after tiling"

# 3. Host code: bufferize and lower to the LLVM dialect.
stage "3. fa-cpu-to-llvm: the tiled code lowered to the LLVM dialect"
run_fa_opt "$OUT/tiled.mlir" --fa-cpu-to-llvm -o "$OUT/llvm.mlir"
echo "      $(wc -l <"$OUT/llvm.mlir") lines; ops by count:"
op_histogram "$OUT/llvm.mlir" 8
leftover=$(grep -oE '(^|= )[a-z_]+\.[a-z_.0-9]+' "$OUT/llvm.mlir" |
  sed 's/^= //' | grep -vE '^(llvm|builtin)\.' | sort -u | head -5 || true)
[ -z "$leftover" ] || fail "non-LLVM ops left after fa-cpu-to-llvm: $leftover"

# 4. The GPU kernel: the same forward through fa-gpu-forward to PTX, with
# the JSON manifest a runtime needs to launch it.
FA_COMPILE=$BUILD_DIR/bin/fa-compile
PTXAS=${PTXAS:-/usr/local/cuda/bin/ptxas}
# sm_90a: warpgroup MMAs on swizzled shared-memory tiles fed by TMA and
# mbarriers, the producer's tiles from an atomic counter (the dynamic tile
# scheduler), register reallocation between the roles; sm_80: mma.sync fed
# by ldmatrix and cp.async. Both: ex2.approx, quad shuffles.
for chip in sm_90a sm_80; do
  case $chip in
    sm_90a) insns="wgmma.mma_async cp.async.bulk.tensor mbarrier atom.global setmaxnreg ex2.approx shfl.sync" ;;
    sm_80) insns="mma.sync.aligned.m16n8k16 ldmatrix cp.async.cg ex2.approx shfl.sync" ;;
  esac
  stage "4. fa-compile: causal bf16 D=128 forward -> PTX ($chip) + manifest"
  if ! "$FA_COMPILE" --kind=forward --head-dim=128 --dtype=bf16 --causal \
      --chip=$chip -o "$OUT/kernels-$chip" >"$OUT/fa-compile-$chip.log" 2>&1; then
    cat "$OUT/fa-compile-$chip.log" >&2
    fail "fa-compile --chip=$chip"
  fi
  ptx=$(ls "$OUT"/kernels-$chip/*.ptx)
  manifest=${ptx%.ptx}.json
  echo "      $(basename "$ptx"): $(wc -l <"$ptx") lines of PTX"
  for insn in $insns; do
    n=$(grep -c "$insn" "$ptx" || true)
    [ "$n" -gt 0 ] || fail "no $insn in the $chip PTX"
    printf '      %5d  %s\n' "$n" "$insn"
  done
  python3 - "$manifest" <<'EOF2'
import json, sys
m = json.load(open(sys.argv[1]))
# One launch, or (a workspace, e.g. the dynamic scheduler's tile counter)
# the 'kernels' form.
for k in m.get("kernels", [m]):
    print(f"      entry {k['entry']} ({m['mma']}, {m['block_q']} x {m['block_kv']} tiles, "
          f"{m['warps']} warps, {m.get('tile_scheduler', 'grid')} tile scheduler): "
          f"grid {k['grid']}, block {k['block']}, "
          f"{k['dynamic_shared_memory']} B dynamic shared memory, "
          f"{len(k['params'])} parameters ({', '.join(p['name'] + ('' if p['type'] == 'memref' else ': ' + p['type']) for p in k['params'])})")
for w in m.get("workspace", []):
    print(f"      workspace {w['name']}: {w['dtype']} {w['dims']}"
          + (" (zeroed by the launcher)" if w.get("init") == "zero" else ""))
EOF2
  if [ -x "$PTXAS" ]; then
    "$PTXAS" -arch=$chip -v "$ptx" -o /dev/null 2>&1 | grep -E 'registers|spill' |
      sed 's/^/      /'
  fi
done

echo
echo "demo: OK (${FA_DEMO_OUT:+IR of every stage in $OUT}${FA_DEMO_OUT:-set FA_DEMO_OUT=<dir> to keep the IR of every stage})"
