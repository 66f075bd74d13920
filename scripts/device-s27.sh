#!/bin/bash
# Where the bars stand with the twenty-sixth session's defaults, in one run
# (all measurement, no candidate kernels): the forward and backward beside
# SDPA's cuDNN / FA2 back ends and FlexAttention (issues 12, 16), the head
# dims of issue 10's two backward misses (causal D = 192, non-causal D =
# 256, against FA2), ncu of GQA 4 causal against MHA, the Llama step (issue
# 17). Carry KERNELS (default
# build/kernels-ord.tar.xz: `python3 -m flashmlir compile --kind all --form
# all` on main, tarred as kernels/) and the launcher. Each item is guarded
# by the time left (LIMIT); the whole log goes to $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-ord.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== check_backward at $(elapsed) s"
timeout 60 $PY bench/check_backward.py 2>&1 | grep -v execution_engine | tail -1
if [ $(left) -gt 200 ]; then
  echo "== bench_attention bwd D = 64 / 128 at $(elapsed) s"
  timeout 170 $PY bench/bench_attention.py --out "$OUT" --name bwd --direction bwd \
    --headdims 64 128 --seqlens 1024 2048 8192 16384 --rep 60 --time-budget-s 150 2>&1 | tail -22
fi
if [ $(left) -gt 150 ]; then
  echo "== bench_attention fwd D = 64 / 128 at $(elapsed) s"
  timeout 120 $PY bench/bench_attention.py --out "$OUT" --name fwd --direction fwd \
    --headdims 64 128 --seqlens 1024 2048 8192 16384 --rep 60 --time-budget-s 100 2>&1 | tail -22
fi
if [ $(left) -gt 110 ]; then
  echo "== bench_attention bwd D = 96 / 192 / 256 (against FA2) at $(elapsed) s"
  timeout 90 $PY bench/bench_attention.py --out "$OUT" --name bwd-headdims --direction bwd \
    --headdims 96 192 256 --seqlens 2048 8192 --no-flex --rep 40 --time-budget-s 80 2>&1 | tail -16
fi
if [ $(left) -gt 90 ]; then
  # GQA 4 causal stays 12-13% slower than MHA at 2k with either loop order:
  # memory (DRAM bytes, L2 hits) or the dQ reductions?
  for kvh in 16 4; do ncu_key_block $kvh; done
fi
if [ $(left) -gt 60 ]; then
  echo "== Llama step at $(elapsed) s"
  timeout $(( $(left) - 10 )) $PY bench/bench_llama_step.py --layers 4 --tokens 8192 --steps 6 \
    --rounds 2 2>&1 | tail -4
fi
echo "== done at $(elapsed) s"
