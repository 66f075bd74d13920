#!/bin/bash
# Twenty-eighth session, run 3: the forward beside SDPA's cuDNN / FA2 back
# ends and FlexAttention (issue 12's bar) with main's final set (KERNELS,
# build/kernels-s28b.tar.xz: the D = 64 causal forward's per-warpgroup key
# bounds and the split GQA backward). The whole log goes to $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-s28b.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
bench_beside fwd fwd ${SECS:-110} --headdims ${HEADDIMS:-64} --seqlens 1024 2048 8192 16384 --rep 40
echo "== done at $(elapsed) s"
