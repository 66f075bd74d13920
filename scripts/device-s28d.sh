#!/bin/bash
# Owed after the twenty-eighth session, in one call: every GPU suite on
# main's final set (KERNELS, build/kernels-s28b.tar.xz: `python3 -m
# flashmlir compile --kind all --form all` on main, tarred as kernels/),
# then the forward and backward beside SDPA's cuDNN / FA2 back ends and
# FlexAttention (issues 12, 16), each item guarded by the time left
# (LIMIT). The whole log goes to $OUT/log.txt.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
unpack_kernels build/kernels "${KERNELS:-build/kernels-s28b.tar.xz}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu_suites 200
[ $(left) -gt 180 ] && bench_beside fwd fwd 150 --headdims 64 128 \
  --seqlens 1024 2048 8192 16384 --rep 60
[ $(left) -gt 170 ] && bench_beside bwd bwd 160 --headdims 64 128 \
  --seqlens 1024 2048 8192 16384 --rep 60
echo "== done at $(elapsed) s"
