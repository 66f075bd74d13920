#!/bin/bash
# H200, seventh session: the head-dim matrix's D != Dv pairs at 64/128 (their
# non-causal forwards became persistent kernels in the default set). Carry
# build/kernels.tar.xz.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
FLASHMLIR_KERNEL_DIR=$PWD/build/kernels FLASHMLIR_REQUIRE_KERNELS=1 timeout 90 $PY -m pytest -q \
  -p no:cacheprovider python/tests/test_gpu_head_dims.py -k "128x64 or 64x128 or 128-64 or 64-128" 2>&1 | tail -2
echo "done $(elapsed)"
