#!/bin/bash
# Where the bars stand with the twenty-seventh session's defaults, in one
# run (all measurement, no candidate kernels): check_backward, the backward
# and forward beside SDPA's cuDNN / FA2 back ends and FlexAttention
# (issues 12, 16), ncu of GQA 4 causal against MHA, the Llama step (issue
# 17). Carry KERNELS (default build/kernels-g4.tar.xz: `python3 -m
# flashmlir compile --kind all --form all` on main, tarred as kernels/)
# and the launcher. Each item is guarded by the time left (LIMIT); the
# whole log goes to $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-g4.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
check_backward
[ $(left) -gt 200 ] && bench_beside bwd bwd 170 --headdims 64 128 \
  --seqlens 1024 2048 8192 16384 --rep 60
[ $(left) -gt 150 ] && bench_beside fwd fwd 120 --headdims 64 128 \
  --seqlens 1024 2048 8192 16384 --rep 60
[ $(left) -gt 90 ] && for kvh in 16 4; do ncu_key_block $kvh; done
if [ $(left) -gt 60 ]; then
  echo "== Llama step at $(elapsed) s"
  timeout $(( $(left) - 10 )) $PY bench/bench_llama_step.py --layers 4 --tokens 8192 --steps 6 \
    --rounds 2 2>&1 | tail -4
fi
echo "== done at $(elapsed) s"
