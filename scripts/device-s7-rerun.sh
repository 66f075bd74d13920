#!/bin/bash
# H200, seventh session: a third decode run (the 16k / 64k cells were
# borderline) and the Llama training step on the new default set. Carry
# build/kernels.tar.xz.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
export FLASHMLIR_KERNEL_DIR=$PWD/build/kernels
timeout 100 $PY bench/bench_decode.py --json $OUT/decode.json 2>&1 | grep Nq=
echo "decode $(elapsed)"
timeout -k 10 150 $PY bench/bench_llama_step.py --json "$OUT/llama.json" > "$OUT/llama.log" 2>&1
tail -15 "$OUT/llama.log"
echo "llama $(elapsed)"
